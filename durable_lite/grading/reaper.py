"""The parent of one graded notebook's kernel: every process the kernel starts stays below it.

    python -m durable_lite.grading.reaper -- python -m ipykernel_launcher -f CONNECTION_FILE

On Linux it makes itself a "child subreaper" (prctl PR_SET_CHILD_SUBREAPER): a process the
notebook starts and then orphans — a daemon that double-forks, a `Popen` with
`start_new_session=True` — is re-parented here instead of to init, so it stays a descendant
and the grader's kill finds it. It ignores SIGINT (an interrupt, sent to the whole process
group, is for the kernel), reaps whatever ends, and exits when the kernel does.
Elsewhere it just runs the kernel.
"""

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def main(argv) -> int:
    command = argv[argv.index("--") + 1:] if "--" in argv else argv
    become_subreaper()
    kernel = subprocess.Popen(command)
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # after the fork: the kernel keeps it
    signal.signal(signal.SIGTERM, lambda *_: kernel.terminate())
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return kernel.returncode or 0
        except InterruptedError:
            continue
        if pid == kernel.pid:
            kernel.returncode = os.waitstatus_to_exitcode(status)
            return kernel.returncode if kernel.returncode >= 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
