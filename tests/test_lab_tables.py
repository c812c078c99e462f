"""Lesson tables and plots: right rows, deterministic text, heavy libraries loaded lazily."""

import subprocess
import sys

import pytest

pd = pytest.importorskip("pandas")

import durable_lite as dl
from durable_lite import examples as ex
from durable_lite.child import ChildOutcome
from durable_lite.faults import CrashAt


@pytest.fixture
def folder():
    return dl.lab.scratch_folder("tables")


def refund_run(folder, crash=None):
    """A refund run that crashes (optionally), then resumes on a second engine."""
    store = dl.SQLiteStore(folder.file("runs.db"))
    first = dl.Engine(store, dl.FakeClock(), worker="worker-1", crash_at=crash)
    try:
        runs = [first.start(ex.refund, folder, "A-17", 40, run_id="r-1")]
    except dl.Crash:
        runs = []
    second = dl.Engine(store, dl.FakeClock(), worker="worker-2")
    runs.append(second.resume("r-1"))
    return second, runs


def test_history_table_has_one_row_per_step_and_names_the_worker(folder):
    engine, _ = refund_run(folder, CrashAt("refund", "after_checkpoint"))
    table = dl.lab.history_table(engine, "r-1")
    assert list(table["step"]) == list(ex.REFUND_STEPS)
    assert list(table["worker"]) == ["worker-1", "worker-1", "worker-2", "worker-2"]
    assert list(table.columns) == ["step", "kind", "status", "attempts", "worker", "result"]
    assert table.index.name == "position"
    timed = dl.lab.history_table(engine, "r-1", times=True, results=False)
    assert list(timed.columns) == ["step", "kind", "status", "attempts", "worker",
                                   "started (s)", "ended (s)"]
    assert timed["started (s)"].iloc[0] == 0.0


def test_generated_worker_ids_are_shown_as_process_numbers(folder):
    store = dl.SQLiteStore(folder.file("runs.db"))
    engine = dl.Engine(store, dl.FakeClock())            # worker id: host:pid:token
    engine.start(ex.refund, folder, "A-17", 40, run_id="r-1")
    table = dl.lab.history_table(engine, "r-1")
    assert set(table["worker"]) == {"process 1"}
    events = dl.lab.events_table(engine, "r-1")
    assert set(events["worker"]) == {"process 1"}
    assert not events.isna().any().any()                  # no NaN for missing names


def test_results_are_shortened_for_the_page(folder):
    engine, _ = refund_run(folder)
    assert all(len(text) <= 48 for text in dl.lab.history_table(engine, "r-1")["result"])


def test_trace_table_reads_runs_naive_results_children_and_pairs(folder):
    engine, runs = refund_run(folder, CrashAt("email", "after_checkpoint"))
    trace = dl.lab.trace_table(*runs)                     # only the resume returned a Run
    assert list(trace["what happened"]) == ["replayed"] * 3 + ["executed"]

    naive = dl.naive.NaiveRunner(crash_at=CrashAt("email", "after_effect")).run(
        ex.refund, dl.lab.scratch_folder("naive"), "A-17", 40, careless=True, use_key=False)
    trace = dl.lab.trace_table(naive, labels=["naive"])
    assert list(trace["attempt"]) == ["naive (try 1)"] * 3 + ["naive (try 2)"] * 4
    assert set(trace["what happened"]) == {"executed"}

    child = ChildOutcome(0, {"replayed": ["a"], "executed": ["b"]}, "")
    killed = ChildOutcome(-9, None, "")
    trace = dl.lab.trace_table(killed, child, [("c", "executed")])
    assert list(trace["attempt"]) == ["attempt 2", "attempt 2", "attempt 3"]
    assert list(trace["step"]) == ["a", "b", "c"]


def test_ledger_table_lists_every_record_the_world_kept(folder):
    world = dl.sim.World(folder)
    world.careless.refund("A-17", 40)
    world.careless.refund("A-17", 40)
    world.payments.refund("A-18", 12.5, idempotency_key="k")
    world.mailer.send("ana@example.com", "hello")
    world.tickets.close("T-17")
    table = dl.lab.ledger_table(world)
    assert list(table["service"]) == ["payments", "payments (careless)", "payments (careless)",
                                      "mailer", "ticket desk"]
    assert table["detail"].iloc[0] == "refund 12.5 for order A-18"
    assert table["detail"].iloc[4] == "closed ticket T-17"


def test_sweep_table_pivots_modes_into_columns():
    rows = [{"mode": m, "crash": c, "refunds": i} for i, (c, m) in
            enumerate([(c, m) for c in ("no crash", "x") for m in ("naive", "durable")])]
    table = dl.lab.sweep_table(rows)
    assert list(table.columns) == ["naive", "durable"]
    assert list(table.index) == ["no crash", "x"]
    assert table.loc["x", "durable"] == 3


def test_plots_label_their_axes_and_carry_the_title():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = dl.lab.executions_per_attempt({"naive": [3, 4], "durable": [3, 2]}, title="7 vs 5")
    assert ax.get_title() == "7 vs 5" and ax.get_ylabel() == "step executions"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["attempt 1", "attempt 2", "total"]
    heights = sorted(round(p.get_height()) for p in ax.patches)
    assert heights == sorted([3, 4, 7, 3, 2, 5])
    with pytest.raises(ValueError, match="series 'x'"):
        dl.lab.grouped_bars(["a", "b"], {"x": [1]}, title="t", xlabel="x", ylabel="y")
    ax = dl.lab.step_timeline([("attempt 1", "a", "executed"), ("attempt 2", "a", "replayed"),
                               ("attempt 2", "b", "executed")], title="replay")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["attempt 1", "attempt 2"]
    assert ax.get_xlabel() == "step, in workflow order"
    plt.close("all")


def test_import_durable_lite_loads_no_heavy_library():
    code = ("import sys, durable_lite as dl; dl.lab; "
            "print(sorted(m for m in ('pandas', 'matplotlib', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_events_table_shows_a_parks_deadline_as_seconds_since_the_start_not_an_epoch():
    """Lesson 10's "waiting" row said 1767484819.1907501."""
    @dl.workflow("test-tables-wait", version=1)
    def waits(ctx):
        ctx.step("ask", lambda: "asked")
        return ctx.wait_for_signal("approval", timeout=3 * 24 * 3600)

    clock = dl.FakeClock()
    engine = dl.Engine(dl.MemoryStore(), clock)
    clock.advance(19.191)
    engine.start(waits, run_id="w-1")
    table = dl.lab.events_table(engine, "w-1")
    (waiting,) = table[table["event"] == "waiting"]["detail"]
    assert waiting == "deadline at 259,200.000 s (in 3 d 0 h 00 m)"
    assert "1767" not in " ".join(table["detail"])


def test_the_timeline_legend_says_every_retry_includes_its_backoff():
    """Lesson 10: the successful fifth attempt's segment holds the backoff before it, too."""
    import matplotlib
    matplotlib.use("Agg")
    from durable_lite.lab.timeline import _legend
    labels = [patch.get_label() for patch in _legend()]
    assert "failed attempt" in labels
    assert "a retry's segment includes the backoff before it" in labels
    assert not any("failed attempt (with the backoff" in label for label in labels)
