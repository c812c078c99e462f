"""One run in a fresh Python process, which may kill itself at a crash point.

A crash test that only raises an exception keeps the process: its memory, its open files,
its `finally` blocks. A real worker dies with nothing of that. `run_in_child` starts a new
Python process that imports the workflow's module (so the workflow is registered there),
starts or resumes one run on a SQLite store, and reports the run as one JSON line. With
`crash_at=CrashAt(..., kill=True)` the child sends itself SIGKILL at that point and reports
nothing; the next `run_in_child(..., resume=True)` is the fresh process that carries on.

    killed = run_in_child("runs.db", "durable_lite.examples", "refund", folder, "A-17", 40,
                          run_id="r-1", crash_at=CrashAt("refund", "after_effect", kill=True))
    killed.killed                      # True: no report, no cleanup
    run_in_child("runs.db", "durable_lite.examples", "refund", run_id="r-1", resume=True).run

A child dies with the process that started it: on Linux it asks the system for SIGKILL
when its parent ends (PR_SET_PDEATHSIG), so a notebook kernel killed while a child runs
(a workflow stuck in a loop, say) leaves no child running on.

This module sits above the engine; `durable_lite.faults` (which the engine imports) only
names it, so the package has no import cycle.
"""

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Optional

from .faults import CrashAt


@dataclass(frozen=True)
class ChildOutcome:
    returncode: int
    run: Optional[dict]          # the run as the child last saw it, if it lived to report
    output: str

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


# Children still running (process -> the group that started it), so a caller that is
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
    spec = {"store": os.fspath(store_path), "module": workflow_module, "workflow": workflow_name,
            "args": list(args), "kwargs": kwargs, "run_id": run_id, "resume": resume,
            "options": dict(engine_options or {}), "parent": os.getpid(),
            "crash_at": None if crash_at is None else
            {"step": crash_at.step, "when": crash_at.when, "occurrence": crash_at.occurrence}}
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"      # leave no __pycache__ behind in a learner's folder
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join([*map(os.fspath, python_path), env.get("PYTHONPATH", "")])
    # Import the module by its package name rather than running it with -m: as __main__ it
    # would be a second copy whose CrashAt is not the class the engine checks against.
    child = "import sys; from durable_lite.child import _child_main; _child_main(sys.argv[1])"
    proc = subprocess.Popen([sys.executable, "-c", child, json.dumps(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    with _live_lock:
        _live[proc] = getattr(_group, "token", None)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise TimeoutError(f"the child process for run {run_id!r} did not finish within "
                           f"{timeout} s, so it was killed") from None
    except BaseException:                     # interrupted: take the child down with us
        proc.kill()
        proc.communicate()
        raise
    finally:
        with _live_lock:
            _live.pop(proc, None)
    report = None
    for line in stdout.splitlines():
        if line.startswith("RUN "):
            report = json.loads(line[4:])
    if proc.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(f"child process for run {run_id!r} failed (exit {proc.returncode}):\n"
                           f"{stderr[-2000:]}")
    return ChildOutcome(proc.returncode, report, stdout)


def kill_children(token=None) -> int:
    """SIGKILL the child processes `run_in_child` still waits for: those of group `token`,
    or every one with no token. Returns how many."""
    with _live_lock:
        procs = [p for p, group in _live.items() if token is None or group == token]
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    return len(procs)


def _child_main(spec_json: str):
    import importlib

    from .clock import FakeClock, SequentialIds
    from .engine import Engine
    from .errors import NonDeterminismError
    from .store import SQLiteStore
    from .workflow import latest

    spec = json.loads(spec_json)
    if spec.get("parent"):
        _die_with_parent(spec["parent"])
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


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when the thread that started it ends. That thread waits
    in run_in_child until the child ends, so only the end of the whole parent fires it.
    Elsewhere (or without prctl) nothing: run_in_child's own timeout still applies."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:               # the parent ended before we asked: go now
        os._exit(1)


if __name__ == "__main__":
    _child_main(sys.argv[1])
