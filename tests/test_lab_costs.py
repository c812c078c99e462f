"""Lesson 13's teaching aids: the ladder measured here and read from the reference run, the
break-even map, and the decision table (its model, and the widget driven like a learner
drives it). No timing is asserted: only that every rung was timed and shown."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from durable_lite import costs
from durable_lite.lab import break_even, decision_table, ladder, workspace

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((ROOT / "benchmarks" / "reference_run.json").read_text())


# the ladder --------------------------------------------------------------------------------
def test_measure_ladder_times_every_local_rung(tmp_path):
    timings = ladder.measure_ladder(tmp_path, steps=5, rounds=2)
    assert [t.key for t in timings] == list(ladder.LOCAL)
    for t in timings:
        assert t.steps == 5 and len(t.per_step_us) == 2 and t.median_us > 0
        assert t.best_us == min(t.per_step_us)
    # each write() rung wrote one line per step, from the start of its log file over the
    # last run's (the rest of the file is the room set aside beforehand)
    for name in ("ladder-write.log", "ladder-fsync.log"):
        data = (tmp_path / name).read_bytes()
        assert len(data) == 5 * ladder.ROW_ROOM
        rows = [json.loads(line) for line in data.split(b"\n")[:5]]
        assert [r[1] for r in rows] == list(range(5))
        assert rows[0][2:5] == ["step", ladder.STEP_NAME, 1]


MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0
tmpfs /tmp tmpfs rw 0 0
/dev/vdb /tmp/a\\040disk xfs rw 0 0
"""


@pytest.mark.parametrize("path, kind", [
    ("/", "ext4"), ("/home/someone/course", "ext4"), ("/dev/shm/x", "tmpfs"), ("/tmp", "tmpfs"),
    ("/tmp/a disk/runs.db", "xfs"), ("/tmpfiles", "ext4"),   # a longer name, not inside /tmp
])
def test_the_file_system_of_a_path_is_its_deepest_mount(tmp_path, path, kind):
    table = tmp_path / "mounts"
    table.write_text(MOUNTS)
    assert workspace.file_system(path, str(table)) == kind
    assert workspace.file_system(path, str(tmp_path / "absent")) == ""   # no table: unknown


def test_the_ladder_is_timed_on_a_disk_where_the_temporary_folder_is_in_memory(
        tmp_path, monkeypatch):
    # fdatasync in memory waits for nothing (the test run's own TMPDIR is a tmpfs on
    # Linux): without a folder, the ladder is timed beside the caller instead, and cleaned up
    if not os.path.isdir("/dev/shm") or not workspace.in_memory("/dev/shm"):
        pytest.skip("no file system in memory here to stand for a tmpfs /tmp (not Linux)")
    if workspace.in_memory(ROOT):
        pytest.skip("the course itself is held in memory here")
    shm = tempfile.mkdtemp(dir="/dev/shm")
    try:
        monkeypatch.setattr(tempfile, "tempdir", shm)
        monkeypatch.chdir(ROOT)
        assert workspace.disk_folder() == str(ROOT)
        before = set(os.listdir(ROOT))
        measured = ladder.measure_ladder(steps=2, rounds=1, keys=("write", "fsync"))
        assert [t.in_memory for t in measured] == [False, False]
        assert set(os.listdir(ROOT)) == before and os.listdir(shm) == []
        assert all(t.in_memory for t in ladder.measure_ladder(shm, steps=2, rounds=1,
                                                              keys=("fsync",)))
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    if not workspace.in_memory(tmp_path):        # one on a disk is used as it is
        assert workspace.disk_folder() == str(tmp_path)


def test_the_bare_rows_are_the_rows_durable_lite_stores(tmp_path):
    db = ladder.open_bare(str(tmp_path / "bare.db"))
    ladder.bare_steps(db, "r", 3, "w")
    rows = db.execute(ladder.SELECT_ROWS, ("r",)).fetchall()
    assert [(r[0], r[2], json.loads(r[4])) for r in rows] == [(i, "noop", i) for i in range(3)]


def test_the_reference_run_is_found_beside_the_package_or_explained(tmp_path):
    assert ladder.load_reference_run() == REFERENCE
    with pytest.raises(FileNotFoundError, match="make bench"):
        ladder.load_reference_run(tmp_path / "nowhere.json")


def test_the_reference_ladder_has_every_rung_in_order():
    timings = ladder.reference_ladder(REFERENCE)
    keys = [t.key for t in timings]
    assert set(ladder.LOCAL) <= set(keys)
    assert keys == [r.key for r in ladder.RUNGS if r.key in keys]
    assert {t.steps for t in timings} == {max(REFERENCE["meta"]["steps"])}
    x = ladder.ratios(timings)
    assert x["sqlite_normal"] == x["sqlite_full"] == 1.0


def test_ladder_table_puts_both_runs_side_by_side(tmp_path):
    measured = ladder.measure_ladder(tmp_path, steps=3, rounds=1, keys=("plain", "write"))
    table = ladder.ladder_table(ladder.reference_ladder(REFERENCE), measured)
    assert list(table.index[:3]) == ["plain function call", "write() of the row",
                                     "write() + fdatasync"]
    this_run = [c for c in table.columns if "this run" in c]
    assert len(this_run) == 2
    assert table.loc["write() + fdatasync", this_run[0]] == "–"     # not measured here
    assert table.loc["write() of the row", "survives"] == ladder.KILL


def test_share_table_sets_each_rung_against_a_step():
    reference = ladder.reference_ladder(REFERENCE)
    table = ladder.share_table(reference, {"of 1 s": 1.0, "of 1 ms": 0.001})
    assert list(table.columns) == ["per step", "of 1 s", "of 1 ms"]
    write = next(t for t in reference if t.key == "write")
    assert table.loc["write() of the row", "of 1 ms"] == \
        f"{ladder._short(write.median_us / 1000 * 100)}%"


def test_short_numbers_keep_three_digits():
    assert [ladder._short(v) for v in (0.05123, 1.934, 23.14, 1716.2)] == \
        ["0.0512", "1.93", "23.1", "1,716"]


# the plots ---------------------------------------------------------------------------------
@pytest.fixture
def plt():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    yield plt
    plt.close("all")


def test_plot_ladder_draws_a_bar_per_rung_and_the_run_measured_here(plt, tmp_path):
    reference = ladder.reference_ladder(REFERENCE)
    measured = ladder.measure_ladder(tmp_path, steps=3, rounds=1)
    ax = ladder.plot_ladder(reference, measured)
    assert len(ax.patches) == len(reference)
    assert len(ax.get_yticklabels()) == len(reference)
    (dots,) = ax.lines
    assert len(dots.get_xdata()) == len(measured)


def test_crash_intervals_read_at_a_glance():
    assert [break_even.every(h) for h in (26_100, 8.05, 0.000362, 0.5, 72, float("inf"))] == \
        ["every 3 years", "every 8.1 hours", "every 1.3 seconds", "every 30 minutes",
         "every 3 days", "never"]


def test_the_break_even_line_falls_as_runs_grow():
    grid = break_even.steps_grid(2, 1000)
    assert grid[0] == 2 and grid[-1] == 1000 and grid == sorted(set(grid))
    for kind in break_even.STEP_KINDS:
        line = break_even.break_even_line(kind, 23e-6, grid)
        assert all(a > b for a, b in zip(line, line[1:]))


def test_plot_break_even_draws_one_line_per_kind_and_checkpoint(plt):
    ax = break_even.plot_break_even({"a": 23e-6, "b": 2e-3}, mark_rate=0.1)
    assert len(ax.get_lines()) == 2 * len(break_even.STEP_KINDS) + 1      # + the marked rate
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("model call" in label and "checkpoint a" in label for label in labels)


def test_the_break_even_map_is_shaded_in_bands_that_do_not_overlap_each_named_inside(plt):
    """One band per set of kinds that pay, between consecutive solid lines: a point of the
    map lies in exactly one band, and the band's label says whose it is."""
    import numpy as np
    ax = break_even.plot_break_even({"a": 23e-6, "b": 2e-3}, mark_rate=0.1)
    bands = ax.collections
    assert len(bands) == len(break_even.STEP_KINDS)           # the first checkpoint's bands
    texts = [t.get_text() for t in ax.texts]
    assert "pays for model calls only" in texts and "pays for every kind" in texts
    assert break_even.CEREMONY in texts                 # the white corner says what it means
    assert break_even.band_labels()[2] == "pays for model calls and tool calls"
    # (crash rate, steps) -> the band it lies in: None left of every line (ceremony)
    for point, band_index in [((1e-5, 10), None), ((1e-3, 100), 0), ((10.0, 1000), 1),
                              ((500.0, 5000), 2)]:
        inside = [i for i, band in enumerate(bands) if band.get_paths()[0].contains_point(point)]
        assert inside == ([] if band_index is None else [band_index]), (point, inside)
    for band, kind in zip(bands, break_even.STEP_KINDS):
        assert np.allclose(band.get_facecolor()[0][:3],
                           __import__("matplotlib.colors").colors.to_rgb(kind.colour))


# the decision table: model ------------------------------------------------------------------
KEY = {w.name: costs.reasons(w) for w in costs.EXAMPLES}


def test_model_starts_empty_and_counts_answers():
    m = decision_table.DecisionTableModel()
    assert m.answered == 0 and m.cells == 15 and m.right is None
    m.set("refund", "irreversible", True)
    assert m.answered == 1 and m.verdict("refund") is None       # a row needs all three
    m.set("refund", "long", False).set("refund", "waits", False)
    assert m.verdict("refund") == costs.DURABLE
    assert "3 of 15 cells answered" in m.summary()


def test_model_check_marks_each_cell_and_goes_stale_when_an_answer_changes():
    m = decision_table.DecisionTableModel().fill(KEY)
    assert m.check() == [] and m.right == 15 and m.summary() == "all 15 cells right"
    m.set("thumbnail batch", "long", True)
    assert m.is_right("thumbnail batch", "long") is None          # changed since the check
    (miss,) = m.check()
    assert miss.workload == "thumbnail batch" and m.right == 14
    assert m.is_right("thumbnail batch", "long") is False and m.is_right("refund", "long")


def test_a_check_marks_only_the_cells_answered_and_keeps_the_key_until_all_are():
    # pressing Check with nothing answered marked all 15 cells and showed the whole key
    m = decision_table.DecisionTableModel()
    assert m.check() == [] and not m.complete
    assert all(m.is_right(w.name, r) is None for w in costs.EXAMPLES for r in costs.REASONS)
    assert m.summary().startswith("nothing answered yet")
    right = KEY["refund"]["irreversible"]
    m.set("refund", "irreversible", right).set("refund", "long", not KEY["refund"]["long"])
    (miss,) = m.check()
    assert (miss.workload, miss.reason) == ("refund", "long") and not m.complete
    assert m.is_right("refund", "irreversible") and m.is_right("refund", "waits") is None
    assert m.summary() == ("1 of the 2 cells answered are right; 13 still to answer "
                           "(the key shows once all are)")
    assert decision_table.DecisionTableModel().fill(KEY).check() == []


def test_model_refuses_what_is_not_in_the_table():
    m = decision_table.DecisionTableModel()
    with pytest.raises(KeyError, match="no workload"):
        m.set("payroll", "long", True)
    with pytest.raises(KeyError, match="reason"):
        m.set("refund", "cheap", True)
    with pytest.raises(ValueError):
        m.set("refund", "long", "yes")


def test_numbers_in_the_arithmetic_table_stay_readable():
    assert [decision_table._num(v) for v in (0, 2.2e-8, 0.0294, 3378.4, 6.4e7, 1.6e42)] == \
        ["0", "< 0.000001", "0.0294", "3,378", "64,000,000", "1.60e+42"]


def test_tables_of_the_workloads_the_arithmetic_and_the_answers():
    described = decision_table.workloads_table()
    assert list(described.index) == [w.name for w in costs.EXAMPLES]
    assert described.loc["thumbnail batch", "steps"] == 1000
    # the learner reads effects and waits in the description: no column gives them away
    assert list(described.columns) == ["steps", "work per run (s)", "model $ per run",
                                       "what it does"]
    numbers = decision_table.arithmetic_table(runs=1000)
    assert numbers.columns.name == "per 1,000 runs"
    assert numbers.loc["refund", "duplicate effects"] != "0"
    assert numbers.loc["ticket summary", "duplicate effects"] == "0"
    key = decision_table.answer_key()
    assert key.loc["access request", "waits?"] == "yes"
    assert key.loc["ticket summary", "verdict"] == costs.RETRY


# the decision table: widget, driven ------------------------------------------------------
@pytest.fixture
def table():
    pytest.importorskip("ipywidgets")
    return decision_table.DecisionTable()


def test_widget_toggles_set_the_model_and_the_row_verdict(table):
    for reason in costs.REASONS:
        table.toggles["ticket summary", reason].value = False
    assert table.model.answers["ticket summary"] == {r: False for r in costs.REASONS}
    assert table.verdicts["ticket summary"].value == costs.RETRY
    assert "…" in table.verdicts["refund"].value
    assert "3 of 15 cells answered" in table.status.value


def test_widget_check_colours_cells_and_says_why(table):
    for (workload, reason), toggle in table.toggles.items():
        toggle.value = KEY[workload][reason]
    table.toggles["nightly research report", "long"].value = False        # one mistake
    table.check_button.click()
    assert table.state("nightly research report", "long") == decision_table.WRONG
    assert table.state("refund", "irreversible") == decision_table.RIGHT
    assert "✗" in table.marks["nightly research report", "long"].value
    assert "✓" in table.marks["refund", "irreversible"].value
    assert "14 of 15 cells right" in table.status.value
    assert "nightly research report" in table.why.value and "500.5 s" in table.why.value
    table.toggles["nightly research report", "long"].value = True
    assert table.state("refund", "irreversible") is None                  # stale: uncoloured
    assert table.marks["refund", "irreversible"].value == ""
    table.check_button.click()
    assert table.status.value == "all 15 cells right" and table.why.value == ""
    assert {table.state(*cell) for cell in table.toggles} == {decision_table.RIGHT}


def test_widget_colours_by_class_never_by_button_style(table):
    """ipywidgets 8 redraws ToggleButtons with the previous button_style whenever another of
    its traits changes: colours set that way showed each Check one change late."""
    for toggle in table.toggles.values():
        toggle.value = True
    table.check_button.click()
    assert all(t.button_style == "" for t in table.toggles.values())
    assert all("dl-answer" in t._dom_classes for t in table.toggles.values())
    assert all(sum(c in t._dom_classes for c in (decision_table.RIGHT, decision_table.WRONG)) == 1
               for t in table.toggles.values())


def test_widget_shows_the_key_only_after_a_check_of_every_cell(table):
    assert table.key.value == ""                                           # nothing to spoil
    table.check_button.click()                         # nothing answered: nothing marked
    assert table.key.value == "" and table.why.value == ""
    assert "nothing answered yet" in table.status.value
    assert not any(table.state(w.name, r) for w in costs.EXAMPLES for r in costs.REASONS)
    table.toggles["refund", "long"].value = True
    table.check_button.click()                         # one answered: that one marked only
    assert table.key.value == "" and table.state("refund", "long") is not None
    assert table.state("refund", "waits") is None
    for workload in costs.EXAMPLES:
        for reason in costs.REASONS:
            table.toggles[workload.name, reason].value = KEY[workload.name][reason]
    table.toggles["refund", "long"].value = True
    table.check_button.click()
    for workload in costs.EXAMPLES:
        assert workload.name in table.key.value
    assert "retry from the top" in table.key.value and "The key" in table.key.value
    table.toggles["refund", "long"].value = False                          # a new answer: check again
    assert table.key.value == ""


def test_the_key_says_what_the_answer_key_table_says():
    import re
    html_key = decision_table.key_html()
    frame = decision_table.answer_key()
    rows = re.findall(r"<tr>(.*?)</tr>", html_key)[1:]
    cells = [re.findall(r"<td>(.*?)</td>", row) for row in rows]
    assert [[c[0], *c[1:]] for c in cells] == [[name, *frame.loc[name]] for name in frame.index]


def test_widget_lays_the_table_out_on_one_grid(table):
    """Toggles and marks in fixed columns, so they cannot wrap or drift in a narrow window."""
    assert table.grid.layout.grid_template_columns == decision_table._COLUMNS
    per_row = 2 + 2 * len(costs.REASONS)            # workload, (answer, mark) per reason, verdict
    assert decision_table._COLUMNS.count("max-content") == len(costs.REASONS)
    assert len(table.grid.children) == per_row * (1 + len(costs.EXAMPLES))
    assert table.grid.children[per_row + 1] is table.toggles[costs.EXAMPLES[0].name, costs.REASONS[0]]
    assert all(t.layout.width == "max-content" for t in table.toggles.values())


def test_widget_shows_a_callback_error_instead_of_losing_it(table, monkeypatch):
    def broken():
        raise RuntimeError("the check broke")
    monkeypatch.setattr(table.model, "check", broken)
    table.check_button.click()
    assert "the check broke" in table.status.value


def test_widget_repr_is_short_and_stable(table):
    assert repr(table) == "DecisionTable(5 workloads, 0 of 15 cells answered; press Check when done)"
    assert table._repr_mimebundle_()["text/plain"] == repr(table)
