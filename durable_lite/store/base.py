"""What every store offers the engine. Two implementations: memory and SQLite.

Every write is committed before the method returns: when `record_entry` comes back, the
checkpoint survives whatever happens to the process next (for SQLite; memory is the
counter-example the course uses to show why that matters). A store object may be shared by
threads (one Engine used by a widget callback and a notebook cell): each method is atomic.
"""

import contextlib

from .records import Entry, Event, RunRecord


class Store:
    name = "store"

    # runs
    def create_run(self, run: RunRecord) -> None:
        raise NotImplementedError

    def get_run(self, run_id: str) -> RunRecord | None:
        raise NotImplementedError

    def update_run(self, run_id: str, *, owner: str | None = None, **fields) -> None:
        """Set fields of the run. With `owner`, only if that worker holds the run's lease
        (else LeaseLostError): how a worker fences its status changes."""
        raise NotImplementedError

    def list_runs(self, statuses: tuple | list = ()) -> list[RunRecord]:
        """Every run, or those whose status is in `statuses`, oldest first."""
        raise NotImplementedError

    # checkpoints
    def load_entries(self, run_id: str) -> list[Entry]:
        """All of a run's checkpoints, in position order, in one read."""
        raise NotImplementedError

    def record_entry(self, run_id: str, entry: Entry) -> None:
        """Commit one checkpoint, if `entry.worker` holds the run's lease and the position is
        free. Otherwise raise LeaseLostError: another worker owns the run now."""
        raise NotImplementedError

    def discard_entries_from(self, run_id: str, position: int) -> list[Entry]:
        """Remove checkpoints at `position` and after; return what was removed."""
        raise NotImplementedError

    # signals
    def add_signal(self, run_id: str, name: str, payload_json: str, at: float) -> None:
        raise NotImplementedError

    def pending_signal(self, run_id: str, name: str, sent_by: float | None = None) -> tuple | None:
        """(signal id, payload json) of the oldest unconsumed signal with that name (sent at
        or before `sent_by`, if given: a wait's deadline)."""
        raise NotImplementedError

    def consume_signal_into(self, run_id: str, signal_id: int, entry: Entry) -> None:
        """Mark a signal consumed and record the wait's outcome, in one transaction (fenced
        like `record_entry`)."""
        raise NotImplementedError

    # leases
    def try_lease(self, run_id: str, owner: str, until: float, now: float,
                  steal_from: str | None = None) -> bool:
        """Take or renew the run's lease. Succeeds if it is free, expired, already ours,
        or held by `steal_from` (a worker known to be dead)."""
        raise NotImplementedError

    def renew_lease(self, run_id: str, owner: str, until: float) -> bool:
        """Extend the lease only if `owner` still holds it (expired or not)."""
        raise NotImplementedError

    def renew_leases(self, owner: str, until: float) -> None:
        """Extend every lease `owner` holds. Called from the heartbeat thread."""
        raise NotImplementedError

    def release_lease(self, run_id: str, owner: str) -> None:
        raise NotImplementedError

    # events
    def add_event(self, event: Event) -> None:
        raise NotImplementedError

    def events(self, run_id: str) -> list[Event]:
        raise NotImplementedError

    def batch(self):
        """A context manager: the writes made inside it are committed together, in one
        transaction, when it ends (or none of them, if it ends with an exception). Batches
        nest: an inner one joins the outer. The engine batches the writes that belong
        together, such as a run's new status and the event that says why."""
        return contextlib.nullcontext()

    def check_file(self) -> None:
        """Raise StoreFileError if the store's file was deleted or replaced while open (a
        store without a file has nothing to check)."""

    def close(self) -> None:
        pass
