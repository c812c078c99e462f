"""The machinery every exercise's checks share (grading/harness.py): the sweep as a check
sees it, and runs crashed once and resumed by a fresh engine."""

import pytest

import durable_lite as dl
from durable_lite.booking import book_trip
from durable_lite.faults import AFTER_CHECKPOINT, CrashAt
from durable_lite.grading.checks import Fail
from durable_lite.grading.harness import EngineRuns, scratch, sweep_of

BOOKED = ["TP662-flex", "car-compact"]
SOLD_OUT = ["TP662-flex", "car-compact", "hotel-canal-house"]     # the hotel: none left


# sweep_of: the endings a question expects ----------------------------------------------------
def test_a_sweep_whose_clean_run_compensates_fails_unless_the_check_expects_it():
    with pytest.raises(Fail, match=r"the agent, run once without a crash, ended compensated; "
                                   r"it should end completed"):
        sweep_of(book_trip, "trip-1", SOLD_OUT, what="the agent")
    s = sweep_of(book_trip, "trip-1", SOLD_OUT, what="the agent", ends=("completed", "compensated"))
    assert s.clean["status"] == "compensated" and s.problems() == []
    assert sweep_of(book_trip, "trip-2", BOOKED, what="the agent",
                    ends=("completed", "compensated")).clean["status"] == "completed"


def test_a_sweep_that_must_compensate_fails_a_clean_run_that_completes():
    with pytest.raises(Fail, match="ended completed; it should end compensated"):
        sweep_of(book_trip, "trip-3", BOOKED, what="the agent", ends="compensated")


@dl.workflow("test-harness-broken")
def broken(ctx, folder):
    ctx.step("boom", lambda: 1 / 0)


def test_a_clean_run_that_fails_is_still_unfinished_whatever_the_endings():
    with pytest.raises(Fail, match=r"the agent, run once without a crash, ended failed: "
                                   r"StepFailed: .*ZeroDivisionError"):
        sweep_of(broken, what="the agent", ends=("completed", "compensated"))


# EngineRuns: each engine a process of its own ---------------------------------------------
@dl.workflow("test-harness-ids")
def two_ids(ctx, folder):
    first = ctx.uuid()
    ctx.step("between", lambda: "recorded")
    return [first, ctx.uuid()]


@pytest.mark.parametrize("ids", [None, "seed-1"])
def test_ids_minted_after_a_resume_differ_from_those_before_the_crash(ids):
    crash = CrashAt("between", AFTER_CHECKPOINT)
    results = []
    for _ in range(2):                          # and they are the same for the same runs
        with scratch("harness") as folder:
            run = EngineRuns(folder).run(two_ids, folder, run_id="r-1", crash=crash, ids=ids)
        assert run.status == "completed" and run.result[0] != run.result[1], run.result
        results.append(run.result)
    assert results[0] == results[1]
