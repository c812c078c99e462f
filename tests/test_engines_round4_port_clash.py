"""TempTemporal's port is free when picked, not reserved: when another server takes it
first, the server started here cannot bind it and exits, while the health check reaches the
other one. start() must not call that healthy: it checks that its own process listens on
the port, and gives a taken port up for a fresh one."""

import sys

from engines_support import *  # noqa: F401,F403

from durable_lite.engines.temporal import server as temporal_server


def _taken_port(address) -> int:
    return int(address.rsplit(":", 1)[1])


def test_a_port_another_server_took_is_given_up_for_one_of_its_own(temporal_address,
                                                                   monkeypatch):
    taken = _taken_port(temporal_address)
    ports = [taken]
    real = temporal_server.free_port
    monkeypatch.setattr(temporal_server, "free_port",
                        lambda host="127.0.0.1": ports.pop() if ports else real(host))
    server = temporal_server.TempTemporal("clash").start()
    try:
        assert server.port != taken and server.running
        if sys.platform.startswith("linux"):
            assert temporal_server.listens(server.pid, server.host, server.port) is True
            assert temporal_server.listens(server.pid, server.host, taken) is False
    finally:
        server.stop()


def test_a_server_that_never_gets_a_port_of_its_own_is_not_called_healthy(temporal_address,
                                                                           monkeypatch):
    taken = _taken_port(temporal_address)
    monkeypatch.setattr(temporal_server, "free_port", lambda host="127.0.0.1": taken)
    server = temporal_server.TempTemporal("clash")
    with pytest.raises(RuntimeError, match="another process took each"):
        server.start()
    assert not server.running and server._folder is None
