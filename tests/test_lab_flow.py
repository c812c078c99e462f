"""Lesson 11's plot of the provider's traffic: requests by the second they arrived, and
where the last answer came, so the plot and the table's "last answer after (s)" agree."""

import pytest

import durable_lite as dl
from durable_lite import storm
from durable_lite.lab import flow


@pytest.fixture(scope="module")
def queued():
    folder = dl.lab.scratch_folder("test-flow")
    return storm.burst("queue", folder, runs=60, workers=60,
                       queue=dl.Queue("llm", rate=(storm.PROVIDER_LIMIT, 1.0)))


def test_the_last_answer_comes_after_the_last_request_and_the_table_says_which(queued):
    last_request, last_answer = flow.last_request(queued), flow.last_answer(queued)
    assert last_request == 60 // storm.PROVIDER_LIMIT - 1          # 20 a second: seconds 0, 1, 2
    assert last_request < last_answer < last_request + 10          # an answer takes a few seconds
    assert queued.summary()["last answer after (s)"] == round(last_answer, 1)


def test_the_plot_marks_the_last_answer_on_each_panel(queued):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    fig = flow.requests_per_second([queued], limit=storm.PROVIDER_LIMIT, title="t", seconds=10)
    (ax,) = fig.axes
    marked = [line for line in ax.lines if line.get_label() == "last answer"]
    assert len(marked) == 1 and marked[0].get_xdata()[0] == pytest.approx(flow.last_answer(queued))
    assert any(t.get_text() == f"last answer {flow.last_answer(queued):.1f} s" for t in ax.texts)
    (legend,) = fig.legends                                        # the figure's, below the panels
    assert "last answer" in [t.get_text() for t in legend.get_texts()]


def test_the_legend_sits_clear_of_every_label_at_the_size_the_lesson_shows(queued):
    """Lesson 11's picture (issue "What a learner sees, round 2": "11's legend overlaps a
    label"): the legend sat inside the top panel, on "last answer 35.3 s". It now has a
    band of its own below the panels; nothing it holds touches a title, a label or a panel."""
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    lockstep = storm.burst("lockstep", dl.lab.scratch_folder("test-flow-lockstep"),
                           runs=300)                              # the lesson's: last answer 35.3 s
    assert flow.last_answer(lockstep) > 30
    fig = flow.requests_per_second([lockstep, queued], limit=storm.PROVIDER_LIMIT, seconds=40,
                                   title="Lockstep retries come in waves, a queue keeps to the limit")
    assert fig.get_size_inches()[0] == 7.5                       # 750 px, as the lesson shows it
    assert all(ax.get_legend() is None for ax in fig.axes)
    (legend,) = fig.legends
    assert sorted(t.get_text() for t in legend.get_texts()) == sorted([
        "answered", "refused (429)", f"limit ({storm.PROVIDER_LIMIT}/s)", "last answer"])
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    others = [fig._suptitle] + [t for ax in fig.axes for t in (ax.title, ax._left_title, *ax.texts)]
    for text in others:
        if text.get_text():
            assert not box.overlaps(text.get_window_extent(renderer)), text.get_text()
    for ax in fig.axes:
        assert not box.overlaps(ax.get_tightbbox(renderer))      # panels, ticks, axis labels
    assert box.y1 <= min(ax.get_tightbbox(renderer).y0 for ax in fig.axes)   # below them all
