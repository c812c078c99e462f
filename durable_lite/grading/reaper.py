"""The parent of one graded notebook's kernel: every process the kernel starts stays below it,
and none outlives it.

    python -m durable_lite.grading.reaper -- python -m durable_lite.grading.kernel_launcher -f CONNECTION_FILE

On Linux it makes itself a "child subreaper" (prctl PR_SET_CHILD_SUBREAPER): a process the
notebook starts and then orphans — a daemon that double-forks, a `Popen` with
`start_new_session=True` and an empty environment — is re-parented here instead of to init,
so it stays a descendant whatever it does to its session, process group and environment.
When the kernel ends (an `os._exit`, a crash, the grader's SIGTERM), the reaper kills every
process still below it, waits until none is left, and only then exits: a reaper that left
first would hand its orphans to init, out of the grader's reach. It ignores SIGINT (an
interrupt, sent to the whole process group, is for the kernel).

The helpers below read Linux's process table (/proc); the grader uses them too
(isolation.py). Elsewhere the reaper just runs the kernel.
"""

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphans of this process's descendants are re-parented to it (Linux), not to init."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


# the process table ------------------------------------------------------------------------
def processes() -> dict:
    """{pid: (ppid, pgid, session, start time in clock ticks)} of every live (not zombie)
    process we can see; {} without /proc."""
    table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    # Read as bytes with plain os calls: a grading scans the whole table several times, and
    # on a busy machine it holds a thousand processes.
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()     # after the name, which may hold spaces
        if fields[0] in (b"Z", b"X"):
            continue
        table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    return table


def descendants(roots, table=None) -> set:
    """Every process below any of `roots`, following parent links."""
    table = processes() if table is None else table
    found, frontier = set(), set(roots)
    while frontier:
        children = {pid for pid, row in table.items() if row[0] in frontier} - found
        found |= children
        frontier = children
    return found


def reap_children() -> None:
    """Collect this process's children that have ended, so none lingers as a zombie."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_descendants(deadline_seconds: float = 30.0) -> None:
    """SIGKILL everything below this process until nothing is: a process that forks between
    two rounds hands its child to us (we are its subreaper) and the next round finds it."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        below = descendants({os.getpid()})
        if not below:
            break
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        reap_children()
        time.sleep(0.02)
    reap_children()


# the reaper itself --------------------------------------------------------------------------
def main(argv) -> int:
    command = argv[argv.index("--") + 1:] if "--" in argv else argv
    become_subreaper()
    kernel = subprocess.Popen(command)
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # after the fork: the kernel keeps it
    signal.signal(signal.SIGTERM, lambda *_: kernel.kill())
    code = 1
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == kernel.pid:
            code = os.waitstatus_to_exitcode(status)
            break
    end_descendants()                 # whatever the kernel left behind, before we go
    return code if code >= 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
