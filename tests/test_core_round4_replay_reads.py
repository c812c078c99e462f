"""Replay reads each checkpoint once. Resuming a failed run finds the step that failed among
the checkpoints it has just loaded, and discarding that failure reads only what it
discards: not the whole run a second time. (What a step of replay costs is measured by
benchmarks/instructions.py, never timed here.)
"""

from core_support import *  # noqa: F401,F403

import durable_lite.store.sqlite as sqlite_store
from durable_lite.store.records import Entry

N = 200
state = {"down": True}


def flaky():
    if state["down"]:
        raise ConnectionError("the service is down")
    return "up"


@dl.workflow("round4-replay-reads")
def long_then_flaky(ctx, n):
    for i in range(n):
        ctx.step("noop", lambda i=i: i)
    return ctx.step("flaky", flaky)


class Counted(Entry):
    """Entries as the SQLite store builds them from rows, counted."""

    made = 0

    @classmethod
    def from_row(cls, row):
        Counted.made += 1
        return Entry.from_row(row)


def test_resuming_a_failed_run_turns_each_row_into_an_entry_once(store_path, stores, clock, monkeypatch):
    engine = dl.Engine(stores(store_path), clock)
    state["down"] = True
    assert engine.start(long_then_flaky, N, run_id="failed").status == "failed"
    state["down"] = False
    monkeypatch.setattr(sqlite_store, "Entry", Counted)
    Counted.made = 0
    run = dl.Engine(stores(store_path), clock).resume("failed")
    assert run.status == "completed" and run.executed == ["flaky"] and len(run.replayed) == N
    # N steps and the failure, read once; then the failure, read again as it is discarded.
    assert Counted.made == N + 2, f"{Counted.made} rows read for {N + 1} checkpoints"


def test_discarding_returns_exactly_what_it_removed(any_store, clock):
    engine = dl.Engine(any_store, clock)
    state["down"] = True
    engine.start(long_then_flaky, 5, run_id="d")
    before = any_store.load_entries("d")
    with any_store.batch():
        removed = any_store.discard_entries_from("d", 3)
    assert removed == before[3:] and any_store.load_entries("d") == before[:3]
