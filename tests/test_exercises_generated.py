"""exercises/ is generated from solutions/ and nobody edits it by hand: prove both.

The generator is run in memory and compared with the committed files, so a solution
edited without `make exercises` fails here, naming the notebook to regenerate.
"""

import ast
import re
from pathlib import Path

import nbformat
import pytest

from durable_lite.grading import EXERCISES, exercise
from durable_lite.grading.generate import (RegionError, exercise_notebook, render, stale,
                                           strip_solutions)

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
NAMES = [p.stem for p in SOLUTIONS]


def test_every_registered_exercise_has_a_solution_notebook():
    assert sorted(EXERCISES) == NAMES


def test_exercises_are_up_to_date_with_solutions():
    problems = stale(ROOT)
    assert not problems, ("exercises/ does not match solutions/ — run `make exercises`:\n" +
                          "\n".join(f"  {path.name}: {why}" for path, why in problems))


@pytest.mark.parametrize("name", NAMES)
def test_rendering_is_deterministic(name):
    path = ROOT / "solutions" / f"{name}.ipynb"
    assert render(path) == render(path)


@pytest.mark.parametrize("name", NAMES)
def test_exercise_holds_no_solution_and_no_outputs(name):
    nb = nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)
    text = (ROOT / "exercises" / f"{name}.ipynb").read_text()
    for marker in ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN STUB", "### HINT"):
        assert marker not in text
    for cell in nb.cells:
        assert "execution" not in cell.metadata
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
            ast.parse(cell.source)        # every stub is valid Python
    assert nb.metadata["durable_lite"]["exercise"] == name


@pytest.mark.parametrize("name", NAMES)
def test_every_question_has_a_check_cell_and_a_stub(name):
    solution = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    generated = nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)
    checked = {m for c in generated.cells if c.cell_type == "code"
               for m in re.findall(r'^check\("(q\d+)"', c.source, re.M)}
    assert checked == set(exercise(name).questions)
    regions = sum(c.source.count("### BEGIN SOLUTION") for c in solution.cells)
    assert regions >= len(exercise(name).questions)


@pytest.mark.parametrize("name", NAMES)
def test_solutions_are_committed_executed_without_errors_or_paths(name):
    nb = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, "execute the solutions before committing"
        for out in cell.outputs:
            assert out.output_type != "error", cell.source
            text = str(out.get("text", "")) + str(out.get("data", {}).get("text/plain", ""))
            assert not any(p in text for p in ("/tmp", "/dev/shm", "/home", "/work"))
            # (a crash table's legend says what its marks mean: "✗ broke, · held")
            assert "✗" not in text.replace("✗ broke, · held", ""), "a solution failed its own check"


# the generator itself -------------------------------------------------------------------------
def test_region_becomes_a_stub_with_the_hint_at_the_markers_indentation():
    source = ("def f(x):\n"
              "    ### BEGIN SOLUTION\n"
              "    ### HINT: double it\n"
              "    return 2 * x\n"
              "    ### END SOLUTION\n")
    assert strip_solutions(source) == 'def f(x):\n    raise NotImplementedError("double it")\n'


def test_region_without_hint_gets_a_default_message():
    out = strip_solutions("### BEGIN SOLUTION\nx = 1\n### END SOLUTION")
    assert out.startswith("raise NotImplementedError(") and "check" in out


def test_hint_with_double_quotes_is_written_with_single_quotes():
    out = strip_solutions('    ### BEGIN SOLUTION\n    ### HINT: call f("a")\n    ### END SOLUTION')
    assert out == """    raise NotImplementedError('call f("a")')"""
    ast.parse(out.strip())


def test_stub_block_is_uncommented_into_the_exercise():
    source = ("def wf(ctx):\n"
              "    ### BEGIN SOLUTION\n"
              "    t = ctx.now()\n"
              "    ### BEGIN STUB\n"
              "    # t = time.time()\n"
              "    # if t:\n"
              "    #     pass\n"
              "\n"
              "    ### END SOLUTION\n"
              "    return t\n")
    assert strip_solutions(source) == ("def wf(ctx):\n    t = time.time()\n    if t:\n        pass\n"
                                       "\n    return t\n")


def test_markdown_region_becomes_an_answer_placeholder():
    out = strip_solutions("Explain:\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION", "markdown")
    assert out == "Explain:\n*Your answer here.*"


@pytest.mark.parametrize("source, problem", [
    ("### BEGIN SOLUTION\nx = 1\n", "has no"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside another"),
    ("x = 1\n### END SOLUTION\n", "outside a solution region"),
    ("### BEGIN SOLUTION\n### BEGIN STUB\nx = 1\n### END SOLUTION\n", "commented out"),
])
def test_malformed_regions_are_reported_with_their_place(source, problem):
    with pytest.raises(RegionError, match=problem) as info:
        strip_solutions(source, where="solutions/x.ipynb, cell 3")
    assert "cell 3" in str(info.value)


def test_exercise_notebook_clears_outputs_and_leaves_the_solution_untouched():
    cell = nbformat.v4.new_code_cell("### BEGIN SOLUTION\nprint(1)\n### END SOLUTION")
    cell.outputs = [nbformat.v4.new_output("stream", text="1\n")]
    cell.execution_count = 3
    cell.metadata["execution"] = {"iopub.status.busy": "2026-01-01"}
    solution = nbformat.v4.new_notebook(cells=[cell])
    out = exercise_notebook(solution, "01_naive_retry.ipynb")
    assert out.cells[0].outputs == [] and out.cells[0].execution_count is None
    assert "execution" not in out.cells[0].metadata
    assert solution.cells[0].outputs and solution.cells[0].execution_count == 3
    assert out.metadata["durable_lite"]["exercise"] == "01_naive_retry"


# the stuck ladder: hints revealed on demand ---------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_every_question_has_hints_folded_under_its_check(name):
    """After each check cell comes a markdown cell of one to three collapsed hints, numbered
    in order; the generated exercise keeps them (they are the learner's, not the solution)."""
    for folder in ("solutions", "exercises"):
        cells = nbformat.read(ROOT / folder / f"{name}.ipynb", as_version=4).cells
        for i, cell in enumerate(cells):
            match = re.match(r'check\("(q\d+)"', cell.source) if cell.cell_type == "code" else None
            if not match:
                continue
            hints = cells[i + 1] if i + 1 < len(cells) else None
            where = f"{folder}/{name}, {match.group(1)}"
            assert hints is not None and hints.cell_type == "markdown", f"{where}: no hint cell"
            summaries = re.findall(r"<details><summary>(Hint \d)</summary>", hints.source)
            assert 1 <= len(summaries) <= 3, f"{where}: {len(summaries)} hints"
            assert summaries == [f"Hint {n}" for n in range(1, len(summaries) + 1)], where
            assert hints.source.count("</details>") == len(summaries), where
            assert "### BEGIN SOLUTION" not in hints.source, where
