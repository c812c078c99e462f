"""Fixtures for the browser tests: one JupyterLab, one Chromium and one page for the whole
module; a fresh tab, kernel and copy of the lessons for every test; a screenshot when one
fails.

Without a browser these tests skip with a one-line reason, so `make test` works on a
learner's machine that has no Chromium. CI sets DURABLE_LITE_REQUIRE_BROWSER=1, which
turns that skip into a failure: there a missing browser is a broken set-up.
"""

import importlib.util
import os
import re
import tempfile
from pathlib import Path

import pytest

from jupyter_driver import LabPage, LabServer, NotebookPage, find_chromium, launched_chromium
from widget_lessons import NOTEBOOKS

SKIPPED = pytest.StashKey[str]()
REQUIRED = os.environ.get("DURABLE_LITE_REQUIRE_BROWSER", "") not in ("", "0")


def missing_browser():
    """Why the browser tests cannot run here, or None if they can."""
    # Looked up, not imported: every worker asks while collecting, and importing Playwright
    # costs about a second; the worker that drives the browser imports it then.
    if importlib.util.find_spec("playwright") is None:
        return "the Python package playwright is not installed (it is in the test extra)"
    if find_chromium() is None:
        return ("no Chromium found (install the chromium package, "
                "or set DURABLE_LITE_CHROMIUM to a Chromium or Chrome executable)")
    return None


def pytest_collection_modifyitems(config, items):
    reason = missing_browser()
    if not reason or REQUIRED:
        return
    skip = pytest.mark.skip(reason=f"browser tests skipped: {reason}")
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(skip)
            config.stash[SKIPPED] = skip.kwargs["reason"]


def pytest_terminal_summary(terminalreporter, config):
    """Say why once, at the end, even without -rs: the skips are a set-up matter."""
    if SKIPPED in config.stash:
        terminalreporter.write_line(config.stash[SKIPPED], yellow=True)


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    reason = missing_browser()
    if reason:                               # only reached when DURABLE_LITE_REQUIRE_BROWSER is set
        pytest.fail(f"DURABLE_LITE_REQUIRE_BROWSER is set but {reason}", pytrace=False)
    server = LabServer(NOTEBOOKS, tmp_path_factory.mktemp("jupyterlab")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def chromium(lab_server):
    with launched_chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def lab_page(lab_server, chromium):
    """The module's one JupyterLab page: each test's lesson opens in it as a tab."""
    lab = LabPage(chromium, lab_server)
    yield lab
    lab.drop()


@pytest.fixture
def open_lesson(lab_server, lab_page, screenshot_folder, request):
    """open_lesson(path, width=1400) -> a NotebookPage on a fresh copy of that lesson, kernel
    idle, as a tab of a window `width` pixels wide (JupyterLab's file browser open, as it
    starts)."""
    pages = []
    request.node.lesson_pages = pages

    def open_(path: Path, width: int = 1400) -> NotebookPage:
        page = NotebookPage.in_tab(lab_page, lab_server.fresh_copy(path), Path(path).stem, width)
        pages.append(page)
        return page.open()

    yield open_
    failed = getattr(request.node, "failed_in_call", True)
    for page in pages:
        page.close(failed=failed)


@pytest.fixture(scope="session")
def screenshot_folder():
    """Where screenshots go: DURABLE_LITE_BROWSER_SHOTS if set (passing steps are kept there
    too), else a temporary folder made at the first failure, one that outlives the run.
    Not pytest's own tmp folders: pytest deletes all but the newest three, and other test
    runs may be going on."""
    chosen = os.environ.get("DURABLE_LITE_BROWSER_SHOTS")
    if chosen:
        Path(chosen).mkdir(parents=True, exist_ok=True)
        return lambda: Path(chosen)
    made = []

    def folder():
        if not made:
            # the temporary folder the run started with: the run's own (in /dev/shm,
            # tests/conftest.py) is removed at its end, with any failure's picture in it
            where = os.environ.get("DURABLE_LITE_TEST_FIRST_TMPDIR") or None
            made.append(Path(tempfile.mkdtemp(prefix="durable-lite-browser-", dir=where)))
        return made[0]
    return folder


@pytest.fixture
def keep_screenshot(request, screenshot_folder):
    """keep_screenshot(page, label): save a picture of a passing step, when asked to by
    DURABLE_LITE_BROWSER_SHOTS (for a person to look at what a learner sees)."""
    def keep(page: NotebookPage, label: str):
        if os.environ.get("DURABLE_LITE_BROWSER_SHOTS"):
            page.screenshot(screenshot_folder() / f"{_safe(request.node.name)}-{_safe(label)}.png")
    return keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.failed_in_call = report.failed
    pages = getattr(item, "lesson_pages", None)
    if report.when != "call" or not report.failed or not pages:
        return
    folder = item.funcargs["screenshot_folder"]()
    for number, page in enumerate(pages):
        path = folder / f"FAILED-{_safe(item.name)}-{number}.png"
        try:
            page.screenshot(path)
            report.sections.append(("browser screenshot", f"saved to {path}"))
        except Exception as error:           # the page may be what broke
            report.sections.append(("browser screenshot", f"could not be taken: {error}"))


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:120]
