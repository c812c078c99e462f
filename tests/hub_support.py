"""A real `make hub` for the tests and the capacity benchmark: start it, sign in, stop it.

`RunningHub` runs `python -m durable_lite.hub.launch` on 127.0.0.1, as the hub's own user
for every learner (--one-user: these tests run as root on CI, and a hub run as root would
otherwise make every learner a system user, with a home folder, for good), with its state
in a folder of the test's. It reads the links and codes the launcher prints, and can say
which processes the hub has started, so a test can check that none outlives it.

`Learner` is one browser's worth of cookies: sign in with a name and the class code, wait
for the server, and call its Jupyter REST API. `Kernel` runs code in a kernel of the
learner's server over its websocket, as JupyterLab does (the capacity benchmark runs whole
lessons so). Nothing sleeps a fixed time: every wait is a condition with a deadline.
"""

import asyncio
import contextlib
import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 180.0             # seconds: a hub and a learner's first server on two busy cores


def wait_for(condition, what: str, timeout: float = DEADLINE, pause: float = 0.1):
    """Poll `condition()` until it returns something true; return that, or fail saying `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {what}")
        time.sleep(pause)              # polling a condition, not waiting a fixed time


def descendants(pid: int) -> set:
    """Every process below `pid` now, by /proc (Linux)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            ppid = int(text[text.rfind(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


class RunningHub:
    def __init__(self, folder: Path, port: int = 0, extra=()):
        self.folder = Path(folder)
        self.hub_folder = self.folder / "hub"
        self.grading_folder = self.folder / "grading"
        self.out = self.folder / "launcher.out"
        self.port, self.extra = port, list(extra)
        self.process = None
        self.seen = set()                    # every process the hub was seen to run

    def start(self) -> "RunningHub":
        command = [sys.executable, "-m", "durable_lite.hub.launch", "--ip", "127.0.0.1",
                   "--one-user", "--hub-folder", str(self.hub_folder),
                   "--grading-folder", str(self.grading_folder), *self.extra]
        if self.port:
            command += ["--port", str(self.port)]
        self.started = time.monotonic()
        with open(self.out, "w") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            text = wait_for(self._printed, "the hub to print its links")
        except AssertionError as exc:        # what the launcher and the hub said, to see why
            said = self.out.read_text(encoding="utf-8", errors="replace")
            raise AssertionError(f"{exc}; the launcher said:\n{said}\n{self.log_tail()}") from None
        self.ready_seconds = time.monotonic() - self.started
        self.learners_url = re.search(r"Learners open:\s+(\S+)", text).group(1)
        self.instructor_url = re.search(r"Instructor opens:\s+(\S+)", text).group(1)
        self.class_code = re.search(r"class code: (\S+)", text).group(1)
        self.instructor_code = re.search(r"name: instructor; code: (\S+)", text).group(1)
        self.base = self.learners_url.rsplit("/hub/", 1)[0]
        self.port = int(self.base.rsplit(":", 1)[1])
        self.note_processes()
        return self

    def _printed(self):
        text = self.out.read_text(encoding="utf-8", errors="replace")
        if self.process.poll() is not None:
            raise AssertionError(f"the hub's launcher exited ({self.process.returncode}):\n{text}"
                                 f"\n{self.log_tail()}")
        return text if "Instructor opens:" in text else None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join((self.hub_folder / "jupyterhub.log").read_text(
                errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no hub log)"

    def note_processes(self) -> set:
        """The processes under the launcher now (added to `seen`)."""
        now = descendants(self.process.pid) if self.process else set()
        self.seen |= now
        return now

    def stop(self, sig=signal.SIGTERM) -> float:
        """Stop the launcher with `sig` (SIGTERM: as `make` stopping it; SIGKILL: killed
        outright); return the seconds until every process it started had ended."""
        self.note_processes()
        started = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait(timeout=DEADLINE)
        wait_for(lambda: not [p for p in self.seen if alive(p)],
                 f"every process the hub started to end (left: {self.left()})", pause=0.2)
        return time.monotonic() - started

    def left(self) -> list:
        out = []
        for pid in sorted(self.seen):
            if alive(pid):
                try:
                    out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
                except OSError:
                    pass
        return out

    def kill_everything_left(self) -> None:
        """Last resort in a fixture's teardown, so a failing test leaves nothing running."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pid in self.seen:
            if alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass



@contextlib.contextmanager
def running_hub(folder: Path, extra=()):
    """A hub started in `folder` for as long as the block lasts (a module's fixture): stopped
    as `make` stops it at the end, and whatever a failing test left running killed."""
    running = RunningHub(folder, extra=extra).start()
    try:
        yield running
    finally:
        try:
            running.stop()
        finally:
            running.kill_everything_left()

class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Learner:
    """One browser's cookies on the hub."""

    def __init__(self, hub: RunningHub, name: str, code: str = None):
        self.hub, self.name = hub, name
        self.code = code or hub.class_code
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.plain = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar),
                                                 _NoRedirect)

    def sign_in(self) -> str:
        """Post the sign-in form; return where the hub sent the browser, or "refused"."""
        page = self.opener.open(f"{self.hub.base}/hub/login", timeout=60).read().decode()
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page).group(1)
        form = urllib.parse.urlencode({"username": self.name, "password": self.code,
                                       "_xsrf": xsrf}).encode()
        try:
            with self.opener.open(f"{self.hub.base}/hub/login?next=", data=form,
                                  timeout=60) as answer:
                return answer.url
        except urllib.error.HTTPError as exc:
            if exc.code == 403:
                return "refused"
            raise

    def status(self, path: str) -> int:
        """The HTTP status of GET `path` (redirects not followed)."""
        try:
            with self.plain.open(f"{self.hub.base}{path}", timeout=60) as answer:
                return answer.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def reaches(self, path: str) -> int:
        """The HTTP status of GET `path` once redirects (signing in to a server through the
        hub's OAuth, say) are followed."""
        try:
            with self.opener.open(f"{self.hub.base}{path}", timeout=60) as answer:
                return answer.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return 0

    def get(self, path: str) -> str:
        with self.opener.open(f"{self.hub.base}{path}", timeout=60) as answer:
            return answer.read().decode()

    def wait_for_server(self) -> float:
        """Seconds until the learner's server answers its API through the hub."""
        started = time.monotonic()

        def answers():
            if self.reaches(f"/user/{self.name}/api/status") == 200:
                return True
            # an API answers 403 until the browser has signed in to the server, which its
            # first page does (through the hub's OAuth); before the server runs, that page
            # is the hub's "starting" page
            self.reaches(f"/user/{self.name}/lab")
            return False
        wait_for(answers, f"{self.name}'s server")
        return time.monotonic() - started

    def api(self, method: str, path: str, body=None):
        """The learner's Jupyter REST API, with the xsrf cookie the server set."""
        xsrf = next((c.value for c in self.jar
                     if c.name == "_xsrf" and c.path.startswith(f"/user/{self.name}")), "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.hub.base}/user/{self.name}/api/{path}",
                                         data=data, method=method,
                                         headers={"X-XSRFToken": xsrf,
                                                  "Content-Type": "application/json"})
        try:
            with self.opener.open(request, timeout=60) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")


class Kernel:
    """One kernel of a learner's server, driven over its websocket as JupyterLab drives it."""

    def __init__(self, learner: Learner, notebook: str):
        self.learner, self.notebook = learner, notebook
        self.errors = []                # (cell code's first line, ename) of cells that raised

    async def start(self):
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        code, session = await asyncio.to_thread(
            self.learner.api, "POST", "sessions",
            {"path": self.notebook, "type": "notebook", "name": "", "kernel": {"name": "python3"}})
        assert code == 201, f"no kernel for {self.notebook}: {code} {session}"
        self.session_id, self.kernel_id = session["id"], session["kernel"]["id"]
        base = self.learner.hub.base.replace("http", "ws", 1)
        cookies = "; ".join(f"{c.name}={c.value}" for c in self.learner.jar)
        url = f"{base}/user/{self.learner.name}/api/kernels/{self.kernel_id}/channels"
        self.socket = await websocket_connect(HTTPRequest(url, headers={"Cookie": cookies}),
                                              max_message_size=256 << 20)
        return self

    async def run(self, code: str) -> float:
        """Seconds from the request until the kernel is idle again after it."""
        msg_id = uuid.uuid4().hex
        message = {"header": {"msg_id": msg_id, "username": self.learner.name,
                              "session": self.session_id, "msg_type": "execute_request",
                              "version": "5.3", "date": ""},
                   "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                   "content": {"code": code, "silent": False, "store_history": True,
                               "user_expressions": {}, "allow_stdin": False,
                               "stop_on_error": False}}
        started = time.monotonic()
        await self.socket.write_message(json.dumps(message))
        while True:
            text = await asyncio.wait_for(self.socket.read_message(), DEADLINE)
            if text is None:
                raise RuntimeError("the kernel's websocket closed")
            reply = json.loads(text)
            if (reply.get("msg_type") == "error" and reply["parent_header"].get("msg_id") == msg_id):
                self.errors.append((code.splitlines()[0] if code else "", reply["content"]["ename"]))
            if (reply.get("msg_type") == "status" and reply["parent_header"].get("msg_id") == msg_id
                    and reply["content"].get("execution_state") == "idle"):
                return time.monotonic() - started

    async def stop(self):
        self.socket.close()
        await asyncio.to_thread(self.learner.api, "DELETE", f"sessions/{self.session_id}")
