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
    assert "last answer" in [t.get_text() for t in ax.get_legend().get_texts()]
