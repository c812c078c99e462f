"""`dl.faults.sweep(..., observe=fn)`: the hook the graders use to read each case's world
before the sweep removes its folder (refund ids, mail subjects), not only to count it."""

import durable_lite as dl
from durable_lite.examples import refund, world_at


def refunds_recorded(folder):
    return [r["refund_id"] for r in world_at(folder).careless.refunds()]


def test_observe_sees_every_case_world_and_lands_in_its_row():
    s = dl.faults.sweep(refund, "A-17", 40, use_key=False, careless=True, progress=False,
                        observe=refunds_recorded)
    assert s.clean["observed"] == ["R-1"]
    paid_twice = [r for r in s.rows if r["duplicates"].get("refunds")]
    assert [(r["step"], r["when"]) for r in paid_twice] == [("refund", "after_effect")]
    assert paid_twice[0]["observed"] == ["R-1", "R-2"]
    assert all(r["observed"] == ["R-1"] for r in s.rows if r not in paid_twice)


def test_without_observe_rows_and_the_clean_run_are_as_before():
    s = dl.faults.sweep(refund, "A-17", 40, progress=False)
    assert "observed" not in s.clean and all("observed" not in r for r in s.rows)
    clean, points = dl.faults.crash_points(refund, "A-17", 40)
    assert "observed" not in clean and len(points) == 12
