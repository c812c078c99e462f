"""A patch gate across real processes: runs parked by one process under the original code
are finished by fresh processes running the gated code, and a process SIGKILLed right after
the gate chose the new branch leaves a run that keeps to the new branch when it resumes."""

import versioning_workflows as w
from core_support import *  # noqa: F401,F403

from durable_lite.faults import CrashAt, run_in_child
from durable_lite.sim import World, forget_worlds

pytestmark = pytest.mark.crash

START = 1_767_225_600.0          # the FakeClock every process here starts from


def child(store_path, *args, run_id, **options):
    """One start or resume in a fresh process running the gated code (the module's)."""
    return run_in_child(store_path, "versioning_workflows", w.NAME, *args, run_id=run_id,
                        python_path=python_path(), engine_options={"clock": START}, **options)


def test_runs_parked_before_the_gate_finish_on_the_old_path_in_fresh_processes(store_path, folder):
    w.deploy("original")                              # this process: Monday's code
    try:
        engine = dl.Engine(dl.SQLiteStore(store_path), dl.FakeClock(START))
        old = [engine.start(w.NAME, folder, order, 40, run_id=f"old-{order}").run_id
               for order in ("A-1", "A-2")]
        assert {engine.get(r).status for r in old} == {"waiting"}
        for run_id in old:
            engine.signal(run_id, "approval", {"approved": True})
        engine.store.close()
    finally:
        w.deploy("gated")
    forget_worlds(folder)

    # Tuesday: every process runs the gated code. Old runs replay down the old branch.
    for run_id in old:
        report = child(store_path, run_id=run_id, resume=True).run
        assert report["status"] == "completed" and report["result"]["fraud"] is None
        assert report["replayed"] == ["lookup", "ask"]

    # A new run is killed right after the gate recorded its marker, before the fraud check.
    killed = child(store_path, folder, "B-1", 40, run_id="new-B-1",
                   crash_at=CrashAt("fraud-check", "before_step", kill=True))
    assert killed.killed
    store = dl.SQLiteStore(store_path)
    try:
        assert [(e.kind, e.name) for e in store.load_entries("new-B-1")] == \
            [("step", "lookup"), ("patch", "fraud-check")]
    finally:
        store.close()
    resumed = child(store_path, run_id="new-B-1", resume=True).run
    assert resumed["status"] == "waiting" and resumed["executed"] == ["fraud-check", "ask"]

    engine = dl.Engine(dl.SQLiteStore(store_path), dl.FakeClock(START))
    engine.signal("new-B-1", "approval", {"approved": True})
    engine.store.close()
    done = child(store_path, run_id="new-B-1", resume=True).run
    assert done["status"] == "completed" and done["result"]["fraud"] == 0.1
    assert done["replayed"] == ["lookup", "fraud-check", "ask"]

    world = World(folder)
    assert world.payments.count() == 3 and world.mailer.count(w.APPROVER) == 3
    assert [r["detail"]["order"] for r in world.ledger(w.FRAUD).records()] == ["B-1"]
    world.close()
