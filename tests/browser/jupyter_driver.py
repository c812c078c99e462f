"""Drive a real JupyterLab in a real browser: start a server, open a lesson, run it, click.

`LabServer` starts JupyterLab on 127.0.0.1 with a token and throwaway config, data, runtime,
IPython and matplotlib folders, with the options `make lab` gives it (read-only lessons, no
news pop-up, no update check: `durable_lite.lab.launch.course_options`). By default it
serves fresh copies of the lessons, read-only like the originals; given a `course` folder
it serves that folder as `make lab` serves the course. `NotebookPage` is one lesson with
its own kernel, open in a browser page of its own or as a tab of a `LabPage`: one page with
JupyterLab loaded that the tests of a module share (loading JupyterLab costs the browser
more CPU than running most lessons).

Nothing here sleeps for a fixed time. Two conditions do all the waiting:

- `run_all()` awaits JupyterLab's own "Run All" command, which resolves when the last cell
  has finished;
- `settle()` waits until the kernel has answered every message the page sent it. A click on
  a widget button is a message to the kernel, and so is a new slider or dropdown value.
  ipywidgets holds a new value back while an earlier one is unanswered but sends a click at
  once, so a quick "choose a crash point, press Run" can reach the kernel as "Run, then
  change the crash point" unless each action is settled before the next. The page counts
  its own messages (see `_TRACKER_JS`) instead of guessing from the busy/idle light.
"""

import contextlib
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from durable_lite.lab.launch import course_environment, course_options, die_with_parent

# How long a condition may take before the test fails. Generous: two cores are shared with
# other work, and a lesson's Run All takes 2-11 s on a quiet machine. What the page shows
# after the kernel has answered needs only a moment to be drawn.
TIMEOUT_MS = 90_000
EXPECT_TIMEOUT_MS = 20_000

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# ipywidgets' own messages when a view cannot be built (a model missing, an extension
# broken), or not yet (no kernel has the model, maybe never will).
WIDGET_ERROR_TEXT = "Error displaying widget"
WIDGET_LOADING_TEXT = "Loading widget"

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage"]

# The news pop-up is switched off by `make lab`'s own defaults, which every server here
# gets, so the tests see what a learner sees. Settings a test may add as the learner's own:
AUTOSAVE = "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings"

# JupyterLab's "would you like to get notified about official Jupyter news?" pop-up.
NEWS_POPUP_TEXT = "official Jupyter news"


def find_chromium():
    """The Chromium (or Chrome) executable to drive, or None.

    DURABLE_LITE_CHROMIUM names one explicitly; otherwise the usual names on PATH.
    """
    explicit = os.environ.get("DURABLE_LITE_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    mac = "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"
    return mac if os.access(mac, os.X_OK) else None


@contextlib.contextmanager
def launched_chromium():
    """One headless Chromium (the machine's own, see find_chromium) for as long as the block
    lasts, with Playwright's expect() given the suite's patience."""
    from playwright.sync_api import expect as playwright_expect
    from playwright.sync_api import sync_playwright

    playwright_expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_chromium(), headless=True,
                                             args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def expect(target, *args, **kwargs):
    """Playwright's `expect`, imported on first use: without playwright installed this module
    still imports, and the tests skip with a reason instead of failing to collect."""
    from playwright.sync_api import expect as playwright_expect
    return playwright_expect(target, *args, **kwargs)


def button(scope, label):
    """The buttons in `scope` whose visible text is exactly `label`.

    Matched on the text, not the accessible name: an ipywidgets button with an icon has the
    icon's glyph in its accessible name ("\uf04b Run").
    """
    return scope.locator("button").filter(has_text=re.compile(r"^\s*" + re.escape(label) + r"\s*$"))


# -------------------------------------------------------------------------------------------
class LabServer:
    """A JupyterLab server, set up as `make lab` sets it up.

    notebooks: the lessons folder that `fresh_copy` copies from (into `copy-N/notebooks/`,
    read-only like the lessons themselves). course: serve this folder instead, as `make lab`
    serves the course (its `notebooks/` read-only, by make lab's own rule). settings: the
    learner's own JupyterLab settings, {settings file: values}. disabled_extensions: lab
    extensions to switch off, as a JupyterLab installed without them would be.
    """

    def __init__(self, notebooks: Path, workdir: Path, course: Path = None, settings=None,
                 disabled_extensions=()):
        self.notebooks, self.workdir = Path(notebooks), Path(workdir)
        self.course = None if course is None else Path(course)
        self.root = self.course or self.workdir / "served"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        self.settings = dict(settings or {})
        self.disabled_extensions = list(disabled_extensions)
        self.token = os.urandom(12).hex()
        self.copies = 0
        self.shutdowns = []                  # kernels being shut down in the background
        self.process = None
        self.url = None                      # set once the server answers
        self.log_path = self.workdir / "jupyterlab.log"

    def environment(self):
        env = dict(os.environ)
        for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                     "IPYTHONDIR", "MPLCONFIGDIR"):
            folder = self.workdir / name.lower()
            folder.mkdir(exist_ok=True)
            env[name] = str(folder)
        env.pop("JUPYTERLAB_SETTINGS_DIR", None)
        env.pop("JUPYTERLAB_WORKSPACES_DIR", None)
        env.pop("JUPYTER_CONFIG_PATH", None)
        settings = Path(env["JUPYTER_CONFIG_DIR"]) / "lab" / "user-settings"
        for relative, values in self.settings.items():
            path = settings / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env["PYTHONUNBUFFERED"] = "1"
        env = course_environment(env, self.workdir / "course-settings")
        if self.disabled_extensions:
            page_config = self.workdir / "course-settings" / "labconfig" / "page_config.json"
            config = json.loads(page_config.read_text())           # the course's, and:
            config["disabledExtensions"] = {name: True for name in self.disabled_extensions}
            page_config.write_text(json.dumps(config))
        return env

    def read_only_options(self):
        """The copies are lessons too: read-only, like the folder they come from."""
        if self.course is not None:
            return []                        # make lab's own rule: the course's notebooks/
        return [f"--CourseContentsManager.read_only={pattern}"
                for pattern in ("copy-*/notebooks", "copy-*/notebooks/*")]

    def start(self):
        env = self.environment()
        for attempt in range(3):            # the free port can be taken between probe and bind
            port = _free_port()
            command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                       "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0",
                       f"--IdentityProvider.token={self.token}",
                       f"--ServerApp.root_dir={self.root}",
                       "--LabApp.expose_app_in_browser=True",   # lets a test call Lab's commands
                       *course_options(), *self.read_only_options()]
            if hasattr(os, "getuid") and os.getuid() == 0:
                command.append("--allow-root")
            log = open(self.log_path, "a")
            # dies with the test process, however it ends (Linux): no JupyterLab left behind
            self.process = subprocess.Popen(command, cwd=self.root, env=env, stdout=log,
                                            stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
            log.close()
            if self._wait_until_ready(port):
                self.url = f"http://127.0.0.1:{port}"
                return self
        raise RuntimeError(f"JupyterLab did not start; its log:\n{self.log_tail()}")

    def _wait_until_ready(self, port) -> bool:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                url = f"http://127.0.0.1:{port}/api/status?token={self.token}"
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        return True
            except OSError:
                time.sleep(0.2)             # polling a server that is starting, not a wait for work
            except http.client.HTTPException:
                break                       # not a web server: another program took the port
        self.stop()
        return False

    def fresh_copy(self, notebook: Path) -> str:
        """Copy the lessons folder; return the served path of `notebook` inside the copy."""
        self.copies += 1
        target = self.root / f"copy-{self.copies}" / self.notebooks.name
        shutil.copytree(self.notebooks, target,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        return (target / Path(notebook).name).relative_to(self.root).as_posix()

    def start_kernel(self, served_path: str):
        """Start the notebook's kernel now, through the REST API, so that it boots while the
        browser loads JupyterLab; the page then finds the session and joins it."""
        notebook = json.loads((self.root / served_path).read_text(encoding="utf-8"))
        kernel = notebook.get("metadata", {}).get("kernelspec", {}).get("name", "python3")
        self._api("POST", "/api/sessions", {"path": served_path, "type": "notebook",
                                            "name": Path(served_path).name,
                                            "kernel": {"name": kernel}})

    def shut_down_kernel(self, served_path: str):
        """Ask the server to end the notebook's session and kernel; don't wait for it."""
        def shut_down():
            try:
                for session in self._api("GET", "/api/sessions"):
                    if session.get("path") == served_path:
                        self._api("DELETE", f"/api/sessions/{session['id']}")
            except OSError:                  # the server is going away: it ends its kernels
                pass
        thread = threading.Thread(target=shut_down, daemon=True)
        thread.start()
        self.shutdowns.append(thread)

    def _api(self, method, path, body=None):
        request = urllib.request.Request(
            f"{self.url}{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def log_tail(self, chars=3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self):
        """End every kernel through the API first (a kernel outlives a server that had to be
        killed), then the server."""
        if self.process is not None and self.process.poll() is None:
            for thread in self.shutdowns:
                thread.join(timeout=30)
            try:
                for session in (self._api("GET", "/api/sessions") if self.url else []):
                    self._api("DELETE", f"/api/sessions/{session['id']}")
            except OSError:
                pass
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -------------------------------------------------------------------------------------------
# Installed into the page once the notebook's kernel is up. It notes each message the page
# sends on the shell channel and crosses it off when JupyterLab has *processed* the
# kernel's "idle" for it: JupyterLab handles a kernel's messages one after the other, so by
# then every widget update the kernel sent in answer has been applied to the page. (Its
# raw-message signal fires before processing, which would be too early.) It also keeps what
# the kernel raised or wrote to stderr while answering a widget message (a click, a new
# value): JupyterLab shows that only in its Log Console, where a learner rarely looks.
# Messages sent before it was installed are not its business (at start-up JupyterLab's
# widget manager probes a kernel that has not imported ipywidgets yet).
_TRACKER_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel.sessionContext.session.kernel;
  window.__durableLitePanel = panel;       // the lesson, even if another tab gets the focus
  if (kernel.__durableLite) { return; }
  const tracker = {pending: new Map(), widgetMessages: new Set(), callbackOutput: []};
  kernel.__durableLite = tracker;
  window.__durableLite = tracker;
  kernel.anyMessage.connect((_, args) => {
    const msg = args.msg;
    // A comm_close asks for nothing back (the protocol has no reply to it): JupyterLab
    // without the widget extension sends one for each widget the kernel opens, and waiting
    // for the kernel's "idle" after it once waited 90 s on a busy machine for nothing.
    if (args.direction === 'send' && msg.channel === 'shell'
        && msg.header.msg_type !== 'comm_close') {
      tracker.pending.set(msg.header.msg_id, msg.header.msg_type);
      if (msg.header.msg_type === 'comm_msg') { tracker.widgetMessages.add(msg.header.msg_id); }
    }
  });
  kernel.iopubMessage.connect((_, msg) => {
    const parent = msg.parent_header || {};
    const type = msg.header.msg_type;
    if (type === 'status' && msg.content.execution_state === 'idle') {
      tracker.pending.delete(parent.msg_id);
    }
    if (tracker.widgetMessages.has(parent.msg_id)) {
      if (type === 'error') {
        tracker.callbackOutput.push(msg.content.ename + ': ' + msg.content.evalue);
      } else if (type === 'stream' && msg.content.name === 'stderr') {
        tracker.callbackOutput.push('stderr: ' + msg.content.text);
      }
    }
  });
}"""

_KERNEL_IDLE_JS = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session
                 && panel.sessionContext.session.kernel;
  return Boolean(kernel && kernel.status === 'idle' && panel.content && panel.content.model);
}"""

_SETTLED_JS = """() => {
  const t = window.__durableLite;
  const kernel = window.__durableLitePanel.sessionContext.session.kernel;
  return t.pending.size === 0 && kernel.status === 'idle';
}"""

# Every code cell: its tags, execution count, and a summary of each output.
_CELLS_JS = """() => {
  const model = window.__durableLitePanel.content.model;
  const cells = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    if (cell.type !== 'code') { continue; }
    const outputs = cell.outputs.toJSON().map(o => ({
      type: o.output_type,
      ename: o.ename || null, evalue: o.evalue || null,
      widget: Boolean(o.data && o.data['%s']),
      plain: o.data && o.data['text/plain'] ? [].concat(o.data['text/plain']).join('') : null,
    }));
    cells.push({index: i, tags: cell.getMetadata('tags') || [],
                count: cell.executionCount, outputs: outputs});
  }
  return cells;
}""" % WIDGET_VIEW

# Run a JupyterLab command and wait for it (Run All resolves when the last cell is done).
_COMMAND_JS = """async ([command, limit]) => {
  const timeout = new Promise(resolve => setTimeout(() => resolve('timeout'), limit));
  return await Promise.race([window.jupyterapp.commands.execute(command), timeout]);
}"""


# Open a notebook as a tab of the JupyterLab already loaded in the page, and make it the
# current one (LabPage: no page load per lesson).
_OPEN_TAB_JS = """async path => {
  const panel = await window.jupyterapp.commands.execute('docmanager:open', {path});
  await panel.context.ready;
  window.jupyterapp.shell.activateById(panel.id);
}"""

# Close the lesson's tab without asking, and end its kernel.
_CLOSE_TAB_JS = """async () => {
  const panel = window.__durableLitePanel;
  if (!panel || panel.isDisposed) { return; }
  try { await panel.sessionContext.shutdown(); } finally { panel.dispose(); }
}"""


class LabPage:
    """One browser page with JupyterLab loaded, in which lessons open one after another as
    tabs. Loading JupyterLab costs a browser more than a lesson's Run All does, so the tests
    of a module share one page, as a learner keeps one browser tab open all day."""

    def __init__(self, browser, server: LabServer):
        self.browser, self.server = browser, server
        self.page = None
        self.console_errors = []

    def ready(self, width: int):
        """The page, loaded and `width` pixels wide (a new one if the last was dropped)."""
        if self.page is None:
            context = self.browser.new_context(viewport={"width": width, "height": 900})
            self.page = context.new_page()
            self.page.set_default_timeout(TIMEOUT_MS)
            self.page.on("console", self._on_console)
            self.page.on("pageerror",
                         lambda error: self.console_errors.append(f"page error: {error}"))
            self.page.goto(f"{self.server.url}/lab?token={self.server.token}&reset")
            self.page.wait_for_function("() => window.jupyterapp && "
                                        "window.jupyterapp.commands.hasCommand('docmanager:open')")
        else:
            self.page.set_viewport_size({"width": width, "height": 900})
        self.console_errors.clear()           # what an earlier lesson's page logged is not ours
        return self.page

    def _on_console(self, message):
        if message.type == "error":
            self.console_errors.append(f"console error: {message.text}")

    def drop(self):
        """Close the page: the next lesson gets a freshly loaded one (after a failure, when
        the page may be left in any state)."""
        if self.page is not None:
            try:
                self.page.context.close()
            finally:
                self.page = None


class NotebookPage:
    """One lesson with its own kernel, open in a browser page of its own or as a tab of a
    shared LabPage (`in_tab`)."""

    def __init__(self, context, server: LabServer, served_path: str, name: str):
        self.context, self.server, self.served_path, self.name = context, server, served_path, name
        self.lab = None
        self.page = context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.console_errors = []
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda error: self.console_errors.append(f"page error: {error}"))
        self.focus = None                    # the widget being driven, for screenshots

    @classmethod
    def in_tab(cls, lab: LabPage, served_path: str, name: str, width: int) -> "NotebookPage":
        self = cls.__new__(cls)
        self.server, self.served_path, self.name, self.lab = lab.server, served_path, name, lab
        self.page = lab.ready(width)
        self.context = None
        self.console_errors = lab.console_errors
        self.focus = None
        return self

    def _on_console(self, message):
        if message.type == "error":
            self.console_errors.append(f"console error: {message.text}")

    # opening and running -------------------------------------------------------------------
    def open(self) -> "NotebookPage":
        self.server.start_kernel(self.served_path)
        if self.lab is None:
            url = f"{self.server.url}/lab/tree/{self.served_path}?token={self.server.token}&reset"
            self.page.goto(url)
        else:
            self.page.evaluate(_OPEN_TAB_JS, self.served_path)
        self.page.wait_for_function(_KERNEL_IDLE_JS, timeout=TIMEOUT_MS)
        self.page.evaluate(_TRACKER_JS)
        return self

    def command(self, name: str):
        result = self.page.evaluate(_COMMAND_JS, [name, TIMEOUT_MS])
        assert result != "timeout", \
            f"{self.name}: {name} did not finish in {TIMEOUT_MS // 1000} s; {self.where_it_stands()}"
        return result

    def where_it_stands(self) -> str:
        """The kernel's status, the messages it has not finished, and each code cell's
        execution count, for a message about a run that did not finish."""
        try:
            status, pending = self.page.evaluate(
                "() => [window.__durableLitePanel.sessionContext.session.kernel.status,"
                " Array.from(window.__durableLite.pending.values())]")
            counts = [(c["index"], c["count"]) for c in self.cells()]
        except Exception as error:           # the page may be what broke
            return f"(the page could not say where the run stands: {error})"
        return (f"kernel {status}, not finished: {pending or 'nothing'}; "
                f"code cells (index, execution count): {counts}")

    def run_all(self) -> "NotebookPage":
        """Run → Run All Cells, wait for the last cell, then check every cell ran cleanly."""
        self.command("notebook:run-all-cells")
        self.settle()
        self.assert_cells_ran()
        return self

    def run_through(self, cell_index: int) -> "NotebookPage":
        """Run the cells from the top down to `cell_index` included, as a learner reading
        along would have; the cells below stay as they were."""
        self.page.evaluate("i => { window.__durableLitePanel.content.activeCellIndex = i; }",
                           cell_index)
        self.command("notebook:run-all-above")
        self.command("notebook:run-cell")
        self.settle()
        self.assert_cells_ran(upto=cell_index)
        return self

    def run_from(self, cell_index: int) -> "NotebookPage":
        """Run the cells from `cell_index` to the end, as a learner who has read down to
        there and carries on; then check every cell ran cleanly."""
        self.page.evaluate("i => { window.__durableLitePanel.content.activeCellIndex = i; }",
                           cell_index)
        self.command("notebook:run-all-below")
        self.settle()
        self.assert_cells_ran()
        return self

    def settle(self):
        """Wait until the kernel has answered every message this page sent it."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout
        try:
            self.page.wait_for_function(_SETTLED_JS, timeout=TIMEOUT_MS)
        except PlaywrightTimeout:
            raise AssertionError(f"{self.name}: the kernel did not answer every message within "
                                 f"{TIMEOUT_MS // 1000} s; {self.where_it_stands()}") from None

    # reading the notebook ------------------------------------------------------------------
    def cells(self):
        return self.page.evaluate(_CELLS_JS)

    def assert_cells_ran(self, upto=None):
        problems = []
        for cell in self.cells():
            if upto is not None and cell["index"] > upto:
                break
            if cell["count"] is None:
                problems.append(f"cell {cell['index']} did not run")
            for out in cell["outputs"]:
                if out["type"] == "error" and "raises-exception" not in cell["tags"]:
                    problems.append(f"cell {cell['index']} raised {out['ename']}: {out['evalue']}")
        assert not problems, f"{self.name}: " + "; ".join(problems)

    def widget_outputs(self, kind=None, exclude=()):
        """Locators for the widget views on the page, in notebook order.

        kind: keep only the views of that class, recognised by their plain-text repr, which
        starts with the class name for every lab widget ("CrashLab(mode='naive', ...)").
        exclude: class names whose views to leave out.
        """
        def is_a(plain, name):
            return plain.startswith(name + "(")

        found = []
        for cell in self.cells():
            for position, out in enumerate(cell["outputs"]):
                plain = out["plain"] or ""
                if (out["widget"] and (kind is None or is_a(plain, kind))
                        and not any(is_a(plain, name) for name in exclude)):
                    found.append(self.output(cell["index"], position))
        return found

    def outputs_saying(self, text: str):
        """The cell outputs on the page that show `text`."""
        return self.page.locator(".jp-OutputArea-output").filter(has_text=text)

    def cell(self, index: int):
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def output(self, cell_index: int, position: int):
        return self.cell(cell_index).locator(".jp-OutputArea-child").nth(position)

    # what went wrong, as a learner would notice it -----------------------------------------
    def problems(self):
        """Everything on the page that says something went wrong, as readable lines."""
        found = list(self.console_errors)
        shown = self.outputs_saying(WIDGET_ERROR_TEXT).count()   # in outputs, not in the prose
        if shown:
            found.append(f"{shown} output(s) say {WIDGET_ERROR_TEXT!r}")
        loading = self.outputs_saying(WIDGET_LOADING_TEXT)
        try:                                 # a view says so for a moment while it is built
            expect(loading).to_have_count(0, timeout=EXPECT_TIMEOUT_MS)
        except AssertionError:
            found.append(f"{loading.count()} output(s) still say {WIDGET_LOADING_TEXT!r}")
        found += [f"widget callback: {line.strip()}"
                  for line in self.page.evaluate("() => window.__durableLite.callbackOutput")]
        if self.page.get_by_text(NEWS_POPUP_TEXT).count():
            found.append("JupyterLab's news pop-up covers the page (make lab switches it off)")
        badge = self.page.locator(".jp-LogConsoleStatusItem:not(.lm-mod-hidden)")
        if badge.count():
            found.append("the status bar shows Log Console messages: "
                         + (badge.locator("[title]").first.get_attribute("title") or "?"))
        return found

    def assert_no_problems(self, when: str):
        problems = self.problems()
        assert not problems, f"{self.name}, {when}:\n  " + "\n  ".join(problems)

    def assert_widgets_rendered(self):
        """Every widget view output holds a rendered widget (a live view, not its text)."""
        outputs = self.widget_outputs()
        assert outputs, f"{self.name}: no widget is displayed after Run All"
        for out in outputs:
            out.locator(".jupyter-widgets").first.wait_for(state="attached")

    # leaving --------------------------------------------------------------------------------
    def screenshot(self, path: Path) -> Path:
        if self.focus is not None:
            try:
                self.focus.scroll_into_view_if_needed(timeout=5_000)
            except Exception:                # a screenshot of a broken page is still useful
                pass
        self.page.screenshot(path=str(path))
        return path

    def close(self, failed: bool = False):
        """Close the page, or the tab, and shut its kernel down (a kernel per test adds up on
        two cores); the server finishes the shutdown while the next test starts. A shared
        page a test failed in is dropped, so that no later test meets what was left on it."""
        try:
            if self.lab is None:
                self.context.close()
            elif failed:
                self.lab.drop()
            else:
                self.page.evaluate(_CLOSE_TAB_JS)
        finally:
            self.server.shut_down_kernel(self.served_path)
