"""A copy of a lesson keeps the lesson's kernel, so its widgets stay live.

File → Save Notebook As… writes a copy of a lesson into `my_work/` and opens it. Left to
itself, JupyterLab starts a new kernel for the copy: the copy's saved widget views then
have no model behind them ("Error displaying widget: model not found") until every cell
runs again, and the lesson's kernel runs on, serving a tab the learner has moved away from.

So the course's server remembers which lesson a new notebook was copied from (its first
cell's id: Save As keeps cell ids, and every lesson's first cell has its own), and when
JupyterLab asks for a kernel for that copy while the lesson's kernel is running, it hands
the copy the lesson's kernel. The copy opens with the lesson's state and live widgets
(JupyterLab's widget manager fetches the kernel's widget models as it connects), and one
kernel serves both tabs.

`CourseContentsManager.save` calls `Copies.saw`; `CourseSessionManager` (`make lab` uses it)
asks `Copies.lesson_of` before starting a kernel.
"""

import asyncio
import glob
import json
import os
import posixpath
import time

try:
    from jupyter_server.services.sessions.sessionmanager import SessionManager
    from traitlets import Float
except ImportError as missing:
    raise ImportError("durable_lite.lab.copies is part of JupyterLab's server for the course "
                      "and needs JupyterLab: pip install 'durable-lite[lab]'") from missing


class Copies:
    """Which new notebook was saved from which lesson, for as long as the server runs."""

    def __init__(self):
        self._lesson_of = {}            # the copy's path -> the lesson's path, both from the root
        self._first_cells = None        # a lesson's first cell id -> the lesson's path

    def saw(self, manager, model, path, existed: bool) -> None:
        """A notebook was saved at `path`. If it is new and begins as a lesson does, note it."""
        path = _tidy(path)
        content = model.get("content") if model.get("type") == "notebook" else None
        cells = content.get("cells") if isinstance(content, dict) else None
        if existed or not cells or not isinstance(cells[0], dict) or manager.is_read_only(path):
            return
        lesson = self._lessons(manager).get(cells[0].get("id"))
        if lesson is not None and lesson != path:
            self._lesson_of[path] = lesson

    def lesson_of(self, path):
        return self._lesson_of.get(_tidy(path or ""))

    def _lessons(self, manager) -> dict:
        """Read once: the lessons are read-only, so their first cells do not change."""
        if self._first_cells is None:
            self._first_cells = {}
            root = os.path.abspath(manager.root_dir)
            # each place walked under the name the server serves it by: under `make hub` a
            # learner's notebooks/ is a link to the course's lessons, elsewhere on the disk
            served = {os.path.realpath(os.path.join(root, name)): os.path.join(root, name)
                      for pattern in manager.read_only
                      for name in glob.glob(pattern, root_dir=root)}
            for place in manager._read_only_places():
                for folder, _, files in os.walk(served.get(place, place)):
                    for name in sorted(files):
                        if name.endswith(".ipynb"):
                            full = os.path.join(folder, name)
                            first = _first_cell_id(full)
                            if first is not None:
                                relative = os.path.relpath(full, root).replace(os.sep, "/")
                                self._first_cells.setdefault(first, relative)
        return self._first_cells


class CourseSessionManager(SessionManager):
    """JupyterLab's sessions, with a lesson's copy given the lesson's running kernel."""

    wait_for_the_lesson = Float(30.0, config=True, help=(
        "Seconds a lesson's copy waits for the lesson's tab to close (the learner reads "
        "JupyterLab's question and answers it) before it gets a kernel of its own."))

    async def create_session(self, path=None, name=None, type=None, kernel_name=None,
                             kernel_id=None):
        if kernel_id is None and path is not None:
            kernel_id = await self._lesson_kernel(path, name)
        return await super().create_session(path=path, name=name, type=type,
                                             kernel_name=kernel_name, kernel_id=kernel_id)

    async def _lesson_kernel(self, path, name):
        """The running kernel of the lesson the notebook at `path` was copied from. JupyterLab
        asks for a session at a made-up path in the notebook's folder (`my_work/<uuid>`),
        naming the notebook in `name`, and moves the session to the notebook's path after."""
        copies = getattr(self.contents_manager, "copies", None)
        if copies is None:
            return None
        named = posixpath.join(posixpath.dirname(_tidy(path)), name) if name else None
        lesson = copies.lesson_of(path) or (copies.lesson_of(named) if named else None)
        if lesson is None:
            return None
        for session in await self.list_sessions():
            if _tidy(session.get("path") or "") == lesson and session.get("kernel"):
                kernel_id = session["kernel"]["id"]
                return kernel_id if await self._lesson_tab_closed(kernel_id) else None
        return None             # the lesson's kernel has gone: the copy gets a new one

    async def _lesson_tab_closed(self, kernel_id) -> bool:
        """Wait until no browser tab is connected to the lesson's kernel.

        Save As closes the lesson's tab and opens the copy at the same moment. A page lets
        only the first of its connections to a kernel handle widgets, so the copy must
        connect after the lesson's tab has let go: JupyterLab asks first whether to save
        the lesson, and the learner's Discard closes it. If the lesson stays open (Cancel),
        the copy gets a kernel of its own after `wait_for_the_lesson` seconds."""
        deadline = time.monotonic() + self.wait_for_the_lesson
        while time.monotonic() < deadline:
            if kernel_id not in self.kernel_manager:
                return False
            if self.kernel_manager.kernel_model(kernel_id).get("connections", 0) == 0:
                return True
            await asyncio.sleep(0.1)    # a tab closing, not work: nothing to be told of
        return False


def _first_cell_id(path):
    try:
        with open(path, encoding="utf-8") as f:
            cells = json.load(f).get("cells") or []
    except (OSError, ValueError):
        return None
    return cells[0].get("id") if cells and isinstance(cells[0], dict) else None


def _tidy(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/").strip("/"))
