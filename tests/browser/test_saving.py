"""Run, save, reopen, pull: the lessons stay as the course ships them, and their widgets live.

`make lab` serves `notebooks/` read-only (durable_lite/lab/contents.py): JupyterLab never
autosaves a lesson, Ctrl-S says "read-only, use Save as…", and the server refuses a save
whoever asks. These tests serve a git repository holding the course the way `make lab`
serves it, with the learner's autosave on and quick, and use lesson 00 as a learner does.
Then they check what lesson 00 promises about widgets: a saved copy whose kernel has gone
shows "Error displaying widget" (or "Loading widget...") until its cell runs again, and
without the widget extension a widget stays a line of text.
"""

import hashlib
import json
import re
import shutil
import subprocess
import time
import urllib.error

import pytest

from durable_lite.lab.workspace import copy_missing_work
from jupyter_driver import AUTOSAVE, LabServer, NotebookPage, button, expect, launched_chromium
from widget_lessons import NOTEBOOKS, ROOT, code_cells

LESSON = "notebooks/00_welcome.ipynb"
CONTROL = "my_work/01_naive_retry.ipynb"      # a writable notebook, opened beside the lesson
AUTOSAVE_EVERY = 1                              # seconds (JupyterLab's default is 120)
AUTOSAVE_DEADLINE = 120                         # seconds: a busy machine is slow, not broken

pytestmark = pytest.mark.browser


# lesson 00's "does it work?" button: the first code cell that builds it
CLICK_ME = next(i for i, source in code_cells(NOTEBOOKS / "00_welcome.ipynb")
                if 'description="Click me"' in source)


def welcome_prose() -> str:
    import nbformat
    nb = nbformat.read(NOTEBOOKS / "00_welcome.ipynb", as_version=4)
    return " ".join(" ".join(c.source.split()) for c in nb.cells if c.cell_type == "markdown")


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git(course, *args) -> str:
    return subprocess.run(["git", *args], cwd=course, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def course(tmp_path):
    """A git repository holding the course's lessons, exercises and .gitignore, committed,
    with `my_work/` filled as `make lab` fills it."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "course"
    shutil.copytree(NOTEBOOKS, repo / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    shutil.copytree(ROOT / "exercises", repo / "exercises")
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=test@example.com", "-c", "user.name=test", "commit", "-q", "-m", "the course")
    copy_missing_work(repo)
    return repo


@pytest.fixture(scope="module")
def browser():
    """One Chromium for the module's tests (each opens its own pages, closed after it)."""
    with launched_chromium() as chromium:
        yield chromium


@pytest.fixture
def pages(request):
    """The pages a test opens (screenshotted if it fails), closed when it ends."""
    opened = []
    request.node.lesson_pages = opened
    yield opened
    for page in opened:
        page.close()


@pytest.fixture
def serve(tmp_path):
    """serve(course, **options) -> a started LabServer, stopped when the test ends."""
    servers = []

    def start(course, **options):
        server = LabServer(NOTEBOOKS, tmp_path / f"lab-{len(servers)}", course=course, **options)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


def open_page(browser, server, path, pages):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = NotebookPage(context, server, path, path.rsplit("/", 1)[-1])
    pages.append(page)
    return page.open()


def click_me(notebook):
    """Lesson 00's "does it work?" button: click it; the label beside it must count.

    A learner whose first click is not counted clicks again, and so does this: on a busy
    machine a click on a page that has just run every cell was once lost (the button took
    the focus, the kernel was idle, the label never changed). A button that never counts
    still fails."""
    out = notebook.widget_outputs()[0]
    notebook.focus = out
    counted = re.compile(r"clicked \d+ time\(s\): widgets work")
    for attempt in range(3):
        button(out, "Click me").click()
        notebook.settle()
        try:
            expect(out).to_contain_text(counted, timeout=10_000 if attempt < 2 else None)
            return
        except AssertionError:
            if attempt == 2:
                raise
            print(f"{notebook.name}: click {attempt + 1} on Click me was not counted; again")


def end_sessions(server) -> list:
    """Ask the server to end every session; the sessions it still has. (The lesson's and its
    copy's share one kernel: the second may end with the first.)"""
    for session in server._api("GET", "/api/sessions"):
        try:
            server._api("DELETE", f"/api/sessions/{session['id']}")
        except urllib.error.HTTPError as error:
            if error.code != 404:
                raise
    return server._api("GET", "/api/sessions")


def wait_for(condition, deadline: float, what: str):
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"waited {deadline:.0f} s for {what}", pytrace=False)
        time.sleep(0.2)                 # polling a file that a browser writes, not a wait for work


def test_run_all_save_and_reopen_leave_the_lesson_as_shipped_and_its_widgets_live(
        course, browser, serve, pages, keep_screenshot):
    lesson, control = course / LESSON, course / CONTROL
    shipped, control_before = digest(lesson), digest(control)
    server = serve(course, settings={AUTOSAVE: {"autosave": True, "autosaveInterval": AUTOSAVE_EVERY}})
    notebook = open_page(browser, server, LESSON, pages).run_all()
    click_me(notebook)
    page = notebook.page
    expect(page.locator(".jp-NotebookPanel-toolbar")).to_contain_text("notebook is read-only")
    news = page.evaluate("""async () => {
        const s = await window.jupyterapp.serviceManager.settings.fetch(
            '@jupyterlab/apputils-extension:notification');
        const mine = (s.settings || {}).fetchNews;        // the learner's own, if any
        return mine === undefined ? s.schema.properties.fetchNews.default : mine; }""")
    assert news == "false", f"JupyterLab would ask about its news (fetchNews={news!r})"
    served = json.loads(page.locator("#jupyter-config-data").text_content())
    assert (served.get("buildCheck"), served.get("buildAvailable")) == (False, False), \
        "JupyterLab checks for a rebuild on every page load (node and yarn run each time)"

    page.keyboard.press("Control+s")                     # what every learner does
    expect(page.get_by_text(re.compile(r'is read-only\. Use "Save as…" instead'))).to_be_visible()
    keep_screenshot(notebook, "ctrl-s")
    refused = page.evaluate("""async () => {
        try { await window.__durableLitePanel.context.save(); return 'saved'; }
        catch (error) { return String(error); } }""")
    assert "read-only" in refused and "my_work/" in refused, refused   # the server says no too
    page.locator(".jp-Dialog button").filter(has_text="Close").click()

    # Autosave works for the learner's own files: a notebook of my_work/, changed after
    # the lesson ran, is saved by it; by then the lesson has had the same chances.
    page.evaluate("""async path => {
        const widget = await window.jupyterapp.commands.execute('docmanager:open', {path});
        await widget.context.ready;
        const cell = widget.content.model.cells.get(0);
        cell.sharedModel.setSource(cell.sharedModel.getSource() + ' ');
    }""", CONTROL)
    wait_for(lambda: digest(control) != control_before, AUTOSAVE_DEADLINE,
             f"JupyterLab's autosave (every {AUTOSAVE_EVERY} s) to save {CONTROL}, "
             "a writable notebook changed after the lesson ran")
    assert digest(lesson) == shipped, "the lesson's file changed"
    assert git(course, "status", "--porcelain") == ""
    notebook.context.close()                             # the learner closes the tab

    again = open_page(browser, server, LESSON, pages)    # ... and comes back later
    shown = again.focus = again.cell(CLICK_ME).locator(".jp-OutputArea-output").first
    expect(shown).to_contain_text("HBox(children=")      # the line lesson 00 says to expect
    again.assert_no_problems("after reopening the lesson")   # no "Loading widget...", no error
    keep_screenshot(again, "reopened")
    again.run_all()
    click_me(again)                                     # live again
    again.assert_no_problems("after running the reopened lesson")
    assert digest(lesson) == shipped and git(course, "status", "--porcelain") == ""


def test_save_as_opens_the_copy_on_the_lessons_kernel_and_once_that_has_gone_it_says_so(
        course, browser, serve, pages, keep_screenshot):
    """File → Save Notebook As… into my_work/, as a learner does it: the copy opens on the
    lesson's own kernel (durable_lite/lab/copies.py), so its widgets are the lesson's, live,
    and no second kernel starts. Opened again after that kernel has gone, the copy keeps the
    widget views but a new kernel has no model for them: lesson 00 names what the page then
    shows, and running the cell again brings the widget back."""
    copy = "my_work/00_welcome_mine.ipynb"
    server = serve(course)
    notebook = open_page(browser, server, LESSON, pages).run_all()
    click_me(notebook)
    page = notebook.page
    lesson_kernel = page.evaluate("() => window.__durableLitePanel.sessionContext.session.kernel.id")
    page.evaluate("() => { window.jupyterapp.commands.execute('docmanager:save-as'); }")
    field = page.locator(".jp-Dialog input")
    expect(field).to_be_visible()
    field.fill(copy)
    page.locator(".jp-Dialog button").filter(has_text="Save").click()
    wait_for(lambda: (course / copy).exists(), 60, f"Save As to write {copy}")

    # JupyterLab opens the copy and closes the lesson, which has run, so it asks whether to
    # save the lesson; the learner's work is in the copy already: Discard, as lesson 00 says.
    prompt = page.locator(".jp-Dialog")
    expect(prompt).to_contain_text("Save your work")
    keep_screenshot(notebook, "save-as-prompt")
    prompt.locator("button").filter(has_text="Discard").click()
    page.wait_for_function("""path => {
        const w = Array.from(window.jupyterapp.shell.widgets('main'))
                       .find(w => w.context && w.context.path === path);
        const kernel = w && w.sessionContext.session && w.sessionContext.session.kernel;
        if (!kernel || kernel.status !== 'idle') { return false; }
        window.__durableLitePanel = w;          // the notebook the learner goes on in
        return true; }""", arg=copy)
    copy_kernel = page.evaluate("() => window.__durableLitePanel.sessionContext.session.kernel.id")
    assert copy_kernel == lesson_kernel, "the copy started a kernel of its own"
    assert [k["id"] for k in server._api("GET", "/api/kernels")] == [lesson_kernel]

    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    out = panel.locator(".jp-Notebook .jp-Cell").nth(CLICK_ME).locator(".jp-OutputArea-output").first
    notebook.focus = out
    expect(out).to_contain_text("clicked 1 time(s): widgets work")   # the lesson's state
    keep_screenshot(notebook, "copy-opened")
    button(out, "Click me").click()
    expect(out).to_contain_text("clicked 2 time(s): widgets work")   # live: the same kernel
    assert panel.locator(".jp-OutputArea-output").filter(
        has_text=re.compile(r"Error displaying widget|Loading widget")).count() == 0
    keep_screenshot(notebook, "copy-clicked")
    assert json.loads((course / copy).read_text())["cells"][0]["id"] == \
        json.loads((course / LESSON).read_text())["cells"][0]["id"]
    assert git(course, "status", "--porcelain") == ""          # my_work/ is ignored by git

    # The learner closes the copy and its kernel ends; the next day they open the copy.
    notebook.context.close()
    wait_for(lambda: end_sessions(server) == [] and server._api("GET", "/api/kernels") == [],
             60, "the copy's kernel to end")
    mine = open_page(browser, server, copy, pages)
    dead = mine.cell(CLICK_ME).locator(".jp-OutputArea-output").first
    mine.focus = dead
    expect(dead).to_contain_text(re.compile(r"Loading widget|Error displaying widget"))
    keep_screenshot(mine, "saved-copy-reopened")
    shown = " ".join(dead.inner_text().split())
    said = welcome_prose()
    assert any(phrase in shown and phrase in said for phrase in
               ("Loading widget...", "Error displaying widget: model not found")), \
        f"the page shows {shown!r}; lesson 00 does not say so"
    mine.run_all()
    click_me(mine)


def test_without_the_widget_extension_a_widget_stays_a_line_of_text(course, browser, serve,
                                                                pages, keep_screenshot):
    """Lesson 00: "If you still see a line of text after running the cell, the widget
    extension is not active"."""
    assert "you still see a line of text after running the cell" in welcome_prose()
    server = serve(course, disabled_extensions=["@jupyter-widgets/jupyterlab-manager"])
    notebook = open_page(browser, server, LESSON, pages)
    notebook.command("notebook:run-all-cells")
    notebook.settle()
    out = notebook.focus = notebook.cell(CLICK_ME).locator(".jp-OutputArea-output").first
    expect(out).to_contain_text("HBox(children=(Button(description='Click me'")
    assert button(notebook.cell(CLICK_ME), "Click me").count() == 0
    keep_screenshot(notebook, "no-widget-extension")
