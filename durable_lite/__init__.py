"""durable_lite: durable execution, small enough to read in one sitting.

    import durable_lite as dl

    @dl.workflow("refund", version=1)
    def refund(ctx, order_id, amount):
        order = ctx.step("lookup", lookup_order, order_id)
        ...

    engine = dl.Engine(dl.SQLiteStore("runs.db"))
    run = engine.start(refund, "A-17", 40, run_id="refund-A-17")

The core uses only the standard library. `dl.sim`, `dl.naive`, `dl.faults`, `dl.lab` and
`dl.grading` load on first use, and so do `Run`, `Step`, `Retry` and `Budget` (they are
dataclasses, and the dataclasses module is slow to import), so `import durable_lite` stays
fast.
"""

import importlib

from .clock import FakeClock, SequentialIds, SystemClock
from .context import Context, StepFailed
from .engine import Engine
from .errors import (ContextCallError, Crash, DurableError, LeaseHeldError, LeaseLostError,
                     NonDeterminismError, RunArgumentsMismatch, RunFinishedError,
                     StepResultNotJSON, StepTimeout, StoreFileError, StoreWriteError,
                     UnknownRunError, WorkflowNotRegistered)
from .store import MemoryStore, SQLiteStore, Store
from .store.records import COMPLETED, DEAD, DIVERGED, FAILED, HALTED, RUNNING, SLEEPING, WAITING
from .store.records import QUEUED
from .workflow import workflow

__version__ = "0.1.0"

_LAZY = {"sim", "naive", "faults", "lab", "grading", "examples"}
_LAZY_NAMES = {"Run": "run", "Step": "policy", "Retry": "policy", "Budget": "policy",
               "Queue": "queue", "QueuedRunError": "queue"}


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


__all__ = [
    "Budget", "COMPLETED", "Context", "ContextCallError", "Crash", "DEAD", "DIVERGED",
    "DurableError", "Engine", "FAILED", "FakeClock", "HALTED", "LeaseHeldError", "LeaseLostError",
    "MemoryStore", "NonDeterminismError", "RUNNING", "Retry", "Run", "RunArgumentsMismatch",
    "RunFinishedError", "SLEEPING", "SQLiteStore", "SequentialIds", "Step", "StepFailed",
    "StepResultNotJSON", "StepTimeout", "Store", "StoreFileError", "StoreWriteError",
    "SystemClock", "UnknownRunError", "WAITING", "WorkflowNotRegistered", "workflow",
    *sorted(_LAZY),
    "QUEUED", "Queue", "QueuedRunError",          # durable queues (queue.py)
]
