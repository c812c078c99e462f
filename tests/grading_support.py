"""Helpers shared by the grading tests: read a grader's score, and make a known-wrong
answer by swapping one cell of a solution notebook."""

from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent


def statuses(score):
    """{question id: "passed" | "failed" | "not attempted"}."""
    return {q["question"]: q["status"] for q in score.questions}


def failing_tests(score, qid):
    """Names of the tests of question `qid` that did not pass."""
    return [t["name"] for t in score.question(qid)["tests"] if t["status"] != "passed"]


def with_code(name, marker, new_source, tmp_path):
    """A copy of solution `name` whose one cell containing `marker` holds `new_source`."""
    nb = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    assert len(cells) == 1, f"{marker!r} should be in exactly one cell of {name}"
    cells[0].source = new_source
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path
