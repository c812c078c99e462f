"""The booking agent's saga crashed at every point of its forward path and of its way back:
in-process (`dl.Crash`, on both stores) and for real (SIGKILL, each resume a fresh process).

Three effects happen (the card is charged, a flight and a car are booked), then the hotel
is sold out and the run undoes them. Wherever the process dies, every effect and every
undo happens exactly once, the ledgers balance, and the run ends compensated.
"""

from core_support import *  # noqa: F401,F403

from durable_lite.booking import book_trip
from durable_lite.child import run_in_child
from durable_lite.faults import AFTER_EFFECT, BEFORE_STEP, CRASH_POINTS, CrashAt
from durable_lite.sim import travel_at
from durable_lite.sweep import crash_points, sweep, world_effects

pytestmark = pytest.mark.crash

TRIP = ["TP662-flex", "car-compact", "hotel-canal-house"]        # the hotel is sold out
FORWARD = ("charge", "flight", "car")
BACK = ("undo:hotel", "undo:car", "undo:flight", "undo:charge")
EVERY_POINT = ([(s, w) for s in FORWARD for w in CRASH_POINTS] + [("hotel", BEFORE_STEP)]
               + [(s, w) for s in BACK for w in CRASH_POINTS])
ONCE = {"refunds": 1, "charges": 1, "bookings": 2, "cancellations": 2}
RESULT = {"failed_step": "hotel",
          "error": "Refused: hotel-canal-house (Canal House, 3 nights) is sold out",
          "undos": list(BACK)}


def ledgers_and_balance(folder):
    """What the sweep counts: every ledger, plus the euros the statement leaves unexplained
    and the bookings cancelled twice (both 0 when the ledgers balance)."""
    statement = travel_at(folder).statement()
    return {**world_effects(folder), "unbalanced_euros": abs(statement["balance"]),
            "cancelled_twice": statement["cancelled_twice"]}


def check_every_case(s):
    assert [(r["step"], r["when"]) for r in s.rows] == EVERY_POINT
    assert s.clean["status"] == "compensated" and s.clean["result"] == RESULT
    assert s.clean["effects"] == ONCE                       # zero columns are left out
    assert s.problems() == []
    for row in s.rows:
        assert row["crashed"], row
        assert row["status"] == "compensated" and row["result"] == RESULT, row
        assert {k: row["effects"].get(k, 0) for k in ONCE} == ONCE, row
        assert row["effects"].get("unbalanced_euros", 0) == 0
        assert row["effects"].get("cancelled_twice", 0) == 0


def test_the_crash_points_cover_the_forward_path_the_failing_step_and_every_undo():
    clean, points = crash_points(book_trip, "trip-7", TRIP)
    assert [(p.step, p.when) for p in points] == EVERY_POINT
    assert clean["status"] == "compensated"


def test_crashed_in_process_at_every_point_every_effect_and_undo_happens_once():
    s = sweep(book_trip, "trip-7", TRIP, effects=ledgers_and_balance)
    check_every_case(s)
    assert s.finding() == "No effect repeated or lost at any of 22 crash points"


def test_killed_for_real_at_every_point_and_resumed_by_fresh_processes_the_ledgers_balance():
    s = sweep(book_trip, "trip-7", TRIP, real_kill=True, effects=ledgers_and_balance,
              progress=False)
    check_every_case(s)


@pytest.mark.parametrize("step,when", EVERY_POINT, ids=[f"{s}-{w}" for s, w in EVERY_POINT])
def test_on_both_stores_a_crash_anywhere_then_a_fresh_engine_ends_compensated_and_balanced(
        any_store, clock, folder, step, when):
    name, _, occurrence = step.partition("#")
    crash = CrashAt(name, when, occurrence=int(occurrence or 1))
    engine = dl.Engine(any_store, clock, ids=dl.SequentialIds("a"), worker="first", crash_at=crash)
    with pytest.raises(dl.Crash):
        engine.start(book_trip, folder, "trip-7", TRIP, run_id="trip-7")
    assert any_store.get_run("trip-7").status == "running"
    clock.advance(60)                       # the crashed worker's lease runs out meanwhile
    run = dl.Engine(any_store, clock, ids=dl.SequentialIds("b"), worker="second").resume("trip-7")
    assert run.status == "compensated" and run.result == RESULT
    assert travel_at(folder).statement("trip-7")["balance"] == 0
    counts = dl.sim.World(folder).summary()
    assert {k: counts[k] for k in ONCE} == ONCE
    # the resume replayed everything recorded before the crash and executed the rest once
    assert len(set(run.replayed)) == len(run.replayed) and not set(run.replayed) & set(run.executed)


def test_killed_in_the_middle_of_compensating_a_fresh_process_carries_on_where_it_stopped(
        store_path, folder):
    killed = run_in_child(store_path, "durable_lite.booking", "book-trip", folder, "trip-7", TRIP,
                          run_id="trip-7", crash_at=CrashAt("undo:flight", AFTER_EFFECT, kill=True))
    assert killed.killed and killed.run is None
    statement = travel_at(folder).statement("trip-7")
    assert statement["held"] == [] and statement["refunded"] == 0   # flight cancelled, no refund yet
    resumed = run_in_child(store_path, "durable_lite.booking", "book-trip", run_id="trip-7",
                           resume=True)
    run = resumed.run
    assert run["status"] == "compensated" and run["result"] == RESULT
    assert run["replayed"] == ["charge", "flight", "car", "hotel", "undo:hotel", "undo:car"]
    assert run["executed"] == ["undo:flight", "undo:charge"]        # the flight's again: its key
    assert travel_at(folder).statement("trip-7") == {
        "charged": 1120, "refunded": 1120, "held": [], "held_value": 0, "balance": 0,
        "cancelled_twice": 0}
    store = dl.SQLiteStore(store_path)
    try:
        (undo_flight,) = [r for r in dl.Engine(store).history("trip-7") if r["step"] == "undo:flight"]
        assert undo_flight["result"]["repeat"] is True               # the provider's first answer
    finally:
        store.close()


def test_with_an_undo_that_fails_for_good_every_crash_point_ends_failed_the_same_way():
    def failed_the_same(s):
        assert s.clean["status"] == "failed" and "CompensationFailed" in s.clean["error"]
        assert s.problems() == [] and all(r["error"] == s.clean["error"] for r in s.rows)

    s = sweep(book_trip, "trip-9", ["TP662-saver", "car-compact", "hotel-canal-house"],
              effects=ledgers_and_balance)
    failed_the_same(s)
    assert s.clean["effects"]["unbalanced_euros"] == 290           # the saver fare, kept
    points = [(r["step"], r["when"]) for r in s.rows]
    assert [w for step, w in points if step == "undo:flight"] == [BEFORE_STEP]   # it fails there
    assert points[-3:] == [("undo:charge", w) for w in CRASH_POINTS]            # then goes on


def test_a_trip_that_can_be_booked_is_as_crash_safe_with_a_saga_as_without():
    s = sweep(book_trip, "trip-8", ["TP662-flex", "car-compact", "hotel-harbour-inn"],
              effects=ledgers_and_balance)
    assert s.clean["status"] == "completed" and s.problems() == []
    assert len(s.rows) == 12 and s.clean["effects"] == {"charges": 1, "bookings": 3}
