"""Several worker processes recover a few hundred runs at once while the test kills them
with SIGKILL at random moments and starts replacements.

Every run completes; every side effect (keyed refund, keyed email, keyed ticket close)
happens exactly once in the world's ledgers; and a step ever executed twice was executed
twice only because the worker running it the first time had been killed before the second
execution began — never because two live workers ran it at once.
"""

import random
import subprocess
import time

from core_support import *  # noqa: F401,F403
from core_support import python_path

import core_worker

pytestmark = pytest.mark.crash

RUNS, WORKERS, MAX_KILLS = 200, 4, 12


def spawn(store_path, folder):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path()))
    return subprocess.Popen([sys.executable, core_worker.__file__, store_path, folder], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_workers_killed_at_random_finish_every_run_with_every_effect_once(store_path, stores, folder):
    store = stores(store_path)
    # Create the runs without executing them: each is stopped before its first step.
    creator = dl.Engine(store, crash_at=[dl.faults.CrashAt("lookup", "before_step")] * RUNS)
    for i in range(RUNS):
        with pytest.raises(dl.Crash):
            creator.start(core_worker.refund, folder, f"A-{i}", 10 + i, run_id=f"run-{i:03d}")
    assert len(store.list_runs([dl.RUNNING])) == RUNS

    rng = random.Random(2026)
    kills = {}                                    # pid -> when the SIGKILL was sent
    workers = [spawn(store_path, folder) for _ in range(WORKERS)]
    deadline = time.time() + 120
    while len(kills) < MAX_KILLS and any(w.poll() is None for w in workers):
        time.sleep(rng.uniform(0.05, 0.25))
        alive = [w for w in workers if w.poll() is None]
        if not alive:
            break
        victim = rng.choice(alive)
        kills[victim.pid] = time.time()
        victim.kill()
        victim.wait()                             # reaped: its pid is really gone
        workers[workers.index(victim)] = spawn(store_path, folder)
    for w in workers:
        w.wait(timeout=max(1, deadline - time.time()))
        assert w.returncode in (0, -9), w.stderr.read().decode()[-2000:]

    statuses = {r.run_id: r.status for r in store.list_runs()}
    assert list(statuses.values()).count("completed") == RUNS, statuses
    assert len(kills) >= 3                        # the test really did kill workers

    world = dl.sim.World(folder)
    refunds = world.payments.refunds()
    assert len(refunds) == RUNS and len({r["order_id"] for r in refunds}) == RUNS
    mail = world.mailer.sent()
    assert len(mail) == RUNS and len({m["to"] for m in mail}) == RUNS
    assert world.tickets.closes() == RUNS

    by_step = {}
    for run_id, step, pid, at in core_worker.executions(folder):
        by_step.setdefault((run_id, step), []).append((at, pid))
    assert len(by_step) == RUNS * 4
    repeats = 0
    for (run_id, step), runs in by_step.items():
        for (first_at, first_pid), (then_at, _) in zip(runs, runs[1:]):
            repeats += 1
            assert first_pid in kills and kills[first_pid] <= then_at, (
                f"{run_id}/{step} ran again at {then_at} while worker {first_pid} was alive")
    # Every kill interrupts at most one step in the window between effect and checkpoint.
    assert repeats <= len(kills)
