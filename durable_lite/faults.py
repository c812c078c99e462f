"""Crash injection: stop a run at a named point, in-process or by really killing a process.

Three points around every step:

    before_step       nothing of the step has happened yet
    after_effect      the step's function ran (money moved, mail sent), its checkpoint did not
    after_checkpoint  the step is recorded; the next one has not started

`CrashAt(step, when)` raises `Crash` there (a BaseException, so no `except Exception` can
swallow it). `CrashAt(step, when, kill=True)` sends SIGKILL to its own process: no
`finally`, no flush, no goodbye — what a deploy or an OOM kill does to a worker.
`run_in_child` starts a fresh Python process for one run, so a notebook or test can kill a
real process and resume the run in another one.
"""

import json
import os
import signal
import sys
from dataclasses import dataclass
from typing import Optional

from .errors import Crash

BEFORE_STEP = "before_step"
AFTER_EFFECT = "after_effect"
AFTER_CHECKPOINT = "after_checkpoint"
CRASH_POINTS = (BEFORE_STEP, AFTER_EFFECT, AFTER_CHECKPOINT)


@dataclass(frozen=True)
class CrashAt:
    step: str
    when: str = AFTER_EFFECT
    occurrence: int = 1
    kill: bool = False

    def __post_init__(self):
        if self.when not in CRASH_POINTS:
            raise ValueError(f"crash point {self.when!r} is not one of {CRASH_POINTS}")

    def matches(self, step: str, occurrence: int, when: str) -> bool:
        return (self.step, self.occurrence, self.when) == (step, occurrence, when)

    def fire(self):
        if self.kill:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        raise Crash(f"simulated crash {self.when} of step {self.step!r}")


class CrashPlan:
    """The crashes still to come for one engine or runner. Each fires once, so a resume
    does not crash at the same point forever."""

    def __init__(self, crashes=None):
        if crashes is None:
            crashes = []
        elif isinstance(crashes, CrashAt):
            crashes = [crashes]
        self.pending = list(crashes)

    def check(self, step: str, occurrence: int, when: str) -> None:
        for plan in self.pending:
            if plan.matches(step, occurrence, when):
                self.pending.remove(plan)
                plan.fire()

    def __bool__(self):
        return bool(self.pending)


def every_crash_point(step_names, kill: bool = False):
    """One CrashAt for each step × point, in the order they would happen."""
    return [CrashAt(s, when, kill=kill) for s in step_names for when in CRASH_POINTS]


@dataclass(frozen=True)
class ChildOutcome:
    returncode: int
    run: Optional[dict]          # the run as the child last saw it, if it lived to report
    output: str

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def run_in_child(store_path, workflow_module: str, workflow_name: str, *args,
                 run_id: str, crash_at: Optional[CrashAt] = None, resume: bool = False,
                 python_path=(), timeout: float = 60.0, **kwargs) -> ChildOutcome:
    """Start (or resume) one run in a fresh Python process, optionally killed at `crash_at`.

    `workflow_module` is imported in the child so the workflow is registered there.
    """
    import subprocess  # only needed here; kept out of `import durable_lite`

    spec = {"store": os.fspath(store_path), "module": workflow_module, "workflow": workflow_name,
            "args": list(args), "kwargs": kwargs, "run_id": run_id, "resume": resume,
            "crash_at": None if crash_at is None else
            {"step": crash_at.step, "when": crash_at.when, "occurrence": crash_at.occurrence}}
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join([*map(os.fspath, python_path), env.get("PYTHONPATH", "")])
    # Import the module by its package name rather than running it with -m: as __main__ it
    # would be a second copy whose CrashAt is not the class the engine checks against.
    child = "import sys; from durable_lite.faults import _child_main; _child_main(sys.argv[1])"
    proc = subprocess.run([sys.executable, "-c", child, json.dumps(spec)],
                          capture_output=True, text=True, timeout=timeout, env=env)
    report = None
    for line in proc.stdout.splitlines():
        if line.startswith("RUN "):
            report = json.loads(line[4:])
    if proc.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(f"child process for run {run_id!r} failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-2000:]}")
    return ChildOutcome(proc.returncode, report, proc.stdout)


def _child_main(spec_json: str):
    import importlib

    from .engine import Engine
    from .store import SQLiteStore
    from .workflow import latest

    spec = json.loads(spec_json)
    importlib.import_module(spec["module"])
    crash = spec["crash_at"]
    engine = Engine(SQLiteStore(spec["store"]),
                    crash_at=None if crash is None else CrashAt(**crash, kill=True))
    if spec["resume"]:
        run = engine.resume(spec["run_id"])
    else:
        run = engine.start(latest(spec["workflow"]), *spec["args"], run_id=spec["run_id"],
                           **spec["kwargs"])
    print("RUN " + json.dumps({"run_id": run.run_id, "status": run.status, "result": run.result,
                               "executed": run.executed, "replayed": run.replayed}))


if __name__ == "__main__":
    _child_main(sys.argv[1])
