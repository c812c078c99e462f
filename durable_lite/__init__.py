"""durable_lite: durable execution, small enough to read in one sitting.

    import durable_lite as dl

    @dl.workflow("refund", version=1)
    def refund(ctx, order_id, amount):
        order = ctx.step("lookup", lookup_order, order_id)
        ...

    engine = dl.Engine(dl.SQLiteStore("runs.db"))
    run = engine.start(refund, "A-17", 40, run_id="refund-A-17")

The core uses only the standard library. The modules a lesson reaches as `dl.<name>`
beyond the core — `dl.sim`, `dl.naive`, `dl.faults`, `dl.sweep`, `dl.trace`, `dl.otel`,
`dl.lumpy`, `dl.lab`, `dl.engines`, `dl.grading` and the rest of `_LAZY` — load on first
use, and so do `Run`, `Step`, `Retry` and `Budget` (they are dataclasses, and the
dataclasses module is slow to import), so `import durable_lite` stays fast.
"""

import importlib

from .clock import FakeClock, SequentialIds, SystemClock
from .context import Context, StepFailed
from .engine import Engine
from .errors import (ContextCallError, Crash, DurableError, LeaseHeldError, LeaseLostError,
                     NonDeterminismError, RunArgumentsMismatch, RunFinishedError,
                     SharedWorkerError, StepResultNotJSON, StepTimeout, StoreFileError,
                     StoreWriteError, UnknownRunError, UnknownStepError, UpgradeRefused,
                     WorkflowNotRegistered)
from .saga import Compensated, CompensationFailed, Saga          # lesson 09: undo in reverse
from .store import MemoryStore, SQLiteStore, Store
from .store.records import (COMPENSATED, COMPLETED, DEAD, DIVERGED, FAILED, HALTED, QUEUED,
                            RUNNING, SLEEPING, WAITING)
from .workflow import workflow

__version__ = "0.1.0"

# Submodules that `import durable_lite` does not load: each loads on first `dl.<name>`.
_LAZY = {"sim", "naive", "faults", "sweep", "child", "examples", "policy", "run", "trace",
         "otel", "lumpy", "lab", "engines", "grading", "versioning", "queue", "capstone"}
# Names that live in those modules, loaded the same way.
_LAZY_NAMES = {"Run": "run", "Step": "policy", "Retry": "policy", "Budget": "policy",
               "Queue": "queue", "QueuedRunError": "queue",              # lesson 11
               "migration": "versioning", "RunState": "versioning"}      # lesson 12


def __getattr__(name):
    if name in _LAZY:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(f".{_LAZY_NAMES[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'durable_lite' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_LAZY, *_LAZY_NAMES})


__all__ = [
    "COMPENSATED", "COMPLETED", "Compensated", "CompensationFailed", "Context",
    "ContextCallError", "Crash", "DEAD", "DIVERGED", "DurableError", "Engine", "FAILED",
    "FakeClock", "HALTED", "LeaseHeldError", "LeaseLostError", "MemoryStore",
    "NonDeterminismError", "QUEUED", "RUNNING", "RunArgumentsMismatch", "RunFinishedError",
    "SLEEPING", "SQLiteStore", "Saga", "SequentialIds", "SharedWorkerError", "StepFailed",
    "StepResultNotJSON",
    "StepTimeout", "Store", "StoreFileError", "StoreWriteError", "SystemClock",
    "UnknownRunError", "UnknownStepError", "UpgradeRefused", "WAITING", "WorkflowNotRegistered",
    "workflow", *sorted(_LAZY), *sorted(_LAZY_NAMES),
]
