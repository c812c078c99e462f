"""One Engine shared by threads: a widget callback and a notebook cell, or a lesson's
worker threads. Threads take turns on each run (no step executes twice because two
threads drove the same run), and on the store (no transaction is torn by another
thread's statement). On both stores.
"""

import queue
import threading
import time

from core_support import *  # noqa: F401,F403

from durable_lite.errors import LeaseHeldError

executions = []                 # (run id, step): list.append is atomic, so threads may share it


@pytest.fixture(autouse=True)
def reset_executions():
    executions.clear()


def executed(run_id, step, seconds=0.0):
    executions.append((run_id, step))
    time.sleep(seconds)
    return step


def lookup(folder, order_id):
    time.sleep(0.02)                               # long enough for the other thread to arrive
    return dl.sim.World(folder).orders.lookup(order_id)


def email(folder, to):
    return dl.sim.World(folder).mailer.send(to, "Your refund")   # no key: every call sends


@dl.workflow("threads-notify")
def notify(ctx, folder, order_id):
    order = ctx.step("lookup", lookup, folder, order_id)
    return ctx.step("email", email, folder, order["email"])["message_id"]


def test_two_threads_starting_one_run_id_send_one_email(any_store, clock, folder):
    engine = dl.Engine(any_store, clock)
    barrier, results, errors = threading.Barrier(2), [], []

    def start():
        barrier.wait()
        try:
            results.append(engine.start(notify, folder, "A-17", run_id="notify-A-17"))
        except BaseException as exc:          # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and len(results) == 2
    assert {r.status for r in results} == {"completed"}
    assert results[0].result == results[1].result
    assert dl.sim.World(folder).mailer.count() == 1
    assert [e.label for e in any_store.load_entries("notify-A-17")] == ["lookup", "email"]


@dl.workflow("threads-approval")
def approval(ctx, n):
    ctx.step("quote", executed, ctx.run_id, "quote")
    answer = ctx.wait_for_signal("approved", timeout=3600)
    ctx.step("pay", executed, ctx.run_id, "pay")
    return [n, answer]


RUNS, THREADS = 400, 8


def signalled_runs(engine):
    for i in range(RUNS):
        assert engine.start(approval, i, run_id=f"ap-{i:03d}").status == "waiting"
        engine.signal(f"ap-{i:03d}", "approved", i)
    executions.clear()


def check_every_run_completed_once(engine):
    runs = engine.runs()
    assert len(runs) == RUNS
    assert {r.status for r in runs} == {"completed"}, [r for r in runs if r.status != "completed"][:3]
    assert all(r.result == [int(r.run_id[3:]), int(r.run_id[3:])] for r in runs)
    assert sorted(executions) == sorted((f"ap-{i:03d}", "pay") for i in range(RUNS))


def in_threads(target, n=THREADS):
    errors = []

    def guarded():
        try:
            target()
        except BaseException as exc:          # noqa: BLE001 - reported below
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=guarded) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    return errors


def test_eight_threads_resuming_400_signalled_runs_on_one_engine(any_store, clock):
    engine = dl.Engine(any_store, clock)
    signalled_runs(engine)
    todo = queue.Queue()
    for i in range(RUNS):
        todo.put(f"ap-{i:03d}")
        todo.put(f"ap-{(i * 7) % RUNS:03d}")      # every run is resumed twice, in two orders

    def worker():
        while True:
            try:
                run_id = todo.get_nowait()
            except queue.Empty:
                return
            engine.resume(run_id)

    assert in_threads(worker) == []
    check_every_run_completed_once(engine)


def test_eight_threads_recovering_at_once_on_one_engine(any_store, clock):
    engine = dl.Engine(any_store, clock)
    signalled_runs(engine)
    assert in_threads(engine.recover) == []
    check_every_run_completed_once(engine)


def test_a_step_that_resumes_its_own_run_gets_an_error_not_a_deadlock(eng):
    outcome = []

    def resume_myself(run_id):
        try:
            eng.resume(run_id)
        except LeaseHeldError as exc:
            outcome.append(str(exc))
        return "went on"

    @dl.workflow("threads-self-resume")
    def wf(ctx):
        return ctx.step("again", resume_myself, ctx.run_id)

    done = []
    thread = threading.Thread(target=lambda: done.append(eng.start(wf, run_id="self")))
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "start() deadlocked"
    assert done[0].status == "completed" and len(outcome) == 1
    assert "'self'" in outcome[0] and "this thread" in outcome[0]
    assert [r.run_id for r in eng.recover()] == []       # recover() from a step: nothing to take


def test_invalidate_from_another_thread_waits_for_the_running_execution(any_store, clock):
    engine = dl.Engine(any_store, clock)
    inside, release = threading.Event(), threading.Event()

    def slow():
        inside.set()
        release.wait(10)
        return "slow"

    @dl.workflow("threads-invalidate")
    def wf(ctx):
        first = ctx.step("first", lambda: "first")
        return [first, ctx.step("slow", slow)]

    started = []
    runner = threading.Thread(target=lambda: started.append(engine.start(wf, run_id="inv")))
    runner.start()
    assert inside.wait(10)
    discarded = []
    other = threading.Thread(target=lambda: discarded.append(engine.invalidate("inv", "first")))
    other.start()
    time.sleep(0.1)
    assert discarded == []                        # waiting for the execution, not cutting under it
    release.set()
    runner.join(10)
    other.join(10)
    assert started[0].status == "completed" and discarded == [["first", "slow"]]
    assert any_store.load_entries("inv") == [] and engine.get("inv").status == "running"
