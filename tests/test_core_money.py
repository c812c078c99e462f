"""Money adds up exactly: a run's cost is the correctly rounded sum of its steps' costs.

Adding floats one by one rounds at every addition, so a running total depends on the
order of the additions and, since Python 3.12 changed how `sum()` adds floats, on the
Python version: costs that print $0.0062 summed one way print $0.0063 summed another.
durable_lite keeps the exact sum (what `math.fsum` computes) wherever it counts cost, so
the figure is the same live and on replay, in `get()`, and on every Python version.
"""

import math

from core_support import *  # noqa: F401,F403

# Five model calls whose one-by-one float total (0.0062499999999999995, printed $0.0062)
# is not their exact sum (0.00625, printed $0.0063). Python 3.11's sum() gives the first,
# Python 3.13's sum() the second.
CALLS = [0.001362, 0.000786, 0.001201, 0.001051, 0.00185]
TENTHS = [0.1] * 10        # one by one: 0.9999999999999999; exactly: 1.0


def one_by_one(costs):
    total = 0.0
    for cost in costs:
        total += cost
    return total


@pytest.mark.parametrize("costs", [CALLS, TENTHS], ids=["calls", "tenths"])
def test_a_runs_cost_is_the_exact_sum_live_in_get_and_on_replay(eng, clock, costs):
    exact = math.fsum(costs)
    assert one_by_one(costs) != exact                          # the case that matters

    @dl.workflow("money-sum")
    def wf(ctx):
        seen = []
        for i, cost in enumerate(costs):
            ctx.step(dl.Step("call", cost=cost), lambda i=i: i)
            seen.append(ctx.usage.cost)
        ctx.sleep(10)                                          # park, so the end is a replay
        return seen

    run = eng.start(wf, run_id="sum")
    assert run.status == "sleeping" and run.cost == exact and eng.get("sum").cost == exact
    clock.advance(10)
    resumed = again(eng).resume("sum")
    assert resumed.status == "completed" and resumed.cost == exact
    assert resumed.result == [math.fsum(costs[:i + 1]) for i in range(len(costs))]
    assert f"{resumed.cost:.4f}" == f"{exact:.4f}"


def test_work_discarded_by_invalidate_still_counts_exactly(eng):
    @dl.workflow("money-invalidate")
    def wf(ctx):
        for i, cost in enumerate(CALLS):
            ctx.step(dl.Step(f"call{i}", cost=cost), lambda i=i: i)
        return ctx.usage.cost

    run = eng.start(wf, run_id="inv")
    assert run.result == run.cost == math.fsum(CALLS)
    eng.invalidate("inv", "call3")
    rerun = eng.resume("inv")
    everything = CALLS + CALLS[3:]                             # call3 and call4 were paid twice
    assert rerun.cost == eng.get("inv").cost == rerun.result
    assert rerun.cost == pytest.approx(math.fsum(everything), abs=1e-15)


def test_a_cost_budget_compares_the_exact_sum(eng):
    @dl.workflow("money-budget")
    def wf(ctx):
        for i in range(20):
            ctx.step(dl.Step("call", cost=0.1), lambda i=i: i)
        return "never"

    run = eng.start(wf, run_id="budget", budget=dl.Budget(max_cost=1.0))
    # ten calls cost exactly 1.0, which reaches the limit (one by one: 0.9999999999999999)
    assert run.status == "halted" and run.steps == 10 and run.cost == 1.0
    assert "cost so far 1.0000" in run.halt_reason
