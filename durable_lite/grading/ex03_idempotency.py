"""Exercise 03: a stable idempotency key, a dedupe table for a provider without keys, the
window that remains, and a workflow that refunds exactly once through every crash.

The provider is the simulated `careless` one: it ignores idempotency keys and pays on
every call, and its ledger lives in its own SQLite file, so counting refunds there is
counting what a real bank would have paid out.
"""

import itertools
import os
import sqlite3
import time
from unittest import mock

from .. import examples
from ..errors import Crash
from ..faults import every_crash_point
from .checks import Exercise, Fail, NotAttempted
from .child import run_fresh, write_module
from .harness import EngineRuns, crash_label, needs_callable, needs_workflow, scratch, step_names
from .portable import NotPortable, module_source

EXERCISE = Exercise("03_idempotency", "Keys, a dedupe table, and the window",
                    lesson="notebooks/03_the_window_and_idempotency.ipynb")

_numbers = itertools.count(1)


def fresh_keys(*names):
    """Keys and ids never used before in this process (see ex02.fresh_ids)."""
    n = next(_numbers)
    return [f"{name}-{n}" for name in names]


def _portable(*fns, extra=""):
    try:
        return module_source(*fns, extra=extra)
    except NotPortable as exc:
        raise Fail(str(exc)) from None


def _child_failed(run, what):
    if run.error and "NotImplementedError" in run.error:
        raise NotAttempted(f"{what}: your code still raises NotImplementedError")
    raise Fail(f"{what} failed: {run.error or f'exit status {run.returncode}'}",
               "the check copies your function, and the functions and imports it uses, into a "
               "new process; keep what it needs in those functions")


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "a stable idempotency key", answers=["refund_key"])


def _key(refund_key, run_id, order_id):
    needs_callable(refund_key, "refund_key")
    key = refund_key(run_id, order_id)
    if key is None:
        raise Fail(f"refund_key({run_id!r}, {order_id!r}) returned None",
                   "return the key (a string); a function without a `return` line returns None")
    return key


@q1.test("returns a non-empty string of at most 255 characters",
         hint="providers take keys as short strings: a hash's hex digest fits well")
def _(refund_key):
    key = _key(refund_key, "refund-A-17", "A-17")
    if not isinstance(key, str) or not key:
        raise Fail(f"refund_key returned {key!r}; expected a non-empty string")
    if len(key) > 255:
        raise Fail(f"the key is {len(key)} characters long; providers accept at most 255")


@q1.test("the same run and order give the same key, even a day later",
         hint="build the key only from inputs that are the same on every attempt: the run id "
              "and the order, never the clock")
def _(refund_key):
    first = _key(refund_key, "refund-A-17", "A-17")
    later = time.time() + 86400
    with mock.patch("time.time", return_value=later), \
            mock.patch("time.time_ns", return_value=int(later * 1e9)):
        next_day = _key(refund_key, "refund-A-17", "A-17")
    again = _key(refund_key, "refund-A-17", "A-17")
    if not (first == next_day == again):
        raise Fail(f"three calls with the same run and order gave {first!r}, {next_day!r} "
                   f"(a day later) and {again!r}; a retry would not be recognised as a repeat")


@q1.test("a fresh Python process computes the same key",
         hint="Python's hash() of a string changes from process to process, and so do uuid4() "
              "and random: use hashlib (e.g. sha256) over the run id and order")
def _(refund_key):
    here = _key(refund_key, "refund-A-17", "A-17")
    with scratch("ex03") as folder:
        write_module(folder, _portable(refund_key))
        there = run_fresh(folder, "refund_key", "refund-A-17", "A-17",
                          env={"PYTHONHASHSEED": "4242"})
        if not there.finished:
            _child_failed(there, "refund_key in a fresh process")
    if there.result != here:
        raise Fail(f"this kernel computed {here!r}, a fresh process {there.result!r}; after a "
                   "restart the provider would see a new key and pay again")


@q1.test("another run, or another order in the same run, gets another key",
         hint="put both the run id and the order id into what you hash")
def _(refund_key):
    keys = {(r, o): _key(refund_key, r, o)
            for r, o in [("refund-1", "A-17"), ("refund-2", "A-17"), ("refund-1", "B-99")]}
    if len(set(keys.values())) != 3:
        raise Fail(f"keys for (run, order) pairs: {keys}; each pair needs its own key, or "
                   "a second refund request would be taken for a repeat of the first")


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "a dedupe table for a provider without keys",
                       answers=["refund_once", "open_sent"])


class Provider:
    """The careless provider, or a version of it that fails once before or after paying."""

    def __init__(self, real, fail=None):
        self.real, self.fail, self.calls = real, fail, 0

    def refund(self, order_id, amount, idempotency_key=None):
        self.calls += 1
        if self.fail == "before" and self.calls == 1:
            raise Crash("the process died before the provider was called")
        if self.fail == "error" and self.calls == 1:
            raise ConnectionError("the provider did not answer (nothing was paid)")
        result = self.real.refund(order_id, amount)
        if self.fail == "after" and self.calls == 1:
            raise Crash("the process died after the provider paid, before the table recorded it")
        return result


class Bench:
    """A world, a dedupe file and the learner's two functions."""

    def __init__(self, folder, refund_once, open_sent):
        needs_callable(refund_once, "refund_once")
        needs_callable(open_sent, "open_sent")
        self.folder, self.refund_once, self.open_sent = folder, refund_once, open_sent
        self.path = os.path.join(folder, "sent.db")
        self.careless = examples.world_at(os.path.join(folder, "world")).careless

    def open(self):
        db = self.open_sent(self.path)
        if not isinstance(db, sqlite3.Connection):
            raise Fail(f"open_sent returned a {type(db).__name__}, not a sqlite3 connection",
                       "keep open_sent as it was given")
        return db

    def call(self, key, order_id="A-17", amount=40, fail=None, db=None):
        db = db or self.open()
        try:
            return self.refund_once(db, Provider(self.careless, fail), key, order_id, amount)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            raise Fail(f"the sent table is locked ({exc}): an earlier connection wrote to it "
                       "and never committed, so nobody else can write, and a crash would "
                       "lose that row", "call db.commit() right after the INSERT") from None

    def restart_and_call(self, key, **kw):
        """As after a crash: a new connection (the old one died with the process)."""
        db = self.open()
        try:
            return self.call(key, db=db, **kw)
        finally:
            db.close()

    @property
    def refunds(self):
        return self.careless.count()


@q2.test("the first call pays once and returns the provider's answer",
         hint="no row for the key: call provider.refund(order_id, amount), record, return its answer")
def _(refund_once, open_sent):
    with scratch("ex03") as folder:
        bench = Bench(folder, refund_once, open_sent)
        key, = fresh_keys("key")
        got = bench.call(key)
        if bench.refunds != 1:
            raise Fail(f"the provider paid {bench.refunds} times; expected once",
                       "pay through the provider passed in: provider.refund(order_id, amount)"
                       if bench.refunds == 0 else "")
        if not isinstance(got, dict) or got.get("refund_id") != "R-1":
            raise Fail(f"refund_once returned {got!r}; expected the provider's answer "
                       "(with refund_id 'R-1')")


@q2.test("the same key again returns the recorded answer and does not pay again",
         hint="look the key up in the sent table before calling the provider")
def _(refund_once, open_sent):
    with scratch("ex03") as folder:
        bench = Bench(folder, refund_once, open_sent)
        key, = fresh_keys("key")
        db = bench.open()
        first = bench.call(key, db=db)
        again = bench.call(key, db=db)
        if bench.refunds != 1:
            raise Fail(f"two calls with one key paid {bench.refunds} times; expected once")
        if again != first:
            raise Fail(f"the repeat returned {again!r}; the first call returned {first!r}")


@q2.test("different keys are different refunds",
         hint="the table's primary key is the idempotency key; each new key pays")
def _(refund_once, open_sent):
    with scratch("ex03") as folder:
        bench = Bench(folder, refund_once, open_sent)
        a, b = fresh_keys("key-a", "key-b")
        bench.call(a)
        bench.call(b)
        if bench.refunds != 2:
            raise Fail(f"two different keys paid {bench.refunds} time(s); expected 2")


@q2.test("it survives a restart: a fresh process with the same key does not pay again",
         hint="a set or dict in memory is gone when the process is; keep the keys in the sent "
              "table (SQLite) and commit after recording")
def _(refund_once, open_sent):
    needs_callable(refund_once, "refund_once")
    needs_callable(open_sent, "open_sent")
    entry = ('\n\ndef check_entry(db_path, folder, key):\n'
             '    from durable_lite.examples import world_at as _world_at\n'
             '    db = open_sent(db_path)\n'
             '    try:\n'
             '        return refund_once(db, _world_at(folder).careless, key, "A-17", 40)\n'
             '    finally:\n'
             '        db.close()\n')
    source = _portable(refund_once, open_sent, extra=entry)
    with scratch("ex03") as folder:
        write_module(folder, source)
        key, = fresh_keys("restart-key")
        world = os.path.join(folder, "world")
        runs = [run_fresh(folder, "check_entry", os.path.join(folder, "sent.db"), world, key)
                for _ in range(2)]
        for run in runs:
            if not run.finished:
                _child_failed(run, "refund_once in a fresh process")
        refunds = examples.world_at(world).careless.count()
        if refunds != 1:
            raise Fail(f"two processes, one after the other, with the same key: the provider "
                       f"paid {refunds} times; expected once")
        if runs[0].result != runs[1].result:
            raise Fail(f"the second process returned {runs[1].result!r}, the first "
                       f"{runs[0].result!r}")


@q2.test("a provider call that fails records nothing: the retry pays exactly once",
         hint="record the key after the provider answered, not before: a row written first "
              "makes a failed call look paid")
def _(refund_once, open_sent):
    with scratch("ex03") as folder:
        bench = Bench(folder, refund_once, open_sent)
        for fail in ("error", "before"):
            key, = fresh_keys("key")
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
def _(refund_once, open_sent):
    with scratch("ex03") as folder:
        bench = Bench(folder, refund_once, open_sent)
        key, = fresh_keys("key")
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
    key, = fresh_keys("window-key")
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
    def test(window, refund_once, open_sent):
        if not isinstance(window, dict) or set(window) != set(MOMENTS):
            raise Fail(f"window should be a dict with keys {', '.join(MOMENTS)}; got {window!r}")
        guess = window[moment]
        if guess is None:
            raise NotAttempted(f"window[{moment!r}] is still None")
        if isinstance(guess, str):
            raise Fail(f"window[{moment!r}] is the text {guess!r}", "write a number, without quotes")
        with scratch("ex03") as folder:
            actual = _measure(Bench(folder, refund_once, open_sent), moment)
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
        ("before_call", "nothing was paid and nothing recorded: the retry pays once"),
        ("after_call", "the money moved, but the table never heard of it: what does the retry see?"),
        ("after_record", "the table has the key: the retry returns the recorded answer")]:
    q3.test(f"{_moment}: {MOMENTS[_moment]}", hint=_hint)(_window_test(_moment))


# q4 -----------------------------------------------------------------------------------------
q4 = EXERCISE.question("q4", "exactly once, through every crash", answers=["keyed_refund"])


def _run(keyed_refund, folder, run_id=None, crash=None, runs=None):
    needs_workflow(keyed_refund, "keyed_refund")
    run_id = run_id or fresh_keys("refund-A-17")[0]   # no memory of an earlier test can help
    runs = runs or EngineRuns(folder)
    world = os.path.join(folder, "world")
    run = runs.run(keyed_refund, world, os.path.join(folder, "sent.db"), "A-17", 40,
                   run_id=run_id, crash=crash)
    if run.status != "completed":
        if run.error and "NotImplementedError" in run.error:
            raise NotAttempted("keyed_refund (or a function it calls) still raises "
                               "NotImplementedError")
        raise Fail(f"the run ended {run.status}: {run.error}")
    return run.result, examples.world_at(world).careless.count()


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


def _paid_twice(crash, refunds, keys):
    """Why a crash and a resume paid more than once, as far as the table can tell."""
    where = f"crash {crash_label(crash)}, then resume: the provider paid {refunds} times"
    if len(keys) > 1:
        return Fail(f"{where}, under {len(keys)} different keys for one run: the key changed "
                    "when the workflow ran again",
                    "derive the key only from what a replay sees again: "
                    "refund_key(ctx.run_id, order_id), no clock, no uuid4()")
    if not keys:
        return Fail(f"{where}, and the sent table recorded no key",
                    "pay through pay_once(db_path, folder, key, order_id, amount) inside "
                    "ctx.step('refund', ...): the careless provider ignores keys, your table "
                    "is what remembers")
    return Fail(f"{where}, with one key recorded: the table did not stop the second payment",
                "make q2 pass first: refund_once must find the key it recorded and not pay again")


@q4.test("no crash: one refund, and the result names it",
         hint="lookup, then a key from refund_key(ctx.run_id, order_id), then "
              "ctx.step('refund', pay_once, ...)")
def _(keyed_refund):
    with scratch("ex03") as folder:
        runs = EngineRuns(folder)
        run_id, = fresh_keys("refund-A-17")
        result, refunds = _run(keyed_refund, folder, run_id=run_id, runs=runs)
        steps = step_names(runs.engine(), run_id)
    if refunds != 1:
        raise Fail(f"the provider paid {refunds} times; expected once")
    if steps != ["lookup", "refund"]:
        raise Fail(f"the run recorded the steps {steps}; expected ['lookup', 'refund']",
                   "do each piece of work in its own ctx.step: ctx.step('lookup', lookup_order, "
                   "...) and ctx.step('refund', pay_once, ...); work done outside a step runs "
                   "again on every replay")
    if not isinstance(result, dict) or result.get("refund_id") != "R-1":
        raise Fail(f"the run returned {result!r}; expected a dict with refund_id 'R-1'")


@q4.test("a crash at each of the 6 crash points, then a resume: exactly one refund, and the "
         "result of an uninterrupted run",
         hint="the key must be the same on the resume (refund_key of ctx.run_id and the order), "
              "and the payment must go through pay_once inside a ctx.step; q1 and q2 must pass")
def _(keyed_refund):
    with scratch("ex03") as folder:
        expected, _ = _run(keyed_refund, folder)
    for crash in every_crash_point(["lookup", "refund"]):
        with scratch("ex03") as folder:
            result, refunds = _run(keyed_refund, folder, crash=crash)
            keys = _keys_recorded(folder)
        if refunds != 1:
            raise _paid_twice(crash, refunds, keys)
        if result != expected:
            raise Fail(f"crash {crash_label(crash)}, then resume: the run returned {result!r}; "
                       f"an uninterrupted run returns {expected!r}")


@q4.test("two runs for the same order are two refunds",
         hint="the key includes the run id: a second refund request is a new refund")
def _(keyed_refund):
    with scratch("ex03") as folder:
        runs = EngineRuns(folder)
        first, second = fresh_keys("refund-A-17-first", "refund-A-17-second")
        _run(keyed_refund, folder, run_id=first, runs=runs)
        _, refunds = _run(keyed_refund, folder, run_id=second, runs=runs)
    if refunds != 2:
        raise Fail(f"two runs refunding order A-17 paid {refunds} time(s); expected 2")
