"""Fork-server processes that many threads may start and watch at once.

The crash table of lesson 15 measures six cells at a time, one thread each, and every cell
starts DBOS or LangGraph workers from multiprocessing's fork server and then asks how they
ended: "killed at its crash point" is an exit status of -9 (SIGKILL). Two facts of CPython
make that answer racy when several threads ask:

- a fork-server child's exit status comes down a pipe, and is read from it once;
- every Process.start() first asks each child this Python has started whether it has
  ended (multiprocessing's clean-up of finished children).

So one thread's start() and another's join() can both find the pipe ready: one reads -9,
the other reads nothing and records 255 over it. A worker killed at its crash point then
looks like one that exited, and its cell is wrong. (Six threads, 40 children each that SIGKILL
themselves: 33 of the 240 read 255. The crash table met it once in a CI run.)

Here every start and every look at a child's status holds one lock, and a wait for a
child to end watches its sentinel, which reads nothing, before it takes the lock.

    child = forked.start(forked.context(__name__).Process(target=main, args=(spec,)))
    child.join(120)              # None: still running
    child.exitcode               # -9: it was killed

Neither the fork server nor multiprocessing ends a child when the process that asked for
it dies, and the fork server keeps its socket in a folder of the temporary folder that
only a normal exit removes. So `start` hands the child to a watchdog guard (watchdog.py),
the child calls watchdog.exit_with_parent() first thing, and multiprocessing's folder is
watched too: after a SIGKILL nothing of theirs is left.

A Python has one fork server, and what it imports ahead (its preload) is fixed when it
starts. context() has it preload what the workers of every engine this process has imported
a worker module of by then need, not only the first one asked for: a process that uses
several engines (a test run, lesson 15) would otherwise import the others again in each of
its workers, for a second or two each; one that uses only one engine does not pay for the
others.
"""

import faulthandler
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time

from . import watchdog

_STATUS = threading.Lock()      # held by every start and every status read
STACKS = signal.SIGUSR2         # a worker sent it writes where each of its threads stands
# {an engine's worker module: what the fork server imports ahead for its workers}
PRELOADS = {"durable_lite.engines.dbos.worker": "durable_lite.engines.dbos.worker",
            "durable_lite.engines.langgraph.worker": "durable_lite.engines.langgraph.worker",
            "durable_lite.engines.temporal.worker": "durable_lite.engines.temporal.preload"}


def context(module: str):
    """multiprocessing's fork-server context, its server preloading `module` and what the
    other engines whose worker modules are imported here need (if it has not started yet)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preloads(module))
    return ctx


def preloads(module: str) -> list:
    """`module`, then the preloads of the other engines whose worker modules are imported."""
    return [module] + [m for w, m in PRELOADS.items() if m != module and w in sys.modules]


class Child:
    """A started process: its pid and how it ended, safe to ask from any thread."""

    def __init__(self, process):
        self._process = process

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def exitcode(self):
        """None while it runs; its exit status (-N: killed by signal N) once it ended."""
        with _STATUS:
            return self._process.exitcode

    def is_alive(self) -> bool:
        with _STATUS:
            return self._process.is_alive()

    def kill(self) -> None:
        """SIGKILL it if it still runs. The fork server reaps its children as they end, so
        the pid can be gone before we hear of it: multiprocessing's kill() then does
        nothing (a bare os.kill raised ProcessLookupError). Under the lock, like every
        other look at its status."""
        with _STATUS:
            if self._process.is_alive():
                self._process.kill()

    def write_stacks(self, folder: str, timeout: float = 5.0) -> None:
        """Ask a worker that has not ended (one that called log_to(folder)) to write every
        thread's stack to its log, and wait until it has: the one clue a hung worker can
        give before it is killed."""
        log = os.path.join(folder, LOG)
        size = before = _size(log)              # what it printed before it was asked
        with _STATUS:
            if not self._process.is_alive():
                return
            os.kill(self.pid, STACKS)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.2)
            now = _size(log)
            if now == size and now > before:
                return                            # written, and nothing more coming
            size = now

    def join(self, timeout=None):
        """Wait up to `timeout` seconds for the process to end; its exit status, or None."""
        multiprocessing.connection.wait([self._process.sentinel], timeout)
        with _STATUS:
            self._process.join(0)
            return self._process.exitcode


def start(process, guard=None) -> Child:
    """Start a multiprocessing Process (not started yet) under the lock; with a watchdog
    `guard`, the process ends with this one, however this one ends."""
    with _STATUS:
        _watch_multiprocessing_folder()
        process.start()
    if guard is not None:
        guard.add(process.pid)
    return Child(process)


LOG = "worker.log"              # in a worker's folder: all it printed


def log_to(folder: str) -> None:
    """The worker's side, right after it starts: all it prints goes to its folder's LOG, and
    STACKS makes it write there where every thread stands (Child.write_stacks)."""
    # First: once the log exists, STACKS must find the handler (its default is to end us).
    faulthandler.register(STACKS, file=2, all_threads=True)   # fd 2, wherever it points then
    log = os.open(os.path.join(folder, LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)               # nothing a worker prints may reach a notebook cell
    os.dup2(log, 2)
    os.close(log)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def read_log(folder: str) -> str:
    """The end of what a worker printed (its last 3,000 characters), "" if there is none."""
    try:
        with open(os.path.join(folder, LOG), encoding="utf-8", errors="replace") as f:
            return f.read()[-3000:]
    except OSError:
        return ""


_watched = []


def _watch_multiprocessing_folder():
    """multiprocessing's own temporary folder (the fork server's socket is in it) goes at a
    normal exit by multiprocessing's hand, after a kill by the watchdog's."""
    from multiprocessing import util
    folder = util.get_temp_dir()
    if folder not in _watched:
        _watched.append(folder)
        watchdog.watch(folder, at_exit=False)
