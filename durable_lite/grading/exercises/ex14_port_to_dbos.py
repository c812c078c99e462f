"""Exercise 14: port two durable_lite workflows to DBOS; graded by running each port beside
its original and comparing what the simulated world recorded.

The originals live in durable_lite/engines/lite/subscription.py (the notebook
shows them): `cancel_subscription` (a keyed cancellation, a keyed refund of the unused
part when there is one, an unkeyed goodbye email) and `pause_subscription` (an email, a
wait for the customer's answer with a deadline, then a keyed pause or a second email).

How a port is run. The learner's answer is a DBOS workflow defined in a notebook cell. The
check reads that whole cell (the code Python compiled it from), puts the exercise's given
imports above it, and saves it as a module in a fresh temporary folder. DBOS worker
processes (engines/dbos/worker.py) import that module, so nothing in the notebook's memory
helps, and run it on a system database of their own: SQLite where DBOS can use it, else a
throwaway Postgres; where neither works, every check says so.

q1, the same crash: each case draws a subscription, an amount and a run id (the DBOS
workflow id), pre-loads two fresh worlds with the same earlier refunds and cancellations
(so no literal id can match), then runs the original in durable_lite child processes and
the port in DBOS workers, each SIGKILLed at the same crash point and restarted by a fresh
process (engines/compare/killed.py). The outcomes must agree: whether the process was killed, the
final status and result, the steps recorded (when the fresh process took over, and at the
end), and the ledgers (refunds, refund requests, plan records, emails).

Properties a right q1 answer has, and the test whose fresh cases vary each:
  - its steps keep the original's names and order (lookup, cancel, refund, goodbye),
    declared with dbos/faults.py's step so the crash points exist: every test compares the
    steps recorded; "killed at two more crash points" draws two of the nine other points;
  - both branches: a refund when something is unused (every test), none at unused = 0
    (its own test: the boundary of `if unused > 0`);
  - what survives a crash inside an effect's window: cancel and refund keyed, so a
    restarted worker's repeat is recognised (the cancel and refund window tests); the
    goodbye email unkeyed, so it goes out twice, as the original's does (its window test);
  - the keys themselves: the original's, derived from the workflow id and the same parts
    (the keys test: another stable key passes the windows and fails here);
  - the result built from what the steps returned: ids drawn by worlds that have done other
    work before, so no literal id can match (the no-crash test);
  - a resume in another process: every crash test restarts the port in a fresh worker.
A hint names what the test observed: which steps were recorded where the original's were
not, which ledger grew, which keys differed.

q2, the same answers: the customer says yes (with a drawn number of months), says no,
never answers before the deadline, or answers late but within it; the original runs on a
fake clock and the grader's `engine.signal`, the port in a DBOS worker with a real deadline
and a message the grader sends through a DBOSClient. The outcomes must agree.

Properties a right q2 answer has, and the test whose fresh cases vary each:
  - every branch: yes, no, no answer at all (three tests), and "no answer" is not "no";
  - the answer's content: the months are drawn (the yes test);
  - the topic: the answer comes on CONFIRM (every answered test);
  - the deadline is the workflow's `deadline` argument, in seconds, not a constant: the
    silent test draws two deadlines far apart and the port's wait (DBOS's own record of its
    DBOS.recv) must last each one; the late-answer test answers after a drawn delay that
    a short constant would miss, within a drawn deadline;
  - an answered wait ends at once, not at its deadline (the yes and no tests: a deadline
    nobody reaches);
  - its steps keep the original's names, every effect inside one (recorded steps compared);
  - the pause key is the original's, from the workflow id (the yes test).
"""

import inspect
import os
import secrets
import sqlite3
import sys
import time

from ...clock import FakeClock, SequentialIds
from ...engine import Engine
from ...engines.compare import killed
from ...engines.dbos import postgres, support as dbos_support
from ...engines.lite import subscription as subscriptions
from ...faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP, CrashAt
from ...sim import World
from ...store import SQLiteStore
from ..checks import Exercise, Fail, NotAttempted
from ..harness import START, crash_label, scratch, step_names
from ..portable import cell_source, defines

# Loaded now, before any answer cell runs, so the grader's fingerprint of the grading code
# in memory covers them too (protocol.py). Without DBOS installed, every check says so.
try:
    from ...engines.dbos import worker as dbos_worker
except ImportError:
    dbos_worker = None

# A test starts DBOS workers and waits for real deadlines: on a busy machine (a class graded
# beside a running JupyterLab) one took more than the grader's usual 20 s with an honest port.
EXERCISE = Exercise("14_port_to_dbos", "Port a workflow to DBOS",
                    lesson="notebooks/14_graduating_to_a_real_engine.ipynb",
                    requires=lambda: available(), test_time_limit=60)

ORIGINAL = subscriptions.__name__
CANCEL, PAUSE = "ex14-cancel-subscription", "ex14-pause-subscription"   # registered names
STEPS = ("lookup", "cancel", "refund", "goodbye")
# What the saved module starts with: the exercise's given imports (its first code cell).
PREAMBLE = '''\
from dbos import DBOS

from durable_lite.engines.dbos.faults import step
from durable_lite.engines.lite.subscription import (CONFIRM, DAY, cancel_plan,
                                                    lookup_subscription, pause_plan,
                                                    refund_unused, send_email)
from durable_lite.keys import derive_key
'''

q1 = EXERCISE.question("q1", "cancel_subscription on DBOS, under the same crash",
                       answers=["cancel_subscription"])
q2 = EXERCISE.question("q2", "a wait with a deadline on DBOS", answers=["pause_subscription"])


# can DBOS run here? ------------------------------------------------------------------------
def available():
    """(True, "") if DBOS can run here on SQLite or on a throwaway Postgres, else (False, why)."""
    try:
        dbos_support.require()
    except ImportError as exc:
        return False, str(exc)
    sqlite_ok, sqlite_why = dbos_support.sqlite_usable()
    if sqlite_ok:
        return True, ""
    postgres_ok, postgres_why = postgres.available()
    if postgres_ok:
        return True, ""
    return False, f"{sqlite_why}; and {postgres_why}"


_postgres = []          # one throwaway server per process, if SQLite cannot be used


def _database(folder) -> str:
    """A system-database URL for one test: a SQLite file in its folder, else the shared
    Postgres. Fails, saying so, where DBOS cannot run."""
    ok, why = available()
    if not ok:
        version = ".".join(map(str, sys.version_info[:3]))
        raise Fail(f"DBOS is not available on this Python ({version}), so this check cannot "
                   f"run here: {why}",
                   "nothing is wrong with your answer: grade this exercise with Python "
                   "3.10, 3.11 or 3.12 (`make lab` installs DBOS there)")
    if dbos_support.sqlite_usable()[0]:
        return dbos_support.sqlite_url(os.path.join(folder, "dbos.sqlite"))
    if not _postgres:
        _postgres.append(postgres.TempPostgres("ex14").start())     # stopped at exit
    # A database of its own, as each SQLite file is: tests draw the same run ids from the
    # same seed, and DBOS would find the previous test's workflow under that id.
    return _postgres[0].new_database("ex14")


# the learner's port, as a module a fresh process imports -----------------------------------
def _taken_names() -> set:
    """Workflow names a DBOS worker of this course registers before it imports a port."""
    # what dbos/worker.py imports
    from ...engines.dbos import refund as refund_dbos, research as research_dbos
    return {v.dbos_function_name for m in (refund_dbos, research_dbos)
            for v in vars(m).values() if hasattr(v, "dbos_function_name")}


def _cell_source(fn) -> str:
    """The whole cell (or file) the function was defined in, as Python compiled it."""
    source = cell_source(fn)
    if source is None:
        raise Fail(f"the code that defines {getattr(inspect.unwrap(fn), '__name__', fn)!r} "
                   "cannot be read",
                   "define the steps and the workflow with `def` in the answer cell, and run it")
    return source


def answered(answer, name: str) -> str:
    """The DBOS workflow name `answer` is registered under, once it looks like a port."""
    if answer is None:
        raise NotAttempted(f"{name} is still None")
    if hasattr(answer, "fn") and hasattr(answer, "version"):
        raise Fail(f"{name} is a durable_lite workflow (@dl.workflow), not a DBOS one",
                   "port it: @DBOS.workflow(name=...) on a function without ctx, whose steps "
                   "are functions declared with step(name)")
    if not callable(answer):
        raise Fail(f"{name} should be a DBOS workflow function, but it is a "
                   f"{type(answer).__name__}", f"pass the function itself: check(..., {name})")
    registered = getattr(answer, "dbos_function_name", None)
    if registered is None or str(registered).startswith("<temp>."):
        raise Fail(f"{name} is not a DBOS workflow" +
                   (" (it is declared as a step)" if registered else ""),
                   "decorate the workflow function with @DBOS.workflow(name=...)")
    return str(registered)


def save_port(answer, name: str, folder) -> str:
    """Save the cell that defines `answer`, the given imports first, as a module in
    `folder`; return the module's name. Call it once `_database` found DBOS can run."""
    registered = answered(answer, name)
    if registered in _taken_names():
        raise Fail(f"{name} is registered under the name {registered!r}, which a workflow of "
                   "the lesson already uses; DBOS refuses two workflows with one name in a "
                   "process", "give it a name of its own: @DBOS.workflow(name=\"...\")")
    module = f"ex14_port_{secrets.token_hex(4)}"
    source = PREAMBLE + "\n\n# the answer cell\n" + _cell_source(answer)
    if not defines(source, name):
        raise Fail(f"the cell that defines the workflow does not define the name {name!r}",
                   f"name the workflow function {name}")
    with open(os.path.join(folder, module + ".py"), "w", encoding="utf-8") as f:
        f.write(source)
    return module


# the worlds ---------------------------------------------------------------------------------
class Case:
    """A drawn subscription and run, and what its world held before the run started."""

    def __init__(self, draw, unused=None):
        self.sub_id, *others = draw.distinct(draw.order_id, 1 + draw.randint(1, 3))
        self.unused = draw.amount(5, 200) if unused is None else unused
        self.run_id = draw.run_id("sub")
        self.earlier_refunds = [(other, draw.amount()) for other in others]
        self.earlier_plans = [draw.order_id() for _ in range(draw.randint(1, 3))]

    def world(self, folder) -> str:
        """A fresh world in `folder`, where the providers have done other work before."""
        path = os.path.join(folder, "world")
        world = World(path)
        try:
            for order, amount in self.earlier_refunds:
                world.payments.refund(order, amount, idempotency_key=f"earlier-{order}")
            for sub in self.earlier_plans:
                world.ledger("plans").record(key=f"earlier-{sub}",
                                             detail={"subscription": sub, "action": "cancel"})
        finally:
            world.close()
        return path


def recorded(folder) -> dict:
    """What the world in `folder` recorded, in the terms both engines are compared in."""
    world = World(folder)
    try:
        return {"refunds": [(r["refund_id"], r["order_id"], r["amount"])
                            for r in world.payments.refunds()],
                "refund requests": world.payments.calls(),
                "plans": [(r["record_id"], r["detail"]) for r in world.ledger("plans").records()],
                "emails": [m["to"] for m in world.mailer.sent()],
                "keys": {"payments": _payment_keys(folder),
                         "plans": [r["key"] for r in world.ledger("plans").records()]}}
    finally:
        world.close()


def _payment_keys(folder) -> list:
    """The idempotency keys the payments provider received with the refunds it recorded."""
    db = sqlite3.connect(os.path.join(folder, "payments.db"))
    try:
        return [k for k, in db.execute("SELECT idempotency_key FROM refunds ORDER BY id")]
    finally:
        db.close()


# q1: both engines, the same crash ------------------------------------------------------------
class Pair:
    """One test's runs: a port saved as a module, a system database, a folder per case."""

    def __init__(self, folder, answer):
        self.folder = folder
        answered(answer, "cancel_subscription")
        self.url = _database(folder)
        self.module = save_port(answer, "cancel_subscription", folder)
        self.cases = 0

    def run(self, case, crash=None):
        """(original's outcome, port's outcome): each killed at `crash`, then restarted."""
        self.cases += 1
        here = os.path.join(self.folder, f"case-{self.cases}")
        args = [case.sub_id, case.unused]
        original_world = case.world(os.path.join(here, "durable_lite"))
        port_world = case.world(os.path.join(here, "dbos"))
        original = killed.on_durable_lite(ORIGINAL, CANCEL, [original_world, *args],
                                          run_id=case.run_id, crash=crash,
                                          workdir=os.path.dirname(original_world))
        port = killed.on_dbos(f"{self.module}.cancel_subscription", [port_world, *args],
                              workflow_id=case.run_id, url=self.url, crash=crash,
                              imports=[self.module], python_path=[self.folder], timeout=20)
        if original["status"] != "completed" or (crash and not original["killed"]):
            raise RuntimeError(f"the original did not run as expected: {original}")
        return ({**original, **recorded(original_world)}, {**port, **recorded(port_world)})


def _where(case, crash) -> str:
    """"cancel_subscription(world, 'K-4821', 37) as run 'sub-…', killed right after step
    'refund' ran, then restarted": the case, so the learner can try it themselves."""
    what = "with no crash" if crash is None else f"killed {crash_label(crash)}, then restarted"
    return (f"cancel_subscription(folder, {case.sub_id!r}, {case.unused}) as run "
            f"{case.run_id!r}, {what}")


STEP_HINT = ("declare each step with step(name) from durable_lite.engines.dbos.faults (it is "
             "DBOS.step plus the course's crash points), named as in the original: "
             + ", ".join(STEPS))
IMPORT_HINT = ("the worker imports your answer cell on its own, with only the given imports "
               "above it: keep every step and the workflow in that one cell, and leave out "
               "anything that runs something when the cell runs")


def judge(original, port, case, crash=None, keys=False) -> None:
    """Fail with the first way the port's outcome differs from the original's."""
    where = _where(case, crash)
    if port["error"] and "NotImplementedError" in port["error"]:
        raise NotAttempted("your port (or a step it calls) still raises NotImplementedError")
    if port["status"] is None:
        raise Fail(f"{where}: the DBOS worker could not run your port: {port['error']}",
                   IMPORT_HINT)
    if crash is not None and not port["killed"]:
        raise Fail(f"{where}: durable_lite's process was killed {crash_label(crash)}; the DBOS "
                   f"worker ran your port without ever reaching that point (it ended "
                   f"{port['status']})", STEP_HINT)
    if port["status"] != "completed":
        raise Fail(f"{where}: your port ended {port['status']}"
                   + (f": {port['error']}" if port["error"] else "")
                   + "; the original completed", _failure_hint(port["error"]))
    _same_ledgers(original, port, case, where)
    if port["result"] != original["result"]:
        raise Fail(f"{where}: your port returned {port['result']!r}; the original returned "
                   f"{original['result']!r}",
                   "return the same dict as the original, built from what the steps returned")
    if port["replayed"] != original["replayed"]:
        raise Fail(f"{where}: when the fresh process took over, DBOS had recorded the steps "
                   f"{port['replayed']}; durable_lite had recorded {original['replayed']}",
                   "one DBOS step for each ctx.step of the original: the same names, in the "
                   "same order, the same branch")
    _same_steps(original, port, where)
    if keys and port["keys"] != original["keys"]:
        raise Fail(f"{where}: the providers received different idempotency keys: from the "
                   f"original {_new_keys(original, case)}, from your port {_new_keys(port, case)}",
                   "ctx.idempotency_key(*parts) is derive_key(run id, *parts), and on DBOS the "
                   "run id is the workflow id: build each key from it and the same parts")


def _same_steps(original, port, where) -> None:
    """The steps recorded by the end must be the original's; the hint says what differs."""
    want, got = original["steps"], port["steps"]
    if got == want:
        return
    raise Fail(f"{where}: DBOS recorded the steps {got} for your port by the end; durable_lite "
               f"recorded {want} for the original", _why_steps_differ(want, got))


def _why_steps_differ(want, got) -> str:
    extra = [s for s in got if s not in want]
    missing = [s for s in want if s not in got]
    if extra == ["refund"] and not missing:
        return ("your port ran a refund step where the original runs none: the original "
                "refunds only when there is something to refund")
    if missing == ["refund"] and not extra:
        return ("your port ran no refund step where the original ran one: when is there "
                "something to refund?")
    if sorted(got) == sorted(want):
        return "the same steps, in another order: call them in the original's order"
    if extra or missing:
        return (f"{STEP_HINT}; every call to a service inside one of them "
                f"(recorded by your port only: {extra}; by the original only: {missing})")
    return "each step once, as in the original"


def _failure_hint(error) -> str:
    if error and "NameError" in error:
        return IMPORT_HINT
    return "run your port once in the notebook (see “Drive it yourself”) to see where it fails"


def _new_keys(outcome, case) -> dict:
    earlier = len(case.earlier_refunds), len(case.earlier_plans)
    return {"payments": outcome["keys"]["payments"][earlier[0]:],
            "plans": outcome["keys"]["plans"][earlier[1]:]}


def _counts(outcome, case) -> dict:
    return {"refunds paid": len(outcome["refunds"]) - len(case.earlier_refunds),
            "refund requests": outcome["refund requests"] - len(case.earlier_refunds),
            "plan records": len(outcome["plans"]) - len(case.earlier_plans),
            "emails": len(outcome["emails"])}


def _same_ledgers(original, port, case, where) -> None:
    want, got = _counts(original, case), _counts(port, case)
    if want != got:
        wrong = "; ".join(f"{name} {got[name]} (the original's: {want[name]})"
                          for name in want if got[name] != want[name])
        raise Fail(f"{where}: your port's world recorded {wrong}",
                   _why_steps_differ(original["steps"], port["steps"])
                   if port["steps"] != original["steps"] else _why_counts_differ(want, got))
    for ledger, what in (("refunds", "refunds (id, subscription, amount)"),
                         ("plans", "plan records"), ("emails", "emails to")):
        if port[ledger] != original[ledger]:
            raise Fail(f"{where}: the {what} recorded for your port were {port[ledger]}; for "
                       f"the original {original[ledger]}",
                       "pass each service the same arguments as the original does")


def _why_counts_differ(want, got) -> str:
    """The steps recorded were the original's, so a ledger that grew more means a repeated
    step was not recognised by its provider, and one that grew less means a repeat was
    recognised where the original's was not."""
    if got["refunds paid"] > want["refunds paid"] or got["plan records"] > want["plan records"]:
        return ("the same steps ran, yet the provider recorded more: a step that ran again "
                "called it with another key, or none; give the keyed calls a key that is the "
                "same every time the step runs")
    if got["emails"] < want["emails"]:
        return ("the original sends the goodbye email without a key, so a crash right after "
                "it sends it twice; a port keeps the original's behaviour, window included")
    if got["refund requests"] > want["refund requests"] or got["emails"] > want["emails"]:
        return ("something ran more often than in the original: is every call to a service "
                "inside a step, and each step called once?")
    return "call every service the original calls, under the same conditions"


POINTS = [CrashAt(s, w) for s in STEPS for w in (BEFORE_STEP, AFTER_EFFECT, AFTER_CHECKPOINT)]
WINDOWS = [CrashAt(s, AFTER_EFFECT) for s in ("cancel", "refund", "goodbye")]
OTHERS = [p for p in POINTS if p not in WINDOWS]       # nine crash points


@q1.test("no crash: the same result and the same ledgers as the original",
         hint="one DBOS step per ctx.step, the same services with the same arguments, and "
              "the same dict returned")
def _(cancel_subscription, draw):
    with scratch("ex14") as folder:
        pair = Pair(folder, cancel_subscription)
        case = Case(draw)
        judge(*pair.run(case), case)


@q1.test("nothing left to refund (unused = 0): no refund, on either engine",
         hint="the original refunds only when there is something to refund: port the `if`, too")
def _(cancel_subscription, draw):
    with scratch("ex14") as folder:
        pair = Pair(folder, cancel_subscription)
        case = Case(draw, unused=0)
        judge(*pair.run(case), case)


def _window_test(crash):
    def test(cancel_subscription, draw):
        with scratch("ex14") as folder:
            pair = Pair(folder, cancel_subscription)
            case = Case(draw)
            judge(*pair.run(case, crash), case, crash)
    return test


for _crash, _name, _hint in [
        (WINDOWS[0], "killed right after the cancellation, before it was recorded, then "
                     "restarted: the same ledgers as the original",
         "the restarted worker runs the cancel step again: the provider must see the same "
         "key as the first time"),
        (WINDOWS[1], "killed right after the refund, before it was recorded, then restarted: "
                     "the same ledgers as the original",
         "the restarted worker runs the refund step again: the provider must see the same "
         "key as the first time"),
        (WINDOWS[2], "killed right after the goodbye email, before it was recorded, then "
                     "restarted: the same emails as the original (two)",
         "the original sends this email without a key; the port must do what the original "
         "does")]:
    q1.test(_name, hint=_hint)(_window_test(_crash))


@q1.test("killed at two more crash points, drawn fresh from the other nine, then restarted: "
         "the same ledgers, result and recorded steps as the original",
         hint=STEP_HINT)
def _(cancel_subscription, draw):
    with scratch("ex14") as folder:
        pair = Pair(folder, cancel_subscription)
        for crash in draw.sample(OTHERS, 2):
            case = Case(draw)
            judge(*pair.run(case, crash), case, crash)


@q1.test("the providers receive the same idempotency keys from both engines",
         hint="build each key as the original does, with DBOS's workflow id as the run id: "
              "then a request repeated across the move is still recognised")
def _(cancel_subscription, draw):
    with scratch("ex14") as folder:
        pair = Pair(folder, cancel_subscription)
        case = Case(draw)
        judge(*pair.run(case), case, keys=True)


# q2: both engines, the same answers ----------------------------------------------------------
ANSWERED_DEADLINE = 60.0      # a deadline nobody reaches: the answer must end the wait
SHORT_DEADLINES = (1.2, 1.7)  # the silent test draws one deadline from each range (real
LONG_DEADLINES = (4.3, 5.0)   # seconds on DBOS): no one constant lasts both, as
EARLY, LATE = 0.25, 2.0       # a wait may be EARLY shorter or LATE longer than its deadline
LATE_ANSWER = (1.8, 2.4)      # the late-answer test answers this long after the wait began,
LATE_DEADLINE = (5.0, 6.5)    # within a deadline drawn from here
PATIENCE = 20.0               # how long the grader waits for a port's run to end, from
                              # the answer (or, unanswered, from the run's first sight):
                              # 12 s once failed an honest port on a machine at load 6
BACKSTOP = 30.0               # more seconds for a worker that does not report when asked


def pause_on_durable_lite(folder, case, deadline, answer, delay=0.0) -> dict:
    """The original on a fake clock: started, then answered (`delay` seconds into its wait)
    or left past its deadline."""
    world = case.world(folder)
    clock = FakeClock(START)
    engine = Engine(SQLiteStore(os.path.join(folder, "runs.db")), clock, ids=SequentialIds("id"))
    engine.start(subscriptions.pause_subscription, world, case.sub_id, run_id=case.run_id,
                 deadline=deadline)
    if answer is not None:
        clock.advance(delay)
        engine.signal(case.run_id, subscriptions.CONFIRM, answer)
    else:
        clock.advance(deadline + 1)
    engine.recover()
    run = engine.get(case.run_id)
    steps = step_names(engine, case.run_id)
    engine.store.close()
    return {"status": run.status, "result": run.result, "error": run.error, "steps": steps,
            **recorded(world)}


def pause_on_dbos(folder, url, module, module_folder, case, deadline, answer,
                  delay=0.0) -> dict:
    """The port in a DBOS worker; the answer, if any, sent as a message once the workflow
    exists, or `delay` seconds after its "ask" step was recorded (as its wait began). Its
    status is "running" if it had not ended PATIENCE seconds after the answer was sent
    (or, unanswered, after the workflow was first seen): a busy machine's slow start is
    not the port's wait. "waited" is how long the run waited between its "ask" step and
    its next one, by DBOS's own record of the steps (None if it recorded no step after
    "ask")."""
    world = case.world(folder)
    worker = dbos_worker.start_worker(
        url, f"pause-{case.run_id}", imports=[module], python_path=[module_folder],
        timeout=PATIENCE + delay + BACKSTOP,
        start=[(f"{module}.pause_subscription", case.run_id, [world, case.sub_id],
                {"deadline": deadline})])
    try:
        if _started(worker, url, case.run_id,
                    after_step="ask" if answer is not None and delay else None) \
                and answer is not None:
            time.sleep(delay)
            client = dbos_support.client(url)
            try:
                client.send(case.run_id, answer, subscriptions.CONFIRM)
            finally:
                client.destroy()
        report = killed.reported(worker, PATIENCE + BACKSTOP, hurry_after=PATIENCE)
    finally:
        worker.kill()                  # also when the test is stopped while it waits
    since = "the answer was sent" if answer is not None else "it started"
    if report is None:
        return {"status": None, "result": None, "steps": [], "waited": None, "since": since,
                "error": f"the worker could not run your port: {killed.last_error(worker.log())}",
                **recorded(world)}
    found = report[case.run_id]
    status = found["status"]
    return {"status": None if status is None else dbos_support.status_word(status),
            "result": found["result"], "error": found["error"], "since": since,
            "engine_retries": killed.engine_retries(worker.log()),
            "steps": [s for s in found["steps"] if not s.startswith("DBOS.")],  # not recv
            "waited": _waited_after("ask", found["times"]), **recorded(world)}


def _waited_after(name, times):
    """Seconds between the end of step `name` and the start of the next step (not a DBOS.*
    call such as recv or sleep): how long the run waited there, however it waited."""
    ended = None
    for step, started, completed in times:
        if ended is not None and not step.startswith("DBOS.") and started is not None:
            return started - ended
        if step == name:
            ended = completed
    return None


def _started(worker, url, workflow_id, timeout=60.0, after_step=None) -> bool:
    """Wait until the workflow exists (a message to a workflow that does not is refused),
    and, with `after_step`, until DBOS has recorded that step of it. False if the worker
    ended first (the port's doing: its report says how); an error of the grader's own if
    the worker lives on and the workflow never shows (the port is not to blame for that)."""
    client = dbos_support.client(url)
    last = None
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if worker.report() is not None or not worker.process.is_alive():
                return False
            try:
                if client.list_workflows(workflow_ids=[workflow_id], load_input=False,
                                         load_output=False) and (
                        after_step is None or after_step in
                        [s["function_name"] for s in client.list_workflow_steps(workflow_id)]):
                    return True
            except Exception as exc:      # the worker has not created DBOS's tables yet
                last = exc
            time.sleep(0.05)
        raise RuntimeError(f"the grader saw no workflow {workflow_id!r}"
                           + (f" with a step {after_step!r}" if after_step else "")
                           + f" within {timeout:g} s while its worker ran"
                           + (f" (last error: {type(last).__name__}: {last})" if last else ""))
    finally:
        client.destroy()


def _pause_cases(pause_subscription, draw, runs):
    """[(case, original, port)] for each (answer, deadline, delay) of `runs`, one port saved."""
    with scratch("ex14") as folder:
        answered(pause_subscription, "pause_subscription")
        url = _database(folder)
        module = save_port(pause_subscription, "pause_subscription", folder)
        out = []
        for n, (answer, deadline, delay) in enumerate(runs):
            case = Case(draw)
            here = os.path.join(folder, f"case-{n}")
            original = pause_on_durable_lite(os.path.join(here, "durable_lite"), case,
                                             deadline, answer, delay)
            port = pause_on_dbos(os.path.join(here, "dbos"), url, module, folder, case,
                                 deadline, answer, delay)
            out.append((case, original, port))
    return out


def _pause_case(pause_subscription, draw, answer, deadline, delay=0.0):
    [one] = _pause_cases(pause_subscription, draw, [(answer, deadline, delay)])
    return one


def _judge_pause(original, port, case, what, wait=None) -> None:
    """`wait`: (shortest, longest, what ends it) for the port's DBOS.recv, if checked."""
    what = f"pause_subscription(folder, {case.sub_id!r}) as run {case.run_id!r}, {what}"
    if port["error"] and "NotImplementedError" in port["error"]:
        raise NotAttempted("your port (or a step it calls) still raises NotImplementedError")
    if port["status"] is None:
        raise Fail(f"{what}: {port['error']}", IMPORT_HINT)
    if port["status"] == "running":
        retries = port.get("engine_retries") or []
        raise Fail(f"{what}: {PATIENCE:g} s after {port['since']} your port was still waiting, "
                   f"its steps recorded: {', '.join(port['steps']) or 'none'} (the original "
                   f"ended {original['result']['outcome']!r})"
                   + (f"; meanwhile DBOS retried its own database {len(retries)} time(s), "
                      f"last: {retries[-1]}" if retries else ""),
                   "the answer arrives as a DBOS message on the topic the original waits on "
                   "(CONFIRM), and the deadline is the workflow's `deadline` argument, in "
                   "seconds")
    if port["status"] != "completed":
        raise Fail(f"{what}: your port ended {port['status']}"
                   + (f": {port['error']}" if port["error"] else ""), _failure_hint(port["error"]))
    if wait is not None:
        _judge_wait(port, what, *wait)
    mails = len(port["emails"]), len(original["emails"])
    paused = len(port["plans"]) - len(case.earlier_plans), \
        len(original["plans"]) - len(case.earlier_plans)
    if mails[0] != mails[1] or paused[0] != paused[1]:
        raise Fail(f"{what}: your port sent {mails[0]} email(s) and recorded {paused[0]} "
                   f"pause(s); the original {mails[1]} and {paused[1]}",
                   "one step per ctx.step of the original, on the same branch")
    if port["result"] != original["result"]:
        raise Fail(f"{what}: your port returned {port['result']!r}; the original returned "
                   f"{original['result']!r}",
                   "tell the three cases apart as the original does: no answer at all, an "
                   "answer saying no, an answer saying yes")
    if port["steps"] != original["steps"]:
        raise Fail(f"{what}: DBOS recorded the steps {port['steps']} for your port; "
                   f"durable_lite recorded {original['steps']} for the original",
                   "one DBOS step for each ctx.step of the original, with its name: a call "
                   "made outside a step runs again whenever DBOS recovers the workflow")
    if port["plans"] != original["plans"] or port["emails"] != original["emails"]:
        raise Fail(f"{what}: the world recorded {port['plans']} and emails to "
                   f"{port['emails']} for your port; {original['plans']} and "
                   f"{original['emails']} for the original")
    if port["keys"] != original["keys"]:
        raise Fail(f"{what}: the pause went to the provider with the key "
                   f"{port['keys']['plans'][-1]!r}; the original sent "
                   f"{original['keys']['plans'][-1]!r}",
                   "build the key as the original does, with DBOS's workflow id as the run id")


def _judge_wait(port, what, shortest, longest, until) -> None:
    """The port waited `shortest` to `longest` seconds after its "ask" step, by DBOS's own
    record of the steps; `until`: what should have ended the wait ("the deadline", ...)."""
    waited = port["waited"]
    if waited is None:
        raise Fail(f"{what}: DBOS recorded no step of your port after 'ask' "
                   f"(it recorded {port['steps']})",
                   "after the wait, the original always runs one more step: 'unchanged' or "
                   "'pause'")
    if waited < shortest:
        raise Fail(f"{what}: your port's wait ended after {waited:.1f} s, before {until} "
                   f"({shortest + EARLY:.1f} s into the wait)",
                   "the wait's deadline is the workflow's `deadline` argument, in seconds, "
                   "whatever it is in this run")
    if waited > longest:
        past, hint = _TOO_LONG[until]
        raise Fail(f"{what}: your port's wait lasted {waited:.1f} s: it went on {past}", hint)


# A wait that lasted too long, by what should have ended it: what it did, and where to look.
_TOO_LONG = {
    "the deadline": ("past the deadline", "the wait's deadline is the workflow's `deadline` "
                     "argument, in seconds, whatever it is in this run"),
    "the answer came": ("after the answer had come", "an answer that arrives ends the wait at "
                        "once: the deadline is only the longest the wait may last"),
}


@q2.test("the customer answers yes within the deadline: the plan is paused for the months "
         "they chose, as the original does, as soon as the answer arrives",
         hint="the answer comes as a message on the original's topic; read the months from it")
def _(pause_subscription, draw):
    answer = {"pause": True, "months": draw.randint(1, 6)}
    case, original, port = _pause_case(pause_subscription, draw, answer, ANSWERED_DEADLINE)
    _judge_pause(original, port, case, f"answered {answer} on topic 'confirm'")


@q2.test("the customer answers no: the plan stays active, as in the original",
         hint="an answer that says no is not the same as no answer: the original tells them apart")
def _(pause_subscription, draw):
    answer = {"pause": False}
    case, original, port = _pause_case(pause_subscription, draw, answer, ANSWERED_DEADLINE)
    _judge_pause(original, port, case, f"answered {answer} on topic 'confirm'")


@q2.test("nobody answers before the deadline (two runs: deadlines of about 1.5 s and 4.5 s, "
         "drawn fresh): each wait lasts its run's deadline, then the run goes on without an "
         "answer, as in the original",
         hint="the wait must give up at the workflow's `deadline` (seconds); what does it "
              "return then?")
def _(pause_subscription, draw):
    deadlines = [round(draw.uniform(*SHORT_DEADLINES), 2), round(draw.uniform(*LONG_DEADLINES), 2)]
    runs = _pause_cases(pause_subscription, draw, [(None, d, 0.0) for d in deadlines])
    for (case, original, port), deadline in zip(runs, deadlines):
        _judge_pause(original, port, case, f"no answer, deadline {deadline:g} s",
                     wait=(deadline - EARLY, deadline + LATE, "the deadline"))


@q2.test("the customer answers late (about 2 s into the wait), within a longer deadline: the "
         "wait hears it and the plan is paused",
         hint="the wait lasts until the workflow's `deadline` argument, not a few seconds of "
              "your choosing: an answer may come any time before it")
def _(pause_subscription, draw):
    answer = {"pause": True, "months": draw.randint(1, 6)}
    delay, deadline = round(draw.uniform(*LATE_ANSWER), 2), round(draw.uniform(*LATE_DEADLINE), 1)
    case, original, port = _pause_case(pause_subscription, draw, answer, deadline, delay)
    _judge_pause(original, port, case, f"answered {answer} on topic 'confirm' {delay:g} s into "
                 f"the wait, deadline {deadline:g} s",
                 wait=(delay - EARLY, deadline - EARLY, "the answer came"))
