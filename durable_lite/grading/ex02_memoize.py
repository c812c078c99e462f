"""Exercise 02: memoize steps in SQLite, then survive a real SIGKILL.

q1 calls the learner's memo_step in this process, with a step function that counts its
own calls, fails when asked to, and refuses to run when it must not.
q2 copies the learner's refund_flow (and what it uses) into fresh Python processes, kills
them with SIGKILL before or right after each step, resumes in another fresh process, and
counts executions in a log written by the step functions themselves.
"""

import itertools
import os
import sqlite3

from .. import examples
from ..errors import Crash
from .checks import Exercise, Fail, NotAttempted
from .child import run_fresh, write_module
from .harness import needs_callable, scratch
from .portable import NotPortable, module_source

EXERCISE = Exercise("02_memoize", "A step, memoized in SQLite",
                    lesson="notebooks/02_checkpoint_every_step.ipynb")


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "memo_step", answers=["memo_step", "open_memo"])


_numbers = itertools.count(1)


def fresh_ids(*names):
    """Run ids never used before in this process, so state a wrong answer keeps in memory
    (a dict of results) cannot pass a test by remembering an earlier one."""
    n = next(_numbers)
    return [f"{name}-{n}" for name in names]


class MustNotRun(Exception):
    pass


class Counted:
    """A step function: each call is a new effect with a new answer (like a payment id)."""

    def __init__(self, fail_on=(), crash_on=()):
        self.calls = 0
        self.fail_on, self.crash_on = set(fail_on), set(crash_on)

    def __call__(self, *args):
        self.calls += 1
        if self.calls in self.crash_on:
            raise Crash(f"simulated crash inside the step (call {self.calls})")
        if self.calls in self.fail_on:
            raise ValueError(f"the step failed (call {self.calls})")
        return {"call": self.calls, "args": list(args)}


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
        return memo_step(db, run_id, name, fn, *args)
    except MustNotRun:
        raise Fail(f"memo_step ran fn for step {name!r} of run {run_id!r} although its result "
                   "was already recorded",
                   "look the (run_id, name) row up first and return its result if it is there") from None


@q1.test("the first call runs fn once and returns its result",
         hint="no row yet: call fn(*args), store json.dumps(result), return the result")
def _(memo_step, open_memo):
    with scratch("ex02") as folder:
        db = _open(open_memo, os.path.join(folder, "memo.db"))
        fn = Counted()
        run, = fresh_ids("run")
        got = _call(memo_step, db, run, "pay", fn, "A-17", 40)
        if fn.calls != 1:
            raise Fail(f"fn was called {fn.calls} times on the first call; expected once")
        if got != {"call": 1, "args": ["A-17", 40]}:
            raise Fail(f"memo_step returned {got!r}; expected fn's result "
                       "{'call': 1, 'args': ['A-17', 40]}")


@q1.test("a second call for the same run and step returns the recorded result without running fn",
         hint="on replay, json.loads the stored text and return it; fn must not run again")
def _(memo_step, open_memo):
    with scratch("ex02") as folder:
        db = _open(open_memo, os.path.join(folder, "memo.db"))
        fn = Counted()
        run, = fresh_ids("run")
        first = _call(memo_step, db, run, "pay", fn, "A-17")
        again = _call(memo_step, db, run, "pay", fn, "A-17")
        if fn.calls != 1:
            raise Fail(f"fn ran {fn.calls} times for the same run and step; expected once")
        if again != first:
            raise Fail(f"the replay returned {again!r}, but the first call returned {first!r}")


@q1.test("another run, or another step name, runs fn again",
         hint="the row's key is (run_id, name): both must match for a replay")
def _(memo_step, open_memo):
    with scratch("ex02") as folder:
        db = _open(open_memo, os.path.join(folder, "memo.db"))
        fn = Counted()
        run_a, run_b = fresh_ids("run-a", "run-b")
        _call(memo_step, db, run_a, "pay", fn)
        other_run = _call(memo_step, db, run_b, "pay", fn)
        other_step = _call(memo_step, db, run_a, "email", fn)
        if fn.calls != 3 or other_run == other_step:
            raise Fail(f"fn ran {fn.calls} times for ({run_a}, pay), ({run_b}, pay), "
                       f"({run_a}, email); expected 3: each is a different step of a run")


@q1.test("the result is committed before memo_step returns: a fresh connection sees it",
         hint="call db.commit() after the INSERT and before `return`")
def _(memo_step, open_memo):
    with scratch("ex02") as folder:
        path = os.path.join(folder, "memo.db")
        db = _open(open_memo, path)
        run, = fresh_ids("run")
        first = _call(memo_step, db, run, "pay", Counted())
        fresh = _open(open_memo, path)
        fresh.execute("PRAGMA busy_timeout = 200")
        try:
            got = memo_step(fresh, run, "pay", must_not_run)
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
         hint="store json.dumps(result) in the result column; read it back with json.loads")
def _(memo_step, open_memo):
    import json
    with scratch("ex02") as folder:
        path = os.path.join(folder, "memo.db")
        db = _open(open_memo, path)
        run, = fresh_ids("run")
        value = _call(memo_step, db, run, "pay", Counted(), "A-17")
        try:   # through the learner's own connection: this test is about the format only
            row = db.execute("SELECT typeof(result), result FROM memo WHERE run_id = ? AND name = ?",
                             (run, "pay")).fetchone()
        except sqlite3.DatabaseError as exc:
            raise Fail(f"could not read the memo table ({exc})", "keep open_memo as it was given") from None
        if row is None:
            raise Fail(f"no row for ({run}, pay) in the memo table after the call",
                       "INSERT a row (run_id, name, json.dumps(result)) after fn returns")
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
def _(memo_step, open_memo):
    with scratch("ex02") as folder:
        path = os.path.join(folder, "memo.db")
        for failure in ({"crash_on": {1}}, {"fail_on": {1}}):
            run, = fresh_ids("run")
            db = _open(open_memo, path)
            fn = Counted(**failure)
            name = "pay" if "crash_on" in failure else "email"
            try:
                returned = _call(memo_step, db, run, name, fn)
                raise Fail(f"fn raised {'a dl.Crash' if 'crash_on' in failure else 'a ValueError'}, "
                           f"but memo_step returned {returned!r} instead of letting it through",
                           "do not catch fn's exception in memo_step: a step that failed is not "
                           "done, so nothing is recorded and the caller sees the error")
            except (Crash, ValueError):
                pass
            db.close()                    # the process died: its connection is gone
            db = _open(open_memo, path)   # the restarted process opens the file again
            got = _call(memo_step, db, run, name, fn)
            db.close()
            kind = "a dl.Crash" if "crash_on" in failure else "a ValueError"
            if fn.calls != 2 or got != {"call": 2, "args": []}:
                raise Fail(f"after {kind} inside fn, the next call returned {got!r} and fn ran "
                           f"{fn.calls - 1} more time(s); expected fn to run again and its "
                           "result {'call': 2, 'args': []} to be returned")


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "survive a real kill", answers=["refund_flow"])

STEPS = {"lookup": "lookup_order", "refund": "issue_refund", "email": "email_customer",
         "close": "close_ticket"}
ORDER_ARGS = ("A-17", 40)


class Fresh:
    """A place where refund_flow runs in fresh processes: its own memo file and world."""

    def __init__(self, folder, source):
        self.folder = folder
        self.run_id, = fresh_ids("killed-run")
        write_module(folder, source)

    def run(self, kill=None):
        return run_fresh(self.folder, "refund_flow", os.path.join(self.folder, "memo.db"),
                         os.path.join(self.folder, "world"), self.run_id, *ORDER_ARGS,
                         wrap=STEPS.values(), kill=kill)

    def starts(self, log):
        by_function = {v: k for k, v in STEPS.items()}
        counts = {step: 0 for step in STEPS}
        for line in log:
            what, _, fn = line.partition(" ")
            if what == "start" and fn in by_function:
                counts[by_function[fn]] += 1
        return counts

    def world(self):
        world = examples.world_at(os.path.join(self.folder, "world"))
        return {"refund": world.payments.count(), "email": world.mailer.count(),
                "close": world.tickets.closes()}


def _source(refund_flow):
    needs_callable(refund_flow, "refund_flow")
    try:
        return module_source(refund_flow)
    except NotPortable as exc:
        raise Fail(str(exc), "open the memo inside refund_flow (db = open_memo(db_path)) and "
                             "pass everything else as an argument") from None


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


def _uninterrupted(refund_flow):
    with scratch("ex02") as folder:
        fresh = Fresh(folder, _source(refund_flow))
        run = fresh.run()
        result = _finished(run, "refund_flow, in a fresh process")
        return result, fresh.starts(run.log), fresh.world()


@q2.test("runs the whole refund in a fresh process: each step once",
         hint="call memo_step for lookup, refund, email and close, in that order")
def _(refund_flow):
    result, starts, effects = _uninterrupted(refund_flow)
    if any(n != 1 for n in starts.values()) or any(n != 1 for n in effects.values()):
        never = [STEPS[s] for s, n in starts.items() if n == 0]
        hint = ""
        if never:
            hint = (f"{', '.join(never)} never ran: give every step its own name; a step whose "
                    "name is already recorded replays that row instead of running")
        raise Fail(f"steps run {starts}, effects {effects}; expected each exactly once", hint)


def _killed_then_resumed(refund_flow, moment):
    """For each step: kill a fresh process at `moment` of it, resume in another one."""
    source = _source(refund_flow)
    expected, _, _ = _uninterrupted(refund_flow)
    out = []
    for step, fn_name in STEPS.items():
        with scratch("ex02") as folder:
            fresh = Fresh(folder, source)
            killed = fresh.run(kill=(fn_name, moment))
            if not killed.killed:
                _finished(killed, "refund_flow")
                raise Fail(f"the process was never killed: refund_flow did not call "
                           f"{fn_name} (step {step!r})")
            resumed = fresh.run()
            result = _finished(resumed, f"the resumed run (after a kill at {step!r})")
            out.append((step, fresh.starts(resumed.log), fresh.world(), result, expected))
    return out


@q2.test("killed (SIGKILL) just before a step: a fresh process finishes the run, and no "
         "step that had finished runs again",
         hint="every finished step must be read back from the memo file by the new process; "
              "a dict in memory, or a commit that waits until the end, is lost with the process")
def _(refund_flow):
    for step, starts, effects, result, expected in _killed_then_resumed(refund_flow, "before"):
        order = list(STEPS)
        again = [s for s in order[:order.index(step)] if starts[s] > 1]
        if again:
            raise Fail(f"after a kill just before {step!r}, the finished step(s) "
                       f"{', '.join(again)} ran again (executions {starts})")
        if any(n != 1 for n in effects.values()):
            raise Fail(f"after a kill just before {step!r}: refunds, emails, closes = {effects}; "
                       "expected each exactly once")
        if result != expected:
            raise Fail(f"after a kill just before {step!r} the run returned {result!r}; "
                       f"an uninterrupted run returns {expected!r}")


@q2.test("killed right after a step's effect, before its checkpoint: only that step runs again",
         hint="commit each step's result as soon as it returns; then only the step caught in "
              "the window between effect and checkpoint can repeat (lesson 03 closes it)")
def _(refund_flow):
    for step, starts, effects, result, expected in _killed_then_resumed(refund_flow, "after"):
        want = {s: 2 if s == step else 1 for s in STEPS}
        if starts != want:
            raise Fail(f"after a kill right after {step!r} ran, steps were executed {starts}; "
                       f"expected {want}: the killed step repeats, every other step runs once")


@q2.test("a finished run, started again in a fresh process, replays every step and runs none",
         hint="a completed run's steps are all in the memo table: every call should replay")
def _(refund_flow):
    with scratch("ex02") as folder:
        fresh = Fresh(folder, _source(refund_flow))
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
