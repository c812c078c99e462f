"""Exercise 03: a stable idempotency key, a dedupe table for a provider without keys,
the window that remains, and a workflow that refunds exactly once through every crash.

The provider is the simulated `careless` one: it ignores idempotency keys and pays on
every call, and its ledger lives in its own SQLite file, so counting refunds there is
counting what a real bank would have paid out. The provider has always paid other refunds
before, and every answer must name a refund the provider recorded.

The properties a right answer has, each judged by the test that names it, and how the cases
vary it (tests/test_grading_properties_01_07.py has, for each, an answer wrong in that
property alone, and it fails):

q1 refund_key(run_id, order_id)  (drawn ids)
  - a non-empty string of at most 255 characters;
  - the same for the same inputs, called again and a day later (time.time patched);
  - the same in a fresh process with another hash seed whose wall clock reads 2 to 30 days
    later (wall_clock.py moves time.time, time.strftime, datetime.now, date.today...): a
    key made with hash(), uuid4(), random, the clock or the date fails;
  - different for another run or another order;
  - different for pairs that look alike when joined, with every common separator.
q2 refund_once(db, provider, key, order_id, amount)  (drawn order, amount and keys)
  - a first call pays once and returns the provider's own answer;
  - the same key again returns the recorded answer and pays nothing;
  - different keys are different refunds;
  - a restart (two fresh processes, one after the other) does not pay twice;
  - a provider call that fails (an error, a crash before the call) records nothing;
  - the key lives in the sent table, committed.
q3 window  (each moment measured on the learner's own refund_once)
  - before_call, after_call, after_record: the refunds a retry leaves, as numbers.
q4 keyed_refund(ctx, folder, db_path, order_id, amount)  (drawn order, amount, run ids)
  - no crash: one refund, the steps 'lookup' and 'refund', and the result names it;
  - a crash at each of the 6 crash points, resumed an hour later: exactly one refund and
    the uncrashed run's result (the sweep);
  - killed (SIGKILL) right after the refund was paid and resumed in another process whose
    wall clock reads 2 to 30 days later: still one refund (a key from the clock or the date,
    which the same-second sweep cannot see, fails here);
  - two runs for the same order are two refunds (a key without the run id fails).
"""

import os
import sqlite3
import time
from unittest import mock

from ...errors import Crash
from .. import wall_clock
from ..checks import Exercise, Fail, NotAttempted
from ..child import run_fresh, write_module
from ..harness import (EngineRuns, crash_label, needs_callable, needs_workflow, scratch,
                       step_names, sweep_of, unfinished)
from ..ledgers import Ledgers
from ..plain import plain
from ..portable import NotPortable, module_source

EXERCISE = Exercise("03_idempotency", "Keys, a dedupe table, and the window",
                    lesson="notebooks/03_the_window_and_idempotency.ipynb")


def _portable(*fns, extra="", call_as=None):
    try:
        return module_source(*fns, extra=extra, call_as=call_as)
    except NotPortable as exc:
        raise Fail(str(exc)) from None


def _child_failed(run, what):
    if run.error and "NotImplementedError" in run.error:
        raise NotAttempted(f"{what}: your code still raises NotImplementedError")
    raise Fail(f"{what} failed: {run.error or f'exit status {run.returncode}'}",
               "the check copies your function, and the functions and imports it uses, into a "
               "new process; keep what it needs in those functions")


def _paid_before(world, draw):
    """The provider has paid a few other refunds already, so the next one is not "R-1"."""
    for _ in range(draw.randint(1, 4)):
        world.careless.refund(draw.order_id(), draw.amount())


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "a stable idempotency key", answers=["refund_key"])


def _key(refund_key, run_id, order_id):
    needs_callable(refund_key, "refund_key")
    key = plain(refund_key(run_id, order_id), f"refund_key({run_id!r}, {order_id!r})")
    if key is None:
        raise Fail(f"refund_key({run_id!r}, {order_id!r}) returned None",
                   "return the key (a string); a function without a `return` line returns None")
    return key


@q1.test("returns a non-empty string of at most 255 characters",
         hint="providers take keys as short strings: a hash's hex digest fits well")
def _(refund_key, draw):
    key = _key(refund_key, draw.run_id("refund"), draw.order_id())
    if not isinstance(key, str) or not key:
        raise Fail(f"refund_key returned {key!r}; expected a non-empty string")
    if len(key) > 255:
        raise Fail(f"the key is {len(key)} characters long; providers accept at most 255")


@q1.test("the same run and order give the same key, even a day later",
         hint="build the key only from inputs that are the same on every attempt: the run id "
              "and the order, never the clock")
def _(refund_key, draw):
    run_id, order_id = draw.run_id("refund"), draw.order_id()
    first = _key(refund_key, run_id, order_id)
    later = time.time() + 86400
    with mock.patch("time.time", return_value=later), \
            mock.patch("time.time_ns", return_value=int(later * 1e9)):
        next_day = _key(refund_key, run_id, order_id)
    again = _key(refund_key, run_id, order_id)
    if not (first == next_day == again):
        raise Fail(f"three calls with the same run and order gave {first!r}, {next_day!r} "
                   f"(a day later) and {again!r}; a retry would not be recognised as a repeat")


@q1.test("a fresh Python process, days later by its clock, computes the same key",
         hint="the key may depend on the two arguments only: Python's hash() of a string "
              "changes from process to process, uuid4() and random on every call, the clock "
              "and the date from one attempt to the next")
def _(refund_key, draw):
    run_id, order_id = draw.run_id("refund"), draw.order_id()
    here = _key(refund_key, run_id, order_id)
    ahead = draw.randint(2, 30) * 86400 + draw.randint(1, 86399)
    with scratch("ex03") as folder:
        write_module(folder, wall_clock.prelude() +
                     _portable(refund_key, call_as={"refund_key": refund_key}))
        there = run_fresh(folder, "refund_key", run_id, order_id,
                          env={"PYTHONHASHSEED": str(draw.randint(1, 9999)),
                               **wall_clock.environment(ahead)})
        if not there.finished:
            _child_failed(there, "refund_key in a fresh process")
    if there.result != here:
        raise Fail(f"this kernel computed {here!r}; a fresh process whose clock read "
                   f"{ahead / 86400:.1f} days later computed {there.result!r}: after a restart "
                   "the next day the provider would see a new key and pay again")


@q1.test("another run, or another order in the same run, gets another key",
         hint="put both the run id and the order id into what you hash")
def _(refund_key, draw):
    run_a, run_b = draw.distinct(lambda: draw.run_id("refund"), 2)
    order_a, order_b = draw.distinct(draw.order_id, 2)
    pairs = [(run_a, order_a), (run_b, order_a), (run_a, order_b)]
    keys = {pair: _key(refund_key, *pair) for pair in pairs}
    if len(set(keys.values())) != len(pairs):
        raise Fail(f"keys for (run, order) pairs: {keys}; each pair needs its own key, or "
                   "a second refund request would be taken for a repeat of the first")


@q1.test("run and order ids that look alike joined together (('k1', '2') and ('k', '12'); "
         "('k-x', 'y') and ('k', 'x-y')) get different keys",
         hint="join the two values so that no pair of ids can produce the same text: a JSON "
              "list of the two does, a separator that ids may contain does not")
def _(refund_key, draw):
    for one, other in draw.lookalike_pairs():
        if _key(refund_key, *one) == _key(refund_key, *other):
            raise Fail(f"refund_key{one} and refund_key{other} collide: both give "
                       f"{_key(refund_key, *one)!r}, so the provider would take the second "
                       "refund for a repeat of the first and never pay it")


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "a dedupe table for a provider without keys",
                       answers=["refund_once", "open_sent"])


class Provider:
    """The careless provider, or a version of it that fails once before or after paying.
    It remembers every answer it gave, so a check can compare what refund_once returns."""

    def __init__(self, real, fail=None):
        self.real, self.fail, self.calls, self.answers = real, fail, 0, []

    def refund(self, order_id, amount, idempotency_key=None):
        self.calls += 1
        if self.fail == "before" and self.calls == 1:
            raise Crash("the process died before the provider was called")
        if self.fail == "error" and self.calls == 1:
            raise ConnectionError("the provider did not answer (nothing was paid)")
        result = self.real.refund(order_id, amount)
        self.answers.append(result)
        if self.fail == "after" and self.calls == 1:
            raise Crash("the process died after the provider paid, before the table recorded it")
        return result


class Bench:
    """A world whose provider has paid before, a dedupe file and the learner's two functions."""

    def __init__(self, folder, refund_once, open_sent, draw):
        needs_callable(refund_once, "refund_once")
        needs_callable(open_sent, "open_sent")
        self.folder, self.refund_once, self.open_sent, self.draw = folder, refund_once, open_sent, draw
        self.path = os.path.join(folder, "sent.db")
        self.world_folder = os.path.join(folder, "world")
        self.careless = Ledgers(self.world_folder).world.careless
        _paid_before(Ledgers(self.world_folder).world, draw)
        self.order_id, self.amount = draw.order_id(), draw.amount()

    def open(self):
        db = self.open_sent(self.path)
        if not isinstance(db, sqlite3.Connection):
            raise Fail(f"open_sent returned a {type(db).__name__}, not a sqlite3 connection",
                       "keep open_sent as it was given")
        return db

    def call(self, key, fail=None, db=None, provider=None):
        db = db or self.open()
        provider = provider or Provider(self.careless, fail)
        try:
            answer = self.refund_once(db, provider, key, self.order_id, self.amount)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            raise Fail(f"the sent table is locked ({exc}): an earlier connection wrote to it "
                       "and never committed, so nobody else can write, and a crash would "
                       "lose that row", "call db.commit() right after the INSERT") from None
        return plain(answer, "refund_once(db, provider, key, order_id, amount)")

    def restart_and_call(self, key, **kw):
        """As after a crash: a new connection (the old one died with the process)."""
        db = self.open()
        try:
            return self.call(key, db=db, **kw)
        finally:
            db.close()

    @property
    def refunds(self):
        """The refunds the careless provider recorded, read from its file."""
        return sum(r["provider"] == "careless" for r in Ledgers(self.world_folder).refunds())

    def expect_providers_answer(self, got, provider, what):
        """`got` must be the answer the provider gave, for a refund its ledger recorded."""
        if not provider.answers:
            raise Fail(f"{what}: the provider was never asked to pay",
                       "pay through the provider passed in: provider.refund(order_id, amount)")
        answer = provider.answers[0]
        if got != answer:
            raise Fail(f"{what}: refund_once returned {got!r}, but the provider answered "
                       f"{answer!r}", "return the provider's answer itself (and the same "
                                      "answer, read back from the table, on a repeat)")
        Ledgers(self.world_folder).expect_refund(got["refund_id"], self.order_id, self.amount,
                                                 what=f"{what}, the answer")


@q2.test("the first call pays once and returns the provider's answer",
         hint="no row for the key: call provider.refund(order_id, amount), record, return its answer")
def _(refund_once, open_sent, draw):
    with scratch("ex03") as folder:
        bench = Bench(folder, refund_once, open_sent, draw)
        before, provider = bench.refunds, Provider(bench.careless)
        got = bench.call(draw.run_id("key"), provider=provider)
        paid = bench.refunds - before
        if paid != 1:
            raise Fail(f"the provider paid {paid} times; expected once",
                       "pay through the provider passed in: provider.refund(order_id, amount)"
                       if paid == 0 else "")
        bench.expect_providers_answer(got, provider, "the first call")


@q2.test("the same key again returns the recorded answer and does not pay again",
         hint="look the key up in the sent table before calling the provider")
def _(refund_once, open_sent, draw):
    with scratch("ex03") as folder:
        bench = Bench(folder, refund_once, open_sent, draw)
        key, before, provider = draw.run_id("key"), bench.refunds, Provider(bench.careless)
        db = bench.open()
        first = bench.call(key, db=db, provider=provider)
        again = bench.call(key, db=db, provider=provider)
        paid = bench.refunds - before
        if paid != 1:
            raise Fail(f"two calls with one key paid {paid} times; expected once")
        if again != first:
            raise Fail(f"the repeat returned {again!r}; the first call returned {first!r}")
        bench.expect_providers_answer(again, provider, "the repeat")


@q2.test("different keys are different refunds",
         hint="the table's primary key is the idempotency key; each new key pays")
def _(refund_once, open_sent, draw):
    with scratch("ex03") as folder:
        bench = Bench(folder, refund_once, open_sent, draw)
        before = bench.refunds
        for key in draw.distinct(lambda: draw.run_id("key"), 2):
            bench.call(key)
        if bench.refunds - before != 2:
            raise Fail(f"two different keys paid {bench.refunds - before} time(s); expected 2")


@q2.test("it survives a restart: a fresh process with the same key does not pay again",
         hint="a set or dict in memory is gone when the process is; keep the keys in the sent "
              "table (SQLite) and commit after recording")
def _(refund_once, open_sent, draw):
    needs_callable(refund_once, "refund_once")
    needs_callable(open_sent, "open_sent")
    entry = ('\n\ndef check_entry(db_path, folder, key, order_id, amount):\n'
             '    from durable_lite.examples import world_at as _world_at\n'
             '    db = open_sent(db_path)\n'
             '    try:\n'
             '        return refund_once(db, _world_at(folder).careless, key, order_id, amount)\n'
             '    finally:\n'
             '        db.close()\n')
    source = _portable(refund_once, open_sent, extra=entry,
                       call_as={"refund_once": refund_once, "open_sent": open_sent})
    with scratch("ex03") as folder:
        write_module(folder, source)
        key, order_id, amount = draw.run_id("restart-key"), draw.order_id(), draw.amount()
        world = os.path.join(folder, "world")
        runs = [run_fresh(folder, "check_entry", os.path.join(folder, "sent.db"), world, key,
                          order_id, amount) for _ in range(2)]
        for run in runs:
            if not run.finished:
                _child_failed(run, "refund_once in a fresh process")
        ledgers = Ledgers(world)
        refunds = ledgers.counts()["refunds"]
        if refunds != 1:
            raise Fail(f"two processes, one after the other, with the same key: the provider "
                       f"paid {refunds} times; expected once")
        if runs[0].result != runs[1].result:
            raise Fail(f"the second process returned {runs[1].result!r}, the first "
                       f"{runs[0].result!r}")
        ledgers.expect_refund((runs[1].result or {}).get("refund_id"), order_id, amount,
                              what="the second process's answer")


@q2.test("a provider call that fails records nothing: the retry pays exactly once",
         hint="record the key after the provider answered, not before: a row written first "
              "makes a failed call look paid")
def _(refund_once, open_sent, draw):
    with scratch("ex03") as folder:
        bench = Bench(folder, refund_once, open_sent, draw)
        for fail in ("error", "before"):
            key = draw.run_id("key")
            before = bench.refunds
            db = bench.open()
            try:
                bench.call(key, fail=fail, db=db)
                raise Fail("the provider failed, but refund_once returned as if it had paid",
                           "let the provider's exception propagate")
            except (ConnectionError, Crash):
                pass
            db.close()
            got = bench.restart_and_call(key)
            paid = bench.refunds - before
            if paid != 1:
                what = "a ConnectionError" if fail == "error" else "a crash before the call"
                raise Fail(f"after {what} and a retry the provider paid {paid} time(s); "
                           f"expected once (the retry returned {got!r})")


@q2.test("the keys live in the sent table, committed",
         hint="INSERT (key, json.dumps(result)) into sent, then db.commit()")
def _(refund_once, open_sent, draw):
    with scratch("ex03") as folder:
        bench = Bench(folder, refund_once, open_sent, draw)
        key = draw.run_id("key")
        bench.call(key)
        probe = sqlite3.connect(bench.path)
        try:
            row = probe.execute("SELECT key FROM sent WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise Fail(f"could not read the sent table ({exc})", "keep open_sent as it was given") from None
        finally:
            probe.close()
        if row is None:
            raise Fail("after a call, another connection finds no row for its key in the sent table")


# q3 -----------------------------------------------------------------------------------------
q3 = EXERCISE.question("q3", "the window", answers=["window", "refund_once", "open_sent"])

MOMENTS = {
    "before_call": "the process dies just before provider.refund(...)",
    "after_call": "the process dies after the provider paid, before the row is committed",
    "after_record": "the process dies right after the row is committed",
}


def _measure(bench, moment):
    """Refunds paid when the process dies at `moment` and the call is then retried."""
    key = bench.draw.run_id("window-key")
    before = bench.refunds
    db = bench.open()
    try:
        if moment == "before_call":
            bench.call(key, fail="before", db=db)
        elif moment == "after_call":
            bench.call(key, fail="after", db=db)
        else:
            bench.call(key, db=db)
    except Crash:
        pass
    db.close()
    bench.restart_and_call(key)
    return bench.refunds - before


# What a table checked before the call and committed after it pays, per moment of death.
TABLE_PAYS = {"before_call": 1, "after_call": 2, "after_record": 1}


def _window_test(moment):
    def test(window, refund_once, open_sent, draw):
        window = plain(window, "window")
        if not isinstance(window, dict) or set(window) != set(MOMENTS):
            raise Fail(f"window should be a dict with keys {', '.join(MOMENTS)}; got {window!r}")
        guess = window[moment]
        if guess is None:
            raise NotAttempted(f"window[{moment!r}] is still None")
        if isinstance(guess, str):
            raise Fail(f"window[{moment!r}] is the text {guess!r}", "write a number, without quotes")
        with scratch("ex03") as folder:
            actual = _measure(Bench(folder, refund_once, open_sent, draw), moment)
        if actual != TABLE_PAYS[moment]:
            raise Fail(f"when {MOMENTS[moment]} and the call is retried, your refund_once paid "
                       f"{actual} time(s): not what q2's refund_once (check the table, call, "
                       "then record and commit) pays, so your prediction cannot be scored yet",
                       "make q2 pass first")
        if guess != actual:
            raise Fail(f"when {MOMENTS[moment]} and the call is retried, you predicted "
                       f"{guess!r} refund(s); your refund_once paid {actual}")
    return test


for _moment, _hint in [
        ("before_call", "had the provider paid when the process died? Had the table recorded "
                        "anything?"),
        ("after_call", "the money moved, but the table never heard of it: what does the retry see?"),
        ("after_record", "what does the retry find in the table this time?")]:
    q3.test(f"{_moment}: {MOMENTS[_moment]}", hint=_hint)(_window_test(_moment))


# q4 -----------------------------------------------------------------------------------------
q4 = EXERCISE.question("q4", "exactly once, through every crash", answers=["keyed_refund"])


class Order:
    """A drawn order and amount, and a world (in any folder) whose provider paid before."""

    def __init__(self, draw):
        self.order_id, *others = draw.distinct(draw.order_id, 1 + draw.randint(1, 4))
        self.amount = draw.amount()
        self.earlier = [(other, draw.amount()) for other in others]

    def leading(self, folder):
        """The sweep's `leading`: the world's folder and the dedupe file, once the provider
        has paid the earlier refunds (the first time only: a resume finds them paid)."""
        ledgers = Ledgers(folder)
        if not ledgers.refunds():
            for order_id, amount in self.earlier:
                ledgers.world.careless.refund(order_id, amount)
        return [folder, os.path.join(folder, "sent.db")]


def _observed(folder):
    """What the sweep keeps of each case's world: the refunds paid, the keys recorded."""
    return {"refunds": Ledgers(folder).refunds(), "keys": _keys_recorded(folder)}


def _keys_recorded(folder) -> list:
    """The keys pay_once recorded in the run's dedupe table (none if it was never opened)."""
    path = os.path.join(folder, "sent.db")
    if not os.path.exists(path):
        return []
    db = sqlite3.connect(path)
    try:
        return [k for k, in db.execute("SELECT key FROM sent")]
    except sqlite3.DatabaseError:
        return []
    finally:
        db.close()


def _expect_result(result, order, refunds, where):
    """The result names this order, amount, and the refund the provider recorded for them."""
    if not isinstance(result, dict) or not {"order", "refund_id", "amount"} <= set(result):
        raise Fail(f"{where}: the run returned {result!r}; expected {{'order': ..., "
                   "'refund_id': ..., 'amount': ...}")
    if (result["order"], result["amount"]) != (order.order_id, order.amount):
        raise Fail(f"{where}: the run returned order {result['order']!r} and amount "
                   f"{result['amount']!r}; it was started for {order.order_id!r} and {order.amount}")
    ours = [r for r in refunds if r["order_id"] == order.order_id]
    if result["refund_id"] not in [r["refund_id"] for r in ours]:
        paid = ", ".join(r["refund_id"] for r in ours) or "nothing"
        raise Fail(f"{where}: the run returned refund_id {result['refund_id']!r}, but for order "
                   f"{order.order_id!r} the provider recorded {paid}",
                   "return the refund_id of the answer the refund step got from pay_once")


def _paid_twice(row, order):
    """Why a crash and a resume paid more than once, as far as the table can tell."""
    paid = len([r for r in row["observed"]["refunds"] if r["order_id"] == order.order_id])
    return _why_paid_twice(f"crash {crash_label(row)}, then resume: the provider paid {paid} times",
                           row["observed"]["keys"])


def _why_paid_twice(where, keys):
    """A Fail that says what the dedupe table recorded: the keys the run paid under."""
    if len(keys) > 1:
        return Fail(f"{where}, under {len(keys)} different keys for one run: the key changed "
                    "when the workflow ran again",
                    "derive the key only from what every attempt of this run sees again: "
                    "not the clock, the date, a random number or the process")
    if not keys:
        return Fail(f"{where}, and the sent table recorded no key",
                    "pay through pay_once inside the step named 'refund': the careless "
                    "provider ignores keys, your table is what remembers")
    return Fail(f"{where}, with one key recorded: the table did not stop the second payment",
                "make q2 pass first: refund_once must find the key it recorded and not pay again")


@q4.test("no crash: one refund, and the result names it",
         hint="a lookup step, then a key from your refund_key over this run's id and the "
              "order, then the payment through pay_once in the step named 'refund'")
def _(keyed_refund, draw):
    needs_workflow(keyed_refund, "keyed_refund")
    order = Order(draw)
    with scratch("ex03") as folder:
        runs = EngineRuns(folder)
        run_id = draw.run_id("refund")
        world = os.path.join(folder, "world")
        run = runs.run(keyed_refund, *order.leading(world), order.order_id, order.amount,
                       run_id=run_id)
        if run.status != "completed":
            unfinished(run.status, run.error, "keyed_refund")
        steps = step_names(runs.engine(), run_id)
        refunds = Ledgers(world).refunds()
    paid = len(refunds) - len(order.earlier)
    if paid != 1:
        raise Fail(f"the provider paid {paid} times; expected once")
    if steps != ["lookup", "refund"]:
        raise Fail(f"the run recorded the steps {steps}; expected ['lookup', 'refund']",
                   "do each piece of work in a step of its own, named as the task says; work "
                   "done outside a step runs again on every replay")
    _expect_result(run.result, order, refunds, "with no crash")


@q4.test("a crash at each of the 6 crash points, then a resume: exactly one refund, and the "
         "result of an uninterrupted run",
         hint="the key must be the same on the resume (refund_key of ctx.run_id and the order), "
              "and the payment must go through pay_once inside a ctx.step; q1 and q2 must pass")
def _(keyed_refund, draw):
    needs_workflow(keyed_refund, "keyed_refund")
    order = Order(draw)
    ids = draw.child("run ids")
    s = sweep_of(keyed_refund, order.order_id, order.amount, what="keyed_refund",
                 leading=order.leading, observe=_observed, restart_after=3600,
                 run_id=lambda case: ids.run_id("refund"))       # no answer can remember a run
    _expect_result(s.clean["result"], order, s.clean["observed"]["refunds"], "with no crash")
    for row in s.rows:
        if row["duplicates"].get("refunds"):
            raise _paid_twice(row, order)
        if row["lost"].get("refunds"):
            raise Fail(f"crash {crash_label(row)}, then resume: no refund was paid")
        where = f"crash {crash_label(row)}, then resume"
        if row["status"] != "completed":
            unfinished(row["status"], row["error"], f"keyed_refund ({where})")
        _expect_result(row["result"], order, row["observed"]["refunds"], where)
        if not row["same_result"]:
            raise Fail(f"{where}: the run returned {row['result']!r}; an uninterrupted run "
                       f"returns {s.clean['result']!r}")


# Two fresh processes: the first is killed (SIGKILL) right after the refund step paid, before
# its checkpoint; the second, whose wall clock reads days later, resumes the run.
_RESUME_ELSEWHERE = """

def check_start_and_die(store, world, sent, order_id, amount, run_id):
    import durable_lite as _dl
    engine = _dl.Engine(_dl.SQLiteStore(store), _dl.FakeClock(), ids=_dl.SequentialIds("id"),
                        crash_at=_dl.faults.CrashAt("refund", "after_effect", kill=True))
    run = engine.start(keyed_refund, world, sent, order_id, amount, run_id=run_id)
    return {"status": run.status, "error": run.error}


def check_resume(store, run_id):
    import durable_lite as _dl
    engine = _dl.Engine(_dl.SQLiteStore(store), _dl.FakeClock(1_767_225_600.0 + 86400),
                        ids=_dl.SequentialIds("id2"))
    run = engine.resume(run_id)
    return {"status": run.status, "error": run.error, "result": run.result}
"""


@q4.test("killed right after the refund was paid, resumed by another process days later by "
         "the wall clock: still exactly one refund",
         hint="a resume may come in another process, on another day: the key may depend only "
              "on what every attempt of this run sees again, never on the clock, the date, a "
              "random number or the process")
def _(keyed_refund, draw):
    needs_workflow(keyed_refund, "keyed_refund")
    order = Order(draw)
    ahead = draw.randint(2, 30) * 86400 + draw.randint(1, 86399)
    with scratch("ex03") as folder:
        write_module(folder, wall_clock.prelude() +
                     _portable(keyed_refund, extra=_RESUME_ELSEWHERE,
                               call_as={"keyed_refund": keyed_refund}))
        world = os.path.join(folder, "world")
        store, run_id = os.path.join(folder, "runs.db"), draw.run_id("refund")
        first = run_fresh(folder, "check_start_and_die", store, *order.leading(world),
                          order.order_id, order.amount, run_id)
        if not first.killed:
            if not first.finished:
                _child_failed(first, "keyed_refund in a fresh process")
            if first.result["status"] != "completed":
                unfinished(first.result["status"], first.result["error"],
                           "keyed_refund, in a fresh process")
            raise Fail("keyed_refund ran to its end in a fresh process without passing the "
                       f"crash point right after a step named 'refund' ({first.result!r})",
                       "pay in a step named 'refund'")
        second = run_fresh(folder, "check_resume", store, run_id, env=wall_clock.environment(ahead))
        if not second.finished:
            _child_failed(second, "the resume in a second fresh process")
        refunds, keys = Ledgers(world).refunds(), _keys_recorded(world)
    ours = [r for r in refunds if r["order_id"] == order.order_id]
    where = (f"killed right after the refund step paid, then resumed by another process whose "
             f"clock read {ahead / 86400:.1f} days later")
    status = second.result["status"]
    if len(ours) > 1:
        raise _why_paid_twice(f"{where}: the provider paid {len(ours)} times", keys)
    if status != "completed":
        unfinished(status, second.result["error"], f"keyed_refund ({where})")
    if not ours:
        raise Fail(f"{where}: no refund was paid for order {order.order_id!r}")
    _expect_result(second.result["result"], order, refunds, where)


@q4.test("two runs for the same order are two refunds",
         hint="the key includes the run id: a second refund request is a new refund")
def _(keyed_refund, draw):
    needs_workflow(keyed_refund, "keyed_refund")
    order = Order(draw)
    with scratch("ex03") as folder:
        runs = EngineRuns(folder)
        world = os.path.join(folder, "world")
        for run_id in draw.distinct(lambda: draw.run_id("refund"), 2):
            run = runs.run(keyed_refund, *order.leading(world), order.order_id, order.amount,
                           run_id=run_id)
            if run.status != "completed":
                unfinished(run.status, run.error, "keyed_refund")
        paid = len(Ledgers(world).refunds()) - len(order.earlier)
    if paid != 2:
        raise Fail(f"two runs refunding order {order.order_id!r} paid {paid} time(s); expected 2")
