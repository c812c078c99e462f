"""engine.trace at scale, and the trace of a run whose worker was just SIGKILLed.

A trace is built from every checkpoint and event of a run, so its work must grow with
their number, not with its square: a long agent run records thousands of steps. Counting
how often the builder reads a checkpoint's fields shows the growth without timing anything
(the benchmark times it: benchmarks/README.md).
"""

from operator import itemgetter

import pytest

import durable_lite as dl
from durable_lite.faults import CrashAt
from durable_lite.store.records import Entry


@dl.workflow("trace-long")
def long_run(ctx, n):
    for i in range(n):
        ctx.step("s", int, i)
    return n


def reads_to_trace(monkeypatch, n):
    engine = dl.Engine(dl.MemoryStore(), dl.FakeClock())
    engine.start(long_run, n, run_id="long")
    reads = [0]
    for index, name in enumerate(Entry._fields):
        def read(entry, _get=itemgetter(index)):
            reads[0] += 1
            return _get(entry)
        monkeypatch.setattr(Entry, name, property(read))
    tree = engine.trace("long")
    monkeypatch.undo()
    assert tree.attributes["steps"] == n
    return reads[0]


def test_the_work_of_building_a_trace_grows_linearly_with_the_steps(monkeypatch):
    small, large = reads_to_trace(monkeypatch, 500), reads_to_trace(monkeypatch, 2000)
    assert large <= 4.5 * small, (small, large)      # 4x the steps: 4x the reads, not 16x


@pytest.mark.crash
def test_the_trace_of_a_run_whose_worker_was_killed_does_not_call_it_running(tmp_path):
    """Real clock, real SIGKILL: the dead worker's lease has not expired yet, but its process
    is gone, which the engine's own dead-owner check already knows."""
    store_path, folder = str(tmp_path / "runs.db"), str(tmp_path / "world")
    killed = dl.faults.run_in_child(store_path, "durable_lite.examples", "refund", folder,
                                    "A-17", 40, run_id="refund-A-17",
                                    crash_at=CrashAt("email", "after_effect"))
    assert killed.killed
    engine = dl.Engine(dl.SQLiteStore(store_path))
    record = engine.store.get_run("refund-A-17")
    assert record.lease_expires > engine.clock(), "the dead worker's lease ran out already"
    tree = engine.trace("refund-A-17")
    execution, = tree.children
    assert execution.status == "interrupted" and not execution.open, tree.render()
    # The run itself is still unfinished ("running": any worker may resume it).
    assert tree.status == dl.RUNNING and tree.open
