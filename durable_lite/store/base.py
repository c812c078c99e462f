"""What every store offers the engine. Two implementations: memory and SQLite.

Every write is committed before the method returns: when `record_entry` comes back, the
checkpoint survives whatever happens to the process next (for SQLite; memory is the
counter-example the course uses to show why that matters). A store object may be shared by
threads (one Engine used by a widget callback and a notebook cell): each method is atomic.
"""

import contextlib

from .records import Entry, Event, QueuedRun, RunRecord


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

    def record_entry(self, run_id: str, entry: Entry, fence: str | None = None) -> None:
        """Commit one checkpoint, if `entry.worker` (or `fence`, when given: a history copied
        under the names of the workers that first recorded it) holds the run's lease and the
        position is free. Otherwise raise LeaseLostError: another worker owns the run now."""
        raise NotImplementedError

    def discard_entries_from(self, run_id: str, position: int) -> list[Entry]:
        """Remove checkpoints at `position` and after, in one transaction (joining a batch
        the caller has open); return what was removed, reading nothing else."""
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

    # durable queues (queue.py) --------------------------------------------------------------
    # The queue decides who starts next; the store keeps what every worker must agree on.
    # queue.py calls these inside one batch(), so counting the slots and taking one is a
    # single transaction: two workers, in one process or many, never both take the last slot.
    def save_queue(self, name: str, limits_json: str, replace: bool = True) -> None:
        """Record a queue's limits (JSON). With replace=False, only if it has none yet."""
        raise NotImplementedError

    def queue_limits(self, name: str) -> str | None:
        """The limits recorded for the queue, or None if the store has never seen it."""
        raise NotImplementedError

    def add_to_queue(self, queue: str, key: str | None, run_id: str, at: float) -> None:
        """Put a run (already created with status QUEUED) at the back of the queue."""
        raise NotImplementedError

    def settle_queue(self, queue: str) -> None:
        """Mark the queue's started runs that are no longer running, waiting or sleeping as
        done: they have finished, so their slots are free."""
        raise NotImplementedError

    def queue_state(self, queue: str, since: float | None = None) -> dict:
        """What a start decision needs, read at once:
        active    {key: started runs holding a slot}
        waiting   {key: (seq, run id) of its oldest waiting run}
        last_turn {key: the turn of its latest start} (keys never started are absent)
        starts    times of the starts after `since`, oldest first ([] if since is None)"""
        raise NotImplementedError

    def take_from_queue(self, queue: str, key: str | None, worker: str, at: float,
                        lease_until: float) -> RunRecord | None:
        """Start the oldest waiting run of `key`: mark it started with the queue's next
        turn, and make the run RUNNING under `worker`'s lease, counted as taken up (see
        engine.py, "Poison runs"). Returns the run's new record, or None if none waits."""
        raise NotImplementedError

    def queued_runs(self, queue: str | None = None) -> list[QueuedRun]:
        """Every run ever queued (in `queue`, if given), in the order they were queued."""
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
