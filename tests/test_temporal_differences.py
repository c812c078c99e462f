"""Where Temporal and durable_lite differ, each difference shown from both sides on a real
Temporal server (the session's), and the registry (differences.TEMPORAL) checked to be
complete: every entry has its evidence test, every test here has its entry.

The crash table (test_parity_four_engines.py, test_temporal_parity.py) found no difference: lesson 01's refund killed
at each crash point leaves the same ledgers on both engines.
"""

import re
import time

from engines_support import *  # noqa: F401,F403
from engines_support import pair

import durable_lite as dl
from durable_lite import examples as ex
from durable_lite.engines.compare import differences, parity
from durable_lite.engines.temporal import (pitfalls as temporal_pitfalls, refund as refund_temporal,
                                           support as temporal_support)
from durable_lite.engines.temporal.worker import start_worker
from durable_lite.sim import World

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
CUSTOMER = "customer17@example.com"


def engine_at(workdir, clock=None):
    return dl.Engine(dl.SQLiteStore(os.path.join(workdir, "runs.db")), clock or dl.FakeClock(),
                     ids=dl.SequentialIds("run"))


def mail(folder) -> dict:
    world = World(folder)
    try:
        return {"emails": world.mailer.count(), "mail server calls":
                world.ledger(temporal_pitfalls.ATTEMPTS).count()}
    finally:
        world.close()


@dl.workflow("temporal-difference-notify")
def notify(ctx, folder, to, fail_times, keyed=False, attempts=1):
    key = ctx.idempotency_key("notify") if keyed else None
    step = dl.Step("notify", retry=dl.Retry(max_attempts=attempts, initial=0, jitter=False)
                   ) if attempts > 1 else "notify"
    return ctx.step(step, temporal_pitfalls.send_then_fail, folder, to,
                    "Your refund is on its way", fail_times, key)


def test_a_failing_step_fails_the_run_on_durable_lite_and_is_retried_on_temporal(
        tmp_path, temporal_address):
    """A mail server that sends, then times out, twice. durable_lite runs the step once and
    fails the run: one email. Temporal retries the activity by default: without a key, one
    email per attempt."""
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    run = engine_at(dl_work).start(notify, dl_world, CUSTOMER, 2, run_id="notify-1")
    assert run.status == "failed" and "timed out after sending" in run.error
    assert mail(dl_world) == {"emails": 1, "mail server calls": 1}

    ran = {}
    for keyed in (False, True):
        world, _ = pair(tmp_path, f"temporal-{keyed}")
        report = start_worker(temporal_address, "retries", task_queue=f"q-retries-{keyed}",
                              start=[("notify", f"notify-{keyed}", [world, CUSTOMER, 2, keyed],
                                      {})]).result()[f"notify-{keyed}"]
        assert report["status"] == "COMPLETED"
        [row] = temporal_support.history(temporal_address, f"notify-{keyed}")
        assert (row["step"], row["attempts"], row["status"]) == ("notify", 3, "completed")
        assert "timed out after sending (call 2)" in row["error"]
        ran[keyed] = mail(world)
    assert ran[False] == {"emails": 3, "mail server calls": 3}     # unkeyed: three emails
    assert ran[True] == {"emails": 1, "mail server calls": 3}      # keyed: one email

    # durable_lite does the same only when asked to, with the same cost without a key
    again, again_work = pair(tmp_path, "durable_lite-retry")
    run = engine_at(again_work).start(notify, again, CUSTOMER, 2, run_id="notify-2",
                                      attempts=3)
    assert run.status == "completed" and mail(again) == {"emails": 3, "mail server calls": 3}


def test_a_finished_run_id_is_kept_by_durable_lite_and_reused_by_temporals_default(
        tmp_path, temporal_address):
    """The refund started again under the id of a run that has completed (the email and
    close unkeyed, the refund keyed by the run id)."""
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    engine = engine_at(dl_work)
    for _ in range(2):
        run = engine.start(ex.refund, dl_world, "A-17", 40, run_id="refund-A-17")
    assert run.status == "completed" and run.executed == []     # the second ran nothing
    assert (parity.ledger(dl_world)["refund requests"], parity.ledger(dl_world)["emails"]) == (1, 1)

    t_world, _ = pair(tmp_path, "temporal")
    args = [t_world, "A-17", 40, True, False, False]
    for n in (1, 2):                                            # Temporal's default policy
        start_worker(temporal_address, f"start-{n}", task_queue="q-reuse", start=[
            ("refund", "refund-A-17-reuse", args, {"id_reuse": "allow"})]).result()
    seen = parity.ledger(t_world)
    assert seen["refund requests"] == 2 and seen["refunds paid"] == 1   # the key held
    assert seen["emails"] == 2 and seen["tickets closed"] == 2         # the rest ran again
    runs = temporal_support.call(_runs, temporal_address, "refund-A-17-reuse")
    assert runs == ["COMPLETED", "COMPLETED"]                  # two runs, one workflow id


async def _runs(address, workflow_id):
    client = await temporal_support.connect(address)
    return [w.status.name async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")]


def test_a_waiting_run_needs_no_worker_on_temporal(tmp_path, temporal_address):
    """durable_lite: the answer is stored, and the run stays parked until some worker calls
    recover(). Temporal: the only worker dies while the run waits; the answer arrives with
    no worker alive; a worker started afterwards finishes the run."""
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    engine = engine_at(dl_work)
    from durable_lite.engines.lite import refund as refund_durable_lite
    refund_durable_lite.start(engine, dl_world, "A-101", 250, "refund-A-101", cooling_off=0)
    refund_durable_lite.approve(engine, "refund-A-101")
    assert engine.get("refund-A-101").status == "waiting"           # nothing woke it
    refund_durable_lite.work(engine)
    assert engine.get("refund-A-101").status == "completed"

    t_world, _ = pair(tmp_path, "temporal")
    first = start_worker(temporal_address, "first", task_queue="q-waiting", start=[
        ("refund_with_approval", "refund-A-101-waiting", [t_world, "A-101", 250, 100, 120, 0.05],
         {})])
    try:
        temporal_support.wait_for_timer(temporal_address, "refund-A-101-waiting",
                                        "approval deadline")
    finally:
        first.kill()
    assert first.killed
    temporal_support.signal(temporal_address, "refund-A-101-waiting", refund_temporal.APPROVAL,
                            {"approved": True, "by": "ana"})        # no worker is running
    assert temporal_support.status(temporal_address, "refund-A-101-waiting") == "running"
    later = start_worker(temporal_address, "later", task_queue="q-waiting",
                         wait_for=["refund-A-101-waiting"]).result()["refund-A-101-waiting"]
    assert later["status"] == "COMPLETED" and later["result"]["refunded"] is True
    assert parity.ledger(t_world)["refunds paid"] == 1


def test_durable_lite_waits_on_an_injected_clock_temporal_on_the_servers(tmp_path,
                                                                          temporal_address):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    started = time.monotonic()
    outcome = parity.approval_durable_lite(False, dl_world, dl_work)     # a two-day deadline
    assert outcome["result"]["refunded"] is False and time.monotonic() - started < 5

    t_world, _ = pair(tmp_path, "temporal")
    started = time.monotonic()
    outcome = parity.approval_temporal(False, t_world, temporal_address, timeout=1.0)
    assert outcome["result"]["refunded"] is False
    assert time.monotonic() - started >= 1.0                       # it really waited
    from temporalio.testing import WorkflowEnvironment
    assert hasattr(WorkflowEnvironment, "start_time_skipping")   # exists, but downloads a server


@dl.workflow("temporal-difference-reads-the-clock")
def reads_the_clock(ctx):
    return {"at": time.time() > 0}                               # nothing stops it


def test_temporals_sandbox_refuses_what_durable_lite_only_asks_you_to_avoid(tmp_path,
                                                                            temporal_address):
    _, dl_work = pair(tmp_path, "durable_lite")
    assert engine_at(dl_work).start(reads_the_clock, run_id="clock").status == "completed"

    readable = tmp_path / "note.txt"
    readable.write_text("hello", encoding="utf-8")
    rows = {r["workflow"]: r for r in
            temporal_pitfalls.sandbox_refusals(temporal_address, str(readable))}
    for name, code, call in temporal_pitfalls.REFUSED:
        assert rows[name]["status"] == "running", name          # open, its task retried
        assert rows[name]["refused"].startswith(f"Cannot access {call}"), rows[name]
    assert rows["deterministic"]["status"] == "completed" and not rows["deterministic"]["refused"]


# the registry is complete ----------------------------------------------------------------------
def _tests_in(filename):
    with open(os.path.join(TESTS_DIR, filename), encoding="utf-8") as f:
        return set(re.findall(r"^def (test_\w+)", f.read(), re.M))


def test_every_temporal_difference_has_evidence_and_every_difference_test_has_an_entry():
    named = set()
    for d in differences.TEMPORAL:
        filename, test = d.evidence.split("::")
        assert test in _tests_in(filename), f"{d.key}: no {d.evidence}"
        named.add((filename, test))
        assert d.topic and d.durable_lite and d.temporal
    here = {("test_temporal_differences.py", t) for t in _tests_in("test_temporal_differences.py")
            if not t.startswith("test_every_") and not t.startswith("test_the_")}
    assert here <= named, f"difference tests without an entry: {sorted(here - named)}"
    assert len(differences.TEMPORAL_BY_KEY) == len(differences.TEMPORAL)


def test_the_temporal_differences_table_lists_every_entry():
    table = differences.temporal_table()
    assert list(table.columns) == ["topic", "durable_lite", "Temporal"]
    assert len(table) == len(differences.TEMPORAL)
