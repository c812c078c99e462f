"""Crash injection: stop a run at a named point, in-process or by really killing a process.

Three points around every step:

    before_step       nothing of the step has happened yet
    after_effect      the step's function ran (money moved, mail sent), its checkpoint did not
    after_checkpoint  the step is recorded; the next one has not started

Waits and sleeps have two: `before_step` when the run reaches one that is not over yet,
and `after_checkpoint` once its answer (a signal, the deadline, the wake time) is recorded.

`CrashAt(step, when)` raises `Crash` there (a BaseException, so no `except Exception` can
swallow it). `CrashAt(step, when, kill=True)` sends SIGKILL to its own process: no
`finally`, no flush, no goodbye — what a deploy or an OOM kill does to a worker.

Two tools build on these points, each in a module of its own:

    dl.faults.sweep(wf, *args)      crash at every point the workflow reaches, resume, and
                                    count what the world saw (durable_lite/sweep.py)
    dl.faults.run_in_child(...)     start or resume one run in a fresh Python process, so it
                                    can really be killed (durable_lite/child.py)

They load on first use: the engine imports this module, and this module never imports the
engine.
"""

import importlib
import os
import signal
import sys
from dataclasses import dataclass

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
    does not crash at the same point forever.

    `seen`: a list that every crash point passed is appended to, as (step, occurrence,
    when): how the sweep finds a workflow's crash points from one clean run."""

    def __init__(self, crashes=None, seen=None):
        if crashes is None:
            crashes = []
        elif isinstance(crashes, CrashAt):
            crashes = [crashes]
        self.pending = list(crashes)
        self.seen = seen

    def check(self, step: str, occurrence: int, when: str) -> None:
        if self.seen is not None:
            self.seen.append((step, occurrence, when))
        for plan in self.pending:
            if plan.matches(step, occurrence, when):
                self.pending.remove(plan)
                plan.fire()

    def __bool__(self):
        """Worth asking at a crash point: a crash is still to come, or the points are noted."""
        return bool(self.pending) or self.seen is not None


def every_crash_point(step_names, kill: bool = False):
    """One CrashAt for each step × point, in the order they would happen."""
    return [CrashAt(s, when, kill=kill) for s in step_names for when in CRASH_POINTS]


# Names that live in the modules built on the crash points, loaded when first asked for.
_LATER = {"sweep": "sweep", "Sweep": "sweep", "SweepError": "sweep", "crash_points": "sweep",
          "world_effects": "sweep", "run_in_child": "child", "ChildOutcome": "child"}


def __getattr__(name):
    if name in _LATER:
        value = getattr(importlib.import_module(f".{_LATER[name]}", __package__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_LATER])
