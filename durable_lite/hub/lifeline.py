"""Run a Python program that dies with the process that started it.

    python -m durable_lite.hub.lifeline MODULE [ARGS ...]         # as `python -m MODULE`
    python -m durable_lite.hub.lifeline MODULE:FUNCTION [ARGS ...] # a console script's entry

JupyterHub starts its proxy, its services and every learner's server in sessions of their
own, so that a Ctrl-C meant for the hub does not reach them, and it stops them itself when
it shuts down. That leaves the case where the hub never gets to shut down (SIGKILL, the
out-of-memory killer): the proxy, a service or a learner's server would then run on, alone,
with nobody to stop it, holding its port.

So the hub starts each of them through this module, which first asks Linux to send it
SIGTERM when its parent dies (PR_SET_PDEATHSIG), and only then runs the program. Asked by
the process itself after it starts, the request also holds for a learner's server that
JupyterHub has already switched to the learner's own user (a change of user clears a
request made before it). Elsewhere than Linux this only runs the program.
"""

import importlib
import os
import runpy
import signal
import sys


def hold_on() -> None:
    """SIGTERM this process when its parent dies; end now if the parent has already gone.

    And take SIGINT as SIGTERM, the stop signal every program here handles. Left alone,
    SIGINT is ignored in a hub started in the background (which passes that on), and in a
    learner's server, which has no terminal, it ends the server at once without shutting
    its kernels down: each kernel then exits with its parent, without its exit handlers,
    and leaves its scratch folders behind. On SIGTERM the server shuts them down first."""
    signal.signal(signal.SIGINT, _as_sigterm)
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))   # 1 = PR_SET_PDEATHSIG
    except Exception:                       # no prctl here: the hub's own shutdown still stops it
        return
    if os.getppid() == 1:                   # the parent died before the request: go now
        sys.exit(1)


def _as_sigterm(signum, frame) -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        sys.exit("usage: python -m durable_lite.hub.lifeline MODULE[:FUNCTION] [ARGS ...]")
    target, args = argv[0], argv[1:]
    hold_on()
    module, _, function = target.partition(":")
    sys.argv = [module] + args
    if function:
        sys.exit(getattr(importlib.import_module(module), function)())
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
