"""A worker told to hurry reports at once on a run that is still waiting.

A grader counts its patience from a moment only it knows (the answer sent), not from the
worker's start, which a busy machine can delay by seconds: it tells the worker when it has
waited long enough. These runs wait for an approval nobody sends, with a deadline far
away and a worker timeout far away too, so only the hurry can end the wait."""

import time

from engines_support import *  # noqa: F401,F403

from durable_lite.engines.dbos import support as dbos_support, worker as dbos_worker
from durable_lite.engines.compare import killed
from durable_lite.engines.temporal import support as temporal_support
from durable_lite.engines.compare.killed_waiting import _report_of
from durable_lite.engines.temporal.worker import start_worker as start_temporal_worker

FAR = 600             # seconds: the approval deadline and the workers' own timeout


def recorded(sqlite_url, workflow_id) -> list:
    try:
        return dbos_support.recorded_steps(sqlite_url, workflow_id)
    except Exception:           # DBOS has not made its tables yet: nothing is recorded
        return []


def test_a_hurried_dbos_worker_reports_its_waiting_workflow(sqlite_url, world):
    worker = dbos_worker.start_worker(
        sqlite_url, "hurried", timeout=FAR,
        start=[("refund.refund_with_approval", "hurry-A-1", [world, "A-1", 250],
                {"approval_timeout": FAR})])
    # Hurried once the run has recorded its lookup and gone on to wait: a busy machine can
    # take many seconds to get there, and a run hurried before its first step has none.
    deadline = time.monotonic() + 120
    while "lookup" not in recorded(sqlite_url, "hurry-A-1"):
        assert time.monotonic() < deadline and worker.process.is_alive(), worker.log()
        time.sleep(0.1)         # polling another process's database, not a wait for work
    began = time.monotonic()
    report = killed.reported(worker, timeout=120, hurry_after=1)
    took = time.monotonic() - began
    assert report is not None, worker.log()
    assert report["hurry-A-1"]["status"] == "PENDING"      # still waiting for the approval
    assert report["hurry-A-1"]["steps"][0] == "lookup"
    assert 1 <= took < 100                                 # asked at 1 s, long before FAR


def test_an_unhurried_dbos_worker_is_left_to_its_own_timeout(sqlite_url, world):
    worker = dbos_worker.start_worker(
        sqlite_url, "patient", timeout=3,
        start=[("refund.refund_with_approval", "hurry-A-2", [world, "A-2", 250],
                {"approval_timeout": FAR})])
    report = killed.reported(worker, timeout=120)
    assert report is not None, worker.log()
    assert report["hurry-A-2"]["status"] == "PENDING"


def test_a_hurried_temporal_worker_reports_its_waiting_run(temporal_address, world):
    worker = start_temporal_worker(temporal_address, "hurried", task_queue="q-hurry",
                                   timeout=FAR, start=[
        ("refund_with_approval", "hurry-A-3", [world, "A-3", 250, 100, FAR, 0.2], {})])
    try:
        temporal_support.wait_for_timer(temporal_address, "hurry-A-3", "approval deadline")
        began = time.monotonic()
        report = _report_of(worker, timeout=120, hurry_after=1)
        took = time.monotonic() - began
    finally:
        worker.kill()
    assert report is not None, worker.log()
    assert temporal_support.status_word(report["hurry-A-3"]["status"]) == "running"
    assert report["hurry-A-3"]["result"] is None
    assert 1 <= took < 100


def test_a_run_that_ended_after_the_wait_ran_out_is_reported_with_its_result(temporal_address,
                                                                               world):
    """The run ends between the worker's last look and its report (its wait ran out
    meanwhile, on a busy machine): the report says completed AND gives the result, never
    "completed" with None (a solution once scored 7/8 so)."""
    import asyncio

    from durable_lite.engines.temporal.worker import outcome

    worker = start_temporal_worker(temporal_address, "ended", task_queue="q-ended", start=[
        ("refund", "ended-A-4", [world, "A-4", 40, True, False, True], {})])
    report = worker.result()
    assert temporal_support.status_word(report["ended-A-4"]["status"]) == "completed"

    async def look_after_the_wait_ran_out():
        client = await temporal_support.connect(temporal_address)
        return await outcome(client, "ended-A-4", deadline=time.monotonic() - 1)

    found = asyncio.run(look_after_the_wait_ran_out())
    assert temporal_support.status_word(found["status"]) == "completed"
    assert found["result"] == report["ended-A-4"]["result"] is not None
