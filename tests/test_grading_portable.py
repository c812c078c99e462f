"""portable.py cuts a cell into its top-level statements once per cell, as ast numbers
them: the same source `ast.get_source_segment` gives (decorators included), for cells
with non-ASCII text, Windows and old-Mac line ends, one-line compound statements and
strings that span lines."""

import ast

import nbformat
import pytest

from durable_lite.grading import portable

from grading_support import ROOT

TRICKY = [
    "price = 'café €' ; count = 1\r\nbundle = (1,\r\n  2)\rlast = 3\n",
    "@cache\n@retry(3)\ndef fetch():\n    return 'ü'\nif ready:\n    a = 1\nelse:\n    b = 2\n",
    "a = 1; b = '''\nmore\n  lines'''\nclass Desk: pass\n",
    "form = 'x\\x0cy'\nafter_feed = 2\n",        # a form feed ends no line for the parser
]


def reference(cell, node):
    """What the statement's source was before: ast's segment, dedented, from the first
    decorator when there is one."""
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        lines = ast._splitlines_no_ff(cell)
        return "".join(lines[min(d.lineno for d in decorators) - 1:node.end_lineno])
    return ast.get_source_segment(cell, node, padded=False)


def cells():
    yield from TRICKY
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                yield cell.source


@pytest.mark.parametrize("cell", list(cells())[:len(TRICKY)] + ["solutions"])
def test_each_statement_is_the_source_ast_gives(cell):
    for source in (cells() if cell == "solutions" else [cell]):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        lines = portable._lines(source)
        for node in tree.body:
            assert portable._statement_source(lines, node) == reference(source, node), source
