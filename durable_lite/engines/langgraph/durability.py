"""What LangGraph's durability modes change, measured on lesson 01's refund.

LangGraph's `invoke(..., durability=MODE)` takes one of three modes (its docs, from least
to most durable):

    "exit"   changes are saved only when the run exits: it finishes, fails or interrupts
    "async"  changes are saved in the background while the next step runs (the default)
    "sync"   changes are saved before the next step starts

A "step" there is a superstep of the graph, and an @entrypoint's whole body is one
superstep. What a crash costs is decided by when each finished *task's* result is saved,
and that save goes to a background thread in "async" and "sync" alike, while "exit" keeps
it in memory until the end. Three measurements show what that means:

    crash_rows(...)   for each mode, the refund killed (SIGKILL, a real process) at each
                      crash point and resumed by a fresh one: how the resume went in, what
                      it ran again, and the world's ledgers
    save_race(...)    killed just after a task returned, with nobody waiting for its save:
                      how often its result was lost
    timings(...)      the time per task in each mode (and with no checkpointer at all)
"""

import os
import statistics
import time

from ... import examples as ex
from ...faults import CRASH_POINTS, CrashAt
from . import support as langgraph_support

ORDER, AMOUNT = "A-17", 40
WORKFLOW = "refund.refund"


def _inputs(folder, keyed, order=ORDER, amount=AMOUNT):
    return {"folder": folder, "order_id": order, "amount": amount, "use_key": keyed,
            "key_notices": keyed}


def killed_and_resumed(step, when, folder, workdir, keyed=True, durability="sync",
                       order=ORDER, amount=AMOUNT, wait_for_saves=True,
                       slow_saves=0.0) -> dict:
    """The refund killed at (step, when) in one worker process and resumed by another.

    killed    the first worker died by SIGKILL at the crash point
    how       how the resume went in: "resumed" (invoke(None) from the checkpoint) or
              "started over" (the thread had no checkpoint: the same input again)
    status, result, replayed (tasks served from the checkpoint), ran (tasks run again),
    and the ledger of the world in `folder` (ledger.ledger).
    wait_for_saves, slow_saves: for the first process, see worker.start_worker."""
    from .worker import start_worker
    from ..compare.ledger import ledger
    path = os.path.join(workdir, "langgraph.sqlite")
    thread_id = f"refund-{order}"
    inputs = _inputs(folder, keyed, order, amount)
    first = start_worker(path, WORKFLOW, thread_id, start=inputs, crash=CrashAt(step, when),
                         durability=durability, wait_for_saves=wait_for_saves,
                         slow_saves=slow_saves)
    first.join()
    report = start_worker(path, WORKFLOW, thread_id, resume=True, restart_with=inputs,
                          durability=durability).result()
    if report["error"]:
        raise RuntimeError(f"the resumed LangGraph run {thread_id!r} failed: {report['error']}")
    return {"killed": first.killed, "how": report["how"], "status": report["status"],
            "result": report["result"], "replayed": report["replayed"], "ran": report["ran"],
            **ledger(folder)}


def crash_rows(workdir, modes=langgraph_support.DURABILITY_MODES, keyed=True,
               points=None) -> list:
    """One row per mode x crash point (default: every step of the refund x every point)."""
    points = points or [(s, w) for s in ex.REFUND_STEPS for w in CRASH_POINTS]
    rows = []
    for mode in modes:
        for step, when in points:
            case = os.path.join(workdir, f"{mode}-{step}-{when}-{'keyed' if keyed else 'bare'}")
            os.makedirs(case, exist_ok=True)
            seen = killed_and_resumed(step, when, os.path.join(case, "world"), case, keyed,
                                      mode)
            rows.append({"durability": mode, "step": step, "when": when, "keyed": keyed,
                         "killed": seen["killed"], "resume": seen["how"],
                         "replayed": seen["replayed"], "ran again": seen["ran"],
                         "refunds paid": seen["refunds paid"],
                         "refund requests": seen["refund requests"],
                         "emails": seen["emails"], "tickets closed": seen["tickets closed"],
                         "status": seen["status"]})
    return rows


def save_race(workdir, runs=10, durability="sync", slow_saves=0.0) -> dict:
    """Kill the refund just before the email task starts, right after the refund task
    returned, with no wait for LangGraph's background save. {"runs", "refund lost" (the
    resume ran the refund again), "refund kept"}. `slow_saves`: seconds each save takes
    in the killed process (a slow disk)."""
    lost = 0
    for n in range(runs):
        case = os.path.join(workdir, f"race-{n}")
        os.makedirs(case, exist_ok=True)
        seen = killed_and_resumed("email", "before_step", os.path.join(case, "world"), case,
                                  durability=durability, wait_for_saves=False,
                                  slow_saves=slow_saves)
        lost += "refund" in seen["ran"]
    return {"runs": runs, "refund lost": lost, "refund kept": runs - lost}


def timings(workdir, modes=langgraph_support.DURABILITY_MODES, runs=15) -> dict:
    """{mode: median seconds per task} for the refund's four tasks, each run a fresh
    thread; the modes take turns run by run, so a busy moment hits all of them alike.
    "no checkpointer" is the same workflow with nothing saved at all."""
    from . import refund as refund_langgraph
    saver = langgraph_support.open_saver(os.path.join(workdir, "timings.sqlite"))
    bound = langgraph_support.bind(refund_langgraph.refund, saver)
    bare = refund_langgraph.refund
    per_run = {mode: [] for mode in (*modes, "no checkpointer")}
    try:
        for n in range(runs):
            for mode in per_run:
                folder = os.path.join(workdir, f"world-{mode}-{n}")
                config = langgraph_support.config(f"timing-{mode}-{n}")
                began = time.perf_counter()
                if mode == "no checkpointer":
                    bare.invoke(_inputs(folder, True), config)
                else:
                    bound.invoke(_inputs(folder, True), config, durability=mode)
                per_run[mode].append(time.perf_counter() - began)
    finally:
        langgraph_support.close_saver(saver)
    steps = len(ex.REFUND_STEPS)
    return {mode: statistics.median(seconds) / steps for mode, seconds in per_run.items()}


def table(rows):
    """Rows as a DataFrame, for a lesson."""
    import pandas
    return pandas.DataFrame(rows)
