"""A step result the store refuses for good is a failure of that step, recorded with its
effect marked as happened: no resume or recover() runs the effect again.

Some writes fail for a reason that will not go away by waiting: the result is larger than
the store accepts, or a constraint on the file refuses it. Leaving the run "running" would
let every recover() execute the step again, effect and all, and fail again at the same
write. So the engine records the failure in the result's place (a small entry the store
does accept); only when even that cannot be written does it stop with StoreWriteError and
leave the position free for a later resume.
"""

import sqlite3

from core_support import *  # noqa: F401,F403

from durable_lite.faults import CrashAt
from durable_lite.sim import World, world_at

# Refuses a step's result longer than 200 characters, as a store with a size limit would.
TOO_LARGE = ("CREATE TRIGGER too_large BEFORE INSERT ON entries "
             "WHEN NEW.kind = 'step' AND length(NEW.result) > 200 "
             "BEGIN SELECT RAISE(ABORT, 'result too large for this store'); END")
# Refuses every entry: the store cannot record anything at all.
NOTHING = "CREATE TRIGGER refuse_all BEFORE INSERT ON entries BEGIN SELECT RAISE(FAIL, 'disk says no'); END"


def charge(folder, order_id, size):
    world_at(folder).careless.refund(order_id, 1)
    return "x" * size


@dl.workflow("unwritable-charge")
def unwritable_charge(ctx, folder, order_id, size):
    receipt = ctx.step("charge", charge, folder, order_id, size)
    ctx.step("thank", lambda: "thanks")
    return len(receipt)


def add_trigger(store_path, sql):
    db = sqlite3.connect(store_path)
    db.execute(sql)
    db.commit()
    db.close()


def charges(folder, order_id):
    world = World(folder)
    try:
        return world.careless.count(order_id)
    finally:
        world.close()


def test_a_result_the_store_refuses_fails_its_step_once_and_recover_moves_on(
        store_path, stores, clock, folder):
    engine = dl.Engine(stores(store_path), clock, ids=dl.SequentialIds("id"))
    for run_id, size in (("big", 500), ("small", 5)):          # both interrupted before charging
        engine.crash_at = CrashAt("charge", "before_step")
        with pytest.raises(dl.Crash):
            engine.start(unwritable_charge, folder, run_id, size, run_id=run_id)
    add_trigger(store_path, TOO_LARGE)
    worker = dl.Engine(stores(store_path), clock, ids=dl.SequentialIds("w"))
    runs = {run.run_id: run for run in worker.recover()}
    assert runs["small"].status == dl.COMPLETED and runs["small"].result == 5
    big = runs["big"]
    assert big.status == dl.FAILED, big
    assert "'charge'" in big.error and "too large" in big.error, big.error
    assert charges(folder, "big") == 1 and charges(folder, "small") == 1
    for _ in range(3):                            # nothing left for recover() to repeat
        assert worker.recover() == []
    again = worker.resume("big")                  # a person resumes: the failure is replayed
    assert again.status == dl.FAILED and charges(folder, "big") == 1
    row = [h for h in worker.history("big") if h["step"] == "charge"][0]
    assert row["status"] == "failed" and "too large" in row["error"]


def test_a_workflow_may_catch_the_failure_of_a_result_it_could_not_record(store_path, stores, clock, folder):
    @dl.workflow("unwritable-fallback")
    def fallback(ctx, folder, order_id):
        try:
            ctx.step("charge", charge, folder, order_id, 500)
        except dl.StepFailed as failed:
            return {"charged": "unknown", "why": failed.error}
        return {"charged": "yes"}

    engine = dl.Engine(stores(store_path), clock)
    add_trigger(store_path, TOO_LARGE)
    run = engine.start(fallback, folder, "F-1", run_id="fallback")
    assert run.status == dl.COMPLETED and run.result["charged"] == "unknown"
    assert engine.resume("fallback").result == run.result and charges(folder, "F-1") == 1


def test_a_store_that_records_nothing_stops_the_run_and_leaves_it_resumable(
        store_path, stores, clock, folder):
    engine = dl.Engine(stores(store_path), clock)
    add_trigger(store_path, NOTHING)
    with pytest.raises(dl.StoreWriteError, match="'charge'"):
        engine.start(unwritable_charge, folder, "N-1", 5, run_id="nothing")
    assert engine.get("nothing").status == dl.RUNNING
    db = sqlite3.connect(store_path)
    db.execute("DROP TRIGGER refuse_all")
    db.commit()
    db.close()
    run = engine.resume("nothing")
    assert run.status == dl.COMPLETED
    assert charges(folder, "N-1") == 2            # the window: the effect ran, nothing recorded it


def test_a_result_the_store_refuses_at_the_end_fails_the_run_instead_of_leaving_it_running(
        store_path, stores, clock, folder):
    @dl.workflow("unwritable-result")
    def big_result(ctx, folder):
        ctx.step("charge", charge, folder, "R-1", 5)
        return "y" * 500

    engine = dl.Engine(stores(store_path), clock)
    db = sqlite3.connect(store_path)
    db.execute("CREATE TRIGGER too_large_result BEFORE UPDATE OF result ON runs "
               "WHEN length(NEW.result) > 200 BEGIN SELECT RAISE(ABORT, 'result too large'); END")
    db.commit()
    db.close()
    run = engine.start(big_result, folder, run_id="end")
    assert run.status == dl.FAILED and "too large" in run.error, run
    assert engine.recover() == [] and charges(folder, "R-1") == 1
