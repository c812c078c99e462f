"""durable_lite.lab.replay: the helpers lessons 03, 04 and 05 lean on."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import durable_lite as dl  # noqa: E402
from durable_lite.faults import CrashAt  # noqa: E402
from durable_lite.lab import replay  # noqa: E402


@pytest.fixture
def store(tmp_path):
    return dl.SQLiteStore(tmp_path / "runs.db")


calls = []


def work(name):
    calls.append(name)
    return name.upper()


@dl.workflow("lab-replay-three")
def three(ctx):
    return [ctx.step(name, work, name) for name in ("a", "b", "c")]


def test_run_through_crashes_uses_a_fresh_engine_per_attempt_and_finishes(store):
    calls.clear()
    clock = dl.FakeClock()
    start = clock()
    attempts = replay.run_through_crashes(
        store, three, run_id="r1", clock=clock, pause=30,
        crashes=[CrashAt("b", "after_effect"), CrashAt("c", "before_step")],
        measure=lambda: len(calls))
    assert [a.status for a in attempts] == ["crashed", "crashed", "completed"]
    assert [a.crashed_at for a in attempts] == ["b after_effect", "c before_step", None]
    # the crash after b's effect loses b's checkpoint: b runs twice, a and c once
    assert calls == ["a", "b", "b", "c"]
    assert [a.measured for a in attempts] == [2, 3, 4]
    assert attempts[0].executed == ["a"]
    assert attempts[1].replayed == ["a"] and attempts[1].executed == ["b"]
    assert attempts[2].replayed == ["a", "b"] and attempts[2].executed == ["c"]
    assert clock() == start + 60                     # two pauses between three attempts
    assert dl.Engine(store, clock).get("r1").result == ["A", "B", "C"]
    frame = replay.attempts_frame(attempts)
    assert list(frame.index) == [1, 2, 3]
    assert frame.loc[3, "replayed"] == "a, b"


def test_run_through_crashes_stops_when_a_crash_point_is_never_reached(store):
    attempts = replay.run_through_crashes(store, three, run_id="r2",
                                          crashes=[CrashAt("nowhere", "before_step")])
    assert len(attempts) == 1 and attempts[0].status == "completed"


def test_crashed_at_names_the_occurrence(store):
    @dl.workflow("lab-replay-repeat")
    def repeat(ctx):
        return [ctx.step("a", work, "a") for _ in range(3)]

    attempts = replay.run_through_crashes(store, repeat, run_id="r5",
                                          crashes=[CrashAt("a", "after_checkpoint", occurrence=2)])
    assert attempts[0].crashed_at == "a#2 after_checkpoint"
    assert attempts[1].replayed == ["a", "a#2"] and attempts[1].executed == ["a#3"]


def test_count_checkpoints_counts_commits_on_that_store_only(store, tmp_path):
    other = dl.SQLiteStore(tmp_path / "other.db")
    replay.count_checkpoints(store)
    engine = dl.Engine(store, dl.FakeClock())
    engine.start(three, run_id="r3")
    engine.start(three, run_id="r3")                  # completed: answered, nothing written
    assert store.checkpoint_writes == 3
    assert not hasattr(other, "checkpoint_writes")
    dl.Engine(other, dl.FakeClock()).start(three, run_id="r3")
    assert store.checkpoint_writes == 3


def test_count_checkpoints_does_not_count_a_write_that_failed(store):
    replay.count_checkpoints(store)
    engine = dl.Engine(store, dl.FakeClock())
    engine.start(three, run_id="r4")
    entry = store.load_entries("r4")[0]
    with pytest.raises(dl.LeaseLostError):
        store.record_entry("r4", entry)               # position already taken
    assert store.checkpoint_writes == 3


def test_plots_label_what_they_show():
    import matplotlib.pyplot as plt
    fig, ax = replay.plot_bars(["a", "b"], [2, 1], title="B pays once", ylabel="refunds",
                               expected=1)
    assert ax.get_title(loc="left") == "B pays once" and ax.get_ylabel() == "refunds"
    assert [t.get_text() for t in ax.texts] == ["2", "1"]
    colors = [p.get_facecolor() for p in ax.patches]
    assert colors[0] != colors[1]                     # the wrong bar stands out
    plt.close(fig)
    fig, ax = replay.plot_lines([1, 2, 3], {"outside": [1, 2, 3], "step": [1, 1, 1]},
                                title="t", xlabel="x", ylabel="y")
    assert [line.get_label() for line in ax.get_lines()] == ["outside", "step"]
    assert ax.get_xlabel() == "x"
    plt.close(fig)


def test_exported_from_lab():
    for name in ("run_through_crashes", "attempts_frame", "count_checkpoints", "plot_bars",
                 "plot_lines"):
        assert getattr(dl.lab, name) is getattr(replay, name)
