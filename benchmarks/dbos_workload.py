"""The same workload on DBOS Transact, on a SQLite file or on a real Postgres, offline.

Imported by the benchmark (only when `import dbos` works) and by its DBOS crash children.
Both import it under the same module name, so both register the same workflow.
"""

import os
import signal
import sys
import threading
import time

from dbos import DBOS, SetWorkflowID

# Set to True only in a crash child: the workflow then kills its own process right after
# its last step is checkpointed, so recovery finds n completed steps and no result.
CRASH_AFTER_STEPS = False

# (start, end) perf_counter times of each finished execution of the workflow body in this
# process, so recovery can be timed without the queue's polling delay.
body_times = []
body_done = threading.Event()


def sqlite_url(path):
    return "sqlite:///" + os.path.abspath(path)


def config(url):
    return {
        "name": "durable-lite-bench",
        "system_database_url": url,
        "log_level": "WARNING",
        # Fixed, so the recovering process is sure to claim what the crashed one left.
        "application_version": "bench-1",
    }


@DBOS.step()
def dbos_noop(i):
    return i


@DBOS.workflow()
def dbos_bench_steps(n):
    start = time.perf_counter()          # timing only; it never changes what the body does
    for i in range(n):
        dbos_noop(i)
    if CRASH_AFTER_STEPS:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    body_times.append((start, time.perf_counter()))
    body_done.set()
    return n


def launch(url):
    DBOS(config=config(url))
    DBOS.launch()


def run(n, workflow_id):
    with SetWorkflowID(workflow_id):
        return dbos_bench_steps(n)


def crash_child(url, n, workflow_id):
    """Child process: run n steps under DBOS, then die by SIGKILL before the workflow ends."""
    global CRASH_AFTER_STEPS
    CRASH_AFTER_STEPS = True
    launch(url)
    run(n, workflow_id)


class Backends:
    """DBOS on each system database the benchmark compares ({row key: URL}).

    DBOS keeps one instance per process, so one backend is launched at a time. `use(key)`
    switches (destroy, launch the other: well under a second) and then runs a short
    warm-up workflow, so that no timed run pays for a switch or a cold start.
    """

    def __init__(self, urls):
        self.urls = dict(urls)
        self.current = None
        self.runs = 0

    def use(self, key):
        if key == self.current:
            return
        DBOS.destroy()
        self.current = None
        launch(self.urls[key])
        self.current = key
        self.run(key, 20)                        # warm-up: connections, caches, code paths

    def run(self, key, n):
        self.use(key)
        self.runs += 1
        result = run(n, f"{key}-{n}-{self.runs}")
        if result != n:
            raise RuntimeError(f"DBOS ({key}) returned {result!r} instead of {n}")

    def close(self):
        DBOS.destroy()
        self.current = None
