"""MemoryStore and SQLiteStore must behave the same in everything but surviving the process."""

from core_support import *  # noqa: F401,F403

from durable_lite.store.records import RunRecord


@dl.workflow("agree-simple")
def simple(ctx, value):
    return ctx.step("only", lambda: value)


def test_both_stores_list_runs_oldest_first_then_by_id(eng, clock):
    for run_id in ("zeta", "alpha", "mid"):
        eng.store.create_run(RunRecord(run_id, "agree-simple", 1, "[1]", "{}", "running",
                                       clock(), clock()))
    clock.advance(1)
    eng.store.create_run(RunRecord("aaa", "agree-simple", 1, "[2]", "{}", "running", clock(), clock()))
    assert [r.run_id for r in eng.store.list_runs(["running"])] == ["alpha", "mid", "zeta", "aaa"]
    assert [r.run_id for r in eng.recover()] == ["alpha", "mid", "zeta", "aaa"]
