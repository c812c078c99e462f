"""Budgets (steps, cost, deadline) live in the run's persisted state, so they accumulate
across every crash and resume; a step's cost counts once, when it executes."""

from core_support import *  # noqa: F401,F403
from core_support import Calls

TOTAL, LIMIT, CRASH_EVERY = 1000, 200, 50


@dl.workflow("core-budget-loop")
def loop(ctx, total):
    for i in range(total):
        ctx.step("work", WORK, i)
    return "finished all the work"


WORK = Calls()


def test_a_run_that_crashes_every_50_steps_stops_at_200_steps_in_total(engine, fresh, clock):
    WORK.counts.clear()
    crashes = [dl.faults.CrashAt("work", "after_checkpoint", occurrence=n)
               for n in range(CRASH_EVERY, TOTAL + 1, CRASH_EVERY)]
    executions = 0
    while True:
        executions += 1
        worker = dl.Engine(engine.store, clock, crash_at=crashes)    # a fresh worker each time
        try:
            if executions == 1:
                run = worker.start(loop, TOTAL, run_id="loop", budget=dl.Budget(max_steps=LIMIT))
            else:
                run = worker.resume("loop")
            break
        except dl.Crash:
            crashes = worker.crash_at
        assert executions < 50
    assert run.status == "halted"
    assert "max_steps=200" in run.halt_reason
    assert WORK.total == LIMIT and run.steps == LIMIT
    assert executions == LIMIT // CRASH_EVERY + 1          # crashed at 50, 100, 150, 200

    again = fresh().resume("loop")                          # a halted run stays halted
    assert again.status == "halted" and WORK.total == LIMIT
    assert fresh().recover() == []


@pytest.mark.crash
def test_the_same_with_real_kills_each_resume_in_a_fresh_process(engine, clock, store_path, folder):
    import core_workflows
    from core_support import python_path

    with pytest.raises(dl.Crash):          # create the run with its budget, before any work
        dl.Engine(engine.store, clock, crash_at=dl.faults.CrashAt("work", "before_step")).start(
            core_workflows.budget_loop, folder, TOTAL, run_id="killed-loop",
            budget=dl.Budget(max_steps=LIMIT))
    outcomes = []
    for n in range(CRASH_EVERY, LIMIT + 1, CRASH_EVERY):
        outcomes.append(dl.faults.run_in_child(
            store_path, "core_workflows", "core-budget-kill", run_id="killed-loop", resume=True,
            crash_at=dl.faults.CrashAt("work", "after_checkpoint", occurrence=n),
            python_path=python_path()))
    assert all(o.killed for o in outcomes)               # killed at 50, 100, 150, 200
    last = dl.faults.run_in_child(store_path, "core_workflows", "core-budget-kill",
                                  run_id="killed-loop", resume=True, python_path=python_path())
    assert last.run["status"] == "halted"
    assert dl.sim.World(folder).tools.calls("work") == LIMIT
    assert engine.get("killed-loop").steps == LIMIT


def test_the_bug_a_budget_counter_that_lives_in_the_attempt_never_stops_the_loop():
    """The same loop written naively: progress survives crashes (say, a cursor in a
    database), but the step counter is a local variable, reset by every crash."""
    position, executed, attempts = 0, 0, 0
    while position < TOTAL:
        attempts += 1
        steps_this_attempt = 0                   # the bug: the budget restarts each attempt
        try:
            while position < TOTAL:
                if steps_this_attempt >= LIMIT:
                    raise RuntimeError("budget exhausted")
                executed += 1
                position += 1
                steps_this_attempt += 1
                if executed % CRASH_EVERY == 0:
                    raise dl.Crash("worker died")
        except dl.Crash:
            continue
    assert executed == TOTAL and attempts == TOTAL // CRASH_EVERY


def test_a_steps_cost_is_counted_once_when_executed_never_on_replay(engine, fresh, clock, folder):
    world = dl.sim.World(folder, seed=1)

    @dl.workflow("core-costly")
    def costly(ctx, prompts):
        answers = []
        for prompt in prompts:
            answers.append(ctx.step(dl.Step("llm", cost=lambda r: r["cost"]), world.llm.complete, prompt))
            assert ctx.usage.cost == pytest.approx(sum(a["cost"] for a in answers))
        ctx.wait_for_signal("review", timeout=3600)
        return ctx.usage.cost

    run = engine.start(costly, ["a b c", "d e f g"], run_id="cost")
    spent = world.llm.total_cost()
    assert run.status == "waiting" and run.cost == pytest.approx(spent) and run.steps == 2
    for _ in range(3):                                   # replays add nothing
        assert fresh().resume("cost").cost == pytest.approx(spent)
    engine.signal("cost", "review", "ok")
    run = fresh().resume("cost")
    assert run.status == "completed" and run.result == pytest.approx(spent)
    assert world.llm.calls() == 2


def test_max_cost_halts_before_the_step_that_would_go_over(engine, fresh):
    @dl.workflow("core-spender")
    def spender(ctx):
        for i in range(10):
            ctx.step(dl.Step("spend", cost=0.3), lambda: i)
        return "spent it all"

    run = engine.start(spender, run_id="spend", budget=dl.Budget(max_cost=1.0))
    assert run.status == "halted" and "max_cost=1.0" in run.halt_reason
    assert run.steps == 4 and run.cost == pytest.approx(1.2)
    assert fresh().resume("spend").steps == 4


def test_a_deadline_halts_a_run_that_has_been_going_too_long(engine, fresh, clock):
    @dl.workflow("core-slowpoke")
    def slowpoke(ctx):
        ctx.step("first", lambda: 1)
        ctx.sleep(7200)
        ctx.step("second", lambda: 2)
        return "done"

    assert engine.start(slowpoke, run_id="slow", budget=dl.Budget(deadline=3600)).status == "sleeping"
    clock.advance(7200)
    run = fresh().resume("slow")
    assert run.status == "halted" and "deadline=3600" in run.halt_reason
    assert run.steps == 1


def test_the_budget_is_stored_with_the_run_and_a_new_one_lets_a_halted_run_continue(engine, fresh):
    calls = Calls()

    @dl.workflow("core-topped-up")
    def topped_up(ctx):
        for i in range(5):
            ctx.step("s", calls, f"s{i}")
        return ctx.budget.max_steps

    run = engine.start(topped_up, run_id="top", budget=dl.Budget(max_steps=3))
    assert run.status == "halted" and calls.total == 3
    run = fresh().resume("top", budget=dl.Budget(max_steps=10))
    assert run.status == "completed" and run.result == 10
    assert calls.total == 5 and run.steps == 5 and run.replayed == ["s", "s#2", "s#3"]
