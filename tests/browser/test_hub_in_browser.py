"""The workshop server in Chromium: two learners sign in, one passes a question and one
fails it, and the instructor's class view shows both within seconds.

One hub for the module (`make hub`'s launcher on 127.0.0.1, every learner's server as this
user: see tests/hub_support.py), one Chromium, three browser contexts (the instructor and
two learners, each with their own cookies). The learners' answers are written into their
copies of exercise 01 before they open it (tests/hub_notebooks.py); each then runs the
question's cells in JupyterLab as a learner would, and the check records itself for the
class view (durable_lite/grading/progress.py).
"""

import json
import os
import sys
import time

import pytest

from hub_notebooks import EXERCISE, QUESTION, answer_cell, check_cell, write_answer
from hub_support import running_hub
from jupyter_driver import (_COMMAND_JS, _KERNEL_IDLE_JS, _OPEN_TAB_JS, _SETTLED_JS, _TRACKER_JS,
                            TIMEOUT_MS, expect, launched_chromium)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="make hub is for Linux")]

SHOWN_WITHIN_MS = 10_000        # the page asks every 2 s; a check's line is written as it ends


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with running_hub(tmp_path_factory.mktemp("hub"), extra=["--lab-arg=--LabApp.expose_app_in_browser=True"]) as running:
        yield running


@pytest.fixture(scope="module")
def browser(hub):
    with launched_chromium() as chromium:
        yield chromium


def sign_in(browser, url: str, name: str, code: str):
    """A new browser (context) signs in on the hub's own page; returns its page."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    expect(page.get_by_text("the class code on the projector")).to_be_visible()
    shot(page, f"{name}-sign-in")
    page.fill("#username_input", name)
    page.fill("#password_input", code)
    page.click("#login_submit")
    return page


def run_cells(page, indexes):
    """Run these cells of the open notebook, one after the other, as Shift-Enter would."""
    page.wait_for_function(_KERNEL_IDLE_JS, timeout=TIMEOUT_MS)
    page.evaluate(_TRACKER_JS)
    for index in indexes:
        page.evaluate("i => { window.__durableLitePanel.content.activeCellIndex = i; }", index)
        assert page.evaluate(_COMMAND_JS, ["notebook:run-cell", TIMEOUT_MS]) != "timeout"
        page.wait_for_function(_SETTLED_JS, timeout=TIMEOUT_MS)


def shot(page, name):
    folder = os.environ.get("DURABLE_LITE_BROWSER_SHOTS")
    if folder:
        os.makedirs(folder, exist_ok=True)
        page.screenshot(path=os.path.join(folder, f"hub-{name}.png"))


def test_two_learners_and_the_class_view(hub, browser):
    instructor = sign_in(browser, hub.instructor_url, "instructor", hub.instructor_code)
    expect(instructor.locator("h1")).to_have_text("The class")

    learners = {}
    for name in ("ana", "bob"):
        page = sign_in(browser, hub.learners_url, name, hub.class_code)
        # each lands in lesson 00 of their own copy, read-only like every lesson
        page.wait_for_url(f"**/user/{name}/lab/tree/notebooks/00_welcome.ipynb", timeout=TIMEOUT_MS)
        page.wait_for_function(_KERNEL_IDLE_JS, timeout=TIMEOUT_MS)
        expect(page.get_by_text("read-only").first).to_be_visible()
        shot(page, f"{name}-lesson-00")
        learners[name] = page

    for name, right in (("ana", True), ("bob", False)):
        notebook = write_answer(hub.hub_folder / "users" / name / "my_work", right)
        page = learners[name]
        # opened from the learner's JupyterLab, as a double click in its file browser does
        # (no second load of the page: JupyterLab's load costs a browser more than the check)
        page.evaluate(_OPEN_TAB_JS, f"my_work/{notebook.name}")
        page.wait_for_function(
            "p => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
            " return Boolean(w && w.context && w.context.path === p); }",
            arg=f"my_work/{notebook.name}", timeout=TIMEOUT_MS)
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        run_cells(page, [1, answer_cell(cells), check_cell(cells)])
        ran = time.monotonic()
        verdict = "all tests passed" if right else "some tests failed"
        expect(page.get_by_text(verdict).first).to_be_visible()
        shot(page, f"{name}-check")
        row = instructor.locator(f'tr[data-learner="{name}"] td.{"passed" if right else "failing"}')
        expect(row).to_have_count(1, timeout=SHOWN_WITHIN_MS)
        print(f"{name}: shown in the class view {time.monotonic() - ran:.1f} s after the check")

    # the class's most failed question, with the test bob fails on
    expect(instructor.locator("#most-failed")).to_contain_text(f"{EXERCISE} {QUESTION}")
    shot(instructor, "class-view")
    # a learner cannot open the class view
    assert learners["ana"].goto(hub.instructor_url).status == 403
