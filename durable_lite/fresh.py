"""A new Python process for one call, forked from a Python that has imported only the package.

A crash experiment needs real processes: one that is SIGKILLed at a crash point, and a new
one that carries on (child.py); a grader's check restarts a learner's answer the same way
(grading/child.py). A new interpreter spends most of its 50-300 ms of CPU importing the
package before it runs a line of the workflow, and a sweep over every crash point starts
hundreds of them. So each is forked instead from a *parent*: a Python started for the
purpose, which imports the package (and nothing of the workflow or the answer) and then only
forks, one child a request. The child is a new process like any other: it imports the
workflow's module afresh (the parent never did), runs it, may be SIGKILLed at a crash point
for real, and ends. Nothing of one child reaches the next: each is forked from the same
untouched parent, never from the child before it.

    status, out, err = fresh.run("durable_lite.child:_child_main", spec, key=store_path,
                                 folder=..., env=dict(os.environ), path=[...], timeout=60)

**A restart crosses to another interpreter.** Forks of one parent share more than memory:
str's hash seed (drawn when an interpreter starts) and the layout of the heap, so
`hash("x")` and `id(some_module)` read the same in two of them. A key salted with either
is the same in two forks and different in two new interpreters, which is what a restart
after a crash is. So the processes of one `key` (a store, an answer's folder) go to parents
in turn: the next is never forked from the parent that forked the last.

The parents are kept for the life of this process, so a lesson's kernel or a test run
starts a few, not one a call. A parent answers one request at a time; more start when all
are busy. A parent ends when the process that started it ends, however it ends: its
requests come down a pipe whose end it sees. Its children are SIGKILLed by the system when
it ends (PR_SET_PDEATHSIG, Linux), and one past its time limit is SIGKILLed by the parent.
What a child prints comes back through the parent, at most the last OUTPUT_LIMIT bytes of
each stream: an answer that prints hundreds of MB costs nobody that memory.
"""

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SERVE = "from durable_lite.fresh import serve; serve()"
OUTPUT_LIMIT = 4 * 1024 * 1024          # bytes of each stream kept: the end, where results are


def run(entry: str, payload, *, key, folder, env: dict, path=(), timeout: float = 60.0,
        preload=("durable_lite",), started=None):
    """Fork a child that calls `entry` ("module:function") with `payload` (plain data) in
    `folder`, with `env` as its environment and `path` first on its import path; wait up to
    `timeout` seconds. `key` names what its processes share (a store, a folder): the next
    of them comes from another parent. `started(pid)` is called once the child runs.

    Returns (its exit status, -N if killed by signal N, or "timeout"; what it printed; what
    it wrote to stderr)."""
    with _LOCK:
        pool = _POOLS.setdefault(tuple(preload), _Pool(tuple(preload)))
    request = {"entry": entry, "payload": payload, "folder": os.fspath(folder), "env": env,
               "path": [os.fspath(p) for p in path], "timeout": timeout}
    for attempt in range(2):             # a parent that has gone is replaced, once
        parent = pool.take(key)
        reply = None
        try:
            reply = parent.ask(request, started)
        finally:
            # one interrupted mid-request (Ctrl-C in a kernel) would answer it late, to the
            # next request: it is ended, not reused
            pool.give_back(parent, key, reusable=reply is not None)
        if reply is not None:
            return reply["status"], reply["out"], reply["err"]
    raise RuntimeError("the process that forks fresh processes ended before it answered")


# the caller's side -------------------------------------------------------------------------
class _Parent:
    """One forking parent, asked through its stdin and answering on its stdout."""

    def __init__(self, preload):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_PARENT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVE, *preload],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def ask(self, request: dict, started=None):
        """The parent's reply, or None if it has gone."""
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()          # {"pid": ...}: the child runs
            if line and started is not None:
                started(json.loads(line)["pid"])
            line = line and self.proc.stdout.readline()  # {"status": ...}: it has ended
        except (BrokenPipeError, ValueError, OSError):
            return None
        return json.loads(line) if line else None

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
    """The parents of one preload: the idle ones, and which parent forked each key's last
    process (the one its next process must not come from)."""

    def __init__(self, preload):
        self.preload = preload
        self.idle, self.last = [], {}

    def take(self, key):
        with _LOCK:
            avoid = self.last.get(key)
            for parent in list(self.idle):
                if not parent.alive():
                    self.idle.remove(parent)
                elif parent is not avoid:
                    self.idle.remove(parent)
                    return parent
        return _Parent(self.preload)

    def give_back(self, parent, key, reusable=True):
        with _LOCK:
            self.last[key] = parent
            if reusable and parent.alive():
                self.idle.append(parent)
                return
        parent.close()


_LOCK = threading.Lock()
_POOLS = {}


def parents() -> list:
    """The pids of this process's idle parents (the processes that fork the fresh ones)."""
    with _LOCK:
        return [p.proc.pid for pool in _POOLS.values() for p in pool.idle if p.alive()]


# the parent's side -------------------------------------------------------------------------
def serve():
    """A parent's life: import the preload (argv), then fork one child a request line on
    stdin, answer {"pid": ...} when it runs and {"status", "out", "err"} when it has
    ended, until stdin ends."""
    sys.dont_write_bytecode = True       # a workflow's folder gets no __pycache__
    # Ctrl-C in a kernel reaches its whole process group: it is for the caller (which then
    # ends this parent) and for the code running in a child, not for the parent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in sys.argv[1:]:
        __import__(name)
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base = [p for p in sys.path if p and p not in given]     # the interpreter's own
    if sys.platform.startswith("linux"):
        import ctypes  # noqa: F401 - for each child's _die_with_parent: 4 ms a child otherwise
    import gc
    gc.freeze()     # what is here now is never collected: a child's collections leave it be
    inbox = bytearray()
    while True:
        while b"\n" not in inbox:
            chunk = os.read(0, 65536)
            if not chunk:
                return                   # the process that started this one has ended
            inbox += chunk
        line, _, rest = bytes(inbox).partition(b"\n")
        inbox[:] = rest
        request = json.loads(line)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(out_r)
            os.close(err_r)
            _child(request, out_w, err_w, [request["folder"], *request["path"], *base])
        os.close(out_w)
        os.close(err_w)
        os.write(1, json.dumps({"pid": pid}).encode() + b"\n")
        reply = _wait(pid, request["timeout"], out_r, err_r, inbox)
        os.write(1, json.dumps(reply).encode() + b"\n")


def _child(request, out_w, err_w, path):
    """(In the child just forked.) Become the process `request` asks for, call its entry,
    and exit. Never returns.

    It exits as a Python that reached its end does, as far as anything outside it can see:
    its exit handlers (atexit) run and its output is flushed. The interpreter's teardown,
    which frees every object one by one, is skipped: in a fork it copies nearly every page
    the child shares with its parent (half of a short child's CPU), and nothing recorded
    depends on it, since a store commits each record before going on, as a SIGKILL proves."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _die_with_parent()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.close(out_w)
        os.close(err_w)
        os.chdir(request["folder"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:] = path
        module, _, function = request["entry"].partition(":")
        import importlib
        code = 0
        try:
            getattr(importlib.import_module(module), function)(request["payload"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        import atexit
        atexit._run_exitfuncs()
    except BaseException:                # noqa: BLE001 - reported on stderr, the exit says it
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:            # noqa: BLE001 - a closed stream: nothing to flush
                pass
        os._exit(code)


def _die_with_parent():
    """SIGKILL from the system if the parent that forked this process ends (Linux)."""
    if sys.platform.startswith("linux"):
        import ctypes
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)     # 1 = PR_SET_PDEATHSIG


def _wait(pid, timeout, out_r, err_r, inbox) -> dict:
    """Collect the child's output until it has ended: {"status", "out", "err"}. A child
    past its time is SIGKILLed ("timeout"). Requests that come meanwhile go to `inbox`;
    if stdin ends, the process that asked has gone: the child is killed, the parent ends."""
    deadline = time.monotonic() + timeout
    streams = {out_r: bytearray(), err_r: bytearray()}     # still open
    ended = {}                                             # at their end
    status = None
    try:
        watch = os.pidfd_open(pid)       # Linux: readable when the child ends
    except (AttributeError, OSError):
        watch = None
    try:
        while True:
            if status is None:
                done, raw = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)
                    deadline = min(deadline, time.monotonic() + 5)   # output its own children keep open
            if status is not None and not streams:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                if status is None:
                    _kill(pid)
                    status = "timeout"
                break
            fds = [0, *streams] + ([watch] if watch is not None and status is None else [])
            wait = left if (watch is not None or status is not None) else min(left, 0.005)
            ready, _, _ = select.select(fds, [], [], wait)
            for fd in ready:
                if fd in streams:
                    chunk = os.read(fd, 65536)
                    if chunk:
                        kept = streams[fd]
                        kept += chunk
                        del kept[:-OUTPUT_LIMIT]
                    else:
                        ended[fd] = streams.pop(fd)
                elif fd == 0:
                    chunk = os.read(0, 65536)
                    if not chunk:        # the end: nobody will read this child's result
                        _kill(pid)
                        os._exit(0)
                    inbox += chunk
        texts = {**ended, **streams}
        return {"status": status,
                "out": bytes(texts.get(out_r, b"")).decode("utf-8", "replace"),
                "err": bytes(texts.get(err_r, b"")).decode("utf-8", "replace")}
    finally:
        for fd in (out_r, err_r) + ((watch,) if watch is not None else ()):
            os.close(fd)


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
