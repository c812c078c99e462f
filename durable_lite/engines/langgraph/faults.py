"""The course's three crash points, around a LangGraph task.

LangGraph knows nothing of durable_lite's crash points, so a workflow ported to it
declares its tasks with `step(name)` from here instead of `@task(name=name)`. It is the
same LangGraph task, called the same way (`lookup(folder, order_id).result()`), with three
checks around it:

    before_step       in the entrypoint, just before LangGraph sees the call
    after_effect      inside the task, after its side effect, before LangGraph has its
                      result (the crash window of lesson 03)
    after_checkpoint  in the entrypoint, once the task's result is saved in the checkpoint
                      file, before the next task starts

LangGraph saves a finished task's result on a background thread, so `.result()` can
return, and the next task start, before the save is done (durability="sync" waits only
for the checkpoint at the end of a superstep, and an entrypoint's whole body is one).
To break LangGraph where the other engines are broken, each point first waits until the
checkpoint file holds every result the workflow has been handed so far: what a fresh
process will then find. Under durability="exit" nothing is saved before the run ends, so
nothing is waited for. Without the wait (`arm(..., saver_path=None)`) a crash just after a
task returned may lose its result: compare/differences.py records that race, and a test shows it.
An answer to an interrupt is saved the same way, in the background: a process that
resumed a thread with Command(resume=...) says so (`answered(value)`), and its crash
points wait for that answer too, so that a crash after the answer arrived finds it
recorded.

`arm(CrashAt(...), saver_path=...)` sets the crashes for this process (each fires once).
The module also notes which tasks really ran here and which were served from the
checkpoint (`replayed()`): what a resume replayed, seen from inside the resuming process.
"""

import functools
import time

from ...faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP, CrashPlan
from . import support as langgraph_support

_state = {"plan": CrashPlan(), "saver_path": None, "ran": [], "called": [], "replayed": [],
          "returned": [], "save_timeout": 60.0, "answers": []}


def arm(*crashes, saver_path=None, save_timeout: float = 60.0) -> None:
    """Crash this process at these points (faults.CrashAt; kill=True sends SIGKILL).
    `saver_path`: the checkpoint file whose saves the points wait for (None: no wait, as
    under durability="exit")."""
    _state.update(plan=CrashPlan(list(crashes)), saver_path=saver_path,
                  save_timeout=save_timeout)


def disarm() -> None:
    arm()
    for seen in ("ran", "called", "replayed", "returned"):
        _state[seen].clear()
    _state["answers"].clear()


def answered(value) -> None:
    """This process resumes the thread with `value`, an answer to its interrupt (the crash
    points wait until the saver holds it)."""
    _state["answers"].append(value)


def pending() -> int:
    """How many armed crashes have not fired yet."""
    return len(_state["plan"].pending)


def ran() -> list:
    """The tasks whose function ran in this process, in order."""
    return list(_state["ran"])


def replayed() -> list:
    """The tasks the workflow asked for whose result came from the checkpoint, in order."""
    return list(_state["replayed"])


def _check(name, when):
    # Each step name appears once per workflow in the course's examples: occurrence 1.
    _state["plan"].check(name, 1, when)


def _armed_at(name, when) -> bool:
    return any(c.matches(name, 1, when) for c in _state["plan"].pending)


def _wait_until_saved(name, when) -> None:
    """Block until the checkpoint file holds the thread's first checkpoint and every task
    result handed to the workflow so far; only if a crash is armed here."""
    path = _state["saver_path"]
    if path is None or not _armed_at(name, when):
        return
    from langgraph.config import get_config
    thread_id = get_config()["configurable"]["thread_id"]
    saver = langgraph_support.open_saver(path)       # its own connection: what a new process sees
    thread = langgraph_support.config(thread_id)
    try:
        deadline = time.monotonic() + _state["save_timeout"]
        # Each look decodes the thread's checkpoints: first soon (a save usually lands within
        # milliseconds), then less often, so a save slowed by a busy machine is not waited
        # for by a loop that takes the CPU it needs.
        pause = 0.005
        while True:
            saved = langgraph_support.saved_results(saver, thread_id)
            answers = langgraph_support.saved_answers(saver, thread_id)
            if saver.get_tuple(thread) and all(v in saved for v in _state["returned"]) and \
                    all(a in answers for a in _state["answers"]):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{when} of task {name!r}: the results before it were not "
                                   f"saved within {_state['save_timeout']:g} s")
            time.sleep(pause)
            pause = min(2 * pause, 0.05)
    finally:
        langgraph_support.close_saver(saver)


class _Call:
    """What calling a step returns: LangGraph's future, with the checks on `.result()`."""

    def __init__(self, name, future):
        self.name, self.future = name, future

    def result(self, timeout=None):
        value = self.future.result(timeout)
        _state["called"].append(self.name)
        # A task that ran here noted its name before returning; a call with no run of its
        # own to account for was served from the checkpoint. (The ports wait for each task
        # before calling the next, so the counts line up call by call.)
        calls, runs, served = (_state[k].count(self.name) for k in ("called", "ran", "replayed"))
        if runs < calls - served:
            _state["replayed"].append(self.name)
        _state["returned"].append(value)
        _wait_until_saved(self.name, AFTER_CHECKPOINT)
        _check(self.name, AFTER_CHECKPOINT)
        return value


def step(name: str, **options):
    """`@task(name=name, **options)` with the three crash points around the function."""
    langgraph_support.require()
    from langgraph.func import task

    def decorate(fn):
        @functools.wraps(fn)
        def inside(*args, **kwargs):
            value = fn(*args, **kwargs)
            _state["ran"].append(name)
            _wait_until_saved(name, AFTER_EFFECT)
            _check(name, AFTER_EFFECT)
            return value

        recorded = task(name=name, **options)(inside)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            _wait_until_saved(name, BEFORE_STEP)
            _check(name, BEFORE_STEP)
            return _Call(name, recorded(*args, **kwargs))

        call.task = recorded
        return call
    return decorate
