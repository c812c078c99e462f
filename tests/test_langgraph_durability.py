"""What LangGraph's three durability modes change, measured on lesson 01's refund: killed by
SIGKILL at every step and crash point (keyed and not), resumed by a fresh process.

- "sync" and "async" leave the same rows at every point: each finished task's result is
  saved on a background thread in both ("sync" waits only for the end of a superstep, and
  an entrypoint's body is one), and the crash points wait for that save.
- "exit" saves nothing before the run ends: every kill leaves a thread with no checkpoint,
  the resume starts over from the input, and every effect the first process reached
  happens again (a key still makes the provider's second refund the first one's receipt).
"""

import pytest

from durable_lite import examples as ex
from durable_lite.engines import langgraph_durability
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


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "bare"])
def test_sync_and_async_leave_the_same_rows_at_every_crash_point(tmp_path, keyed):
    rows = langgraph_durability.crash_rows(str(tmp_path), modes=("async", "sync"), keyed=keyed)
    by_mode = {}
    for row in rows:
        assert row["killed"] and row["status"] == "completed" and row["resume"] == "resumed"
        by_mode.setdefault(row["durability"], []).append(
            {k: v for k, v in row.items() if k != "durability"})
    assert by_mode["async"] == by_mode["sync"]
    for row in by_mode["sync"]:
        step, when = row["step"], row["when"]
        finished = ex.REFUND_STEPS.index(step) + (when == "after_checkpoint")
        assert row["replayed"] == list(ex.REFUND_STEPS[:finished]), (step, when)
        assert row["ran again"] == list(ex.REFUND_STEPS[finished:]), (step, when)
        twice = {EFFECTS.get(step)} if when == AFTER_EFFECT else set()
        assert row["refund requests"] == 1 + ("refunds paid" in twice)
        for name in EFFECTS.values():
            assert row[name] == 1 + (name in twice and not keyed), (step, when, name)


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
