"""One Engine made at module level, as a learner's script makes it, and used from the
children of a multiprocessing pool that forks (Linux's default start method), for
test_crash_forked_workers.py.

    python fork_pool.py STORE FOLDER RUNS CHILDREN [WORKER]

It leaves RUNS interrupted runs in STORE (each crashed before its charge), then lets
CHILDREN forked processes call ENGINE.recover() at once, and prints one JSON line: what
each child answered (its worker name, or the error it raised) and each run's status. The
test reads the charges from the simulated world's ledger in FOLDER. With WORKER, the
engine is given that name instead of a generated one.
"""

import json
import multiprocessing
import sys
import time

import durable_lite as dl
from durable_lite.faults import CrashAt
from durable_lite.sim import world_at

STORE, FOLDER, RUNS, CHILDREN = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
WORKER = sys.argv[5] if len(sys.argv) > 5 else None
ENGINE = dl.Engine(dl.SQLiteStore(STORE), dl.FakeClock(), worker=WORKER)


def charge(folder, order_id):
    time.sleep(0.05)     # long enough for two children to be inside one run at once
    return world_at(folder).careless.refund(order_id, 1)["refund_id"]


@dl.workflow("forked-charge")
def forked_charge(ctx, folder, order_id):
    return ctx.step("charge", charge, folder, order_id)


def recover(_):
    try:
        return {"worker": ENGINE.worker, "recovered": [r.run_id for r in ENGINE.recover()]}
    except Exception as exc:          # noqa: BLE001 - reported to the test
        return {"error": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    for i in range(RUNS):
        ENGINE.crash_at = CrashAt("charge", "before_step")
        try:
            ENGINE.start(forked_charge, FOLDER, f"O-{i}", run_id=f"run-{i}")
        except dl.Crash:
            pass
    with multiprocessing.get_context("fork").Pool(CHILDREN) as pool:
        answers = pool.map(recover, range(CHILDREN), chunksize=1)
    statuses = {r.run_id: r.status for r in ENGINE.runs()}
    print(json.dumps({"children": answers, "statuses": statuses}))
