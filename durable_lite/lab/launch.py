"""`make lab`: start JupyterLab on the course and print the link to lesson 00.

    python -m durable_lite.lab.launch [--port N] [--log FILE] [--my-work DIR] [--no-browser]

1. Copy every exercise, and the crash playground, that `my_work/` lacks into it (never
   overwriting a learner's file).
2. Pick a free port on 127.0.0.1 and a random token, and start JupyterLab in the course
   folder, set up for the course (`course_options`, `course_environment`): the lessons in
   `notebooks/` read-only (`contents.py` says why), no "news?" pop-up over the lesson and
   no update check (no network). Its own chatter goes to a log file, so the terminal
   shows only what matters.
3. Wait until the server answers and lesson 00 is there, then print lesson 00's full URL,
   token included, as the last line. With a display, open it in the browser as well.
   (JupyterLab's own "open the browser" would land a headless or remote user on the
   Launcher, with a URL buried in its log.)

Ctrl-C stops the server and every kernel it started. The server never outlives the
launcher: it is stopped however the launcher ends, and on Linux it also gets SIGTERM if
the launcher is killed outright (SIGKILL), so no JupyterLab is left running unseen.
"""

import argparse
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import List, Optional

from .workspace import MY_WORK, copy_missing_work

LESSON = "notebooks/00_welcome.ipynb"
READY_TIMEOUT = 300.0         # seconds; a first start on a busy laptop builds caches

# JupyterLab's settings whose defaults the course changes. The "would you like to get
# notified about official Jupyter news?" pop-up covers the lesson's corner on a first
# start, and saying yes would make JupyterLab fetch news from the network.
LAB_DEFAULTS = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                     "checkForUpdates": False},
}
# The page's own configuration (labconfig/page_config.json). No build check: the course
# installs only prebuilt extensions, and the check runs node and yarn on every page load
# (measured: about 0.4 s of CPU each time) to ask whether the app needs rebuilding.
PAGE_CONFIG = {"buildCheck": False, "buildAvailable": False}


def free_port() -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def has_display() -> bool:
    """Could a browser window open here? Not over ssh, not on a Linux box without X/Wayland."""
    if os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY"):
        return False
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def lesson_url(port: int, token: str, lesson: str = LESSON) -> str:
    return f"http://127.0.0.1:{port}/lab/tree/{lesson}?token={token}"


def course_options() -> List[str]:
    """The JupyterLab options that make it the course's: read-only lessons (and a lesson's
    copy that keeps the lesson's kernel), no news, no update check. The browser tests start their JupyterLab with the same ones."""
    return ["--ServerApp.contents_manager_class=durable_lite.lab.contents.CourseContentsManager",
            "--ServerApp.session_manager_class=durable_lite.lab.copies.CourseSessionManager",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]


def course_environment(env: dict, config_dir: Path) -> dict:
    """`env` for a JupyterLab with the course's default settings (LAB_DEFAULTS) and page
    configuration (PAGE_CONFIG).

    They go into `config_dir`, a folder of the launcher's own that is added to
    JUPYTER_CONFIG_PATH: JupyterLab reads `labconfig/default_setting_overrides.json` there
    as new defaults, and `labconfig/page_config.json` beside the others. The learner's own
    settings still win, and nothing is written into their Jupyter folders or the installed
    JupyterLab."""
    labconfig = Path(config_dir) / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    (labconfig / "default_setting_overrides.json").write_text(json.dumps(LAB_DEFAULTS, indent=1))
    (labconfig / "page_config.json").write_text(json.dumps(PAGE_CONFIG, indent=1))
    path = [str(config_dir)] + [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    return dict(env, JUPYTER_CONFIG_PATH=os.pathsep.join(path))


def jupyter_command(root: Path, port: int) -> List[str]:
    command = [sys.executable, "-m", "jupyterlab", "--no-browser",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
               "--ServerApp.port_retries=0", f"--ServerApp.root_dir={root}", *course_options()]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")      # containers and fresh VMs often run as root
    return command


def die_with_parent() -> None:
    """In a child process, before it runs (a `preexec_fn`): on Linux, ask the kernel to send
    it SIGTERM when the process that started it dies, even by SIGKILL. Elsewhere, or if
    the call is not available, nothing: the launcher's own shutdown still stops it."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    except Exception:                        # no prctl here: best effort only
        pass


def wait_until_ready(server: subprocess.Popen, port: int, token: str, lesson: str,
                     timeout: float = READY_TIMEOUT) -> Optional[str]:
    """None once the server serves `lesson`; otherwise why it never will."""
    url = f"http://127.0.0.1:{port}/api/contents/{lesson}?content=0"
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                if answer.status == 200:
                    return None
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return f"the server is up but has no {lesson} (run this from the course folder)"
        except OSError:
            pass                                  # not listening yet (or closed on us)
        except http.client.HTTPException:
            # Something that does not speak HTTP took the port between free_port() and the
            # server's start (a kernel's socket, say): JupyterLab cannot listen there.
            return (f"another program answers on port {port}, so JupyterLab cannot listen "
                    "there; start it again (it picks a free port) or give another PORT=")
        if server.poll() is not None:
            return f"JupyterLab exited with code {server.returncode} before it was ready"
        if time.monotonic() > deadline:
            return f"JupyterLab did not answer within {timeout:.0f} s"
        time.sleep(0.25)


def stop(server: subprocess.Popen) -> None:
    """Ask the server to shut down (it stops its kernels), then insist."""
    if server.poll() is not None:
        return
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "".join(path.read_text(encoding="utf-8", errors="replace").splitlines(True)[-lines:])
    except OSError:
        return ""


def _say(text: str = "") -> None:
    print(text, flush=True)       # flushed: under make, stdout is often a pipe


def _report_copies(copied, my_work: str) -> None:
    if not copied:
        return
    names = ", ".join(p.name for p in copied)
    _say(f"{my_work}/: copied {len(copied)} notebook(s) there: {names}")
    _say(f"  Work in {my_work}/: your files there are never overwritten "
         f"(delete one to get a fresh copy).")


class _Stopped(Exception):
    """SIGTERM or SIGHUP: stop the server as Ctrl-C would."""


def _raise_stopped(signum, frame):
    raise _Stopped()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m durable_lite.lab.launch",
                                     description="Start JupyterLab on the course; print lesson 00's URL.")
    parser.add_argument("--root", default=".", help="the course folder (default: here)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--log", default=None, help="JupyterLab's log file")
    parser.add_argument("--my-work", default=MY_WORK, help="the learner's folder (default: my_work)")
    parser.add_argument("--lesson", default=LESSON, help="the notebook the URL opens")
    parser.add_argument("--no-browser", action="store_true", help="only print the URL")
    args = parser.parse_args(argv)

    root = Path(args.root).resolve()
    _report_copies(copy_missing_work(root, args.my_work), args.my_work)
    port = args.port or free_port()
    token = secrets.token_hex(24)
    log = Path(args.log) if args.log else Path(tempfile.gettempdir()) / f"durable-lite-jupyterlab-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    _say(f"Starting JupyterLab on port {port} (its log: {log}) …")
    # The token travels in the environment, where other users cannot read it (`ps` shows
    # command lines). stdin is not a terminal, so Ctrl-C stops the server without asking.
    settings = Path(tempfile.mkdtemp(prefix="durable-lite-lab-settings-"))
    env = course_environment(dict(os.environ, JUPYTER_TOKEN=token), settings)
    for name in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if name is not None:
            signal.signal(name, _raise_stopped)
    # The server stays in the launcher's process group, so whatever stops the launcher's
    # group (Ctrl-C in the terminal, a test cleaning up) stops the server too.
    with open(log, "ab") as log_file:
        server = subprocess.Popen(jupyter_command(root, port), cwd=root, env=env,
                                  stdin=subprocess.DEVNULL, stdout=log_file,
                                  stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    try:
        problem = wait_until_ready(server, port, token, args.lesson)
        if problem:
            print(f"{problem}. The end of its log:\n{_tail(log)}", file=sys.stderr, flush=True)
            return 1
        url = lesson_url(port, token, args.lesson)
        if not args.no_browser and has_display():
            import webbrowser
            webbrowser.open(url)
        _say("JupyterLab is ready (Ctrl-C here stops it). Open lesson 00:")
        _say(url)
        return server.wait()
    except (KeyboardInterrupt, _Stopped):
        return 0
    finally:
        stop(server)
        shutil.rmtree(settings, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
