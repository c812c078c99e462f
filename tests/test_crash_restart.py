"""A notebook kernel restart: the process that defined the workflow is gone. A fresh
process cannot resume the run until the defining cell runs again; then it can, and
nothing that was checkpointed runs twice."""

import json
import subprocess

from core_support import *  # noqa: F401,F403

pytestmark = pytest.mark.crash

CELL = '''
import durable_lite as dl

def fetch(folder, order_id):
    return dl.sim.World(folder).tools.call("fetch", order_id)

@dl.workflow("core-notebook-cell")
def notebook_flow(ctx, folder, order_id):
    data = ctx.step("fetch", fetch, folder, order_id)
    answer = ctx.wait_for_signal("approve", timeout=3600)
    return {"data": data["output"], "answer": answer}
'''

AFTER_RESTART = '''
import json, sys
import durable_lite as dl
engine = dl.Engine(dl.SQLiteStore(sys.argv[1]))
try:
    engine.resume("nb-1")
except dl.WorkflowNotRegistered as err:
    print("NOT REGISTERED " + str(err))
exec(sys.argv[2])                 # the learner runs the defining cell again
run = engine.resume("nb-1")
print("RUN " + json.dumps({"status": run.status, "result": run.result, "replayed": run.replayed}))
'''


def test_after_a_kernel_restart_resuming_works_once_the_cell_has_run_again(store_path, stores, folder):
    namespace = {}
    exec(CELL, namespace)
    engine = dl.Engine(stores(store_path))
    assert engine.start(namespace["notebook_flow"], folder, "A-5", run_id="nb-1").status == "waiting"
    engine.signal("nb-1", "approve", "yes")

    child = subprocess.run([sys.executable, "-c", AFTER_RESTART, store_path, CELL],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert lines[0].startswith("NOT REGISTERED") and "'nb-1'" in lines[0]
    assert "'core-notebook-cell' version 1" in lines[0]
    report = json.loads(lines[1][4:])
    assert report == {"status": "completed", "result": {"data": "fetch(A-5)", "answer": "yes"},
                      "replayed": ["fetch"]}
    assert dl.sim.World(folder).tools.calls("fetch") == 1
