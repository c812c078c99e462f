"""dl.Saga: when a step fails for good, the undos of what the run did run newest first, each
as a durable step with its own key, and the run ends "compensated"; an undo that fails for
good is recorded and named, never lost. Every test runs on both stores.

The crash tests (every point of the forward and the undo path, in-process and SIGKILL) are
in test_crash_saga.py.
"""

from core_support import *  # noqa: F401,F403

from durable_lite.booking import book_trip
from durable_lite.keys import derive_key
from durable_lite.saga import undo_name
from durable_lite.sim import Refused, travel_at

TRIP = ["TP662-flex", "car-compact", "hotel-canal-house"]     # the hotel is sold out
GOOD_TRIP = ["TP662-flex", "car-compact", "hotel-harbour-inn"]


class Effects:
    """A stand-in for the world: each call is one effect, noted with the key it was given.
    `refuse` names the steps that fail for good."""

    def __init__(self, refuse=()):
        self.log, self.refuse = [], set(refuse)

    def do(self, name, key=None):
        if name in self.refuse:
            raise Refused(f"{name} refused")
        self.log.append((name, key))
        return name

    def undo(self, name, idempotency_key):
        if f"undo {name}" in self.refuse:
            raise Refused(f"undo {name} refused")
        self.log.append((f"undo {name}", idempotency_key))
        return f"undid {name}"

    def names(self):
        return [name for name, _ in self.log]


effects = Effects()


@dl.workflow("saga-three")
def three(ctx, steps=("a", "b", "c", "d")):
    with dl.Saga(ctx) as saga:
        for name in steps:
            saga.step(name, effects.do, name, undo=(effects.undo, name))
    return "all done"


@pytest.fixture
def fx():
    global effects
    effects = Effects()
    return effects


# the path back ---------------------------------------------------------------------------
def test_a_step_that_fails_for_good_undoes_every_step_newest_first_and_the_run_says_compensated(eng, fx):
    fx.refuse = {"d"}
    run = eng.start(three, run_id="r")
    assert run.status == dl.COMPENSATED == "compensated" and run.done
    assert fx.names() == ["a", "b", "c", "undo d", "undo c", "undo b", "undo a"]
    assert run.result == {"failed_step": "d", "error": "Refused: d refused",
                          "undos": ["undo:d", "undo:c", "undo:b", "undo:a"]}
    assert "step 'd' failed for good" in run.error and "undo:d, undo:c, undo:b, undo:a" in run.error
    assert run.executed == ["a", "b", "c", "d", "undo:d", "undo:c", "undo:b", "undo:a"]
    assert eng.get("r").status == "compensated" and eng.get("r").result == run.result
    assert [e.kind for e in eng.events("r")][-1] == "compensated"


def test_each_undo_is_a_step_with_its_own_key_derived_from_the_run_and_the_label(eng, fx):
    fx.refuse = {"c"}
    eng.start(three, run_id="r1")
    keys = {name: key for name, key in fx.log if name.startswith("undo")}
    ctx_key = lambda label: derive_key("r1", "undo", label)   # noqa: E731
    assert keys == {"undo c": ctx_key("c"), "undo b": ctx_key("b"), "undo a": ctx_key("a")}
    assert len(set(keys.values())) == 3
    fx.log.clear()
    eng.start(three, run_id="r2")                  # another run: other keys
    assert not set(keys.values()) & {key for _, key in fx.log}
    rows = eng.history("r1")
    assert [(r["step"], r["kind"], r["status"]) for r in rows] == [
        ("a", "step", "completed"), ("b", "step", "completed"), ("c", "error", "failed"),
        ("undo:c", "step", "completed"), ("undo:b", "step", "completed"),
        ("undo:a", "step", "completed")]


def test_a_run_with_no_failure_completes_and_runs_no_undo(eng, fx):
    run = eng.start(three, run_id="r")
    assert run.status == "completed" and run.result == "all done"
    assert fx.names() == ["a", "b", "c", "d"]


def test_a_compensated_run_is_finished_resume_returns_it_recover_skips_it_and_signals_are_refused(eng, fx):
    fx.refuse = {"b"}
    first = eng.start(three, run_id="r")
    again_ = again(eng).resume("r")
    assert again_.status == "compensated" and again_.result == first.result
    assert again_.executed == [] and again_.replayed == []          # nothing ran again
    assert again(eng).start(three, run_id="r").result == first.result
    assert again(eng).recover() == []
    with pytest.raises(dl.RunFinishedError, match="compensated"):
        eng.signal("r", "anything")
    assert fx.names() == ["a", "undo b", "undo a"]


def test_undo_none_means_nothing_to_undo_and_two_steps_of_one_name_get_two_undos(eng):
    calls = Effects()

    @dl.workflow("saga-names")
    def names(ctx):
        with dl.Saga(ctx) as saga:
            saga.step("lookup", calls.do, "lookup", undo=None)
            saga.step("hotel", calls.do, "hotel-1", undo=(calls.undo, "hotel-1"))
            saga.step("hotel", calls.do, "hotel-2", undo=(calls.undo, "hotel-2"))
            saga.step("pay", calls.do, "pay", undo=(calls.undo, "pay"))
        return "ok"

    calls.refuse = {"pay"}
    run = eng.start(names, run_id="r")
    assert run.result["undos"] == ["undo:pay", "undo:hotel(2)", "undo:hotel"]
    assert calls.names() == ["lookup", "hotel-1", "hotel-2", "undo pay", "undo hotel-2", "undo hotel-1"]
    assert undo_name("hotel#2") == "undo:hotel(2)" and undo_name("tool:search") == "undo:tool:search"
    keys = [k for n, k in calls.log if n.startswith("undo")]
    assert keys[1] == derive_key("r", "undo", "hotel#2") != keys[2]


# what starts the undos, and what does not --------------------------------------------------
def test_a_failure_the_workflow_handles_itself_undoes_nothing(eng):
    calls = Effects(refuse={"hotel-canal"})

    @dl.workflow("saga-fallback")
    def fallback(ctx):
        with dl.Saga(ctx) as saga:
            saga.step("flight", calls.do, "flight", undo=(calls.undo, "flight"))
            try:
                saga.step("hotel", calls.do, "hotel-canal", undo=(calls.undo, "hotel-canal"))
            except dl.StepFailed:
                saga.step("hotel", calls.do, "hotel-harbour", undo=(calls.undo, "hotel-harbour"))
        return "booked"

    run = eng.start(fallback, run_id="r")
    assert run.status == "completed" and calls.names() == ["flight", "hotel-harbour"]


def test_a_bug_in_the_workflow_code_fails_the_run_without_undoing_and_a_fixed_resume_carries_on(eng, fx):
    broken = {"yes": True}

    @dl.workflow("saga-bug")
    def buggy(ctx):
        with dl.Saga(ctx) as saga:
            saga.step("a", fx.do, "a", undo=(fx.undo, "a"))
            if broken["yes"]:
                raise KeyError("a typo in the workflow")
            saga.step("b", fx.do, "b", undo=(fx.undo, "b"))
        return "done"

    run = eng.start(buggy, run_id="r")
    assert run.status == "failed" and "KeyError" in run.error
    assert fx.names() == ["a"]                                      # nothing undone
    broken["yes"] = False
    assert again(eng).resume("r").status == "completed"
    assert fx.names() == ["a", "b"]


def test_the_workflow_can_give_up_for_a_reason_of_its_own(eng, fx):
    @dl.workflow("saga-give-up")
    def give_up(ctx, limit):
        with dl.Saga(ctx) as saga:
            quote = saga.step("quote", fx.do, "quote", undo=(fx.undo, "quote"))
            if limit < 100:
                saga.compensate(f"{quote} over the limit of {limit}")
        return "kept"

    run = eng.start(give_up, 50, run_id="r")
    assert run.status == "compensated"
    assert run.result == {"failed_step": None, "error": "quote over the limit of 50",
                          "undos": ["undo:quote"]}
    assert fx.names() == ["quote", "undo quote"]


def test_the_workflow_can_act_after_the_undos_by_catching_compensated(eng, fx):
    @dl.workflow("saga-apology")
    def apology(ctx):
        try:
            with dl.Saga(ctx) as saga:
                saga.step("a", fx.do, "a", undo=(fx.undo, "a"))
                saga.step("b", fx.do, "b", undo=(fx.undo, "b"))
        except dl.Compensated:
            ctx.step("sorry", fx.do, "sorry email", "key-sorry")
            raise
        return "done"

    fx.refuse = {"b"}
    run = eng.start(apology, run_id="r")
    assert run.status == "compensated"
    assert fx.names() == ["a", "undo b", "undo a", "sorry email"]


def test_an_undo_that_cannot_take_its_key_is_refused_before_its_step_runs(eng, fx):
    def cancel_without_key(name):
        return name

    @dl.workflow("saga-keyless")
    def keyless(ctx):
        with dl.Saga(ctx) as saga:
            saga.step("flight", fx.do, "flight", undo=(cancel_without_key, "flight"))
        return "done"

    run = eng.start(keyless, run_id="r")
    assert run.status == "failed"
    assert "the undo of step 'flight'" in run.error and "idempotency_key" in run.error
    assert fx.names() == []                                         # refused before the effect


def test_a_malformed_undo_is_refused_with_the_step_named(eng, fx):
    @dl.workflow("saga-malformed")
    def malformed(ctx):
        with dl.Saga(ctx) as saga:
            saga.step("flight", fx.do, "flight", undo=fx.undo)
        return "done"

    run = eng.start(malformed, run_id="r")
    assert run.status == "failed" and "undo of step 'flight' must be a tuple" in run.error


# an undo that fails for good -----------------------------------------------------------------
def test_an_undo_that_fails_for_good_is_recorded_the_others_still_run_and_the_run_fails_naming_it(eng, fx):
    fx.refuse = {"d", "undo b"}
    run = eng.start(three, run_id="r")
    assert run.status == "failed"
    assert run.error.startswith("CompensationFailed: run 'r' could not undo everything after step 'd'")
    assert "1 of 4 undo(s) failed for good: undo:b (Refused: undo b refused)" in run.error
    assert "engine.invalidate('r', 'undo:b')" in run.error
    assert fx.names() == ["a", "b", "c", "undo d", "undo c", "undo a"]     # undo a still ran
    # visible in get, history and events
    assert eng.get("r").error == run.error
    failed = [r for r in eng.history("r") if r["status"] == "failed"]
    assert [(r["step"], r["error"]) for r in failed] == [
        ("d", "attempt 1: Refused: d refused"), ("undo:b", "attempt 1: Refused: undo b refused")]
    events = [(e.kind, e.name) for e in eng.events("r")]
    assert ("attempt_failed", "undo:b") in events and events[-1][0] == "failed"


def test_a_failed_compensation_resumed_repeats_no_effect_and_once_fixed_finishes_without_doubles(eng, fx):
    fx.refuse = {"d", "undo b"}
    eng.start(three, run_id="r")
    assert again(eng).resume("r").status == "failed"               # replayed: the same answer
    assert fx.names() == ["a", "b", "c", "undo d", "undo c", "undo a"]
    fx.refuse = {"d"}                                               # a person fixed the cause
    assert again(eng).invalidate("r", "undo:b") == ["undo:b", "undo:a"]
    run = again(eng).resume("r")
    assert run.status == "compensated"
    assert run.executed == ["undo:b", "undo:a"]
    undos_of_a = [key for name, key in fx.log if name == "undo a"]
    assert len(undos_of_a) == 2 and len(set(undos_of_a)) == 1      # same key: a provider dedupes


def test_when_the_last_undo_failed_resume_gives_it_its_attempts_again(eng, fx):
    fx.refuse = {"d", "undo a"}
    assert eng.start(three, run_id="r").status == "failed"
    fx.refuse = {"d"}                                               # fixed: resume is enough
    run = again(eng).resume("r")
    assert run.status == "compensated" and run.executed == ["undo:a"]
    assert fx.names() == ["a", "b", "c", "undo d", "undo c", "undo b", "undo a"]


def test_undo_retry_gives_a_flaky_undo_more_attempts(eng):
    tries = {"n": 0}

    def flaky_undo(name, idempotency_key):
        tries["n"] += 1
        if tries["n"] < 3:
            raise ConnectionError("the airline timed out")
        return f"undid {name}"

    def refused():
        raise Refused("sold out")

    @dl.workflow("saga-flaky-undo")
    def flaky(ctx):
        with dl.Saga(ctx, undo_retry=dl.Retry(max_attempts=3, jitter=False)) as saga:
            saga.step("flight", lambda: "booked", undo=(flaky_undo, "flight"))
            saga.step("hotel", refused, undo=None)
        return "done"

    run = eng.start(flaky, run_id="r")
    assert run.status == "compensated" and tries["n"] == 3
    (row,) = [r for r in eng.history("r") if r["step"] == "undo:flight"]
    assert row["attempts"] == 3 and row["status"] == "completed"


def test_a_budget_can_halt_a_compensation_and_a_new_budget_finishes_it(eng, fx):
    fx.refuse = {"d"}
    run = eng.start(three, run_id="r", budget=dl.Budget(max_steps=6))
    assert run.status == "halted"
    assert fx.names() == ["a", "b", "c", "undo d", "undo c"]
    run = again(eng).resume("r", budget=dl.Budget(max_steps=20))
    assert run.status == "compensated" and run.executed == ["undo:b", "undo:a"]
    assert fx.names() == ["a", "b", "c", "undo d", "undo c", "undo b", "undo a"]


def test_a_saga_that_is_compensating_takes_no_new_steps(eng, fx):
    @dl.workflow("saga-late-step")
    def late(ctx):
        saga = dl.Saga(ctx)
        try:
            saga.step("a", fx.do, "a", undo=(fx.undo, "a"))
            saga.compensate("changed my mind")
        except dl.Compensated:
            saga.step("b", fx.do, "b", undo=None)
        return "done"

    run = eng.start(late, run_id="r")
    assert run.status == "failed" and "while the saga is compensating" in run.error


# the booking agent and the travel desk ---------------------------------------------------------
def test_the_booking_agent_compensates_a_sold_out_hotel_and_the_ledgers_balance(eng, folder):
    run = eng.start(book_trip, folder, "trip-7", TRIP, run_id="trip-7")
    assert run.status == "compensated"
    assert run.result["failed_step"] == "hotel" and "sold out" in run.result["error"]
    assert run.result["undos"] == ["undo:hotel", "undo:car", "undo:flight", "undo:charge"]
    desk = travel_at(folder)
    assert desk.statement("trip-7") == {"charged": 1120, "refunded": 1120, "held": [],
                                        "held_value": 0, "balance": 0, "cancelled_twice": 0}
    counts = dl.sim.World(folder).summary()
    assert (counts["charges"], counts["bookings"], counts["cancellations"], counts["refunds"]) == (1, 2, 2, 1)
    (hotel_undo,) = [r for r in eng.history("trip-7") if r["step"] == "undo:hotel"]
    assert hotel_undo["result"] == {"cancelled": False, "reason": "no booking with this reference"}


def test_the_booking_agent_books_a_trip_that_can_be_booked(eng, folder):
    run = eng.start(book_trip, folder, "trip-8", GOOD_TRIP, run_id="trip-8")
    assert run.status == "completed"
    assert run.result == {"trip": "trip-8", "charged": 1060,
                          "bookings": ["bookings-1", "bookings-2", "bookings-3"]}
    assert travel_at(folder).statement() == {
        "charged": 1060, "refunded": 0, "held": GOOD_TRIP, "held_value": 1060, "balance": 0,
        "cancelled_twice": 0}


def test_a_saver_fare_that_cannot_be_cancelled_leaves_the_run_failed_and_the_statement_off(eng, folder):
    run = eng.start(book_trip, folder, "trip-9", ["TP662-saver", "car-compact", "hotel-canal-house"],
                    run_id="trip-9")
    assert run.status == "failed" and "undo:flight (Refused: booking bookings-1 (TP662-saver) " \
                                      "cannot be cancelled" in run.error
    statement = travel_at(folder).statement()
    assert statement["held"] == ["TP662-saver"] and statement["balance"] == -290
    (row,) = [r for r in eng.history("trip-9") if r["step"] == "undo:flight"]
    assert row["attempts"] == 1                   # a final answer is not retried (no_retry)


def test_the_travel_desk_refuses_for_good_and_an_undo_with_nothing_to_undo_does_nothing(folder):
    desk = travel_at(folder)
    with pytest.raises(Refused, match="card declined: 2500 EUR is over"):
        desk.charge("t", 2500, reference="k0")
    with pytest.raises(Refused, match="hotel-dam-square .* is sold out"):
        desk.book("hotel-dam-square", reference="k1")
    with pytest.raises(ValueError, match="no offer 'hotel-ritz'; the travel desk sells"):
        desk.book("hotel-ritz", reference="k2")
    assert desk.refund("nothing") == {"refunded": False, "reason": "no charge with this reference"}
    assert desk.cancel("nothing")["cancelled"] is False
    # a reference books once; without a key every cancel is a new record (it shows up)
    assert desk.book("car-van", reference="k3")["repeat"] is False
    assert desk.book("car-van", reference="k3")["repeat"] is True
    desk.cancel("k3")
    desk.cancel("k3")
    assert desk.statement()["cancelled_twice"] == 1
    assert desk.cancel("k3", idempotency_key="u")["repeat"] is False
    assert desk.cancel("k3", idempotency_key="u")["repeat"] is True
    # places run out: the van has two
    desk.book("car-van", reference="k4")
    desk.book("car-van", reference="k5")
    with pytest.raises(Refused, match="sold out"):
        desk.book("car-van", reference="k6")


def test_import_durable_lite_still_loads_no_slow_module_for_the_saga():
    import subprocess
    probe = ("import json, sys\nbefore = set(sys.modules)\nimport durable_lite\n"
             "print(json.dumps(sorted(set(sys.modules) - before)))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    import json
    loaded = set(json.loads(out.stdout))
    assert "durable_lite.saga" in loaded
    assert not loaded & {"inspect", "dataclasses", "durable_lite.policy", "durable_lite.sim",
                         "durable_lite.booking"}


def test_the_trace_shows_the_undos_as_steps_and_the_execution_ending_compensated(eng, fx):
    fx.refuse = {"c"}
    eng.start(three, run_id="r")
    tree = eng.trace("r")
    (execution,) = tree.children
    assert tree.status == execution.status == "compensated"
    assert [s.name for s in execution.children] == ["a", "b", "c", "undo:c", "undo:b", "undo:a"]
