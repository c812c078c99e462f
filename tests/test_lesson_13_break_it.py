"""Lesson 13's "break it": batching the nightly report into one step leaves its checkpoint
protecting nothing, and the grain table shows both ways to get the grain wrong. Also the
break-even map: few lines, every band named (the white one too), no text under 9 px."""

import re
from pathlib import Path

import nbformat
import pytest

from durable_lite import costs
from durable_lite.lab import break_even, ladder

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "13_what_durability_costs.ipynb"
REPORT = costs.example("nightly research report")
THUMBNAILS = costs.example("thumbnail batch")
RATE = costs.CRASHES_PER_HOUR
H = {t.key: t.median_us for t in ladder.reference_ladder(ladder.load_reference_run())}["dl_process"] / 1e6


# batching ------------------------------------------------------------------------------------
def test_batched_keeps_the_work_and_the_money_in_fewer_steps():
    for per_step in (2, 10, 41, 1000):
        w = break_even.batched(REPORT, per_step)
        assert len(w.steps) == -(-len(REPORT.steps) // per_step)
        assert w.work_seconds == pytest.approx(REPORT.work_seconds)
        assert w.dollars == pytest.approx(REPORT.dollars)
    assert break_even.batched(REPORT, 1) is REPORT
    assert break_even.batched(REPORT, 41).name == "nightly research report in 1 step"
    refund = break_even.batched(costs.example("refund"), 2)
    assert len(refund.effects) == 2                           # harm goes along with its step
    assert sum(s.harm for s in refund.steps) == 41.0


def test_batched_refuses_a_wait_in_a_batch_and_a_bad_grain():
    with pytest.raises(ValueError, match="wait"):
        break_even.batched(costs.example("access request"), 2)
    for bad in (0, -1, 1.5, "2"):
        with pytest.raises(ValueError):
            break_even.batched(REPORT, bad)


def test_a_checkpoint_that_closes_the_whole_run_protects_nothing():
    one = break_even.batched(REPORT, len(REPORT.steps))
    b = costs.balance(one, RATE, H)
    assert b.saved_seconds == 0 and b.saved_model_dollars == 0 and not b.pays
    top, resumed = costs.expected(one, RATE, False), costs.expected(one, RATE, True)
    assert (top.worker_seconds, top.dollars) == pytest.approx((resumed.worker_seconds, resumed.dollars))
    assert costs.balance(REPORT, RATE, H).pays


def test_coarser_grains_save_less_and_finer_ones_cost_more():
    saved = [costs.balance(break_even.batched(REPORT, g), RATE, H).saved for g in (1, 2, 10, 20, 41)]
    assert saved == sorted(saved, reverse=True) and saved[-1] == 0
    spent = [costs.balance(break_even.batched(THUMBNAILS, g), RATE, H).spent for g in (1, 10, 100, 1000)]
    assert spent == sorted(spent, reverse=True)
    assert not any(costs.balance(break_even.batched(THUMBNAILS, g), RATE, H).pays
                   for g in (1, 10, 100, 1000))


def test_a_crash_re_spends_the_interrupted_step_or_the_whole_batch():
    # the report: rounds of a 5 s search and a 20 s, $0.04 reading; 490 s in is 10 s into
    # the 20th reading
    lost = break_even.crash_at(REPORT, 490)
    assert (lost.step, lost.seconds, lost.dollars) == ("read 20", pytest.approx(10), pytest.approx(0.04))
    whole = break_even.crash_at(break_even.batched(REPORT, 41), 490)
    assert whole.seconds == pytest.approx(490) and whole.dollars == pytest.approx(REPORT.dollars)
    assert break_even.crash_at(REPORT, 0).step == "search 1"
    # waits are off the clock: the access request's 0.2 s filing, then its 0.3 s grant
    assert break_even.crash_at(costs.example("access request"), 0.3).step == "grant access"
    for outside in (-1, REPORT.work_seconds):
        with pytest.raises(ValueError):
            break_even.crash_at(REPORT, outside)


def test_the_grain_table_weighs_each_grain_in_dollars():
    table = break_even.grain_table({REPORT: (1, 41), THUMBNAILS: (1, 1000)}, RATE, H)
    assert table.columns.name == "per 1,000 runs"
    assert list(table["pays?"]) == ["yes", "no", "no", "no"]
    assert list(table["checkpoints a run"]) == [41, 1, 1000, 1]
    assert table.loc[("nightly research report", 41), "they save ($)"] == "0"
    assert [break_even._dollars(v) for v in (5.4096, 0.00081956, 8.1956e-7, 0)] == \
        ["5.41", "0.000820", "0.000000820", "0"]


# the map ------------------------------------------------------------------------------------
@pytest.fixture
def plt():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    yield plt
    plt.close("all")


def test_the_map_names_its_white_corner_and_keeps_every_text_readable(plt):
    ax = break_even.plot_break_even({"30 µs": H}, mark_rate=RATE)
    ax.set_title("a title\non two lines")
    fig = ax.figure
    fig.canvas.draw()
    assert len(ax.get_lines()) == len(break_even.STEP_KINDS) + 1        # + the marked rate
    texts = [t.get_text() for t in ax.texts]
    assert break_even.CEREMONY in texts and "pays for every kind" in texts
    # the white corner's label sits left of every line, inside the axes
    (white,) = [t for t in ax.texts if t.get_text() == break_even.CEREMONY]
    x, y = white.get_position()
    box = white.get_window_extent()
    inverse = ax.transData.inverted()
    (x0, y0), (x1, y1) = inverse.transform([(box.x0, box.y0), (box.x1, box.y1)])
    model = min(break_even.STEP_KINDS, key=lambda k: -k.seconds * 1e3 - k.dollars * 1e6)
    for corner_x, corner_y in ((x1, y0), (x1, y1)):
        assert corner_x < costs.break_even_crash_rate(max(2, round(corner_y)), model.seconds, H,
                                                       model.dollars)
    assert x0 >= ax.get_xlim()[0] and y0 >= ax.get_ylim()[0]
    # every text at least 9 px as the inline backend renders it (100 dpi, shown at its size
    # in a 968 px output area)
    width_px = fig.get_figwidth() * 100
    assert width_px <= 968
    everything = fig.findobj(lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text")
                             and a.get_text() and a.get_visible())
    assert everything
    for text in everything:
        assert text.get_fontsize() * 100 / 72 >= 9, (text.get_text(), text.get_fontsize())


def test_the_map_still_compares_checkpoints_when_given_several(plt):
    ax = break_even.plot_break_even({"a": 23e-6, "b": 2e-3})
    assert len(ax.get_lines()) == 2 * len(break_even.STEP_KINDS)
    assert "dashed: b" in ax.get_legend().get_title().get_text()


# the lesson ----------------------------------------------------------------------------------
def test_the_lesson_breaks_the_grain_then_fixes_it():
    cells = nbformat.read(LESSON, as_version=4).cells
    text = "\n".join(c.source for c in cells)
    (brk,) = [c for c in cells if c.cell_type == "code" and "break_even.batched(" in c.source]
    (fix,) = [c for c in cells if c.cell_type == "code" and "break_even.grain_table(" in c.source]
    assert cells.index(brk) < cells.index(fix)
    above = next(c.source for c in reversed(cells[:cells.index(brk)]) if c.cell_type == "markdown")
    assert "**Break it.**" in above
    assert re.search(r"^per_step = 41\b", brk.source, flags=re.M)
    printed = "".join(o.get("text", "") for o in brk.outputs)
    assert "in 1 step" in printed and "saves 0.00 s, $0.0000 a run" in printed
    assert "re-spends 490 s, $0.80" in printed and "re-spends 10 s, $0.04" in printed
    table = fix.outputs[0]["data"]["text/plain"]
    assert "thumbnail batch" in table and "yes" in table and "no" in table
    assert "**The fix**" in text
    # no raw timing reaches a compared output: the break-even cells use the reference run
    assert "measured" not in brk.source + fix.source
