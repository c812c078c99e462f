"""What outlives a Python that starts servers and workers, so that none of them outlives it.

A lesson's kernel can end without running another line of its own: SIGKILL, a SIGTERM
(Python's default is to die at once), a JupyterLab shutdown that gives up waiting, the
out-of-memory killer. Its exit handlers never run, yet what it started would stay: a
PostgreSQL server (pg_ctl makes it a daemon whose parent is init), a Temporal server,
worker processes, and their folders in the temporary folder, for good.

So the first time a process starts something here, it also starts a watchdog: a small
Python (standard library only, `python -I -S watchdog.py PID`) in a session of its own, so
that a Ctrl-C in a terminal or a kill of the kernel's process group does not reach it.
The watchdog reads a pipe. Only the process that started it holds the pipe's other end,
and the operating system closes that end however the process ends. Each server or worker
is described to the watchdog as it starts (`watch`): its folder, its processes, a
Postgres data directory. When the pipe reaches its end (or the watchdog's parent changes,
should a forked child have kept a copy of the pipe), the watchdog

1. sends every process it was told about, and every process whose command line names one
   of the folders, the signal that asks it to end (SIGKILL for a worker: a machine you may
   pull the plug on; SIGTERM for the Temporal server; SIGQUIT for Postgres, which then
   removes its shared memory itself), waits, and sends SIGKILL to any still running;
2. removes a shared-memory segment a killed Postgres left;
3. deletes the folders, and exits.

Who deletes a folder whose maker was SIGKILLed: this watchdog, which outlives it. (Not a
sweep at the next start: a learner may never start anything again.) A server stopped the
ordinary way is `end()`ed by its owner with the same code, in-process, and forgotten; at a
normal exit whatever is still watched ends the same way, before the interpreter goes.

    guard = watchdog.watch(folder, ending="KILL")   # before anything is started in it
    guard.add(process.pid)                          # as soon as a process exists
    guard.end()                                     # a stop: processes, memory, folder

Children that can watch for themselves do so too, as a faster second line:
`dies_with_this_thread` (Linux's parent-death signal, for a process started with Popen
from the main thread) and `exit_with_parent` (a fork-server child watching the pipe
multiprocessing keeps from the process that asked for it).
"""

import itertools
import json
import os
import shutil
import signal
import sys
import threading
import time

GRACE = 10.0             # seconds a process has after its signal before it gets SIGKILL
_LINUX = sys.platform.startswith("linux")


# the owner's side -------------------------------------------------------------------------
class Guard:
    """One watched thing: a folder, the processes to end with it, and how to end them."""

    def __init__(self, folder, ending, postgres, at_exit):
        self.id = next(_ids)
        self.folder = os.fspath(folder)
        self.ending = ending
        self.postgres = None if postgres is None else os.fspath(postgres)
        self.at_exit = at_exit
        self.pids = []                      # [pid, start time or None]

    def describe(self) -> dict:
        return {"id": self.id, "folder": self.folder, "ending": self.ending,
                "postgres": self.postgres, "pids": [list(p) for p in self.pids]}

    def add(self, pid) -> "Guard":
        """A process to end with the owner (its start time is kept, so a pid the system
        hands to someone else later is never signalled)."""
        start = started(pid)
        if _LINUX and start is None:
            return self                     # already gone: nothing to end, nor to mistake
        self.pids.append([pid, start])
        with _lock:
            if self.id in _guards:
                _send(self.describe())
        return self

    def end(self, grace: float = GRACE) -> None:
        """End it now, in this process: its processes, its shared memory, its folder."""
        end_all([self.describe()], grace)
        self.forget()

    def forget(self) -> None:
        """Its owner took care of it: the watchdog no longer does anything for it."""
        with _lock:
            if _guards.pop(self.id, None) is not None:
                _send({"id": self.id, "forget": True})


def watch(folder, *, ending: str = "TERM", postgres=None, at_exit: bool = True) -> Guard:
    """Have `folder` deleted, and the processes `add`ed to the returned guard ended (with
    SIG`ending` first), when this process ends, however it ends.

    postgres: a data directory: the server its postmaster.pid names ends too.
    at_exit:  False: at a normal exit its owner removes it (multiprocessing does its own
              folder); only a death without exit handlers leaves it to the watchdog."""
    guard = Guard(folder, ending, postgres, at_exit)
    with _lock:
        _guards[guard.id] = guard
        _send(guard.describe())
    return guard


_ids = itertools.count(1)
_guards = {}                                # id -> Guard, what this process has us watch
_lock = threading.Lock()
_dog = {"fd": None, "pid": None, "exit hook": False}


def _send(message) -> None:
    """Tell the watchdog; start it if need be, or start another (and tell it everything
    still watched) if it died. Called with _lock held."""
    if _dog["fd"] is not None and not _dead(_dog["pid"]):
        try:
            _write(_dog["fd"], (json.dumps(message) + "\n").encode())
            return
        except OSError:                          # it died (EPIPE): start another
            _close()
    elif _dog["fd"] is None and message.get("forget"):
        return                                   # no watchdog yet: nothing to forget
    if _start():
        try:
            _write(_dog["fd"], b"".join((json.dumps(g.describe()) + "\n").encode()
                                        for g in _guards.values()))
        except OSError:
            _close()


def _start() -> bool:
    if not hasattr(os, "posix_spawn") or not sys.executable:
        return False                            # Windows: exit handlers only
    _close()
    read, write = os.pipe()                    # both close on exec: the child gets `read` as 0
    try:
        devnull = os.devnull
        _dog["pid"] = os.posix_spawn(
            sys.executable, [sys.executable, "-I", "-S", __file__, str(os.getpid())],
            os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, read, 0),
                                      (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
                                      (os.POSIX_SPAWN_DUP2, 1, 2)])
    except OSError as exc:
        os.close(write)
        import warnings
        warnings.warn(f"durable_lite could not start its watchdog ({exc}): a server or "
                      f"worker started here may outlive a kill of this process")
        return False
    finally:
        os.close(read)
    _dog["fd"] = write
    if not _dog["exit hook"]:
        import atexit

        # multiprocessing's exit handler waits for every child still running; imported
        # first, it is registered first, so it runs after ours (the last registered runs
        # first), when our workers have ended.
        import multiprocessing.util  # noqa: F401
        atexit.register(_at_exit)
        _dog["exit hook"] = True
    return True


def _close() -> None:
    if _dog["fd"] is not None:
        try:
            os.close(_dog["fd"])
        except OSError:
            pass
    _dog["fd"] = None


def _dead(pid) -> bool:
    """Has our watchdog ended? (Reaped here if so, so it leaves no zombie.)"""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:                   # reaped by someone else's wait()
        return not alive(pid)


def _write(fd, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def _at_exit() -> None:
    """A normal exit: end what is still watched now, with this process's own hands."""
    with _lock:
        guards = [g for g in _guards.values() if g.at_exit]
    end_all([g.describe() for g in guards], GRACE)
    for guard in guards:
        guard.forget()
    # The pipe stays open until the interpreter is gone: the watchdog then removes what is
    # left (at_exit=False folders, after their owners had their turn) and exits.


def _after_fork_in_child() -> None:
    """A forked child is not the owner: drop its copy of the pipe and of the guards."""
    global _lock
    _lock = threading.Lock()
    if _dog["fd"] is not None:
        try:
            os.close(_dog["fd"])
        except OSError:
            pass
    _dog.update(fd=None, pid=None)
    _guards.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# children that watch for themselves ---------------------------------------------------
def dies_with_this_thread():
    """A preexec_fn for Popen on Linux: the child gets SIGTERM when the thread that started
    it ends (PR_SET_PDEATHSIG), so a SIGKILLed Python takes it along at once. Only from the
    main thread (None elsewhere): a helper thread that ends would take the child with it.
    The watchdog covers every other case."""
    if not _LINUX or threading.current_thread() is not threading.main_thread():
        return None
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def arm():
        libc.prctl(1, signal.SIGTERM)          # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:             # the parent died before prctl: go now
            os._exit(1)
    return arm


def exit_with_parent() -> None:
    """In a child of multiprocessing's fork server: SIGKILL this process as soon as the
    process that asked for it ends. The fork server does not end its children, and lives
    on while they do; but each child holds a pipe from the process that asked for it,
    which reaches its end when that process ends, however it ends."""
    import multiprocessing
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def wait():
        parent.join()
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=wait, name="exits-with-its-parent", daemon=True).start()


# ending things (both sides) ---------------------------------------------------------------
def end_all(things, grace: float = GRACE) -> None:
    """End the processes of every thing (described as Guard.describe does), all at once;
    then remove a killed Postgres's shared memory and delete the folders."""
    targets, segments = {}, []
    for thing in things:
        sig = thing.get("ending", "TERM")
        for pid, start in thing.get("pids", ()):
            if start is None or started(pid) == start:
                targets[pid] = sig
        if thing.get("postgres"):
            found = postmaster(thing["postgres"])      # the server itself: named below
            if found is not None:
                segments.append(found)
        for pid in naming(thing["folder"]):
            targets.setdefault(pid, sig)
    targets.pop(os.getpid(), None)
    _signal(targets)
    _wait(targets, grace)
    left = {pid: "KILL" for pid in targets if alive(pid)}
    if left:
        _signal(left)
        _wait(left, grace)
    for segment in segments:
        remove_segment(*segment)
    for thing in things:
        shutil.rmtree(thing["folder"], ignore_errors=True)


def _signal(targets) -> None:
    for pid, name in targets.items():
        try:
            os.kill(pid, getattr(signal, f"SIG{name}"))
        except (ProcessLookupError, PermissionError):
            pass


def _wait(pids, grace) -> None:
    deadline = time.monotonic() + grace
    pause = 0.01
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(pause)                      # polling processes we do not own for their end
        pause = min(pause * 2, 0.2)


def alive(pid) -> bool:
    """Does `pid` run (a zombie does not)?"""
    if _LINUX:
        state = _stat(pid)
        return state is not None and state[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def started(pid):
    """When `pid` started (clock ticks since boot; Linux), or None where we cannot tell."""
    state = _stat(pid) if _LINUX else None
    return None if state is None else int(state[19])


def _stat(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()          # from the state on


def naming(folder) -> list:
    """The processes whose command line names `folder` or a path inside it (a Postgres
    started on a data directory there before it wrote its postmaster.pid, a server or a
    worker given a file there)."""
    folder = os.fspath(folder).rstrip(os.sep)
    inside = folder + os.sep
    found = []
    for pid, argv in _command_lines():
        if pid != os.getpid() and any(a == folder or inside in a for a in argv):
            found.append(pid)
    return found


def _command_lines():
    if _LINUX:
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as f:
                        raw = f.read()
                except OSError:
                    continue
                yield int(name), raw.decode(errors="replace").split("\0")
        return
    import subprocess
    try:
        out = subprocess.run(["ps", "-axww", "-o", "pid=,command="], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return
    for line in out.splitlines():
        pid, _, command = line.strip().partition(" ")
        if pid.isdigit():
            yield int(pid), [command]


def postmaster(data):
    """(pid, shared-memory key, segment id) from a Postgres data directory's postmaster.pid,
    or None without one. (The pid is only compared: it may belong to someone else now.)"""
    try:
        with open(os.path.join(data, "postmaster.pid"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        pid = int(lines[0])
        key, segment = (int(n) for n in lines[6].split())
    except (OSError, ValueError, IndexError):
        return None
    return pid, key, segment


def remove_segment(pid, key, segment) -> None:
    """Remove System V shared-memory segment `segment` if it is still the one Postgres
    `pid` made (same key and creator: ids are reused). One still in use goes when the last
    process using it ends, however it ends (IPC_RMID)."""
    if _LINUX:
        try:
            with open("/proc/sysvipc/shm", encoding="ascii") as f:
                rows = [line.split() for line in f.read().splitlines()[1:]]
        except OSError:
            return
        if not any(r[0] == str(key) and r[1] == str(segment) and r[4] == str(pid)
                   for r in rows):
            return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).shmctl(segment, 0, None)     # 0 = IPC_RMID
    except (OSError, AttributeError):
        pass


# the watchdog itself --------------------------------------------------------------------
def _serve(parent: int) -> None:
    """Read what the parent watches until it ends; then end all of it."""
    import select
    try:
        os.setsid()                  # out of the parent's session and process group
    except OSError:
        pass
    os.chdir("/")                    # hold no folder of anyone's
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    os.closerange(3, 1024)           # keep no other pipe of the parent's open
    things, pending = {}, b""
    while True:
        try:
            ready = select.select([0], [], [], 1.0)[0]
        except InterruptedError:
            continue
        if ready:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                message = json.loads(line)
                if message.get("forget"):
                    things.pop(message["id"], None)
                else:
                    things[message["id"]] = message
        elif os.getppid() != parent:
            break
    end_all(list(things.values()), GRACE)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
