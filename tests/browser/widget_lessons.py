"""Which lessons show which widgets, found by reading the files (lessons get renumbered).

A lab widget is any public class or function in `durable_lite/lab/` that builds ipywidgets
(it imports them somewhere in its body); the four the course is built around are listed
as well, so a refactoring that hides the import cannot make a widget disappear from the
tests. A lesson shows a widget when one of its code cells calls it, `Name(...)`. A lesson
that imports ipywidgets at the top level of a cell to build its own (lesson 00's "does it
work?" button) counts too.
"""

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Tuple

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
LAB = ROOT / "durable_lite" / "lab"

KNOWN_WIDGETS = ("CrashLab", "ReliabilityExplorer", "ApprovalInbox", "BudgetMeter")

# What a test calls the widgets that have no driver of their own: they get the generic
# one (every enabled button clicked once, something visible must change).
OTHER = "other widgets"


def lab_widget_names() -> Tuple[str, ...]:
    names = set(KNOWN_WIDGETS)
    for module in sorted(LAB.glob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"), filename=str(module))
        for node in tree.body:
            if (isinstance(node, (ast.ClassDef, ast.FunctionDef)) and not node.name.startswith("_")
                    and _imports_ipywidgets(node)):
                names.add(node.name)
    return tuple(sorted(names))


def _imports_ipywidgets(node) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Import) and any(a.name.split(".")[0] == "ipywidgets" for a in inner.names):
            return True
        if isinstance(inner, ast.ImportFrom) and (inner.module or "").split(".")[0] == "ipywidgets":
            return True
    return False


@dataclass(frozen=True)
class WidgetLesson:
    path: Path
    kinds: Tuple[str, ...]       # widget names with a driver, then OTHER if anything else
    first_cell: dict             # kind -> index of the first code cell that builds one

    @property
    def name(self) -> str:
        return self.path.stem


def code_cells(path: Path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "code":
            source = cell["source"]
            yield index, source if isinstance(source, str) else "".join(source)


def widget_lessons(notebooks: Path = NOTEBOOKS):
    """Every lesson with a widget, in file order, with the kinds of widget it shows."""
    names = lab_widget_names()
    calls = {name: re.compile(rf"\b{re.escape(name)}\s*\(") for name in names}
    plain = re.compile(r"^(import ipywidgets|from ipywidgets\b)", re.M)   # at a cell's top level
    lessons = []
    for path in sorted(notebooks.glob("*.ipynb")):
        first = {}
        for index, source in code_cells(path):
            for name, call in calls.items():
                if call.search(source):
                    first.setdefault(name if name in KNOWN_WIDGETS else OTHER, index)
            if plain.search(source):
                first.setdefault(OTHER, index)
        if first:
            kinds = tuple(k for k in (*KNOWN_WIDGETS, OTHER) if k in first)
            lessons.append(WidgetLesson(path, kinds, first))
    return lessons
