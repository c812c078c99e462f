"""A workflow that waits for a reply, SIGKILLed at a crash point, answered and restarted: on
durable_lite, on Temporal and on LangGraph.

killed.py runs a workflow straight through. A workflow with a wait in it needs something
from outside as well: the reply (on LangGraph, which has no timers, also the scheduler's
wake-up once a deadline has passed). Each function here plays the same story on one
engine, so a check can run a learner's port beside its original and compare the two:

    1. a fresh process starts the run, armed to SIGKILL itself at `crash`;
    2. the reply arrives, `reply_at` seconds after the start (None: nobody replies);
    3. whichever process was killed, a fresh one takes over and finishes the run.

The crash fires once, in the first process that reaches it; every process started after
a kill is unarmed. What "seconds after the start" means differs, because the engines keep
time differently:

    durable_lite  each process runs on a FakeClock that reads the start plus the story's
                  time (`reply_at`, then `restart_later` more after a kill in the answer);
    Temporal      the server's clock is the wall clock: the reply is sent `reply_after`
                  real seconds after step `after_step` completed (the run was waiting by
                  then), or at once; a deadline passes in real seconds;
    LangGraph     each process gets `clock_env(seconds)` in its environment, which a
                  module can use to read a wall clock that far ahead (the grading
                  package's wall_clock), as if the process ran at that moment.

Every function returns the same keys, read from the engine's own records:

    killed    a process died by SIGKILL at the crash point (False: none got there)
    status    the run's final status in durable_lite's words ("completed", "waiting", ...)
    result    its result, or None
    replayed  the steps already recorded when the fresh process took over (after a kill)
    steps     the steps the run went through by the end, in order
    error     why the run, or a process, failed ("Type: message"), or None

and on Temporal also `waited` (how long the run waited after `after_step`, by the
server's clock: from the workflow task that began the wait to the one that ended it, so a
busy worker's slowness in picking tasks up is not counted), `replied` (seconds from the
wait beginning to the server recording the reply) and
`troubles` (failures the server recorded for workflow tasks and activities, the first
place to look when a run did not end); on LangGraph `interrupted` (the first process left
the thread waiting at an interrupt, as a wait should).
"""

import os
import time

from ...faults import CrashAt

PATIENCE = 12.0          # seconds a run may take to end after its reply was sent (or,
                         # with no reply, after it started), before its worker reports it
BACKSTOP = 30.0          # more seconds for a worker that does not report when asked
# Seconds a worker may take to start its run: the wait ends as soon as the run exists, so
# only a worker that never starts it waits this long (a busy laptop's Python can take tens
# of seconds to import an engine and connect).
STARTUP = 120.0


# durable_lite ---------------------------------------------------------------------------
def on_durable_lite(module: str, workflow: str, args, *, run_id: str, workdir, signal: str,
                    reply=None, reply_at: float = 0.0, start_at: float, crash=None,
                    restart_later: float = 0.0, kwargs=None, timeout: float = 60.0) -> dict:
    """Run `workflow` (its registered name, from `module`) in child processes on a SQLite
    store in `workdir`, each on a FakeClock: started at `start_at` (epoch seconds), sent
    `reply` on `signal` at `start_at + reply_at` (None: no reply; the run is resumed then
    all the same, so a deadline before that has passed)."""
    from ...child import run_in_child
    from ...clock import FakeClock
    from ...engine import Engine
    from ...store import SQLiteStore
    store = os.path.join(os.fspath(workdir), "runs.db")
    state = {"armed": None if crash is None else CrashAt(crash.step, crash.when, kill=True),
             "killed": False, "replayed": []}

    def process(at, later, *start_args, **start_kwargs):
        """One process at `start_at + at` (it starts the run if given arguments, else
        resumes it); after a kill, a fresh one `later` seconds later still."""
        def child(clock, crash_at=None, resume=True):
            options = {"engine_options": {"clock": start_at + clock}, "timeout": timeout,
                       "crash_at": crash_at}
            if resume:
                return run_in_child(store, module, workflow, run_id=run_id, resume=True,
                                    **options)
            return run_in_child(store, module, workflow, *start_args, run_id=run_id,
                                **options, **start_kwargs)
        out = child(at, state["armed"], resume=not start_args)
        if out.killed:
            state.update(armed=None, killed=True)
            out = child(at + later)
            state["replayed"] = list(out.run["replayed"])
        return out.run

    run = process(0.0, 0.0, *args, **dict(kwargs or {}))
    if run["status"] == "waiting":
        if reply is not None:
            engine = Engine(SQLiteStore(store), FakeClock(start_at + reply_at))
            try:
                engine.signal(run_id, signal, reply)
            finally:
                engine.store.close()
        run = process(reply_at, restart_later)
    return {"killed": state["killed"], "status": run["status"], "result": run["result"],
            "replayed": state["replayed"], "steps": _recorded(store, run_id),
            "error": run.get("error")}


def _recorded(store_path, run_id) -> list:
    from ...store import SQLiteStore
    from ...store.records import STEP
    store = SQLiteStore(store_path)
    try:
        return [e.label for e in store.load_entries(run_id) if e.kind == STEP]
    finally:
        store.close()


# Temporal -------------------------------------------------------------------------------
def on_temporal(address: str, workflow: str, args, *, workflow_id: str, signal: str,
                reply=None, after_step=None, reply_after: float = 0.0, crash=None,
                wait_step=None, restart_env=None, imports=(), python_path=(),
                patience: float = PATIENCE, workers=None) -> dict:
    """Start `workflow` (its registered name, from one of `imports`) as `workflow_id` in
    worker "machine-a", armed at `crash`, on a task queue of its own; send `reply` on
    `signal` once the run exists (with `after_step`: `reply_after` seconds after that
    activity completed); if machine-a was killed, worker "machine-b" (`restart_env` in its
    environment) takes over. `waited` and `replied` are measured from activity
    `wait_step` (default: `after_step`). `workers`: a list the workers are appended to as
    they start (a caller that is interrupted kills them); either way they are killed
    before this returns."""
    from ..temporal import support as temporal_support
    from ..temporal.worker import start_worker
    where = {"task_queue": f"q-{workflow_id}", "imports": list(imports),
             "python_path": list(python_path), "course_modules": False}
    started = []
    workers = [] if workers is None else workers

    def launch(*a, **k):
        _refuse_if_stopped(workers)
        worker = start_worker(*a, **where, **k)
        started.append(worker)
        workers.append(worker)
        return worker

    try:
        # machine-a's patience runs from the reply (from the run's start if none is sent),
        # a moment only this side knows: it is told when to report (hurry), and its own
        # timeout is a backstop. machine-b's runs from the moment it took over.
        machine_a = launch(address, "machine-a", crash=crash, timeout=patience + reply_after
                           + BACKSTOP, start=[(workflow, workflow_id, list(args), {})])
        _deliver(address, workflow_id, signal, reply, machine_a, after_step, reply_after,
                 patience)
        report = _report_of(machine_a, patience + STARTUP, hurry_after=patience)
        killed, replayed = machine_a.killed, []
        if report is None and killed:
            replayed = _completed(_history(address, workflow_id))
            machine_b = launch(address, "machine-b", wait_for=[workflow_id], env=restart_env,
                               timeout=patience + reply_after)
            report = _report_of(machine_b, patience + STARTUP)
        if report is None:
            log = (started[-1].log() or "").strip().splitlines()
            return {"killed": killed, "status": None, "result": None, "replayed": replayed,
                    "steps": [], "waited": None, "troubles": [],
                    "error": f"the worker could not run the workflow: "
                             f"{log[-1] if log else 'it wrote nothing to its log'}"}
        found = report[workflow_id]
        events = _history(address, workflow_id)
        status = temporal_support.status_word(found["status"])
        if status == "running":
            _terminate(address, workflow_id)        # nobody polls its task queue any more
        return {"killed": killed, "status": status, "result": found["result"],
                "error": found["error"], "replayed": replayed, "steps": _completed(events),
                "waited": _waited_after(events, wait_step or after_step),
                "replied": _signalled_after(events, wait_step or after_step),
                "troubles": _troubles(address, workflow_id, events) if status != "completed"
                else []}
    finally:
        for worker in started:
            worker.kill()


def _report_of(worker, timeout, hurry_after=None):
    """The worker's report, or None if it died (or hung past `timeout`: then killed). With
    `hurry_after`, the worker is asked to report that many seconds from now, its run
    ended or not."""
    if hurry_after is not None:
        try:
            worker.join(hurry_after, kill=False)
        except TimeoutError:
            worker.hurry()
    try:
        worker.join(timeout - (hurry_after or 0))
    except TimeoutError:
        return None
    return worker.report()


def _deliver(address, workflow_id, signal, reply, worker, after_step, delay, patience) -> None:
    """Send the reply (None: none, only wait for the run to exist) once the run exists;
    with `after_step`, `delay` s after that activity completed (or the run started a
    timer: it waits). Sent at once if the run ended or its worker died first, and
    `patience` s after the run started at the latest."""
    from ..temporal import support as temporal_support
    no_start_after = time.monotonic() + STARTUP
    give_up = None                                  # set when the run is first seen
    while True:
        events = _history(address, workflow_id, missing_ok=True)
        if events is None:
            if not worker.alive:
                return                              # it never started the run
            if time.monotonic() > no_start_after:
                raise TimeoutError(f"run {workflow_id!r} did not start within {STARTUP:g} s "
                                   "while its worker ran")
        else:
            give_up = give_up or time.monotonic() + patience
            if after_step is None or not worker.alive or _ended(events):
                break
            if after_step in _completed(events) or any(e["type"] == "TimerStarted"
                                                       for e in events):
                time.sleep(delay)
                break
            if time.monotonic() > give_up:
                break
        time.sleep(0.1)
    if reply is None:
        return
    try:
        temporal_support.signal(address, workflow_id, signal, reply)
    except Exception:          # the run had already ended: the reply came too late to matter
        if not _ended(_history(address, workflow_id)):
            raise


def _ended(events) -> bool:
    return any(e["type"].startswith("WorkflowExecution") and e["type"] not in
               ("WorkflowExecutionStarted", "WorkflowExecutionSignaled") for e in events)


async def _fetch(address, workflow_id):
    from temporalio.service import RPCError, RPCStatusCode

    from ..temporal.support import connect
    client = await connect(address)
    try:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return list(history.events)


def _history(address, workflow_id, missing_ok=False):
    """The run's events as dicts: type, time (epoch seconds, the server's), activity (the
    activity's name, for activity events), failure (a failed task's message)."""
    from temporalio.api.enums.v1 import EventType

    from ..temporal.support import call
    events = call(_fetch, address, workflow_id)
    if events is None:
        if missing_ok:
            return None
        raise LookupError(f"the server has no run {workflow_id!r}")
    names, rows = {}, []
    for e in events:
        kind = e.WhichOneof("attributes")
        a = getattr(e, kind)
        kind_name = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
        row = {"type": kind_name.title().replace("_", ""),
               "time": e.event_time.ToNanoseconds() / 1e9,
               "activity": None, "failure": None}
        if kind == "activity_task_scheduled_event_attributes":
            names[e.event_id] = row["activity"] = a.activity_type.name
        elif hasattr(a, "scheduled_event_id") and kind.startswith("activity_task"):
            row["activity"] = names.get(a.scheduled_event_id)
        if hasattr(a, "failure") and a.HasField("failure"):
            row["failure"] = a.failure.message
        rows.append(row)
    return rows


def _completed(events) -> list:
    """The activities the server recorded as completed, in order."""
    return [e["activity"] for e in events if e["type"] == "ActivityTaskCompleted"]


def _wait_began(events, step):
    """Where the run began to wait after activity `step`: the index and time of the first
    workflow task to complete after `step` did (the task that read the result and started
    the wait), or None."""
    done = None
    for i, e in enumerate(events):
        if done is None and e["type"] == "ActivityTaskCompleted" and e["activity"] == step:
            done = i
        elif done is not None and e["type"] == "WorkflowTaskCompleted":
            return i, e["time"]
    return None


def _waited_after(events, step):
    """Seconds the run waited after activity `step`, by the server's clock: from the end of
    the workflow task that began the wait to the scheduling of the one that ended it (the
    last scheduled before the next activity). Counted between workflow tasks, so the time a
    worker takes to pick a task up and run it, seconds on a busy machine, is not counted as
    the port's wait. 0 if the wait ended within the task that began it."""
    began = None if step is None else _wait_began(events, step)
    if began is None:
        return None
    index, began_at = began
    woken_at = began_at
    for e in events[index + 1:]:
        if e["type"] == "WorkflowTaskScheduled":
            woken_at = e["time"]
        elif e["type"] == "ActivityTaskScheduled":
            return max(0.0, woken_at - began_at)
    return None


def _signalled_after(events, step):
    """Seconds from the run beginning its wait after activity `step` (as `_waited_after`
    counts) to the server recording the first signal: negative if the signal came first,
    None without either."""
    began = None if step is None else _wait_began(events, step)
    signalled = [e["time"] for e in events if e["type"] == "WorkflowExecutionSignaled"]
    return signalled[0] - began[1] if began and signalled else None


async def _pending(address, workflow_id):
    from ..temporal.support import connect
    client = await connect(address)
    described = await client.get_workflow_handle(workflow_id).describe()
    return [(p.activity_type.name, p.attempt, p.last_failure.message)
            for p in described.raw_description.pending_activities if p.HasField("last_failure")]


def _troubles(address, workflow_id, events) -> list:
    """What went wrong, as the server recorded it: failed workflow tasks (the workflow's
    code raised, or the sandbox refused something) and failing activity attempts."""
    from ..temporal.support import call
    found = []
    for e in events:
        if e["failure"] and e["type"] in ("WorkflowTaskFailed", "ActivityTaskFailed",
                                          "WorkflowExecutionFailed"):
            where = f"activity {e['activity']!r}" if e["activity"] else "the workflow's code"
            line = f"{where}: {e['failure'].splitlines()[0][:300]}"
            if line not in found:
                found.append(line)
    try:
        for name, attempt, message in call(_pending, address, workflow_id):
            found.append(f"activity {name!r}, attempt {attempt}: {message.splitlines()[0][:300]}")
    except Exception:            # the run is gone: what the history says will do
        pass
    return found


async def _terminate_async(address, workflow_id):
    from ..temporal.support import connect
    client = await connect(address)
    await client.get_workflow_handle(workflow_id).terminate("the check is over")


def _terminate(address, workflow_id) -> None:
    from ..temporal.support import call
    try:
        call(_terminate_async, address, workflow_id)
    except Exception:            # it ended meanwhile
        pass


# LangGraph ------------------------------------------------------------------------------
def on_langgraph(path, workflow: str, inputs: dict, *, thread_id: str, reply,
                 reply_at: float = 0.0, crash=None, clock_env=None,
                 restart_later: float = 0.0, imports=(), python_path=(),
                 timeout: float = 90.0, workers=None) -> dict:
    """Start `workflow` ("module.entrypoint") on `thread_id` with `inputs`, its checkpoints
    in the SqliteSaver file `path`; when the thread waits at an interrupt, answer it with
    `reply` (Command(resume=reply): a person's reply or the scheduler's wake-up) in a
    process whose clock reads `reply_at` seconds after the start; after a kill, resume it
    with invoke(None) in a fresh process (`restart_later` seconds later still, if the kill
    came while answering). `workers`: a list the workers are appended to as they start.
    `timeout`: seconds each worker may take, longer than a crash point waits for its
    checkpoint's save (langgraph/faults.py: 60 s), so a save that never lands is reported by
    the worker itself, not cut short by this wait."""
    from ..langgraph.worker import start_worker
    env = clock_env or (lambda seconds: {})
    where = {"imports": list(imports), "python_path": list(python_path)}
    workers = [] if workers is None else workers
    state = {"armed": crash, "killed": False, "replayed": []}

    def process(at, later, **action):
        _refuse_if_stopped(workers)
        worker = start_worker(path, workflow, thread_id, crash=state["armed"], env=env(at),
                              **where, **action)
        workers.append(worker)
        worker.join(timeout)
        if worker.killed and state["armed"] is not None:
            state.update(armed=None, killed=True)
            _refuse_if_stopped(workers)
            worker = start_worker(path, workflow, thread_id, resume=True, env=env(at + later),
                                  **where)
            workers.append(worker)
            worker.join(timeout)
            report = worker.report()
            if report is not None:
                state["replayed"] = list(report["replayed"])
        return worker.report() or {"status": None, "result": None, "replayed": [], "ran": [],
                                   "error": f"the worker died without a report: "
                                            f"{_last_line(worker.log())}"}

    report = process(0.0, 0.0, start=inputs)
    interrupted = report["status"] == "waiting"
    if interrupted:
        report = process(reply_at, restart_later, answer=reply)
    return {"killed": state["killed"], "status": report["status"], "result": report["result"],
            "replayed": state["replayed"], "steps": report["replayed"] + report["ran"],
            "error": report["error"], "interrupted": interrupted}


def _refuse_if_stopped(workers) -> None:
    """Start no worker for a caller that has stopped (its `workers` says so, as a check's
    do once its time limit has passed). Its threads may still be finishing a run on a busy
    machine: each would otherwise start its next worker, only for it to be killed at once,
    for as long as they took."""
    if getattr(workers, "stopped", False):
        raise RuntimeError("the caller has stopped: no more workers are started")


def _last_line(log: str) -> str:
    lines = [line.strip() for line in (log or "").splitlines() if line.strip()]
    return lines[-1] if lines else "(it wrote nothing to its log)"
