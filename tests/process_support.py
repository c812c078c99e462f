"""Processes a test starts, stopped however the test ends, and proof that none is left.

`start(argv, ...)` runs a command in a process group of its own (Ctrl-C works there as in a
terminal), which on Linux is also sent SIGTERM if the test process dies, so a cleanup can
end everything it started, the command's own children included. `stop(process)` asks it to
stop as Ctrl-C would, waits, then ends its whole group. `left_behind(text)` lists the live
processes whose command line, working folder or environment mention `text`, a temporary
path only one test uses: after the cleanup it must be empty, so a test that leaves a
JupyterLab running fails, naming it, instead of leaving it for someone to find minutes
later.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from durable_lite.lab.launch import die_with_parent

LINUX = sys.platform.startswith("linux")


def start(argv, **popen) -> subprocess.Popen:
    return subprocess.Popen(argv, start_new_session=True, preexec_fn=_as_from_a_terminal,
                            **popen)


def _as_from_a_terminal() -> None:
    """In the child, before it runs the command: Ctrl-C (SIGINT) works as it does for a
    command typed in a terminal. A test run started in the background (`make test &`, many
    CI runners) ignores SIGINT and every process inherits that: `stop`'s Ctrl-C then did
    nothing and each stop waited out its whole grace (60 s for make lab's test)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    die_with_parent()


def stop(process: subprocess.Popen, grace: float = 60.0) -> None:
    """SIGINT (Ctrl-C) and `grace` seconds to stop cleanly; then SIGTERM, then SIGKILL, to
    the whole group; then wait (generously) until no process of the group is left."""
    group = process.pid                     # start() made it the leader of a new group
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 60.0)):
        if not alive_in_group(group):
            break
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while alive_in_group(group) and time.monotonic() < deadline:
            time.sleep(0.1)                 # polling for processes to exit, not waiting for work
    if process.poll() is None:
        process.wait(timeout=60)


def alive_in_group(group: int) -> bool:
    """Is any process of process group `group` still running (zombies do not count)?"""
    if LINUX:
        return any(_stat(pid)[1] == group for pid in _pids() if _stat(pid)[0] not in ("Z", "X", None))
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def left_behind(text: str) -> list:
    """Live processes (pid and command line) that mention `text` in their command line,
    working folder or environment. Only Linux can tell; elsewhere the list is empty."""
    if not LINUX:
        return []
    found = []
    for pid in _pids():
        if pid == os.getpid() or _stat(pid)[0] in ("Z", "X", None):
            continue
        base = Path("/proc", str(pid))
        try:
            cmdline = (base / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(base / "cwd")
            environ = (base / "environ").read_bytes().decode(errors="replace")
        except OSError:                     # gone meanwhile, or not ours to read
            continue
        if text in cmdline or cwd.startswith(text) or text in environ:
            found.append(f"{pid}: {cmdline.strip()[:200]}")
    return found


def wait_until_none_left(text: str, deadline: float) -> list:
    """left_behind(text), polled until it is empty or `deadline` seconds have passed."""
    end = time.monotonic() + deadline
    while True:
        found = left_behind(text)
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.2)


def _pids():
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _stat(pid):
    """(state, process group) of `pid`, or (None, None) if it is gone."""
    try:
        text = Path("/proc", str(pid), "stat").read_text()
    except OSError:
        return None, None
    fields = text[text.rindex(")") + 2:].split()     # after "pid (command) "
    return fields[0], int(fields[2])
