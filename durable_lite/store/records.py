"""The two things a store keeps: runs and the entries (checkpoints) recorded inside them."""

from dataclasses import dataclass, field
from typing import Optional

# Run statuses. Plain strings, so they print and compare simply in a notebook.
RUNNING = "running"      # executing now, or interrupted (its worker died) and resumable
WAITING = "waiting"      # parked until a signal arrives or its deadline passes
SLEEPING = "sleeping"    # parked until its wake time
COMPLETED = "completed"
FAILED = "failed"        # the workflow raised (e.g. a step exhausted its retries); resume
                         # tries the step that failed again
HALTED = "halted"        # a budget limit stopped it; resume keeps it halted

FINISHED = (COMPLETED, FAILED, HALTED)
PARKED = (WAITING, SLEEPING)

# Kinds of recorded entry. Every one occupies a position in the run's sequence.
STEP = "step"            # ctx.step
ERROR = "error"          # a ctx.step that exhausted its attempts: replayed as StepFailed
VALUE = "value"          # ctx.now / ctx.uuid / ctx.random: a non-deterministic value
SIGNAL = "signal"        # the outcome of ctx.wait_for_signal (payload, or None on timeout)
TIMER = "timer"          # a deadline or wake-up time, fixed the first time it is reached
WOKE = "woke"            # ctx.sleep finished


@dataclass
class RunRecord:
    run_id: str
    workflow: str
    version: int
    args_json: str
    kwargs_json: str
    status: str
    created_at: float
    updated_at: float
    result_json: Optional[str] = None
    error: Optional[str] = None
    budget_json: Optional[str] = None
    halt_reason: Optional[str] = None
    waiting_for: Optional[str] = None
    wake_at: Optional[float] = None
    lease_owner: Optional[str] = None
    lease_expires: Optional[float] = None
    spent_steps: int = 0           # usage of checkpoints discarded by invalidate(), kept
    spent_cost: float = 0.0        # so a budget still counts that work


@dataclass
class Entry:
    """One checkpoint: the recorded outcome at one position of a run."""

    position: int
    kind: str
    name: str                      # "lookup", "refund", "now", "approval"…
    occurrence: int                # 1 for the first "search" in a run, 2 for the second…
    result_json: Optional[str]
    attempts: int = 1
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    worker: Optional[str] = None
    cost: float = 0.0

    @property
    def label(self) -> str:
        return self.name if self.occurrence == 1 else f"{self.name}#{self.occurrence}"


@dataclass
class Event:
    """Something that happened to a run but is not a checkpoint: a failed attempt, a park…"""

    run_id: str
    at: float
    kind: str
    position: Optional[int] = None
    name: Optional[str] = None
    worker: Optional[str] = None
    detail: Optional[str] = None
    seq: int = field(default=0)
