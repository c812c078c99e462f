"""A lesson's copy keeps the lesson's kernel (durable_lite/lab/copies.py), on a real server.

File → Save Notebook As… into my_work/ writes the copy (a PUT of a new file) and opens it:
JupyterLab asks for a session at a made-up path in the copy's folder, naming the copy. The
server hands that session the lesson's running kernel once no tab is connected to it, so
the copy carries on with the lesson's variables and widgets. Anything else gets a kernel
of its own: a notebook that is not a lesson's copy, a file that existed before, a copy
whose lesson has no kernel any more, and a copy whose lesson's tab stays open. The browser
side (Save As clicked, Discard, a live widget in the copy) is in
tests/browser/test_saving.py.
"""

import asyncio
import json
import secrets
import time
import urllib.request
import uuid

import pytest

pytest.importorskip("jupyter_server")

import process_support  # noqa: E402
from test_lab_readonly_paths import LESSON, ROOT, Lab  # noqa: E402

WAIT = 3                     # seconds a copy waits for its lesson's tab here (30 in make lab)


class CopiesLab(Lab):
    def command(self) -> list:
        return super().command() + [f"--CourseSessionManager.wait_for_the_lesson={WAIT}"]

    def api(self, method, path, body=None):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def session(self, path, name=None):
        """A session as JupyterLab asks for one: name given, path made up when a name is."""
        asked = path if name is None else f"{path.rsplit('/', 1)[0]}/{uuid.uuid4()}"
        return self.api("POST", "/api/sessions", {"path": asked, "name": name or "",
                                                  "type": "notebook",
                                                  "kernel": {"name": "python3"}})

    def save(self, path, content):
        return self.api("PUT", f"/api/contents/{path}",
                        {"type": "notebook", "format": "json", "content": content})


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("copies")
    running = CopiesLab(base)
    running.token = secrets.token_hex(16)
    try:
        running.start()
        yield running
        for kernel in running.api("GET", "/api/kernels"):        # as a learner's Shut Down
            running.api("DELETE", f"/api/kernels/{kernel['id']}")
    finally:
        running.stop()
        left = process_support.wait_until_none_left(str(base), deadline=60)
        assert left == [], f"still running after the server was stopped: {left}"


def lesson():
    return json.loads((ROOT / LESSON).read_text(encoding="utf-8"))


def test_a_copy_saved_as_gets_the_lessons_running_kernel(lab):
    kernel = lab.session(LESSON)["kernel"]["id"]
    lab.save("my_work/00_mine.ipynb", lesson())
    began = time.monotonic()
    copy = lab.session("my_work/00_mine.ipynb", name="00_mine.ipynb")
    assert copy["kernel"]["id"] == kernel
    assert time.monotonic() - began < WAIT          # no tab held the kernel: no wait
    again = lab.session("my_work/00_mine.ipynb")    # asked by its own path, too
    assert again["kernel"]["id"] == kernel


def test_anything_else_gets_a_kernel_of_its_own(lab):
    kernel = lab.session(LESSON)["kernel"]["id"]
    other = lesson()
    other["cells"][0]["id"] = "not-a-lesson-cell"
    lab.save("my_work/other.ipynb", other)                         # not a lesson's copy
    lab.save("my_work/01_mine.ipynb", lesson())                    # existed before: a save
    for path, name in (("my_work/other.ipynb", "other.ipynb"),
                       ("my_work/01_mine.ipynb", "01_mine.ipynb")):
        assert lab.session(path, name=name)["kernel"]["id"] != kernel, path


def test_a_copy_whose_lesson_has_no_kernel_gets_its_own(lab):
    lab.save("my_work/00_later.ipynb", lesson())
    for session in lab.api("GET", "/api/sessions"):
        if session["path"] == LESSON:
            lab.api("DELETE", f"/api/sessions/{session['id']}")      # the lesson was shut down
    copy = lab.session("my_work/00_later.ipynb", name="00_later.ipynb")
    assert copy["kernel"]["id"] not in {s["kernel"]["id"] for s in lab.api("GET", "/api/sessions")
                                        if s["path"] == LESSON}


def test_while_the_lessons_tab_stays_open_the_copy_waits_then_gets_its_own_kernel(lab):
    from tornado.websocket import websocket_connect

    kernel = lab.session(LESSON)["kernel"]["id"]
    lab.save("my_work/00_cancelled.ipynb", lesson())

    async def with_the_lesson_open():
        url = f"ws://127.0.0.1:{lab.port}/api/kernels/{kernel}/channels?token={lab.token}"
        tab = await websocket_connect(url)          # the lesson's tab, connected
        try:
            began = time.monotonic()
            copy = await asyncio.get_running_loop().run_in_executor(
                None, lambda: lab.session("my_work/00_cancelled.ipynb", name="00_cancelled.ipynb"))
            return copy, time.monotonic() - began
        finally:
            tab.close()

    copy, waited = asyncio.run(with_the_lesson_open())
    assert copy["kernel"]["id"] != kernel
    assert waited >= WAIT - 0.5
