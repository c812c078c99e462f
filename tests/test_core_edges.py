"""Edge cases of the engine's promises, on both stores: MemoryStore and SQLiteStore must
behave the same in everything but surviving the process.

Each test states one promise and a scenario at its edge: a workflow that returns a value
JSON cannot hold, signals that arrive early or twice, a resume before a deadline, a halted
run that is signalled, invalidating a run that waits, and so on.
"""

import threading
import time

from core_support import *  # noqa: F401,F403
from core_support import Calls

from durable_lite.errors import RunArgumentsMismatch


# results are JSON, and replay returns what the first execution returned -------------------

@dl.workflow("edge-shapes")
def shapes(ctx, *, first, second):
    pair = ctx.step("pair", lambda: (1, 2))
    table = ctx.step("table", lambda: {1: "one", "two": (2,)})
    return {"pair": pair, "table": table, "first": first, "second": second}


def test_tuples_and_int_keys_read_the_same_live_and_on_replay(eng):
    live = eng.start(shapes, run_id="sh", first=1, second=2)
    replay = again(eng).start(shapes, run_id="sh", second=2, first=1)   # kwargs order is free
    expected = {"pair": [1, 2], "table": {"1": "one", "two": [2]}, "first": 1, "second": 2}
    assert live.result == replay.result == expected
    assert again(eng).resume("sh").result == expected
    with pytest.raises(RunArgumentsMismatch, match="'sh'"):
        eng.start(shapes, run_id="sh", first=1, second=3)


@dl.workflow("edge-returns-a-set")
def returns_a_set(ctx):
    ctx.step("fetch", lambda: [1, 2])
    return {1, 2}


@dl.workflow("edge-simple")
def simple(ctx, value):
    return ctx.step("only", lambda: value)


def test_a_workflow_returning_non_json_fails_its_run_and_does_not_block_recover(eng, clock):
    run = eng.start(returns_a_set, run_id="set")
    assert run.status == "failed"
    assert "the workflow of run 'set' returned a set" in run.error
    # an interrupted run next to it is still recovered
    crashing = again(eng, crash_at=dl.faults.CrashAt("only", "before_step"))
    with pytest.raises(dl.Crash):
        crashing.start(simple, 5, run_id="other")
    assert [(r.run_id, r.status, r.result) for r in eng.recover()] == [("other", "completed", 5)]
    assert eng.get("set").status == "failed"


@pytest.mark.parametrize("name", ["", 3, None])
def test_a_step_name_must_be_a_non_empty_string(eng, name):
    @dl.workflow("edge-bad-name")
    def bad_name(ctx):
        return ctx.step(name, lambda: 1)

    run = eng.start(bad_name, run_id="bad-name")
    assert run.status == "failed"
    assert "'bad-name'" in run.error and "non-empty string" in run.error


# crashes raised by a step's own code ------------------------------------------------------

def test_a_step_that_raises_crash_leaves_the_run_resumable(eng):
    calls = Calls()
    state = {"crash": True}

    def fragile():
        calls("fragile")
        if state["crash"]:
            state["crash"] = False
            raise dl.Crash("power cut inside the step")
        return "done"

    @dl.workflow("edge-crash-in-step")
    def wf(ctx):
        ctx.step("before", calls, "before")
        return ctx.step("fragile", fragile)

    with pytest.raises(dl.Crash):
        eng.start(wf, run_id="cr")
    record = eng.store.get_run("cr")
    assert record.status == "running" and record.lease_owner is None
    run = again(eng).resume("cr")
    assert run.status == "completed" and run.result == "done"
    assert calls["before"] == 1 and calls["fragile"] == 2


@pytest.mark.parametrize("when", [dl.faults.AFTER_EFFECT, dl.faults.AFTER_CHECKPOINT])
def test_an_in_process_crash_records_no_step_of_a_finally_block(eng, when):
    """A SIGKILL runs no `finally:`; Python unwinds the stack for dl.Crash, so the workflow's
    cleanup does run. Its ctx calls must raise the crash again and record nothing."""
    calls = Calls()
    seen = []

    @dl.workflow("edge-crash-cleanup")
    def wf(ctx):
        try:
            ctx.step("hold", calls, "hold")
            ctx.step("charge", calls, "charge")
        finally:
            for call in (lambda: ctx.step("cleanup", calls, "cleanup"), ctx.now, ctx.uuid):
                try:
                    call()
                except BaseException as exc:       # noqa: B036 - what a careless cleanup does
                    seen.append(type(exc).__name__)
        return "done"

    crash = dl.faults.CrashAt("charge", when)
    with pytest.raises(dl.Crash):
        dl.Engine(eng.store, eng.clock, worker="first", crash_at=crash).start(wf, run_id="cc")
    assert seen == ["Crash"] * 3 and calls["cleanup"] == 0
    recorded = ["hold"] + (["charge"] if when == dl.faults.AFTER_CHECKPOINT else [])
    assert [e.label for e in eng.store.load_entries("cc")] == recorded
    assert eng.store.get_run("cc").status == "running"

    run = again(eng).resume("cc")                  # the fresh process: its finally is real
    assert run.status == "completed" and seen == ["Crash"] * 3
    assert [e.label for e in eng.store.load_entries("cc")] == \
        ["hold", "charge", "cleanup", "now", "uuid"]
    assert calls["cleanup"] == 1 and calls["charge"] == (2 if when == dl.faults.AFTER_EFFECT else 1)


def test_a_workflow_that_swallows_a_crash_still_stops_there(eng):
    calls = Calls()

    @dl.workflow("edge-crash-swallowed")
    def wf(ctx):
        try:
            ctx.step("charge", calls, "charge")
        except BaseException:                       # noqa: B036 - a crash cannot be caught
            return "carried on"
        return "done"

    crash = dl.faults.CrashAt("charge", dl.faults.AFTER_CHECKPOINT)
    with pytest.raises(dl.Crash):
        dl.Engine(eng.store, eng.clock, crash_at=crash).start(wf, run_id="sw")
    assert eng.store.get_run("sw").status == "running"
    assert again(eng).resume("sw").result == "done" and calls["charge"] == 1


def test_a_run_that_parks_runs_no_step_of_a_finally_block(eng):
    calls = Calls()

    @dl.workflow("edge-park-cleanup")
    def wf(ctx):
        try:
            ctx.step("hold", calls, "hold")
            return ctx.wait_for_signal("approved", timeout=3600)
        finally:
            ctx.step("release", calls, "release")

    assert eng.start(wf, run_id="pk").status == "waiting"
    assert calls["release"] == 0                    # parked: the run is not over
    assert [e.label for e in eng.store.load_entries("pk")] == ["hold", "approved"]
    eng.signal("pk", "approved", "yes")
    run = eng.resume("pk")
    assert run.status == "completed" and run.result == "yes" and calls["release"] == 1


# signals and waits -------------------------------------------------------------------------

@dl.workflow("edge-signal-loop")
def signal_loop(ctx, rounds):
    seen = []
    for i in range(rounds):
        seen.append(ctx.wait_for_signal("go", timeout=100))
        ctx.step("after", lambda i=i: i)
    return seen


def test_two_signals_with_one_name_feed_two_waits_in_order_each_once(eng, clock):
    assert eng.start(signal_loop, 3, run_id="loop").status == "waiting"
    for payload in ("a", "b", "c", "d"):
        eng.signal("loop", "go", payload)
    run = again(eng).resume("loop")
    assert run.result == ["a", "b", "c"]
    assert run.executed == ["go", "after", "go#2", "after#2", "go#3", "after#3"]
    assert eng.store.pending_signal("loop", "go")[1] == '"d"'       # the extra one is kept
    assert again(eng).resume("loop").result == ["a", "b", "c"]     # completed: not consumed again
    assert eng.store.pending_signal("loop", "go")[1] == '"d"'


def test_a_signal_sent_while_the_run_is_running_is_consumed_at_its_wait(eng):
    @dl.workflow("edge-signal-midway")
    def midway(ctx):
        ctx.step("notify", lambda: eng.signal("mid", "go", {"early": True}))
        return ctx.wait_for_signal("go", timeout=10)

    run = eng.start(midway, run_id="mid")
    assert run.status == "completed" and run.result == {"early": True}
    assert eng.store.pending_signal("mid", "go") is None


def test_resuming_a_waiting_run_before_its_deadline_keeps_the_deadline(eng, clock):
    first = eng.start(signal_loop, 1, run_id="dl")
    deadline = first.wake_at
    for _ in range(3):
        clock.advance(30)
        run = again(eng).resume("dl")
        assert run.status == "waiting" and run.wake_at == deadline
        assert eng.store.get_run("dl").wake_at == deadline
    clock.advance(20)                                  # exactly at the deadline
    run = again(eng).resume("dl")
    assert run.status == "completed" and run.result == [None]


def test_a_signal_sent_after_the_deadline_does_not_answer_the_wait(eng, clock):
    eng.start(signal_loop, 1, run_id="late")
    clock.advance(150)                          # the deadline passed at 100; nobody resumed
    eng.signal("late", "go", "too late")
    run = again(eng).resume("late")
    assert run.result == [None]                 # as if a worker had resumed it at 100
    assert eng.store.pending_signal("late", "go")[1] == '"too late"'   # kept, not consumed


def test_a_signal_sent_before_the_deadline_answers_the_wait_even_if_resumed_after(eng, clock):
    eng.start(signal_loop, 1, run_id="in-time")
    clock.advance(100)                          # exactly at the deadline: still in time
    eng.signal("in-time", "go", "just in time")
    clock.advance(500)
    assert [r.result for r in again(eng).recover()] == [["just in time"]]


def test_a_halted_run_keeps_a_signal_for_when_it_gets_a_new_budget(eng):
    @dl.workflow("edge-halted-signal")
    def wf(ctx):
        ctx.step("one", lambda: 1)
        ctx.step("two", lambda: 2)
        return ctx.wait_for_signal("ok", timeout=50)

    assert eng.start(wf, run_id="hs", budget=dl.Budget(max_steps=1)).status == "halted"
    eng.signal("hs", "ok", "yes")
    assert eng.recover() == [] and eng.resume("hs").status == "halted"
    run = eng.resume("hs", budget=dl.Budget(max_steps=5))
    assert run.status == "completed" and run.result == "yes" and run.executed == ["two", "ok"]


def test_a_budget_deadline_that_passes_while_parked_halts_before_the_next_step(eng, clock):
    @dl.workflow("edge-deadline-parked")
    def wf(ctx):
        ctx.step("a", lambda: 1)
        answer = ctx.wait_for_signal("go", timeout=1000)
        ctx.step("b", lambda: 2)
        return answer

    eng.start(wf, run_id="dp", budget=dl.Budget(deadline=100))
    clock.advance(500)
    eng.signal("dp", "go", 1)
    run = again(eng).resume("dp")
    assert run.status == "halted" and "deadline=100" in run.halt_reason
    assert run.executed == ["go"]          # the signal is recorded, the step is not run


# budgets ------------------------------------------------------------------------------------

def test_cost_accumulates_across_resumes_and_is_counted_once(eng, clock):
    @dl.workflow("edge-cost")
    def wf(ctx):
        for i in range(4):
            ctx.step(dl.Step("call", cost=0.4), lambda i=i: i)
            ctx.sleep(10)
        return ctx.usage.cost

    run = eng.start(wf, run_id="cost", budget=dl.Budget(max_cost=1.0))
    while run.status == "sleeping":
        clock.advance(10)
        run = again(eng).resume("cost")
    assert run.status == "halted" and run.steps == 3
    assert run.cost == pytest.approx(1.2)


# failures and retries ----------------------------------------------------------------------

def test_a_no_retry_error_fails_at_once_and_a_resume_retries_only_that_step(eng):
    calls = Calls()
    state = {"fail": True}

    def charge():
        calls("charge")
        if state.pop("fail", False):
            raise KeyError("card")
        return "charged"

    @dl.workflow("edge-no-retry")
    def wf(ctx):
        ctx.step("lookup", calls, "lookup")
        return ctx.step(dl.Step("charge", retry=dl.Retry(5, no_retry=(KeyError,))), charge)

    run = eng.start(wf, run_id="nr")
    assert run.status == "failed" and "after 1 attempt(s)" in run.error
    run = again(eng).resume("nr")
    assert run.status == "completed" and run.executed == ["charge"] and run.replayed == ["lookup"]
    assert calls["lookup"] == 1 and calls["charge"] == 2


def test_a_caught_step_failure_replays_as_the_same_fallback(eng):
    calls = Calls()

    def broken():
        calls("broken")
        raise ValueError("down")

    @dl.workflow("edge-fallback")
    def wf(ctx):
        try:
            got = ctx.step("primary", broken)
        except dl.StepFailed as failed:
            got = f"fallback after {failed.attempts}"
        return [got, ctx.step("next", calls, "next")]

    first = eng.start(wf, run_id="fb")
    later = again(eng).resume("fb")
    assert first.result == later.result == ["fallback after 1", "next-done"]
    assert calls["broken"] == 1 and calls["next"] == 1


def test_a_step_timeout_is_retried_then_fails_the_run(eng):
    spec = dl.Step("slow", timeout=0.05, retry=dl.Retry(2, initial=0.01, jitter=False))
    # The step cannot finish before its timeout however busy the machine (a 0.3 s sleep
    # once did, under a load of 10): it waits for an event set only after the run ended.
    released = threading.Event()

    @dl.workflow("edge-timeout")
    def wf(ctx):
        return ctx.step(spec, released.wait, 120)

    try:
        run = eng.start(wf, run_id="to")
    finally:
        released.set()                      # the abandoned attempts' threads end now
    assert run.status == "failed"
    assert "after 2 attempt(s)" in run.error and "StepTimeout" in run.error
    assert [h["attempts"] for h in eng.history("to")] == [2]


# recover ---------------------------------------------------------------------------------------

def test_recover_handles_many_runs_in_mixed_states(eng, clock):
    crash = again(eng, crash_at=dl.faults.CrashAt("only", "after_effect"))
    with pytest.raises(dl.Crash):
        crash.start(simple, 1, run_id="r-crashed")
    eng.start(simple, 2, run_id="r-done")
    eng.start(signal_loop, 1, run_id="r-wait-signal")
    eng.signal("r-wait-signal", "go", "hi")
    eng.start(signal_loop, 1, run_id="r-wait-idle")
    eng.start(returns_a_set, run_id="r-failed")
    eng.start(simple, 3, run_id="r-halted", budget=dl.Budget(max_steps=0))
    got = {r.run_id: (r.status, r.result) for r in eng.recover()}
    assert got == {"r-crashed": ("completed", 1), "r-wait-signal": ("completed", ["hi"])}
    clock.advance(100)
    assert {r.run_id: r.status for r in eng.recover()} == {"r-wait-idle": "completed"}
    assert {r.run_id: r.status for r in eng.runs()} == {
        "r-crashed": "completed", "r-done": "completed", "r-wait-signal": "completed",
        "r-wait-idle": "completed", "r-failed": "failed", "r-halted": "halted"}


def test_recover_leaves_a_run_another_live_worker_holds_without_asking_the_store(eng, clock,
                                                                               monkeypatch):
    """Workers on one queue each recover() every round while the others execute their
    runs: a lease that is another live worker's is read from the run and left alone, with
    no attempt to take it; once it has lapsed, the run is recovered."""
    from durable_lite.lease import HOST
    crash = again(eng, crash_at=dl.faults.CrashAt("only", "after_effect"))
    with pytest.raises(dl.Crash):
        crash.start(simple, 1, run_id="r-held")
    other = f"{HOST}:{os.getpid()}:another-worker"          # alive: this very process
    assert eng.store.try_lease("r-held", other, clock() + 60, clock())
    asked = []
    take = eng.store.try_lease
    monkeypatch.setattr(eng.store, "try_lease", lambda run_id, *rest, **kw:
                        asked.append(run_id) or take(run_id, *rest, **kw))
    assert eng.recover() == [] and asked == []
    clock.advance(61)
    assert [(r.run_id, r.status) for r in eng.recover()] == [("r-held", "completed")]
    assert asked == ["r-held"]


def test_two_engines_starting_one_run_id_in_turn_execute_each_step_once(eng):
    calls = Calls()

    @dl.workflow("edge-twice")
    def wf(ctx):
        return [ctx.step("a", calls, "a"), ctx.step("b", calls, "b")]

    crash = again(eng, crash_at=dl.faults.CrashAt("b", "before_step"))
    with pytest.raises(dl.Crash):
        crash.start(wf, run_id="tw")
    run = again(eng).start(wf, run_id="tw")
    assert run.result == ["a-done", "b-done"] and run.replayed == ["a"] and run.executed == ["b"]
    assert again(eng).start(wf, run_id="tw").result == ["a-done", "b-done"]
    assert calls.counts == {"a": 1, "b": 1}


# a step's cost --------------------------------------------------------------------------------

# (A number that is not a cost is refused when the dl.Step is made: test_core_options.py.
# A function of the result can only be judged once the step has run.)
@pytest.mark.parametrize("cost", [lambda r: r["usd"], lambda r: None, lambda r: float("nan"),
                                  lambda r: float("inf"), lambda r: -1.0],
                         ids=["raises", "none", "nan", "inf", "negative"])
def test_a_cost_that_is_not_a_finite_non_negative_number_is_a_recorded_step_failure(eng, cost):
    """The model was called (and paid) already: the step's failure is recorded in place of
    its result, so the workflow may handle it, and a replay meets the same failure."""
    @dl.workflow("edge-bad-cost")
    def wf(ctx):
        try:
            ctx.step(dl.Step("llm", cost=cost), lambda: {"text": "hi"})
        except dl.StepFailed as failed:
            return failed.error
        return "counted"

    run = eng.start(wf, run_id="bc")
    assert run.status == "completed"
    assert "step 'llm' of run 'bc'" in run.result and "cost" in run.result
    assert [e.kind for e in eng.store.load_entries("bc")] == ["error"] and run.cost == 0
    assert again(eng).resume("bc").result == run.result
