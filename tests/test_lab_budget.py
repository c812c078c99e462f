"""The budget meter and the budget plots (lesson 08)."""

import pytest

import durable_lite as dl
from durable_lite.lab.budget_meter import BudgetGauge, BudgetMeter, backoff_delays, plot_backoff, plot_spend


@dl.workflow("test-budget-loop", version=1)
def loop(ctx, turns):
    for turn in range(turns):
        ctx.step(dl.Step("think", cost=lambda r: r["cost"]), lambda t: {"turn": t, "cost": 0.01}, turn)
    return {"turns": turns}


def _engine():
    return dl.Engine(dl.MemoryStore(), dl.FakeClock())


def test_gauge_fractions_and_text():
    gauge = BudgetGauge(dl.Budget(max_steps=200, max_cost=0.5))
    assert gauge.steps_fraction == 0 and not gauge.over
    gauge.update(dl.Run("r", "w", 1, "running", steps=150, cost=0.25))
    assert gauge.steps_fraction == pytest.approx(0.75) and gauge.cost_fraction == pytest.approx(0.5)
    assert gauge.lines()[:2] == ["steps 150 / 200 (75%)", "cost $0.2500 / $0.50 (50%)"]
    gauge.update(dl.Run("r", "w", 1, "running", steps=300, cost=0.25))
    assert gauge.over
    assert gauge.samples == [(150, 0.25), (300, 0.25)]
    assert BudgetGauge(dl.Budget(max_steps=10)).cost_fraction is None


def test_meter_fills_while_the_run_executes_and_stops_at_the_halt():
    engine = _engine()
    budget = dl.Budget(max_steps=20, max_cost=1.0)
    meter = BudgetMeter(engine, "loop-1", budget).attach()
    assert meter.steps_bar.value == 0                  # the run does not exist yet: zeros
    run = engine.start(loop, 50, run_id="loop-1", budget=budget)
    assert run.status == "halted"
    assert meter.gauge.steps == 20 and meter.steps_bar.value == 20
    assert meter.cost_bar.value == pytest.approx(0.2)
    assert meter.steps_bar.bar_style == "danger"      # full
    assert meter.gauge.samples[:3] == [(1, 0.01), (2, 0.02), (3, 0.03)]
    meter.poll()
    assert "status halted" in meter.text.value and "max_steps=20" in meter.text.value
    assert repr(meter) == "BudgetMeter('loop-1': steps 20 / 20 (100%); cost $0.2000 / $1.00 (20%))"


def test_meter_counts_across_resumes_because_it_reads_the_store():
    engine = _engine()
    budget = dl.Budget(max_steps=30)
    engine.crash_at = dl.faults.CrashAt("think", "after_checkpoint", occurrence=12)
    with pytest.raises(dl.Crash):
        engine.start(loop, 50, run_id="loop-2", budget=budget)
    fresh = dl.Engine(engine.store, engine.clock)
    meter = BudgetMeter(fresh, "loop-2", budget)
    assert meter.gauge.steps == 12                      # what the first process did
    meter.attach()
    assert fresh.resume("loop-2").status == "halted"
    assert meter.gauge.steps == 30


def test_meter_shows_a_run_that_nothing_stopped_as_over_budget():
    engine = _engine()
    engine.start(loop, 30, run_id="loop-3")            # no budget at all
    meter = BudgetMeter(engine, "loop-3", dl.Budget(max_steps=10))
    assert meter.gauge.over
    assert meter.steps_bar.value == 10 and meter.steps_bar.bar_style == "danger"
    assert "over budget" in meter.text.value


def test_attach_keeps_the_previous_hook_and_detach_restores_it():
    engine = _engine()
    seen = []
    engine.on_step = lambda label, how: seen.append((label, how))
    meter = BudgetMeter(engine, "loop-4", dl.Budget(max_steps=100), every=5).attach()
    engine.start(loop, 12, run_id="loop-4")
    assert len(seen) == 12
    assert meter.polls == 1 + 2                         # the first draw, then steps 5 and 10
    meter.detach()
    assert engine.on_step is not None and engine.on_step.__name__ == "<lambda>"


def test_meter_needs_a_limit_to_draw():
    with pytest.raises(ValueError, match="max_steps or max_cost"):
        BudgetMeter(_engine(), "x", dl.Budget(deadline=60))


def test_widget_bundle_is_short_and_stable():
    meter = BudgetMeter(_engine(), "nothing-yet", dl.Budget(max_steps=5))
    bundle = meter._repr_mimebundle_()
    assert bundle["text/plain"] == "BudgetMeter('nothing-yet': steps 0 / 5 (0%))"
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_backoff_without_jitter_is_the_ceiling_and_jitter_stays_under_it():
    retry = dl.Retry(max_attempts=8, initial=1.0, multiplier=2.0, cap=30.0)
    steady = backoff_delays(dl.Retry(8, 1.0, 2.0, 30.0, jitter=False), attempts=8, clients=3)
    assert steady[0] == [1, 2, 4, 8, 16, 30, 30] and steady[0] == steady[1] == steady[2]
    jittered = backoff_delays(retry, attempts=8, clients=20, seed=4)
    assert all(0 <= d <= c for row in jittered for d, c in zip(row, steady[0]))
    assert len({row[3] for row in jittered}) == 20     # spread out, not in lockstep
    assert jittered == backoff_delays(retry, attempts=8, clients=20, seed=4)


def test_plots_draw():
    import matplotlib
    matplotlib.use("Agg")
    ax = plot_backoff(dl.Retry(max_attempts=6), attempts=6, clients=10)
    assert len(ax.lines) == 1 and len(ax.collections) == 10
    ax_steps, ax_cost = plot_spend({"a": [(1, 150, 0.1), (2, 300, 0.2)], "b": [(1, 150, 0.1), (2, 200, 0.13)]},
                                   limit_steps=200)
    assert len(ax_steps.lines) == 3 and len(ax_cost.lines) == 2


def test_exported_from_the_lab():
    assert dl.lab.BudgetMeter is BudgetMeter and dl.lab.BudgetGauge is BudgetGauge


def test_the_meter_names_its_parts_with_stable_css_classes():
    meter = BudgetMeter(_engine(), "x", dl.Budget(max_steps=5, max_cost=0.5))
    parts = {"dl-budget-meter": meter.panel, "dl-budget-steps": meter.steps_bar,
             "dl-budget-cost": meter.cost_bar, "dl-budget-text": meter.text}
    for name, widget in parts.items():
        assert name in widget._dom_classes, name
