"""What the exercise checks share: scratch folders, crash-and-resume runs, and the sweep.

Two ways to crash a learner's workflow, and when each fits:

- `sweep_of(wf, ...)` is `dl.faults.sweep`: every crash point a clean run passes, each
  resumed to the end in a fresh world, the world's ledgers compared with the clean run.
  Use it whenever the question is "does anything happen twice, get lost, or end
  differently if the process dies anywhere?" — one mechanism for the course and the checks.
- `EngineRuns` starts a run, crashes it once where you say, and resumes it with a fresh
  engine on the same store. Use it when a case needs something the sweep keeps fixed: a
  clock that starts at a drawn time, ids drawn from a seed, Python's global random
  generator seeded differently before the resume.

In both, as after a real restart, every engine (every process) mints ids of its own: an id
minted after a resume never repeats one minted before the crash.
"""

import contextlib
import os
import random
import shutil
import tempfile
import uuid

from ..clock import FakeClock, SequentialIds
from ..engine import Engine
from ..errors import Crash, NonDeterminismError
from ..sim import forget_worlds
from ..store import SQLiteStore
from ..store.records import VALUE
from .checks import Fail, NotAttempted

START = 1_767_225_600.0          # the FakeClock's default start: 2026-01-01 00:00 UTC


@contextlib.contextmanager
def scratch(label="check"):
    """A temporary folder for one test; the simulated world's files in it are closed after."""
    folder = tempfile.mkdtemp(prefix=f"durable-lite-{label}-")
    try:
        yield folder
    finally:
        forget_worlds(folder)
        shutil.rmtree(folder, ignore_errors=True)


_MOMENTS = {"before_step": "just before step {!r}", "after_effect": "right after step {!r} ran",
            "after_checkpoint": "after step {!r} was recorded"}


def crash_label(crash) -> str:
    """"right after step 'refund' ran" — the moment of a crash point (a CrashAt, a sweep
    Point or a sweep row), in words."""
    step = crash["step"] if isinstance(crash, dict) else crash.step
    when = crash["when"] if isinstance(crash, dict) else crash.when
    return _MOMENTS[when].format(step)


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


def diverged(status, error) -> bool:
    """Did a replay take another path than the first execution? Today the engine raises
    NonDeterminismError (the sweep reports it as status "diverged"); an engine that records
    divergence as a terminal status says "diverged". Either counts."""
    return status == "diverged" or "NonDeterminism" in (error or "")


def unfinished(status, error, what: str):
    """Raise NotAttempted for a stub, else Fail, for a run that did not complete."""
    if error and "NotImplementedError" in error:
        raise NotAttempted(f"{what} (or a function it calls) still raises NotImplementedError")
    if diverged(status, error):
        raise Fail(f"{what} diverged on replay: {_first_sentence(error)}",
                   "the replay made different calls than the first execution: something in "
                   "the orchestration changed between the two (the clock, an id, randomness, "
                   "a model's answer)")
    raise Fail(f"{what} ended {status}" + (f": {error}" if error else ""))


def _first_sentence(text) -> str:
    return (text or "").split(". ")[0]


class SeededIds:
    """Ids shaped like uuid4's, from a seed: as different from another seed's as real
    uuids are (in every character, not only a prefix), and the same for the same seed.
    `skip`: how many of the seed's ids to pass over first."""

    def __init__(self, seed, skip: int = 0):
        self.rng = random.Random(str(seed))
        for _ in range(skip):
            self()

    def __call__(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))


class EngineRuns:
    """Start a workflow, crash it once, and resume it with a fresh engine on the same store —
    as a restarted process would — with a fake clock and predictable ids and randomness.

    start: the fake clock's first reading (draw one, so a literal time cannot pass).
    ids:   every engine stands for a process, and a process's uuid4() never repeats an id
           another one minted: an engine numbers its ids on from those the store has
           recorded (`id-0003` after a run recorded two), so an id minted after a resume
           is the one an uninterrupted run would have minted there. For ids shaped like
           uuid4's that differ between grading runs, give a run an id seed
           (`run(..., ids=draw.token())`): its ids are that seed's, on from the same point."""

    def __init__(self, folder, seed=0, ids_prefix="id", pause=3600.0, start=START):
        self.folder, self.seed, self.ids_prefix, self.pause = folder, seed, ids_prefix, pause
        self.clock = FakeClock(start)

    def engine(self, crash=None, worker="worker-1", ids=None):
        store = SQLiteStore(os.path.join(self.folder, "runs.db"))
        minted = ids_recorded(store)
        source = (SeededIds(ids, skip=minted) if ids is not None
                  else SequentialIds(self.ids_prefix, start=minted + 1))
        return Engine(store, self.clock, ids=source, seed=self.seed, worker=worker,
                      crash_at=crash)

    def run(self, wf, *args, run_id="run-1", crash=None, ids=None, **kwargs):
        """Returns the final Run. A crash is followed by a pause and one resume."""
        try:
            return self.engine(crash, ids=ids).start(wf, *args, run_id=run_id, **kwargs)
        except Crash:
            pass
        self.clock.advance(self.pause)           # the restart takes a while
        return self.engine(worker="worker-2", ids=ids).resume(run_id)


def ids_recorded(store) -> int:
    """How many ids `ctx.uuid()` has recorded in `store`, over all its runs: a fresh engine
    numbers its own on from there, so it never mints one a run already holds."""
    return sum(e.kind == VALUE and e.name == "uuid"
               for record in store.list_runs() for e in store.load_entries(record.run_id))


def step_names(engine, run_id):
    return [row["step"] for row in engine.history(run_id) if row["kind"] == "step"]


def _counted_from_files(folder) -> dict:
    """What each case's world recorded, read from its files (ledgers.py): never through
    durable_lite.sim, whose table of worlds the answer's process could replace."""
    from .ledgers import Ledgers
    return Ledgers(folder).counts()


def sweep_of(wf, *args, what: str, ends=("completed",), **options):
    """`dl.faults.sweep(wf, *args, **options)` for a check: no progress bar, and a sweep that
    cannot finish (or a clean run that does not end as it should) becomes feedback instead
    of a traceback.

    ends: the statuses a clean run may end with: ("completed",) by default; a saga's
          question says ("completed", "compensated").

    Returns the Sweep. Its clean run ended one of `ends`; the rows are the learner's to judge."""
    from ..faults import SweepError, sweep
    if isinstance(ends, str):
        ends = (ends,)
    options.setdefault("effects", _counted_from_files)
    try:
        result = sweep(wf, *args, progress=False, **options)
    except SweepError as exc:
        text = str(exc)
        if "NotImplementedError" in text:
            raise NotAttempted(f"{what} (or a function it calls) still raises NotImplementedError") from None
        raise Fail(f"{what} could not be crashed and finished: {text.split(': ', 1)[-1]}") from None
    except NonDeterminismError as exc:
        raise Fail(f"{what} diverged on replay: {_first_sentence(str(exc))}") from None
    clean = result.clean
    status = clean["status"]
    if status not in ends:
        if status in ("completed", "compensated"):       # an ending, not the one asked for
            raise Fail(f"{what}, run once without a crash, ended {status}; it should end "
                       f"{' or '.join(ends)}")
        unfinished(status, clean["error"], f"{what}, run once without a crash,")
    return result
