"""The "before": a job runner that retries a failed task from the top.

It runs the very same workflow functions as the engine, through a context whose `step`
simply calls the function — no store, no memo. When an attempt fails (an exception, or a
simulated crash that the job queue answers by redelivering the job), the next attempt
starts again at step one, and every side effect before the failure happens again.
"""

import random
from dataclasses import dataclass, field
from typing import Any, List, Optional

from .clock import SystemClock, random_ids
from .errors import Crash
from .faults import CrashPlan, AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP
from .keys import derive_key
from .policy import Step


class NaiveContext:
    """Same methods as Context, none of the memory."""

    def __init__(self, runner, run_id, attempt):
        self._runner, self.run_id, self.attempt = runner, run_id, attempt
        self._occurrences = {}
        self._crashed = None        # the simulated crash that ended this attempt, if any

    def step(self, step, fn, *args, **kwargs):
        self._check_alive()
        name = step.name if isinstance(step, Step) else step
        occurrence = self._occurrences[name] = self._occurrences.get(name, 0) + 1
        runner = self._runner
        try:
            runner._fault_point(name, occurrence, BEFORE_STEP)
            runner.executions.append((self.attempt, name))
            result = fn(*args, **kwargs)
            runner._fault_point(name, occurrence, AFTER_EFFECT)
            runner._fault_point(name, occurrence, AFTER_CHECKPOINT)   # nothing to checkpoint
        except Crash as crash:
            self._crashed = crash
            raise
        return result

    def _check_alive(self):
        """A killed process runs no `finally:` block; a simulated crash unwinds through the
        workflow's. So once it has crashed, its steps there crash again (as Context does)."""
        if self._crashed is not None:
            raise self._crashed

    def now(self):
        self._check_alive()
        return self._runner.clock()

    def uuid(self):
        self._check_alive()
        return self._runner.ids()

    def random(self):
        self._check_alive()
        return self._runner.rng.random()

    def idempotency_key(self, *parts):
        return derive_key(self.run_id, *parts)


@dataclass
class NaiveResult:
    status: str                      # "completed" or "failed"
    result: Any
    attempts: int
    executions: List[tuple] = field(default_factory=list)   # (attempt, step name)
    errors: List[str] = field(default_factory=list)

    @property
    def step_executions(self) -> int:
        return len(self.executions)


class NaiveRunner:
    """Retry the whole task up to `max_attempts` times."""

    def __init__(self, max_attempts: int = 3, clock=None, ids=None, seed=None, crash_at=None):
        self.max_attempts = max_attempts
        self.clock = clock or SystemClock()
        self.ids = ids or random_ids
        self.rng = random.Random(seed)
        self._crashes = crash_at if isinstance(crash_at, CrashPlan) else CrashPlan(crash_at)
        self.executions = []

    def _fault_point(self, step, occurrence, when):
        self._crashes.check(step, occurrence, when)

    def run(self, wf, *args, run_id: Optional[str] = None, **kwargs) -> NaiveResult:
        fn = getattr(wf, "fn", wf)
        run_id = run_id or f"{getattr(wf, 'name', fn.__name__)}-naive"
        self.executions = []
        errors = []
        for attempt in range(1, self.max_attempts + 1):
            try:
                result = fn(NaiveContext(self, run_id, attempt), *args, **kwargs)
                return NaiveResult("completed", result, attempt, self.executions, errors)
            except (Exception, Crash) as exc:   # a crash: the queue redelivers the job
                errors.append(f"attempt {attempt}: {type(exc).__name__}: {exc}")
        return NaiveResult("failed", None, self.max_attempts, self.executions, errors)


def run(wf, *args, max_attempts=3, crash_at=None, **kwargs) -> NaiveResult:
    """Run `wf` naively: on any failure, start again from the first step."""
    return NaiveRunner(max_attempts=max_attempts, crash_at=crash_at).run(wf, *args, **kwargs)
