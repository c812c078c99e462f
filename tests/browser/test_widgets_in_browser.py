"""Every lesson with a widget, in JupyterLab in Chromium, used the way a learner uses it.

For each lesson that shows a widget: a fresh copy, a fresh kernel, Run All. Nothing on the
page may say that something went wrong: no "Error displaying widget", no browser console
error, nothing raised by a widget callback (JupyterLab shows those only as a badge on its
Log Console). Then the widget's main controls are clicked and the test reads what the page
shows, never the kernel's variables.

Two lessons are looked at more closely in the same Run All (widget_details.py): lesson
13's decision table before any of its buttons is clicked, and the first crash lab's mode
buttons after it has been driven, each at 1400 and then 1100 px.

The widgets' parts are found by the stable CSS classes the lab gives them (`dl-run`,
`dl-counters`, `dl-slider-p`, `dl-approve`, ...), not by their wording; what is asserted is
what a learner reads there: the numbers and the words.

Lessons are found by reading them (`widget_lessons.py`), not by number.
"""

import re

import pytest

from jupyter_driver import button, expect
from widget_details import (DECISION_TABLE, DECISION_TABLE_CSS, calls, check_the_decision_table,
                            check_the_mode_buttons)
from widget_lessons import KNOWN_WIDGETS, OTHER, widget_lessons

LESSONS = widget_lessons()
# where the close looks happen: the lesson that shows the decision table, the first crash lab
TABLE_LESSON = next((lesson for lesson in LESSONS if calls(lesson, DECISION_TABLE)), None)
MODES_LESSON = next((lesson for lesson in LESSONS if "CrashLab" in lesson.kinds), None)

CASES = [pytest.param(lesson, kind, id=f"{lesson.name}-{kind.replace(' ', '-')}")
         for lesson in LESSONS for kind in lesson.kinds]

INBOX_LESSONS = [pytest.param(lesson, id=lesson.name)
                 for lesson in LESSONS if "ApprovalInbox" in lesson.kinds]


def test_the_lessons_show_every_widget_of_the_lab():
    """The scan finds the course's widgets (a broken scan must not test nothing)."""
    shown = {kind for lesson in LESSONS for kind in lesson.kinds}
    assert set(KNOWN_WIDGETS) <= shown, f"no lesson shows {sorted(set(KNOWN_WIDGETS) - shown)}"
    assert TABLE_LESSON is not None and OTHER in TABLE_LESSON.kinds, "no lesson shows the decision table"
    assert MODES_LESSON is not None


@pytest.mark.browser
@pytest.mark.parametrize("lesson, kind", CASES)
def test_after_run_all_the_widget_shows_and_answers_clicks(open_lesson, keep_screenshot, lesson, kind):
    notebook = open_lesson(lesson.path).run_all()
    notebook.assert_widgets_rendered()
    notebook.assert_no_problems("after Run All")
    shown = notebook.widget_outputs(exclude=KNOWN_WIDGETS) if kind == OTHER else notebook.widget_outputs(kind)
    notebook.focus = shown[0] if shown else None
    keep_screenshot(notebook, "after-run-all")
    if kind == OTHER and lesson == TABLE_LESSON:
        check_the_decision_table(notebook, keep_screenshot)     # before any button is clicked
        drive_other_widgets(notebook, keep_screenshot, checked=DECISION_TABLE_CSS)
    else:
        DRIVERS[kind](notebook, keep_screenshot)
    notebook.assert_no_problems(f"after using the {kind}")
    if kind == "CrashLab" and lesson == MODES_LESSON:
        check_the_mode_buttons(notebook, keep_screenshot)


@pytest.mark.browser
@pytest.mark.parametrize("lesson", INBOX_LESSONS)
def test_approve_clicked_by_hand_completes_the_run(open_lesson, keep_screenshot, lesson):
    """A learner reading along runs the lesson down to the first inbox and clicks Approve
    on the first request themselves, as the lesson invites; then runs the rest of the
    lesson, whose next cell would approve the same run: every cell still runs cleanly."""
    first_inbox = lesson.first_cell["ApprovalInbox"]
    notebook = open_lesson(lesson.path).run_through(first_inbox)
    inbox = notebook.widget_outputs("ApprovalInbox")[0]
    notebook.focus = inbox
    approve = inbox.locator(ENABLED_APPROVE)
    expect(approve.first).to_be_visible()
    expect(approve.first).to_have_text(re.compile(r"^\s*Approve\s*$"))
    run_id = _run_id_of_row(inbox.locator(".dl-inbox-row").filter(
        has=notebook.page.locator(ENABLED_APPROVE)).first)

    approve.first.click()
    notebook.settle()

    expect(inbox.locator(".dl-inbox-log")).to_contain_text(
        re.compile(rf"{re.escape(run_id)}\b[^\n]*approved[^\n]*completed"), use_inner_text=True)
    still_offered = (inbox.locator(".dl-inbox-row").filter(has_text=run_id)
                     .filter(has=notebook.page.locator(ENABLED_APPROVE)))
    expect(still_offered).to_have_count(0)
    keep_screenshot(notebook, "approved")
    notebook.assert_no_problems(f"after approving {run_id}")

    notebook.run_from(first_inbox + 1)            # fails if any cell below raised
    completed = notebook.page.locator(".jp-OutputArea-output").filter(
        has_text=f"Run(run_id='{run_id}', status='completed'")
    expect(completed.first).to_be_visible()
    notebook.focus = completed.first
    keep_screenshot(notebook, "approved-then-run-all-below")
    notebook.assert_no_problems(f"after approving {run_id} and running the rest")


# drivers: one per widget, each given a lesson after Run All ------------------------------------
COUNTERS = ("refunds paid", "emails sent", "tickets closed", "steps executed", "steps replayed")
ENABLED_APPROVE = "button.dl-approve:not([disabled])"

# The crash points the two checks use, as the crash lab's dropdown words them.
BETWEEN_EMAIL_AND_CLOSE = "between email and close"
REFUND_WINDOW = "refund: after the effect, before the checkpoint"


def drive_crash_lab(notebook, keep_screenshot):
    labs = notebook.widget_outputs("CrashLab")
    assert labs, f"{notebook.name}: builds a CrashLab but none is displayed after Run All"
    for number, lab in enumerate(labs):
        notebook.focus = lab
        crashes = _option_texts(lab)
        toggles = lab.locator(".dl-mode")
        modes = {m for m in ("naive", "checkpointed + key") if button(toggles, m).count()}
        if {BETWEEN_EMAIL_AND_CLOSE, REFUND_WINDOW} <= set(crashes) and len(modes) == 2:
            # the refund workflow: the naive runner repeats the money and the mail ...
            seen = _play(notebook, lab, "naive", BETWEEN_EMAIL_AND_CLOSE)
            assert seen == {**seen, "refunds paid": 2, "emails sent": 2, "tickets closed": 1,
                            "steps executed": 7}, f"{notebook.name}: naive x {BETWEEN_EMAIL_AND_CLOSE}: {seen}"
            keep_screenshot(notebook, f"crash-lab-{number}-naive")
            # ... and the key closes the refund's window
            seen = _play(notebook, lab, "checkpointed + key", REFUND_WINDOW)
            assert seen == {**seen, "refunds paid": 1, "emails sent": 1,
                            "tickets closed": 1}, f"{notebook.name}: checkpointed + key x {REFUND_WINDOW}: {seen}"
            # the refund ran twice, paid once: the log says why
            expect(lab.locator(".dl-log")).to_contain_text(
                "refund: executed (the provider recognised the key")
            keep_screenshot(notebook, f"crash-lab-{number}-key")
        else:
            # a crash lab on some other workflow: every crash point still ends in a completed run
            _play(notebook, lab, None, crashes[-1], counters=False)
            keep_screenshot(notebook, f"crash-lab-{number}")


def _play(notebook, lab, mode, crash, counters=True):
    """Choose a mode and a crash point, Reset, Run, Resume until done; read the refund's
    counters (a lab on another workflow counts other ledgers: `counters=False`)."""
    if mode is not None:
        toggle = button(lab.locator(".dl-mode"), mode)
        toggle.click()
        expect(toggle).to_have_class(re.compile(r"\bmod-active\b"))
        notebook.settle()
    lab.locator(".dl-crash-point select").select_option(label=crash)
    notebook.settle()
    lab.locator("button.dl-reset").click()
    notebook.settle()
    run, resume = lab.locator("button.dl-run"), lab.locator("button.dl-resume")
    expect(run).to_have_text(re.compile(r"^\s*Run\s*$"))
    expect(resume).to_have_text(re.compile(r"^\s*Resume\s*$"))
    expect(run).to_be_enabled()
    run.click()
    notebook.settle()
    for _ in range(5):                       # a crash point crashes the first attempt only
        if resume.is_disabled():
            break
        resume.click()
        notebook.settle()
    expect(resume).to_be_disabled()
    expect(run).to_be_disabled()
    expect(lab.locator(".dl-status")).to_contain_text("Completed")
    return _counters(lab) if counters else None


def _counters(lab) -> dict:
    """The counters as the learner reads them: each number above its label."""
    text = lab.locator(".dl-counters").text_content()
    found = {label: int(n) for n, label in re.findall(r"(\d+)\s*(" + "|".join(COUNTERS) + ")", text)}
    assert set(found) == set(COUNTERS), f"crash lab counters not found in:\n{text}"
    return found


def _option_texts(lab):
    return [" ".join(t.split()) for t in lab.locator(".dl-crash-point option").all_text_contents()]


def drive_reliability_explorer(notebook, keep_screenshot):
    explorers = notebook.widget_outputs("ReliabilityExplorer")
    assert explorers, f"{notebook.name}: builds a ReliabilityExplorer but none is displayed"
    for explorer in explorers:
        notebook.focus = explorer
        explorer.scroll_into_view_if_needed()
        table, image = explorer.locator(".dl-readout table"), explorer.locator("img.dl-plot")
        before = {"table": table.text_content(), "image": image.get_attribute("src"),
                  "p": _slider_value(explorer, "p")}
        keep_screenshot(notebook, "explorer-before")

        _drag_slider(notebook, _slider(explorer, "p"), to=0.3)   # p down: fewer runs finish
        notebook.settle()

        expect(_slider(explorer, "p").locator(".widget-readout")).not_to_have_text(before["p"])
        expect(table).not_to_have_text(before["table"])
        expect(image).not_to_have_attribute("src", before["image"])
        p, n = float(_slider_value(explorer, "p")), int(_slider_value(explorer, "n"))
        # the table's first row is p**n, recomputed for the new p
        expect(table.locator("tr").nth(1)).to_contain_text(f"{p ** n:.2%}")
        keep_screenshot(notebook, "explorer-after")


def _slider(scope, name):
    """The slider for `name` (p, n or k); its label reads "p (step succeeds)" and so on."""
    slider = scope.locator(f".dl-slider-{name}")
    expect(slider.locator("label")).to_have_text(re.compile(rf"^\s*{re.escape(name)} \("))
    return slider


def _slider_value(scope, name) -> str:
    return _slider(scope, name).locator(".widget-readout").text_content().strip()


def _drag_slider(notebook, slider, to: float):
    """Drag the slider's handle with the mouse to `to` (0 = left end, 1 = right end)."""
    handle = slider.locator(".noUi-handle").first
    handle.scroll_into_view_if_needed()
    track = slider.locator(".noUi-base").first.bounding_box()
    grip = handle.bounding_box()
    y = grip["y"] + grip["height"] / 2
    notebook.page.mouse.move(grip["x"] + grip["width"] / 2, y)
    notebook.page.mouse.down()
    notebook.page.mouse.move(track["x"] + track["width"] * to, y, steps=8)
    notebook.page.mouse.up()


def drive_budget_meter(notebook, keep_screenshot):
    meters = notebook.widget_outputs("BudgetMeter")
    assert meters, f"{notebook.name}: builds a BudgetMeter but none is displayed"
    halted = []
    for meter in meters:
        text = meter.locator(".dl-budget-text").text_content()
        steps = re.search(r"steps (\d+) / (\d+)", text)
        assert steps, f"{notebook.name}: a budget meter shows no step count:\n{text}"
        if re.search(r"status halted", text):
            halted.append((meter, int(steps.group(1)), int(steps.group(2))))
    assert halted, f"{notebook.name}: no budget meter shows a run halted by its budget"
    meter, used, limit = halted[0]
    notebook.focus = meter
    assert used == limit, f"{notebook.name}: the halted run used {used} steps of {limit}"
    # the steps bar (ipywidgets' IntProgress, labelled "steps") is drawn full
    bar = meter.locator(".dl-budget-steps")
    expect(bar.locator("label")).to_have_text(re.compile(r"^\s*steps\s*$"))
    fill = bar.locator(".progress-bar").first
    expect(fill).to_be_visible()
    ratio = fill.bounding_box()["width"] / bar.locator(".progress").first.bounding_box()["width"]
    assert ratio > 0.99, f"{notebook.name}: the steps bar of the halted run is drawn {ratio:.0%} full"
    keep_screenshot(notebook, "budget-meter")


def drive_approval_inbox(notebook, keep_screenshot):
    inboxes = notebook.widget_outputs("ApprovalInbox")
    assert inboxes, f"{notebook.name}: builds an ApprovalInbox but none is displayed"
    live = inboxes[-1]                           # the inbox of the lesson's last "process"
    notebook.focus = live
    keep_screenshot(notebook, "inbox-after-run-all")
    # After Run All, a run that a later cell decided is shown as decided, not offered
    decided = 0
    for inbox in inboxes:
        rows = inbox.locator(".dl-inbox-row")
        for index in range(rows.count()):
            row = rows.nth(index)
            if "dl-inbox-decided" in (row.get_attribute("class") or ""):
                decided += 1
                expect(row).to_contain_text("decided:")
                expect(row.locator("button.dl-approve")).to_be_hidden()
                expect(row.locator("button.dl-reject")).to_be_hidden()
            elif "Closed:" not in inbox.locator(".dl-inbox-header").text_content():
                expect(row).to_contain_text("deadline")
                expect(row.locator("button.dl-approve")).to_be_enabled()
    assert decided, f"{notebook.name}: no inbox row shows a run decided by a later cell"
    approve = live.locator(ENABLED_APPROVE)
    if approve.count() == 0:
        return
    before = live.text_content()
    approve.first.click()
    notebook.settle()
    problems = notebook.problems()
    assert not problems, f"{notebook.name}: clicking Approve in the inbox went wrong: {problems}"
    expect(live).not_to_have_text(before)
    keep_screenshot(notebook, "inbox-after-click")


def drive_other_widgets(notebook, keep_screenshot, checked=None):
    """Widgets without a driver of their own: click every enabled button once; at least one
    click must change something on the screen, and none may raise. `checked`: the CSS
    selector of a widget driven closely already (its every button clicked and read), left
    out here."""
    outputs = notebook.widget_outputs(exclude=KNOWN_WIDGETS)
    assert outputs, f"{notebook.name}: builds widgets but none is displayed after Run All"
    if checked is not None:
        outputs = [output for output in outputs if output.locator(checked).count() == 0]
        if not outputs:
            return
    changed = []
    for output in outputs:
        notebook.focus = output
        output.scroll_into_view_if_needed()
        before = output.text_content()
        buttons = output.locator("button")
        for index in range(buttons.count()):
            if buttons.nth(index).is_enabled():
                buttons.nth(index).click()
                notebook.settle()
        if output.text_content() != before:
            changed.append(output)
    assert changed, f"{notebook.name}: clicking the widgets' buttons changed nothing on the page"
    keep_screenshot(notebook, "widgets")


def _run_id_of_row(row) -> str:
    """The run id a row of the inbox shows (in its label's <code>)."""
    return row.locator(".dl-inbox-run code").first.text_content().strip()


DRIVERS = {"CrashLab": drive_crash_lab, "ReliabilityExplorer": drive_reliability_explorer,
           "BudgetMeter": drive_budget_meter, "ApprovalInbox": drive_approval_inbox,
           OTHER: drive_other_widgets}
