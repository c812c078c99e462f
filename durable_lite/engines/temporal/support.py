"""Talking to a Temporal server from plain code (a notebook cell, a test, a check).

The Temporal SDK is asyncio through and through. Jupyter runs every cell inside an event
loop already, where `asyncio.run` refuses to start a second one; so each helper here runs
its coroutine to the end on a loop of its own, in a helper thread when this thread has a
loop running. The same plain call then works in a notebook and in a script:

    from durable_lite.engines.temporal import support as ts
    ts.signal(server.address, "refund-A-101", "approval", {"approved": True})
    ts.history(server.address, "refund-A-101")      # rows, like engine.history(run_id)

What a run did is read from the server's event history, never from a worker's word (a
killed worker has none).
"""

import asyncio
import threading

from .server import require

# Temporal's WorkflowExecutionStatus name -> the word durable_lite uses for the same state
STATUS_WORDS = {"COMPLETED": "completed", "FAILED": "failed", "RUNNING": "running",
                "TIMED_OUT": "failed", "TERMINATED": "cancelled", "CANCELED": "cancelled",
                "CONTINUED_AS_NEW": "completed"}


def status_word(name) -> str:
    """Temporal's status name in durable_lite's words ("COMPLETED" -> "completed")."""
    if name is None:
        return None
    return STATUS_WORDS.get(name, str(name).lower())


def call(fn, *args, **kwargs):
    """Run the coroutine function `fn(*args, **kwargs)` to the end and return its value."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(fn(*args, **kwargs))
    box = {}

    def target():
        try:
            box["value"] = asyncio.run(fn(*args, **kwargs))
        except BaseException as exc:            # handed back to the caller's thread below
            box["error"] = exc

    helper = threading.Thread(target=target, name=f"temporal:{fn.__name__}")
    helper.start()
    helper.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


async def connect(address, identity=None):
    require()
    from temporalio.client import Client
    options = {} if identity is None else {"identity": identity}
    return await Client.connect(address, **options)


# reading a run ---------------------------------------------------------------------------
async def _events(address, workflow_id):
    client = await connect(address)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return list(history.events)


def _event_type(event) -> str:
    from temporalio.api.enums.v1 import EventType
    return EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").title().replace("_", "")


def _decode(payloads):
    from temporalio.converter import default
    values = default().payload_converter.from_payloads(list(payloads))
    return values[0] if len(values) == 1 else values


def events(address, workflow_id) -> list:
    """The run's event history as the server keeps it: one row per event
    (event id, type such as "ActivityTaskCompleted", what it is about)."""
    return [{"event": e.event_id, "type": _event_type(e), "about": _about(e)}
            for e in call(_events, address, workflow_id)]


def _about(event) -> str:
    kind = event.WhichOneof("attributes")
    a = getattr(event, kind)
    if kind == "activity_task_scheduled_event_attributes":
        return a.activity_type.name
    if kind == "activity_task_started_event_attributes":
        return f"attempt {a.attempt} on {a.identity}"
    if kind == "timer_started_event_attributes":
        seconds = a.start_to_fire_timeout.ToTimedelta().total_seconds()
        return f"{_summary(event) or 'timer'} {seconds:g} s"
    if kind == "workflow_execution_signaled_event_attributes":
        return a.signal_name
    if kind == "workflow_execution_started_event_attributes":
        return a.workflow_type.name
    if kind == "workflow_task_failed_event_attributes":
        return a.failure.message.splitlines()[0][:120] if a.failure.message else ""
    return ""


def history(address, workflow_id) -> list:
    """One row per position of the run, in order, with the columns of durable_lite's
    engine.history(run_id) that Temporal has: position (from 0), step, kind ("step",
    "timer", "signal"), status ("completed", "failed", "incomplete"; "cancelled" for a
    deadline's timer that the answer beat), attempts, worker, error, result.

    An activity that was scheduled and has no result yet (its worker died, say) is
    "incomplete"; a timer that has not fired yet too. A timer's step is its summary
    ("approval deadline", "cooling off")."""
    rows, by_event = [], {}
    for e in call(_events, address, workflow_id):
        kind = e.WhichOneof("attributes")
        a = getattr(e, kind)
        if kind == "activity_task_scheduled_event_attributes":
            by_event[e.event_id] = _row(rows, a.activity_type.name, "step")
        elif kind == "activity_task_started_event_attributes":
            row = by_event[a.scheduled_event_id]
            row.update(attempts=a.attempt, worker=a.identity)
            if a.HasField("last_failure"):
                row["error"] = a.last_failure.message
        elif kind == "activity_task_completed_event_attributes":
            row = by_event[a.scheduled_event_id]
            row.update(status="completed", result=_decode(a.result.payloads))
        elif kind in ("activity_task_failed_event_attributes",
                      "activity_task_timed_out_event_attributes"):
            by_event[a.scheduled_event_id].update(status="failed", error=a.failure.message)
        elif kind == "timer_started_event_attributes":
            by_event[("timer", a.timer_id)] = _row(rows, _summary(e) or "timer", "timer")
        elif kind == "timer_fired_event_attributes":
            by_event[("timer", a.timer_id)].update(status="completed")
        elif kind == "timer_canceled_event_attributes":
            by_event[("timer", a.timer_id)].update(status="cancelled")
        elif kind == "workflow_execution_signaled_event_attributes":
            row = _row(rows, a.signal_name, "signal")
            row.update(status="completed", result=_decode(a.input.payloads), worker=a.identity)
    return rows


def _row(rows, step, kind) -> dict:
    row = {"position": len(rows), "step": step, "kind": kind, "status": "incomplete",
           "attempts": 1 if kind == "step" else 0, "worker": None, "error": None,
           "result": None}
    rows.append(row)
    return row


def _summary(event) -> str:
    data = event.user_metadata.summary.data if event.HasField("user_metadata") else b""
    return _decode([event.user_metadata.summary]) if data else ""


def wait_for_timer(address, workflow_id, summary, timeout: float = 60.0) -> None:
    """Block until the run has started the timer called `summary` (e.g. it is waiting for
    an answer, with its deadline running)."""
    import time
    deadline = time.monotonic() + timeout
    while not any(r["kind"] == "timer" and r["step"] == summary
                  for r in _history_or_nothing(address, workflow_id)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {workflow_id!r} started no timer {summary!r} "
                               f"within {timeout:g} s")
        time.sleep(0.05)


def _history_or_nothing(address, workflow_id):
    from temporalio.service import RPCError
    try:
        return history(address, workflow_id)
    except RPCError:                # not started yet
        return []


def completed_steps(address, workflow_id) -> list:
    """Names of the activities the server has recorded as completed, in order."""
    return [r["step"] for r in history(address, workflow_id)
            if r["kind"] == "step" and r["status"] == "completed"]


async def _describe(address, workflow_id):
    client = await connect(address)
    d = await client.get_workflow_handle(workflow_id).describe()
    return d.status.name if d.status is not None else None


def status(address, workflow_id) -> str:
    """The run's status in durable_lite's words."""
    return status_word(call(_describe, address, workflow_id))


async def _result(address, workflow_id, timeout):
    client = await connect(address)
    handle = client.get_workflow_handle(workflow_id)
    return await asyncio.wait_for(handle.result(), timeout)


def result(address, workflow_id, timeout: float = 60.0):
    """Wait for the run to end (some worker must be running it) and return its result."""
    return call(_result, address, workflow_id, timeout)


async def _signal(address, workflow_id, name, payload):
    client = await connect(address)
    await client.get_workflow_handle(workflow_id).signal(name, payload)


def signal(address, workflow_id, name, payload) -> None:
    """Send the run a signal; the server keeps it in the run's history for its workflow."""
    call(_signal, address, workflow_id, name, payload)
