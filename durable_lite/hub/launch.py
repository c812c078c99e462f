"""`make hub`: serve the course to a class, and print the learners' and the instructor's links.

    python -m durable_lite.hub.launch [--port N] [--ip ADDRESS] [--cull-minutes M]
                                      [--hub-folder DIR] [--grading-folder DIR] [--one-user]

1. Make the hub's folder (state.py; hub/ in the course), the class code and the
   instructor's code the first time, and keep them: a restart keeps the learners, their
   work and their sign-in.
2. Pick free ports (the hub's, its proxy's API, the class view's) and the learners' port
   (a free one, or --port), write this run's JupyterHub configuration (config.py) into
   hub/run/, and start JupyterHub. It starts its proxy, its two services and, as learners
   sign in, their servers; every one of them through `lifeline`.
3. Wait until the hub answers through its proxy, then print the two links and the codes.

Where it listens. Learners open the hub from their own laptops, so the proxy listens on
every interface by default (--ip 0.0.0.0); `make hub HOST=127.0.0.1` keeps it to this
machine (to try it, or behind a reverse proxy that adds HTTPS). The hub's own API, the
proxy's API and every learner's server listen on 127.0.0.1 only, reached through the proxy.
The traffic is plain HTTP: on a network you do not trust, put HTTPS in front.

Ctrl-C stops it all. The hub never outlives this command: it gets SIGTERM if the command
is killed outright (Linux's parent-death signal), and it stops every server it started as
it shuts down; were the hub itself killed, what it started dies with it (`lifeline`).
hub/run/ is deleted at the end; hub/jupyterhub.log keeps the hub's log.
"""

import argparse
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from ..lab.launch import course_environment, die_with_parent, free_port
from .state import INSTRUCTOR, HubState

READY_TIMEOUT = 180.0            # seconds; a first start creates the database
CULL_MINUTES = 90                # over a lunch hour: a learner back from lunch finds it running


def this_machine() -> str:
    """The address other machines on the network reach this one by (no packet is sent:
    a UDP socket only asks the routing table), or its name."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
    except OSError:
        return socket.gethostname()


def links(ip: str, port: int) -> dict:
    host = "127.0.0.1" if ip in ("127.0.0.1", "localhost") else this_machine()
    base = f"http://{host}:{port}"
    return {"learners": f"{base}/hub/login", "instructor": f"{base}/services/class/"}


def separate_users(one_user: bool) -> bool:
    """A learner per system user when the hub runs as root on Linux, unless told not to."""
    return (not one_user and sys.platform.startswith("linux")
            and hasattr(os, "geteuid") and os.geteuid() == 0)


def unreadable_by_learners(course: Path) -> list:
    """What a learner's own system user could not reach: every folder on the way to the
    course and to the Python that runs it (the venv's link followed: pyenv keeps Pythons
    under the installing user's home) needs others' x; the Python itself, others' r and x."""
    problems = []
    python = Path(os.path.realpath(sys.executable))
    for folder in {course, *course.parents, *python.parents}:
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            problems.append(f"{folder} (others cannot enter it)")
    if (os.stat(python).st_mode & (stat.S_IROTH | stat.S_IXOTH)) != stat.S_IROTH | stat.S_IXOTH:
        problems.append(f"{python} (others cannot run it)")
    return sorted(problems)


def settings_for(state: HubState, args, lab_config: Path) -> dict:
    return {"course": str(state.course), "hub_folder": str(state.folder),
            "ip": args.ip, "port": args.port or free_port(), "hub_port": free_port(),
            "proxy_api_port": free_port(), "class_port": free_port(),
            "proxy_token": secrets.token_hex(32), "cull_seconds": int(args.cull_minutes * 60),
            "separate_users": separate_users(args.one_user), "lab_config": str(lab_config),
            "grading_folder": str(Path(args.grading_folder).resolve()) if args.grading_folder else None,
            "lab_args": list(args.lab_arg)}


def write_config(state: HubState, settings: dict) -> Path:
    """hub/run/jupyterhub_config.py, readable by this user alone (it holds the proxy's token)."""
    path = state.run / "jupyterhub_config.py"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("# Written by `make hub` for this run (durable_lite/hub/config.py says what it sets).\n"
                "import json\n"
                "from durable_lite.hub.config import configure\n"
                f"configure(c, json.loads({json.dumps(settings)!r}))\n")
    return path


def wait_until_ready(hub: subprocess.Popen, port: int, timeout: float = READY_TIMEOUT):
    """None once the hub answers through its proxy and the class view is routed; otherwise
    why it never will."""
    deadline = time.monotonic() + timeout
    for path in ("/hub/api", "/services/class/"):
        while True:
            try:
                opener = urllib.request.build_opener(_NoRedirect)
                with opener.open(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                    if answer.status < 500:
                        break
            except urllib.error.HTTPError as exc:
                if exc.code < 500 and exc.code != 404:
                    break                              # 302 to sign in: it is there
            except OSError:
                pass
            except http.client.HTTPException:
                # Not a web server: another program took the port (lab/launch.py, the same).
                return (f"another program answers on port {port}, so the hub cannot listen "
                        "there; start it again (it picks a free port) or give another PORT=")
            if hub.poll() is not None:
                return f"JupyterHub exited with code {hub.returncode} before it was ready"
            if time.monotonic() > deadline:
                return f"JupyterHub did not answer within {timeout:.0f} s"
            time.sleep(0.25)
    return None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def stop(hub: subprocess.Popen, grace: float = 60.0) -> None:
    """SIGTERM: JupyterHub stops every learner's server, its services and its proxy, then
    exits. A busy machine with many servers takes a while; then insist."""
    if hub.poll() is not None:
        return
    hub.send_signal(signal.SIGTERM)
    try:
        hub.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        hub.kill()
        hub.wait()


def _say(text: str = "") -> None:
    print(text, flush=True)


def _private_and_mortal() -> None:
    """In the hub, before it runs: what it writes (its database, a learner's files) is
    readable by its owner alone, and it dies with this launcher."""
    os.umask(0o077)
    die_with_parent()


class _Stopped(Exception):
    """SIGTERM or SIGHUP: stop the hub as Ctrl-C would."""


def _raise_stopped(signum, frame):
    raise _Stopped()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m durable_lite.hub.launch",
                                     description="Serve the course to a class with JupyterHub.")
    parser.add_argument("--root", default=".", help="the course folder (default: here)")
    parser.add_argument("--port", type=int, default=0, help="the learners' port (default: a free one)")
    parser.add_argument("--ip", default="0.0.0.0",
                        help="where learners reach it (default: every interface)")
    parser.add_argument("--hub-folder", default=None, help="the hub's state (default: hub/)")
    parser.add_argument("--cull-minutes", type=float, default=CULL_MINUTES,
                        help=f"stop a learner's server idle this long (default {CULL_MINUTES})")
    parser.add_argument("--grading-folder", default=None,
                        help="where the grade button writes class/ and report/ (default: here)")
    parser.add_argument("--lab-arg", action="append", default=[],
                        help="one more option for every learner's JupyterLab (repeatable; the "
                             "browser tests expose JupyterLab's app to drive it)")
    parser.add_argument("--one-user", action="store_true",
                        help="run every learner's server as this user, even as root")
    args = parser.parse_args(argv)

    state = HubState(args.root, args.hub_folder).make()
    separate = separate_users(args.one_user)
    if separate:
        problems = unreadable_by_learners(state.course)
        if problems:
            print("As root, the hub makes each learner a system user of their own, who must be "
                  "able to read the course. They could not reach:\n  " + "\n  ".join(problems) +
                  "\nClone the course, and make its .venv with a Python, somewhere everyone can "
                  "read (/opt/durable-lite and /usr/bin/python3, say); or run every learner's "
                  "server as root: make hub ONE_USER=1 (docs/workshop.md, Run it on one "
                  "server, says what that gives up).", file=sys.stderr)
            return 1
    if (state.run / "hub.pid").exists():
        try:
            os.kill(int((state.run / "hub.pid").read_text()), 0)
            print(f"A hub already runs on {state.folder} (hub/run/hub.pid): stop it first.",
                  file=sys.stderr)
            return 1
        except (OSError, ValueError):
            pass                                   # left by a hub that was killed
    shutil.rmtree(state.run, ignore_errors=True)
    state.run.mkdir(mode=0o755)
    lab_config = state.run / "lab-config"
    course_environment({}, lab_config)             # writes the course's JupyterLab defaults
    settings = settings_for(state, args, lab_config)
    config = write_config(state, settings)
    log = state.folder / "jupyterhub.log"
    for name in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if name is not None:
            signal.signal(name, _raise_stopped)
    _say(f"Starting JupyterHub on port {settings['port']} (its log: {log}) …")
    # the log names every learner: the hub's owner alone reads it
    with os.fdopen(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log_file:
        hub = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(config)],
                               cwd=state.run, stdin=subprocess.DEVNULL, stdout=log_file,
                               stderr=subprocess.STDOUT, preexec_fn=_private_and_mortal)
    try:
        problem = wait_until_ready(hub, settings["port"])
        if problem:
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:]
            print(problem + ". The end of its log:\n" + "\n".join(tail), file=sys.stderr)
            return 1
        where = links(args.ip, settings["port"])
        who = ("each learner a system user of their own" if separate else
               "every learner's server runs as this user")
        _say(f"JupyterHub is ready ({who}; Ctrl-C here stops it).")
        _say(f"Learners open:   {where['learners']}")
        _say(f"  name: any name they choose (letters, digits, - or _); class code: {state.class_code}")
        _say(f"Instructor opens: {where['instructor']}")
        _say(f"  name: {INSTRUCTOR}; code: {state.instructor_code}")
        return hub.wait()
    except (KeyboardInterrupt, _Stopped):
        return 0
    finally:
        stop(hub)
        shutil.rmtree(state.run, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
