"""Exercise 09: the undos of a booking agent, the saga that registers them, and the emails
around it.

The suppliers are the simulated world's travel desk (`dl.sim.travel_at`): charges, bookings,
cancellations and refunds each on a ledger of the world, and a statement that says whether
they balance. Every check judges by those ledgers, never by what the answer returns.

q1  the two undos, called directly on a desk that already holds other trips' charges and
    bookings (so only the reference can find the right one), then inside the check's own
    agent, crashed at every point of the way forward and back.
q2  the learner's agent on drawn trips for a party: one line per seat, car or room, with an
    offer on two or more lines (where the lesson's references collide), ending each way the
    question names — booked, card declined, refused at the first line, in the middle, at
    the last, and a line booked whose answer never comes (so the failed step must be undone
    too) — run once, then crashed at every point. It runs with the check's own correct
    undos in place of q1's (so q2 does not depend on q1).
q3  the emails around the agent, with the check's own agent in place of q2's: one per run,
    the confirmation once the trip is booked, the correction after the undos.

The crash sweeps go through `harness.sweep_of`, whose clean run may end "completed" or
"compensated" here (most trips are undone); the tests judge which is right for the trip.

What a right answer must have, and how the cases vary it:

q1 `refund_card(folder, reference, idempotency_key)`, `cancel_booking(...)`
- the reference: it undoes what was done under its reference and nothing else: the desk
  already holds other trips' charges and bookings, and our trip a second charge and a
  second booking of the same offer, each under a reference of its own.
- the whole of it: a refund pays back all of the charge (no fee kept).
- run again: a second call with the same key (a crash in its window) undoes nothing more;
  so does a second call by a new process (a fresh Python process with only the answer's
  code in it), so a memo kept in the notebook's memory fails.
- nothing to undo: with a reference nothing was done under, it changes nothing and does
  not raise (the saga also undoes the step that failed).
- in a saga: inside the check's own agent, crashed at every point, each undo once and the
  statement balanced.

q2 `party_trip(ctx, folder, trip_id, offers)`
- the charge: one, first, for the price of every line (a party's repeated lines included).
- the names: "charge", then each line by its offer's kind ("flight", "hotel#2"), as the
  lesson names them; the lines booked in the order of `offers`.
- the references: one per effect, stable on every replay (an offer on two lines in every
  trip but the declined one, so references made from the offer collide; every point
  crashed and resumed, so references from the clock or uuid4 book twice), and different
  in every run: the same trip asked for again after it was undone is charged and booked
  afresh.
- every ending: booked; declined (the charge's own undo runs, on nothing); refused at the
  first line, in the middle, at the last; a line booked whose answer never came (its own
  booking undone too). Booked ends "completed", the rest "compensated", the undos newest
  first and last, every statement balanced, nothing undone twice.
- the result: the bookings the desk recorded.

q3 `trip_with_mail(ctx, folder, trip_id, offers, to)`
- one email per run, to the customer: the confirmation with the desk's bookings once the
  trip is booked, or the correction saying what went wrong once every undo has run; the
  email is the run's last step; the run still ends "compensated" when undone.
- the email's key: stable on every replay (every point crashed), and new in every run: the
  same trip asked for again after it was undone, and undone again, gets its own correction
  (a key made from the trip, or from the trip and the kind of email, collides there).

Feedback is derived from what the run and the desk recorded (the charge's amount, the step
names, what each undo answered, which ledger grew after a crash), not from the first rule
that could explain a failure.
"""

import contextlib
import os
from dataclasses import dataclass
from typing import Optional

from ...booking import UNDO_RETRY
from ...saga import Saga, undo_name
from ...sim import CARD_LIMIT, OFFERS, travel_at
from ...workflow import workflow
from ..checks import Exercise, Fail, NotAttempted
from ..child import run_fresh, write_module
from ..harness import (EngineRuns, crash_label, needs_callable, needs_workflow, scratch,
                       sweep_of, unfinished)
from ..ledgers import Ledgers
from ..portable import NotPortable, module_source

EXERCISE = Exercise("09_compensation", "Undo what was done",
                    lesson="notebooks/09_when_a_step_fails_for_good.ipynb")

# What the cases are made of: offers that can be booked at least twice and cancelled, and
# offers nobody can book.
USABLE = [name for name, o in OFFERS.items() if o["cancellable"] and o["left"] >= 2]
SOLD_OUT = [name for name, o in OFFERS.items() if o["left"] == 0]
PRICEY = [name for name in USABLE if OFFERS[name]["price"] >= 300]   # for a declined card


# the cases ----------------------------------------------------------------------------------
DECLINED = -1               # Trip.refused when the card is declined (the charge, before any line)


@dataclass
class Trip:
    """A drawn trip: its lines (one offer each; an offer may repeat), and where it is refused."""
    trip_id: str
    offers: list
    refused: Optional[int] = None     # the line refused for good; DECLINED: the card; None: nothing
    why: str = ""                     # the refusal, in words
    silent: bool = False              # the refused line was booked, but its answer never came

    @property
    def total(self) -> int:
        return sum(OFFERS[name]["price"] for name in self.offers)

    @property
    def booked(self) -> int:
        """How many lines are booked before the refusal (all of them if nothing is refused)."""
        if self.refused is None:
            return len(self.offers)
        return 0 if self.refused == DECLINED else self.refused + self.silent

    @property
    def steps(self) -> int:
        """How many forward steps the run reaches: the charge, then each line up to the refusal."""
        if self.refused is None:
            return 1 + len(self.offers)
        return 1 if self.refused == DECLINED else 2 + self.refused

    @property
    def status(self) -> str:
        return "completed" if self.refused is None else "compensated"

    def __str__(self):
        text = f"trip {self.trip_id!r} ({', '.join(self.offers)}; {self.total} EUR)"
        return text + (f", where {self.why}" if self.why else "")


def _stock_ok(offers) -> bool:
    return all(offers.count(name) <= OFFERS[name]["left"] for name in set(offers))


def _usable_lines(draw, n, start=(), offers=USABLE):
    """`start` plus random lines of `offers`, n in all, within each offer's stock."""
    lines = list(start)
    while len(lines) < n:
        name = draw.choice(offers)
        if lines.count(name) < OFFERS[name]["left"]:
            lines.append(name)
    return lines


def _with_a_pair(draw, n):
    """n usable lines, one offer on two of them (a party: two seats on one flight, say)."""
    pair = draw.choice(USABLE)
    lines = _usable_lines(draw, n, [pair, pair])
    draw.shuffle(lines)
    return lines


def _refusal(draw, before):
    """The line refused after `before`: a sold-out offer, or one more of an offer whose
    stock `before` has used up. Returns (offer, why-in-words, given the line number)."""
    used_up = [name for name in USABLE if before.count(name) == OFFERS[name]["left"]]
    if used_up and draw.random() < 0.5:
        name = draw.choice(used_up)
        return name, lambda n: (f"line {n} asks for one more {name} than the desk has "
                                f"({OFFERS[name]['left']})")
    name = draw.choice(SOLD_OUT)
    return name, lambda n: f"line {n} ({name}) is sold out"


def _trip(draw, ending) -> Trip:
    """A trip that ends `ending`: "booked", "declined", "first", "middle", "last" or
    "silent" (a line in the middle or at the end is booked, but the supplier's answer never
    comes: see `_silent_supplier`)."""
    trip_id = f"trip-{draw.token(6)}"
    while True:
        if ending == "declined":                      # a party of five or six, flying far
            lines = [draw.choice(PRICEY)] * 2
            while sum(OFFERS[n]["price"] for n in lines) <= CARD_LIMIT:
                lines = _usable_lines(draw, len(lines) + 1, lines, PRICEY)
            draw.shuffle(lines)
            trip = Trip(trip_id, lines, DECLINED)
            trip.why = (f"the card is declined: {trip.total} EUR is over its limit of "
                        f"{CARD_LIMIT} EUR")
            return trip
        if ending == "booked":
            trip = Trip(trip_id, _with_a_pair(draw, draw.randint(2, 4)))
        elif ending == "silent":
            before = _with_a_pair(draw, draw.randint(2, 3))
            name = draw.choice([o for o in USABLE if o not in before])
            after = _usable_lines(draw, draw.randint(0, 1))
            n = len(before) + 1
            trip = Trip(trip_id, before + [name] + after, len(before),
                        f"line {n} ({name}) was booked, but the supplier's answer never came",
                        silent=True)
        elif ending == "first":
            name = draw.choice(SOLD_OUT)
            trip = Trip(trip_id, [name] + _usable_lines(draw, draw.randint(1, 3)), 0,
                        f"line 1 ({name}) is sold out")
        else:
            # the lines before the refusal hold an offer twice: that is where references
            # made from the offer alone collide
            before = _with_a_pair(draw, 2 if ending == "middle" else draw.randint(2, 3))
            name, why = _refusal(draw, before)
            after = _usable_lines(draw, 1) if ending == "middle" else []
            trip = Trip(trip_id, before + [name] + after, len(before), why(len(before) + 1))
        if trip.total <= CARD_LIMIT and _stock_ok(trip.offers[:trip.booked]):
            return trip


ENDINGS = {
    "booked": "nothing is refused: the trip is booked",
    "declined": "the card is declined: only the charge's own undo runs, and finds nothing",
    "first": "the first line is refused: the card is refunded",
    "middle": "a line in the middle is refused: the lines before it are cancelled, newest "
              "first, then the card is refunded",
    "last": "the last line is refused: every line before it is cancelled, then the card refunded",
    "silent": "a line is booked but its answer never comes, so its step fails: that booking "
              "is cancelled too",
}


@contextlib.contextmanager
def _silent_supplier(trip):
    """While a test runs, the supplier of the trip's refused line books it and then never
    answers: the step fails (one attempt, as the question's steps have), though the seat is
    booked. The lesson's reason for undoing the failed step too, played for real. The desk
    is patched, not the notebook's `book`, so any way of calling it meets the same supplier."""
    if not trip.silent:
        yield
        return
    from unittest import mock

    from ... import sim
    real, silent, ours = sim.TravelDesk.book, trip.offers[trip.refused], trip.trip_id

    def book(desk, name, reference, trip=None):
        booking = real(desk, name, reference, trip)
        if name == silent and trip == ours:
            raise TimeoutError(f"no answer from the supplier of {name} within 30 s")
        return booking

    with mock.patch.object(sim.TravelDesk, "book", book):
        yield


# the check's own steps, undos and agent -----------------------------------------------------
def _charge(folder, trip_id, amount, reference):
    return travel_at(folder).charge(trip_id, amount, reference=reference)


def _book(folder, offer, reference, trip_id):
    return travel_at(folder).book(offer, reference=reference, trip=trip_id)


def _refund(folder, reference, idempotency_key):
    return travel_at(folder).refund(reference, idempotency_key=idempotency_key)


def _cancel(folder, reference, idempotency_key):
    return travel_at(folder).cancel(reference, idempotency_key=idempotency_key)


def _agent(name, refund_card, cancel_booking):
    """The agent the question describes, with the undos given: a correct q2."""
    def party_trip(ctx, folder, trip_id, offers):
        booked = []
        with Saga(ctx, undo_retry=UNDO_RETRY) as saga:
            paid = ctx.idempotency_key("charge", trip_id)
            saga.step("charge", _charge, folder, trip_id, sum(OFFERS[o]["price"] for o in offers),
                      paid, undo=(refund_card, folder, paid))
            for line, offer in enumerate(offers):
                seat = ctx.idempotency_key("book", trip_id, line)
                booking = saga.step(OFFERS[offer]["kind"], _book, folder, offer, seat, trip_id,
                                    undo=(cancel_booking, folder, seat))
                booked.append(booking["booking_id"])
        return {"trip": trip_id, "charged": sum(OFFERS[o]["price"] for o in offers),
                "bookings": booked}
    return workflow(name, version=1)(party_trip)


REFERENCE = _agent("ex09-check-party-trip", _refund, _cancel)


@contextlib.contextmanager
def _given(answer, **values):
    """For one test, the check's own functions under these names in the globals the
    learner's answer reads (a notebook's namespace), put back after: q2 runs with correct
    undos, q3 with a correct agent, so each question is judged on its own."""
    fn = getattr(answer, "fn", answer)
    namespace = getattr(fn, "__globals__", None)
    if not isinstance(namespace, dict):
        yield
        return
    missing = object()
    saved = {name: namespace.get(name, missing) for name in values}
    namespace.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is missing:
                namespace.pop(name, None)
            else:
                namespace[name] = old


# running a trip: once, and crashed everywhere ---------------------------------------------
@dataclass
class Outcome:
    """One run without a crash, and what the world holds after it."""
    run: object
    history: list
    statement: dict
    counts: dict
    records: dict              # ledger -> records (charges, bookings, cancellations)
    mail: list


def _run_once(wf, trip, draw, *extra) -> Outcome:
    with scratch("ex09") as folder:
        return _run_in(folder, EngineRuns(folder), wf, trip, draw, *extra)


def _run_in(folder, runs, wf, trip, draw, *extra) -> Outcome:
    """One run of `trip` (a new run id) in the world and store of `folder`. The ledgers it
    returns hold what the world recorded so far, this run's and any before it."""
    world = os.path.join(folder, "world")
    run_id = draw.run_id("trip")
    run = runs.run(wf, world, trip.trip_id, trip.offers, *extra, run_id=run_id)
    ledgers = Ledgers(world)
    return Outcome(run, runs.engine().history(run_id), ledgers.travel_statement(trip.trip_id),
                   ledgers.counts(),
                   {name: ledgers.records(name) for name in ("charges", "bookings", "cancellations")},
                   ledgers.mail())


def _sweep(wf, trip, draw, what, *extra):
    """`harness.sweep_of` one trip, each case a fresh run id, with the trip's statement
    counted as effects ("balance", "cancelled twice") and kept per row. A clean run may end
    "completed" or "compensated" (most trips here are undone); which one is right for the
    trip, the tests judge."""
    def effects(folder):
        ledgers = Ledgers(folder)
        statement = ledgers.travel_statement(trip.trip_id)
        return {**ledgers.counts(), "balance": statement["balance"],
                "cancelled twice": statement["cancelled_twice"]}

    ids = draw.child("run ids")
    return sweep_of(wf, trip.trip_id, trip.offers, *extra, what=what,
                    ends=("completed", "compensated"), effects=effects,
                    observe=lambda folder: Ledgers(folder).travel_statement(trip.trip_id),
                    run_id=lambda case: ids.run_id("trip"))


def _money(statement) -> str:
    held = ", ".join(statement["held"]) or "nothing"
    return (f"charged {statement['charged']} EUR, refunded {statement['refunded']} EUR, "
            f"still held: {held}")


def _expect_status(run, trip, what, hint_completed="", hint_failed=""):
    status, error = run.status, run.error or ""
    if status == trip.status:
        return
    if "NotImplementedError" in error:
        raise NotAttempted(f"{what} (or a function it calls) still raises NotImplementedError")
    if "CompensationFailed" in error:
        raise Fail(f"{trip}: some undo failed for good, so the run ended failed: "
                   f"{error.split(': ', 1)[-1]}",
                   "an undo runs for the step that failed too, where there may be nothing to "
                   "undo: then it must do nothing, not raise")
    if trip.status == "compensated" and status == "completed":
        raise Fail(f"{trip}: the run ended completed (result {run.result!r}); a trip that was "
                   "undone must end compensated", hint_completed)
    if trip.status == "compensated" and status == "failed":
        raise Fail(f"{trip}: the run ended failed ({error}); a trip that was undone must end "
                   "compensated", hint_failed)
    unfinished(status, error, f"{what}, for {trip},")


def _forward_and_undos(history):
    """The steps before the first undo, the undos, and whatever came after the undos."""
    rows = [r for r in history if r["kind"] in ("step", "error")]
    first = next((i for i, r in enumerate(rows) if r["step"].startswith("undo:")), len(rows))
    forward, rest = rows[:first], rows[first:]
    undos = [r for r in rest if r["step"].startswith("undo:")]
    after = [r for r in rest if not r["step"].startswith("undo:")]
    return forward, undos, after


def _expect_steps(history, trip, what):
    """One forward step per line reached (after the charge), and, if the trip was refused,
    one undo per forward step, newest first, each completed."""
    forward, undos, after = _forward_and_undos(history)
    labels = [r["step"] for r in forward]
    want = trip.steps
    if trip.refused is None:
        if undos:
            raise Fail(f"{what}: nothing was refused for {trip}, yet the run recorded the undos "
                       f"{[r['step'] for r in undos]}")
        if len(forward) != want:
            raise Fail(f"{what}: the run recorded the steps {labels} for {trip}; expected "
                       f"{want}: the charge, then one per line",
                       "one saga.step per line: a line's booking is a step of its own")
        return []
    if len(forward) != want or forward[-1]["status"] != "failed":
        raise Fail(f"{what}: for {trip}, the run recorded the steps {labels} before undoing "
                   f"anything; expected {want}: the charge, then one per line up to the one "
                   "refused (which failed)",
                   "charge first, then one saga.step per line, in the order of `offers`")
    expected = [undo_name(label) for label in reversed(labels)]
    got = [r["step"] for r in undos]
    if got != expected:
        missing = [u for u in expected if u not in got]
        raise Fail(f"{what}: for {trip}, the run recorded the steps {labels}, then the undos "
                   f"{got}; expected one undo per step, newest first: {expected}"
                   + (f" (missing: {missing})" if missing else ""),
                   "every saga.step that changes the world needs undo=(undo_fn, ...): the "
                   "charge too. The saga runs them as steps, newest first, when a step fails "
                   "for good; undo functions called by your own code in an `except` are not "
                   "steps at all")
    broken = [r["step"] for r in undos if r["status"] != "completed"]
    if broken:
        raise Fail(f"{what}: for {trip}, the undos {broken} failed")
    return after


def _labels(names) -> list:
    """The engine's labels for steps called by these names, in order: "hotel", "hotel#2"."""
    seen, out = {}, []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _expect_names(out, trip, what):
    """The forward steps named as the lesson names them."""
    forward = [r["step"] for r in _forward_and_undos(out.history)[0]]
    want = _labels(["charge"] + [OFFERS[o]["kind"] for o in trip.offers])[:trip.steps]
    shared = min(len(forward), len(want))
    if "charge" in forward and forward[0] != "charge":
        raise Fail(f"{what}: for {trip}, the run recorded the steps {forward}: it booked "
                   f"{forward.index('charge')} line(s) before it charged the card",
                   "charge first, then book: the card pays for the whole trip before any line is "
                   "booked, so a declined card books nothing")
    if forward[:shared] != want[:shared]:
        raise Fail(f"{what}: for {trip}, the run recorded the steps {forward}; named as the "
                   f"lesson names them, they are {want}",
                   "the question names the steps: the charge \"charge\", each line by its "
                   "offer's kind. A step's name is how its history, its undo and a crash "
                   "point find it")


def _expect_order(out, trip, what):
    """The lines booked in the order of `offers`."""
    booked = [b["detail"]["offer"] for b in out.records["bookings"]]
    if booked != trip.offers[:len(booked)]:
        raise Fail(f"{what}: for {trip}, the desk booked {booked}, in that order; the lines "
                   f"are {trip.offers}", "book the lines one by one, in the order of `offers`")


def _expect_charge(out, trip, what):
    """One charge at most, for the price of every line."""
    amounts = [c["detail"]["amount"] for c in out.records["charges"]]
    wrong = [a for a in amounts if a != trip.total]
    if not wrong:
        return
    unique = sum(OFFERS[o]["price"] for o in set(trip.offers))
    prices = {OFFERS[o]["price"] for o in trip.offers}
    if wrong[0] == unique:
        hint = ("the charge counts each offer once, but a party takes one per line: two seats "
                "on one flight cost two fares")
    elif wrong[0] in prices:
        hint = "the charge is the price of one line; the card pays for the whole trip at once"
    else:
        hint = "the card is charged once, before any line, for the price of every line"
    raise Fail(f"{what}: for {trip}, the desk charged {wrong[0]} EUR; the trip's "
               f"{len(trip.offers)} lines cost {trip.total} EUR", hint)


def _undo_answers(history) -> list:
    """(undo label, what the desk answered it) for every undo that ran."""
    return [(r["step"], r["result"]) for r in _forward_and_undos(history)[1]
            if isinstance(r["result"], dict)]


def _balance_hint(out, trip) -> str:
    """Why the statement does not balance, from what each undo was answered. (The undo of a
    step refused before it did anything rightly finds nothing: it is left out.)"""
    forward = _forward_and_undos(out.history)[0]
    refused = {undo_name(r["step"]) for r in forward if r["status"] == "failed" and not trip.silent}
    found_nothing = [label for label, answer in _undo_answers(out.history) if label not in refused
                     and (answer.get("cancelled") is False or answer.get("refunded") is False)]
    statement = out.statement
    repeats = [label for label, answer in _undo_answers(out.history) if answer.get("repeat")]
    if repeats and (statement["held"] or statement["refunded"] < statement["charged"]):
        return (f"the desk answered the undos {repeats} with an earlier request's answer "
                "(repeat: True), so what they should undo is still there: two different undos "
                "were given the same key")
    if found_nothing and (statement["held"] or statement["refunded"] < statement["charged"]):
        return (f"the undos {found_nothing} were answered that nothing was done under the "
                "reference they were given, while the trip still holds what its steps did: an "
                "undo must be given the reference its own step was made under")
    if statement["refunded"] > statement["charged"]:
        return "more was refunded than charged: each charge is refunded once, by its reference"
    return REFERENCES


def _expect_same_references(out, trip, what):
    """Two lines booked under one reference: the desk answers the second with the first."""
    lines = [r for r in _forward_and_undos(out.history)[0][1:]
             if isinstance(r["result"], dict) and "booking_id" in r["result"]]
    seen = {}
    for n, row in enumerate(lines, start=1):
        booking = row["result"]["booking_id"]
        if booking in seen or row["result"].get("repeat"):
            first = f"line {seen[booking]}" if booking in seen else "an earlier line"
            raise Fail(f"{what}: for {trip}, the desk answered line {n} ({trip.offers[n - 1]}) with "
                       f"the booking it made for {first} ({booking}, repeat: True): both were "
                       "booked under the same reference, so the party is one booking short",
                       "the desk books once per reference: each line needs a reference of its "
                       "own, stable on every replay. What tells two lines of the same offer apart?")
        seen[booking] = n


REFERENCES = ("every effect needs an undo that names it by the reference it was made under: "
              "the charge's for the refund, each line's own for its cancellation")


def _expect_ledgers(out, trip, what, hint=""):
    """Charges, bookings, cancellations and refunds as the trip's ending requires, and a
    statement that balances. `hint`: where to look when they do not (by default, what the
    undos were answered says)."""
    counts, statement = out.counts, out.statement
    charges, bookings = counts.get("charges", 0), counts.get("bookings", 0)
    cancellations, refunds = counts.get("cancellations", 0), counts.get("refunds", 0)
    want_charges = 0 if trip.refused == DECLINED else 1
    if charges != want_charges:
        raise Fail(f"{what}: for {trip}, the desk recorded {charges} charge(s); expected "
                   f"{want_charges}", "charge the card once, for the whole trip, before any line")
    if bookings != trip.booked:
        raise Fail(f"{what}: for {trip}, the desk recorded {bookings} booking(s); expected "
                   f"{trip.booked}", "one booking per line the run reached, and none after a "
                                     "refusal")
    if statement["cancelled_twice"]:
        raise Fail(f"{what}: for {trip}, {statement['cancelled_twice']} booking(s) were "
                   f"cancelled twice ({cancellations} cancellations for {bookings} bookings)",
                   hint or UNDONE_AGAIN)
    if statement["balance"] != 0:
        raise Fail(f"{what}: for {trip}, the trip's statement does not balance: {_money(statement)}"
                   f" (balance {statement['balance']} EUR)", hint or _balance_hint(out, trip))
    if trip.status == "compensated" and (cancellations, refunds) != (bookings, charges):
        raise Fail(f"{what}: for {trip}, {cancellations} cancellation(s) for {bookings} "
                   f"booking(s) and {refunds} refund(s) for {charges} charge(s)",
                   hint or "an undone trip has each of its bookings cancelled once and its "
                           "charge refunded once")
    if trip.status == "completed" and (cancellations or refunds):
        raise Fail(f"{what}: for {trip}, nothing was refused, yet the desk recorded "
                   f"{cancellations} cancellation(s) and {refunds} refund(s)",
                   hint or "a trip that was booked keeps what it booked: undos run only when a "
                           "step fails for good")


FORWARD_AGAIN = ("after the resume the run did it again: a reference must be the same on "
                 "every replay of the run (never the clock or uuid4), so the desk knows a repeat")
UNDONE_AGAIN = ("an undo that runs again after a crash is given the same key: only a key the "
                "desk has seen makes it a repeat")


def _crash_hint(row, ledgers_hint) -> str:
    """Where to look, from the ledgers that changed after the crash."""
    changed = set(row["duplicates"]) | set(row["lost"])
    if changed & {"charges", "bookings"}:
        return FORWARD_AGAIN
    if changed & {"refunds", "cancellations", "cancelled twice"}:
        return UNDONE_AGAIN
    return ledgers_hint


def _expect_crashes(s, trip, what, ledgers_hint=""):
    """Every crash point, then a resume: the same ending, a statement that balances, and
    every ledger as in the run that never crashed."""
    for row in s.rows:
        where = f"{trip}: crash {crash_label(row)}, then resume"
        if row["status"] != s.clean["status"]:
            detail = f" ({row['error']})" if row["error"] else ""
            raise Fail(f"{where}: the run ended {row['status']}{detail}; without a crash it "
                       f"ended {s.clean['status']}", _crash_hint(row, ledgers_hint))
        statement = row["observed"]
        changes = {**row["duplicates"], **{k: -n for k, n in row["lost"].items()}}
        if statement["balance"] != 0:
            grew = f"; {changes} compared with a run that never crashed" if changes else ""
            raise Fail(f"{where}: the statement does not balance: {_money(statement)} "
                       f"(balance {statement['balance']} EUR){grew}", _crash_hint(row, ledgers_hint))
        if changes:
            raise Fail(f"{where}: {changes} compared with a run that never crashed",
                       _crash_hint(row, ledgers_hint))


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "the undos", answers=["refund_card", "cancel_booking"])

KEY_HINT = ("the saga gives an undo the same key every time that undo runs again, and the "
            "desk takes a request with a key it has seen for a repeat. A key made inside the "
            "function (the clock, uuid4) is new on every call, and so is no key at all")
NEW_PROCESS = ("a new process starts with nothing in memory: what it finds of the first call is "
               "only what the desk recorded. Let the desk recognise the repeat")


class Desk:
    """A world whose desk already holds other trips' charges and bookings, and one of ours."""

    def __init__(self, folder, draw):
        self.world = os.path.join(folder, "world")
        self.desk = travel_at(self.world)
        self.draw = draw
        self.trip_id = f"trip-{draw.token(6)}"
        self.offer = draw.choice(USABLE)                      # what our trip books (twice)
        others = [name for name in USABLE if name != self.offer and OFFERS[name]["left"] >= 3]
        for _ in range(draw.randint(1, 3)):                   # other trips, charged and booked
            other = f"trip-{draw.token(6)}"
            self.desk.charge(other, draw.amount(100, CARD_LIMIT), reference=draw.token(12))
            self.desk.book(draw.choice(others), reference=draw.token(12), trip=other)

    def refunds(self) -> list:
        return [{k: r[k] for k in ("refund_id", "order_id", "amount")}
                for r in Ledgers(self.world).refunds() if r["provider"] == "payments"]

    def cancellations(self) -> list:
        return Ledgers(self.world).records("cancellations")


def _call(fn, name, *args):
    """The learner's undo, called as the saga calls it."""
    needs_callable(fn, name)
    return fn(*args[:-1], idempotency_key=args[-1])


def _charged(desk):
    amount, reference = desk.draw.amount(100, CARD_LIMIT), desk.draw.token(12)
    desk.desk.charge(desk.trip_id, amount, reference=reference)
    desk.desk.charge(desk.trip_id, desk.draw.amount(100, CARD_LIMIT), reference=desk.draw.token(12))
    return amount, reference


@q1.test("refund_card pays back the whole charge made under its reference, and no other",
         hint="the desk finds a charge by the reference it was made under (the table above)")
def _(refund_card, cancel_booking, draw):
    with scratch("ex09") as folder:
        desk = Desk(folder, draw)
        amount, reference = _charged(desk)
        before = desk.refunds()
        _call(refund_card, "refund_card", desk.world, reference, draw.token(12))
        new = desk.refunds()[len(before):]
    call = f"refund_card(folder, {reference!r}, key)"
    if not new:
        raise Fail(f"{call} refunded nothing; the desk holds a charge of {amount} EUR for "
                   f"{desk.trip_id!r} under that reference",
                   "the payments the desk knows are in its ledgers: ask the desk to refund, "
                   "giving it the reference")
    if len(new) > 1:
        raise Fail(f"{call} made {len(new)} refunds: {new}; expected one",
                   "one refund undoes one charge")
    if new[0]["order_id"] != desk.trip_id:
        raise Fail(f"{call} refunded {new[0]['amount']:g} EUR for {new[0]['order_id']!r}; the "
                   f"charge made under that reference is {amount} EUR for {desk.trip_id!r}",
                   "find the charge by its reference, not by position or by trip")
    if new[0]["amount"] != amount:
        raise Fail(f"{call} refunded {new[0]['amount']:g} EUR; the charge made under that "
                   f"reference is {amount} EUR (the trip has another charge, under another "
                   "reference)",
                   "an undo puts the world back as it was: all of that charge, found by its "
                   "reference, no fee kept. The desk's refund pays back exactly what was "
                   "charged under the reference it is given")


@q1.test("refund_card run again with the same key (a crash in its window) pays nothing more",
         hint=KEY_HINT)
def _(refund_card, cancel_booking, draw):
    with scratch("ex09") as folder:
        desk = Desk(folder, draw)
        amount, reference = _charged(desk)
        key, before = draw.token(12), len(desk.refunds())
        for _ in range(2):
            _call(refund_card, "refund_card", desk.world, reference, key)
        paid = len(desk.refunds()) - before
    if paid != 1:
        raise Fail(f"refund_card(folder, {reference!r}, {key!r}), called twice with the same "
                   f"key, made {paid} refund(s) of the {amount} EUR charge; expected 1: a crash "
                   "between an undo's effect and its checkpoint runs it again")


def _does_nothing(fn, name, world, reference, key, count):
    before = count()
    try:
        _call(fn, name, world, reference, key)
    except NotImplementedError:
        raise
    except Exception as exc:
        raise Fail(f"{name}(folder, {reference!r}, key), with nothing done under that reference, "
                   f"raised {type(exc).__name__}: {exc}",
                   "the saga also undoes the step that failed, and a step that failed may have "
                   "done nothing: then the undo has nothing to do and must return quietly") from None
    if count() != before:
        raise Fail(f"{name}(folder, {reference!r}, key), with nothing done under that reference, "
                   f"still changed the desk's ledgers",
                   "it undid something else: an undo finds what to undo by its reference alone")


@q1.test("refund_card with a reference nothing was charged under does nothing, and does not raise",
         hint="the desk answers a refund with nothing under its reference politely, without "
              "raising: that answer is fine to return")
def _(refund_card, cancel_booking, draw):
    with scratch("ex09") as folder:
        desk = Desk(folder, draw)
        _charged(desk)
        _does_nothing(refund_card, "refund_card", desk.world, draw.token(12), draw.token(12),
                      lambda: len(desk.refunds()))


def _booked(desk):
    """Our booking, and another of the same offer for the same trip under its own reference."""
    offer, reference = desk.offer, desk.draw.token(12)
    booking = desk.desk.book(offer, reference=reference, trip=desk.trip_id)
    desk.desk.book(offer, reference=desk.draw.token(12), trip=desk.trip_id)
    return offer, reference, booking["booking_id"]


@q1.test("cancel_booking cancels the booking made under its reference, and no other",
         hint="the desk finds a booking by the reference it was made under (the table above)")
def _(refund_card, cancel_booking, draw):
    with scratch("ex09") as folder:
        desk = Desk(folder, draw)
        offer, reference, booking = _booked(desk)
        before = len(desk.cancellations())
        _call(cancel_booking, "cancel_booking", desk.world, reference, draw.token(12))
        new = desk.cancellations()[before:]
    call = f"cancel_booking(folder, {reference!r}, key)"
    cancelled = [c["detail"]["booking_id"] for c in new]
    if cancelled != [booking]:
        raise Fail(f"{call} cancelled {cancelled or 'nothing'}; the booking made under that "
                   f"reference is {booking} ({offer}), and the trip holds another {offer}",
                   "find the booking by its reference, not by its offer, trip or position")


@q1.test("cancel_booking run again with the same key (a crash in its window) cancels nothing more",
         hint=KEY_HINT)
def _(refund_card, cancel_booking, draw):
    with scratch("ex09") as folder:
        desk = Desk(folder, draw)
        offer, reference, booking = _booked(desk)
        key, before = draw.token(12), len(desk.cancellations())
        for _ in range(2):
            _call(cancel_booking, "cancel_booking", desk.world, reference, key)
        made = len(desk.cancellations()) - before
    if made != 1:
        raise Fail(f"cancel_booking(folder, {reference!r}, {key!r}), called twice with the same "
                   f"key, made {made} cancellation(s) of {booking}; expected 1 (an airline "
                   "charges its fee for each)")


UNDOS_ENTRY = """

def _grader_undo_again(folder, charge, refund_key, booking, cancel_key):
    refund_card(folder, charge, idempotency_key=refund_key)
    cancel_booking(folder, booking, idempotency_key=cancel_key)
"""


@q1.test("each undo run again by a new process (its first process died after the undo) with "
         "the same key undoes nothing more",
         hint=NEW_PROCESS)
def _(refund_card, cancel_booking, draw):
    needs_callable(refund_card, "refund_card")
    needs_callable(cancel_booking, "cancel_booking")
    try:                                  # the answer's code as it is now, before any call
        source = module_source(refund_card, cancel_booking, extra=UNDOS_ENTRY,
                               call_as={"refund_card": refund_card,
                                        "cancel_booking": cancel_booking})
    except NotPortable as exc:
        raise Fail(str(exc)) from None
    with scratch("ex09") as folder:
        desk = Desk(folder, draw)
        amount, charge = _charged(desk)
        offer, booking, booking_id = _booked(desk)
        refund_key, cancel_key = draw.token(12), draw.token(12)
        refunds, cancellations = len(desk.refunds()), len(desk.cancellations())
        _call(refund_card, "refund_card", desk.world, charge, refund_key)
        _call(cancel_booking, "cancel_booking", desk.world, booking, cancel_key)
        write_module(folder, source)
        again = run_fresh(folder, "_grader_undo_again", desk.world, charge, refund_key, booking,
                          cancel_key)
        if not again.finished:
            raise Fail("the undos, called again by a new process, failed: "
                       f"{again.error or f'exit status {again.returncode}'}",
                       "the check copies the two functions, and the functions, imports and "
                       "constants they use, into a new process: keep what they need in them")
        paid = len(desk.refunds()) - refunds
        made = len(desk.cancellations()) - cancellations
    if paid != 1:
        raise Fail(f"refund_card(folder, {charge!r}, {refund_key!r}), called here and then by a new "
                   f"process with the same key, made {paid} refunds of the {amount} EUR charge; "
                   "expected 1", NEW_PROCESS)
    if made != 1:
        raise Fail(f"cancel_booking(folder, {booking!r}, {cancel_key!r}), called here and then by a "
                   f"new process with the same key, made {made} cancellations of {booking_id} "
                   f"({offer}); expected 1", NEW_PROCESS)


@q1.test("cancel_booking with a reference nothing was booked under does nothing, and does not raise",
         hint="the desk answers a cancellation with nothing under its reference politely, "
              "without raising: that answer is fine to return")
def _(refund_card, cancel_booking, draw):
    with scratch("ex09") as folder:
        desk = Desk(folder, draw)
        _booked(desk)
        _does_nothing(cancel_booking, "cancel_booking", desk.world, draw.token(12), draw.token(12),
                      lambda: len(desk.cancellations()))


@q1.test("in the check's own agent, a line refused in the middle, a crash at every point: "
         "each undo once, and the statement balances",
         hint="every undo is a step of its own and may run again after a crash: it must hand "
              "its key on, and do nothing where there is nothing to undo")
def _(refund_card, cancel_booking, draw):
    needs_callable(refund_card, "refund_card")
    needs_callable(cancel_booking, "cancel_booking")
    agent = _agent("ex09-check-your-undos", refund_card, cancel_booking)
    trip = _trip(draw, "middle")
    what = "the check's agent with your undos"
    out = _run_once(agent, trip, draw)
    _expect_status(out.run, trip, what)
    _expect_ledgers(out, trip, what)
    _expect_crashes(_sweep(agent, trip, draw, what), trip, what,
                    "the check's agent gives each undo the reference its own step was made "
                    "under: an undo must undo what was done under it, and only that")


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "a saga for a party's trip", answers=["party_trip"])

CAUGHT = ("let StepFailed leave the `with dl.Saga(ctx)` block: the saga then runs the undos "
          "and ends the run compensated. Catching it to carry on books a trip with a hole in it")
BY_HAND = ("register each undo with saga.step(..., undo=(undo_fn, ...)): the saga runs them "
           "as durable steps and ends the run compensated. Undos called by your own code in an "
           "`except` are not steps, and the run ends failed")


def _judge_party(out, trip, what):
    """One run of the agent, judged in the order of the causes: what the desk was asked
    (references, the charge, the names) before what became of it (status, undos, ledgers),
    so the feedback names the first thing that went wrong, not its consequences."""
    _expect_same_references(out, trip, what)
    _expect_charge(out, trip, what)
    _expect_names(out, trip, what)
    _expect_status(out.run, trip, what, CAUGHT, BY_HAND)
    _expect_order(out, trip, what)
    after = _expect_steps(out.history, trip, what)
    if after:
        raise Fail(f"{what}: for {trip}, the run recorded {[r['step'] for r in after]} after "
                   "its undos; the undos should be its last steps",
                   "once the saga has undone the trip, the run is over: let dl.Compensated end it")
    _expect_ledgers(out, trip, what)
    if trip.refused is None:
        held = [b["record_id"] for b in out.records["bookings"]]
        got = (out.run.result or {}).get("bookings") if isinstance(out.run.result, dict) else None
        if got != held:
            raise Fail(f"{what}: for {trip}, the result's bookings are {got!r}; the desk "
                       f"recorded {held}", "`booked` lists each line's booking as the desk "
                                           "answered it, in order")


def _party(party_trip, draw, ending):
    needs_workflow(party_trip, "party_trip")
    trip = _trip(draw, ending)
    what = "party_trip"
    with _given(party_trip, refund_card=_refund, cancel_booking=_cancel), _silent_supplier(trip):
        _judge_party(_run_once(party_trip, trip, draw), trip, what)
        _expect_crashes(_sweep(party_trip, trip, draw, what), trip, what, REFERENCES)


@q2.test(f"{ENDINGS['booked']}, once, and through a crash at every point",
         hint="charge once, then one saga.step per line, each under a reference of its own")
def _(party_trip, draw):
    _party(party_trip, draw, "booked")


@q2.test(f"{ENDINGS['declined']}, once, and through a crash at every point",
         hint="the charge's undo is registered before the charge runs, so it runs even when "
              "the charge itself is refused")
def _(party_trip, draw):
    _party(party_trip, draw, "declined")


@q2.test(f"{ENDINGS['first']}, once, and through a crash at every point",
         hint="the charge needs an undo: the refund of the charge's own reference")
def _(party_trip, draw):
    _party(party_trip, draw, "first")


@q2.test(f"{ENDINGS['middle']}, once, and through a crash at every point",
         hint="each line's undo cancels that line's own reference, chosen before its step")
def _(party_trip, draw):
    _party(party_trip, draw, "middle")


@q2.test(f"{ENDINGS['last']}, once, and through a crash at every point",
         hint="each line's undo cancels that line's own reference, chosen before its step")
def _(party_trip, draw):
    _party(party_trip, draw, "last")


@q2.test(f"{ENDINGS['silent']}, once, and through a crash at every point",
         hint="a step's undo is registered before the step runs, with the reference the step "
              "is about to use: that is how it can cancel a booking whose answer never came")
def _(party_trip, draw):
    _party(party_trip, draw, "silent")


def _again(trip, draw) -> Trip:
    """The same trip asked for again (a new run): two or three other lines, no offer twice
    (the test is about runs, not lines), nothing refused."""
    while True:
        again = Trip(trip.trip_id, draw.sample(USABLE, draw.randint(2, 3)))
        if again.total <= CARD_LIMIT:
            return again


ACROSS_RUNS = ("a reference must differ for every effect in every run (and stay the same on "
               "every replay of one run): what tells this run's effects from the last run's?")


@q2.test("the same trip asked for again after it was undone (a new run): charged and booked "
         "afresh",
         hint="a reference is the desk's whole memory of an effect: one made again in another "
              "run must be another reference")
def _(party_trip, draw):
    """Judged by the second run's own effects: whatever became of the first run (the tests
    above judge that), the second must charge and book anew."""
    needs_workflow(party_trip, "party_trip")
    first, what = _trip(draw, "first"), "party_trip"
    second = _again(first, draw)
    story = (f"{first.trip_id!r} was undone ({first.why}), then asked for again by a new run "
             f"({', '.join(second.offers)}; {second.total} EUR)")
    with _given(party_trip, refund_card=_refund, cancel_booking=_cancel), scratch("ex09") as folder:
        runs = EngineRuns(folder)
        before = _run_in(folder, runs, party_trip, first, draw)
        if "NotImplementedError" in (before.run.error or ""):
            raise NotAttempted("party_trip (or a function it calls) still raises NotImplementedError")
        out = _run_in(folder, runs, party_trip, second, draw)
    forward = _forward_and_undos(out.history)[0]
    repeats = [r["step"] for r in forward if isinstance(r["result"], dict) and r["result"].get("repeat")]
    if repeats:
        raise Fail(f"{what}: {story}. The desk answered the new run's steps {repeats} with what "
                   "it had done for the first run (repeat: True), so the new trip was not "
                   "charged or booked", ACROSS_RUNS)
    if out.run.status != "completed":
        unfinished(out.run.status, out.run.error, f"{what}: {story}; the new run")
    charges = out.records["charges"][len(before.records["charges"]):]
    bookings = out.records["bookings"][len(before.records["bookings"]):]
    if [c["detail"]["amount"] for c in charges] != [second.total] or \
            [b["detail"]["offer"] for b in bookings] != second.offers:
        raise Fail(f"{what}: {story}. The desk recorded for the new run the charges "
                   f"{[c['detail']['amount'] for c in charges]} and the bookings "
                   f"{[b['detail']['offer'] for b in bookings]}", ACROSS_RUNS)


# q3 -----------------------------------------------------------------------------------------
q3 = EXERCISE.question("q3", "tell the customer, once", answers=["trip_with_mail"])


def confirmation(trip_id) -> str:
    """How the notebook's `confirm` starts its subject (the given code; the check's copy)."""
    return f"Trip {trip_id} is booked"


def correction(trip_id) -> str:
    return f"Sorry: trip {trip_id} could not be booked"


def _told(trip_with_mail, draw, ending):
    needs_workflow(trip_with_mail, "trip_with_mail")
    trip = _trip(draw, ending)
    to = draw.email()
    what = "trip_with_mail"
    with _given(trip_with_mail, party_trip=REFERENCE, refund_card=_refund, cancel_booking=_cancel):
        out = _run_once(trip_with_mail, trip, draw, to)
        _expect_status(out.run, trip, what,
                       "the trip was not booked, and the run must say so: after the "
                       "correction, the Compensated the saga raised goes on up",
                       "catch dl.Compensated, which the saga raises once every undo has run")
        _expect_mail(out, trip, to, what)
        _expect_ledgers(out, trip, what)
        s = _sweep(trip_with_mail, trip, draw, what, to)
        _expect_crashes(s, trip, what, "the email is a step with a key of its own, made by "
                                       "ctx.idempotency_key: the same on every replay")


def _expect_mail(out, trip, to, what):
    subjects = [m["subject"] for m in out.mail]
    strangers = [m["to"] for m in out.mail if m["to"] != to]
    if strangers:
        raise Fail(f"{what}: for {trip}, mail went to {strangers}; the customer is {to!r}",
                   "the customer's address is the workflow's `to`")
    booked = trip.refused is None
    want = confirmation(trip.trip_id) if booked else correction(trip.trip_id)
    if len(subjects) != 1:
        raise Fail(f"{what}: for {trip}, the customer got {len(subjects)} emails: {subjects}; "
                   f"expected one, {'the confirmation' if booked else 'the correction'}",
                   "an email cannot be unsent: send the confirmation only once the trip is "
                   "booked (after the saga), and the correction only if it was undone"
                   if subjects else "send it with ctx.step(...), calling confirm or apologise")
    if not subjects[0].startswith(want):
        raise Fail(f"{what}: for {trip}, the customer's one email says {subjects[0]!r}; expected "
                   f"{'the confirmation' if booked else 'the correction'} ({want}...)",
                   "confirm(...) once the trip is booked; apologise(...) once it is undone")
    if booked:
        ids = [b["record_id"] for b in out.records["bookings"]]
        if not subjects[0].endswith(": " + ", ".join(ids)):
            raise Fail(f"{what}: for {trip}, the confirmation says {subjects[0]!r}; the desk "
                       f"booked {ids}", "pass confirm the bookings the trip's result names")
    else:
        words = "declined" if trip.refused == DECLINED else "sold out"
        if words not in subjects[0]:
            raise Fail(f"{what}: for {trip}, the correction says {subjects[0]!r}, which does not "
                       "say what went wrong", "pass apologise the error the saga reports: "
                                              "the Compensated's .error")
    rows = [r for r in out.history if r["kind"] in ("step", "error")]
    steps = [r["step"] for r in rows]
    mailed = [r for r in rows if isinstance(r["result"], dict) and "message_id" in r["result"]]
    if not mailed:
        raise Fail(f"{what}: for {trip}, the email went out, but no step of the run sent it "
                   f"(its steps: {steps})",
                   "a plain call runs again on every replay: an email is a step of the run, "
                   "with a key of its own")
    if mailed[-1] is not rows[-1]:
        raise Fail(f"{what}: for {trip}, the run's steps were {steps}; the email "
                   f"({mailed[-1]['step']!r}) should be the last of them, "
                   f"{'after every booking' if booked else 'after every undo'}",
                   "catch dl.Compensated around the agent (the saga raises it once the undos "
                   "have run), not StepFailed inside it" if not booked else
                   "send the confirmation after the agent has returned")


@q3.test("the trip is booked: one email, the confirmation, sent last; once, and through a "
         "crash at every point",
         hint="the confirmation goes out once nothing can be undone any more, as a step of "
              "the run")
def _(trip_with_mail, draw):
    _told(trip_with_mail, draw, "booked")


@q3.test("the card is declined: one email, the correction, after the undo, and the run ends "
         "compensated; once, and through a crash at every point",
         hint="the saga tells the code around it when it has undone the trip (lesson 09, "
              "section 6): that is the moment for the correction, and the run still ends "
              "compensated")
def _(trip_with_mail, draw):
    _told(trip_with_mail, draw, "declined")


@q3.test("a line in the middle is refused: one email, the correction, after every undo; once, "
         "and through a crash at every point",
         hint="the saga raises dl.Compensated only once every undo has run: that is the moment "
              "for the correction")
def _(trip_with_mail, draw):
    _told(trip_with_mail, draw, "middle")


@q3.test("the same trip asked for again after it was undone (a new run), and undone again: "
         "the new run sends its own correction",
         hint="the mailer sends once per key: an email of another run must have another key")
def _(trip_with_mail, draw):
    """Judged by what the second run sent: whatever the first sent (the tests above judge
    that), the second must send its own correction. (Both runs are undone, so they send the
    same kind of email: a key made from the trip and the kind collides.)"""
    needs_workflow(trip_with_mail, "trip_with_mail")
    first, what, to = _trip(draw, "first"), "trip_with_mail", draw.email()
    second = _trip(draw, "first")
    second.trip_id = first.trip_id
    with _given(trip_with_mail, party_trip=REFERENCE, refund_card=_refund,
                cancel_booking=_cancel), scratch("ex09") as folder:
        runs = EngineRuns(folder)
        before = _run_in(folder, runs, trip_with_mail, first, draw, to)
        if "NotImplementedError" in (before.run.error or ""):
            raise NotAttempted("trip_with_mail (or a function it calls) still raises "
                               "NotImplementedError")
        out = _run_in(folder, runs, trip_with_mail, second, draw, to)
    new = [m["subject"] for m in out.mail[len(before.mail):] if m["to"] == to]
    story = (f"{first.trip_id!r} was undone ({first.why}), then asked for again by a new run "
             f"({', '.join(second.offers)}), undone too ({second.why})")
    if len(new) == 1 and new[0].startswith(correction(first.trip_id)):
        return
    if not new:
        sent_before = {m["message_id"] for m in before.mail}
        answered = [r["step"] for r in out.history if isinstance(r["result"], dict)
                    and r["result"].get("message_id") in sent_before]
        raise Fail(f"{what}: {story}; the new run sent the customer nothing"
                   + (f": the mailer answered its step {answered[0]!r} with the first run's "
                      "message" if answered else ""),
                   "the mailer sends once per key and answers a key it has seen with the first "
                   "message: an email of another run needs another key" if answered else
                   "an undone trip's run ends with its correction")
    raise Fail(f"{what}: {story}; the new run sent the customer {new}; expected one email, the "
               "correction", "one email per run: the correction, since this one was undone")
