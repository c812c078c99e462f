"""`Run`: what the engine hands back — a snapshot of one run, read from the store."""

from dataclasses import dataclass, field
from typing import Any

from .store.records import COMPENSATED, COMPLETED, FINISHED


@dataclass(frozen=True)
class Run:
    run_id: str
    workflow: str
    version: int
    status: str
    result: Any = None
    error: str | None = None       # why it failed, diverged or is dead
    halt_reason: str | None = None
    waiting_for: str | None = None
    wake_at: float | None = None
    steps: int = 0                 # steps executed over the run's whole life (all resumes)
    cost: float = 0.0              # cost counted over the run's whole life (exactly: usage.py)
    executed: list = field(default_factory=list)   # steps run by THIS call
    replayed: list = field(default_factory=list)   # steps answered from checkpoints
    note: str | None = None        # something this call's caller should know (e.g. the run
                                   # continued on the version it started with, not the one given)

    @property
    def done(self) -> bool:
        """Nothing more happens to the run until someone acts (completed, failed, halted,
        diverged or dead)."""
        return self.status in FINISHED

    def __repr__(self):
        parts = [f"run_id={self.run_id!r}", f"status={self.status!r}"]
        if self.status in (COMPLETED, COMPENSATED):
            parts.append(f"result={self.result!r}")
        for name in ("error", "halt_reason", "waiting_for", "note"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)!r}")
        return f"Run({', '.join(parts)})"
