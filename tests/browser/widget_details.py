"""What only a browser can see: colours as drawn, labels cut, columns that drift. Checked
in the lessons' own Run All (test_widgets_in_browser.py), where most of the cost is.

- Lesson 13's decision table: after Check every chosen answer is filled green or red at
  once (not one Check late), the key appears only then, and in a window 1400 px wide, then
  1100 px wide with JupyterLab's file browser open, its toggles stay on one line and its
  marks in columns.
- The crash lab: every mode button shows its whole label and the selected one its check
  mark, at 1400 and at 1100 px; the result beside each bar is as large as the panel's text.
"""

import re

from durable_lite import costs
from jupyter_driver import expect
from widget_lessons import code_cells

WIDTHS = (1400, 1100)     # pixels; JupyterLab's file browser is open in both, as it starts
DECISION_TABLE = "DecisionTable("
DECISION_TABLE_CSS = ".dl-decision-table"

GREEN, RED = "rgb(30, 132, 73)", "rgb(192, 57, 43)"     # the table's #1e8449 and #c0392b
KEY = {w.name: costs.reasons(w) for w in costs.EXAMPLES}


def calls(lesson, name_call: str) -> bool:
    """Whether a code cell of the lesson calls `name_call` (e.g. "DecisionTable(")."""
    return any(name_call in source for _, source in code_cells(lesson.path))


def background(locator) -> str:
    return locator.evaluate("el => getComputedStyle(el).backgroundColor")


def boxes(locator):
    return [locator.nth(i).bounding_box() for i in range(locator.count())]


def resize(notebook, width: int) -> None:
    """The same page in a window `width` pixels wide: JupyterLab lays itself out again."""
    notebook.page.set_viewport_size({"width": width, "height": 900})
    notebook.settle()


def check_the_decision_table(notebook, keep_screenshot) -> None:
    """On a lesson just run in a window WIDTHS[0] wide, before any of its buttons is
    clicked: Check with nothing answered; then at the first width every cell answered and
    checked, and at each narrower one the layout, and a change checked again."""
    table = notebook.page.locator(DECISION_TABLE_CSS).first
    notebook.focus = table
    expect(table.locator(".dl-key")).to_have_text("")                # no key before a check
    table.locator("button.dl-check").click()          # Check with nothing answered: no key,
    notebook.settle()                                  # no cell marked, a word on what to do
    expect(table.locator(".dl-status")).to_contain_text("nothing answered yet")
    expect(table.locator(".dl-key")).to_have_text("")
    assert table.locator(".dl-right, .dl-wrong").count() == 0
    for width in WIDTHS:                  # one Run All, then the same table narrower
        resize(notebook, width)
        table.scroll_into_view_if_needed()
        _check_the_layout(notebook, table, width, keep_screenshot)
        if width == WIDTHS[0]:
            _check_the_answers(notebook, table, width, keep_screenshot)
        else:
            _check_a_change(notebook, table, width, keep_screenshot)
    notebook.assert_no_problems("after checking the decision table")


# every cell of the table, and the one a test answers wrong
CELLS = [(w.name, r) for w in costs.EXAMPLES for r in costs.REASONS]
WRONG = ("nightly research report", "long")


def _check_the_layout(notebook, table, width, keep_screenshot) -> None:
    """Each toggle's two buttons side by side, every mark in its column."""
    answers = table.locator(".dl-answer")
    assert answers.count() == len(CELLS)
    for i in range(answers.count()):
        yes, no = boxes(answers.nth(i).locator("button"))
        assert abs(yes["y"] - no["y"]) < 2 and no["x"] > yes["x"], \
            f"{width} px: the toggles of cell {i} stack"
    marks = table.locator(".dl-mark")
    columns = len(costs.REASONS)
    xs = [box["x"] for box in boxes(marks)]
    for c in range(columns):
        column = xs[c::columns]
        assert max(column) - min(column) < 2, f"{width} px: the marks of column {c} drift: {column}"
    keep_screenshot(notebook, f"decision-table-{width}")


def _pick(answers, cell, right: bool):
    """Click the toggle of `cell` that answers it right (or wrong)."""
    said = KEY[cell[0]][cell[1]] if right else not KEY[cell[0]][cell[1]]
    answers.nth(CELLS.index(cell)).locator("button").nth(0 if said else 1).click()


def _check_marked(table, wrong) -> None:
    """After a Check: the chosen toggle of each cell green, or red for `wrong` (None: all
    right), with its mark, the count and the key."""
    answers = table.locator(".dl-answer")
    for i, cell in enumerate(CELLS):
        chosen = answers.nth(i).locator("button.mod-active")
        expect(chosen).to_have_count(1)
        expect(chosen).to_have_css("background-color", RED if cell == wrong else GREEN)
    if wrong is None:
        expect(table.locator(".dl-status")).to_have_text("all 15 cells right")
    else:
        expect(table.locator(".dl-mark").nth(CELLS.index(wrong))).to_have_text("✗")
        expect(table.locator(".dl-status")).to_contain_text("14 of 15 cells right")
        expect(table.locator(".dl-key")).to_contain_text("The key")


def _check_the_answers(notebook, table, width, keep_screenshot) -> None:
    """Answer every cell, one of them wrong, then Check: the colours come with that Check.
    A change then makes the check stale: colours and key go until the next Check."""
    answers = table.locator(".dl-answer")
    for cell in CELLS:
        _pick(answers, cell, right=cell != WRONG)
        notebook.settle()
    table.locator("button.dl-check").click()
    notebook.settle()
    _check_marked(table, WRONG)
    keep_screenshot(notebook, f"decision-table-checked-{width}")

    _pick(answers, WRONG, right=True)
    notebook.settle()
    assert background(answers.nth(0).locator("button.mod-active")) not in (GREEN, RED)
    expect(table.locator(".dl-key")).to_have_text("")
    table.locator("button.dl-check").click()
    notebook.settle()
    _check_marked(table, None)


def _check_a_change(notebook, table, width, keep_screenshot) -> None:
    """Narrower, the table answered already: it still shows that check, and a toggle still
    changes the answer (one cell answered wrong, then Check, marks it)."""
    _check_marked(table, None)
    _pick(table.locator(".dl-answer"), WRONG, right=False)
    notebook.settle()
    expect(table.locator(".dl-key")).to_have_text("")
    table.locator("button.dl-check").click()
    notebook.settle()
    _check_marked(table, WRONG)
    keep_screenshot(notebook, f"decision-table-checked-{width}")


def check_the_mode_buttons(notebook, keep_screenshot) -> None:
    """Every crash lab of the lesson: each mode selected in turn, at each width."""
    labs = notebook.widget_outputs("CrashLab")
    for width in WIDTHS:                  # one Run All, then the same labs narrower
        resize(notebook, width)
        longest = 0
        for lab in labs:
            notebook.focus = lab
            lab.scroll_into_view_if_needed()
            longest = max(longest, _check_the_mode_buttons(notebook, lab, width))
        assert longest >= len("checkpointed + key"), "no lab with the longest mode label was checked"
        keep_screenshot(notebook, f"crash-lab-modes-{width}")
    notebook.assert_no_problems("after selecting every mode")


def _check_the_mode_buttons(notebook, lab, width) -> int:
    """Select each mode of one lab; the length of the longest label seen."""
    longest = 0
    buttons = lab.locator(".dl-mode button")
    for i in range(buttons.count()):
        button = buttons.nth(i)
        button.click()                           # select it: bold, with the check mark
        notebook.settle()
        expect(button).to_have_class(re.compile(r"\bmod-active\b"))
        text = " ".join(button.text_content().split())
        cut = button.evaluate("el => el.scrollWidth > el.clientWidth")
        assert not cut, f"{width} px: the mode button {text!r} is cut"
        mark = button.locator("i.fa-check")
        expect(mark).to_be_visible()
        inner, outer = mark.bounding_box(), button.bounding_box()
        assert outer["x"] <= inner["x"] and inner["x"] + inner["width"] <= outer["x"] + outer["width"], \
            f"{width} px: the check mark of {text!r} lies outside its button"
        longest = max(longest, len(text))
    notes = lab.locator(".dl-versus")
    for i in range(notes.count()):
        size = float(notes.nth(i).evaluate("el => parseFloat(getComputedStyle(el).fontSize)"))
        assert size >= 12, f"the result beside a bar is {size} px"
    return longest
