"""Leases: at most one worker executes a run at a time, even across machines.

A worker claims a run by writing itself and an expiry time into the run's row (the lease).
Four rules make "never execute the same step twice" hold between live workers:

1. Take: a lease can be taken only if it is free, expired, already ours, or held by a
   process on this host that no longer exists. The store does the check-and-set in one
   statement, so two workers can never both win.
2. Keep: before each step (and each retry) the worker makes sure the lease is still its
   own, renewing it in the store when half of it is used up. It never renews a lease that
   someone else took in the meantime: renewal requires "owner = me".
3. Heartbeat: while a step runs (a slow model call, a long backoff), a background thread
   keeps extending the expiry of every lease this worker holds. A live worker does not
   lose its run just because a step is slow; a dead one stops renewing, and its lease
   runs out.
4. Fence: every checkpoint and every status change is written only if the run's lease
   owner is still this worker. A worker that was frozen past its lease (a paused VM, a
   stopped process) and wakes up cannot overwrite the history of the worker that took over.

5. Turns: the threads of one process sharing one Engine are one worker, and a lease that
   is "already ours" does not keep them apart. So the engine also notes which of its
   threads is executing which run (`RunTurns`): a second thread waits for its turn, or,
   in recover(), leaves that run to the thread that has it.

What leases cannot prevent: a worker killed after a step's side effect but before its
checkpoint. The next worker runs that step again. That window is closed by idempotency
keys, not by the engine.
"""

import contextlib
import os
import threading
import weakref

from .errors import LeaseHeldError


def _host_name() -> str:
    try:
        return os.uname().nodename      # what socket.gethostname() answers, without socket
    except AttributeError:              # Windows has no os.uname
        import socket
        return socket.gethostname()


HOST = _host_name()


def owner_is_dead(owner: str | None) -> bool:
    """A lease owner on this host whose process no longer exists can be taken over at once.

    Worker names are "host:pid:random". Owners on other hosts (or in this very process)
    are never judged dead here; their leases must expire instead.
    """
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != HOST or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:     # the process exists but belongs to someone else
        return False
    return False


class Heartbeat:
    """Renews an engine's leases every third of the lease time, from a daemon thread.

    The thread holds only a weak reference to its engine and stops when the engine is
    garbage collected, so a notebook that makes many engines does not pile up threads.
    """

    def __init__(self, engine):
        self._engine = weakref.ref(engine)
        self._stop = threading.Event()
        self._thread = None
        weakref.finalize(engine, self._stop.set)

    def ensure_running(self):
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._beat, name="durable_lite lease heartbeat",
                                            daemon=True)
            self._thread.start()

    def _beat(self):
        while True:
            engine = self._engine()
            if engine is None:
                return
            interval = engine.lease_seconds / 3
            del engine                      # hold no strong reference while sleeping
            if self._stop.wait(interval):
                return
            engine = self._engine()
            if engine is None:
                return
            try:
                engine._renew_leases()
            except Exception:               # a closed store, a busy file: try at the next beat;
                pass                        # fencing keeps the history safe meanwhile
            del engine


class RunTurns:
    """Which thread of this engine is executing which run, so two never execute one run.

    `take(run_id)` is a context manager. It waits while another thread executes the run
    (start, resume and invalidate wait their turn), or with `wait=False` answers False at
    once (recover() leaves the run to the thread that has it). A thread asking for a run it
    is executing already — a step resuming its own run — gets LeaseHeldError rather than
    waiting for itself forever.
    """

    def __init__(self):
        self._changed = threading.Condition()
        self._holders = {}              # run id -> ident of the thread executing it

    @contextlib.contextmanager
    def take(self, run_id, wait: bool = True):
        if not self._acquire(run_id, wait):
            yield False
            return
        try:
            yield True
        finally:
            with self._changed:
                del self._holders[run_id]
                self._changed.notify_all()

    def _acquire(self, run_id, wait) -> bool:
        me = threading.get_ident()
        with self._changed:
            while run_id in self._holders:
                if not wait:
                    return False
                if self._holders[run_id] == me:
                    raise LeaseHeldError(
                        f"run {run_id!r} is being executed by this thread already: a step "
                        "cannot start, resume or invalidate its own run")
                self._changed.wait()
            self._holders[run_id] = me
            return True
