"""A store that lives in a dict: fast, simple, and gone when the process dies.

The course uses it to show exactly that. It encodes values the same way SQLiteStore does,
so the only difference a learner sees is what survives a crash. Like SQLiteStore it may be
shared by threads: each method holds a lock, so a check and the change it guards (is the
lease ours? is the position free?) happen as one.
"""

import itertools
import threading

from ..errors import LeaseLostError, UnknownRunError
from .base import Store


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

    def record_entry(self, run_id, entry):
        with self._lock:
            if self._runs[run_id].lease_owner != entry.worker:
                self._check_owner(run_id, entry.worker, f"record {entry.label!r}")
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
