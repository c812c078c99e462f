"""Leases: one worker executes a run at a time. Taken at creation, kept only while the
store still names the worker, renewed by a heartbeat during slow steps, and every write is
fenced so that a worker that lost its lease cannot change the run's history."""

import subprocess
import threading
import time

from core_support import *  # noqa: F401,F403
from core_support import Calls

from durable_lite.errors import LeaseHeldError, LeaseLostError
from durable_lite.lease import HOST

ELSEWHERE = "other-host:4242:abcdef"        # a worker on another machine


@dl.workflow("core-leased")
def leased(ctx):
    return [ctx.step("a", CALLS, "a"), ctx.step("b", CALLS, "b")]


CALLS = Calls()


@pytest.fixture(autouse=True)
def reset_calls():
    CALLS.counts.clear()


def interrupted_run(engine, clock, run_id="r"):
    with pytest.raises(dl.Crash):
        dl.Engine(engine.store, clock, crash_at=dl.faults.CrashAt("b", "before_step")).start(
            leased, run_id=run_id)


def test_a_run_leased_by_a_live_worker_elsewhere_is_left_alone_until_the_lease_expires(engine, clock):
    interrupted_run(engine, clock)
    assert engine.store.try_lease("r", ELSEWHERE, clock() + 30, clock())
    with pytest.raises(LeaseHeldError) as err:
        engine.resume("r")
    assert "'r'" in str(err.value) and ELSEWHERE in str(err.value)
    assert engine.recover() == []
    clock.advance(31)                                   # the other worker stopped renewing
    (run,) = engine.recover()
    assert run.status == "completed" and CALLS.counts == {"a": 1, "b": 1}


def test_a_lease_held_by_a_dead_process_on_this_host_is_taken_over_at_once(engine, clock):
    interrupted_run(engine, clock)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()                                        # gone, and reaped
    dead = f"{HOST}:{child.pid}:0000aa"
    assert engine.store.try_lease("r", dead, clock() + 3600, clock())
    run = engine.resume("r")                            # no need to wait an hour
    assert run.status == "completed"


def test_a_new_run_is_leased_from_the_moment_it_is_created(engine, fresh, clock):
    other = fresh()
    seen = []

    def first():
        seen.append([r.run_id for r in other.recover()])   # another worker looks for work
        return CALLS("first")

    @dl.workflow("core-racing-start")
    def racing(ctx):
        return ctx.step("first", first)

    run = engine.start(racing, run_id="race")
    assert run.status == "completed" and seen == [[]] and CALLS["first"] == 1


def test_a_worker_that_lost_its_lease_cannot_record_what_it_did(engine, fresh, clock):
    """Worker A stalls inside a step past its lease; worker B takes the run over and
    finishes it. When A wakes up, its checkpoint is refused and B's history stands."""
    a = dl.Engine(engine.store, clock, worker="worker-A", lease_seconds=30)
    b = dl.Engine(fresh().store, clock, worker="worker-B", lease_seconds=30)
    results = []

    def slow_fetch():
        if not results:
            results.append("A started")
            clock.advance(60)                       # A freezes for a minute (a paused VM)
            results.append(b.resume("fence").status)  # meanwhile B takes over and finishes
            return "A's answer"
        return "B's answer"

    @dl.workflow("core-fenced")
    def fenced(ctx):
        return ctx.step("fetch", slow_fetch)

    with pytest.raises(LeaseLostError) as err:
        a.start(fenced, run_id="fence")
    assert "worker-A" in str(err.value) and "'fence'" in str(err.value)
    assert results == ["A started", "completed"]
    run = engine.get("fence")
    assert run.status == "completed" and run.result == "B's answer"
    (entry,) = engine.store.load_entries("fence")
    assert entry.worker == "worker-B"


def test_a_stale_worker_cannot_change_the_runs_status(engine, clock):
    interrupted_run(engine, clock)
    store = engine.store
    assert store.try_lease("r", "worker-A", clock() + 30, clock())
    clock.advance(31)
    assert store.try_lease("r", "worker-B", clock() + 30, clock())      # A's lease expired
    with pytest.raises(LeaseLostError, match="worker-A"):
        store.update_run("r", owner="worker-A", status="completed")
    assert not store.renew_lease("r", "worker-A", clock() + 30)         # A cannot renew
    assert store.renew_lease("r", "worker-B", clock() + 30)
    assert store.get_run("r").status == "running"


def test_the_memory_store_fences_the_same_way(clock):
    store = dl.MemoryStore()
    engine = dl.Engine(store, clock)
    interrupted_run(engine, clock)
    assert store.try_lease("r", "worker-B", clock() + 30, clock())
    with pytest.raises(LeaseLostError):
        store.record_entry("r", dl.store.records.Entry(1, "step", "b", 1, '"x"', worker="worker-A"))
    with pytest.raises(LeaseLostError):
        store.update_run("r", owner="worker-A", status="completed")


def test_a_heartbeat_keeps_the_lease_of_a_live_worker_during_a_slow_step(store_path, stores):
    """Real time: a step takes several lease lengths. Another worker polls for work all
    along and never gets the run, because the heartbeat keeps renewing the lease."""
    lease = 0.6
    worker = dl.Engine(stores(store_path), lease_seconds=lease)
    stop, stolen = threading.Event(), []

    def other_worker():
        poller = dl.Engine(dl.SQLiteStore(store_path), lease_seconds=lease)
        while not stop.is_set():
            stolen.extend(run.run_id for run in poller.recover())
            time.sleep(0.05)
        poller.store.close()

    def slow():
        time.sleep(lease * 3)
        return CALLS("slow")

    @dl.workflow("core-slow-step")
    def slow_wf(ctx):
        return ctx.step("slow", slow)

    thread = threading.Thread(target=other_worker)
    thread.start()
    try:
        run = worker.start(slow_wf, run_id="slow")
    finally:
        stop.set()
        thread.join()
    assert run.status == "completed" and CALLS["slow"] == 1 and stolen == []
