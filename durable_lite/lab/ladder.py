"""The durability ladder: what one checkpoint costs, rung by rung (lesson 13).

Each rung keeps a step's result through a kind of failure, and is timed per step in a
workflow of N trivial steps (each step returns its argument, so what is timed is the
checkpoint around it, not the step):

    plain function call          nothing is kept
    write()                      one write() of the checkpoint row into a log file.
                                 Once write() returns the row is in the kernel's page cache:
                                 it survives the process being killed, not a power cut.
                                 The least any checkpoint that survives a kill can cost.
    write() + fdatasync          the same, then wait until the disk holds it: survives
                                 power loss. The least such a checkpoint can cost.
    sqlite3, NORMAL / FULL       INSERT + COMMIT of the same row into a table shaped like
                                 durable_lite's, in WAL mode; FULL adds an fsync per commit
    SQLiteStore process / power  durable_lite's own checkpoint, in its two durabilities
    DBOS on SQLite / Postgres    a real engine (timed by the benchmark only: it needs the
                                 `engines` extra and, for Postgres, a server)

`measure_ladder()` times the rungs that need nothing but the standard library, in a
second or two. The benchmark (`make bench`, in benchmarks/) times every rung with more
steps and repeats; benchmarks/reference_run.json keeps a full run, which
`reference_ladder` reads. Both time the same functions, from this module.
"""

import json
import os
import socket
import sqlite3
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..engine import Engine
from ..store import SQLiteStore
from ..store.records import COMPLETED
from ..store.schema import SCHEMA_1
from ..workflow import workflow
from . import workspace

NOTHING, KILL, POWER = "nothing", "a process kill", "power loss"


@dataclass(frozen=True)
class Rung:
    key: str
    label: str
    survives: str
    baseline: str         # the bare sqlite3 rung it is compared with (same promise)


RUNGS: Tuple[Rung, ...] = (
    Rung("plain", "plain function call", NOTHING, "sqlite_normal"),
    Rung("write", "write() of the row", KILL, "sqlite_normal"),
    Rung("fsync", "write() + fdatasync", POWER, "sqlite_full"),
    Rung("sqlite_normal", "sqlite3 INSERT+COMMIT, NORMAL", KILL, "sqlite_normal"),
    Rung("sqlite_full", "sqlite3 INSERT+COMMIT, FULL", POWER, "sqlite_full"),
    Rung("dl_process", "SQLiteStore, process", KILL, "sqlite_normal"),
    Rung("dl_power", "SQLiteStore, power", POWER, "sqlite_full"),
    Rung("dbos_sqlite", "DBOS on SQLite", POWER, "sqlite_full"),
    Rung("dbos_postgres", "DBOS on Postgres", POWER, "sqlite_full"),
)
RUNG = {r.key: r for r in RUNGS}
LOCAL = ("plain", "write", "fsync", "sqlite_normal", "sqlite_full", "dl_process", "dl_power")

STEP_NAME = "noop"


def noop(i):
    """The trivial step: no I/O, no work, so what is timed is the checkpoint around it."""
    return i


@workflow("ladder_steps", version=1)
def ladder_steps(ctx, n):
    for i in range(n):
        ctx.step(STEP_NAME, noop, i)
    return n


# the checkpoint row, written the least expensive ways ---------------------------------------
# The bare rungs write a row of exactly the shape durable_lite keeps for a checkpoint, so
# every rung stores the same data.
ENTRIES_TABLE = next(s for s in SCHEMA_1.split(";") if "CREATE TABLE entries" in s).strip()
INSERT_ROW = "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
SELECT_ROWS = ("SELECT position, kind, name, occurrence, result, attempts, started_at, "
               "ended_at, worker, cost FROM entries WHERE run_id = ? ORDER BY position")


def new_run_id() -> str:
    """A run id as long as durable_lite's default ones, so every rung stores keys alike."""
    return f"ladder_steps-{uuid.uuid4()}"


def worker_name() -> str:
    """A worker name shaped like durable_lite's (host:pid:6 hex digits)."""
    return f"{socket.gethostname()}:{os.getpid()}:000000"


def _fdatasync():
    # macOS has no fdatasync; its fsync is the nearest (and does not flush the drive cache)
    return getattr(os, "fdatasync", os.fsync)


ROW_ROOM = 256          # bytes set aside per row in a log file (a row is about 150)


def open_log(path) -> int:
    """The file the write() rungs write their rows into; returns its file descriptor."""
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def size_log(fd: int, rows: int) -> None:
    """Make the file hold room for `rows` rows, written out and flushed once, beforehand.

    Every run writes its rows from the start of the file, over the last run's, into
    blocks the disk already holds: as a database reuses its log after the first pass.
    Appending instead would make every flush also record the file's new size, which costs
    more than the row; SQLite's own log is reused, so that would not be a floor."""
    size, wanted = os.fstat(fd).st_size, rows * ROW_ROOM
    if size < wanted:
        os.pwrite(fd, bytes(wanted - size), size)
        os.fsync(fd)


def log_steps(fd: int, run_id: str, n: int, worker: str, sync: bool = False) -> None:
    """Per step: call it, encode its result, write the row as one JSON line with a single
    write (and with `sync`, wait for the disk to hold it). The least a checkpoint that
    survives a kill can do; with `sync`, the least one that survives power loss can do."""
    flush = _fdatasync()
    dumps, write = json.dumps, os.pwrite
    offset = 0
    for i in range(n):
        started = time.time()
        text = dumps(noop(i))
        row = (dumps([run_id, i, "step", STEP_NAME, i + 1, text, 1, started, time.time(),
                      worker, 0.0]) + "\n").encode()
        offset += write(fd, row, offset)
        if sync:
            flush(fd)


def open_bare(path, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """A plain connection with the settings SQLiteStore uses: WAL, autocommit, a sync level."""
    db = sqlite3.connect(path, isolation_level=None)   # autocommit: one INSERT = one transaction
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    db.execute(ENTRIES_TABLE.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
    return db


def bare_steps(db: sqlite3.Connection, run_id: str, n: int, worker: Optional[str] = None) -> None:
    """Per step: call it, encode its result, INSERT the row and commit before going on."""
    worker = worker or worker_name()
    dumps = json.dumps
    for i in range(n):
        started = time.time()
        text = dumps(noop(i))
        db.execute(INSERT_ROW, (run_id, i, "step", STEP_NAME, i + 1, text, 1, started,
                                time.time(), worker, 0.0))


# timing the rungs ---------------------------------------------------------------------------
class LadderSystems:
    """Every local rung, set up once in `folder` (files, connections, engines) and run on
    demand. The benchmark adds its own rows (MemoryStore, DBOS) around the same object."""

    def __init__(self, folder, label: str = "ladder"):
        def path(name):
            return os.path.join(folder, f"{label}-{name}")

        self.logs = {"write": open_log(path("write.log")), "fsync": open_log(path("fsync.log"))}
        self.bare = {"sqlite_normal": open_bare(path("bare-normal.db"), "NORMAL"),
                     "sqlite_full": open_bare(path("bare-full.db"), "FULL")}
        self.engines = {
            "dl_process": Engine(SQLiteStore(path("dl-process.db"), durability="process")),
            "dl_power": Engine(SQLiteStore(path("dl-power.db"), durability="power")),
        }
        self.worker = worker_name()

    def prepare(self, key: str, n: int) -> None:
        """Untimed, before a timed run of `n` steps: room in the log files."""
        if key in self.logs:
            size_log(self.logs[key], n)

    def run(self, key: str, n: int) -> None:
        if key == "plain":
            for i in range(n):
                noop(i)
        elif key in self.logs:
            log_steps(self.logs[key], new_run_id(), n, self.worker, sync=key == "fsync")
        elif key in self.bare:
            bare_steps(self.bare[key], new_run_id(), n, self.worker)
        elif key in self.engines:
            run = self.engines[key].start(ladder_steps, n)
            if run.status != COMPLETED or run.steps != n:
                raise RuntimeError(f"the {key} rung's run did not complete: {run}")
        else:
            raise KeyError(f"no local rung {key!r}; they are {LOCAL}")

    def close(self) -> None:
        for fd in self.logs.values():
            os.close(fd)
        for db in self.bare.values():
            db.close()
        for engine in self.engines.values():
            engine.store.close()


def timed(fn, *args) -> float:
    """Seconds taken by fn(*args)."""
    start = time.perf_counter_ns()
    fn(*args)
    return (time.perf_counter_ns() - start) / 1e9


def round_robin(run, keys: Sequence[str], n: int, rounds: int, warm_up: int = 20,
                before=None, after_round=None) -> Dict[str, List[float]]:
    """Seconds per run of each key, `rounds` times, taking turns in a rotating order so
    that a busy moment on a shared machine hits every rung alike. `before(key)`, if given,
    runs untimed before each timed run (the benchmark switches DBOS's database there);
    `after_round(r, seconds)` after each round (the benchmark prints progress there)."""
    keys = list(keys)
    for key in keys:                     # warm up code paths, caches and files
        if before is not None:
            before(key)
        run(key, min(n, warm_up))
    seconds = {key: [] for key in keys}
    for r in range(rounds):
        shift = r % len(keys)
        for key in keys[shift:] + keys[:shift]:
            if before is not None:
                before(key)
            seconds[key].append(timed(run, key, n))
        if after_round is not None:
            after_round(r, seconds)
    return seconds


@dataclass(frozen=True)
class RungTiming:
    """Per-step cost of one rung: every timed run, and their median."""

    key: str
    steps: int
    per_step_us: Tuple[float, ...]
    in_memory: bool = False      # its files were on a file system in memory (tmpfs), where
                                 # fsync waits for no disk: no measure of power loss

    @property
    def rung(self) -> Rung:
        return RUNG[self.key]

    @property
    def median_us(self) -> float:
        return statistics.median(self.per_step_us)

    @property
    def best_us(self) -> float:
        """The fastest run: a busy machine only ever adds time, so this is the rung's
        own cost with the least noise in it."""
        return min(self.per_step_us)


def measure_ladder(folder=None, steps: int = 200, rounds: int = 3,
                   keys: Sequence[str] = LOCAL) -> List[RungTiming]:
    """Time the local rungs here and now: `rounds` runs of `steps` steps each (one or two
    seconds with the defaults, most of it waiting for the disk), their files in `folder`.

    Without a folder, in a temporary one on a disk, removed afterwards: where the
    temporary folder is held in memory (a tmpfs /tmp, as on many Linux systems), beside
    the caller instead (workspace.disk_folder)."""
    if folder is None:
        with tempfile.TemporaryDirectory(prefix="durable-lite-ladder-",
                                         dir=workspace.disk_folder()) as own:
            return measure_ladder(own, steps, rounds, keys)
    systems = LadderSystems(folder)
    try:
        seconds = round_robin(systems.run, keys, steps, rounds,
                              before=lambda key: systems.prepare(key, steps))
    finally:
        systems.close()
    memory = workspace.in_memory(folder)
    return [RungTiming(key, steps, tuple(s / steps * 1e6 for s in seconds[key]), memory)
            for key in keys]


REFERENCE_RUN = "benchmarks/reference_run.json"


def load_reference_run(path=None) -> dict:
    """The benchmark's committed full run, read from the course's folder (the one this
    package lives in, as `make lab` installs it), or from `path`."""
    if path is None:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), *REFERENCE_RUN.split("/"))
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no benchmark run at {path}: the course keeps its reference run in "
            f"{REFERENCE_RUN}; run `make bench` to make one, or pass the path of a saved "
            "run") from None


def reference_ladder(result: dict, steps: Optional[int] = None) -> List[RungTiming]:
    """The ladder of a saved benchmark run (the JSON `make bench` writes, e.g.
    benchmarks/reference_run.json), at its largest N unless `steps` says otherwise."""
    rows = [r for r in result["step_overhead"] if r["key"] in RUNG]
    steps = steps or max(r["n"] for r in rows)
    by_key = {r["key"]: r for r in rows if r["n"] == steps}
    return [RungTiming(key, steps, tuple(by_key[key]["per_step_us"]))
            for key in RUNG if key in by_key]


def ratios(timings: Sequence[RungTiming]) -> Dict[str, Optional[float]]:
    """Each rung's median over the median of its bare sqlite3 rung (same promise)."""
    medians = {t.key: t.median_us for t in timings}
    return {t.key: (t.median_us / medians[t.rung.baseline] if t.rung.baseline in medians else None)
            for t in timings}


def ladder_table(reference: Optional[Sequence[RungTiming]] = None,
                 measured: Optional[Sequence[RungTiming]] = None):
    """One row per rung, in ladder order: what it survives, µs per step and the ratio to
    bare sqlite3 in the reference run and/or in a run measured here. A pandas DataFrame."""
    import pandas

    columns = {}
    for name, timings in (("reference", reference), ("this run", measured)):
        if not timings:
            continue
        n = timings[0].steps
        by_key, x = {t.key: t for t in timings}, ratios(timings)
        columns[f"µs/step, {name} (N={n:,})"] = {k: _short(t.median_us) for k, t in by_key.items()}
        columns[f"x bare sqlite3, {name}"] = {k: ("–" if x[k] is None else _short(x[k]))
                                              for k in by_key}
    keys = [r.key for r in RUNGS if any(r.key in c for c in columns.values())]
    frame = pandas.DataFrame({"survives": {k: RUNG[k].survives for k in keys}, **columns},
                             index=keys).fillna("–")
    frame.index = [RUNG[k].label for k in keys]
    frame.index.name = "rung"
    return frame


def share_table(timings: Sequence[RungTiming], steps: Dict[str, float]):
    """Each rung's checkpoint as a share of a step's own time: {label: seconds of the
    step}, e.g. {"of a 2 s model call": 2.0}. A pandas DataFrame, one row per rung."""
    import pandas

    rows = {}
    for t in timings:
        row = {"per step": f"{_short(t.median_us)} µs"}
        for label, seconds in steps.items():
            share = t.median_us / (seconds * 1e6)
            row[label] = f"{_short(share * 100)}%"
        rows[t.rung.label] = row
    frame = pandas.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "rung"
    return frame


def _short(value: float) -> str:
    """About three significant digits, never scientific: 0.0512, 1.93, 23.1, 1,716."""
    if value == 0:
        return "0"
    digits = max(0, 2 - int(f"{abs(value):e}".split("e")[1]))
    return f"{value:,.{digits}f}"


def plot_ladder(reference: Sequence[RungTiming], measured: Optional[Sequence[RungTiming]] = None,
                ax=None):
    """Horizontal bars on a log scale, one per rung: the reference run's median (its
    value written in a column on the right), and a dot for the run measured here. Colour
    says what the rung survives. Returns the Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    if ax is None:
        ax = plt.subplots(figsize=(7.6, 5.0), layout="constrained")[1]
    colours = {NOTHING: "#aab7c4", KILL: "#2471a3", POWER: "#c0392b"}
    ref = {t.key: t for t in reference}
    keys = [r.key for r in RUNGS if r.key in ref]
    ys = range(len(keys))
    ax.barh(ys, [ref[k].median_us for k in keys], color=[colours[RUNG[k].survives] for k in keys],
            height=0.6)
    for y, k in zip(ys, keys):                   # a column of values right of the axes
        ax.annotate(f"{_short(ref[k].median_us)} µs", xy=(1.0, y), xycoords=("axes fraction", "data"),
                    xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
    handles = [Patch(color=c, label=f"survives {s}") for s, c in colours.items()]
    if measured:
        here = {t.key: t.median_us for t in measured}
        points = [(y, here[k]) for y, k in zip(ys, keys) if k in here]
        ax.plot([v for _, v in points], [y for y, _ in points], "o", color="#f1c40f",
                markeredgecolor="#17202a", ms=7)
        handles.append(Line2D([], [], ls="none", marker="o", color="#f1c40f",
                              markeredgecolor="#17202a", label=f"this run (N={measured[0].steps:,})"))
    ax.set_yticks(list(ys), [RUNG[k].label for k in keys], fontsize=9)
    ax.invert_yaxis()
    ax.set_xscale("log")
    values = [ref[k].median_us for k in keys] + ([t.median_us for t in measured] if measured else [])
    ax.set_xlim(min(values) / 3, max(values) * 3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,g}"))
    ax.set_xlabel(f"µs per step, log scale (bars: reference run, N={reference[0].steps:,})")
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=len(handles),
              fontsize=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return ax
