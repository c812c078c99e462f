"""Several worker processes take runs from one queue on one SQLite file while the test kills
them with SIGKILL at random moments and starts replacements.

The limits hold across processes and through the kills: the most runs holding a slot at
once, measured from a log the runs' own steps write (queue_worker.py), never exceeds the
queue's concurrency, nor its per-key limit for any tenant; no run is lost; and a rate limit
holds across processes too, measured from the start times the store recorded.
"""

import json
import random
import subprocess
import time

from core_support import *  # noqa: F401,F403
from core_support import python_path

import queue_worker

pytestmark = pytest.mark.crash

RUNS, WORKERS, KILLS = 150, 6, 15
TENANTS = ("acme", "globex", "initech", "umbrella")


def spawn(store_path, folder, queue):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path()))
    spec = json.dumps({"name": queue.name, "limits": queue.limits_json()})
    return subprocess.Popen([sys.executable, queue_worker.__file__, store_path, folder, spec],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_killed_workers_never_exceed_the_limits_and_lose_no_run(store_path, stores, folder):
    queue = dl.Queue("jobs", concurrency=3, per_key=2)
    store = stores(store_path)
    engine = dl.Engine(store)
    for i in range(RUNS):
        tenant = TENANTS[i % len(TENANTS)] if i % 3 else "acme"      # acme floods
        engine.enqueue(queue, queue_worker.job, folder, tenant, key=tenant, run_id=f"job-{i:03d}")

    rng = random.Random(2026)
    kills = 0
    workers = [spawn(store_path, folder, queue) for _ in range(WORKERS)]
    born = {w.pid: time.time() for w in workers}
    deadline = time.time() + 120
    while kills < KILLS and any(w.poll() is None for w in workers) and time.time() < deadline:
        time.sleep(rng.uniform(0.03, 0.15))
        alive = [w for w in workers if w.poll() is None]
        if not alive:
            break
        # Prefer a worker past its start-up (imports take a moment): it is likely inside a run.
        working = [w for w in alive if time.time() - born[w.pid] > 0.3] or alive
        victim = rng.choice(working)
        victim.kill()
        victim.wait()
        kills += 1
        workers[workers.index(victim)] = fresh = spawn(store_path, folder, queue)
        born[fresh.pid] = time.time()
    for w in workers:
        w.wait(timeout=max(1, deadline - time.time()))
        assert w.returncode in (0, -9), w.stderr.read().decode()[-2000:]

    statuses = [r.status for r in store.list_runs()]
    assert statuses.count("completed") == RUNS, {s: statuses.count(s) for s in set(statuses)}
    assert kills >= 5                                  # the test really did kill workers
    interrupted = [r.run_id for r in store.list_runs()
                   if any(e.kind == "interrupted" for e in store.events(r.run_id))]
    assert interrupted                                 # kills landed inside runs in their slots

    peak, peak_per = queue_worker.peaks(folder)
    ended = {run_id for _, run_id, _, what, _ in queue_worker.log(folder) if what == "end"}
    assert len(ended) == RUNS                          # every run's last step ran
    assert peak <= 3, peak
    assert max(peak_per.values()) <= 2, peak_per
    assert peak == 3                                   # six workers did push against the limit
    print(f"\n{WORKERS} workers, {kills} SIGKILLs ({len(interrupted)} inside a run), {RUNS} "
          f"runs: peak {peak} of concurrency 3, peak per key {max(peak_per.values())} of "
          f"per_key 2, runs lost 0")


def test_a_rate_limit_holds_across_worker_processes(store_path, stores, folder):
    queue = dl.Queue("paced", rate=(8, 0.5))
    store = stores(store_path)
    engine = dl.Engine(store)
    for i in range(40):
        engine.enqueue(queue, queue_worker.job, folder, "acme", run_id=f"paced-{i:02d}")
    workers = [spawn(store_path, folder, queue) for _ in range(4)]
    for w in workers:
        w.wait(timeout=60)
        assert w.returncode == 0, w.stderr.read().decode()[-2000:]
    starts = sorted(q.started_at for q in store.queued_runs("paced"))
    assert len(starts) == 40
    # No 9 starts within half a second, whichever process made them.
    assert all(later - earlier >= 0.5 for earlier, later in zip(starts, starts[8:]))
    assert starts[-1] - starts[0] >= (40 - 8) / 8 * 0.5 - 1e-6
    assert [r.status for r in store.list_runs()].count("completed") == 40

