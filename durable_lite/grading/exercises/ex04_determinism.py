"""Exercise 04: find and fix the non-determinism in an orchestration (the clock, an id).

`dl.faults.sweep` crashes the learner's receipt workflow at every point and resumes it on a
fake clock with predictable ids; `EngineRuns` runs single cases whose clock starts at a
drawn time. A replay that diverges shows as its own status. Both resume in this process,
where everything the answer keeps in memory survives; so what a restart must survive is
judged in fresh Python processes (`child.run_fresh` on `portable.module_source`, which runs
the answer's cells again from the top): the first is killed with SIGKILL, another resumes.

The properties a right answer has, each judged by the test that names it, and how the cases
vary it (tests/test_grading_properties_01_07.py and tests/test_grading_round4_04_07.py have,
for each, an answer wrong in that property alone, and it fails):

q1 receipt(ctx, folder, order_id)  (drawn orders and run ids)
  - a crash at any point, then a resume in the same process: the result of an uninterrupted
    run (an id from uuid4(), a time from time.time() in the orchestration fail);
  - killed (SIGKILL) right after the customer was emailed, then resumed by another new
    Python process (another hash seed, its wall clock days later): the receipt returned is
    the one emailed (a receipt id kept in a dict or an lru_cache, made from a salt drawn at
    import, from hash() of a string or from the date, fails);
  - issued_at is the time the run recorded with ctx.now(), on a clock that starts at a
    drawn time and moves an hour before the resume (a literal time fails);
  - the customer is emailed the receipt the run returns, at every crash point;
  - two receipts for one order, issued in the same second by two new Python processes
    (their clocks reading the same drawn time, their ids, seeds and hash seeds drawn apart),
    each crashed and resumed: two ids (an id made from the order, from the time —
    int(ctx.now()) — or from a count kept in memory, which starts again in every process,
    fails);
  - the given steps keep their names ('lookup', then 'email'), and the result its shape:
    exactly receipt ('rcpt-' and an id), issued_at and order (the order id). The exercise
    starts from code to fix, and that code keeps both, so both are judged inside tests the
    given code fails (the sweep's test, the issued_at test): every test fails it.
"""

import os

from ...faults import AFTER_CHECKPOINT, BEFORE_STEP, CrashAt, CrashPlan
from .. import wall_clock
from ..checks import Exercise, Fail, NotAttempted
from ..child import run_fresh, write_module
from ..harness import (EngineRuns, START, crash_label, diverged, needs_workflow, scratch,
                       sweep_of, unfinished)
from ..ledgers import Ledgers
from ..portable import NotPortable, module_source

EXERCISE = Exercise("04_determinism", "Replay determinism",
                    lesson="notebooks/04_replay_determinism.ipynb")


def _changed(result, expected) -> list:
    """The keys whose values differ between two result dicts."""
    if not isinstance(result, dict) or not isinstance(expected, dict):
        return []
    return sorted(k for k in set(result) | set(expected) if result.get(k) != expected.get(k))


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "a receipt that survives replay", answers=["receipt"])


def _subjects(folder):
    return [m["subject"] for m in Ledgers(folder).mail()]


def _swept(receipt, draw):
    """Every crash point of the receipt, each resumed at once on the same fake clock: a
    workflow that reads ctx.now() after a step returns the same time however it crashed,
    so only what is read anew on a replay (time.time(), uuid4()) can change the result.
    (The next test moves the clock an hour between the crash and the resume.) Every case
    has the same run id, so an id made from the run (one receipt per run) is the same too."""
    needs_workflow(receipt, "receipt")
    return sweep_of(receipt, draw.order_id(), what="receipt", observe=_subjects,
                    run_id=draw.run_id("receipt"))


GIVEN_STEPS = ["lookup", "email"]
RESULT_KEYS = {"receipt", "issued_at", "order"}


def _expect_shape(result, order_id, where):
    """The result keeps the given shape: exactly receipt ('rcpt-...'), issued_at, order."""
    if not isinstance(result, dict) or set(result) != RESULT_KEYS:
        keys = sorted(result) if isinstance(result, dict) else type(result).__name__
        raise Fail(f"{where}, the run returned {result!r} (keys {keys}); the given workflow "
                   f"returns a dict with exactly the keys {sorted(RESULT_KEYS)}",
                   "change only the two reads the question is about: the result keeps the "
                   "shape it was given")
    if result["order"] != order_id:
        raise Fail(f"{where}, the run for order {order_id!r} returned order {result['order']!r}")
    if not str(result["receipt"]).startswith("rcpt-"):
        raise Fail(f"{where}, the receipt id {result['receipt']!r} lost its 'rcpt-' prefix",
                   "keep the receipt id's prefix as it was given")


def _receipt_id(result):
    return result.get("receipt") if isinstance(result, dict) else None


@q1.test("a crash at any point of the given steps ('lookup', then 'email'), then a resume: "
         "the same receipt as an uninterrupted run",
         hint="read the time with ctx.now() and make the id with ctx.uuid(): both are recorded "
              "the first time and replayed after; time.time() and uuid.uuid4() are read anew "
              "on every replay")
def _(receipt, draw):
    s = _swept(receipt, draw)
    steps = [row["step"] for row in s.rows if row["kind"] == "step" and row["when"] == BEFORE_STEP]
    if [name for name in steps if name in GIVEN_STEPS] != GIVEN_STEPS:
        raise Fail(f"the run recorded the steps {steps}; the given workflow records "
                   f"{GIVEN_STEPS}, once each and in that order",
                   "change only the two reads the question is about: the steps keep the names "
                   "they were given")
    expected = s.clean["result"]
    for row in s.rows:
        where = f"crash {crash_label(row)}, then resume"
        if diverged(row["status"], row["error"]):
            raise Fail(f"{where}: the replay diverged ({row['error'].split('. ')[0]})",
                       "the replay made different calls than the first attempt: something in "
                       "the orchestration changed between the two (the clock, an id, randomness)")
        if row["status"] != "completed":
            unfinished(row["status"], row["error"], f"receipt ({where})")
        if row["same_result"]:
            continue
        hint = ""
        changed = _changed(row["result"], expected)
        if "receipt" in changed:
            hint = ("the receipt id came out differently on the replay: make it from "
                    "ctx.uuid(), which records the id once")
        elif changed == ["issued_at"]:
            hint = ("the time came out differently on the replay: read it with ctx.now(), "
                    "which records it once")
        raise Fail(f"{where}: the run returned {row['result']!r}; an uninterrupted run returned "
                   f"{expected!r}", hint)


@q1.test("in a result of the given shape (receipt 'rcpt-...', issued_at, order), issued_at "
         "is the time the run recorded with ctx.now(), on a clock that starts at a new time for "
         "every check",
         hint="read the time with ctx.now(); a time typed in, or read from time.time(), is not "
              "the run's clock")
def _(receipt, draw):
    needs_workflow(receipt, "receipt")
    start = START + draw.randint(1, 3000) * 86400 + draw.randint(0, 86399)
    for crash in (None, draw.choice(["lookup", "email"])):
        order_id = draw.order_id()
        with scratch("ex04") as folder:
            runs = EngineRuns(folder, start=start)
            run_id = draw.run_id("receipt")
            run = runs.run(receipt, folder, order_id, run_id=run_id,
                           crash=None if crash is None else CrashAt(crash, AFTER_CHECKPOINT))
            if run.status != "completed":
                unfinished(run.status, run.error, "receipt")
            recorded = [row["result"] for row in runs.engine().history(run_id)
                        if row["kind"] == "value" and row["step"] == "now"]
        where = "with no crash" if crash is None else f"after a crash after step {crash!r}"
        _expect_shape(run.result, order_id, where)
        issued = run.result["issued_at"]
        if issued not in recorded:
            raise Fail(f"{where}, on a clock that read {start:.0f} when the run began, the run "
                       f"returned issued_at {issued!r}; the time it recorded with ctx.now() is "
                       f"{recorded[0] if recorded else 'nothing: it never called ctx.now()'}")


@q1.test("the receipt in the customer's email is the receipt the run returns",
         hint="if the email was sent before the crash, the replay must rebuild the very same "
              "receipt id and time: ctx.uuid() and ctx.now() give the recorded ones back")
def _(receipt, draw):
    s = _swept(receipt, draw)
    for row in [None, *s.rows]:
        case = s.clean if row is None else row
        receipt_id, subjects = _receipt_id(case["result"]), case["observed"]
        stale = [subject for subject in subjects if str(receipt_id) not in subject]
        if not receipt_id or not subjects or stale:
            where = "with no crash" if row is None else f"crash {crash_label(row)}, then resume"
            raise Fail(f"{where}: the run returned receipt {receipt_id!r}, but the customer "
                       f"was emailed {subjects!r}")


# In fresh processes -------------------------------------------------------------------------
# The entry points of the fresh processes, appended to the learner's module. Each engine
# stands for one process: its own ids (uuid4-shaped, from a seed of its own), its own seed
# for ctx.random(), its clock reading the time it is given.
_ENTRIES = """

def _check_engine(store, at, ids, seed, crash=None):
    import durable_lite as _dl
    from durable_lite.grading.harness import SeededIds as _SeededIds
    return _dl.Engine(_dl.SQLiteStore(store), _dl.FakeClock(at), ids=_SeededIds(ids),
                      seed=seed, crash_at=crash)


def check_start_and_die(store, world, order_id, run_id, at, ids, seed):
    from durable_lite.grading.exercises.ex04_determinism import KillOnceEmailed as _Kill
    run = _check_engine(store, at, ids, seed, _Kill(world)).start(receipt, world, order_id,
                                                                  run_id=run_id)
    return {"status": run.status, "error": run.error, "result": run.result}


def check_resume(store, run_id, at, ids, seed):
    run = _check_engine(store, at, ids, seed).resume(run_id)
    return {"status": run.status, "error": run.error, "result": run.result}


def check_issue(store, world, order_id, run_id, at, ids, seed):
    # one receipt per process, crashed and resumed by a second engine of the same process:
    # the question here is what two processes issue, not what a restart keeps
    import durable_lite as _dl
    crash = _dl.faults.CrashAt("email", "after_checkpoint")
    try:
        _check_engine(store, at, ids, seed, crash).start(receipt, world, order_id, run_id=run_id)
    except _dl.Crash:
        pass
    return check_resume(store, run_id, at + 3600, ids + "-resumed", seed + 1)
"""


class KillOnceEmailed(CrashPlan):
    """In the first of the fresh processes: SIGKILL at the first checkpoint after which the
    customer has mail, whatever the answer named the step that sent it (the names are the
    sweep's test's to judge)."""

    def __init__(self, world):
        super().__init__()
        self.world = world

    def __bool__(self):
        return True                 # asked at every crash point, though nothing is planned

    def check(self, step, occurrence, when):
        if when == AFTER_CHECKPOINT and Ledgers(self.world).mail():
            CrashAt(step, when, kill=True).fire()


def _fresh_module(folder, receipt):
    """The learner's notebook statements, run again in a new process, then our entry points;
    the wall clock of a process started with `wall_clock.environment(...)` reads later."""
    try:
        source = module_source(receipt, extra=_ENTRIES, call_as={"receipt": receipt})
    except NotPortable as exc:
        raise Fail(str(exc)) from None
    write_module(folder, wall_clock.prelude() + source)


def _in_a_new_process(folder, entry, *args, what, env=None, killed_on_purpose=False):
    """Call `entry` in a new Python process and return its result (None if it was killed,
    and was meant to be)."""
    run = run_fresh(folder, entry, *args, env=env)
    if run.killed and killed_on_purpose:
        return None
    if not run.finished:
        if run.error and "NotImplementedError" in run.error:
            raise NotAttempted(f"{what}: your code still raises NotImplementedError")
        raise Fail(f"{what} failed: {run.error or f'exit status {run.returncode}'}",
                   "the check runs your notebook's cells again in a new process, as a restart "
                   "would: keep the answer's cell runnable from the top")
    return run.result


RESTART_LOST = ("the run was resumed by a new Python process, days later: it had none of the "
                "first process's memory (no dict, no lru_cache, no counter), drew its own "
                "salts, hash() seeds and uuid4() values, and its wall clock read another date; "
                "only what the run recorded in its history comes back the same there")


@q1.test("killed (SIGKILL) right after the customer was emailed, resumed by another new "
         "process (days later by its wall clock): the run returns the receipt it emailed",
         hint="a restart keeps the run's history and nothing else: the receipt id must come "
              "back from what the run recorded, not from the process's memory")
def _(receipt, draw):
    needs_workflow(receipt, "receipt")
    order_id, run_id = draw.order_id(), draw.run_id("receipt")
    at = START + draw.randint(1, 3000) * 86400 + draw.randint(0, 86399)
    ahead = draw.randint(2, 30) * 86400 + draw.randint(1, 86399)
    seeds = draw.distinct(lambda: draw.randint(1, 9999), 2)
    with scratch("ex04") as folder:
        _fresh_module(folder, receipt)
        store, world = os.path.join(folder, "runs.db"), os.path.join(folder, "world")
        first = _in_a_new_process(folder, "check_start_and_die", store, world, order_id, run_id,
                                  at, draw.token(8), seeds[0], what="receipt in a new process",
                                  env={"PYTHONHASHSEED": str(seeds[0])}, killed_on_purpose=True)
        if first is not None:
            if first["status"] != "completed":
                unfinished(first["status"], first["error"], "receipt, in a new process")
            raise Fail(f"receipt ran to its end in a new process ({first['result']!r}) without "
                       "emailing the customer", "keep the given steps")
        emailed = _subjects(world)
        second = _in_a_new_process(folder, "check_resume", store, run_id, at + 3600,
                                   draw.token(8), seeds[1], what="the resume in another new process",
                                   env={"PYTHONHASHSEED": str(seeds[1]),
                                        **wall_clock.environment(ahead)})
    where = (f"killed right after the customer was emailed, then resumed by another process "
             f"whose wall clock read {ahead / 86400:.1f} days later")
    if second["status"] != "completed":
        unfinished(second["status"], second["error"], f"receipt ({where})")
    receipt_id = _receipt_id(second["result"])
    if not receipt_id or any(str(receipt_id) not in subject for subject in emailed):
        raise Fail(f"{where}: the run returned {second['result']!r}, but the killed process had "
                   f"emailed the customer {emailed!r}", RESTART_LOST)


@q1.test("two receipts for the same order, issued in the same second by two new processes, "
         "each crashed and resumed: two different receipt ids, each the one its customer was "
         "emailed",
         hint="a receipt id must be unique per receipt — made from the order, or from the "
              "time, a second receipt can repeat the first's id; counted in memory, every new "
              "process counts from the start again — and the same on every replay")
def _(receipt, draw):
    needs_workflow(receipt, "receipt")
    order_id = draw.order_id()
    at = START + draw.randint(1, 3000) * 86400 + draw.randint(0, 86399)
    with scratch("ex04") as folder:
        _fresh_module(folder, receipt)
        store, world = os.path.join(folder, "runs.db"), os.path.join(folder, "world")
        ids = draw.distinct(lambda: draw.token(8), 2)
        seeds = draw.distinct(lambda: draw.randint(1, 9999), 2)
        where = f"in a new process, crash {crash_label(CrashAt('email', AFTER_CHECKPOINT))}, then resume"
        results = []
        for source, seed in zip(ids, seeds):            # two processes, one second
            sent = len(Ledgers(world).mail())
            run = _in_a_new_process(folder, "check_issue", store, world, order_id,
                                    draw.run_id("receipt"), at, source, seed,
                                    what="receipt in a new process",
                                    env={"PYTHONHASHSEED": str(seed)})
            if run["status"] != "completed":
                unfinished(run["status"], run["error"], f"receipt ({where})")
            receipt_id = _receipt_id(run["result"])
            subjects = [m["subject"] for m in Ledgers(world).mail()[sent:]]
            if not receipt_id or not subjects or any(str(receipt_id) not in s for s in subjects):
                raise Fail(f"{where}: the run returned receipt {receipt_id!r}, but the customer "
                           f"was emailed {subjects!r}")
            results.append(receipt_id)
    if results[0] == results[1]:
        raise Fail(f"two new processes issuing receipts for order {order_id!r}, both begun when "
                   f"the clock read {at:.0f}, returned the same receipt {results[0]!r}: the "
                   "customer could not tell the two receipts apart")
