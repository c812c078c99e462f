"""A worker whose store file is deleted under it while a run is in a step, for
test_crash_deleted_store.py.

    python deleted_store_child.py STORE FOLDER GATE

The run's second step announces itself (GATE + ".inside") and waits for GATE to exist;
the test deletes STORE meanwhile. Prints one JSON line: the run's status, or the error
that start() raised.
"""

import json
import os
import sys
import time

import durable_lite as dl
from durable_lite.sim import world_at

STORE, FOLDER, GATE = sys.argv[1:4]


def wait_at_gate():
    open(GATE + ".inside", "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(GATE):
        if time.monotonic() > deadline:
            raise TimeoutError("the test never opened the gate")
        time.sleep(0.01)
    return "through"


def effect(name):
    return world_at(FOLDER).ledger(name).record(key=name)["record_id"]


@dl.workflow("deleted-store")
def deleted_store(ctx):
    ctx.step("first", effect, "first")
    ctx.step("gate", wait_at_gate)
    ctx.step("second", effect, "second")
    return "done"


if __name__ == "__main__":
    engine = dl.Engine(dl.SQLiteStore(STORE))
    try:
        run = engine.start(deleted_store, run_id="under-the-floor")
        print(json.dumps({"status": run.status}))
    except Exception as exc:     # noqa: BLE001 - reported to the test
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
