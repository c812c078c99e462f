"""The lab's views of a trace, driven from pytest: the broken time axis, the timeline drawn
with matplotlib (Agg), and the per-step table."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import durable_lite as dl  # noqa: E402
from durable_lite.lab.timeline import BREAK_WIDTH, TimeAxis, steps_table, time_split, \
    trace_timeline  # noqa: E402
from trace_support import RUN_ID, lumpy_run  # noqa: E402

DAY = 86400.0


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    run = lumpy_run(tmp_path_factory.mktemp("lumpy"))
    return run.engine.trace(RUN_ID)


def test_the_axis_squeezes_the_two_day_wait_and_the_dead_workers_minute(tree):
    axis = TimeAxis(tree)
    a, wait, b, c = tree.children
    breaks = axis.breaks()
    assert [round(seconds) for _, _, seconds in breaks] == [2 * DAY, 60]
    assert all(round(x1 - x0, 6) == BREAK_WIDTH for x0, x1, _ in breaks)
    # Execution 1 (19 s) gets far more room than the two days around it.
    assert axis.x(a.end) - axis.x(a.start) > 40
    # Execution 3 (0.65 s) still gets a readable share, and its steps keep their order.
    steps = c.children
    xs = [axis.x(s.start) for s in steps] + [axis.x(steps[-1].end)]
    assert xs == sorted(xs) and xs[-1] - xs[0] > 10
    # Time runs left to right everywhere, the axis spans 0..100, and time_at inverts x.
    samples = [tree.start + t for t in (0, 1, 19, 3600, DAY, 2 * DAY, 2 * DAY + 30, tree.duration)]
    positions = [axis.x(t) for t in samples]
    assert positions == sorted(positions) and positions[0] == 0 and positions[-1] == 100
    for t in (a.start + 5, c.start + 0.3, wait.start + DAY):
        assert axis.time_at(axis.x(t)) == pytest.approx(t)


def test_time_split_adds_up(tree):
    split = time_split(tree)
    assert split["parked"] == 2 * DAY and split["no worker"] == pytest.approx(60)
    assert split["working"] + split["parked"] + split["no worker"] == pytest.approx(split["total"])


def test_the_timeline_draws_one_row_per_span_and_states_the_finding(tree, tmp_path):
    ax = trace_timeline(tree)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["run ticket-1042", "execution 1 · worker-a", "classify", "lookup_order",
                      "draft_reply", "wait approval", "execution 2 · worker-b",
                      "execution 3 · worker-c", "refund", "send_reply", "close_ticket"]
    title = ax.get_title(loc="left")
    assert title.startswith("ticket-1042: 2 d 0 h 01 m in all — parked 2 d 0 h 00 m")
    texts = [t.get_text() for t in ax.texts]
    assert "worker died here: no record after this" in texts
    assert any("2,474 tokens" in t or "tokens · $" in t for t in texts)
    assert "2 d 0 h 00 m\nparked" in texts and "1 m 00 s\nno worker" in texts
    ax.figure.savefig(tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").stat().st_size > 10_000
    plt.close(ax.figure)


def test_the_timeline_of_a_run_still_waiting_ends_in_an_open_break(tmp_path):
    clock = dl.FakeClock()
    engine = dl.Engine(dl.MemoryStore(), clock, worker="w")

    @dl.workflow("views-waiting")
    def waiting(ctx):
        ctx.step("draft", lambda: clock.advance(2) and "draft")
        return ctx.wait_for_signal("approval", timeout=7 * DAY)

    engine.start(waiting, run_id="v1")
    clock.advance(DAY)
    tree = engine.trace("v1")
    axis = TimeAxis(tree)
    assert [round(s) for _, _, s in axis.breaks()] == [DAY]
    assert axis.x(tree.end) == 100
    ax = trace_timeline(tree, title="still waiting")
    assert ax.get_title(loc="left") == "still waiting"
    plt.close(ax.figure)


def test_the_steps_table_says_where_the_time_and_the_money_went(tree):
    table = steps_table(tree)
    assert list(table.index) == ["classify", "lookup_order", "draft_reply", "approval", "refund",
                                 "send_reply", "close_ticket"]
    assert list(table.columns) == ["kind", "workers", "status", "attempts", "seconds",
                                   "% of time", "tokens", "cost", "% of cost"]
    assert table.loc["lookup_order", "attempts"] == 5
    assert table.loc["approval", "kind"] == "wait" and table.loc["approval", "seconds"] == 2 * DAY
    assert table["% of time"].idxmax() == "approval"
    assert table["cost"].idxmax() == "draft_reply" and table.loc["draft_reply", "% of cost"] > 90
    assert table["% of cost"].sum() == pytest.approx(100, abs=0.2)
    assert table["tokens"].sum() == tree.tokens
    assert table.loc["refund", "workers"] == "worker-c"


def test_the_steps_table_sums_a_step_over_the_executions_that_tried_it():
    clock = dl.FakeClock()
    store = dl.MemoryStore()
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) <= 3:
            raise ConnectionError("down")
        return "ok"

    @dl.workflow("views-flaky")
    def wf(ctx):
        return ctx.step(dl.Step("fetch", retry=dl.Retry(max_attempts=2, jitter=False)), flaky)

    dl.Engine(store, clock, worker="w1").start(wf, run_id="v2")      # 2 attempts, fails
    dl.Engine(store, clock, worker="w2").resume("v2")                # 2 more, works
    table = steps_table(dl.Engine(store, clock).trace("v2"))
    assert table.loc["fetch", "attempts"] == 4
    assert table.loc["fetch", "workers"] == "w1, w2"
    assert table.loc["fetch", "status"] == "completed"
