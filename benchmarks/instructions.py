"""Replay and writing counted in instructions (callgrind), not in time.

    python benchmarks/instructions.py                  # N = 1000, every row, a few minutes
    python benchmarks/instructions.py --steps 200 --rows resume bare_select_json
    python benchmarks/instructions.py --functions 25   # also: where a step's instructions go

A busy machine makes wall time wander (the caveats in README.md); the number of
instructions a piece of work executes does not. Each row runs in a fresh interpreter under
`valgrind --tool=callgrind`, once with N steps and once with none, from files prepared
beforehand (outside valgrind); the difference, divided by N, is what one step costs. The
interpreter's start, the imports and opening the file are paid alike by both runs, so they
drop out. What the kernel does for a read or a write is not counted (callgrind counts user
space only), so a ratio of writes here is above the wall-time one.

The replay rows read a store left by a process SIGKILLed after N checkpoints (as
replay.py's), with its log folded into the file first, so that opening costs the same at N
and at 0. Rows, and the floor each is divided by:

  bare_select_json  bare sqlite3: SELECT the N rows, json.loads every result   (the floor)
  resume            engine.resume of the crashed run: all N steps from checkpoints
  resume_failed     engine.resume of a run of N steps and one that failed for good after
                    them: N steps from checkpoints, the failed one executed again
  bare_insert       bare sqlite3: INSERT + COMMIT of N rows, one transaction each  (the floor)
  write             engine.start of the workflow of N trivial steps on SQLiteStore

With `--functions K`, the K C functions whose own instructions grow most per step (for
`resume` and its floor) are listed, and the replay's are put in a few groups: what
README.md says a replayed step's instructions go to is read from that list.
"""

import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from durable_lite.lab import ladder     # noqa: E402

# row -> (what, floor row or None)
ROWS = {
    "bare_select_json": ("bare sqlite3 SELECT + json.loads of the N rows", None),
    "resume": ("durable_lite resume, replaying N steps", "bare_select_json"),
    "resume_failed": ("durable_lite resume of a failed run (N replayed, 1 run again)",
                      "bare_select_json"),
    "bare_insert": ("bare sqlite3 INSERT + COMMIT, WAL NORMAL", None),
    "write": ("durable_lite SQLiteStore (process), N steps", "bare_insert"),
}

# What the child runs under valgrind, per row. {path} and {run_id} are filled in.
CHILD = {
    "bare_select_json": (
        "import json, sqlite3\n"
        "from durable_lite.lab import ladder\n"
        "db = sqlite3.connect({path!r}, isolation_level=None)\n"
        "db.execute('SELECT name FROM sqlite_master').fetchall()\n"
        "rows = db.execute(ladder.SELECT_ROWS, ({run_id!r},)).fetchall()\n"
        "results = [json.loads(row[4]) for row in rows]\n"),
    "resume": (
        "import durable_lite as dl, workloads\n"
        "engine = dl.Engine(dl.SQLiteStore({path!r}))\n"
        "run = engine.resume({run_id!r})\n"
        "assert run.status == 'completed', run\n"),
    "resume_failed": (
        "import durable_lite as dl, workloads\n"
        "engine = dl.Engine(dl.SQLiteStore({path!r}))\n"
        "run = engine.resume({run_id!r})\n"
        "assert run.status == 'completed', run\n"),
    "bare_insert": (
        "from durable_lite.lab import ladder\n"
        "db = ladder.open_bare({path!r}, 'NORMAL')\n"
        "ladder.bare_steps(db, {run_id!r}, {n})\n"),
    "write": (
        "import durable_lite as dl\n"
        "from durable_lite.lab import ladder\n"
        "engine = dl.Engine(dl.SQLiteStore({path!r}))\n"
        "engine.start(ladder.ladder_steps, {n}, run_id={run_id!r})\n"),
}


def prepare(row, folder, n, run_id, fold=True):
    """The file the row's child starts from (made outside valgrind)."""
    path = os.path.join(folder, f"{row}-{n}.db")
    if row == "bare_select_json":
        _child(f"import workloads; workloads.bare_crash_child({path!r}, {n}, {run_id!r})",
               killed=True)
    elif row == "resume" and n == 0:      # killed before its first step
        _child(f"import workloads; workloads.unstarted_run({path!r}, {run_id!r})", killed=True)
    elif row == "resume":
        _child(f"import workloads; workloads.durable_lite_crash_child({path!r}, {n}, {run_id!r})",
               killed=True)
    elif row == "resume_failed":
        _child(f"import workloads; workloads.failed_run({path!r}, {n}, {run_id!r})")
    elif row == "bare_insert":
        ladder.open_bare(path, "NORMAL").close()
    elif row == "write":
        import durable_lite as dl
        dl.SQLiteStore(path).close()
    if fold:
        _fold(path)
    return path


def _fold(path):
    """Fold the crashed process's log into the file, so opening it costs the same at any N."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _child(code, killed=False):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, ROOT]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    if proc.returncode != (-9 if killed else 0):
        raise RuntimeError(f"{code!r} exited with {proc.returncode}:\n{proc.stderr[-2000:]}")


def count(row, path, n, run_id, out_file):
    """Instructions of one child interpreter running the row under callgrind."""
    code = CHILD[row].format(path=path, run_id=run_id, n=n)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, ROOT]), PYTHONHASHSEED="0")
    proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
                           sys.executable, "-c", code],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"callgrind of {row} (N={n}) failed:\n{proc.stderr[-3000:]}")
    with open(out_file) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no total in {out_file}")


def self_costs(out_file):
    """{C function: its own instructions} from callgrind_annotate (a function's recursive
    levels, "f'2", counted as one)."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", out_file],
                          capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S+)", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        fn = m.group(2).rsplit(":", 1)[-1].split("'")[0].split("@@")[0]
        costs[fn] = costs.get(fn, 0) + int(m.group(1).replace(",", ""))
    return costs


# Groups of C functions, for the summary of where a replayed step goes (first match wins).
GROUPS = (
    ("SQLite finding and decoding each row (B-tree, VDBE)", ("sqlite3",)),
    ("the sqlite3 module building each row's tuple and values",
     ("_pysqlite", "pysqlite", "stmt_", "PyUnicode_DecodeUTF8", "unicode_decode_utf8",
      "ascii_decode", "PyFloat_FromDouble", "PyLong_FromLong", "PyUnicode_New")),
    ("the GIL, let go and taken back around each row's sqlite3_step",
     ("pthread_", "__pthread", "take_gil", "drop_gil", "PyEval_SaveThread",
      "PyEval_RestoreThread", "_PyThreadState_MustExit", "futex", "__lll")),
    ("json decoding each result", ("scan_once", "scanstring", "py_scanstring", "_parse",
                                   "PyLong_FromString", "_sre", "sre_")),
    ("the cyclic garbage collector (run as tuples pile up)",
     ("visit_", "gc_", "subtract_refs", "update_refs", "move_", "deduce_", "_PyTuple_MaybeUntrack",
      "tupletraverse", "dict_traverse", "func_traverse", "list_traverse", "_PyGC")),
    ("allocating and freeing objects", ("_PyObject_Malloc", "_PyObject_Free", "malloc", "free",
                                        "_int_", "tupledealloc", "list_dealloc", "PyTuple_New",
                                        "_PyObject_GC", "pymalloc", "realloc", "cfree")),
)
OTHER = "the interpreter running Python code (the loop, ctx.step, json.loads' wrapper)"


def group_of(fn):
    for title, prefixes in GROUPS:
        if fn.startswith(prefixes):
            return title
    return OTHER


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--functions", type=int, default=0,
                        help="list the K functions whose own instructions grow most per step")
    parser.add_argument("--workdir", help="keep the files and callgrind outputs here")
    parser.add_argument("--as-crashed", action="store_true",
                        help="leave the dead process's log unfolded: opening the file (and "
                             "folding it) is then counted with the replay")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    rows = list(args.rows)
    for row in list(rows):          # a row needs its floor measured too
        floor = ROWS[row][1]
        if floor and floor not in rows:
            rows.insert(0, floor)
    folder = args.workdir or tempfile.mkdtemp(prefix="dl-instructions-")
    os.makedirs(folder, exist_ok=True)
    per_step, outs = {}, {}
    try:
        for row in rows:
            totals = {}
            for n in (0, args.steps):
                run_id = ladder.new_run_id()
                path = prepare(row, folder, n, run_id, fold=not args.as_crashed)
                outs[row, n] = os.path.join(folder, f"callgrind.{row}.{n}")
                totals[n] = count(row, path, n, run_id, outs[row, n])
                print(f"  {row:<17} N={n:<5} {totals[n]:>14,} instructions", file=sys.stderr,
                      flush=True)
            per_step[row] = (totals[args.steps] - totals[0]) / args.steps
        print(f"\nInstructions per step (callgrind; N={args.steps} minus N=0, divided by N)")
        print(f"{'row':<66} {'per step':>10} {'x floor':>8}")
        for row in rows:
            what, floor = ROWS[row]
            ratio = f"{per_step[row] / per_step[floor]:.2f}" if floor else "1.00"
            print(f"{what:<66} {per_step[row]:>10,.0f} {ratio:>8}")
        if args.functions:
            for row in ("bare_select_json", "resume"):
                if (row, 0) not in outs:
                    continue
                big, small = self_costs(outs[row, args.steps]), self_costs(outs[row, 0])
                grown = {fn: (big.get(fn, 0) - small.get(fn, 0)) / args.steps
                         for fn in set(big) | set(small)}
                print(f"\n{ROWS[row][0]}: own instructions per step, by function")
                for fn, value in sorted(grown.items(), key=lambda kv: -kv[1])[:args.functions]:
                    print(f"  {value:>9,.0f}  {fn[-90:]}  ({group_of(fn).split(' (')[0]})")
                groups = {}
                for fn, value in grown.items():
                    groups[group_of(fn)] = groups.get(group_of(fn), 0) + value
                print("  by group:")
                for title, value in sorted(groups.items(), key=lambda kv: -kv[1]):
                    print(f"  {value:>9,.0f}  {title}")
    finally:
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
