"""Exercise 02: memoize steps in SQLite, then survive a real SIGKILL.

q1 calls the learner's memo_step in this process, with a step function that counts its own
calls, answers with a drawn tag, fails when asked to, and refuses to run when it must not.
q2 copies the learner's refund_flow (and what it uses) into fresh Python processes, kills
them with SIGKILL before or right after each step, resumes in another fresh process, and
counts executions in a log written by the step functions themselves. The provider has paid
other refunds before, so no refund id can be guessed.

The properties a right answer has, each judged by the test that names it, and how the cases
vary it (tests/test_grading_properties_01_07.py has, for each, an answer wrong in that
property alone, and it fails):

q1 memo_step(db, run_id, name, fn, *args)
  - a first call runs fn once and returns its result (drawn arguments and tag);
  - a second call for the same run and step replays the result without running fn;
  - a result that reads as false is a result: every falsy JSON value (None, False, 0, 0.0,
    '', [], {}) is recorded and replayed, on every run (a memo that takes a falsy result for
    "not recorded" runs fn again, or finds its row already there). Judged where a result
    that reads as true does replay: a memo that replays nothing fails the second-call test,
    whose hint fits it;
  - the row's key is (run_id, name), two columns: another run or another name runs fn,
    also for pairs drawn to look alike when joined (("run-1", "2pay"), ("run-12", "pay"));
  - the file is the memory, not the process: with a new, empty memo file the same run and
    step run fn again (a dict kept in front of the table fails), and a result recorded by
    another process (the learner's memo_step, in a fresh one) is replayed here;
  - the row is committed before memo_step returns: a second connection sees it;
  - results are JSON text, never pickle;
  - a crash (dl.Crash) or an error inside fn records nothing: the next call runs fn.
q2 refund_flow(db_path, folder, run_id, order_id, amount)  (drawn run, order and amount)
  - in a fresh process: each of the four steps once, and the result names the refund the
    provider recorded, the customer emailed, the ticket closed;
  - the memo file holds this run's steps under the task's names (lookup, refund, email,
    close), keyed by the run id;
  - two runs that refund the same order are two refunds (memos keyed by the order fail);
  - SIGKILL just before each step, resumed in another process: nothing finished runs again;
  - SIGKILL right after each step's effect: only that step runs again;
  - a finished run started again replays every step.
"""

import json
import os
import sqlite3

from ...errors import Crash
from ..checks import Exercise, Fail, NotAttempted
from ..child import run_fresh, write_module
from ..harness import needs_callable, scratch
from ..ledgers import Ledgers
from ..plain import plain
from ..portable import NotPortable, module_source

EXERCISE = Exercise("02_memoize", "A step, memoized in SQLite",
                    lesson="notebooks/02_checkpoint_every_step.ipynb")


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "memo_step", answers=["memo_step", "open_memo"])


class MustNotRun(Exception):
    pass


class Counted:
    """A step function: each call is a new effect with a new answer (like a payment id)."""

    def __init__(self, draw, fail_on=(), crash_on=()):
        self.calls = 0
        self.tag = draw.token(4)          # so no answer can guess what fn returns
        self.fail_on, self.crash_on = set(fail_on), set(crash_on)

    def __call__(self, *args):
        self.calls += 1
        if self.calls in self.crash_on:
            raise Crash(f"simulated crash inside the step (call {self.calls})")
        if self.calls in self.fail_on:
            raise ValueError(f"the step failed (call {self.calls})")
        return self.answer(self.calls, args)

    def answer(self, call, args=()):
        return {"call": call, "tag": self.tag, "args": list(args)}


def must_not_run(*args):
    raise MustNotRun("fn ran although its result was already recorded")


def _open(open_memo, path):
    needs_callable(open_memo, "open_memo")
    db = open_memo(path)
    if not isinstance(db, sqlite3.Connection):
        raise Fail(f"open_memo returned a {type(db).__name__}, not a sqlite3 connection",
                   "keep open_memo as it was given")
    return db


def _call(memo_step, db, run_id, name, fn, *args):
    needs_callable(memo_step, "memo_step")
    try:
        return plain(memo_step(db, run_id, name, fn, *args), f"memo_step(db, {run_id!r}, {name!r}, fn)")
    except MustNotRun:
        raise Fail(f"memo_step ran fn for step {name!r} of run {run_id!r} although its result "
                   "was already recorded",
                   "look the (run_id, name) row up first and return its result if it is there") from None


def _step_name(draw):
    return draw.choice(["pay", "email", "close", "lookup", "reserve", "ship"]) + f"-{draw.randint(1, 9)}"


@q1.test("the first call runs fn once and returns its result",
         hint="no row yet: call fn with the step's arguments, store its result as JSON text, "
              "and return the result")
def _(memo_step, open_memo, draw):
    with scratch("ex02") as folder:
        db = _open(open_memo, os.path.join(folder, "memo.db"))
        fn = Counted(draw)
        run, name, args = draw.run_id(), _step_name(draw), (draw.order_id(), draw.amount())
        got = _call(memo_step, db, run, name, fn, *args)
        if fn.calls != 1:
            raise Fail(f"fn was called {fn.calls} times on the first call; expected once")
        if got != fn.answer(1, args):
            raise Fail(f"memo_step returned {got!r}; expected fn's result {fn.answer(1, args)!r}")


@q1.test("a second call for the same run and step returns the recorded result without running fn",
         hint="on replay, decode the stored JSON text and return it; fn must not run again")
def _(memo_step, open_memo, draw):
    with scratch("ex02") as folder:
        db = _open(open_memo, os.path.join(folder, "memo.db"))
        fn = Counted(draw)
        run, name, arg = draw.run_id(), _step_name(draw), draw.order_id()
        first = _call(memo_step, db, run, name, fn, arg)
        again = _call(memo_step, db, run, name, fn, arg)
        if fn.calls != 1:
            raise Fail(f"fn ran {fn.calls} times for the same run and step; expected once")
        if again != first:
            raise Fail(f"the replay returned {again!r}, but the first call returned {first!r}")


# Every JSON value Python reads as false. A step may well answer with one ("nothing due": 0,
# "not found": None, "no lines": []), and its row is as much a record as any other.
FALSY_RESULTS = (None, False, 0, 0.0, "", [], {})


def falsy_results(draw) -> list:
    """Each falsy JSON value once (fresh copies), in drawn order: every run meets them all."""
    values = [json.loads(json.dumps(value)) for value in FALSY_RESULTS]
    draw.shuffle(values)
    return values


def _same(got, value) -> bool:
    """Equal and of the same type: 0, False, 0.0 and None are not one another."""
    return type(got) is type(value) and got == value


class Answers:
    """A step function that always answers `value`, counting its calls."""

    def __init__(self, value):
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return json.loads(json.dumps(self.value))


class RecordedTwice(Exception):
    """The next call ran fn again and could not write the step's row a second time."""


def _called_twice(memo_step, db, run, name, fn):
    """The first call and the next one, through one connection: this test is about what a
    recorded row means, not about commits (another test is)."""
    results = []
    for _ in range(2):
        try:
            results.append(_call(memo_step, db, run, name, fn))
        except sqlite3.IntegrityError as exc:
            if not results:               # not a second record: the learner's own error
                raise
            raise RecordedTwice(str(exc)) from None
    return results


@q1.test("a result that reads as false (None, False, 0, 0.0, '', [], {}) is recorded like any "
         "other: the next call replays it without running fn",
         hint="a recorded result can itself read as false (None, 0, False, '', [], {}): "
              "whether the step is recorded depends on whether its row exists, never on what "
              "the row holds")
def _(memo_step, open_memo, draw):
    with scratch("ex02") as folder:
        db = _open(open_memo, os.path.join(folder, "memo.db"))
        try:
            values = falsy_results(draw)
            runs = draw.distinct(draw.run_id, len(values) + 1)
            if not _replays_a_true_result(memo_step, db, runs.pop(), draw):
                return        # no result replays at all: the second-call test says so, and why
            for run, value in zip(runs, values):
                _expect_replayed(memo_step, db, run, _step_name(draw), value)
        finally:
            db.close()


def _replays_a_true_result(memo_step, db, run, draw) -> bool:
    """Does a result that reads as true replay? Only then is a falsy one that does not
    replay told apart by its value."""
    fn = Counted(draw)
    try:
        _called_twice(memo_step, db, run, _step_name(draw), fn)
    except RecordedTwice:
        return False
    return fn.calls == 1


def _expect_replayed(memo_step, db, run, name, value):
    """fn answers `value`: the next call for the same step replays it, of the same type."""
    fn = Answers(value)
    try:
        first, again = _called_twice(memo_step, db, run, name, fn)
    except RecordedTwice as exc:
        raise Fail(f"step {name!r} of run {run!r}: fn answered {value!r}, and the next call ran "
                   f"fn again ({fn.calls} calls in all), then could not record the step a "
                   f"second time ({exc})") from None
    if fn.calls != 1:
        raise Fail(f"step {name!r} of run {run!r}: fn answered {value!r}, and the next call ran "
                   f"fn again ({fn.calls} calls in all) instead of replaying the recorded "
                   f"{value!r}, though a result that reads as true did replay")
    for when, got in (("the first call", first), ("the replay", again)):
        if not _same(got, value):
            raise Fail(f"step {name!r} of run {run!r}: fn answered {value!r}, but {when} "
                       f"returned {got!r}")


@q1.test("another run, or another step name, runs fn again — also when the two look alike "
         "joined together",
         hint="the row's key is (run_id, name): both must match for a replay, each in its own column")
def _(memo_step, open_memo, draw):
    with scratch("ex02") as folder:
        db = _open(open_memo, os.path.join(folder, "memo.db"))
        fn = Counted(draw)
        run_a, run_b = draw.distinct(draw.run_id, 2)
        name_a, name_b = draw.distinct(lambda: _step_name(draw), 2)
        pairs = [(run_a, name_a), (run_b, name_a), (run_a, name_b)]
        pairs += [pair for two in draw.lookalike_pairs(separators=("", "-", "/", ":"))
                  for pair in two]
        missed = []
        for run, name in pairs:
            before = fn.calls
            _call(memo_step, db, run, name, fn)
            if fn.calls == before:
                missed.append((run, name))
        if missed:
            raise Fail(f"{len(pairs)} different (run_id, name) pairs, each called once, ran fn "
                       f"{fn.calls} times; for {missed[0]} memo_step replayed another pair's "
                       "result instead of running fn",
                       "look the row up by run_id and by name, each in its own column and "
                       "each a condition of the query; a key joined into one string makes "
                       "('run-1', '2pay') and ('run-12', 'pay') the same")


@q1.test("a new memo file: the same run id and step name run fn again (the memory is the "
         "file, not this process)",
         hint="memo_step must answer from the table in `db` alone: a dict kept beside it "
              "remembers results that this file never recorded")
def _(memo_step, open_memo, draw):
    with scratch("ex02") as folder:
        fn = Counted(draw)
        run, name, arg = draw.run_id(), _step_name(draw), draw.order_id()
        first_file, second_file = (os.path.join(folder, f"{draw.token()}.db") for _ in range(2))
        db = _open(open_memo, first_file)
        _call(memo_step, db, run, name, fn, arg)
        db.close()
        db = _open(open_memo, second_file)
        got = _call(memo_step, db, run, name, fn, arg)
        db.close()
        if fn.calls != 2:
            raise Fail(f"run {run!r}, step {name!r}: recorded in one memo file, then called with "
                       f"a new, empty file, fn ran {fn.calls} time(s) in all and memo_step "
                       f"returned {got!r}; the new file has no row, so fn should run again")
        if got != fn.answer(2, (arg,)):
            raise Fail(f"with the new file memo_step returned {got!r}; expected fn's new result "
                       f"{fn.answer(2, (arg,))!r}")


# A fresh process records one step through the learner's own memo_step, then dies.
_RECORD_ELSEWHERE = """

def check_record(path, run_id, name, value):
    db = open_memo(path)
    try:
        return memo_step(db, run_id, name, lambda: value)
    finally:
        db.close()
"""


@q1.test("a result recorded by another process is replayed here, without running fn",
         hint="look the (run_id, name) row up in the table every time: a process that starts "
              "after a crash has nothing in memory, only the file")
def _(memo_step, open_memo, draw):
    needs_callable(memo_step, "memo_step")
    needs_callable(open_memo, "open_memo")
    try:
        source = module_source(memo_step, open_memo, extra=_RECORD_ELSEWHERE,
                               call_as={"memo_step": memo_step, "open_memo": open_memo})
    except NotPortable as exc:
        raise Fail(str(exc)) from None
    with scratch("ex02") as folder:
        path = os.path.join(folder, "memo.db")
        run, name = draw.run_id(), _step_name(draw)
        value = {"paid": draw.amount(), "ref": draw.token()}
        write_module(folder, source)
        there = run_fresh(folder, "check_record", path, run, name, value)
        if not there.finished:
            if there.error and "NotImplementedError" in there.error:
                raise NotAttempted("memo_step still raises NotImplementedError")
            raise Fail(f"memo_step failed in a fresh process: {there.error}")
        db = _open(open_memo, path)
        try:
            got = _call(memo_step, db, run, name, must_not_run)
        finally:
            db.close()
        if got != value:
            raise Fail(f"another process recorded {value!r} for run {run!r}, step {name!r}; "
                       f"here memo_step replayed {got!r}")


@q1.test("the result is committed before memo_step returns: a fresh connection sees it",
         hint="commit after writing the row and before returning")
def _(memo_step, open_memo, draw):
    with scratch("ex02") as folder:
        path = os.path.join(folder, "memo.db")
        db = _open(open_memo, path)
        run, name = draw.run_id(), _step_name(draw)
        first = _call(memo_step, db, run, name, Counted(draw))
        fresh = _open(open_memo, path)
        fresh.execute("PRAGMA busy_timeout = 200")
        try:
            got = plain(memo_step(fresh, run, name, must_not_run), "memo_step on a second connection")
        except MustNotRun:
            raise Fail("a second connection to the same file did not find the recorded result: "
                       "it was not committed, so a crash would lose it") from None
        except sqlite3.OperationalError as exc:
            raise Fail(f"a second connection could not read the file ({exc}): the first one "
                       "still holds an open write transaction") from None
        finally:
            fresh.close()
        if got != first:
            raise Fail(f"a fresh connection replayed {got!r}; the first call returned {first!r}")


@q1.test("results are stored as JSON text (never pickle)",
         hint="store the result as JSON text (the json module) in the result column, and "
              "decode it on the way back")
def _(memo_step, open_memo, draw):
    with scratch("ex02") as folder:
        path = os.path.join(folder, "memo.db")
        db = _open(open_memo, path)
        run, name = draw.run_id(), _step_name(draw)
        value = _call(memo_step, db, run, name, Counted(draw), draw.order_id())
        try:   # through the learner's own connection: this test is about the format only
            row = db.execute("SELECT typeof(result), result FROM memo WHERE run_id = ? AND name = ?",
                             (run, name)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise Fail(f"could not read the memo table ({exc})", "keep open_memo as it was given") from None
        if row is None:
            raise Fail(f"no row for ({run}, {name}) in the memo table after the call",
                       "write a row for the run and the step, with the result as JSON, after fn returns")
        if row[0] != "text":
            raise Fail(f"the result column holds a {row[0]}, not JSON text")
        try:
            stored = json.loads(row[1])
        except ValueError:
            raise Fail(f"the stored result {row[1][:60]!r} is not JSON") from None
        if stored != value:
            raise Fail(f"the stored JSON {stored!r} is not the value returned ({value!r})")


@q1.test("a crash inside fn records nothing: the next call runs fn, so the effect happens once",
         hint="record the result only after fn has returned it; a row written before fn runs "
              "makes a crash look like a finished step")
def _(memo_step, open_memo, draw):
    with scratch("ex02") as folder:
        path = os.path.join(folder, "memo.db")
        for failure in ({"crash_on": {1}}, {"fail_on": {1}}):
            run, name = draw.run_id(), _step_name(draw)
            db = _open(open_memo, path)
            fn = Counted(draw, **failure)
            kind = "a dl.Crash" if "crash_on" in failure else "a ValueError"
            try:
                returned = _call(memo_step, db, run, name, fn)
                raise Fail(f"fn raised {kind}, but memo_step returned {returned!r} instead of "
                           "letting it through",
                           "do not catch fn's exception in memo_step: a step that failed is not "
                           "done, so nothing is recorded and the caller sees the error")
            except (Crash, ValueError):
                pass
            db.close()                    # the process died: its connection is gone
            db = _open(open_memo, path)   # the restarted process opens the file again
            got = _call(memo_step, db, run, name, fn)
            db.close()
            if fn.calls != 2 or got != fn.answer(2):
                raise Fail(f"after {kind} inside fn, the next call returned {got!r} and fn ran "
                           f"{fn.calls - 1} more time(s); expected fn to run again and its "
                           f"result {fn.answer(2)!r} to be returned")


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "survive a real kill", answers=["refund_flow"])

STEPS = {"lookup": "lookup_order", "refund": "issue_refund", "email": "email_customer",
         "close": "close_ticket"}


class Fresh:
    """A place where refund_flow runs in fresh processes: its own memo file and world, a
    drawn order, and a provider that has paid `earlier` other refunds before this run."""

    def __init__(self, folder, source, case):
        self.folder = folder
        self.world_folder = os.path.join(folder, "world")
        self.run_id, self.order_id, self.amount, earlier = case
        write_module(folder, source)
        world = Ledgers(self.world_folder).world
        for i in range(earlier):          # so this run's refund is not "R-1"
            world.payments.refund(f"Z-{i}", 1 + i)
        self.before = self._counts()

    def run(self, kill=None):
        return run_fresh(self.folder, "refund_flow", os.path.join(self.folder, "memo.db"),
                         self.world_folder, self.run_id, self.order_id, self.amount,
                         wrap=STEPS.values(), kill=kill)

    def starts(self, log):
        by_function = {v: k for k, v in STEPS.items()}
        counts = {step: 0 for step in STEPS}
        for line in log:
            what, _, fn = line.partition(" ")
            if what == "start" and fn in by_function:
                counts[by_function[fn]] += 1
        return counts

    def _counts(self):
        counts = Ledgers(self.world_folder).counts()
        return {"refund": counts["refunds"], "email": counts["emails"], "close": counts["tickets_closed"]}

    def world(self):
        """What this run did to the world: refunds, emails and closes since it began."""
        now = self._counts()
        return {k: now[k] - self.before[k] for k in now}

    def expect_recorded(self, result, what):
        """The result must name this run's refund as the provider recorded it, and the email
        and the close must have gone to this order's customer and ticket."""
        if not isinstance(result, dict) or not {"order", "refund_id", "amount"} <= set(result):
            raise Fail(f"{what} returned {result!r}; expected {{'order': ..., 'refund_id': ..., "
                       "'amount': ...}")
        if (result["order"], result["amount"]) != (self.order_id, self.amount):
            raise Fail(f"{what} returned order {result['order']!r} and amount "
                       f"{result['amount']!r}; it was asked to refund {self.amount} for "
                       f"{self.order_id!r}", "return the order id and amount refund_flow was given")
        world = Ledgers(self.world_folder)
        world.expect_refund(result["refund_id"], self.order_id, self.amount,
                            what=f"the result of {what}")
        order = world.world.orders.lookup(self.order_id)
        if not world.mail(order["email"]):
            raise Fail(f"{what}: no email went to the customer of {self.order_id!r} "
                       f"({order['email']})", "email the address the lookup step returned")
        if not world.closes(order["ticket"]):
            raise Fail(f"{what}: the ticket of {self.order_id!r} ({order['ticket']}) was not "
                       "closed", "close the ticket the lookup step returned")


def _case(draw):
    return draw.run_id("killed-run"), draw.order_id(), draw.amount(), draw.randint(1, 5)


def _source(refund_flow):
    needs_callable(refund_flow, "refund_flow")
    try:
        return module_source(refund_flow, call_as={"refund_flow": refund_flow})
    except NotPortable as exc:
        raise Fail(str(exc), "open the memo file inside refund_flow, with the given open_memo, "
                             "and pass everything else as an argument") from None


def _finished(run, what):
    if run.finished:
        return run.result
    if run.error and "NotImplementedError" in run.error:
        raise NotAttempted(f"{what}: a function it uses still raises NotImplementedError "
                           "(is memo_step from q1 written?)")
    detail = run.error or f"exit status {run.returncode}"
    hint = ("the check copies refund_flow and the functions and imports it uses into a new "
            "process; run refund_flow yourself in the notebook to see the error (and if q1 "
            "has failures, fix memo_step first)")
    if "NoneType" in detail:
        hint = ("a replayed step returned None: was its row written before its function ran "
                "(and then the process died)? Record a result only after fn returns it")
    raise Fail(f"{what} did not finish: {detail}", hint)


@q2.test("runs the whole refund in a fresh process: each step once, and the result names the "
         "refund the provider recorded",
         hint="call memo_step for lookup, refund, email and close, in that order, and return "
              "the refund step's refund_id")
def _(refund_flow, draw):
    with scratch("ex02") as folder:
        fresh = Fresh(folder, _source(refund_flow), _case(draw))
        run = fresh.run()
        result = _finished(run, "refund_flow, in a fresh process")
        starts, effects = fresh.starts(run.log), fresh.world()
        if any(n != 1 for n in starts.values()) or any(n != 1 for n in effects.values()):
            never = [STEPS[s] for s, n in starts.items() if n == 0]
            hint = ""
            if never:
                hint = (f"{', '.join(never)} never ran: give every step its own name; a step "
                        "whose name is already recorded replays that row instead of running")
            raise Fail(f"steps run {starts}, effects {effects}; expected each exactly once", hint)
        fresh.expect_recorded(result, "refund_flow")


def _memo_rows(path) -> list:
    """(run_id, name) of every row in the memo file, in the order they were written."""
    if not os.path.exists(path):
        return []
    db = sqlite3.connect(path)
    try:
        return [tuple(row) for row in db.execute("SELECT run_id, name FROM memo ORDER BY rowid")]
    except sqlite3.DatabaseError:
        return []
    finally:
        db.close()


@q2.test("the memo file records this run's four steps under the names the task gives",
         hint="name the steps exactly as the task does: a run resumed by a newer version of "
              "the code finds its steps by these names")
def _(refund_flow, draw):
    with scratch("ex02") as folder:
        fresh = Fresh(folder, _source(refund_flow), _case(draw))
        _finished(fresh.run(), "refund_flow, in a fresh process")
        rows = _memo_rows(os.path.join(folder, "memo.db"))
    ours = sorted(name for run_id, name in rows if run_id == fresh.run_id)
    if ours != sorted(STEPS):
        keyed = sorted({run_id for run_id, _ in rows if run_id != fresh.run_id})
        if not ours and keyed:
            raise Fail(f"refund_flow ran as run {fresh.run_id!r}, but the memo file keys its "
                       f"rows by {', '.join(repr(k) for k in keyed[:3])}, not by the run id",
                       "the first argument after db is the run's id: a second refund of the "
                       "same order is another run, and must not replay this one")
        raise Fail(f"the memo file records the steps {ours} for run {fresh.run_id!r}; "
                   f"expected {sorted(STEPS)}")


@q2.test("two runs that refund the same order, one memo file: two refunds, each run's result "
         "names its own",
         hint="a memo row belongs to one run: key it by refund_flow's run_id, so a second "
              "refund request is a new run and pays")
def _(refund_flow, draw):
    with scratch("ex02") as folder:
        run_id, order_id, amount, earlier = _case(draw)
        fresh = Fresh(folder, _source(refund_flow), (run_id, order_id, amount, earlier))
        results = []
        for run in (run_id, draw.run_id("second-run")):
            fresh.run_id = run
            results.append(_finished(fresh.run(), f"refund_flow (run {run!r})"))
        effects = fresh.world()
        ids = [r.get("refund_id") if isinstance(r, dict) else None for r in results]
        for result in results:
            fresh.expect_recorded(result, "refund_flow")
    if effects["refund"] != 2 or ids[0] == ids[1]:
        raise Fail(f"two runs refunding {order_id!r} (run ids {run_id!r} and {fresh.run_id!r}) "
                   f"paid {effects['refund']} time(s) and returned refund ids {ids}; expected "
                   "two refunds, each run naming its own")


def _killed_then_resumed(refund_flow, moment, draw):
    """For each step: kill a fresh process at `moment` of it, resume in another one."""
    source = _source(refund_flow)
    out = []
    for step, fn_name in STEPS.items():
        with scratch("ex02") as folder:
            fresh = Fresh(folder, source, _case(draw))
            killed = fresh.run(kill=(fn_name, moment))
            if not killed.killed:
                _finished(killed, "refund_flow")
                raise Fail(f"the process was never killed: refund_flow did not call "
                           f"{fn_name} (step {step!r})")
            resumed = fresh.run()
            result = _finished(resumed, f"the resumed run (after a kill at {step!r})")
            starts, effects = fresh.starts(resumed.log), fresh.world()
            if moment == "before":
                fresh.expect_recorded(result, f"the resumed run (after a kill just before {step!r})")
            out.append((step, starts, effects))
    return out


@q2.test("killed (SIGKILL) just before a step: a fresh process finishes the run, no step that "
         "had finished runs again, and the result names the provider's refund",
         hint="every finished step must be read back from the memo file by the new process; "
              "a dict in memory, or a commit that waits until the end, is lost with the process")
def _(refund_flow, draw):
    for step, starts, effects in _killed_then_resumed(refund_flow, "before", draw):
        order = list(STEPS)
        again = [s for s in order[:order.index(step)] if starts[s] > 1]
        if again:
            raise Fail(f"after a kill just before {step!r}, the finished step(s) "
                       f"{', '.join(again)} ran again (executions {starts})")
        if any(n != 1 for n in effects.values()):
            raise Fail(f"after a kill just before {step!r}: refunds, emails, closes = {effects}; "
                       "expected each exactly once")


@q2.test("killed right after a step's effect, before its checkpoint: only that step runs again",
         hint="commit each step's result as soon as it returns; then only the step caught in "
              "the window between effect and checkpoint can repeat (lesson 03 closes it)")
def _(refund_flow, draw):
    for step, starts, effects in _killed_then_resumed(refund_flow, "after", draw):
        want = {s: 2 if s == step else 1 for s in STEPS}
        if starts != want:
            raise Fail(f"after a kill right after {step!r} ran, steps were executed {starts}; "
                       f"expected {want}: the killed step repeats, every other step runs once")


@q2.test("a finished run, started again in a fresh process, replays every step and runs none",
         hint="a completed run's steps are all in the memo table: every call should replay")
def _(refund_flow, draw):
    with scratch("ex02") as folder:
        fresh = Fresh(folder, _source(refund_flow), _case(draw))
        first = _finished(fresh.run(), "refund_flow, in a fresh process")
        again = fresh.run()
        result = _finished(again, "refund_flow, run a second time")
        ran = [s for s, n in fresh.starts(again.log).items() if n > 1]
        if ran:
            raise Fail(f"the second run executed {', '.join(ran)} again",
                       "call every step through memo_step(db, run_id, name, fn, ...): a step "
                       "function called directly runs on every attempt")
        if result != first:
            raise Fail(f"the second run returned {result!r}, the first {first!r}")
