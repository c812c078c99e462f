"""Waiting for a human (signals with a deadline), durable sleep, and recover().

A parked run holds no thread and no lease: start/resume return at once with status
"waiting" or "sleeping", and any process can continue it later.
"""

import subprocess

from core_support import *  # noqa: F401,F403
from core_support import Calls

from durable_lite.errors import RunFinishedError, UnknownRunError

DAY = 86_400


@dl.workflow("core-approval")
def approval(ctx, amount):
    quote = ctx.step("quote", lambda: {"amount": amount})
    decision = ctx.wait_for_signal("approved", timeout=DAY)
    if decision is None:
        return {"quote": quote, "outcome": "expired"}
    ctx.step("pay", lambda: "paid")
    return {"quote": quote, "outcome": "approved", "by": decision["by"]}


def test_a_wait_parks_the_run_and_returns_with_no_thread_or_lease_held(engine, clock):
    run = engine.start(approval, 40, run_id="ap")
    assert run.status == "waiting" and run.waiting_for == "approved"
    assert run.wake_at == clock() + DAY
    record = engine.store.get_run("ap")
    assert record.lease_owner is None                  # nobody holds it while it waits
    assert engine.resume("ap").status == "waiting"     # nothing arrived: parks again


def test_a_signal_is_recorded_durably_and_the_run_continues_with_its_payload(engine, fresh):
    engine.start(approval, 40, run_id="ap")
    engine.signal("ap", "approved", {"by": "ana"})
    assert engine.get("ap").status == "waiting"        # recorded, not yet acted on
    run = fresh().resume("ap")                         # any engine, any process
    assert run.status == "completed"
    assert run.result == {"quote": {"amount": 40}, "outcome": "approved", "by": "ana"}
    assert run.replayed == ["quote"] and run.executed == ["approved", "pay"]


def test_a_signal_sent_before_the_wait_is_kept_for_it(engine, clock):
    gate = {"open": False}

    def slow():
        if not gate["open"]:
            raise ConnectionError("busy")
        return "ready"

    @dl.workflow("core-early-signal")
    def early(ctx):
        ctx.step("slow", slow)
        return ctx.wait_for_signal("go", timeout=60)

    assert engine.start(early, run_id="early").status == "failed"
    engine.signal("early", "go", {"n": 1})             # arrives before the wait is reached
    gate["open"] = True
    assert engine.resume("early").result == {"n": 1}


def test_waits_in_a_loop_consume_signals_in_the_order_they_were_sent(engine):
    @dl.workflow("core-two-waits")
    def two_waits(ctx):
        return [ctx.wait_for_signal("note", timeout=60), ctx.wait_for_signal("note", timeout=60)]

    engine.start(two_waits, run_id="tw")
    engine.signal("tw", "note", "first")
    engine.signal("tw", "note", "second")
    assert engine.resume("tw").result == ["first", "second"]


def test_after_the_deadline_the_wait_returns_none(engine, clock):
    engine.start(approval, 40, run_id="late")
    clock.advance(DAY + 1)
    run = engine.resume("late")
    assert run.status == "completed" and run.result["outcome"] == "expired"
    with pytest.raises(RunFinishedError, match="'late'.*'approved'"):
        engine.signal("late", "approved", {"by": "too late"})


def test_a_signal_to_an_unknown_run_is_a_clear_error(engine):
    with pytest.raises(UnknownRunError, match="'ghost'"):
        engine.signal("ghost", "approved", {})


def test_a_timeout_is_required_and_must_be_positive(engine):
    @dl.workflow("core-no-timeout")
    def no_timeout(ctx):
        return ctx.wait_for_signal("x", timeout=0)

    run = engine.start(no_timeout, run_id="nt")
    assert run.status == "failed" and "'nt'" in run.error and "positive timeout" in run.error
    ctx = dl.Context(engine, engine.store.get_run("nt"), [], None)
    with pytest.raises(TypeError):
        ctx.wait_for_signal("x")                       # no default timeout at all


def test_a_signal_can_come_from_another_process(engine, store_path, tmp_path):
    engine.start(approval, 40, run_id="ap")
    script = ("import sys, durable_lite as dl\n"
              # on the same (fake) clock as the run: a signal counts if sent by the deadline
              "dl.Engine(dl.SQLiteStore(sys.argv[1]), dl.FakeClock()).signal('ap', 'approved', {'by': 'ops'})\n")
    subprocess.run([sys.executable, "-c", script, store_path], check=True)
    assert engine.resume("ap").result["by"] == "ops"


def test_durable_sleep_parks_until_its_wake_time_even_across_engines(engine, fresh, clock):
    calls = Calls()

    @dl.workflow("core-sleeper")
    def sleeper(ctx):
        ctx.step("before", calls, "before")
        ctx.sleep(3600)
        return ctx.step("after", calls, "after")

    run = engine.start(sleeper, run_id="zz")
    assert run.status == "sleeping" and run.wake_at == clock() + 3600
    clock.advance(1800)
    assert fresh().resume("zz").status == "sleeping"   # the wake time did not move
    clock.advance(1800)
    run = fresh().resume("zz")
    assert run.status == "completed" and calls.counts == {"before": 1, "after": 1}


def test_recover_resumes_exactly_the_runs_whose_time_has_come(engine, fresh, clock):
    @dl.workflow("core-nap")
    def nap(ctx, seconds):
        ctx.sleep(seconds)
        return "rested"

    @dl.workflow("core-interrupted")
    def interrupted(ctx):
        ctx.step("a", lambda: 1)
        return ctx.step("b", lambda: 2)

    @dl.workflow("core-broken")
    def broken(ctx):
        return ctx.step("x", lambda: 1 / 0)

    engine.start(approval, 1, run_id="wait-signalled")
    engine.start(approval, 2, run_id="wait-expires")
    engine.start(nap, DAY, run_id="nap-day")
    engine.start(nap, 5 * DAY, run_id="nap-week")
    engine.start(broken, run_id="failed")
    engine.start(approval, 4, run_id="done")
    engine.signal("done", "approved", {"by": "x"})
    engine.resume("done")
    engine.signal("wait-signalled", "approved", {"by": "ana"})   # in time; nobody resumes it
    with pytest.raises(dl.Crash):
        dl.Engine(engine.store, clock, crash_at=dl.faults.CrashAt("b", "before_step")).start(
            interrupted, run_id="crashed")
    clock.advance(1.5 * DAY)
    engine.start(approval, 3, run_id="wait-later")       # its deadline is after the jump
    clock.advance(0.5 * DAY)                             # two days after the first starts
    recovered = {run.run_id: run for run in fresh().recover()}
    assert set(recovered) == {"wait-signalled", "wait-expires", "nap-day", "crashed"}
    assert recovered["wait-signalled"].result["by"] == "ana"
    assert recovered["wait-expires"].result["outcome"] == "expired"
    assert recovered["nap-day"].result == "rested" and recovered["crashed"].result == 2
    assert engine.get("wait-later").status == "waiting"
    assert engine.get("nap-week").status == "sleeping"
    assert engine.get("failed").status == "failed"       # failures wait for an explicit resume
    assert fresh().recover() == []


def test_a_signal_cannot_look_like_a_timeout(engine):
    @dl.workflow("ll-bare-signal")
    def bare(ctx):
        return ctx.wait_for_signal("go", timeout=60)

    engine.start(bare, run_id="bare")
    with pytest.raises(ValueError, match="'go'.*'bare'.*None"):
        engine.signal("bare", "go", None)
    engine.signal("bare", "go")                 # no payload: the wait gets True, not None
    assert engine.resume("bare").result is True
