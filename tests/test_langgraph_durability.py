"""What LangGraph's three durability modes change, measured on lesson 01's refund: killed by
SIGKILL at every step and crash point (keyed and not), resumed by a fresh process.

- "sync" and "async" leave the same rows at every point (sync's are in the four-engine
  table and test_langgraph_parity.py, beside durable_lite's): each finished task's result
  is saved on a background thread in both ("sync" waits only for the end of a superstep, and an
  entrypoint's body is one), and the crash points wait for that save.
- "exit" saves nothing before the run ends: every kill leaves a thread with no checkpoint,
  the resume starts over from the input, and every effect the first process reached
  happens again (a key still makes the provider's second refund the first one's receipt).
"""

import pytest

from durable_lite import examples as ex
from durable_lite.engines.langgraph import durability as langgraph_durability
from durable_lite.faults import AFTER_EFFECT, BEFORE_STEP

pytestmark = pytest.mark.crash

EFFECTS = {"refund": "refunds paid", "email": "emails", "close": "tickets closed"}
COUNTS = ("refunds paid", "refund requests", "emails", "tickets closed")


def reached(step, when):
    """The effects the first process performed before it was killed at (step, when)."""
    here = ex.REFUND_STEPS.index(step)
    done = ex.REFUND_STEPS[:here] + ((step,) if when != BEFORE_STEP else ())
    return {EFFECTS[s] for s in done if s in EFFECTS}


def starting_over(step, when, keyed):
    repeated = reached(step, when)
    counts = {name: 1 + (name in repeated and not keyed) for name in EFFECTS.values()}
    counts["refund requests"] = 1 + ("refunds paid" in repeated)
    return counts


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "bare"])
def test_under_exit_every_kill_starts_the_run_over_and_repeats_what_it_reached(tmp_path,
                                                                              keyed):
    rows = langgraph_durability.crash_rows(str(tmp_path), modes=("exit",), keyed=keyed)
    assert len(rows) == len(ex.REFUND_STEPS) * 3
    for row in rows:
        where = (row["step"], row["when"])
        assert row["killed"] and row["status"] == "completed", where
        assert row["resume"] == "started over" and row["replayed"] == [], where
        assert row["ran again"] == list(ex.REFUND_STEPS), where
        assert {k: row[k] for k in COUNTS} == starting_over(*where, keyed), where


def resumed_from_the_checkpoint(step, when, keyed):
    """The row "sync" leaves (test_langgraph_parity.py checks it against durable_lite):
    the finished tasks come from the checkpoint, the rest run again, and only the effect
    whose window the kill fell in happens twice."""
    finished = ex.REFUND_STEPS.index(step) + (when == "after_checkpoint")
    twice = {EFFECTS.get(step)} if when == AFTER_EFFECT else set()
    counts = {name: 1 + (name in twice and not keyed) for name in EFFECTS.values()}
    return {"resume": "resumed", "replayed": list(ex.REFUND_STEPS[:finished]),
            "ran again": list(ex.REFUND_STEPS[finished:]),
            "refund requests": 1 + ("refunds paid" in twice), **counts}


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "bare"])
def test_async_leaves_the_rows_of_sync_at_every_crash_point(tmp_path, keyed):
    rows = langgraph_durability.crash_rows(str(tmp_path), modes=("async",), keyed=keyed)
    assert len(rows) == len(ex.REFUND_STEPS) * 3
    for row in rows:
        where = (row["step"], row["when"])
        assert row["killed"] and row["status"] == "completed", where
        expected = resumed_from_the_checkpoint(*where, keyed)
        assert {k: row[k] for k in expected} == expected, where


def test_sync_leaves_the_rows_the_parity_suite_expects(tmp_path):
    """One point per step under "sync", here beside "async" (the parity suite has them all)."""
    points = [(step, AFTER_EFFECT) for step in ex.REFUND_STEPS]
    for row in langgraph_durability.crash_rows(str(tmp_path), modes=("sync",), keyed=False,
                                               points=points):
        expected = resumed_from_the_checkpoint(row["step"], row["when"], False)
        assert {k: row[k] for k in expected} == expected, row["step"]


def test_the_timings_give_a_time_per_task_for_every_mode(tmp_path):
    """The figures the lesson prints (a measurement, not a speed test: no threshold)."""
    seconds = langgraph_durability.timings(str(tmp_path), runs=2)
    assert set(seconds) == {"exit", "async", "sync", "no checkpointer"}
    assert all(0 < s < 60 for s in seconds.values())


def test_the_save_race_counts_lost_results_and_a_slow_disk_loses_every_one(tmp_path):
    """With each background save slowed to half a second, a kill right after the refund
    task returned always beats the save: the resume pays the bank a second visit."""
    race = langgraph_durability.save_race(str(tmp_path), runs=2, slow_saves=0.5)
    assert race == {"runs": 2, "refund lost": 2, "refund kept": 0}


def test_the_table_is_a_dataframe_of_the_rows(tmp_path):
    rows = langgraph_durability.crash_rows(str(tmp_path), modes=("sync",),
                                           points=[("refund", AFTER_EFFECT)])
    table = langgraph_durability.table(rows)
    assert len(table) == 1 and table.loc[0, "refund requests"] == 2
