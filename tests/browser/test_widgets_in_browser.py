"""Every lesson with a widget, in JupyterLab in Chromium, used the way a learner uses it.

For each lesson that shows a widget: a fresh copy, a fresh kernel, Run All. Nothing on the
page may say that something went wrong: no "Error displaying widget", no browser console
error, nothing raised by a widget callback (JupyterLab shows those only as a badge on its
Log Console). Then the widget's main controls are clicked and the test reads what the page
shows, never the kernel's variables.

Lessons are found by reading them (`widget_lessons.py`), not by number.
"""

import re

import pytest

from jupyter_driver import button, expect
from widget_lessons import KNOWN_WIDGETS, OTHER, widget_lessons

LESSONS = widget_lessons()

CASES = [pytest.param(lesson, kind, id=f"{lesson.name}-{kind.replace(' ', '-')}")
         for lesson in LESSONS for kind in lesson.kinds]

INBOX_LESSONS = [pytest.param(lesson, id=lesson.name)
                 for lesson in LESSONS if "ApprovalInbox" in lesson.kinds]


def test_the_lessons_show_every_widget_of_the_lab():
    """The scan finds the course's widgets (a broken scan must not test nothing)."""
    shown = {kind for lesson in LESSONS for kind in lesson.kinds}
    assert set(KNOWN_WIDGETS) <= shown, f"no lesson shows {sorted(set(KNOWN_WIDGETS) - shown)}"


@pytest.mark.browser
@pytest.mark.parametrize("lesson, kind", CASES)
def test_after_run_all_the_widget_shows_and_answers_clicks(open_lesson, keep_screenshot, lesson, kind):
    notebook = open_lesson(lesson.path).run_all()
    notebook.assert_widgets_rendered()
    notebook.assert_no_problems("after Run All")
    shown = notebook.widget_outputs(exclude=KNOWN_WIDGETS) if kind == OTHER else notebook.widget_outputs(kind)
    notebook.focus = shown[0] if shown else None
    keep_screenshot(notebook, "after-run-all")
    DRIVERS[kind](notebook, keep_screenshot)
    notebook.assert_no_problems(f"after using the {kind}")


@pytest.mark.browser
@pytest.mark.parametrize("lesson", INBOX_LESSONS)
def test_approve_clicked_by_hand_completes_the_run(open_lesson, keep_screenshot, lesson):
    """A learner reading along runs the lesson down to the first inbox and clicks Approve
    on the first request themselves, as the lesson invites."""
    notebook = open_lesson(lesson.path).run_through(lesson.first_cell["ApprovalInbox"])
    inbox = notebook.widget_outputs("ApprovalInbox")[0]
    notebook.focus = inbox
    approve = _enabled(inbox, "Approve")
    expect(approve.first).to_be_visible()
    run_id = _run_id_of_row(inbox.locator(".widget-hbox").filter(has=_enabled(notebook.page, "Approve")).first)

    approve.first.click()
    notebook.settle()

    expect(inbox).to_contain_text(re.compile(rf"{re.escape(run_id)}\b[^\n]*approved[^\n]*completed"),
                                  use_inner_text=True)
    still_offered = (inbox.locator(".widget-hbox").filter(has_text=run_id)
                     .filter(has=_enabled(notebook.page, "Approve")))
    expect(still_offered).to_have_count(0)
    keep_screenshot(notebook, "approved")
    notebook.assert_no_problems(f"after approving {run_id}")


# drivers: one per widget, each given a lesson after Run All ------------------------------------
COUNTERS = ("refunds paid", "emails sent", "tickets closed", "steps executed", "steps replayed")

# The crash points the two checks use, as the crash lab's dropdown words them.
BETWEEN_EMAIL_AND_CLOSE = "between email and close"
REFUND_WINDOW = "refund: after the effect, before the checkpoint"


def drive_crash_lab(notebook, keep_screenshot):
    labs = notebook.widget_outputs("CrashLab")
    assert labs, f"{notebook.name}: builds a CrashLab but none is displayed after Run All"
    for number, lab in enumerate(labs):
        notebook.focus = lab
        crashes = _option_texts(lab)
        modes = {m for m in ("naive", "checkpointed + key") if button(lab, m).count()}
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
            keep_screenshot(notebook, f"crash-lab-{number}-key")
        else:
            # a crash lab on some other workflow: every crash point still ends in a completed run
            _play(notebook, lab, None, crashes[-1], counters=False)
            keep_screenshot(notebook, f"crash-lab-{number}")


def _play(notebook, lab, mode, crash, counters=True):
    """Choose a mode and a crash point, Reset, Run, Resume until done; read the refund's
    counters (a lab on another workflow counts other ledgers: `counters=False`)."""
    if mode is not None:
        toggle = button(lab, mode)
        toggle.click()
        expect(toggle).to_have_class(re.compile(r"\bmod-active\b"))
        notebook.settle()
    lab.locator("select").first.select_option(label=crash)
    notebook.settle()
    button(lab, "Reset").click()
    notebook.settle()
    run, resume = button(lab, "Run"), button(lab, "Resume")
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
    expect(lab).to_contain_text(re.compile(r"completed", re.I))
    return _counters(lab) if counters else None


def _counters(lab) -> dict:
    text = lab.text_content()
    found = {label: int(n) for n, label in re.findall(r"(\d+)\s*(" + "|".join(COUNTERS) + ")", text)}
    assert set(found) == set(COUNTERS), f"crash lab counters not found in:\n{text}"
    return found


def _option_texts(scope):
    return [" ".join(t.split()) for t in scope.locator("select").first.locator("option").all_text_contents()]


def drive_reliability_explorer(notebook, keep_screenshot):
    explorers = notebook.widget_outputs("ReliabilityExplorer")
    assert explorers, f"{notebook.name}: builds a ReliabilityExplorer but none is displayed"
    for explorer in explorers:
        notebook.focus = explorer
        explorer.scroll_into_view_if_needed()
        table, image = explorer.locator("table").first, explorer.locator("img").first
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
    """The slider whose description starts with `name` ("p (step succeeds)")."""
    return scope.locator(".widget-slider").filter(
        has=scope.page.locator("label").filter(has_text=re.compile(rf"^\s*{re.escape(name)}\b"))).first


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
        text = meter.text_content()
        steps = re.search(r"steps (\d+) / (\d+)", text)
        assert steps, f"{notebook.name}: a budget meter shows no step count:\n{text}"
        if re.search(r"status halted", text):
            halted.append((meter, int(steps.group(1)), int(steps.group(2))))
    assert halted, f"{notebook.name}: no budget meter shows a run halted by its budget"
    meter, used, limit = halted[0]
    notebook.focus = meter
    assert used == limit, f"{notebook.name}: the halted run used {used} steps of {limit}"
    # the steps bar (ipywidgets' IntProgress, labelled "steps") is drawn full
    bar = meter.locator(".widget-hprogress").filter(
        has=meter.page.locator("label").filter(has_text=re.compile(r"^\s*steps\b"))).first
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
    approve = _enabled(live, "Approve")
    keep_screenshot(notebook, "inbox-after-run-all")
    if approve.count() == 0:
        return
    before = live.text_content()
    approve.first.click()
    notebook.settle()
    problems = notebook.problems()
    assert not problems, f"{notebook.name}: clicking Approve in the inbox went wrong: {problems}"
    expect(live).not_to_have_text(before)
    keep_screenshot(notebook, "inbox-after-click")


def drive_other_widgets(notebook, keep_screenshot):
    """Widgets without a driver of their own: click every enabled button once; at least one
    click must change something on the screen, and none may raise."""
    outputs = notebook.widget_outputs(exclude=KNOWN_WIDGETS)
    assert outputs, f"{notebook.name}: builds widgets but none is displayed after Run All"
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


def _enabled(scope, label):
    """The enabled buttons labelled `label` in scope. (A locator passed as `has=` is looked
    up inside each candidate, so build it from the page, not from another locator.)"""
    return scope.locator("button:not([disabled])").filter(
        has_text=re.compile(r"^\s*" + re.escape(label) + r"\s*$"))


def _run_id_of_row(row) -> str:
    code = row.locator("code")
    text = code.first.text_content() if code.count() else row.text_content().split()[0]
    return text.strip()


DRIVERS = {"CrashLab": drive_crash_lab, "ReliabilityExplorer": drive_reliability_explorer,
           "BudgetMeter": drive_budget_meter, "ApprovalInbox": drive_approval_inbox,
           OTHER: drive_other_widgets}
