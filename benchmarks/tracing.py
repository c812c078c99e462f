"""Reading a long run back: engine.trace beside engine.history, on one run of N steps.

history() is one row per checkpoint, and trace() arranges the same records (and the
event log) as a tree of spans. Both read the whole run, so a trace should cost a small,
fixed multiple of a history, whatever N is: a builder that compared every checkpoint with
every other would grow with N squared. The two are timed in turns, on the same store, in
this process.
"""

import os
import time

import durable_lite as dl
from durable_lite.lab import ladder

from support import summary

TRACE_ROWS = {"history": "engine.history of the run", "trace": "engine.trace of the run"}


def measure_tracing(folder, n, repeats, progress):
    """[{key, what, n, median_ms, min_ms, max_ms}] for history and trace of one N-step run."""
    store = dl.SQLiteStore(os.path.join(folder, f"trace-{n}.db"))
    try:
        engine = dl.Engine(store, dl.FakeClock())
        engine.start(ladder.ladder_steps, n, run_id="long")
        times = {key: [] for key in TRACE_ROWS}
        for _ in range(repeats):
            for key in TRACE_ROWS:               # in turns: a busy moment hits both alike
                read = getattr(engine, key)
                start = time.perf_counter()
                read("long")
                times[key].append(time.perf_counter() - start)
    finally:
        store.close()
    rows = []
    for key, what in TRACE_ROWS.items():
        s = summary([t * 1000 for t in times[key]])
        rows.append({"key": key, "what": what, "n": n, "median_ms": s["median"],
                     "min_ms": s["min"], "max_ms": s["max"]})
        progress.say(f"  {what}, N={n}: {s['median']:.1f} ms median")
    return rows
