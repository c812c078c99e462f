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
6. A fork is a new worker: a forked child has a name, leases, turns and a heartbeat of its
   own (Engine._start_process). A name given by hand cannot be made new, so a child that
   inherited one refuses to take leases (SharedWorkerError) rather than share it.

`Leases` below is the one place that keeps a worker's leases: the engine, the queue, an
upgrade and a fork all take, keep and let go of them through it.

What leases cannot prevent: a worker killed after a step's side effect but before its
checkpoint. The next worker runs that step again. That window is closed by idempotency
keys, not by the engine.
"""

import contextlib
import os
import threading
import weakref

from .errors import LeaseHeldError, LeaseLostError, SharedWorkerError


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


class Leases:
    """The leases one worker holds, and until when it surely holds each (rules 1-4).

    take(run_id, record)   take the run's lease in the store (rule 1)
    adopt(run_id, until)   a lease the store granted with the run itself, in the same write
                           (a run start() creates, one a queue hands out, a fork)
    keep(run_id, now)      before new work: still ours? renew it when half used (rule 2)
    beat()                 start the heartbeat that renews them all while steps run (rule 3)
    ended(run_id)          the run's ending write let go of the lease already
    release(run_id)        let go of it in the store, if that has not happened yet

    Fencing (rule 4) is the store's: every write names `worker` as the owner it requires.
    """

    def __init__(self, store, worker, lease_seconds, clock, heartbeat=True, forked_from=None):
        self.store, self.worker, self.lease_seconds, self.clock = store, worker, lease_seconds, clock
        self._until = {}            # run id -> until when this worker surely holds its lease
        self._heartbeat = Heartbeat(self) if heartbeat else None
        self._forked_from = forked_from

    def _check_own_process(self):
        if self._forked_from is not None:
            raise SharedWorkerError(
                f"this engine, worker {self.worker!r}, was made in process {self._forked_from} "
                f"and is used in a process forked from it ({os.getpid()}): two processes must "
                "not share a worker name, or each takes the other's leases for its own. In the "
                "child, make an Engine of its own with another worker= name, or leave worker= "
                "unset: an engine with a made-up name becomes a new worker in each fork.")

    def take(self, run_id, record) -> bool:
        self._check_own_process()
        now = self.clock()
        until = now + self.lease_seconds
        steal = record.lease_owner if owner_is_dead(record.lease_owner) else None
        if self.store.try_lease(run_id, self.worker, until, now, steal_from=steal):
            self._until[run_id] = until
            return True
        return False

    def held_by_another(self, record, now) -> bool:
        """Whether `record` shows a lease that take() could not get: another worker's, not
        yet expired, whose process is alive. (A read ahead of take(), which decides.)"""
        owner = record.lease_owner
        return (owner not in (None, self.worker) and (record.lease_expires or 0) >= now
                and not owner_is_dead(owner))

    def adopt(self, run_id, until):
        self._check_own_process()
        self._until[run_id] = until

    def keep(self, run_id, now=None):
        now = self.clock() if now is None else now
        if now < self._until.get(run_id, 0) - self.lease_seconds / 2:
            return
        if not self.store.renew_lease(run_id, self.worker, now + self.lease_seconds):
            raise LeaseLostError(f"run {run_id!r}: worker {self.worker} lost its lease; another "
                                 "worker took the run over")
        self._until[run_id] = now + self.lease_seconds

    def beat(self):
        """A step may run long: renew the leases meanwhile. (Replaying holds a lease for
        milliseconds, and fake time does not pass while a step runs: no thread needed.)"""
        if self._heartbeat is not None:
            self._heartbeat.ensure_running()

    def renew_all(self):
        if self._until:
            self.store.renew_leases(self.worker, self.clock() + self.lease_seconds)

    def ended(self, run_id):
        self._until.pop(run_id, None)

    def release(self, run_id):
        if self._until.pop(run_id, None) is not None:
            try:
                self.store.release_lease(run_id, self.worker)
            except Exception:    # noqa: BLE001 - e.g. the store is locked or gone: the lease
                pass             # then expires by itself, and the error that matters is the
                                 # one already on its way to the caller

    def until(self, run_id):
        return self._until.get(run_id)


class Heartbeat:
    """Renews a worker's leases every third of the lease time, from a daemon thread.

    The thread holds only a weak reference to the leases and stops when they are garbage
    collected (with their engine), so a notebook that makes many engines does not pile up
    threads.
    """

    def __init__(self, leases):
        self._leases = weakref.ref(leases)
        self._stop = threading.Event()
        self._thread = None
        weakref.finalize(leases, self._stop.set)

    def ensure_running(self):
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._beat, name="durable_lite lease heartbeat",
                                            daemon=True)
            self._thread.start()

    def _beat(self):
        while True:
            leases = self._leases()
            if leases is None:
                return
            interval = leases.lease_seconds / 3
            del leases                      # hold no strong reference while sleeping
            if self._stop.wait(interval):
                return
            leases = self._leases()
            if leases is None:
                return
            try:
                leases.renew_all()
            except Exception:               # a closed store, a busy file: try at the next beat;
                pass                        # fencing keeps the history safe meanwhile
            del leases


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
