"""Lesson 01's refund and lesson 07's approval on a real Temporal server (started by the
tests, shared by the session), in worker processes, one of them SIGKILLed in the middle
of an activity; every effect counted in the simulated world's ledgers, every step read
from the server's event history."""

from engines_support import *  # noqa: F401,F403
from engines_support import pair

import durable_lite as dl
from durable_lite import examples as ex
from durable_lite.engines.compare import parity
from durable_lite.engines.temporal import (machines as temporal_machines, refund as refund_temporal,
                                           support as temporal_support)
from durable_lite.engines.temporal.worker import start_worker

pytestmark = pytest.mark.crash
COLUMNS = ("position", "step", "kind", "status")


def test_a_worker_killed_inside_an_activity_is_replaced_by_another_on_the_task_queue(
        temporal_address, world):
    seen = temporal_machines.run(temporal_address, world)
    # machine A died inside the refund activity: the money moved, the server had only lookup
    assert seen["machine_a_killed"]
    assert seen["after_kill"] == {"status": "running", "recorded": ["lookup"], "paid": 1}
    # machine B, a different process that was only polling, took the retry and finished
    assert seen["after_takeover"] == {"status": "completed", "result": {
        "order": "A-17", "refund_id": "R-1", "amount": 40}}
    refund = seen["history"][1]
    assert (refund["step"], refund["attempts"], refund["worker"]) == ("refund", 2, "machine-b")
    assert "StartToClose" in refund["error"]                # why attempt 1 ended
    assert [r["worker"] for r in seen["history"]] == ["machine-a", "machine-b", "machine-b",
                                                      "machine-b"]
    # every effect once; the provider asked twice, the key paid once
    assert seen["ledger"] == {"refunds paid": 1, "refund requests": 2, "emails sent": 1,
                              "tickets closed": 1}
    assert seen["recovery_seconds"] > 0


def test_the_event_history_reads_like_engine_history(temporal_address, tmp_path):
    """The same refund on both engines: the server's history, turned into rows, has the
    steps, kinds and statuses of durable_lite's engine.history, and the same results."""
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    engine = dl.Engine(dl.SQLiteStore(os.path.join(dl_work, "runs.db")), dl.FakeClock())
    engine.start(ex.refund, dl_world, "A-17", 40, run_id="refund-A-17", key_notices=True)
    expected = engine.history("refund-A-17")

    t_world, _ = pair(tmp_path, "temporal")
    report = start_worker(temporal_address, "history", task_queue="q-history", start=[
        ("refund", "refund-A-17-history", [t_world, "A-17", 40, True, False, True], {})]
                          ).result()
    assert report["refund-A-17-history"]["status"] == "COMPLETED"
    rows = temporal_support.history(temporal_address, "refund-A-17-history")
    assert [tuple(r[c] for c in COLUMNS) for r in rows] == \
        [tuple(r[c] for c in COLUMNS) for r in expected]
    assert [r["result"] for r in rows] == [r["result"] for r in expected]
    assert {r["worker"] for r in rows} == {"history"}
    events = [e["type"] for e in temporal_support.events(temporal_address,
                                                         "refund-A-17-history")]
    assert events[0] == "WorkflowExecutionStarted" and events[-1] == "WorkflowExecutionCompleted"
    assert events.count("ActivityTaskCompleted") == 4


def test_the_workflow_id_is_the_idempotency_of_a_run(temporal_address, world):
    """Started twice under one id (a retried request, a rerun cell): one run, one of each
    effect, the same result; the second start found the run and started nothing."""
    args = [world, "A-17", 40, True, False, False]           # the email and close unkeyed
    first = start_worker(temporal_address, "once", task_queue="q-once",
                         start=[("refund", "refund-A-17-once", args, {})]).result()
    again = start_worker(temporal_address, "twice", task_queue="q-once",
                         start=[("refund", "refund-A-17-once", args, {})]).result()
    assert first == again
    assert (parity.ledger(world)["refunds paid"], parity.ledger(world)["emails"]) == (1, 1)
    assert [e["type"] for e in temporal_support.events(temporal_address, "refund-A-17-once")
            ].count("WorkflowExecutionStarted") == 1


@pytest.mark.parametrize("approve", [True, False], ids=["approval-arrives", "deadline-passes"])
def test_a_wait_with_a_deadline_ends_the_same_way_on_both(tmp_path, temporal_address, approve):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    t_world, _ = pair(tmp_path, "temporal")
    expected = parity.approval_durable_lite(approve, dl_world, dl_work)
    got = parity.approval_temporal(approve, t_world, temporal_address, timeout=0.5)
    assert got == expected
    assert got["asked for approval"] and got["status"] == "completed"
    if approve:
        assert got["result"]["refunded"] and (got["refunds paid"], got["emails"],
                                              got["tickets closed"]) == (1, 1, 1)
    else:
        assert got["result"] == {"order": "A-17", "refunded": False, "amount": 250}
        assert (got["refunds paid"], got["emails"], got["tickets closed"]) == (0, 1, 0)


def test_the_approval_is_a_signal_and_the_cooling_off_a_durable_timer(temporal_address, world):
    report = start_worker(temporal_address, "timers", task_queue="q-timers", start=[
        ("refund_with_approval", "refund-A-101", [world, "A-101", 250, 100, 60, 0.2], {})])
    try:
        temporal_support.wait_for_timer(temporal_address, "refund-A-101", "approval deadline")
        temporal_support.signal(temporal_address, "refund-A-101", refund_temporal.APPROVAL,
                                {"approved": True, "by": "ana"})
        outcome = report.result()["refund-A-101"]
    finally:
        report.kill()
    assert outcome["result"]["refunded"] is True
    rows = temporal_support.history(temporal_address, "refund-A-101")
    kinds = [(r["step"], r["kind"], r["status"]) for r in rows]
    assert kinds == [("lookup", "step", "completed"),
                     ("approval deadline", "timer", "cancelled"),
                     ("approval", "signal", "completed"),
                     ("refund", "step", "completed"), ("email", "step", "completed"),
                     ("cooling off", "timer", "completed"), ("close", "step", "completed")]
    assert rows[2]["result"] == {"approved": True, "by": "ana"}
    # the answer came before the deadline, so the deadline's timer was cancelled


def test_a_worker_build_id_follows_the_source_it_registers(tmp_path, monkeypatch):
    from durable_lite.engines.temporal.worker import build_id
    (tmp_path / "port_a.py").write_text("VALUE = 1\n")
    (tmp_path / "port_b.py").write_text("VALUE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    course = build_id(["refund"])
    assert course == build_id(["refund"]) and len(course) == 32
    assert build_id(["refund", "port_a"]) != build_id(["refund", "port_b"])
    assert build_id(["refund", "port_a"]) != course
