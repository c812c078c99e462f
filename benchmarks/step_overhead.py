"""What does a durable step cost? Measured against a plain call, bare sqlite3 and DBOS.

    python benchmarks/step_overhead.py                      # N = 100 and 1000, 7 repeats
    python benchmarks/step_overhead.py --steps 5 --repeats 1 --no-dbos   # a quick check
    python benchmarks/step_overhead.py --show benchmarks/reference_run.json  # print a saved run

One process measures everything; child processes exist only to be killed. Two questions:

1. Writing: the per-step cost of a workflow of N trivial steps (wall time of the whole
   workflow / N) for a plain call, bare sqlite3 INSERT+COMMIT of durable_lite's row (WAL,
   synchronous NORMAL and FULL), durable_lite on MemoryStore and on SQLiteStore
   (durability "process" and "power"), and DBOS Transact on a SQLite system database.
2. Replaying: a child process completes N steps and is SIGKILLed before the workflow ends;
   this process then reads the rows back (bare SELECT, and SELECT + json.loads of every
   result: the least a replay must do; durable_lite's load_entries), resumes the run
   (durable_lite replays all N steps), and recovers it (DBOS).

It prints tables, saves JSON (default benchmarks/results/step_overhead.json) and a plot
(benchmarks/results/step_overhead.png), and says which targets were met. No number here is
asserted anywhere: timings belong in reports, not in tests.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:                 # so `import workloads` works from any directory
    sys.path.insert(0, HERE)

import durable_lite as dl                # noqa: E402

import workloads                         # noqa: E402

DEFAULT_JSON = os.path.join(HERE, "results", "step_overhead.json")
DEFAULT_PLOT = os.path.join(HERE, "results", "step_overhead.png")

# The targets the package sets itself; the report says honestly whether each was met.
TARGET_SQLITE_RATIO = 1.2      # durable_lite SQLiteStore per step <= 1.2 x bare sqlite3, same mode
TARGET_DBOS_FACTOR = 20.0      # durable_lite per step >= 20 x cheaper than DBOS
TARGET_LOAD_RATIO = 2.0        # loading a run's entries <= 2 x a bare SELECT of the rows
TARGET_REPLAY_RATIO = 2.0      # resuming (replaying) a run <= 2 x SELECT + json.loads of its rows
TARGET_IMPORT_MS = 30.0        # `import durable_lite` in a fresh interpreter

# key -> (system, mode, baseline key for the ratio column)
WRITE_ROWS = {
    "plain": ("plain function call", "-", "sqlite_normal"),
    "sqlite_normal": ("bare sqlite3 INSERT+COMMIT", "WAL, NORMAL", "sqlite_normal"),
    "sqlite_full": ("bare sqlite3 INSERT+COMMIT", "WAL, FULL", "sqlite_full"),
    "dl_memory": ("durable_lite MemoryStore", "none (memory)", "sqlite_normal"),
    "dl_process": ("durable_lite SQLiteStore", "process (WAL, NORMAL)", "sqlite_normal"),
    "dl_power": ("durable_lite SQLiteStore", "power (WAL, FULL)", "sqlite_full"),
    "dbos": ("DBOS Transact, SQLite", "SQLite defaults (rollback journal, FULL)", "sqlite_full"),
}
# key -> (what, baseline key): loading is compared with reading the rows, replaying with
# reading them and decoding every result (what any replay must do at the least).
REPLAY_ROWS = {
    "sqlite_select": ("bare sqlite3 SELECT of the N rows", "sqlite_select"),
    "sqlite_select_json": ("bare sqlite3 SELECT + json.loads of the N rows", "sqlite_select_json"),
    "dl_load": ("durable_lite load_entries (one query)", "sqlite_select"),
    "dl_resume": ("durable_lite resume, replaying N steps", "sqlite_select_json"),
    "dbos_replay": ("DBOS recovery: workflow body replaying N steps", "sqlite_select_json"),
    "dbos_recover": ("DBOS recovery: launch -> N steps replayed", "sqlite_select_json"),
}
FLOOR_NAMES = {"sqlite_select": "SELECT", "sqlite_select_json": "SELECT + json.loads"}


# utilities ---------------------------------------------------------------------------------
def timed(fn, *args):
    """Seconds taken by fn(*args)."""
    start = time.perf_counter_ns()
    fn(*args)
    return (time.perf_counter_ns() - start) / 1e9


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def python_child(code, timeout=300, env_changes=None):
    """Run `code` in a fresh interpreter that can import this folder's modules.
    `env_changes`: variables to set, or (with None) to remove, for that interpreter."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH", "")) if p)
    for name, value in (env_changes or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def load_dbos(disabled):
    """The DBOS workload module, or (None, why it is skipped)."""
    if disabled:
        return None, "skipped: --no-dbos was given"
    try:
        import dbos_workload
    except Exception as exc:  # ImportError, or dbos failing at import for any reason
        return None, (f"skipped: `import dbos` failed ({type(exc).__name__}: {exc}); "
                      "install it with `pip install -e '.[bench]'` (or `make bench`)")
    return dbos_workload, None


# 1. writing N steps -------------------------------------------------------------------------
class WriteSystems:
    """Every system, set up once per N (files, connections, engines), then timed round-robin
    (in a rotating order) so that drift on a shared machine spreads over all of them alike."""

    def __init__(self, folder, n, dbos_workload=None):
        self.bare = {mode: workloads.open_bare(os.path.join(folder, f"bare-{mode}-{n}.db"), mode)
                     for mode in ("NORMAL", "FULL")}
        self.engines = {
            "dl_memory": dl.Engine(dl.MemoryStore()),
            "dl_process": dl.Engine(dl.SQLiteStore(os.path.join(folder, f"dl-process-{n}.db"),
                                                   durability="process")),
            "dl_power": dl.Engine(dl.SQLiteStore(os.path.join(folder, f"dl-power-{n}.db"),
                                                 durability="power")),
        }
        self.dbos = dbos_workload          # launched by the caller, on its own database
        self.worker = workloads.worker_name()
        self.runs = 0

    def keys(self):
        return [k for k in WRITE_ROWS if k != "dbos" or self.dbos is not None]

    def run(self, key, n):
        self.runs += 1
        if key == "plain":
            noop = workloads.noop
            for i in range(n):
                noop(i)
        elif key in ("sqlite_normal", "sqlite_full"):
            db = self.bare["NORMAL" if key == "sqlite_normal" else "FULL"]
            workloads.bare_steps(db, workloads.bare_run_id(), n, self.worker)
        elif key == "dbos":
            assert self.dbos.run(n, f"write-{n}-{self.runs}") == n
        else:
            run = self.engines[key].start(workloads.bench_steps, n)
            assert run.status == dl.COMPLETED and run.steps == n, run

    def close(self):
        for db in self.bare.values():
            db.close()
        for engine in self.engines.values():
            engine.store.close()


def measure_writes(folder, n, repeats, dbos_workload=None):
    systems = WriteSystems(folder, n, dbos_workload)
    keys = systems.keys()
    try:
        for key in keys:                       # warm up code paths, caches and files
            systems.run(key, min(n, 20))
        seconds = {key: [] for key in keys}
        for r in range(repeats):
            shift = r % len(keys)
            for key in keys[shift:] + keys[:shift]:
                seconds[key].append(timed(systems.run, key, n))
    finally:
        systems.close()
    return [write_record(key, n, seconds[key]) for key in keys]


def measure_all_writes(folder, counts, repeats, dbos_workload):
    """Per-step costs for every N. DBOS, when present, is launched once on its own system
    database and takes its turn in every round like the others."""
    if dbos_workload is None:
        return [r for n in counts for r in measure_writes(folder, n, repeats)]
    from dbos import DBOS

    path = os.path.join(folder, "dbos-writes.sqlite")
    dbos_workload.launch(path)
    try:
        journal, synchronous = sqlite_settings(path)
        records = [r for n in counts for r in measure_writes(folder, n, repeats, dbos_workload)]
    finally:
        DBOS.destroy()
    for r in records:
        if r["key"] == "dbos":
            r["sqlite_settings"] = {"journal_mode": journal, "synchronous": synchronous}
    return records


def sqlite_settings(path):
    """The journal mode a database file is in, and the synchronous level a connection that
    sets none (as DBOS's connections do) gets."""
    probe = sqlite3.connect(path)
    try:
        journal = probe.execute("PRAGMA journal_mode").fetchone()[0]
        synchronous = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
            probe.execute("PRAGMA synchronous").fetchone()[0]]
    finally:
        probe.close()
    return journal, synchronous


def write_record(key, n, seconds):
    system, mode, baseline = WRITE_ROWS[key]
    per_step = [s / n * 1e6 for s in seconds]
    return {"key": key, "system": system, "mode": mode, "n": n, "repeats": len(seconds),
            "baseline": baseline, "total_ms": [s * 1e3 for s in seconds],
            "per_step_us": per_step, **{f"{k}_us": v for k, v in summary(per_step).items()}}


# 2. replay after a real crash ---------------------------------------------------------------
def crash_bare(path, n, run_id):
    proc = python_child(f"import workloads; workloads.bare_crash_child({path!r}, {n}, {run_id!r})")
    expect_killed(proc, "bare sqlite3")


def crash_durable_lite(path, n, run_id):
    proc = python_child(f"import workloads; workloads.durable_lite_crash_child({path!r}, {n}, "
                        f"{run_id!r})")
    expect_killed(proc, "durable_lite")


def crash_dbos(path, n, workflow_id):
    proc = python_child(f"import dbos_workload; dbos_workload.crash_child({path!r}, {n}, "
                        f"{workflow_id!r})")
    expect_killed(proc, "DBOS")


def expect_killed(proc, who):
    if proc.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the {who} crash child exited with {proc.returncode} instead of "
                           f"being killed:\n{proc.stderr[-2000:]}")


def bare_select(path, run_id, n, decode=False):
    """The rows read back the bare way; with `decode`, every result json.loads'ed too."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("SELECT name FROM sqlite_master").fetchall()   # as SQLiteStore does on open
        start = time.perf_counter_ns()
        rows = db.execute(workloads.SELECT_ROWS, (run_id,)).fetchall()
        if decode:
            results = [json.loads(row[4]) for row in rows]
        elapsed = (time.perf_counter_ns() - start) / 1e9
    finally:
        db.close()
    assert len(rows) == n, (path, len(rows))
    if decode:
        assert results == list(range(n)), results[:5]
    return elapsed


def dl_load(path, run_id, n):
    store = dl.SQLiteStore(path)               # opening (and its schema check) is not timed
    try:
        start = time.perf_counter_ns()
        entries = store.load_entries(run_id)
        elapsed = (time.perf_counter_ns() - start) / 1e9
    finally:
        store.close()
    assert len(entries) == n, (path, len(entries))
    return elapsed


def dl_resume(path, run_id, n):
    store = dl.SQLiteStore(path)
    try:
        engine = dl.Engine(store)
        start = time.perf_counter_ns()
        run = engine.resume(run_id)
        elapsed = (time.perf_counter_ns() - start) / 1e9
    finally:
        store.close()
    assert run.status == dl.COMPLETED and len(run.replayed) == n and not run.executed, run
    return elapsed


def dbos_recover(dbos_workload, path, workflow_id, n):
    """Launch DBOS on the crashed database; it recovers the pending workflow by itself.

    Returns (launch -> last step replayed, workflow body alone). The first includes the
    internal queue's polling delay; the second is the replay work proper.
    """
    from dbos import DBOS

    dbos_workload.body_done.clear()
    DBOS(config=dbos_workload.config(path))
    try:
        start = time.perf_counter()
        DBOS.launch()
        if not dbos_workload.body_done.wait(120):
            raise RuntimeError(f"DBOS did not recover workflow {workflow_id!r} within 120 s")
        total = time.perf_counter() - start
        body_start, body_end = dbos_workload.body_times[-1]
        result = DBOS.retrieve_workflow(workflow_id).get_result()
    finally:
        DBOS.destroy()
    assert result == n, result
    return total, body_end - body_start


def measure_replay(folder, n, repeats, dbos_workload):
    seconds = {key: [] for key in REPLAY_ROWS}
    for r in range(repeats):
        bare_path = os.path.join(folder, f"replay-bare-{n}-{r}.db")
        run_id = workloads.bare_run_id()      # the same id on both sides
        crash_bare(bare_path, n, run_id)
        seconds["sqlite_select"].append(bare_select(bare_path, run_id, n))
        seconds["sqlite_select_json"].append(bare_select(bare_path, run_id, n, decode=True))

        dl_path = os.path.join(folder, f"replay-dl-{n}-{r}.db")
        crash_durable_lite(dl_path, n, run_id)
        seconds["dl_load"].append(dl_load(dl_path, run_id, n))
        seconds["dl_resume"].append(dl_resume(dl_path, run_id, n))

        if dbos_workload is not None:
            dbos_path = os.path.join(folder, f"replay-dbos-{n}-{r}.sqlite")
            crash_dbos(dbos_path, n, f"crashed-{n}-{r}")
            total, body = dbos_recover(dbos_workload, dbos_path, f"crashed-{n}-{r}", n)
            seconds["dbos_recover"].append(total)
            seconds["dbos_replay"].append(body)
    return [replay_record(key, n, values) for key, values in seconds.items() if values]


def replay_record(key, n, seconds):
    system, baseline = REPLAY_ROWS[key]
    ms = [s * 1e3 for s in seconds]
    return {"key": key, "system": system, "n": n, "repeats": len(ms), "baseline": baseline,
            "ms": ms, **{f"{k}_ms": v for k, v in summary(ms).items()},
            "per_step_us_median": statistics.median(ms) / n * 1e3}


# import time ---------------------------------------------------------------------------------
def measure_import(repeats):
    """`import durable_lite` in fresh interpreters, timed inside them.

    Two ways: with the package's bytecode cached (as for every import after the first one
    on a machine), and compiling every module from source (as on a machine that sets
    PYTHONDONTWRITEBYTECODE, where nothing is ever cached). The target applies to the first.
    """
    code = ("import time; t = time.perf_counter(); import durable_lite; "
            "print(time.perf_counter() - t)")

    def times(env_changes):
        ms = []
        for _ in range(repeats):
            proc = python_child(code, timeout=60, env_changes=env_changes)
            if proc.returncode != 0:
                raise RuntimeError(f"importing durable_lite failed:\n{proc.stderr}")
            ms.append(float(proc.stdout.strip()) * 1e3)
        return {"repeats": repeats, "ms": ms, **{f"{k}_ms": v for k, v in summary(ms).items()}}

    with tempfile.TemporaryDirectory(prefix="dl-bench-pycache-") as cache:
        cached = {"PYTHONDONTWRITEBYTECODE": None, "PYTHONPYCACHEPREFIX": cache}
        python_child("import durable_lite", env_changes=cached)        # fills the cache
        warm = times(cached)
    return warm, times({"PYTHONDONTWRITEBYTECODE": "1"})


# ratios, targets, report ---------------------------------------------------------------------
def add_ratios(records, median_field):
    by = {(r["key"], r["n"]): r for r in records}
    for r in records:
        base = by.get((r["baseline"], r["n"]))
        r["ratio"] = r[median_field] / base[median_field] if base else None


def targets(writes, replays, imported):
    w = {(r["key"], r["n"]): r["median_us"] for r in writes}
    p = {(r["key"], r["n"]): r["median_ms"] for r in replays}
    out = []

    def add(name, value, limit, met, unit):
        out.append({"target": name, "value": value, "limit": limit, "met": met, "unit": unit})

    for n in sorted({r["n"] for r in writes}):
        for dl_key, bare_key, mode in (("dl_process", "sqlite_normal", "process/NORMAL"),
                                       ("dl_power", "sqlite_full", "power/FULL")):
            ratio = w[dl_key, n] / w[bare_key, n]
            add(f"SQLiteStore {mode} <= {TARGET_SQLITE_RATIO}x bare sqlite3 per step, N={n}",
                ratio, TARGET_SQLITE_RATIO, ratio <= TARGET_SQLITE_RATIO, "x")
        if ("dbos", n) in w:
            for dl_key, mode in (("dl_process", "process"), ("dl_power", "power")):
                factor = w["dbos", n] / w[dl_key, n]
                add(f"SQLiteStore {mode} >= {TARGET_DBOS_FACTOR:g}x cheaper per step than DBOS, "
                    f"N={n}", factor, TARGET_DBOS_FACTOR, factor >= TARGET_DBOS_FACTOR, "x")
    for n in sorted({r["n"] for r in replays}):
        ratio = p["dl_load", n] / p["sqlite_select", n]
        add(f"replay load <= {TARGET_LOAD_RATIO:g}x bare SELECT of the rows, N={n}", ratio,
            TARGET_LOAD_RATIO, ratio <= TARGET_LOAD_RATIO, "x")
        if ("sqlite_select_json", n) in p:            # runs saved before this row existed lack it
            ratio = p["dl_resume", n] / p["sqlite_select_json", n]
            add(f"resume (replay) <= {TARGET_REPLAY_RATIO:g}x bare SELECT + json.loads of the "
                f"rows, N={n}", ratio, TARGET_REPLAY_RATIO, ratio <= TARGET_REPLAY_RATIO, "x")
    add(f"import durable_lite < {TARGET_IMPORT_MS:g} ms", imported["median_ms"], TARGET_IMPORT_MS,
        imported["median_ms"] < TARGET_IMPORT_MS, "ms")
    return out


def fmt(value, digits=3):
    """A number with about `digits` significant digits, never in scientific notation."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - int(f"{abs(value):e}".split("e")[1]))
    return f"{value:,.{decimals}f}"


def table(headers, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.append("  ".join(str(c).rjust(w) if isinstance(c, int) or c[:1].isdigit()
                               else str(c).ljust(w) for c, w in zip(row, widths)))
    return "\n".join(lines)


def report(result):
    meta = result["meta"]
    out = [f"durable_lite step overhead - {meta['repeats']} repeat(s) per row, median "
           f"(min-max); {meta['cpu_count']} CPU(s), Python {meta['python']}, "
           f"SQLite {meta['sqlite']}; load average {meta['load_average'][0]:.2f} before, "
           f"{meta['load_average'][1]:.2f} after (1 min)", ""]
    out.append("Writing: wall time of a workflow of N trivial steps / N")
    rows = [[r["system"], r["mode"], r["n"], fmt(r["median_us"]),
             f"{fmt(r['min_us'])}-{fmt(r['max_us'])}", fmt(r["ratio"], 2),
             WRITE_ROWS[r["baseline"]][1]]
            for r in sorted(result["step_overhead"], key=lambda r: (r["n"], list(WRITE_ROWS).index(r["key"])))]
    out.append(table(["system", "mode", "N", "us/step", "min-max", "x bare", "bare mode"], rows))
    out += ["", "Replay after a real crash (child SIGKILLed after N checkpointed steps)"]
    rows = [[r["system"], r["n"], fmt(r["median_ms"]), f"{fmt(r['min_ms'])}-{fmt(r['max_ms'])}",
             fmt(r["per_step_us_median"]), fmt(r["ratio"], 2), FLOOR_NAMES[r["baseline"]]]
            for r in sorted(result["replay"], key=lambda r: (r["n"], list(REPLAY_ROWS).index(r["key"])))]
    out.append(table(["what", "N", "ms", "min-max", "us/step", "x floor", "floor"], rows))
    imp = result["import_durable_lite"]
    out += ["", f"import durable_lite in a fresh interpreter: {fmt(imp['median_ms'])} ms median "
                f"({fmt(imp['min_ms'])}-{fmt(imp['max_ms'])}, {imp['repeats']} runs)"
                + (", bytecode cached" if "import_durable_lite_compiling" in result else "")]
    cold = result.get("import_durable_lite_compiling")
    if cold:
        out.append(f"  ... compiling every module (PYTHONDONTWRITEBYTECODE=1): "
                   f"{fmt(cold['median_ms'])} ms median ({fmt(cold['min_ms'])}-"
                   f"{fmt(cold['max_ms'])}, {cold['repeats']} runs)")
    if result["skipped"]:
        out += [""] + [f"{name}: {why}" for name, why in result["skipped"].items()]
    out += ["", "Targets"]
    for t in result["targets"]:
        unit = " ms" if t["unit"] == "ms" else "x"
        out.append(f"  [{'met' if t['met'] else 'MISSED'}] {t['target']}: measured "
                   f"{fmt(t['value'])}{unit}")
    out += ["", f"benchmark took {meta['duration_s']:.1f} s"]
    return "\n".join(out)


def plot(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "skipped: matplotlib is not installed"
    records = result["step_overhead"]
    counts = sorted({r["n"] for r in records})
    keys = [k for k in WRITE_ROWS if any(r["key"] == k for r in records)]
    labels = [f"{WRITE_ROWS[k][0]}\n{WRITE_ROWS[k][1]}" for k in keys]
    by = {(r["key"], r["n"]): r for r in records}
    fig, ax = plt.subplots(figsize=(9, 0.75 * len(keys) + 1.5))
    height = 0.8 / len(counts)
    for j, n in enumerate(counts):
        ys = [i + (j - (len(counts) - 1) / 2) * height for i in range(len(keys))]
        medians = [by[k, n]["median_us"] for k in keys]
        low = [by[k, n]["median_us"] - by[k, n]["min_us"] for k in keys]
        high = [by[k, n]["max_us"] - by[k, n]["median_us"] for k in keys]
        ax.barh(ys, medians, height=height, xerr=[low, high], capsize=2, label=f"N = {n}")
        for y, k, m in zip(ys, keys, medians):     # the label sits past the whisker
            ax.annotate(f"{fmt(m)} µs", (by[k, n]["max_us"], y), xytext=(5, 0),
                        textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(range(len(keys)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    low_end = min(r["min_us"] for r in records)
    ax.set_xlim(low_end / 3, max(r["max_us"] for r in records) * 12)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    ax.set_xlabel("per-step cost in µs, log scale (bar: median; whisker: min to max)")
    ax.set_title("What one durable step costs, in a workflow of N trivial steps")
    ax.legend(loc="upper right")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def shown_path(path):
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[100, 1000], metavar="N",
                        help="workflow sizes to measure (default: 100 1000)")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per row (default 7)")
    parser.add_argument("--import-repeats", type=int, default=7,
                        help="fresh interpreters for the import time (default 7)")
    parser.add_argument("--no-dbos", action="store_true", help="skip DBOS even if installed")
    parser.add_argument("--json", default=DEFAULT_JSON, help="where to save the results")
    parser.add_argument("--plot", default=DEFAULT_PLOT, help="where to save the plot")
    parser.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    parser.add_argument("--show", metavar="JSON", help="print the report of a saved run "
                        "(e.g. benchmarks/reference_run.json) and redraw its plot; measure nothing")
    parser.add_argument("--workdir", help="folder for the databases (default: a temp folder, "
                                          "removed at the end)")
    args = parser.parse_args(argv)
    if min(args.steps) < 1 or args.repeats < 1 or args.import_repeats < 1:
        parser.error("--steps, --repeats and --import-repeats must be at least 1")
    return args


def show(args):
    with open(args.show) as f:
        result = json.load(f)
    print(report(result))
    if not args.no_plot:
        why = plot(result, args.plot)
        print(f"\nplot {why}" if why else f"\nsaved {shown_path(args.plot)}")
    return result


def main(argv=None):
    args = parse_args(argv)
    if args.show:
        return show(args)
    began = time.perf_counter()
    load_before = os.getloadavg()[0]
    folder = args.workdir or tempfile.mkdtemp(prefix="dl-bench-")
    os.makedirs(folder, exist_ok=True)
    skipped = {}
    try:
        imported, imported_compiling = measure_import(args.import_repeats)
        dbos_workload, why = load_dbos(args.no_dbos)
        if why:
            skipped["DBOS"] = why
        writes = measure_all_writes(folder, args.steps, args.repeats, dbos_workload)
        replays = []
        for n in args.steps:
            replays += measure_replay(folder, n, args.repeats, dbos_workload)
    finally:
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    add_ratios(writes, "median_us")
    add_ratios(replays, "median_ms")
    dbos_version = None
    if dbos_workload is not None:
        from importlib.metadata import version
        dbos_version = version("dbos")
    result = {
        "meta": {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "durable_lite": dl.__version__, "dbos": dbos_version,
            "steps": args.steps, "repeats": args.repeats,
            "duration_s": time.perf_counter() - began,
            # 1-minute load average before and after: other work on the machine skews timings
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        },
        "import_durable_lite": imported,
        "import_durable_lite_compiling": imported_compiling,
        "step_overhead": writes,
        "replay": replays,
        "skipped": skipped,
    }
    result["targets"] = targets(writes, replays, imported)
    if not args.no_plot:
        why = plot(result, args.plot)
        if why:
            skipped["plot"] = why
    result["meta"]["duration_s"] = time.perf_counter() - began
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    print(report(result))
    saved = [args.json] + ([] if args.no_plot or "plot" in skipped else [args.plot])
    print("\nsaved " + " and ".join(map(shown_path, saved)))
    return result


if __name__ == "__main__":
    main()
