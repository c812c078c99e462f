"""Exercise 09 can be failed: wrong undos, wrong references and wrong emails each fail the
tests that name the mistake (on one seed each, spread over two: every seed draws every test's
case); right answers written another way pass.
(test_grading.py grades the solution notebook and the untouched exercise like every other.)

The answers here are what a learner writes in the notebook's answer cells, beside copies of
the notebook's given code. They are checked in this process (fast); one wrong answer is
also graded as a notebook, by the grader, as an instructor would.
"""

import os
import re
import time
import uuid

import pytest

import durable_lite as dl
from durable_lite.booking import UNDO_RETRY, book_trip
from durable_lite.grading import checks, exercise
from durable_lite.grading.cases import Draw
from durable_lite.grading.exercises import ex09_compensation as ex09
from durable_lite.grading.grader import grade_notebook
from durable_lite.grading.harness import EngineRuns, scratch
from durable_lite.sim import travel_at, world_at

from grading_support import failing_tests, one_seed, statuses, with_code

SEEDS = (1, 2)              # a wrong answer fails on one of them (one_seed), the answers spread over both
RIGHT_SEEDS = (1, 2)        # a right one must pass on each (test_grading.py adds fresh ones)
ONE_SEED = (1,)             # for right answers no drawn case can tell apart from the solution


# the notebook's given code ------------------------------------------------------------------
def charge_card(folder, trip_id, amount, reference):
    return travel_at(folder).charge(trip_id, amount, reference=reference)


def book(folder, offer, reference, trip_id):
    return travel_at(folder).book(offer, reference=reference, trip=trip_id)


def trip_total(offers):
    return sum(dl.sim.OFFERS[offer]["price"] for offer in offers)


def kind(offer):
    return dl.sim.OFFERS[offer]["kind"]


def confirm(folder, to, trip_id, bookings, idempotency_key):
    return world_at(folder).mailer.send(to, f"Trip {trip_id} is booked: {', '.join(bookings)}",
                                        idempotency_key=idempotency_key)


def apologise(folder, to, trip_id, reason, idempotency_key):
    return world_at(folder).mailer.send(
        to, f"Sorry: trip {trip_id} could not be booked ({reason}); anything charged is refunded",
        idempotency_key=idempotency_key)


# the right answers ----------------------------------------------------------------------------
def refund_card(folder, reference, idempotency_key):
    return travel_at(folder).refund(reference, idempotency_key=idempotency_key)


def cancel_booking(folder, reference, idempotency_key):
    return travel_at(folder).cancel(reference, idempotency_key=idempotency_key)


@dl.workflow("test-ex09-party-trip")
def party_trip(ctx, folder, trip_id, offers):
    booked = []
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        paid = ctx.idempotency_key("charge", trip_id)
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                  undo=(refund_card, folder, paid))
        for line, offer in enumerate(offers):
            seat = ctx.idempotency_key("book", trip_id, line)
            booking = saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                undo=(cancel_booking, folder, seat))
            booked.append(booking["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


@dl.workflow("test-ex09-trip-with-mail")
def trip_with_mail(ctx, folder, trip_id, offers, to):
    try:
        trip = party_trip(ctx, folder, trip_id, offers)
    except dl.Compensated as undone:
        ctx.step("correction", apologise, folder, to, trip_id, undone.error,
                 ctx.idempotency_key("correction", trip_id))
        raise
    ctx.step("confirmation", confirm, folder, to, trip_id, trip["bookings"],
             ctx.idempotency_key("confirmation", trip_id))
    return trip


# running the checks -------------------------------------------------------------------------
def run(qid, *answers, seed=None):
    return checks.run_question(exercise("09_compensation"), qid, answers, seed=seed)


# each test by a short name: the ending it plays, or what it calls
SHORT = [("nothing is refused", "booked"), ("the trip is booked", "booked"),
         ("the card is declined", "declined"), ("the first line", "first"),
         ("a line in the middle", "middle"), ("the last line", "last"),
         ("a line is booked but", "silent"),
         ("refund_card pays back", "refund"), ("refund_card run again", "refund twice"),
         ("refund_card with a reference nothing", "refund nothing"),
         ("cancel_booking cancels", "cancel"), ("cancel_booking run again", "cancel twice"),
         ("cancel_booking with a reference nothing", "cancel nothing"),
         ("in the check's own agent", "sweep"),
         ("each undo run again by a new process", "new process"),
         ("the same trip asked for again", "again")]


def short(name):
    return next(label for prefix, label in SHORT if name.startswith(prefix))


def failing(result):
    return {short(t.name) for t in result.tests if t.status != checks.PASSED}


def fails_on_its_seed(qid, *answers, expected):
    """The answer fails exactly the tests `expected` on one of SEEDS (one_seed: every seed
    draws every test's case, test_every_drawn_trip_ends_the_way_its_test_says); its result."""
    seed = one_seed(SEEDS, *answers)
    result = run(qid, *answers, seed=seed)
    assert failing(result) == set(expected), f"seed {seed}:\n{result.report()}"
    return result


def passes(qid, *answers, seeds=ONE_SEED):
    """The answer passes every test of the question, on each seed."""
    for seed in seeds:
        result = run(qid, *answers, seed=seed)
        assert result.status == checks.PASSED, f"seed {seed}:\n{result.report()}"


def message(result, label):
    test = next(t for t in result.tests if short(t.name) == label)
    return test.message, test.hint


def test_the_right_answers_pass_every_question_on_every_seed():
    for qid, answers in (("q1", (refund_card, cancel_booking)), ("q2", (party_trip,)),
                         ("q3", (trip_with_mail,))):
        passes(qid, *answers, seeds=RIGHT_SEEDS)
    # and the checks put back what they lent the answers for a test
    assert globals()["refund_card"].__module__ == __name__        # q2 ran with its own undos
    assert globals()["party_trip"].name == "test-ex09-party-trip"  # q3 with its own agent


# the cases ----------------------------------------------------------------------------------
@pytest.mark.parametrize("ending", list(ex09.ENDINGS))
def test_every_drawn_trip_ends_the_way_its_test_says(ending):
    """The case model is right: the check's own agent, run on each drawn trip, ends as the
    test expects, with the bookings it expects; an offer is on two lines before any refusal."""
    for seed in range(12):
        trip = ex09._trip(Draw(seed), ending)
        assert (trip.total > dl.sim.CARD_LIMIT) == (ending == "declined")
        with scratch("test-ex09") as folder, ex09._silent_supplier(trip):
            world = os.path.join(folder, "world")
            result = EngineRuns(folder).run(ex09.REFERENCE, world, trip.trip_id, trip.offers)
            assert result.status == trip.status, (trip, result.error)
            bookings = travel_at(world).world.ledger("bookings").count()
            assert bookings == trip.booked, trip
        if ending != "first":
            before = trip.offers[:trip.booked if ending != "silent" else trip.refused]
            assert len(set(before)) < len(before) or ending == "declined", trip


def test_cases_are_new_on_every_run():
    trips = {tuple(ex09._trip(Draw(seed), "middle").offers) for seed in range(20)}
    ids = {ex09._trip(Draw(seed), "booked").trip_id for seed in range(20)}
    assert len(trips) > 5 and len(ids) == 20


# q1: wrong undos ------------------------------------------------------------------------------
def refund_without_key(folder, reference, idempotency_key):
    return travel_at(folder).refund(reference)                   # the key is dropped


def cancel_without_key(folder, reference, idempotency_key):
    return travel_at(folder).cancel(reference)


def test_undos_that_drop_their_key_fail_the_repeats_and_the_crash_sweep():
    result = fails_on_its_seed("q1", refund_without_key, cancel_without_key,
                                 expected={"refund twice", "cancel twice", "sweep", "new process"})
    text, hint = message(result, "refund twice")
    assert re.search(r"called twice with the same key, made 2 refund\(s\) of the \d+ EUR charge", text)
    assert "a key it has seen" in hint and "idempotency_key=" not in hint


def refund_keyed_by_the_clock(folder, reference, idempotency_key):
    return travel_at(folder).refund(reference, idempotency_key=f"refund-{time.time()}")


def cancel_keyed_by_uuid(folder, reference, idempotency_key):
    return travel_at(folder).cancel(reference, idempotency_key=str(uuid.uuid4()))


def test_undos_with_keys_of_their_own_fail_the_repeats_and_the_crash_sweep():
    fails_on_its_seed("q1", refund_keyed_by_the_clock, cancel_keyed_by_uuid,
                        expected={"refund twice", "cancel twice", "sweep", "new process"})


def refund_keeping_a_fee(folder, reference, idempotency_key):
    desk = travel_at(folder)
    charge = next(c for c in desk.world.ledger("charges").records() if c["key"] == reference)
    trip, amount = charge["detail"]["trip"], charge["detail"]["amount"]
    return desk.world.payments.refund(trip, round(amount * 0.9), idempotency_key=idempotency_key)


def test_a_partial_refund_fails_the_refund_and_the_balance():
    result = fails_on_its_seed("q1", refund_keeping_a_fee, cancel_booking,
                                 expected={"refund", "refund nothing", "sweep"})
    text, hint = message(result, "refund")
    assert re.search(r"refunded \d+ EUR; the charge made under that reference is \d+ EUR", text)
    assert "no fee" in hint
    assert "does not balance" in message(result, "sweep")[0]


def cancel_that_insists(folder, reference, idempotency_key):
    answer = travel_at(folder).cancel(reference, idempotency_key=idempotency_key)
    if not answer["cancelled"]:
        raise RuntimeError(f"nothing to cancel under {reference}")
    return answer


def refund_that_insists(folder, reference, idempotency_key):
    answer = travel_at(folder).refund(reference, idempotency_key=idempotency_key)
    if not answer["refunded"]:
        raise LookupError("no such charge")
    return answer


def test_undos_that_raise_when_there_is_nothing_to_undo_fail():
    result = fails_on_its_seed("q1", refund_card, cancel_that_insists,
                                 expected={"cancel nothing", "sweep"})
    text, hint = message(result, "sweep")
    assert "undo:" in text and "failed" in text and "must do nothing, not raise" in hint
    fails_on_its_seed("q1", refund_that_insists, cancel_booking, expected={"refund nothing"})


def cancel_the_latest(folder, reference, idempotency_key):
    desk = travel_at(folder)
    latest = desk.world.ledger("bookings").records()[-1]        # not the one under `reference`
    return desk.cancel(latest["key"], idempotency_key=idempotency_key)


def test_an_undo_that_ignores_its_reference_fails():
    result = fails_on_its_seed("q1", refund_card, cancel_the_latest,
                                 expected={"cancel", "cancel nothing", "sweep"})
    assert "by its reference" in message(result, "cancel")[1]


def refund_with_a_literal_key(folder, reference, idempotency_key):
    return travel_at(folder).refund(reference, idempotency_key="undo-refund")


def cancel_with_a_literal_key(folder, reference, idempotency_key):
    return travel_at(folder).cancel(reference, idempotency_key="undo-cancel")


def test_one_literal_key_for_every_undo_fails_the_agent():
    """Repeats of one call look fine; two cancellations in one run share the key, so the
    second is taken for a repeat of the first and a booking is never cancelled."""
    fails_on_its_seed("q1", refund_with_a_literal_key, cancel_with_a_literal_key,
                        expected={"sweep"})


def test_the_untouched_undos_are_not_attempted():
    def stub(folder, reference, idempotency_key):
        raise NotImplementedError("ask the desk")
    assert run("q1", stub, stub, seed=1).status == checks.NOT_ATTEMPTED


# q1: right undos, written another way -----------------------------------------------------
def refund_through_the_card_company(folder, reference, idempotency_key):
    desk = travel_at(folder)
    charges = [c for c in desk.world.ledger("charges").records() if c["key"] == reference]
    if not charges:
        return {"refunded": False}
    detail = charges[0]["detail"]
    return desk.world.payments.refund(detail["trip"], detail["amount"],
                                      idempotency_key=idempotency_key)


def cancel_quietly(folder, reference, idempotency_key):
    travel_at(folder).cancel(reference, idempotency_key)          # positional, no return


def refund_keyed_by_reference(folder, reference, idempotency_key):
    # stable too: each reference is undone at most once
    return travel_at(folder).refund(reference, idempotency_key="refund:" + reference)


@pytest.mark.parametrize("refund, cancel", [
    (refund_through_the_card_company, cancel_quietly),
    (refund_keyed_by_reference, cancel_booking),
    (dl.booking.refund_card, dl.booking.cancel_booking),          # the lesson's own, imported
])
def test_right_undos_written_another_way_pass(refund, cancel):
    passes("q1", refund, cancel)


# q2: wrong agents -----------------------------------------------------------------------------
def test_the_lessons_own_agent_fails_where_an_offer_repeats():
    """book_trip, copied from the lesson, references a booking by its offer: two lines of one
    offer share a reference, and the desk answers the second with the first's booking."""
    result = fails_on_its_seed("q2", book_trip, expected={"booked", "middle", "last", "silent"})
    text, hint = message(result, "booked")
    assert re.search(r"trip 'trip-[a-z0-9]{6}' .*the desk answered line \d \([\w-]+\) with the "
                     r"booking it made for line \d \(bookings-\d+, repeat: True\)", text)
    assert "What tells two lines of the same offer apart?" in hint


@dl.workflow("test-ex09-no-refund")
def trip_without_a_refund(ctx, folder, trip_id, offers):
    booked = []
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        paid = ctx.idempotency_key("charge", trip_id)
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid, undo=None)
        for line, offer in enumerate(offers):
            seat = ctx.idempotency_key("book", trip_id, line)
            booking = saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                undo=(cancel_booking, folder, seat))
            booked.append(booking["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


def test_a_charge_without_an_undo_fails_every_refusal():
    result = fails_on_its_seed("q2", trip_without_a_refund,
                                 expected={"declined", "first", "middle", "last", "silent"})
    text, hint = message(result, "declined")
    assert "(missing: ['undo:charge'])" in text and "the charge too" in hint


@dl.workflow("test-ex09-cancel-by-charge")
def trip_cancelling_the_charge(ctx, folder, trip_id, offers):
    booked = []
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        paid = ctx.idempotency_key("charge", trip_id)
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                  undo=(refund_card, folder, paid))
        for line, offer in enumerate(offers):
            seat = ctx.idempotency_key("book", trip_id, line)
            booking = saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                undo=(cancel_booking, folder, paid))   # the wrong reference
            booked.append(booking["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


@dl.workflow("test-ex09-off-by-one")
def trip_cancelling_the_line_before(ctx, folder, trip_id, offers):
    booked = []
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        paid = ctx.idempotency_key("charge", trip_id)
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                  undo=(refund_card, folder, paid))
        previous = paid
        for line, offer in enumerate(offers):
            seat = ctx.idempotency_key("book", trip_id, line)
            booking = saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                undo=(cancel_booking, folder, previous))
            previous = seat
            booked.append(booking["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


def test_cancelling_by_the_wrong_reference_fails():
    result = fails_on_its_seed("q2", trip_cancelling_the_charge,
                                 expected={"middle", "last", "silent"})
    text, _ = message(result, "middle")
    assert re.search(r"does not balance: charged \d+ EUR, refunded \d+ EUR, still held: ", text)


def test_undos_shifted_by_one_line_fail_where_the_failed_step_did_book():
    """A sold-out line books nothing, so shifting every undo one line back still cancels
    each booking once; only a step that booked before failing shows the mistake."""
    result = fails_on_its_seed("q2", trip_cancelling_the_line_before, expected={"silent"})
    assert "never came" in message(result, "silent")[0]


@dl.workflow("test-ex09-uuid4")
def trip_with_fresh_uuids(ctx, folder, trip_id, offers):
    booked = []
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        paid = str(uuid.uuid4())                                   # new on every replay
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                  undo=(refund_card, folder, paid))
        for offer in offers:
            seat = str(uuid.uuid4())
            booking = saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                undo=(cancel_booking, folder, seat))
            booked.append(booking["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


def test_references_new_on_every_replay_fail_the_crash_sweeps():
    result = fails_on_its_seed("q2", trip_with_fresh_uuids,
                                 expected={"booked", "first", "middle", "last", "silent"})
    text, hint = message(result, "booked")
    assert "crash right after step 'charge' ran, then resume" in text
    assert "never the clock or uuid4" in hint


@dl.workflow("test-ex09-by-hand")
def trip_undone_by_hand(ctx, folder, trip_id, offers):
    paid, seats, booked = ctx.idempotency_key("charge", trip_id), [], []
    try:
        ctx.step("charge", charge_card, folder, trip_id, trip_total(offers), paid)
        for line, offer in enumerate(offers):
            seats.append(ctx.idempotency_key("book", trip_id, line))
            booked.append(ctx.step(kind(offer), book, folder, offer, seats[-1], trip_id)["booking_id"])
    except dl.StepFailed:
        for seat in reversed(seats):                               # plain calls, not steps
            cancel_booking(folder, seat, ctx.idempotency_key("undo", seat))
        refund_card(folder, paid, ctx.idempotency_key("undo", paid))
        raise
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


def test_undos_called_in_an_except_fail_every_refusal():
    """Keyed plain calls undo the effects once even across crashes; what gives them away is
    the run: it ends failed, and its history holds no undo."""
    result = fails_on_its_seed("q2", trip_undone_by_hand,
                                 expected={"declined", "first", "middle", "last", "silent"})
    text, hint = message(result, "middle")
    assert "the run ended failed" in text and "not steps" in hint


@dl.workflow("test-ex09-skips")
def trip_skipping_what_is_sold_out(ctx, folder, trip_id, offers):
    booked = []
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        paid = ctx.idempotency_key("charge", trip_id)
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                  undo=(refund_card, folder, paid))
        for line, offer in enumerate(offers):
            seat = ctx.idempotency_key("book", trip_id, line)
            try:
                booking = saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                    undo=(cancel_booking, folder, seat))
            except dl.StepFailed:
                continue                                           # a trip with a hole in it
            booked.append(booking["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


def test_carrying_on_past_a_refusal_fails():
    result = fails_on_its_seed("q2", trip_skipping_what_is_sold_out,
                                 expected={"first", "middle", "last", "silent"})
    assert "the run ended completed" in message(result, "first")[0]


@dl.workflow("test-ex09-charge-last")
def trip_charged_last(ctx, folder, trip_id, offers):
    booked = []
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        for line, offer in enumerate(offers):
            seat = ctx.idempotency_key("book", trip_id, line)
            booked.append(saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                    undo=(cancel_booking, folder, seat))["booking_id"])
        paid = ctx.idempotency_key("charge", trip_id)
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                  undo=(refund_card, folder, paid))
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


def test_an_agent_that_charges_last_is_told_the_order():
    result = fails_on_its_seed("q2", trip_charged_last,
                                 expected={"booked", "declined", "first", "middle", "last", "silent"})
    assert "charge first" in message(result, "declined")[1]


def test_an_untouched_agent_is_not_attempted():
    @dl.workflow("test-ex09-stub")
    def stub(ctx, folder, trip_id, offers):
        with dl.Saga(ctx):
            raise NotImplementedError("give every step a reference and an undo")
    assert run("q2", stub, seed=1).status == checks.NOT_ATTEMPTED


# q2: right agents, written another way -----------------------------------------------------
@dl.workflow("test-ex09-recorded-uuids")
def trip_with_recorded_uuids(ctx, folder, trip_id, offers):
    booked = []
    with dl.Saga(ctx) as saga:
        paid = ctx.uuid()                                          # recorded: the same on replay
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                  undo=(refund_card, folder, paid))
        for offer in offers:
            seat = ctx.uuid()
            booked.append(saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                    undo=(cancel_booking, folder, seat))["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


@dl.workflow("test-ex09-counted")
def trip_counting_each_offer(ctx, folder, trip_id, offers):
    booked, seen = [], {}
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        card = ctx.idempotency_key("card")
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), card,
                  undo=(refund_card, folder, card))
        for offer in offers:
            seen[offer] = seen.get(offer, 0) + 1
            ref = ctx.idempotency_key("line", offer, seen[offer])
            booked.append(saga.step(kind(offer), book, folder, offer, ref, trip_id,
                                    undo=(cancel_booking, folder, ref))["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


@dl.workflow("test-ex09-up-front")
def trip_with_references_up_front(ctx, folder, trip_id, offers):
    paid = ctx.idempotency_key("charge", trip_id)
    seats = [ctx.idempotency_key("seat", trip_id, i) for i in range(len(offers))]
    booked = []
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                  undo=(refund_card, folder, paid))
        for offer, seat in zip(offers, seats):
            booked.append(saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                    undo=(cancel_booking, folder, seat))["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}


@pytest.mark.parametrize("agent, seeds", [(trip_with_recorded_uuids, RIGHT_SEEDS),
                                          (trip_counting_each_offer, ONE_SEED),
                                          (trip_with_references_up_front, ONE_SEED)])
def test_right_agents_written_another_way_pass(agent, seeds):
    """Among them, references from ctx.uuid(): each attempt of the sweep mints ids of its
    own, as a fresh process's uuid4() would, so a resumed run's new references never
    repeat the crashed one's."""
    passes("q2", agent, seeds=seeds)


# q3: wrong emails ----------------------------------------------------------------------------
@dl.workflow("test-ex09-confirm-early")
def mail_confirmed_early(ctx, folder, trip_id, offers, to):
    ctx.step("confirmation", confirm, folder, to, trip_id, [], ctx.idempotency_key("confirmation"))
    try:
        return party_trip(ctx, folder, trip_id, offers)
    except dl.Compensated as undone:
        ctx.step("correction", apologise, folder, to, trip_id, undone.error,
                 ctx.idempotency_key("correction"))
        raise


@dl.workflow("test-ex09-swallowed")
def mail_swallowing_the_compensation(ctx, folder, trip_id, offers, to):
    try:
        trip = party_trip(ctx, folder, trip_id, offers)
    except dl.Compensated as undone:
        ctx.step("correction", apologise, folder, to, trip_id, undone.error,
                 ctx.idempotency_key("correction"))
        return {"trip": trip_id, "booked": False}               # the run says "completed"
    ctx.step("confirmation", confirm, folder, to, trip_id, trip["bookings"],
             ctx.idempotency_key("confirmation"))
    return trip


@dl.workflow("test-ex09-no-mail-key")
def mail_without_keys(ctx, folder, trip_id, offers, to):
    try:
        trip = party_trip(ctx, folder, trip_id, offers)
    except dl.Compensated as undone:
        ctx.step("correction", apologise, folder, to, trip_id, undone.error, None)
        raise
    ctx.step("confirmation", confirm, folder, to, trip_id, trip["bookings"], None)
    return trip


@dl.workflow("test-ex09-sorry-too-soon")
def mail_before_the_undos(ctx, folder, trip_id, offers, to):
    booked = []
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        try:
            paid = ctx.idempotency_key("charge", trip_id)
            saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                      undo=(refund_card, folder, paid))
            for line, offer in enumerate(offers):
                seat = ctx.idempotency_key("book", trip_id, line)
                booked.append(saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                        undo=(cancel_booking, folder, seat))["booking_id"])
        except dl.StepFailed as failed:                          # before the saga's undos
            ctx.step("correction", apologise, folder, to, trip_id, failed.error,
                     ctx.idempotency_key("correction"))
            raise
    ctx.step("confirmation", confirm, folder, to, trip_id, booked, ctx.idempotency_key("confirmation"))
    return {"trip": trip_id, "bookings": booked}


@dl.workflow("test-ex09-vague")
def mail_saying_nothing(ctx, folder, trip_id, offers, to):
    try:
        trip = party_trip(ctx, folder, trip_id, offers)
    except dl.Compensated:
        ctx.step("correction", apologise, folder, to, trip_id, "something went wrong",
                 ctx.idempotency_key("correction"))
        raise
    ctx.step("confirmation", confirm, folder, to, trip_id, trip["bookings"],
             ctx.idempotency_key("confirmation"))
    return trip


@dl.workflow("test-ex09-plain-calls")
def mail_by_plain_calls(ctx, folder, trip_id, offers, to):
    try:
        trip = party_trip(ctx, folder, trip_id, offers)
    except dl.Compensated as undone:
        apologise(folder, to, trip_id, undone.error, ctx.idempotency_key("correction"))
        raise
    confirm(folder, to, trip_id, trip["bookings"], ctx.idempotency_key("confirmation"))
    return trip


@pytest.mark.parametrize("answer, expected, words", [
    (mail_confirmed_early, {"booked", "declined", "middle", "again"}, "expected one, the correction"),
    (mail_swallowing_the_compensation, {"declined", "middle"}, "the run ended completed"),
    (mail_without_keys, {"booked", "declined", "middle"}, "{'emails': 1} compared with"),
    (mail_before_the_undos, {"declined", "middle"}, "the email ('correction') should be the last"),
    (mail_saying_nothing, {"declined", "middle"}, "does not say what went wrong"),
    (mail_by_plain_calls, {"booked", "declined", "middle"}, "no step of the run sent it"),
])
def test_wrong_emails_fail(answer, expected, words):
    result = fails_on_its_seed("q3", answer, expected=expected)
    assert words in message(result, "middle")[0]


# q3: right emails, written another way -----------------------------------------------------
@dl.workflow("test-ex09-else")
def mail_in_an_else(ctx, folder, trip_id, offers, to):
    key = ctx.idempotency_key("mail", to)                        # only one of them is ever sent
    try:
        trip = party_trip(ctx, folder, trip_id, offers)
    except dl.Compensated as undone:
        ctx.step("sorry", apologise, folder, to, trip_id, undone.error, key)
        raise undone
    else:
        ctx.step("booked", confirm, folder, to, trip_id, trip["bookings"], key)
        return trip


@dl.workflow("test-ex09-own-saga")
def mail_as_the_sagas_last_step(ctx, folder, trip_id, offers, to):
    booked = []
    try:
        with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
            paid = ctx.idempotency_key("charge", trip_id)
            saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                      undo=(refund_card, folder, paid))
            for line, offer in enumerate(offers):
                seat = ctx.idempotency_key("book", trip_id, line)
                booked.append(saga.step(kind(offer), book, folder, offer, seat, trip_id,
                                        undo=(cancel_booking, folder, seat))["booking_id"])
            saga.step("confirmation", confirm, folder, to, trip_id, booked,
                      ctx.idempotency_key("confirmation"), undo=None)
    except dl.Compensated as undone:
        ctx.step("correction", apologise, folder, to, trip_id, undone.error,
                 ctx.idempotency_key("correction"))
        raise
    return {"trip": trip_id, "bookings": booked}


@pytest.mark.parametrize("answer", [mail_in_an_else, mail_as_the_sagas_last_step])
def test_right_emails_written_another_way_pass(answer):
    passes("q3", answer)


# one wrong answer, graded as an instructor would ---------------------------------------------
LESSONS_REFERENCES = '''
@dl.workflow("ex09-party-trip", version=1)
def party_trip(ctx, folder, trip_id, offers):
    booked = []
    with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        paid = ctx.idempotency_key("charge", trip_id)
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                  undo=(refund_card, folder, paid))
        for offer in offers:
            seat = ctx.idempotency_key("book", trip_id, offer)      # copied from the lesson
            booking = saga.step(dl.sim.OFFERS[offer]["kind"], book, folder, offer, seat, trip_id,
                                undo=(cancel_booking, folder, seat))
            booked.append(booking["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}
'''


def test_the_lessons_references_graded_as_a_notebook_fail_q2_only(tmp_path):
    score = grade_notebook(with_code("09_compensation", "def party_trip", LESSONS_REFERENCES, tmp_path))
    assert statuses(score) == {"q1": "passed", "q2": "failed", "q3": "passed"}, score.report()
    assert sorted(short(name) for name in failing_tests(score, "q2")) == [
        "booked", "last", "middle", "silent"]
