"""`engine.invalidate`: it discards the named step and every entry after it, says so in what
it returns (steps, waits and sleeps alike), keeps the old values in the event log, and
leaves the run ready for the next resume or recover().
"""

from core_support import *  # noqa: F401,F403
from core_support import Calls


@dl.workflow("edge-approve")
def approve(ctx):
    quote = ctx.step("quote", lambda: 40)
    answer = ctx.wait_for_signal("ok", timeout=100)
    ctx.sleep(5, name="cool-off")
    return [quote, answer, ctx.step("pay", lambda: "paid")]


def test_invalidate_names_every_wait_it_discards_and_logs_its_value(eng, clock):
    eng.start(approve, run_id="inv")
    eng.signal("inv", "ok", {"by": "ana"})
    clock.advance(10)
    assert eng.resume("inv").status == "sleeping"
    clock.advance(10)
    assert eng.resume("inv").result == [40, {"by": "ana"}, "paid"]
    discarded = eng.invalidate("inv", "quote")
    assert discarded == ["quote", "ok", "cool-off", "pay"]
    logged = [(e.name, e.detail) for e in eng.events("inv") if e.kind == "invalidated"]
    assert ("ok", '{"by":"ana"}') in logged and ("quote", "40") in logged
    run = eng.resume("inv")
    assert run.status == "waiting" and run.executed == ["quote"]   # the approval is asked again


def test_invalidating_a_waiting_run_makes_it_due_at_once(eng, clock):
    calls = Calls()

    @dl.workflow("edge-invalidate-waiting")
    def wf(ctx):
        quote = ctx.step("quote", calls, "quote")
        return [quote, ctx.wait_for_signal("ok", timeout=100)]

    assert eng.start(wf, run_id="iw").status == "waiting"
    assert eng.invalidate("iw", "quote") == ["quote", "ok"]
    record = eng.store.get_run("iw")
    assert record.status == "running" and record.waiting_for is None and record.wake_at is None
    clock.advance(1)
    [run] = eng.recover()                    # not only after the old deadline
    assert run.status == "waiting" and run.executed == ["quote"] and calls["quote"] == 2
    assert run.wake_at == clock() + 100


def test_invalidate_can_retry_a_failed_step_the_workflow_caught(eng):
    state = {"down": True}

    def primary():
        if state["down"]:
            raise ValueError("down")
        return "primary"

    @dl.workflow("edge-invalidate-caught")
    def wf(ctx):
        try:
            return ctx.step("primary", primary)
        except dl.StepFailed:
            return "fallback"

    assert eng.start(wf, run_id="ic").result == "fallback"
    state["down"] = False
    assert eng.invalidate("ic", "primary") == ["primary"]
    assert eng.resume("ic").result == "primary"


def test_invalidate_waits_while_another_worker_executes_the_run(eng):
    other = again(eng)
    refused = []

    def meddle():
        with pytest.raises(dl.LeaseHeldError, match="'busy'"):
            other.invalidate("busy", "a")
        refused.append(True)
        return "b"

    @dl.workflow("edge-invalidate-busy")
    def wf(ctx):
        return [ctx.step("a", lambda: "a"), ctx.step("b", meddle), ctx.step("c", lambda: "c")]

    run = eng.start(wf, run_id="busy")
    assert refused and run.status == "completed" and run.result == ["a", "b", "c"]
    assert [e.position for e in eng.store.load_entries("busy")] == [0, 1, 2]
    assert other.invalidate("busy", "b") == ["b", "c"]      # once it has stopped, it may


def test_invalidated_work_still_counts_against_the_budget(eng):
    @dl.workflow("edge-invalidate-budget")
    def priced(ctx):
        return [ctx.step(dl.Step(f"call-{i}", cost=0.25), lambda: i) for i in range(3)]

    run = eng.start(priced, run_id="inv-budget", budget=dl.Budget(max_steps=5))
    assert (run.status, run.steps, run.cost) == ("completed", 3, 0.75)
    eng.invalidate("inv-budget", "call-0")               # throw all three away...
    assert (eng.get("inv-budget").steps, eng.get("inv-budget").cost) == (3, 0.75)
    run = eng.resume("inv-budget")                      # ...and redo them: 6 > 5
    assert run.status == "halted" and "max_steps=5" in run.halt_reason
    assert (run.steps, run.cost) == (5, 1.25)
