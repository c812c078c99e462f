"""Lesson 10's lumpy run, for the trace tests: two days, three workers, one real SIGKILL.

worker-a runs until the approval wait; two days later a manager approves; worker-b, a
fresh process on the lesson's fake clock, resumes and is SIGKILLed right after paying
the refund (before its checkpoint); a minute later worker-c recovers the run and finishes.
"""

import os
from dataclasses import dataclass

import durable_lite as dl
from durable_lite import lumpy
from durable_lite.faults import CrashAt

RUN_ID = "ticket-1042"


@dataclass
class LumpyRun:
    folder: str
    store_path: str
    clock: dl.FakeClock
    engine: dl.Engine          # worker-c's, which finished the run
    worker_b: lumpy.WorkerExit
    world: dl.sim.World


def lumpy_run(folder, crm_failures=4) -> LumpyRun:
    folder = str(folder)
    os.makedirs(folder, exist_ok=True)
    store_path = f"{folder}/runs.db"
    clock = dl.FakeClock()
    lumpy.use_clock(folder, clock)
    worker_a = dl.Engine(dl.SQLiteStore(store_path), clock, worker="worker-a")
    run = worker_a.start(lumpy.support_agent, folder, "A-1042", 120, run_id=RUN_ID,
                         crm_failures=crm_failures)
    assert run.status == "waiting"
    clock.advance(2 * lumpy.DAY)
    worker_a.signal(RUN_ID, "approval", {"approved": True, "by": "dana"})
    worker_b = lumpy.resume_in_worker(store_path, folder, RUN_ID, worker="worker-b", at=clock(),
                                      kill_at=CrashAt("refund", "after_effect"))
    assert worker_b.killed
    clock.advance(60)
    worker_c = dl.Engine(dl.SQLiteStore(store_path), clock, worker="worker-c")
    [finished] = worker_c.recover()
    assert finished.status == "completed"
    return LumpyRun(folder, store_path, clock, worker_c, worker_b, dl.sim.World(folder))
