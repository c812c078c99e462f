"""A store that lives in a dict: fast, simple, and gone when the process dies.

The course uses it to show exactly that. It encodes values the same way SQLiteStore does,
so the only difference a learner sees is what survives a crash. Like SQLiteStore it may be
shared by threads: each method holds a lock, so a check and the change it guards (is the
lease ours? is the position free?) happen as one.
"""

import bisect
import collections
import itertools
import threading

from ..errors import LeaseLostError, UnknownRunError
from .base import Store
from .records import QUEUED, RUNNING, UNFINISHED, QueuedRun


class MemoryStore(Store):
    name = "memory"

    def __repr__(self):
        return "MemoryStore(this process only)"

    def __init__(self):
        self._runs = {}
        self._entries = {}
        self._signals = []          # [id, run_id, name, payload_json, consumed, sent_at]
        self._events = []
        self._ids = itertools.count(1)
        self._lock = threading.RLock()

    def batch(self):
        return self._lock          # no transaction to commit: only keep other threads out

    def create_run(self, run):
        with self._lock:
            if run.run_id in self._runs:
                raise ValueError(f"run {run.run_id!r} already exists")
            self._runs[run.run_id] = run.copy()
            self._entries[run.run_id] = []

    def get_run(self, run_id):
        with self._lock:
            run = self._runs.get(run_id)
            return None if run is None else run.copy()

    def update_run(self, run_id, *, owner=None, **fields):
        with self._lock:
            if run_id not in self._runs:
                raise UnknownRunError(f"no run {run_id!r} in this memory store")
            if owner is not None:
                self._check_owner(run_id, owner, "change its status")
            for key, value in fields.items():
                setattr(self._runs[run_id], key, value)

    def list_runs(self, statuses=()):
        wanted = set(statuses)
        with self._lock:
            runs = [r.copy() for r in self._runs.values() if not wanted or r.status in wanted]
        # The same order as SQLiteStore (ties on a fake clock are common), so recover()
        # visits runs in one order whichever store holds them.
        return sorted(runs, key=lambda r: (r.created_at, r.run_id))

    def load_entries(self, run_id):
        with self._lock:      # entries are tuples, never changed: shared, not copied
            return list(self._entries.get(run_id, ()))

    def _check_owner(self, run_id, owner, what):
        holder = self._runs[run_id].lease_owner
        if holder != owner:
            raise LeaseLostError(f"run {run_id!r}: worker {owner} may no longer {what}; the "
                                 f"lease is held by {holder or 'nobody'}")

    def record_entry(self, run_id, entry, fence=None):
        owner = entry.worker if fence is None else fence
        with self._lock:
            if self._runs[run_id].lease_owner != owner:
                self._check_owner(run_id, owner, f"record {entry.label!r}")
            entries = self._entries[run_id]
            if entry.position != len(entries):
                raise LeaseLostError(
                    f"run {run_id!r}: position {entry.position} ({entry.label}) was already "
                    "recorded by another worker"
                )
            entries.append(entry)

    def discard_entries_from(self, run_id, position):
        with self._lock:
            entries = self._entries[run_id]
            removed = entries[position:]
            del entries[position:]
            return removed

    def add_signal(self, run_id, name, payload_json, at):
        with self._lock:
            self._signals.append([next(self._ids), run_id, name, payload_json, False, at])

    def pending_signal(self, run_id, name, sent_by=None):
        with self._lock:
            for sig in self._signals:
                if (sig[1] == run_id and sig[2] == name and not sig[4]
                        and (sent_by is None or sig[5] <= sent_by)):
                    return sig[0], sig[3]
        return None

    def consume_signal_into(self, run_id, signal_id, entry):
        with self._lock:
            self.record_entry(run_id, entry)
            for sig in self._signals:
                if sig[0] == signal_id:
                    sig[4] = True

    def try_lease(self, run_id, owner, until, now, steal_from=None):
        with self._lock:
            run = self._runs[run_id]
            if run.lease_owner in (None, owner, steal_from) or (run.lease_expires or 0) < now:
                run.lease_owner, run.lease_expires = owner, until
                return True
            return False

    def renew_lease(self, run_id, owner, until):
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.lease_owner != owner:
                return False
            run.lease_expires = until
            return True

    def renew_leases(self, owner, until):
        with self._lock:
            for run in self._runs.values():
                if run.lease_owner == owner:
                    run.lease_expires = until

    def release_lease(self, run_id, owner):
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None and run.lease_owner == owner:
                run.lease_owner = run.lease_expires = None

    def add_event(self, event):
        with self._lock:
            self._events.append(event.copy(seq=len(self._events) + 1))

    def events(self, run_id):
        with self._lock:
            return [e.copy() for e in self._events if e.run_id == run_id]

    # durable queues (queue.py) --------------------------------------------------------------
    # The same rows SQLiteStore keeps, indexed the way the queries use them; queue.py holds
    # the lock (batch) around a whole decision, as it holds SQLite's write lock. Created on
    # first use, so a store that never queues a run pays nothing for them.
    def _queue(self, name, limits_json=None):
        if not hasattr(self, "_queues"):
            self._queues = {}                          # name -> _MemoryQueue
            self._queued = {}                          # run id -> QueuedRun, in queue order
            self._queue_seq = itertools.count(1)
        if name not in self._queues and limits_json is not None:
            self._queues[name] = _MemoryQueue(limits_json)
        return self._queues.get(name)

    def save_queue(self, name, limits_json, replace=True):
        with self._lock:
            queue = self._queue(name, limits_json)
            if replace:
                queue.limits = limits_json

    def queue_limits(self, name):
        with self._lock:
            queue = self._queue(name)
            return None if queue is None else queue.limits

    def add_to_queue(self, queue, key, run_id, at):
        with self._lock:
            q = self._queue(queue, "{}")
            if run_id in self._queued:
                raise ValueError(f"run {run_id!r} was queued already")
            row = QueuedRun(next(self._queue_seq), queue, key, run_id, at)
            self._queued[run_id] = row
            q.waiting.setdefault(key, collections.deque()).append(row)

    def settle_queue(self, queue):
        with self._lock:
            q = self._queue(queue)
            for run_id, row in list(q.started.items()) if q else ():
                if self._runs[run_id].status not in UNFINISHED:
                    row.state = "done"
                    del q.started[run_id]

    def queue_state(self, queue, since=None):
        with self._lock:
            q = self._queue(queue)
            if q is None:
                return {"active": {}, "waiting": {}, "last_turn": {}, "starts": []}
            active = {}
            for row in q.started.values():
                active[row.key] = active.get(row.key, 0) + 1
            starts = [] if since is None else q.starts[bisect.bisect_right(q.starts, since):]
            return {"active": active,
                    "waiting": {key: (rows[0].seq, rows[0].run_id)
                                for key, rows in q.waiting.items() if rows},
                    "last_turn": dict(q.last_turn), "starts": starts}

    def take_from_queue(self, queue, key, worker, at, lease_until):
        with self._lock:
            q = self._queue(queue)
            rows = q.waiting.get(key) if q else None
            if not rows:
                return None
            row = rows[0]
            run = self._runs.get(row.run_id)
            if run is None or run.status != QUEUED:
                raise UnknownRunError(f"run {row.run_id!r} waits in queue {queue!r} but is not "
                                      "a queued run in this memory store")
            rows.popleft()
            q.turns += 1
            row.state, row.started_at, row.turn, row.worker = "started", at, q.turns, worker
            q.started[row.run_id] = row
            q.last_turn[key] = q.turns
            bisect.insort(q.starts, at)
            run.status, run.lease_owner, run.lease_expires = RUNNING, worker, lease_until
            run.taken_up_at, run.interruptions, run.updated_at = 0, 0, at
            return run.copy()

    def queued_runs(self, queue=None):
        with self._lock:
            if not hasattr(self, "_queued"):
                return []
            return [row.copy() for row in self._queued.values()
                    if queue is None or row.queue == queue]


class _MemoryQueue:
    """One queue in a MemoryStore: its limits and its runs, indexed for the decisions."""

    def __init__(self, limits_json):
        self.limits, self.turns = limits_json, 0
        self.waiting = {}             # key -> deque of its waiting rows, oldest first
        self.started = {}             # run id -> row of a started run still holding a slot
        self.last_turn = {}           # key -> turn of its latest start
        self.starts = []              # every start time, sorted
