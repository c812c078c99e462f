"""The reliability arithmetic, its simulation, and the ReliabilityExplorer widget (lesson 05)."""

import math

import pytest

from durable_lite.lab import reliability as rel


# the formulas -------------------------------------------------------------------------------
def test_six_steps_at_95_percent_finish_about_three_times_in_four():
    assert rel.first_try_rate(0.95, 6) == pytest.approx(0.7351, abs=1e-4)


@pytest.mark.parametrize("p,n", [(0.95, 6), (0.8, 20), (0.5, 3)])
def test_one_attempt_is_the_first_try_rate_for_both_strategies(p, n):
    assert rel.per_step_retry_rate(p, n, 1) == pytest.approx(p ** n)
    assert rel.restart_rate(p, n, 1) == pytest.approx(p ** n)
    assert rel.expected_executions(rel.DURABLE, p, n, 1) == pytest.approx(
        rel.expected_executions(rel.RESTART, p, n, 1))


@pytest.mark.parametrize("p,n,k", [(0.95, 6, 2), (0.9, 10, 3), (0.8, 20, 3), (0.99, 50, 2)])
def test_per_step_retry_beats_restarting_the_whole_run(p, n, k):
    assert rel.per_step_retry_rate(p, n, k) > rel.restart_rate(p, n, k)


def test_more_attempts_never_hurt():
    rates = [rel.per_step_retry_rate(0.9, 10, k) for k in range(1, 7)]
    assert rates == sorted(rates)


def test_expected_executions_by_hand():
    # per-step, n=1: 1 + (1-p) + ... + (1-p)^(k-1)
    assert rel.expected_executions(rel.DURABLE, 0.5, 1, 3) == pytest.approx(1 + 0.5 + 0.25)
    # restart, n=2, k=2, p=0.5: one attempt costs 1 + 0.5 calls; a second happens w.p. 0.75
    assert rel.expected_executions(rel.RESTART, 0.5, 2, 2) == pytest.approx(1.5 * 1.75)


# the simulation -----------------------------------------------------------------------------
def _within(observed, expected, runs, sigmas=4.0):
    spread = math.sqrt(max(expected * (1 - expected), 1e-9) / runs)
    return abs(observed - expected) <= sigmas * spread + 1.0 / runs


@pytest.mark.parametrize("strategy", rel.STRATEGIES)
@pytest.mark.parametrize("p,n,k", [(0.95, 6, 1), (0.9, 10, 2), (0.8, 8, 3)])
def test_simulation_agrees_with_the_formula(strategy, p, n, k):
    tally = rel.simulate(strategy, p, n, k, runs=300, seed=3)
    assert tally.runs == 300
    assert _within(tally.finish_rate, tally.predicted_rate, 300)
    assert tally.executions_per_run == pytest.approx(tally.predicted_executions, rel=0.12)


def test_simulation_is_deterministic_and_counts_every_tool_call():
    a = rel.simulate(rel.DURABLE, 0.9, 5, 2, runs=50, seed=7)
    b = rel.simulate(rel.DURABLE, 0.9, 5, 2, runs=50, seed=7)
    assert a == b
    assert a.executions >= a.finished * 5          # a finished run called each tool once at least


def test_same_seed_means_the_tool_fails_on_the_same_calls_for_both_strategies():
    # with k=1 both strategies are one try of each step: identical counts
    d = rel.simulate(rel.DURABLE, 0.9, 6, 1, runs=80, seed=1)
    r = rel.simulate(rel.RESTART, 0.9, 6, 1, runs=80, seed=1)
    assert (d.finished, d.executions) == (r.finished, r.executions)


def test_a_long_flaky_plan_finishes_only_with_per_step_retry():
    tallies = rel.compare(0.8, 20, 3, runs=150)
    assert tallies[rel.DURABLE].finish_rate > 0.7
    assert tallies[rel.RESTART].finish_rate < 0.15


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="strategy"):
        rel.simulate("hope", 0.9, 3, 1)
    with pytest.raises(ValueError, match="p must be"):
        rel.simulate(rel.DURABLE, 0.0, 3, 1)


def test_row_has_formula_and_simulation_side_by_side():
    row = rel.simulate(rel.DURABLE, 0.95, 6, 3, runs=20).row()
    assert {"finish rate (formula)", "finish rate (simulated)",
            "tool calls per run (formula)", "tool calls per run (simulated)"} <= set(row)


# plots --------------------------------------------------------------------------------------
def test_plots_draw_one_curve_per_k_and_dashed_restarts():
    import matplotlib
    matplotlib.use("Agg")
    ax = rel.plot_finish_rates(0.95, ks=(1, 2, 3), n_max=10, restart=True)
    assert len(ax.lines) == 3 + 2                  # k=1 has no separate restart curve
    ax_rate, ax_cost = rel.plot_simulation([rel.simulate(s, 0.9, 4, 2, runs=20) for s in rel.STRATEGIES])
    assert len(ax_rate.patches) == 4 and len(ax_cost.patches) == 4


# the explorer -------------------------------------------------------------------------------
def test_model_recomputes_on_every_change():
    model = rel.ReliabilityModel(p=0.9, n=5, k=1, runs=40)
    first = model.summary()
    assert first["first try (formula)"] == pytest.approx(0.9 ** 5)
    model.set(k=3)
    assert model.simulations == 2
    assert model.summary()["per-step retry (formula)"] == pytest.approx(rel.per_step_retry_rate(0.9, 5, 3))
    assert model.tallies[rel.DURABLE].k == 3
    assert model.png().startswith(b"\x89PNG")


def test_explorer_sliders_drive_the_model_and_redraw():
    explorer = rel.ReliabilityExplorer(p=0.9, n=5, k=1, runs=40)
    picture = explorer.image.value
    explorer.k.value = 3
    assert explorer.model.k == 3
    assert explorer.model.tallies[rel.DURABLE].k == 3
    assert explorer.image.value != picture
    explorer.n.value = 12
    explorer.p.value = 0.8
    assert (explorer.model.p, explorer.model.n) == (0.8, 12)
    assert "per-step retry" in explorer.readout.value and "%" in explorer.readout.value
    assert repr(explorer) == "ReliabilityExplorer(p=0.8, n=12, k=3, runs=40)"
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == repr(explorer)
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_explorer_is_exported_from_the_lab():
    import durable_lite as dl
    assert dl.lab.ReliabilityExplorer is rel.ReliabilityExplorer
    assert dl.lab.ReliabilityModel is rel.ReliabilityModel


def test_the_figure_keeps_its_legend_off_the_curves_and_uses_one_notation():
    import matplotlib
    matplotlib.use("Agg")
    fig = rel.ReliabilityModel(p=0.9, n=10, k=2, runs=20).figure()
    ax = fig.axes[0]
    assert ax.get_legend() is None                 # no legend drawn on top of the curves
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert "k=1: first try only (pⁿ)" in labels and not any("**" in t for t in labels)
    assert all(t.get_fontsize() >= 9 for t in legend.get_texts())
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box, plot = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.y1 <= plot.y0                       # entirely below the plot area
    assert box.height * 72 / fig.dpi >= 30         # three rows of text, not a 7 px strip
    assert fig.get_size_inches()[0] * rel.DPI <= 850    # fits a notebook column unscaled


def test_the_readout_is_a_table_with_one_header_per_column_and_the_same_notation():
    explorer = rel.ReliabilityExplorer(p=0.9, n=5, k=2, runs=20)
    table = explorer.readout.value
    assert table.count("<th") == 4 and "padding" in table
    for header in ("finish rate: formula", "simulated", "tool calls per finished run"):
        assert f">{header}</th>" in table
    assert "p<sup>n</sup>" in table and "p**n" not in table
    assert table.count("<tr>") == 4                # header, first try, two strategies


def test_sliders_keep_a_usable_width_in_a_narrow_window():
    explorer = rel.ReliabilityExplorer(p=0.9, n=5, k=1, runs=20)
    assert explorer.sliders.layout.flex_flow == "row wrap"     # wrap, do not squeeze
    for s in (explorer.p, explorer.n, explorer.k):
        assert s.layout.min_width == "320px"
    assert len({id(s.layout) for s in (explorer.p, explorer.n, explorer.k)}) == 3
    assert explorer.image.layout.max_width == "100%"


def test_the_status_line_says_recomputing_while_it_recomputes(monkeypatch):
    explorer = rel.ReliabilityExplorer(p=0.9, n=5, k=1, runs=20)
    assert "p=0.900, n=5, k=1" in explorer.status.value
    seen = []
    real_set = explorer.model.set

    def watching_set(**kwargs):
        seen.append(explorer.status.value)
        return real_set(**kwargs)

    monkeypatch.setattr(explorer.model, "set", watching_set)
    explorer.n.value = 7
    assert len(seen) == 1 and "recomputing…" in seen[0]
    assert "recomputing" not in explorer.status.value
    assert "p=0.900, n=7, k=1" in explorer.status.value


def test_an_error_while_recomputing_shows_in_the_status_line(monkeypatch):
    explorer = rel.ReliabilityExplorer(p=0.9, n=5, k=1, runs=20)

    def broken(**kwargs):
        raise RuntimeError("<no> simulation today")

    monkeypatch.setattr(explorer.model, "set", broken)
    explorer.k.value = 2                           # no exception escapes the slider
    assert "could not recompute" in explorer.status.value
    assert "&lt;no&gt; simulation today" in explorer.status.value


def test_the_lessons_curve_plot_keeps_its_legend_beside_the_curves():
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.2))
    ax = rel.plot_finish_rates(0.8, ks=(1, 2, 3), n_max=40, ax=fig.subplots(), restart=True)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
    assert "k=1: first try only (pⁿ)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_a_finish_rate_is_never_rounded_up_to_all_runs_or_down_to_none():
    assert [rel.percent(x) for x in (0.999, 0.995, 1.0, 0.5, 0.004, 0.0)] == \
        ["99.9%", "99.5%", "100%", "50%", "0.4%", "0%"]
    assert rel.percent(0.99996, 2) == "99.996%" and rel.percent(0.9999999) == "nearly 100%"
    assert rel.percent(0.0000001) == "nearly 0%"


def test_the_explorer_never_says_every_run_finished_when_one_did_not():
    """p=0.9, n=5, k=3, seed 1: 199 of 200 simulated runs finish. The title, the legend and
    the table say 99.5%, not 100%."""
    explorer = rel.ReliabilityExplorer(p=0.9, n=5, k=3, runs=200, seed=1)
    tally = explorer.model.tallies[rel.DURABLE]
    assert (tally.finished, tally.runs) == (199, 200)
    fig = explorer.model.figure()
    title = fig.axes[0].get_title()
    assert "finishes 99.5% of runs" in title and "100%" not in title
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "simulated, per-step retry: 99.5%" in labels
    assert "99.50%" in explorer.readout.value          # the formula, 99.5010 %
    assert "100.0" not in explorer.readout.value


def test_every_k_the_slider_offers_has_a_colour_of_its_own_not_the_restart_colour():
    """At k=6, per-step retry used to take the colour restart-from-the-top already had."""
    explorer = rel.ReliabilityExplorer(p=0.9, n=5, k=1, runs=20)
    ks = range(explorer.k.min, explorer.k.max + 1)
    colours = [rel.color_for(k) for k in ks]
    assert len(set(colours)) == len(colours) and rel.RESTART_COLOUR not in colours
    explorer.k.value = explorer.k.max
    fig = explorer.model.figure()
    ax = fig.axes[0]
    simulated = {line.get_label(): line.get_color() for line in ax.lines
                 if line.get_label().startswith("simulated")}
    assert len(set(simulated.values())) == 2, simulated          # two points, two colours
    bars = fig.axes[1].patches
    assert bars[0].get_facecolor() != bars[1].get_facecolor()


def test_the_simulation_does_no_work_twice_and_says_how_long_a_change_took():
    """A slider coming back to a value shows the same numbers at once; the status line says
    how long each recompute took, so the lesson need not promise a figure."""
    explorer = rel.ReliabilityExplorer(p=0.9, n=5, k=1, runs=40)
    first = explorer.model.tallies
    explorer.n.value = 6
    assert "recomputed in" in explorer.status.value and " s<" in explorer.status.value
    explorer.n.value = 5
    assert explorer.model.tallies == first
    assert all(a is b for a, b in zip(explorer.model.tallies.values(), first.values()))
    tool = rel.FlakyTool(0.5, seed=3)
    outcomes = []
    for _ in range(20):
        try:
            tool.call("x")
            outcomes.append(True)
        except Exception as exc:
            assert "x failed (call" in str(exc)
            outcomes.append(False)
    assert tool.calls == 20 and 3 <= outcomes.count(False) <= 17
    again = rel.FlakyTool(0.5, seed=3)
    assert [_ok(again) for _ in range(20)] == outcomes              # the seed decides


def _ok(tool) -> bool:
    try:
        tool.call("x")
        return True
    except Exception:
        return False


def test_the_explorer_names_its_parts_with_stable_css_classes():
    explorer = rel.ReliabilityExplorer(p=0.9, n=5, k=2, runs=20)
    parts = {"dl-reliability-explorer": explorer.panel, "dl-slider-p": explorer.p,
             "dl-slider-n": explorer.n, "dl-slider-k": explorer.k, "dl-plot": explorer.image,
             "dl-readout": explorer.readout, "dl-status": explorer.status}
    for name, widget in parts.items():
        assert name in widget._dom_classes, name


# cost per FINISHED run (issue "What a learner sees, round 2": the lesson's point is what a
# finished run costs; per run, restarting looked as cheap as retrying each step) -----------
def test_a_finished_run_costs_every_call_over_the_runs_that_finished():
    t = rel.Tally(rel.RESTART, 0.9, 10, 2, runs=200, finished=108, executions=2079)
    assert t.executions_per_finished_run == pytest.approx(2079 / 108)
    assert rel.Tally(rel.RESTART, 0.5, 30, 1, 200, 0, 400).executions_per_finished_run is None
    for strategy in rel.STRATEGIES:
        assert rel.expected_executions_per_finished_run(strategy, 0.9, 10, 2) == pytest.approx(
            rel.expected_executions(strategy, 0.9, 10, 2) / rel.finish_rate(strategy, 0.9, 10, 2))


def test_the_explorer_shows_cost_per_finished_run_and_says_so():
    """At p=0.9, n=10, k=2 both strategies make about 10.4 tool calls per run; per finished
    run, restarting costs far more. The explorer's bars, ticks, labels and readout show
    the cost per finished run."""
    import matplotlib
    matplotlib.use("Agg")
    explorer = rel.ReliabilityExplorer(p=0.9, n=10, k=2, runs=200)
    m = explorer.model
    d, r = m.tallies[rel.DURABLE], m.tallies[rel.RESTART]
    assert abs(d.executions_per_run - r.executions_per_run) < 0.5           # per run: a tie
    assert r.executions_per_finished_run > 1.5 * d.executions_per_finished_run

    fig = m.figure()
    ax_cost = fig.axes[1]
    assert ax_cost.get_ylabel() == "tool calls per finished run"
    assert ax_cost.get_title().startswith("tool calls per finished run")
    heights = sorted(bar.get_height() for bar in ax_cost.patches)
    assert heights == pytest.approx(sorted([d.executions_per_finished_run,
                                            r.executions_per_finished_run]))
    ticks = sorted(line.get_ydata()[0] for line in ax_cost.lines)
    assert ticks == pytest.approx(sorted([d.predicted_executions_per_finished_run,
                                          r.predicted_executions_per_finished_run]))
    shown = {t.get_text() for t in ax_cost.texts}
    assert {f"{d.executions_per_finished_run:,.1f}", f"{r.executions_per_finished_run:,.1f}"} <= shown

    assert ">tool calls per finished run</th>" in explorer.readout.value
    assert f">{r.executions_per_finished_run:.2f}</td>" in explorer.readout.value
    assert m.summary()["restart from the top: tool calls per finished run"] == \
        r.executions_per_finished_run


def test_a_strategy_with_no_finished_run_says_so_and_its_formula_points_off_the_scale():
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    model = rel.ReliabilityModel(p=0.7, n=30, k=2, runs=200)
    assert model.tallies[rel.RESTART].finished == 0 < model.tallies[rel.DURABLE].finished
    fig = model.figure()
    ax_cost = fig.axes[1]
    texts = [t.get_text() for t in ax_cost.texts]
    assert "no run\nfinished\n(of 200)" in texts
    assert any(t.startswith("formula\n") and t.endswith("↑") for t in texts)   # 147,886: off scale
    assert len(ax_cost.patches) == 1                                           # one bar only
    assert "none finished" in rel.ReliabilityExplorer(model=model).readout.value
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    page = fig.bbox
    for text in [*ax_cost.texts, ax_cost.title]:                               # nothing cut off
        box = text.get_window_extent(canvas.get_renderer())
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and box.y1 <= page.y1, text.get_text()
