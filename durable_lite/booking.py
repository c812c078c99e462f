"""Lesson 09's booking agent: charge the card for the whole trip, book each offer, and when a
supplier refuses for good, undo what was done, newest first (saga.py).

    book_trip(ctx, folder, trip_id, offers)

    charge              the card, for the trip's total     undo: refund_card
    flight, car, hotel  one booking per offer, named by     undo: cancel_booking
                        its kind ("hotel#2" for a second)

Each reference (the charge's, each booking's) is an idempotency key the workflow derives
before its step runs, so an undo can name what it undoes even if the step that made it
never answered. The suppliers are the simulated world's travel desk (`dl.sim.travel_at`).
The workflow lives in a module, not a notebook cell, so that a fresh process can import
it: that is what resuming after a real SIGKILL needs.
"""

from .policy import Retry
from .saga import Saga
from .sim import OFFERS, Refused, travel_at
from .workflow import workflow

# An undo is the last chance to set things right: give it a few attempts, but none for a
# supplier's final answer.
UNDO_RETRY = Retry(max_attempts=3, initial=1.0, jitter=False, no_retry=(Refused,))


# the steps, and their undos ----------------------------------------------------------------
def charge_card(folder, trip_id, amount, reference):
    return travel_at(folder).charge(trip_id, amount, reference=reference)


def refund_card(folder, reference, idempotency_key):
    return travel_at(folder).refund(reference, idempotency_key=idempotency_key)


def book(folder, offer, reference, trip_id=None):
    return travel_at(folder).book(offer, reference=reference, trip=trip_id)


def cancel_booking(folder, reference, idempotency_key):
    return travel_at(folder).cancel(reference, idempotency_key=idempotency_key)


def trip_total(offers) -> int:
    """The price of a trip, from the desk's catalogue (plain data: the same on every replay)."""
    return sum(OFFERS[name]["price"] for name in offers)


# the workflow ------------------------------------------------------------------------------
@workflow("book-trip")
def book_trip(ctx, folder, trip_id, offers):
    with Saga(ctx, undo_retry=UNDO_RETRY) as saga:
        paid = ctx.idempotency_key("charge", trip_id)
        saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                  undo=(refund_card, folder, paid))
        booked = []
        for offer in offers:
            seat = ctx.idempotency_key("book", trip_id, offer)
            booking = saga.step(OFFERS[offer]["kind"], book, folder, offer, seat, trip_id,
                                undo=(cancel_booking, folder, seat))
            booked.append(booking["booking_id"])
    return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}
