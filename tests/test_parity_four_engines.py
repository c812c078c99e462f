"""The parity suite across four engines: lesson 01's refund killed by a real SIGKILL inside
each effect's window and just after each checkpoint, keyed and not, on durable_lite, DBOS,
Temporal and LangGraph (in each of its three durability modes), then finished by a fresh
process; refunds, emails and closes counted in the simulated world's ledgers.

The table is measured once per module (crash_table.measure: every cell in folders, task
queues and ids of its own, six at a time, on the session's Temporal server and DBOS on
SQLite files), and then:

- every cell is exactly what the course's rule predicts for its column (no cell skipped);
- every cell that differs from durable_lite's is a known difference: KNOWN names it, it is
  registered in differences.py, and its evidence test exists; a known difference that no
  longer shows is an error too;
- the committed table, which lesson 15 reads, equals the one measured here.
"""

import re

from engines_support import *  # noqa: F401,F403

from durable_lite.engines.compare import crash_table as ct
from durable_lite.engines.compare import differences
from durable_lite.faults import AFTER_EFFECT

pytestmark = pytest.mark.crash
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def measured(temporal_address, tmp_path_factory):
    return ct.measure(tmp_path_factory.mktemp("four-engines"), temporal_address, jobs=6)


# the measured table --------------------------------------------------------------------------
@pytest.mark.parametrize("column", ct.COLUMNS)
def test_every_cell_is_what_the_rule_predicts_for_its_column(measured, column):
    assert measured.columns == list(ct.COLUMNS) and measured.cases == ct.CASES
    wrong = [(ct.case_id(case), cell, wanted) for case, col, cell, wanted in measured.unexpected()
             if col == column]
    assert not wrong, f"{column}: cells the rule did not predict: {wrong}"
    for case in ct.CASES:
        cell = measured.cell(case, column)
        assert cell["killed"] and cell["status"] == "completed", (ct.case_id(case), cell)


def test_every_cell_that_differs_from_durable_lite_is_a_registered_known_difference(measured):
    differing = measured.differences()
    assert differing, "the table shows no difference at all: LangGraph's exit mode should"
    for case, column, keys in differing:
        assert column in ct.KNOWN, f"{ct.case_id(case)} on {column} differs ({keys}) unexplained"
        entry = ct.difference(column)
        assert entry is not None and entry.key == ct.KNOWN[column].key
        filename, test = entry.evidence.split("::")
        assert test in _tests_in(filename), f"{entry.key}: no {entry.evidence}"


def test_a_known_difference_shows_in_every_case_it_claims_and_nowhere_else(measured):
    differing = {(ct.case_id(case), column) for case, column, _ in measured.differences()}
    for column in ct.KNOWN:
        # starting over replays nothing: every case of the column differs from durable_lite's
        assert {c for c, col in differing if col == column} == {ct.case_id(c) for c in ct.CASES}
    assert {col for _, col in differing} == set(ct.KNOWN)


def test_the_committed_table_the_lesson_reads_equals_the_measured_one(measured):
    committed = ct.committed()
    changed = sorted(k for k in set(measured.cells) | set(committed.cells)
                     if measured.cells.get(k) != committed.cells.get(k))
    assert not changed, (f"cells that changed: {changed}; commit the table anew with "
                         f"`python -m durable_lite.engines.compare.crash_table --write`")
    assert committed.measured_with == measured.measured_with == ct.versions()


# the rule, the registry and the picture (no engine needed) ----------------------------------
def test_the_rule_for_durable_lite_is_lesson_03s_window():
    """Only the effect whose window the kill fell in happens twice; a key turns the second
    request into the first one's receipt (the numbers the lessons teach)."""
    for step, when, keyed in ct.CASES:
        cell = ct.expected((step, when, keyed), "durable_lite")
        again = when == AFTER_EFFECT
        assert (cell["refunds paid"], cell["refund requests"], cell["emails"],
                cell["tickets closed"]) == (
            2 if again and step == "refund" and not keyed else 1,
            2 if again and step == "refund" else 1,
            2 if again and step == "email" and not keyed else 1,
            2 if again and step == "close" and not keyed else 1)


def test_the_rule_for_exit_mode_repeats_every_effect_up_to_the_kill():
    cell = ct.expected(("email", "after_checkpoint", False), "LangGraph (exit)")
    assert (cell["refunds paid"], cell["emails"], cell["tickets closed"]) == (2, 2, 1)
    assert cell["replayed"] == [] and cell["result"]["refund_id"] == "R-2"
    keyed = ct.expected(("close", "after_effect", True), "LangGraph (exit)")
    assert (keyed["refunds paid"], keyed["refund requests"], keyed["emails"]) == (1, 2, 1)


def test_every_known_difference_is_registered_with_its_evidence():
    for column, known in ct.KNOWN.items():
        assert column in ct.COLUMNS
        entry = ct.difference(column)
        assert entry in getattr(differences, known.registry).values()
        filename, test = entry.evidence.split("::")
        assert test in _tests_in(filename)


def test_the_committed_table_round_trips_through_json():
    table = ct.committed()
    assert ct.CrashTable.from_json(table.to_json()).cells == table.cells
    assert len(table.cells) == len(ct.CASES) * len(ct.COLUMNS)


def test_the_heat_map_frames_exactly_the_cells_that_differ_and_names_their_difference():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    import durable_lite as dl
    table = ct.committed()
    fig = dl.lab.crash_heat_map(table)
    try:
        ax = fig.axes[0]
        frames = [p for p in ax.patches if isinstance(p, Rectangle)]
        shown = table.shown_differences()         # cells whose counts differ, no others
        assert 0 < len(shown) <= len(table.differences()) and len(frames) == len(shown)
        texts = [t.get_text() for t in ax.texts]
        assert texts.count(ct.KNOWN["LangGraph (exit)"].short) == len(shown)
        assert "2 · 2 · 2" in texts and "1 · 1 · 1" in texts
        assert ax.get_title().startswith(table.finding())
        assert [t.get_text() for t in ax.get_xticklabels()][0] == "durable_lite"
    finally:
        plt.close(fig)


def test_the_finding_names_the_columns_that_differ():
    table = ct.committed()
    assert table.finding() == ("The same kill leaves the same ledgers on every engine, "
                               "except LangGraph (exit)")
    same = ct.CrashTable({k: v for k, v in table.cells.items() if k[1] != "LangGraph (exit)"},
                         table.measured_with)
    assert same.finding() == "The same kill leaves the same ledgers on every engine"


def _tests_in(filename):
    with open(os.path.join(TESTS_DIR, filename), encoding="utf-8") as f:
        return set(re.findall(r"^def (test_\w+)", f.read(), re.M))


def test_lesson_14s_two_columns_are_the_committed_tables_own_and_read_alike():
    """Lesson 14 shows durable_lite beside DBOS (CrashTable.only) and says every DBOS cell
    repeats its durable_lite neighbour: the committed measurement says so."""
    table = ct.committed()
    two = table.only(["durable_lite", "DBOS"])
    assert two.columns == ["durable_lite", "DBOS"] and two.cases == table.cases
    assert all(two.cell(case, column) == table.cell(case, column)
               for case in two.cases for column in two.columns)
    assert two.shown_differences() == []
    with pytest.raises(ValueError, match="durable_lite must be one of those kept"):
        table.only(["DBOS"])
    with pytest.raises(ValueError, match="the table's columns are"):
        table.only(["durable_lite", "Restate"])
