"""Write exercises/NN_x.ipynb from solutions/NN_x.ipynb: the solutions become stubs.

In a solution notebook, the answer sits between two marker lines:

    def memo_step(db, run_id, name, fn, *args):
        ### BEGIN SOLUTION
        ### HINT: look the (run_id, name) row up first
        row = db.execute(...)
        ...
        ### END SOLUTION

The exercise gets, in its place, `raise NotImplementedError("look the (run_id, name) row
up first")` at the marker's indentation. When the exercise should start from given code
instead (code to fix), write that code commented out after a `### BEGIN STUB` line; the
generator uncomments it:

        ### BEGIN SOLUTION
        issued_at = ctx.now()
        ### BEGIN STUB
        # issued_at = time.time()
        ### END SOLUTION

Markdown cells use the same markers; without a stub the region becomes "*Your answer here.*".
Every output, execution count and timing is cleared. A cell that held a solution region is
marked as an answer cell (`metadata.durable_lite.answer`): the grader runs the learner's
version of those cells and its own version of every other. The result is a pure function
of the solution file, so a test can regenerate it in memory and compare.
"""

import json
import re
from pathlib import Path

import nbformat

BEGIN, STUB, END, HINT = "### BEGIN SOLUTION", "### BEGIN STUB", "### END SOLUTION", "### HINT:"
DEFAULT_HINT = "write your code here, then run the check cell below"
MARKDOWN_STUB = "*Your answer here.*"


class RegionError(ValueError):
    """A BEGIN without END (or the like), naming the notebook and cell."""


def strip_solutions(source: str, cell_type: str = "code", where: str = "cell") -> str:
    """The cell's source with every solution region replaced by its stub."""
    out, region = [], None
    for number, line in enumerate(source.splitlines(), start=1):
        marker = line.strip()
        if marker.startswith(BEGIN):
            if region is not None:
                raise RegionError(f"{where}, line {number}: {BEGIN} inside another solution region")
            region = {"indent": line[:len(line) - len(line.lstrip())], "hints": [],
                      "stub": None, "start": number}
        elif region is None:
            if marker.startswith((STUB, END, HINT)):
                raise RegionError(f"{where}, line {number}: {marker.split(':')[0]} outside a "
                                  f"solution region (no {BEGIN} before it)")
            out.append(line)
        elif marker.startswith(HINT):
            region["hints"].append(marker[len(HINT):].strip())
        elif marker.startswith(STUB):
            region["stub"] = []
        elif marker.startswith(END):
            out.extend(_stub(region, cell_type))
            region = None
        elif region["stub"] is not None:
            region["stub"].append(line if cell_type != "code" else _uncomment(line, where, number))
    if region is not None:
        raise RegionError(f"{where}, line {region['start']}: {BEGIN} has no {END}")
    text = "\n".join(out)
    if source.endswith("\n"):
        return text + "\n" if text else text
    return text.rstrip("\n") if cell_type != "code" else text


def _stub(region, cell_type):
    if region["stub"] is not None:
        return region["stub"]
    hint = " ".join(region["hints"])
    if cell_type != "code":
        return [region["indent"] + (f"*Your answer here.* (Hint: {hint})" if hint else MARKDOWN_STUB)]
    return [f"{region['indent']}raise NotImplementedError({_literal(hint or DEFAULT_HINT)})"]


def _literal(text):
    """A readable Python string literal: double quotes unless the text contains them."""
    if '"' in text and "'" not in text:
        return f"'{text}'"
    return json.dumps(text, ensure_ascii=False)


def _uncomment(line, where, number):
    if not line.strip():
        return ""
    match = re.match(r"^(\s*)# ?(.*)$", line)
    if not match:
        raise RegionError(f"{where}, line {number}: a stub line must be commented out "
                          f"(it runs in the solution otherwise): {line.strip()!r}")
    return match.group(1) + match.group(2)


def exercise_notebook(solution: "nbformat.NotebookNode", name: str) -> "nbformat.NotebookNode":
    """The exercise version of a solution notebook (a new object; the input is untouched)."""
    nb = nbformat.from_dict(json.loads(json.dumps(solution)))
    for index, cell in enumerate(nb.cells):
        where = f"solutions/{name}, cell {index}"
        if cell.cell_type in ("code", "markdown"):
            if has_answer(cell.source):
                cell.metadata["durable_lite"] = {"answer": True}
            cell.source = strip_solutions(cell.source, cell.cell_type, where)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    nb.metadata["durable_lite"] = {"exercise": Path(name).stem,
                                   "generated_from": f"solutions/{name}"}
    return nb


def has_answer(source: str) -> bool:
    """Does this cell hold a solution region (is it one the learner writes in)?"""
    return any(line.strip().startswith(BEGIN) for line in source.splitlines())


def is_answer_cell(cell) -> bool:
    """An answer cell of a generated exercise (marked), or of a solution (has a region)."""
    return bool(cell.get("metadata", {}).get("durable_lite", {}).get("answer")) or \
        has_answer(cell.get("source", ""))


def render(solution_path) -> str:
    """The exact text exercises/<name> should contain."""
    solution_path = Path(solution_path)
    solution = nbformat.read(solution_path, as_version=4)
    text = nbformat.writes(exercise_notebook(solution, solution_path.name))
    return text if text.endswith("\n") else text + "\n"


def default_root() -> Path:
    """The course folder: the current one if it has solutions/, else the package's parent."""
    here = Path.cwd()
    if (here / "solutions").is_dir():
        return here
    return Path(__file__).resolve().parents[2]


def stale(root=None):
    """[(exercise path, reason)] for every exercise that does not match its solution."""
    root = Path(root or default_root())
    problems = []
    solutions = sorted((root / "solutions").glob("*.ipynb"))
    for path in solutions:
        target = root / "exercises" / path.name
        if not target.exists():
            problems.append((target, "missing"))
        elif target.read_text(encoding="utf-8") != render(path):
            problems.append((target, "out of date"))
    names = {p.name for p in solutions}
    for path in sorted((root / "exercises").glob("*.ipynb")):
        if path.name not in names:
            problems.append((path, "has no solution notebook"))
    return problems


def generate(root=None):
    """Write every exercise from its solution; returns the paths written or changed."""
    root = Path(root or default_root())
    written = []
    (root / "exercises").mkdir(exist_ok=True)
    for path in sorted((root / "solutions").glob("*.ipynb")):
        target = root / "exercises" / path.name
        text = render(path)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written
