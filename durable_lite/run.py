"""`Run`: what the engine hands back — a snapshot of one run, read from the store."""

from dataclasses import dataclass, field
from typing import Any, List, Optional


@dataclass(frozen=True)
class Run:
    run_id: str
    workflow: str
    version: int
    status: str
    result: Any = None
    error: Optional[str] = None
    halt_reason: Optional[str] = None
    waiting_for: Optional[str] = None
    wake_at: Optional[float] = None
    steps: int = 0                 # steps executed over the run's whole life (all resumes)
    cost: float = 0.0              # cost counted over the run's whole life
    executed: List[str] = field(default_factory=list)   # steps run by THIS call
    replayed: List[str] = field(default_factory=list)   # steps answered from checkpoints

    @property
    def done(self) -> bool:
        return self.status in ("completed", "failed", "halted")

    def __repr__(self):
        parts = [f"run_id={self.run_id!r}", f"status={self.status!r}"]
        if self.status == "completed":
            parts.append(f"result={self.result!r}")
        for name in ("error", "halt_reason", "waiting_for"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)!r}")
        return f"Run({', '.join(parts)})"
