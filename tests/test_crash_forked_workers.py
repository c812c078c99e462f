"""A module-level Engine used from forked children: each child is a worker of its own.

multiprocessing forks on Linux by default, and a forked child inherits the parent's
objects, the Engine and its store among them. A worker's name is how leases tell workers
apart, so a child that kept its parent's name would find every lease another child took
"already ours" and execute the run beside it: a customer charged twice or three times.
"""

import json
import subprocess
import sys

import pytest

from core_support import *  # noqa: F401,F403
from core_support import TESTS_DIR, python_path

from durable_lite.sim import World

pytestmark = [pytest.mark.crash,
              pytest.mark.skipif(sys.platform == "win32", reason="no fork start method")]


def pool(store_path, folder, runs, children, worker=None):
    args = [sys.executable, "fork_pool.py", store_path, folder, str(runs), str(children)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path()))
    out = subprocess.run(args + ([worker] if worker else []), cwd=TESTS_DIR, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_forked_children_recovering_one_engines_runs_charge_each_run_once(store_path, folder):
    report = pool(store_path, folder, runs=20, children=4)
    world = World(folder)
    try:
        charges = {f"O-{i}": world.careless.count(f"O-{i}") for i in range(20)}
    finally:
        world.close()
    assert set(report["statuses"].values()) == {"completed"}, report
    assert charges == {order: 1 for order in charges}, charges
    workers = [child["worker"] for child in report["children"]]
    assert len(set(workers)) == 4, f"the children shared worker names: {workers}"
    assert sum(len(child["recovered"]) for child in report["children"]) == 20, report


def test_a_named_engine_is_refused_in_a_forked_child_rather_than_shared(store_path, folder):
    report = pool(store_path, folder, runs=3, children=2, worker="machine-a")
    for child in report["children"]:
        error = child.get("error", "")
        assert "machine-a" in error and "fork" in error, child
    assert set(report["statuses"].values()) == {"running"}, report     # nothing executed
    world = World(folder)
    try:
        assert world.careless.count() == 0
    finally:
        world.close()
