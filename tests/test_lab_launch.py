"""`make lab`'s wait for JupyterLab, and `make hub`'s for JupyterHub: a port taken by a program
that is not a web server, between the moment a free port is picked and the moment the server
would listen there, is said, not raised (the tests that start one try another port)."""

import socket
import subprocess
import sys
import threading
import time

import pytest

from durable_lite.hub import launch as hub_launch
from durable_lite.lab import launch

WAITS = {"make lab": lambda server, port: launch.wait_until_ready(
             server, port, "token", "notebooks/00_welcome.ipynb", timeout=60),
         "make hub": lambda server, port: hub_launch.wait_until_ready(server, port, timeout=60)}


@pytest.mark.parametrize("which", sorted(WAITS))
def test_a_port_answered_by_something_that_is_not_http_is_said_not_raised(which):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def greet_like_a_kernel():          # a ZeroMQ socket's first bytes, then nothing more
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.sendall(b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f")
            conn.close()

    threading.Thread(target=greet_like_a_kernel, daemon=True).start()
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = time.monotonic()
        problem = WAITS[which](server, port)
        assert problem is not None and f"port {port}" in problem, problem
        assert "another program" in problem
        assert time.monotonic() - started < 30       # said at once, not after the deadline
    finally:
        server.kill()
        server.wait()
        listener.close()
