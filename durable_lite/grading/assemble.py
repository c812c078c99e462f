"""The notebook the grader runs: its own copy of the exercise, with the learner's answers in it.

A learner's notebook is theirs to edit anywhere, but only the answer cells (the cells the
generator marked, where the stubs were) are graded as theirs. Every other cell comes from
the grader's own copy of the exercise: the given code, the setup, and the check cells. So
an edited check cell, a given function rewritten to make a test pass, or a cell added to
write a results file is simply not run; each is reported, the way nbgrader treats its
read-only cells.

Matching an answer cell: by the cell's id (Jupyter keeps it when a notebook is edited and
saved), else by the names it defines (`def memo_step`, `window = ...`), so a cell deleted
and written again still counts. An answer that cannot be found is graded as the stub.

Each check cell becomes a grading step (the grader's tests, run in the kernel after the
learner's code above it), and each answer is scanned for references to the grading
machinery or the kernel's internals: legal Python that no answer to these exercises needs,
and that an instructor should look at (see docs/grading.md: what grading cannot stop).
"""

import ast
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .generate import is_answer_cell

CHECK = re.compile(r'^check\("(q\d+)"', re.M)
DEMO = ("demo", "raises-exception")      # tags of cells the grader does not run

# What an answer to these exercises never needs, and a forged score usually does.
SUSPICIOUS = [
    (r"\bgrading\b", "the grading package"),
    (r"DURABLE_LITE_GRAD|__dl_", "the grader's names"),
    (r"\bsys\.modules\b|\bimportlib\.reload\b", "replacing loaded modules"),
    (r"\bgc\.get_(objects|referrers)\b|\bsys\._getframe\b|\binspect\.(stack|currentframe|getouterframes)\b",
     "reaching into the caller's frames"),
    (r"\bget_ipython\b|\bipykernel\b|\bIPython\b", "the kernel itself"),
    (r"\.ipython|\bstartup\b|JUPYTER_|IPYTHONDIR|site-packages|\.pth\b",
     "startup files or installed packages"),
    (r"\bbuiltins\b|__builtins__", "Python's built-in functions"),
    (r"\bos\._exit\b|\bos\.kill\b|\bos\.fork\b|\bsetsid\b|\bstart_new_session\b|\bdaemon\b",
     "processes and exits"),
]


@dataclass
class Cell:
    kind: str                    # "given" | "answer" | "check" | "demo"
    source: str
    index: int                   # its place in the grader's copy
    question: Optional[str] = None   # a check cell's question; an answer cell's next question
    cell: object = None          # the notebook cell to save the outputs in


@dataclass
class Assembled:
    cells: List[Cell]
    notebook: object                                             # the copy to keep, run
    notes: List[str] = field(default_factory=list)               # what the grader set aside
    flags: Dict[str, List[str]] = field(default_factory=dict)    # question -> reasons to look


def assemble(grader_nb, learner_nb, exercise) -> Assembled:
    """The cells to run, in the grader's order, and notes on what the learner's notebook
    changed that the grader did not take."""
    import nbformat
    out = nbformat.from_dict(grader_nb)          # a copy: the executed notebook to keep
    learner = [c for c in learner_nb.get("cells", []) if isinstance(c, dict)]
    by_id = {}
    for c in learner:
        by_id.setdefault(c.get("id"), c)
    used, notes, cells = set(), [], []
    questions = list(exercise.questions)
    for index, cell in enumerate(out.cells):
        source = _text(cell.get("source", ""))
        upcoming = _next_question(out.cells, index, questions)
        if cell.cell_type == "code" and CHECK.search(source):
            cells.append(Cell("check", source, index, CHECK.search(source).group(1), cell))
        elif is_answer_cell(cell):
            theirs = _find_answer(cell, learner, by_id, used)
            if theirs is None:
                if cell.cell_type == "code":
                    notes.append(f"the answer cell before {upcoming or 'the end'} "
                                 f"({_defines_text(source)}) is not in the notebook: graded as "
                                 "the exercise's stub")
            else:
                used.add(id(theirs))
                cell.source = _text(theirs.get("source", ""))
            if cell.cell_type == "code":
                cells.append(Cell("answer", cell.source, index, upcoming, cell))
        elif cell.cell_type == "code":
            tags = cell.get("metadata", {}).get("tags", [])
            kind = "demo" if any(t in tags for t in DEMO) else "given"
            cells.append(Cell(kind, source, index, upcoming, cell))
        mine = by_id.get(cell.get("id"))
        if mine is not None and not is_answer_cell(cell):
            used.add(id(mine))
            if cell.cell_type == "code" and _norm(_text(mine.get("source", ""))) != _norm(source):
                check = CHECK.search(source)
                what = (f"the check cell of {check.group(1)}" if check else
                        f"the given cell {_defines_text(source)}" if _defines(source) else
                        f"the given cell that begins {source.strip().splitlines()[0][:40]!r}")
                notes.append(f"{what} was changed in the notebook: the grader ran the "
                             "exercise's own version")
    added = [c for c in learner if id(c) not in used and c.get("cell_type") == "code"
             and _text(c.get("source", "")).strip()]
    if added:
        notes.append(f"{len(added)} code cell(s) added to the notebook were not run: the grader "
                     "runs the exercise's cells and your answer cells only (put helpers inside "
                     "an answer cell)")
    flags = {}
    for c in cells:
        if c.kind == "answer":
            for reason in suspicious(c.source):
                flags.setdefault(c.question or "?", [])
                if reason not in flags[c.question or "?"]:
                    flags[c.question or "?"].append(reason)
    return Assembled(cells, out, notes, flags)


def suspicious(source: str) -> List[str]:
    """Why an answer deserves a look: what it refers to that no answer needs."""
    code = "\n".join(line for line in source.splitlines()
                     if not line.lstrip().startswith("#"))
    return [f"refers to {why} ({match.group(0)!r})"
            for pattern, why in SUSPICIOUS for match in [re.search(pattern, code)] if match]


def _find_answer(cell, learner, by_id, used):
    mine = by_id.get(cell.get("id"))
    if mine is not None and id(mine) not in used:
        return mine
    functions, values = _defines(_text(cell.get("source", "")), split=True)
    if not functions and not values:
        return None

    # The cell was deleted and written again (a new id): the last cell that defines the
    # same function (or, for a cell of values only, the same names) is the answer, as it
    # would be after "Run All".
    def matches(c):
        theirs_f, theirs_v = _defines(_text(c.get("source", "")), split=True)
        return bool(functions & theirs_f) if functions else values <= theirs_v

    candidates = [c for c in learner if c.get("cell_type") == cell.cell_type
                  and id(c) not in used and matches(c)]
    return candidates[-1] if candidates else None


def _defines(source: str, split: bool = False):
    """The top-level names a code cell defines: functions and classes, and assigned names
    (both as one set, or as (functions, values))."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        found = set(re.findall(r"^(?:async )?def (\w+)", source, re.M))
        return (found, set()) if split else found
    functions, values = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            functions.add(node.name)
        elif isinstance(node, ast.Assign):
            values |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return (functions, values) if split else functions | values


def _defines_text(source: str) -> str:
    names = sorted(_defines(source))
    return "defining " + ", ".join(names) if names else "no definitions"


def _next_question(cells, index, questions) -> Optional[str]:
    for cell in cells[index:]:
        match = CHECK.search(_text(cell.get("source", ""))) if cell.cell_type == "code" else None
        if match and match.group(1) in questions:
            return match.group(1)
    return None


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def _norm(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())
