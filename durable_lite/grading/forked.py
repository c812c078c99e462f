"""The new processes a check starts, forked from a Python that has imported only the course's
package: a restart that runs the answer's code again, at a fraction of an interpreter's cost.

A check that restarts a learner's answer starts a new process that imports the answer's
module and calls it (child.py). A new interpreter spends most of its 50-300 ms of CPU
importing the package before it runs a line of the answer, and the grading of one notebook
starts a few of them, a full test run about a thousand, exercise 16's sweep hundreds. So
each is forked instead from a *parent*: a Python started for the purpose, which imports the
package (and nothing of the answer) and then only forks, one child a request. The child is
a new process like any other: it imports the answer's module afresh (the parent never did),
runs it, may be SIGKILLed at a crash point for real, and ends like a Python that reached
its end. Nothing of one child reaches the next: each is forked from the same untouched
parent, never from the child before it.

**A restart crosses to another interpreter.** Forks of one parent share more than memory
the answer could write to: str's hash seed (drawn when an interpreter starts) and the
layout of the heap, so `hash("x")` and `id(some_module)` read the same in two of them. A
key salted with either is the same in two forks and different in two new interpreters,
which is what a restart after a crash really is. So a folder's next process is never
forked from the parent that forked the folder's last one: each folder's processes go to
parents in turn, and there are at least two as soon as a folder has a second process.

The parents are kept for the life of this process, so a test run or a kernel starts a few,
not one a check. A parent answers one request at a time; more start when all are busy.
A parent ends when the process that started it ends, however it ends: its requests come
down a pipe whose end it sees. Its children are SIGKILLed by the system when it ends
(PR_SET_PDEATHSIG), and one past its time limit is SIGKILLed by the parent.
"""

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SERVE = "from durable_lite.grading.forked import serve; serve()"
# What every parent imports ahead: the package, the course's examples (a child imports them
# before the answer, see child._main) and the checks (which describe a failure).
PRELOAD = ("durable_lite", "durable_lite.examples", "durable_lite.grading.checks")


# the controller's side ----------------------------------------------------------------------
class _Parent:
    """One forking parent, asked through its stdin and answering on its stdout."""

    def __init__(self, preload):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_PARENT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVE, *PRELOAD, *preload],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def ask(self, request: dict):
        """The child's exit status (-N: killed by signal N), "timeout", or None if this
        parent has gone."""
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, ValueError, OSError):
            return None
        return json.loads(line)["status"] if line else None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self):
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _Pool:
    """The parents of one preload: idle ones, and which parent forked each folder's last
    process (the one its next process must not come from)."""

    def __init__(self, preload):
        self.preload = preload
        self.idle, self.last = [], {}

    def take(self, folder):
        with _LOCK:
            avoid = self.last.get(folder)
            for parent in list(self.idle):
                if not parent.alive():
                    self.idle.remove(parent)
                elif parent is not avoid:
                    self.idle.remove(parent)
                    return parent
        parent = _Parent(self.preload)
        with _LOCK:
            _ALL.append(parent)
        return parent

    def give_back(self, parent, folder, reusable=True):
        with _LOCK:
            self.last[folder] = parent
            if reusable and parent.alive():
                self.idle.append(parent)
                return
        parent.close()


_LOCK = threading.Lock()
_POOLS = {}
_ALL = []


def run(folder, spec: dict, *, env: dict, path: list, timeout: float, preload=()):
    """Fork a child that calls `child.run_in_fork(spec)` with `folder` as its working
    folder, `env` as its environment and `path` first on its import path; wait up to
    `timeout` seconds. Returns (exit status or "timeout", what it printed, what it wrote to
    stderr)."""
    folder = os.fspath(folder)
    with _LOCK:
        pool = _POOLS.setdefault(tuple(preload), _Pool(tuple(preload)))
    token = f"{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
    out, err = (os.path.join(folder, f".fresh-{token}.{name}") for name in ("out", "err"))
    request = {"folder": folder, "spec": spec, "env": env, "path": list(path),
               "timeout": timeout, "out": out, "err": err}
    status = None
    for attempt in range(2):             # a parent that has gone is replaced, once
        parent = pool.take(folder)
        try:
            status = parent.ask(request)
        finally:
            # one interrupted mid-request (Ctrl-C in a kernel) would answer it late, to the
            # next request: it is ended, not reused
            pool.give_back(parent, folder, reusable=status is not None)
        if status is not None:
            break
    if status is None:
        raise RuntimeError("the grader's forking parent process ended before it answered")
    return status, _read_and_remove(out), _read_and_remove(err)


def _read_and_remove(path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def close_all():
    """End every parent (they end by themselves when this process ends)."""
    with _LOCK:
        parents, _ALL[:] = list(_ALL), []
        _POOLS.clear()
    for parent in parents:
        parent.close()


# the parent's side --------------------------------------------------------------------------
def serve():
    """A parent's life: import the preload (argv), then fork one child a request line on
    stdin and answer {"status": ...} on stdout, until stdin ends."""
    sys.dont_write_bytecode = True       # the answer's folder gets no __pycache__
    # Ctrl-C in a kernel reaches its whole process group: it is for the check (which then
    # ends this parent), and for the answer's code running in a child, not for the parent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in sys.argv[1:]:
        __import__(name)
    from . import child
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base = [p for p in sys.path if p and p not in given]     # the interpreter's own
    import gc
    gc.freeze()     # what is here now is never collected: a child's collections leave it be
    pending = b""
    while True:
        while b"\n" not in pending:
            chunk = os.read(0, 65536)
            if not chunk:
                return                   # the process that started this one has ended
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            sys.path[:] = [request["folder"], *request["path"], *base]
            child.run_in_fork(request)   # never returns: the child exits
        status, more = _wait(pid, request["timeout"])
        pending += more
        os.write(1, json.dumps({"status": status}).encode() + b"\n")


def _wait(pid, timeout):
    """(The child's exit status or "timeout", what came on stdin meanwhile.) A child past
    its time is SIGKILLed. If this parent's stdin ends meanwhile, the process that asked has
    gone: the child is killed and the parent ends."""
    came = b""
    deadline = time.monotonic() + timeout
    try:
        watch = os.pidfd_open(pid)       # Linux: readable when the child ends
    except (AttributeError, OSError):
        watch = None
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return (-os.WTERMSIG(status) if os.WIFSIGNALED(status)
                        else os.WEXITSTATUS(status)), came
            left = deadline - time.monotonic()
            if left <= 0:
                _kill(pid)
                return "timeout", came
            fds = [0] if watch is None else [0, watch]
            ready, _, _ = select.select(fds, [], [], left if watch is not None else min(left, 0.005))
            if 0 in ready:
                chunk = os.read(0, 65536)
                if not chunk:            # the end: nobody will read this child's result
                    _kill(pid)
                    os._exit(0)
                came += chunk
    finally:
        if watch is not None:
            os.close(watch)


def _kill(pid):
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
