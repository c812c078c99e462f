"""What the exercise checks share: scratch folders, a fresh world, crash-and-resume runs."""

import contextlib
import os
import shutil
import tempfile

from .. import examples
from ..clock import FakeClock, SequentialIds
from ..engine import Engine
from ..errors import Crash
from ..faults import CrashAt
from ..store import SQLiteStore
from .checks import Fail, NotAttempted

START = 1_767_225_600.0          # the FakeClock's default start: 2026-01-01 00:00 UTC


@contextlib.contextmanager
def scratch(label="check"):
    """A temporary folder for one test; the simulated world's files in it are closed after."""
    folder = tempfile.mkdtemp(prefix=f"durable-lite-{label}-")
    try:
        yield folder
    finally:
        # Forget the world objects opened on this folder; their connections close with them.
        # (World.close() cannot be used: TicketDesk.close(ticket) hides _Ledger.close().)
        for key in [k for k in examples._worlds if str(k[0]).startswith(folder)]:
            examples._worlds.pop(key)
        shutil.rmtree(folder, ignore_errors=True)


_MOMENTS = {"before_step": "just before step {!r}", "after_effect": "right after step {!r} ran",
            "after_checkpoint": "after step {!r} was recorded"}


def crash_label(crash: CrashAt) -> str:
    """"right after step 'refund' ran" — the moment of a crash point, in words."""
    return _MOMENTS[crash.when].format(crash.step)


def needs_callable(value, name: str):
    if value is None:
        raise NotAttempted(f"{name} is still None")
    if not callable(value):
        raise Fail(f"{name} should be a function, but it is a {type(value).__name__}",
                   f"pass the function itself: check(..., {name}) without calling it")


def needs_workflow(value, name: str):
    needs_callable(value, name)
    if not hasattr(value, "fn") or not hasattr(value, "version"):
        raise Fail(f"{name} is a plain function, not a workflow",
                   'decorate it with @dl.workflow("...", version=1) as given in the cell')


class EngineRuns:
    """Start a workflow, crash it once, and resume it with a fresh engine on the same store —
    as a restarted process would — with a fake clock and predictable ids and randomness."""

    def __init__(self, folder, seed=0, ids_prefix="id", pause=3600.0):
        self.folder, self.seed, self.ids_prefix, self.pause = folder, seed, ids_prefix, pause
        self.clock = FakeClock(START)

    def engine(self, crash=None, worker="worker-1"):
        return Engine(SQLiteStore(os.path.join(self.folder, "runs.db")), self.clock,
                      ids=SequentialIds(self.ids_prefix), seed=self.seed, worker=worker,
                      crash_at=crash)

    def run(self, wf, *args, run_id="run-1", crash=None, **kwargs):
        """Returns the final Run. A crash is followed by a pause and one resume."""
        try:
            return self.engine(crash).start(wf, *args, run_id=run_id, **kwargs)
        except Crash:
            pass
        self.clock.advance(self.pause)           # the restart takes a while
        return self.engine(worker="worker-2").resume(run_id)


def step_names(engine, run_id):
    return [row["step"] for row in engine.history(run_id) if row["kind"] == "step"]
