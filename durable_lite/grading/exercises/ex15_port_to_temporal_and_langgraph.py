"""Exercise 15: port one durable_lite workflow to Temporal (q1) and to LangGraph (q2); graded by
running each port beside the original under the same SIGKILL and the same replies, and
comparing what the simulated world recorded.

The original lives in durable_lite/engines/lite/renewal.py (the notebook shows it):
`renew_subscription` looks the customer up ("customer"), sends a notice without a key
("notice"), waits for the customer's reply on the signal REPLY with a deadline, then either
cancels the plan with a key ("cancel", when the reply says cancel) or charges the renewal
with a key ("charge") and sends a receipt without one ("receipt"), whether the reply kept
the plan or none came in time; its result says which ("outcome", "replied").

How a port is run. The learner's answer is defined in a notebook cell. The check reads that
whole cell (the code Python compiled it from), puts the exercise's given imports above it,
and saves it as a module in a fresh temporary folder; worker processes import that module,
so nothing in the notebook's memory helps. Temporal ports run in Temporal workers
(engines/temporal/worker.py) on one dev server that the check starts the first time it is
needed and that stops when the kernel (or the test session) ends; each case has a task
queue of its own. LangGraph ports run in LangGraph worker processes (engines/langgraph/
worker.py), each case on a SqliteSaver file of its own. The original runs in durable_lite
child processes on FakeClocks. engines/compare/killed_waiting.py plays the same story
on each engine: start, SIGKILL at the crash point, the reply, a fresh process to finish.

Every case draws a subscription, a price and a run id (the workflow id, the thread id),
and pre-loads both worlds with the same earlier charges and cancellations, so no literal id
can match. A fresh process that takes over after a kill reads a wall clock a drawn day or
more ahead (grading/wall_clock.py), as a worker coming back the next day would.

q1 (Temporal). Properties a right answer has, and the test whose fresh cases vary each:
  - its activities keep the original's names and order, declared with activity and
    called with step, both from temporal/faults.py, so the crash points exist: every test
    compares the activities the server recorded with the original's steps; a renamed
    activity is never killed at its point;
  - every branch: the reply keeps the plan (its test), cancels it (its test), or none
    comes before the deadline (its test), and no reply is not a reply that keeps;
  - the reply is the signal REPLY, kept in the workflow's state whenever it arrives, and
    an answered wait ends when it arrives, not at the deadline (the keep and cancel
    tests: a deadline nobody reaches);
  - the deadline is the run's `deadline` argument, in seconds: the no-reply test draws two
    deadlines far apart and the wait (by the server's clock, from the notice's completion
    to the next activity) must last each; the late-reply test replies after a drawn delay
    that a short constant misses, within a drawn deadline;
  - what survives a crash inside an effect's window: cancel and charge keyed, so the
    restarted worker's repeat is recognised (the keyed-windows test, one run on each
    branch); notice and receipt unkeyed, so each goes out twice, as the original's do
    (the unkeyed-windows test: both);
  - the keys themselves: the original's, derived from the workflow id and the same parts
    (the keys test: a stable key of another shape, Temporal's run id, workflow.now(),
    workflow.uuid4() pass the windows and fail here); a key from the clock or uuid4() in
    an activity changes when the worker that takes over retries it a day later, and pays
    twice in the keyed window;
  - a resume in another process: every crash test finishes the run in a fresh worker;
    "one more crash point" draws one of the eleven other points (and a reply on its
    branch), comparing ledgers, result and the steps recorded when the fresh worker took
    over;
  - the result built from what the activities returned (ids drawn by pre-loaded worlds).

q2 (LangGraph). Properties a right answer has, and the test whose fresh cases vary each:
  - its tasks keep the original's names and order, declared with step from langgraph/faults.py
    (imported as `task`), so the crash points exist; other tasks (a clock) may be added;
  - every effect inside a task: code outside a task runs again each time the thread is
    invoked, and every test invokes it at least twice (to start, to answer);
  - every branch: keep, cancel, and no reply, which is the scheduler's WAKE_UP after the
    deadline (each its own test); a wake-up is not a reply;
  - the wait is LangGraph's interrupt, answered with Command(resume=...): each case
    starts the thread, which must stop at an interrupt, then answers it in a fresh
    process;
  - the deadline is the run's `deadline` input, counted from when the wait began, and a
    reply after it is no reply: the deadline test draws a short deadline with a reply
    hours after it and a long one with a reply hours before it (no constant passes both);
    the process that answers reads a wall clock that much later;
  - counted from when the wait began, not from the run's start: the deadline test's third
    run is killed right after its notice was recorded, before its wait; the fresh process
    that takes over reads a clock the next day and begins the wait then; the customer
    cancels hours before the deadline counted from there, which is past it counted from
    the run's start (a start time read in a task before the wait, at the run's start or
    with the notice, is served from the checkpoint and fails it);
  - the due time survives a resume in another process: read the clock inside a task,
    and the answering process (clock moved on) gets the saved reading; a clock read
    outside a task moves the deadline (the deadline and no-reply tests fail it);
  - what survives a crash inside an effect's window, keyed and unkeyed (two tests, as q1);
    a key from the clock or a uuid changes in the fresh process a day later;
  - the keys: the original's, from the thread id and the same parts (the keys test);
  - a resume in another process: "two more crash points" draws two of the eleven others,
    among them the moment right after the reply, before the next step (the reply is not
    lost), comparing ledgers, result and the tasks served from the checkpoint when the
    fresh process took over;
  - the result built from what the tasks returned.

A hint names what the test observed: which steps were recorded where the original's were
not, which ledger grew, which keys differed, what the server recorded as failing.
"""

import os
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor

from ...engines.lite import renewal
from ...faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP, CrashAt
from ...sim import World
from .. import wall_clock
from ..checks import Exercise, Fail, NotAttempted
from ..harness import START, crash_label, scratch
from ..portable import cell_source, defines

# Loaded now, before any answer cell runs, so the grader's fingerprint of the grading code
# in memory covers them too (protocol.py). Without the engines extra, every check says so.
try:
    from ...child import child_group, kill_children
    from ...engines.compare import killed_waiting
    from ...engines.langgraph import support as langgraph_support, worker as langgraph_worker
    from ...engines.temporal import server as temporal_server, worker as temporal_worker
except ImportError:
    killed_waiting = None

EXERCISE = Exercise("15_port_to_temporal_and_langgraph",
                    "Port a workflow to Temporal and LangGraph",
                    lesson="notebooks/15_the_same_run_on_temporal_and_langgraph.ipynb",
                    requires=lambda: available())

ORIGINAL, NAME = renewal.__name__, "ex15-renew-subscription"
STEPS = ("customer", "notice", "cancel", "charge", "receipt")
BEFORE_WAIT = ("customer", "notice")
KEEP, CANCEL = {"cancel": False}, {"cancel": True}
HOUR = 3600.0
DEFINITION = "__temporal_workflow_definition"     # where @workflow.defn keeps a class's definition
PATIENCE = 12.0          # seconds a Temporal worker waits for a run to end before reporting

# The given imports of each question (the notebook's first code cell binds them all).
TEMPORAL_IMPORTS = """\
import asyncio

from temporalio import workflow

from durable_lite.engines.lite.renewal import (DAY, REPLY, cancel_plan, charge_renewal,
                                               lookup_subscription, send_email)
from durable_lite.engines.temporal.faults import activity, step
from durable_lite.keys import derive_key
"""
LANGGRAPH_IMPORTS = """\
from langgraph.config import get_config
from langgraph.func import entrypoint
from langgraph.types import interrupt

from durable_lite.engines.langgraph.faults import step as task
from durable_lite.engines.lite.renewal import (DAY, REPLY, WAKE_UP, cancel_plan,
                                               charge_renewal, lookup_subscription,
                                               send_email)
from durable_lite.keys import derive_key
"""
# What each saved module starts with: a wall clock moved on by the seconds the grader puts
# in a fresh process's environment (wall_clock.py), then the given imports. Temporal
# re-imports a workflow's module in its sandbox: there the course's modules are passed
# through, and the clock is not moved again.
TEMPORAL_PREAMBLE = """\
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import durable_lite.grading.wall_clock as _wall_clock
    import durable_lite.engines.lite.renewal, durable_lite.engines.temporal.faults
    import durable_lite.keys
if not workflow.unsafe.in_sandbox():
    _wall_clock.move_from_environment()

""" + TEMPORAL_IMPORTS
LANGGRAPH_PREAMBLE = wall_clock.prelude() + LANGGRAPH_IMPORTS

q1 = EXERCISE.question("q1", "renew_subscription on Temporal, under the same crash and replies",
                       answers=["RenewSubscription"])
q2 = EXERCISE.question("q2", "renew_subscription on LangGraph, under the same crash and replies",
                       answers=["renew_subscription"])


# can the engines run here? ------------------------------------------------------------------
def available():
    """(True, "") if a Temporal dev server, its SDK and LangGraph can run here."""
    if killed_waiting is None:
        return False, "the engines extra is not installed: pip install 'durable-lite[engines]'"
    ok, why = temporal_server.available()
    if not ok:
        return False, why
    try:
        langgraph_support.require()
    except ImportError as exc:
        return False, str(exc)
    return True, ""


_server = {}          # the one Temporal dev server of this process, started when first needed
_server_lock = threading.Lock()


def needs_engines() -> None:
    ok, why = available()
    if not ok:
        raise Fail(f"this check needs Temporal and LangGraph, and this Python cannot run them: "
                   f"{why}", "nothing is wrong with your answer: `make lab` installs them")


def temporal_address() -> str:
    """The address of this process's Temporal dev server (started now if need be; it stops
    when the process exits, or with stop_server())."""
    needs_engines()
    with _server_lock:
        server = _server.get("server")
        if server is None or not server.running:
            server = _server["server"] = temporal_server.TempTemporal("ex15").start()
        return server.address


def stop_server() -> None:
    """Stop this process's Temporal dev server, if it started one."""
    with _server_lock:
        server = _server.pop("server", None)
    if server is not None:
        server.stop()


# the learner's port, as a module a fresh process imports -----------------------------------
def _cell_source(fn, name) -> str:
    """The whole cell (or file) the function was defined in, as Python compiled it."""
    source = cell_source(fn)
    if source is None:
        raise Fail(f"the code that defines {name} cannot be read",
                   "define the port with `def` and `class` in the answer cell, and run it")
    return source


def temporal_answer(answer):
    """The Temporal definition of `answer` (its name, its run method), once it looks like a
    port."""
    if answer is None:
        raise NotAttempted("RenewSubscription is still None")
    if hasattr(answer, "fn") and hasattr(answer, "version"):
        raise Fail("RenewSubscription is the durable_lite workflow (@dl.workflow), not a "
                   "Temporal one", "port it: a class with @workflow.defn, its entry point an "
                   "async method with @workflow.run")
    definition = getattr(answer, DEFINITION, None)
    if not isinstance(answer, type) or definition is None:
        raise Fail(f"RenewSubscription should be a Temporal workflow class, but it is "
                   f"{_a(answer)}",
                   "pass the class itself, decorated with @workflow.defn(name=...)")
    return definition


def langgraph_answer(answer):
    """The function an entrypoint wraps, once `answer` looks like a LangGraph port."""
    if answer is None:
        raise NotAttempted("renew_subscription is still None")
    if hasattr(answer, "fn") and hasattr(answer, "version"):
        raise Fail("renew_subscription is the durable_lite workflow (@dl.workflow), not a "
                   "LangGraph one", "port it: a function of one input (a dict) with @entrypoint()")
    nodes = getattr(answer, "nodes", None)
    funcs = [getattr(getattr(node, "bound", None), "func", None)
             for node in (nodes.values() if isinstance(nodes, dict) else ())]
    funcs = [f for f in funcs if callable(f)]
    if not funcs or not hasattr(answer, "invoke"):
        raise Fail(f"renew_subscription should be a LangGraph entrypoint, but it is {_a(answer)}",
                   "decorate the function with @entrypoint() and pass what the decorator returns")
    return funcs[0]


def _a(value) -> str:
    kind = type(value).__name__
    return f"a class ({value.__name__})" if isinstance(value, type) else \
        f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


def save_port(source_of, name, preamble, folder, label) -> str:
    """Save the answer's cell below `preamble` as a module in `folder`; its module name."""
    module = f"ex15_{label}_{secrets.token_hex(4)}"
    source = preamble + "\n\n# the answer cell\n" + _cell_source(source_of, name)
    if not defines(source, name):
        raise Fail(f"the cell that defines the port does not define the name {name!r}",
                   f"name the port {name}")
    with open(os.path.join(folder, module + ".py"), "w", encoding="utf-8") as f:
        f.write(source)
    return module


# the worlds ---------------------------------------------------------------------------------
class Case:
    """A drawn subscription and run, and what its world held before the run started."""

    def __init__(self, draw, reply=KEEP, reply_at=HOUR, deadline=2 * renewal.DAY, crash=None):
        self.sub_id, *others = draw.distinct(draw.order_id, 1 + draw.randint(1, 3))
        self.price = draw.amount(5, 200)
        self.run_id = draw.run_id("renew")
        self.earlier_charges = [(other, draw.amount()) for other in others]
        self.earlier_plans = [draw.order_id() for _ in range(draw.randint(1, 3))]
        self.reply, self.reply_at, self.deadline, self.crash = reply, reply_at, deadline, crash
        self.later = renewal.DAY + draw.uniform(1, 12) * HOUR   # a fresh process: the next day
        # When a run killed before its wait is taken over, and so when its wait begins, in
        # seconds after the start: at once, unless the case is resumed_late()'s.
        self.resumed_after = 0.0

    def into_the_wait(self, seconds) -> float:
        """`seconds` after the run's start, counted from when its wait began."""
        return seconds - self.resumed_after

    def world(self, folder) -> str:
        """A fresh world in `folder`, where the providers have done other work before."""
        path = os.path.join(folder, "world")
        world = World(path)
        try:
            for sub, amount in self.earlier_charges:
                world.ledger(renewal.CHARGES).record(key=f"earlier-{sub}",
                                                     detail={"subscription": sub, "amount": amount})
            for sub in self.earlier_plans:
                world.ledger(renewal.PLANS).record(key=f"earlier-{sub}",
                                                   detail={"subscription": sub, "action": "cancel"})
        finally:
            world.close()
        return path

    def describe(self) -> str:
        reply = ("no reply" if self.reply is None else f"replied {self.reply}")
        crash = "no crash" if self.crash is None else f"killed {crash_label(self.crash)}, " \
                                                      "then finished by a fresh process"
        if self.resumed_after:
            crash = (f"killed {crash_label(self.crash)}, before its wait; a fresh process took "
                     f"over {_span(self.resumed_after)} later and began the wait; the reply came "
                     f"{_span(self.into_the_wait(self.reply_at))} into the wait")
        return (f"renew_subscription(folder, {self.sub_id!r}, {self.price}) as run "
                f"{self.run_id!r}, {reply}, {crash}")


def recorded(folder) -> dict:
    """What the world in `folder` recorded, in the terms both engines are compared in."""
    world = World(folder)
    try:
        charges = world.ledger(renewal.CHARGES).records()
        plans = world.ledger(renewal.PLANS).records()
        return {"charges": [(r["record_id"], r["detail"]) for r in charges],
                "plans": [(r["record_id"], r["detail"]) for r in plans],
                "emails": [(m["to"], m["subject"]) for m in world.mailer.sent()],
                "keys": {"charges": [r["key"] for r in charges],
                         "plans": [r["key"] for r in plans]}}
    finally:
        world.close()


# running both engines ------------------------------------------------------------------------
class Processes(list):
    """The workers a test started; stop() kills them all, and any started afterwards."""

    stopped = False

    def append(self, worker):
        super().append(worker)
        if self.stopped:
            worker.kill()
            raise RuntimeError("the test was stopped")

    def stop(self):
        self.stopped = True
        for worker in self:
            worker.kill()


def together(calls):
    """Run the calls (each given the test's Processes) at once, in threads; their results,
    in order. However this ends (a test's time limit included), every process they started
    is killed."""
    token, workers = object(), Processes()

    def run(call):
        child_group(token)
        return call(workers)

    pool = ThreadPoolExecutor(max_workers=len(calls))
    try:
        futures = [pool.submit(run, call) for call in calls]
        return [f.result() for f in futures]
    finally:
        workers.stop()
        kill_children(token)
        pool.shutdown(wait=False)


def original(case, folder):
    """The original's outcome on durable_lite, and its world's records."""
    world = case.world(os.path.join(folder, "durable_lite"))
    # on_durable_lite resumes a run killed before its wait at once, so its wait begins at the
    # start: the reply comes as far into that wait as the port's comes into its own.
    out = killed_waiting.on_durable_lite(
        ORIGINAL, NAME, [world, case.sub_id, case.price], run_id=case.run_id,
        workdir=os.path.dirname(world), signal=renewal.REPLY, reply=case.reply,
        reply_at=case.into_the_wait(case.reply_at), start_at=START, crash=case.crash,
        restart_later=case.later, kwargs={"deadline": case.deadline})
    if out["status"] != "completed" or (case.crash and not out["killed"]):
        raise RuntimeError(f"the original did not run as expected: {out}")
    out["replayed"] = [s for s in out["replayed"] if s in STEPS]      # steps, not the reply
    return {**out, **recorded(world)}


class TemporalPort:
    """One test's Temporal runs: the port saved as a module, the server's address."""

    def __init__(self, folder, answer):
        self.folder = folder
        definition = temporal_answer(answer)
        self.name = definition.name
        self.address = temporal_address()
        self.module = save_port(definition.run_fn, "RenewSubscription", TEMPORAL_PREAMBLE,
                                folder, "temporal")

    def run(self, case, workers, reply_after=0.0):
        """The port's outcome for `case`, the reply sent `reply_after` s after the notice
        completed (0: as soon as the run exists), and its world's records."""
        world = case.world(os.path.join(self.folder, case.run_id))
        case.reply_after = reply_after
        out = killed_waiting.on_temporal(
            self.address, self.name, [world, case.sub_id, case.price, case.deadline],
            workflow_id=case.run_id, signal=renewal.REPLY, reply=case.reply,
            after_step="notice" if reply_after else None, wait_step="notice",
            reply_after=reply_after, crash=case.crash,
            patience=PATIENCE, restart_env=wall_clock.environment(case.later),
            imports=[self.module], python_path=[self.folder], workers=workers)
        return {**out, **recorded(world)}


class LangGraphPort:
    """One test's LangGraph runs: the port saved as a module."""

    def __init__(self, folder, answer):
        func = langgraph_answer(answer)
        needs_engines()
        self.folder = folder
        self.module = save_port(func, "renew_subscription", LANGGRAPH_PREAMBLE, folder,
                                "langgraph")

    def run(self, case, workers):
        world = case.world(os.path.join(self.folder, case.run_id))
        inputs = {"folder": world, "sub_id": case.sub_id, "price": case.price,
                  "deadline": case.deadline}
        out = killed_waiting.on_langgraph(
            os.path.join(self.folder, case.run_id, "langgraph.sqlite"),
            f"{self.module}.renew_subscription", inputs, thread_id=case.run_id,
            reply=renewal.WAKE_UP if case.reply is None else case.reply,
            reply_at=case.reply_at, crash=case.crash, clock_env=clock_of(case),
            restart_later=case.later, imports=[self.module], python_path=[self.folder],
            workers=workers)
        return {**out, **recorded(world)}


def clock_of(case):
    """The environment of each LangGraph worker of `case`: a wall clock `seconds` after the
    start. on_langgraph resumes a thread killed before its wait at once (`seconds` 0, like
    the process that started it); that process reads the clock `case.resumed_after` later."""
    started = []

    def environment(seconds):
        if started and seconds == 0.0:          # only the one taking over from the first
            seconds = case.resumed_after        # process is also at 0: every answer is later
        started.append(seconds)
        return wall_clock.environment(seconds)
    return environment


def side_by_side(port, cases, folder, **options):
    """[(case, original's outcome, port's outcome)] for each case, all run at once."""
    calls = []
    for n, case in enumerate(cases):
        here = os.path.join(folder, f"case-{n}")
        calls.append(lambda workers, case=case, here=here: original(case, here))
        calls.append(lambda workers, case=case: port.run(case, workers, **options))
    outcomes = together(calls)
    return [(case, outcomes[2 * n], outcomes[2 * n + 1]) for n, case in enumerate(cases)]


# judging -------------------------------------------------------------------------------------
class Words:
    """How the feedback names one engine's things."""

    def __init__(self, engine, step, steps, ran, held, fresh, run_id, declare):
        self.engine, self.step, self.steps, self.ran, self.held = engine, step, steps, ran, held
        self.fresh, self.run_id, self.declare = fresh, run_id, declare


TEMPORAL = Words("Temporal", "activity", "activities",
                 "the server had recorded the completed activities",
                 "the server had recorded the completed activities", "the worker that took over",
                 "workflow id",
                 "declare each activity with activity(name) from "
                 "durable_lite.engines.temporal.faults and call it with its step(name, ...), "
                 "named as in the original: " + ", ".join(STEPS))
LANGGRAPH = Words("LangGraph", "task", "tasks",
                  "your thread had gone through the tasks", "the checkpoint held the tasks",
                  "the fresh process", "thread id",
                  "declare each task with task(name) (LangGraph's @task with the course's crash "
                  "points), named as in the original: " + ", ".join(STEPS))


def compared(words, names) -> list:
    """The steps of a port to compare with the original's: every activity on Temporal, where
    the port has one per ctx.step; the original's names among the tasks on LangGraph, where
    a port may add tasks of its own (a clock, say)."""
    return list(names) if words is TEMPORAL else [n for n in names if n in STEPS]


def judge(words, original_out, port, case, keys=False) -> None:
    """Fail with the first way the port's outcome differs from the original's."""
    where = case.describe()
    error = port.get("error") or ""
    if "NotImplementedError" in error:
        raise NotAttempted("your port (or a step it calls) still raises NotImplementedError")
    if port["status"] is None:
        raise Fail(f"{where}: the {words.engine} worker could not run your port: {error}",
                   import_hint(error))
    if case.crash is not None and not port["killed"]:
        raise Fail(f"{where}: durable_lite's process was killed {crash_label(case.crash)}; "
                   f"the {words.engine} worker ran your port without ever reaching that point "
                   f"(it ended {port['status']})", words.declare)
    if words is LANGGRAPH and not port["interrupted"]:
        raise Fail(f"{where}: your port's thread ended {port['status']} when it was started, "
                   "without stopping to wait for the reply" + _why(port),
                   "the thread should stop at an interrupt and wait there for the reply")
    if port["status"] == "running":
        since = "the reply was sent" if case.reply is not None else "its run started"
        raise Fail(f"{where}: {PATIENCE:g} s after {since} your port was still running"
                   + _why(port), unfinished_hint(words, port, case))
    if words is LANGGRAPH and error:
        answered = ("woke it with WAKE_UP" if case.reply is None
                    else f"answered it with {case.reply}")
        raise Fail(f"{where}: your port raised {error} when the check {answered}",
                   unfinished_hint(words, port, case))
    if port["status"] != "completed":
        raise Fail(f"{where}: your port ended {port['status']}" + _why(port)
                   + f"; the original ended {original_out['result']['outcome']!r}",
                   unfinished_hint(words, port, case))
    _same_ledgers(words, original_out, port, case, where)
    if port["result"] != original_out["result"]:
        raise Fail(f"{where}: your port returned {port['result']!r}; the original returned "
                   f"{original_out['result']!r}", result_hint(words, original_out, port, case))
    if case.crash is not None and \
            compared(words, port["replayed"]) != original_out["replayed"]:
        raise Fail(f"{where}: when {words.fresh} took over, {words.held} "
                   f"{port['replayed']}; durable_lite had recorded {original_out['replayed']}",
                   f"one {words.step} for each ctx.step of the original: the same names, in "
                   "the same order, on the same branch")
    if compared(words, port["steps"]) != original_out["steps"]:
        raise Fail(f"{where}: by the end {words.ran} {port['steps']}; durable_lite recorded "
                   f"the steps {original_out['steps']}",
                   _why_steps_differ(words, original_out, port, case))
    if keys and port["keys"] != original_out["keys"]:
        raise Fail(f"{where}: the providers received different idempotency keys: from the "
                   f"original {_new_keys(original_out, case)}, from your port "
                   f"{_new_keys(port, case)}",
                   f"ctx.idempotency_key(*parts) is derive_key(run id, *parts); on "
                   f"{words.engine} the run id is the {words.run_id}: build each key from it "
                   "and the same parts")


def _why(port) -> str:
    troubles = port.get("troubles") or []
    if troubles:
        return f" (the server's record: {'; '.join(troubles[:2])})"
    return f": {port['error']}" if port.get("error") else ""


def import_hint(error) -> str:
    if "NameError" in error or "ModuleNotFoundError" in error or "ImportError" in error:
        return ("the worker imports your answer cell on its own, with only the given imports "
                "above it: keep every activity, task and the workflow in that one cell")
    return ("the worker imports your answer cell on its own: leave out anything that runs "
            "something when the cell runs, and run the cell once to see that it works")


def unfinished_hint(words, port, case) -> str:
    status, troubles = port["status"], port.get("troubles") or []
    if any("Restricted" in t for t in troubles):
        return ("a workflow's code runs in Temporal's sandbox, which refuses what could differ "
                "on a replay (the clock, random numbers, files): that belongs in an activity")
    if troubles:
        return "the server's record above says what failed, and where"
    if words is TEMPORAL and status == "running" and case.reply is None:
        return ("nobody replied: the wait gives up once the run's `deadline` (seconds) has "
                "passed, and the run goes on without a reply")
    if words is TEMPORAL and status == "running":
        return ("the reply comes as the signal REPLY: a signal handler keeps it in the "
                "workflow's state, whenever it arrives, and the wait ends when the state holds "
                "a reply or the run's `deadline` (seconds) has passed")
    if words is LANGGRAPH and case.reply is None and port.get("error"):
        return ("the check woke the thread with WAKE_UP after its deadline: a wake-up is not a "
                "reply, and it holds none of a reply's fields")
    if words is LANGGRAPH and status == "waiting" and not port.get("error"):
        return ("the check answered the thread's interrupt once, with Command(resume=...); the "
                "thread should then run to its end")
    return "run your port once in the notebook (see “Drive it yourself”) to see where it fails"


def result_hint(words, original_out, port, case) -> str:
    got, want = port["result"], original_out["result"]
    if isinstance(got, dict) and got.get("outcome") == want["outcome"] and \
            got.get("replied") != want.get("replied"):
        return ("`replied` says whether a reply came in time" +
                (": a wake-up, or a reply after the deadline, is no reply"
                 if words is LANGGRAPH else ""))
    return "return the same dict as the original, built from what the steps returned"


def _why_steps_differ(words, original_out, port, case) -> str:
    """What the steps recorded say about the difference, in the learner's terms."""
    want, got = original_out["steps"], compared(words, port["steps"])
    extra = sorted({s for s in port["steps"] if s not in want})
    missing = [s for s in want if s not in got]
    if "cancel" in extra or "cancel" in missing:
        return _why_branch_differs(case, cancelled="cancel" in extra)
    emails = len(port["emails"]) - len(original_out["emails"])
    if words is LANGGRAPH and not port["steps"]:
        return ("the check saw none of your tasks run: it sees tasks declared with task(name) "
                "from durable_lite.engines.langgraph.faults, LangGraph's @task with the crash "
                "points")
    if emails > 0 and set(missing) & {"notice", "receipt"}:
        return (f"an email went out without a {words.step} of the original's name "
                f"({', '.join(missing)}): code outside a {words.step} runs again whenever the "
                f"run is {'replayed' if words is TEMPORAL else 'invoked again'}, and is never "
                "killed where the original's step is")
    if sorted(got) == sorted(want):
        return f"the same {words.steps}, in another order: call them in the original's order"
    if got and len(got) > len(set(got)):
        return f"each {words.step} once, as in the original"
    return (f"{words.declare}; every call to a service inside one of them (run by your port "
            f"only: {extra}; by the original only: {missing})")


def _why_branch_differs(case, cancelled) -> str:
    """The port took the other branch (`cancelled`: it cancelled where the original did
    not): say what the test sent, and when."""
    if cancelled and case.reply is None:
        return ("nobody replied in time: the original then charges the renewal; only a reply "
                "that says cancel cancels")
    into_the_wait = case.into_the_wait(case.reply_at)
    if cancelled and into_the_wait > case.deadline:
        return (f"this reply came {_span(into_the_wait - case.deadline)} after the run's "
                f"deadline of {_span(case.deadline)}, counted from when the wait began: "
                "durable_lite counts only a reply sent by the deadline")
    if cancelled:
        return "this reply keeps the plan: the original then charges the renewal"
    began = (f" (the wait began when the fresh process took over, {_span(case.resumed_after)} "
             "after the run started: counted from the run's start, the deadline had passed)"
             if case.resumed_after else "")
    return (f"this reply says cancel and came in time, {_span(case.deadline - into_the_wait)} "
            f"before the run's deadline of {_span(case.deadline)}, counted from when the wait "
            f"began{began}: the original then cancels the plan")


def _span(seconds) -> str:
    """"2.1 s", "16 hours", "1.5 days": a stretch of time as the feedback says it."""
    if seconds < 600:
        return f"{seconds:.1f} s"
    if seconds < 2 * renewal.DAY:
        return f"{seconds / HOUR:.0f} hours"
    return f"{seconds / renewal.DAY:.1f} days"


def _counts(outcome, case) -> dict:
    return {"charges": len(outcome["charges"]) - len(case.earlier_charges),
            "cancellations": len(outcome["plans"]) - len(case.earlier_plans),
            "emails": len(outcome["emails"])}


def _new_keys(outcome, case) -> dict:
    return {"charges": outcome["keys"]["charges"][len(case.earlier_charges):],
            "plans": outcome["keys"]["plans"][len(case.earlier_plans):]}


def _same_ledgers(words, original_out, port, case, where) -> None:
    want, got = _counts(original_out, case), _counts(port, case)
    if want != got:
        wrong = "; ".join(f"{name} {got[name]} (the original's: {want[name]})"
                          for name in want if got[name] != want[name])
        hint = (_why_steps_differ(words, original_out, port, case)
                if compared(words, port["steps"]) != original_out["steps"]
                else _why_counts_differ(words, want, got, case))
        raise Fail(f"{where}: your port's world recorded {wrong}", hint)
    for ledger, what in (("charges", "charges (id, detail)"), ("plans", "plan records"),
                         ("emails", "emails (to, subject)")):
        if port[ledger] != original_out[ledger]:
            raise Fail(f"{where}: the {what} recorded for your port were {port[ledger]}; for "
                       f"the original {original_out[ledger]}",
                       "pass each service the same arguments as the original does")


def _why_counts_differ(words, want, got, case) -> str:
    """The steps recorded were the original's, so a ledger that grew more means a repeated
    step was not recognised by its provider, or a call outside the steps; one that grew
    less means a repeat was recognised where the original's was not."""
    killed_in = case.crash.step if case.crash is not None and case.crash.when == AFTER_EFFECT \
        else None
    if got["charges"] > want["charges"] or got["cancellations"] > want["cancellations"]:
        if killed_in in ("charge", "cancel"):
            return (f"the same {words.steps} ran, yet the provider recorded the {killed_in} "
                    f"twice: when {words.fresh} ran it again, the key was not the one the "
                    "first attempt sent; give each keyed call a key that is the same every "
                    "time it runs, in any process, on any day")
        return (f"the same {words.steps} ran, yet the provider recorded more: is every call "
                f"to a service inside its {words.step}?")
    if got["emails"] < want["emails"]:
        return ("the original sends its emails without a key, so a crash right after one "
                "sends it twice; a port keeps the original's behaviour, window included")
    if got["emails"] > want["emails"]:
        return (f"more emails than the original: code outside a {words.step} runs again "
                f"whenever the run is {'replayed' if words is TEMPORAL else 'invoked again'}; "
                f"is every email sent inside its {words.step}?")
    return "call every service the original calls, under the same conditions"


# crash points ---------------------------------------------------------------------------------
POINTS = [CrashAt(s, w) for s in STEPS for w in (BEFORE_STEP, AFTER_EFFECT, AFTER_CHECKPOINT)]
KEYED_WINDOWS = [CrashAt("charge", AFTER_EFFECT), CrashAt("cancel", AFTER_EFFECT)]
UNKEYED_WINDOWS = [CrashAt("notice", AFTER_EFFECT), CrashAt("receipt", AFTER_EFFECT)]
OTHERS = [p for p in POINTS if p not in KEYED_WINDOWS + UNKEYED_WINDOWS]     # eleven


def reply_reaching(point, draw, silent_ok):
    """A reply whose branch reaches the crash point (no reply too, if `silent_ok`)."""
    if point.step == "cancel":
        return CANCEL
    if point.step in ("charge", "receipt"):
        return draw.choice([KEEP, None] if silent_ok else [KEEP])
    return draw.choice([KEEP, CANCEL, None] if silent_ok else [KEEP, CANCEL])


# q1: Temporal -------------------------------------------------------------------------------
ANSWERED_DEADLINE = 60.0      # a deadline nobody reaches: the reply must end the wait
SHORT_DEADLINES = (1.2, 1.7)  # the no-reply test draws one deadline from each range (real
LONG_DEADLINES = (4.3, 5.0)   # seconds on Temporal): no one constant lasts both, as a wait
EARLY, LATE = 0.25, 2.0       # may end EARLY sooner or LATE later than its deadline (or
LATE_REPLY = (1.8, 2.4)       # than the reply); the late-reply test replies this long after
LATE_DEADLINE = (5.0, 6.5)    # the notice, within a deadline drawn from here


def temporal_cases(answer, draw, cases, **options):
    with scratch("ex15") as folder:
        port = TemporalPort(folder, answer)
        return side_by_side(port, cases, folder, **options)


@q1.test("no crash, the customer replies to keep the plan: the renewal is charged, with the "
         "same result, activities and ledgers as the original, as soon as the reply arrives",
         hint="the reply comes as the signal REPLY; with it, the run charges and sends a receipt")
def _(RenewSubscription, draw):
    [(case, want, got)] = temporal_cases(RenewSubscription, draw,
                                         [Case(draw, KEEP, 0.5, ANSWERED_DEADLINE)],
                                         reply_after=0.2)
    judge_answered_wait(got, case)
    judge(TEMPORAL, want, got, case)


@q1.test("the customer replies to cancel: the plan is cancelled and nothing is charged, as in "
         "the original",
         hint="a reply that says cancel takes the other branch: read it as the original does")
def _(RenewSubscription, draw):
    [(case, want, got)] = temporal_cases(RenewSubscription, draw,
                                         [Case(draw, CANCEL, 0.5, ANSWERED_DEADLINE)],
                                         reply_after=0.2)
    judge_answered_wait(got, case)
    judge(TEMPORAL, want, got, case)


def judge_wait(got, case, ends, what) -> None:
    """The port's wait after the notice, by the server's records (from the workflow task
    that began it to the one that ended it: a worker slow to pick tasks up on a busy
    machine does not count against the port), must end `ends` seconds into it (EARLY
    sooner or LATE later at most): when `what` ("the deadline", "the reply") ended it."""
    where, waited = case.describe(), got["waited"]
    if waited is None:
        raise Fail(f"{where}: the server recorded no activity of your port after 'notice' "
                   f"(it recorded {got['steps']})",
                   "after the wait, the original always runs one more step: cancel or charge")
    if waited < ends - EARLY:
        raise Fail(f"{where}: your port's wait ended after {waited:.1f} s, before {what} came "
                   f"({ends:.1f} s into the wait)", DEADLINE_HINT)
    if waited > ends + LATE:
        raise Fail(f"{where}: your port's wait lasted {waited:.1f} s; {what} came {ends:.1f} s "
                   "into it", DEADLINE_HINT if what == "the deadline" else
                   "an answered wait ends when the reply arrives: wait for the reply itself, "
                   "with the deadline as the longest it may take")


DEADLINE_HINT = ("the wait's deadline is the run's `deadline` argument, in seconds, whatever it "
                 "is in this run")


def judge_answered_wait(got, case) -> None:
    """An answered run waited until the server recorded the reply, and not much longer. (A
    run that had ended before the reply was sent has no record of it: the reply then came
    `reply_after` seconds into the wait, by the check's own clock.)"""
    if got["status"] == "completed":
        replied = got.get("replied")
        judge_wait(got, case, case.reply_after if replied is None else replied, "the reply")


@q1.test("nobody replies before the deadline (two runs: deadlines of about 1.5 s and 4.5 s, "
         "drawn fresh): each wait lasts its run's deadline, then the renewal is charged as in "
         "the original",
         hint="the wait gives up at the run's `deadline` (seconds); no reply is not a reply "
              "that keeps the plan")
def _(RenewSubscription, draw):
    deadlines = [round(draw.uniform(*SHORT_DEADLINES), 2), round(draw.uniform(*LONG_DEADLINES), 2)]
    runs = temporal_cases(RenewSubscription, draw,
                          [Case(draw, None, d + 1, d) for d in deadlines], reply_after=0.0)
    for (case, want, got), deadline in zip(runs, deadlines):
        if got["status"] == "completed":
            judge_wait(got, case, deadline, "the deadline")
        judge(TEMPORAL, want, got, case)


@q1.test("the customer replies late (about 2 s into the wait) to cancel, within a longer "
         "deadline: the wait hears it and the plan is cancelled",
         hint="the wait lasts until the run's `deadline` argument, not a few seconds of your "
              "choosing: a reply may come any time before it")
def _(RenewSubscription, draw):
    delay, deadline = round(draw.uniform(*LATE_REPLY), 2), round(draw.uniform(*LATE_DEADLINE), 1)
    [(case, want, got)] = temporal_cases(RenewSubscription, draw,
                                         [Case(draw, CANCEL, delay, deadline)], reply_after=delay)
    judge_answered_wait(got, case)
    judge(TEMPORAL, want, got, case)


@q1.test("killed right after each keyed effect (the charge on one run, the cancellation on "
         "another), before the server heard of it, then finished by another worker a day "
         "later: one of each, as in the original",
         hint="the worker that takes over runs the activity again: the provider must see the "
              "same key as the first time")
def _(RenewSubscription, draw):
    cases = [Case(draw, KEEP if p.step == "charge" else CANCEL, 0.0, ANSWERED_DEADLINE, p)
             for p in KEYED_WINDOWS]
    for case, want, got in temporal_cases(RenewSubscription, draw, cases):
        judge(TEMPORAL, want, got, case)


@q1.test("killed right after each unkeyed email (the notice on one run, the receipt on "
         "another), before the server heard of it, then finished by another worker: each "
         "email goes out twice, as the original's does",
         hint="the original sends these emails without a key; the port must do what the "
              "original does")
def _(RenewSubscription, draw):
    cases = [Case(draw, KEEP, 0.0, ANSWERED_DEADLINE, p) for p in UNKEYED_WINDOWS]
    for case, want, got in temporal_cases(RenewSubscription, draw, cases):
        judge(TEMPORAL, want, got, case)


@q1.test("killed at one more crash point, drawn fresh from the other eleven, then finished by "
         "another worker: the same ledgers, result and recorded activities as the original",
         hint=TEMPORAL.declare)
def _(RenewSubscription, draw):
    point = draw.choice(OTHERS)
    case = Case(draw, reply_reaching(point, draw, silent_ok=False), 0.0, ANSWERED_DEADLINE, point)
    [(case, want, got)] = temporal_cases(RenewSubscription, draw, [case])
    judge(TEMPORAL, want, got, case)


@q1.test("the providers receive the same idempotency keys from both engines (a run on each "
         "branch)",
         hint="build each key as the original does, with Temporal's workflow id as the run id: "
              "then a request repeated by another worker is still recognised")
def _(RenewSubscription, draw):
    cases = [Case(draw, reply, 0.5, ANSWERED_DEADLINE) for reply in (KEEP, CANCEL)]
    for case, want, got in temporal_cases(RenewSubscription, draw, cases, reply_after=0.2):
        judge(TEMPORAL, want, got, case, keys=True)


# q2: LangGraph ------------------------------------------------------------------------------
def deadline_in_days(draw, low=1.0, high=3.0) -> float:
    return round(draw.uniform(low, high) * renewal.DAY)


def langgraph_cases(answer, draw, cases):
    with scratch("ex15") as folder:
        port = LangGraphPort(folder, answer)
        return side_by_side(port, cases, folder)


def _answered(draw, reply):
    """A case whose reply comes at a drawn time well within its drawn deadline."""
    deadline = deadline_in_days(draw)
    return Case(draw, reply, round(deadline * draw.uniform(0.1, 0.7)), deadline)


@q2.test("no crash, the customer replies to keep the plan (answered in a fresh process, hours "
         "later): the renewal is charged, with the same result, tasks and ledgers as the "
         "original",
         hint="the wait is interrupt(...); the check answers it with Command(resume=reply)")
def _(renew_subscription, draw):
    [(case, want, got)] = langgraph_cases(renew_subscription, draw, [_answered(draw, KEEP)])
    judge(LANGGRAPH, want, got, case)


@q2.test("the customer replies to cancel: the plan is cancelled and nothing is charged, as in "
         "the original",
         hint="a reply that says cancel takes the other branch: read it as the original does")
def _(renew_subscription, draw):
    [(case, want, got)] = langgraph_cases(renew_subscription, draw, [_answered(draw, CANCEL)])
    judge(LANGGRAPH, want, got, case)


@q2.test("nobody replies: once the deadline has passed, the scheduler wakes the thread with "
         "WAKE_UP, and the renewal is charged as in the original (no reply)",
         hint="LangGraph has no timers: a wake-up after the deadline is not a reply, and the "
              "original charges when no reply came in time")
def _(renew_subscription, draw):
    deadline = deadline_in_days(draw)
    case = Case(draw, None, deadline + round(draw.uniform(1, 12) * HOUR), deadline)
    [(case, want, got)] = langgraph_cases(renew_subscription, draw, [case])
    judge(LANGGRAPH, want, got, case)


def resumed_late(draw):
    """A run killed right after its notice was recorded, before its wait; the fresh process
    takes over the next day, and its wait begins then. The customer cancels hours before
    the deadline counted from that moment: past the deadline counted from the run's start."""
    deadline = deadline_in_days(draw)
    case = Case(draw, CANCEL, 0, deadline, CrashAt("notice", AFTER_CHECKPOINT))
    case.resumed_after = case.later
    case.reply_at = round(case.later + deadline - draw.uniform(2, 10) * HOUR)
    return case


def deadline_cases(draw):
    """The deadline test's runs: a reply to cancel after a short deadline, one before a long
    deadline, and one before the deadline of a wait that began the day after the run."""
    short, long = deadline_in_days(draw, 0.5, 1.5), deadline_in_days(draw, 3.0, 5.0)
    return [Case(draw, CANCEL, short + round(draw.uniform(2, 10) * HOUR), short),
            Case(draw, CANCEL, long - round(draw.uniform(2, 10) * HOUR), long),
            resumed_late(draw)]


@q2.test("the deadline is the run's own, counted from when the wait began (three runs, drawn "
         "fresh): a reply to cancel hours after a short deadline (about a day) is no reply; "
         "one hours before a long deadline (three to five days) is heard; so is one hours "
         "before the deadline of a run killed before its wait and resumed the next day",
         hint="a reply counts only if it came by the deadline, counted from when the wait "
              "began: keep that moment where a fresh process finds it, and compare when the "
              "reply arrives")
def _(renew_subscription, draw):
    for case, want, got in langgraph_cases(renew_subscription, draw, deadline_cases(draw)):
        judge(LANGGRAPH, want, got, case)


@q2.test("killed right after each keyed effect (the charge on one run, the cancellation on "
         "another), then resumed by a fresh process a day later: one of each, as in the "
         "original",
         hint="the fresh process runs the task again: the provider must see the same key as "
              "the first time")
def _(renew_subscription, draw):
    cases = []
    for point in KEYED_WINDOWS:
        case = _answered(draw, KEEP if point.step == "charge" else CANCEL)
        case.crash = point
        cases.append(case)
    for case, want, got in langgraph_cases(renew_subscription, draw, cases):
        judge(LANGGRAPH, want, got, case)


@q2.test("killed right after each unkeyed email (the notice on one run, the receipt on "
         "another), then resumed by a fresh process: each email goes out twice, as the "
         "original's does",
         hint="the original sends these emails without a key; the port must do what the "
              "original does")
def _(renew_subscription, draw):
    cases = []
    for point in UNKEYED_WINDOWS:
        case = _answered(draw, KEEP)
        case.crash = point
        cases.append(case)
    for case, want, got in langgraph_cases(renew_subscription, draw, cases):
        judge(LANGGRAPH, want, got, case)


@q2.test("killed at two more crash points, drawn fresh from the other eleven (one of them "
         "right after the reply arrived), then resumed by a fresh process: the same ledgers, "
         "result and tasks served from the checkpoint as the original",
         hint=LANGGRAPH.declare)
def _(renew_subscription, draw):
    after_reply = [p for p in OTHERS if p.when == BEFORE_STEP and p.step in ("cancel", "charge")]
    points = [draw.choice(after_reply), draw.choice([p for p in OTHERS if p not in after_reply])]
    cases = []
    for point in points:
        reply = reply_reaching(point, draw, silent_ok=True)
        deadline = deadline_in_days(draw)
        at = deadline + HOUR if reply is None else round(deadline * draw.uniform(0.1, 0.7))
        cases.append(Case(draw, reply, at, deadline, point))
    for case, want, got in langgraph_cases(renew_subscription, draw, cases):
        judge(LANGGRAPH, want, got, case)


@q2.test("the providers receive the same idempotency keys from both engines (a run on each "
         "branch)",
         hint="build each key as the original does, with LangGraph's thread id as the run id")
def _(renew_subscription, draw):
    cases = [_answered(draw, reply) for reply in (KEEP, CANCEL)]
    for case, want, got in langgraph_cases(renew_subscription, draw, cases):
        judge(LANGGRAPH, want, got, case, keys=True)
