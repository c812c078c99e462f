"""One run in a fresh Python process, which may kill itself at a crash point.

A crash test that only raises an exception keeps the process: its memory, its open files,
its `finally` blocks. A real worker dies with nothing of that. `run_in_child` starts a new
Python process (forked from a Python that has imported only the package, fresh.py, so it
costs milliseconds, not an interpreter's start) that imports the workflow's module (so the
workflow is registered there),
starts or resumes one run on a SQLite store, and reports the run as one JSON line. With
`crash_at=CrashAt(..., kill=True)` the child sends itself SIGKILL at that point and reports
nothing; the next `run_in_child(..., resume=True)` is the fresh process that carries on.

    killed = run_in_child("runs.db", "durable_lite.examples", "refund", folder, "A-17", 40,
                          run_id="r-1", crash_at=CrashAt("refund", "after_effect", kill=True))
    killed.killed                      # True: no report, no cleanup
    run_in_child("runs.db", "durable_lite.examples", "refund", run_id="r-1", resume=True).run

A child dies with the process that started it (fresh.py): a notebook kernel killed while a
child runs (a workflow stuck in a loop, say) leaves no child running on.

This module sits above the engine; `durable_lite.faults` (which the engine imports) only
names it, so the package has no import cycle.
"""

import json
import os
import signal
import threading
from dataclasses import dataclass
from typing import Optional

from .faults import CrashAt

# What the Python the children are forked from imports ahead (fresh.py): this module and
# the engine it runs. `import durable_lite` alone imports almost nothing (its names load on
# first use), and each child would import the rest again: about 35 ms of CPU a child, of 45.
# Never the workflow's module: each child imports that afresh.
PRELOAD = ("durable_lite.child", "durable_lite.clock", "durable_lite.engine", "durable_lite.store",
           "durable_lite.workflow", "durable_lite.naive", "durable_lite.run", "durable_lite.sim",
           "durable_lite.policy", "durable_lite.store.template")


@dataclass(frozen=True)
class ChildOutcome:
    returncode: int
    run: Optional[dict]          # the run as the child last saw it, if it lived to report
    output: str

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


# Children still running (pid -> the group that started it), so a caller that is
# interrupted can leave none behind. A thread joins a group with `child_group(token)`.
_live = {}
_live_lock = threading.Lock()
_group = threading.local()


def child_group(token) -> None:
    """Mark the children this thread starts from now on as `token`'s (see kill_children)."""
    _group.token = token


def run_in_child(store_path, workflow_module: str, workflow_name: str, *args,
                 run_id: str, crash_at: Optional[CrashAt] = None, resume: bool = False,
                 python_path=(), timeout: float = 60.0, engine_options: Optional[dict] = None,
                 **kwargs) -> ChildOutcome:
    """Start (or resume) one run in a fresh Python process, optionally killed at `crash_at`.

    `workflow_module` is imported in the child so the workflow is registered there; the
    remaining keyword arguments go to the workflow. `engine_options` (all optional):
    "clock" (start a FakeClock at these epoch seconds; the report gives its time at the
    end), "ids" (a SequentialIds prefix) and "ids_start" (its first number), "seed",
    "worker", and "runner": "engine" (the default) or "naive" (one attempt of the naive
    runner from the top; `resume` is then ignored). A child still running after `timeout`
    seconds is killed and TimeoutError raised.
    """
    from . import fresh
    spec = {"store": os.fspath(store_path), "module": workflow_module, "workflow": workflow_name,
            "args": list(args), "kwargs": kwargs, "run_id": run_id, "resume": resume,
            "options": dict(engine_options or {}),
            "crash_at": None if crash_at is None else
            {"step": crash_at.step, "when": crash_at.when, "occurrence": crash_at.occurrence}}
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"      # leave no __pycache__ behind in a learner's folder
    path = [*map(os.fspath, python_path),
            *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    token, pids = getattr(_group, "token", None), []

    def started(pid):
        with _live_lock:
            _live[pid] = token
        pids.append(pid)

    try:
        status, stdout, stderr = fresh.run(f"{__name__}:_child_main", spec,
                                           key=os.fspath(store_path), folder=os.getcwd(),
                                           env=env, path=path, timeout=timeout, started=started,
                                           preload=PRELOAD)
    finally:
        with _live_lock:
            for pid in pids:
                _live.pop(pid, None)
    if status == "timeout":
        raise TimeoutError(f"the child process for run {run_id!r} did not finish within "
                           f"{timeout} s, so it was killed")
    report = None
    for line in stdout.splitlines():
        if line.startswith("RUN "):
            report = json.loads(line[4:])
    if status not in (0, -signal.SIGKILL):
        raise RuntimeError(f"child process for run {run_id!r} failed (exit {status}):\n"
                           f"{stderr[-2000:]}")
    return ChildOutcome(status, report, stdout)


def kill_children(token=None) -> int:
    """SIGKILL the child processes `run_in_child` still waits for: those of group `token`,
    or every one with no token. Returns how many."""
    with _live_lock:
        pids = [p for p, group in _live.items() if token is None or group == token]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:       # it ended meanwhile
            pass
    return len(pids)


def _child_main(spec: dict):
    """(In the fresh process.) Start or resume the run the spec names; print its report."""
    import importlib

    from .clock import FakeClock, SequentialIds
    from .engine import Engine
    from .errors import NonDeterminismError
    from .store import SQLiteStore
    from .workflow import latest

    options = spec.get("options", {})
    importlib.import_module(spec["module"])
    crash = spec["crash_at"]
    crash_at = None if crash is None else CrashAt(**crash, kill=True)
    clock = FakeClock(options["clock"]) if options.get("clock") is not None else None
    ids = SequentialIds(options["ids"], options.get("ids_start", 1)) if options.get("ids") else None
    wf = latest(spec["workflow"])
    if options.get("runner", "engine") == "naive":
        from .naive import NaiveRunner
        runner = NaiveRunner(max_attempts=1, clock=clock, ids=ids, seed=options.get("seed"),
                             crash_at=crash_at)
        outcome = runner.run(wf, *spec["args"], run_id=spec["run_id"], **spec["kwargs"])
        report = {"run_id": spec["run_id"], "status": outcome.status, "result": outcome.result,
                  "error": outcome.errors[-1] if outcome.errors else None,
                  "executed": [name for _, name in outcome.executions]}
    else:
        engine = Engine(SQLiteStore(spec["store"]), clock, ids=ids, seed=options.get("seed"),
                        worker=options.get("worker"), crash_at=crash_at)
        try:
            if spec["resume"]:
                run = engine.resume(spec["run_id"])
            else:
                run = engine.start(wf, *spec["args"], run_id=spec["run_id"], **spec["kwargs"])
        except NonDeterminismError as exc:       # an outcome to report, not a broken child
            report = {"run_id": spec["run_id"], "status": "diverged", "result": None,
                      "error": f"NonDeterminismError: {exc}"}
        else:
            report = {"run_id": run.run_id, "status": run.status, "result": run.result,
                      "error": run.error, "executed": run.executed, "replayed": run.replayed,
                      "waiting_for": run.waiting_for, "wake_at": run.wake_at}
    if clock is not None:
        report["clock"] = clock.t
    print("RUN " + json.dumps(report))
