"""Exercises 08 to 13: every property a check module's docstring names is proven here by an
answer wrong in that property alone, which fails the test that names it on every seed,
while right answers written other ways pass.

The answers are what a learner writes in the notebook's answer cells, beside copies of the
notebook's given code; they run through the checks in this process (fast). The helpers
compare test names by their opening words, so a test can be renamed at its end without
touching this file.
"""

import operator

import pytest

import durable_lite as dl
from durable_lite.examples import world_at
from durable_lite.grading import checks, exercise

SEEDS = (1, 2)              # a wrong answer must fail on each (each seed draws other cases)
RIGHT_SEEDS = (1, 2)        # a right one must pass on each (test_grading.py adds fresh seeds)


def run(exercise_id, qid, *answers, seed=None):
    return checks.run_question(exercise(exercise_id), qid, answers, seed=seed)


def named(result, prefix):
    """The test of `result` whose name starts with `prefix` (exactly one)."""
    found = [t for t in result.tests if t.name.startswith(prefix)]
    assert len(found) == 1, f"{prefix!r} names {len(found)} tests of {result.question}"
    return found[0]


def fails(exercise_id, qid, *answers, tests, maybe=(), seeds=SEEDS):
    """The answer fails every test named by a prefix in `tests`, on every seed, and no other
    (but those in `maybe`); returns the first seed's result."""
    results = []
    for seed in seeds:
        result = run(exercise_id, qid, *answers, seed=seed)
        failed = {t.name for t in result.tests if t.status != checks.PASSED}
        must = {named(result, p).name for p in tests}
        may = must | {named(result, p).name for p in maybe}
        assert must <= failed <= may, f"seed {seed}:\n{result.report()}"
        assert all(t.status == checks.FAILED for t in result.tests if t.name in failed), \
            f"seed {seed}:\n{result.report()}"
        results.append(result)
    return results[0]


def passes(exercise_id, qid, *answers, seeds=RIGHT_SEEDS):
    for seed in seeds:
        result = run(exercise_id, qid, *answers, seed=seed)
        assert result.status == checks.PASSED, f"seed {seed}:\n{result.report()}"


def no_answer_in(text, *pieces):
    """A hint read alone must not hand over the answer: none of these pieces of it."""
    for piece in pieces:
        assert piece not in text, f"{piece!r} is in {text!r}"


# 08 · budgets --------------------------------------------------------------------------------
# the notebook's given code
MAX_STEPS = 200
GOAL = "summarise every durable execution engine"


class StepLimit:
    def __init__(self, limit):
        self.limit, self.used = limit, 0

    def charge(self):
        self.used += 1
        if self.used > self.limit:
            raise RuntimeError(f"step limit of {self.limit} reached")


worker_limit = None


def think(folder, goal, turn):
    if worker_limit is not None:
        worker_limit.charge()
    return world_at(folder).llm.complete(f"{goal} (turn {turn})")


def agent_recording(name="think", cost=lambda answer: answer["cost"], goal_of=lambda goal: goal):
    """An agent as q1 asks for it, with one thing changed: its step's name, its cost
    function, or the goal it asks about."""
    @dl.workflow(f"test-p08-{name}-{id(cost)}", version=1)
    def agent(ctx, folder, goal, max_turns=1000):
        for turn in range(max_turns):
            ctx.step(dl.Step(name, cost=cost), think, folder, goal_of(goal), turn)
        return {"turns": max_turns}
    return agent


Q1_TESTS = {"name": "one model call per turn", "dollars": "each model call's dollars",
            "budget": "a cost budget stops the run"}


def test_08_q1_the_right_agent_passes():
    passes("08_budgets", "q1", agent_recording())


def test_08_q1_a_renamed_model_step_fails_the_name_test():
    """The issue's wrong answer: the step renamed "think-model" although the task keeps it.
    Its dollars are right, and its budget halts: only the name is wrong."""
    result = fails("08_budgets", "q1", agent_recording(name="think-model"),
                   tests=[Q1_TESTS["name"]])
    test = named(result, Q1_TESTS["name"])
    assert "['think-model']" in test.message and "'think'" in test.message
    no_answer_in(test.hint, "cost=", "lambda")


@pytest.mark.parametrize("cost, says", [
    (lambda answer: answer["tokens"] / 1000 * 0.01, "the lessons' price"),    # a price of one's own
    (lambda answer: 0.0005, "the same $0.0005"),                             # a fixed number
    (lambda answer: answer["tokens"], "tokens, not its dollars"),
    (lambda answer: answer["cost"] * 1000, "1000 times what the provider billed"),
], ids=["the lessons' price", "a fixed number", "the tokens", "milli-dollars"])
def test_08_q1_dollars_other_than_the_bill_fail_with_what_the_steps_recorded(cost, says):
    result = fails("08_budgets", "q1", agent_recording(cost=cost), tests=[Q1_TESTS["dollars"]],
                   maybe=[Q1_TESTS["budget"]])
    test = named(result, Q1_TESTS["dollars"])
    assert "recorded other dollars than the provider billed" in test.message
    assert says in test.hint
    no_answer_in(test.hint, 'answer["cost"]', "lambda")


def test_08_q1_an_agent_that_asks_about_the_notebooks_goal_fails_the_name_test():
    result = fails("08_budgets", "q1", agent_recording(goal_of=lambda goal: GOAL),
                   tests=[Q1_TESTS["name"]])
    assert "the model was asked" in named(result, Q1_TESTS["name"]).message


def test_08_q1_no_cost_at_all_fails_the_dollars_and_the_budget():
    result = fails("08_budgets", "q1", agent_recording(cost=None),
                   tests=[Q1_TESTS["dollars"], Q1_TESTS["budget"]])
    assert "no step recorded any dollars" in named(result, Q1_TESTS["dollars"]).hint
    for test in result.tests:
        no_answer_in(test.hint, "cost=lambda", 'answer["cost"]')


@dl.workflow("test-p08-one-step-object", version=1)
def agent_with_one_step_object(ctx, folder, goal, max_turns=1000):
    thinking = dl.Step(name="think", cost=operator.itemgetter("cost"))     # made once
    turn = 0
    while turn < max_turns:
        ctx.step(thinking, think, folder, goal, turn)
        turn += 1
    return {"turns": max_turns}


def test_08_q1_right_agents_written_another_way_pass():
    passes("08_budgets", "q1", agent_with_one_step_object)


Q2_TESTS = ("one worker, no crash", "a worker dies every few dozen", "a worker dies after most")


def start_with_the_budget(engine, agent, folder, run_id):
    return engine.start(agent, folder, GOAL, run_id=run_id, budget=dl.Budget(max_steps=MAX_STEPS))


def test_08_q2_the_right_start_agent_passes():
    passes("08_budgets", "q2", start_with_the_budget)


def test_08_q2_a_forgotten_return_is_told_so_without_the_answer():
    def start_agent(engine, agent, folder, run_id):
        engine.start(agent, folder, GOAL, run_id=run_id, budget=dl.Budget(max_steps=MAX_STEPS))

    result = fails("08_budgets", "q2", start_agent, tests=Q2_TESTS)
    for test in result.tests:
        assert "returned None" in test.message
        no_answer_in(test.hint, "engine.start(", "budget=", "dl.Budget(")


def test_08_q2_no_hint_prints_the_answer():
    """Whatever a wrong start_agent did, no hint of q2 holds the line that answers it."""
    def attempt_local(engine, agent, folder, run_id):
        global worker_limit
        worker_limit = StepLimit(MAX_STEPS)
        return engine.start(agent, folder, GOAL, run_id=run_id)

    result = fails("08_budgets", "q2", attempt_local, tests=Q2_TESTS)
    for test in result.tests:
        no_answer_in(test.hint, "engine.start(", "budget=dl.Budget(max_steps=MAX_STEPS)")
    assert any("every new worker" in t.hint for t in result.tests)


my_agent = agent_recording(name="think")


def test_08_q2_starting_another_agent_than_the_one_given_fails():
    def start_agent(engine, agent, folder, run_id):
        return engine.start(my_agent, folder, GOAL, run_id=run_id,        # wrong: not `agent`
                            budget=dl.Budget(max_steps=MAX_STEPS))

    result = fails("08_budgets", "q2", start_agent, tests=Q2_TESTS)
    assert "start_agent was given the agent" in result.tests[0].message


def test_08_q2_a_run_id_of_its_own_fails():
    def start_agent(engine, agent, folder, run_id):
        return engine.start(agent, folder, GOAL, run_id="agent-run",        # wrong: a literal id
                            budget=dl.Budget(max_steps=MAX_STEPS))

    result = fails("08_budgets", "q2", start_agent, tests=Q2_TESTS)
    assert all("the run_id start_agent is called with" in t.hint for t in result.tests)


def test_08_q2_a_halted_run_continued_by_the_next_worker_fails():
    """Right until the run halts; the next worker (a restarted pod) then lets it go on. Only
    the worker started after the halt shows it, in every test."""
    def start_agent(engine, agent, folder, run_id):
        try:
            run = engine.get(run_id)
        except dl.UnknownRunError:
            return engine.start(agent, folder, GOAL, run_id=run_id,
                                budget=dl.Budget(max_steps=MAX_STEPS))
        if run.status == "halted":                   # wrong: "finish the job"
            return engine.resume(run_id, budget=dl.Budget(max_steps=2 * MAX_STEPS))
        return engine.resume(run_id)

    result = fails("08_budgets", "q2", start_agent, tests=Q2_TESTS)
    assert all("then one more worker called start_agent" in t.message for t in result.tests)


# 09 · compensation ---------------------------------------------------------------------------
from durable_lite.booking import UNDO_RETRY  # noqa: E402
from durable_lite.sim import OFFERS, travel_at  # noqa: E402


def charge_card(folder, trip_id, amount, reference):
    return travel_at(folder).charge(trip_id, amount, reference=reference)


def book(folder, offer, reference, trip_id):
    return travel_at(folder).book(offer, reference=reference, trip=trip_id)


def trip_total(offers):
    return sum(OFFERS[offer]["price"] for offer in offers)


def confirm(folder, to, trip_id, bookings, idempotency_key):
    return world_at(folder).mailer.send(to, f"Trip {trip_id} is booked: {', '.join(bookings)}",
                                        idempotency_key=idempotency_key)


def apologise(folder, to, trip_id, reason, idempotency_key):
    return world_at(folder).mailer.send(
        to, f"Sorry: trip {trip_id} could not be booked ({reason}); anything charged is refunded",
        idempotency_key=idempotency_key)


def refund_card(folder, reference, idempotency_key):
    return travel_at(folder).refund(reference, idempotency_key=idempotency_key)


def cancel_booking(folder, reference, idempotency_key):
    return travel_at(folder).cancel(reference, idempotency_key=idempotency_key)


def trip_agent(label, charge_name=lambda: "charge", line_name=lambda offer: OFFERS[offer]["kind"],
               total=trip_total, charge_ref=None, line_ref=None):
    """q2's agent with one thing changed: a step's name, the total, or how references are
    made (charge_ref(ctx, trip_id), line_ref(ctx, trip_id, line))."""
    charge_ref = charge_ref or (lambda ctx, trip_id: ctx.idempotency_key("charge", trip_id))
    line_ref = line_ref or (lambda ctx, trip_id, line: ctx.idempotency_key("book", trip_id, line))

    @dl.workflow(f"test-p09-{label}", version=1)
    def party_trip(ctx, folder, trip_id, offers):
        booked = []
        with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
            paid = charge_ref(ctx, trip_id)
            saga.step(charge_name(), charge_card, folder, trip_id, total(offers), paid,
                      undo=(refund_card, folder, paid))
            for line, offer in enumerate(offers):
                seat = line_ref(ctx, trip_id, line)
                booking = saga.step(line_name(offer), book, folder, offer, seat, trip_id,
                                    undo=(cancel_booking, folder, seat))
                booked.append(booking["booking_id"])
        return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}
    return party_trip


Q2_09_ENDINGS = ("nothing is refused", "the card is declined", "the first line",
                 "a line in the middle", "the last line", "a line is booked but")
AGAIN = "the same trip asked for again"


def test_09_q2_the_right_agent_passes():
    passes("09_compensation", "q2", trip_agent("right"), seeds=(1,))


def test_09_q2_step_names_other_than_the_lessons_fail_every_ending():
    """The issue's wrong answer: "payment" and "book-{offer}". Its references, undos and
    totals are right, so before the names were read it passed."""
    result = fails("09_compensation", "q2",
                   trip_agent("names", charge_name=lambda: "payment",
                              line_name=lambda offer: f"book-{offer}"),
                   tests=Q2_09_ENDINGS)
    test = named(result, "nothing is refused")
    assert "'payment'" in test.message and "named as the lesson names them" in test.message
    assert "kind" in test.hint


def test_09_q2_a_wrong_total_is_told_about_the_total_not_the_references():
    """Each offer charged once (the party's second seat is free): every ending with an
    offer on two lines before its refusal fails, told about the charge, not undo references."""
    result = fails("09_compensation", "q2",
                   trip_agent("unique-total", total=lambda offers: trip_total(set(offers))),
                   tests=["nothing is refused", "a line in the middle", "the last line",
                          "a line is booked but"],
                   maybe=["the card is declined", "the first line", AGAIN])
    for prefix in ("nothing is refused", "a line in the middle"):
        test = named(result, prefix)
        assert "the desk charged" in test.message and "lines cost" in test.message
        assert "each offer once" in test.hint
        no_answer_in(test.hint, "reference", "trip_total(")


def test_09_q2_references_made_from_the_trip_alone_fail_only_the_second_run():
    """Stable on every replay and different for every line, but the same in every run:
    the trip asked for again is answered with the first run's charge."""
    result = fails("09_compensation", "q2",
                   trip_agent("trip-refs", charge_ref=lambda ctx, trip_id: f"{trip_id}:charge",
                              line_ref=lambda ctx, trip_id, line: f"{trip_id}:{line}"),
                   tests=[AGAIN])
    test = named(result, AGAIN)
    assert "repeat: True" in test.message and "every run" in test.hint


DONE = {}


def refund_remembered(folder, reference, idempotency_key):
    """Wrong: a repeat is recognised by the notebook's memory, which a new process has not."""
    if idempotency_key not in DONE:
        DONE[idempotency_key] = travel_at(folder).refund(reference)
    return DONE[idempotency_key]


def cancel_remembered(folder, reference, idempotency_key):
    if idempotency_key not in DONE:
        DONE[idempotency_key] = travel_at(folder).cancel(reference)
    return DONE[idempotency_key]


def test_09_q1_undos_that_remember_in_memory_fail_only_the_new_process():
    result = fails("09_compensation", "q1", refund_remembered, cancel_remembered,
                   tests=["each undo run again by a new process"])
    test = named(result, "each undo run again by a new process")
    assert "made 2 refunds" in test.message and "nothing in memory" in test.hint


def refund_the_trips_last_charge(folder, reference, idempotency_key):
    """Wrong: the charge found by trip and position, not by its reference."""
    desk = travel_at(folder)
    mine = [c for c in desk.world.ledger("charges").records() if c["key"] == reference]
    if not mine:
        return {"refunded": False}
    trip = mine[0]["detail"]["trip"]
    last = [c for c in desk.world.ledger("charges").records() if c["detail"]["trip"] == trip][-1]
    return desk.refund(last["key"], idempotency_key=idempotency_key)


def test_09_q1_an_undo_that_finds_the_charge_by_its_trip_fails():
    result = fails("09_compensation", "q1", refund_the_trips_last_charge, cancel_booking,
                   tests=["refund_card pays back"])
    assert "refunded" in named(result, "refund_card pays back").message


def test_09_no_hint_of_q1_prints_the_call_that_answers_it():
    def refund_nothing(folder, reference, idempotency_key):
        return None

    result = run("09_compensation", "q1", refund_nothing, refund_nothing, seed=1)
    for test in result.tests:
        no_answer_in(test.hint, "travel_at(folder).refund(", "travel_at(folder).cancel(",
                     "idempotency_key=idempotency_key")


@dl.workflow("test-p09-mail-keyed-by-trip", version=1)
def mail_keyed_by_the_trip(ctx, folder, trip_id, offers, to):
    try:
        trip = party_trip(ctx, folder, trip_id, offers)       # noqa: F821 (the check's own)
    except dl.Compensated as undone:
        ctx.step("correction", apologise, folder, to, trip_id, undone.error, f"sorry-{trip_id}")
        raise
    ctx.step("confirmation", confirm, folder, to, trip_id, trip["bookings"], f"booked-{trip_id}")
    return trip


def test_09_q3_email_keys_made_from_the_trip_alone_fail_only_the_second_run():
    """Stable on every replay, so every crash test passes; a new run of the same trip is
    answered by the mailer with the first run's message, and its customer hears nothing."""
    result = fails("09_compensation", "q3", mail_keyed_by_the_trip, tests=[AGAIN])
    test = named(result, AGAIN)
    assert "the new run sent the customer nothing: the mailer answered" in test.message


# 13 · costs ------------------------------------------------------------------------------------
# (the wrong answers of 13 are in test_grading_13.py's tables, each with the tests it fails:
# "pays at a tie, from two steps" fails only the boundary of q2, "long at the line" only
# the boundary of q3)
from durable_lite.grading.cases import Draw  # noqa: E402
from durable_lite.grading.exercises import ex13_costs as ex13  # noqa: E402


def float_saving(w, q, n):
    """What checkpoints save, as the solution adds it up in floats."""
    top = resumed = 0.0
    gets_through = 1.0
    for _ in range(n):
        gets_through *= 1 - q
        top += w / gets_through
        resumed += w / (1 - q)
    return top - resumed


@pytest.mark.parametrize("seed", range(20))
def test_13_the_boundary_cases_are_exact_ties_in_floating_point_too(seed):
    """At the drawn n, checkpoints cost exactly what they save, however the sum is taken;
    one step more, they pay; one fewer, they do not."""
    for w, q, h, n in ex13.boundary_cases(Draw(seed)):
        assert ex13.exact_saving(w, q, n) == n * h == float_saving(w, q, n)
        assert float_saving(w, q, n + 1) > (n + 1) * h
        assert float_saving(w, q, n - 1) < (n - 1) * h or n == 1


# 10 · tracing ----------------------------------------------------------------------------------
def split_counting(parked_kinds):
    def time_spent(tree):
        working = sum(s.duration for s in tree.children if s.kind == "execution")
        parked = sum(s.duration for s in tree.children if s.kind in parked_kinds)
        return {"working": working, "parked": parked, "no worker": tree.duration - working - parked}
    return time_spent


def slowest_step(tree):
    seconds = {}
    for step in tree.find(kind="step"):
        seconds[step.name] = seconds.get(step.name, 0.0) + step.duration
    return max(seconds, key=seconds.get)


def test_10_q1_the_right_split_passes():
    passes("10_tracing", "q1", split_counting(("wait", "sleep")), slowest_step, seeds=(1,))


def test_10_q1_a_split_that_parks_waits_but_not_sleeps_fails_where_the_run_sleeps():
    """The question says parked is waiting or sleeping; lesson 10's agent never sleeps, so
    only the after-hours ticket, which sleeps until the morning, shows the difference."""
    result = fails("10_tracing", "q1", split_counting(("wait",)), slowest_step,
                   tests=["no worker died"], seeds=(1, 2))
    test = named(result, "no worker died")
    assert "slept" in test.message and "a sleep parks it too" in test.hint
    no_answer_in(test.hint, "kind", "children of kind")


# no hint hands over the answer -------------------------------------------------------------------
def all_hints(exercise_id, qid, *answers, seeds=(1,)):
    return [t.hint for seed in seeds for t in run(exercise_id, qid, *answers, seed=seed).tests
            if t.status != checks.PASSED]


def plain_export(tree, provider):
    from durable_lite import otel
    otel.export(tree, provider)


def test_10_no_hint_prints_what_answers_the_question():
    hints = []
    hints += all_hints("10_tracing", "q1",
                       lambda tree: {"working": 0.0, "parked": 0.0, "no worker": 0.0},
                       lambda tree: "approval")
    hints += all_hints("10_tracing", "q1", split_counting(("wait",)), slowest_step)
    hints += all_hints("10_tracing", "q2", lambda tree: {}, lambda tree, world: 0.0)
    hints += all_hints("10_tracing", "q3", lambda tree: tree.find(kind="execution")[-1])
    hints += all_hints("10_tracing", "q4", plain_export)
    assert len(hints) >= 12
    for hint in hints:
        no_answer_in(hint, "span.cost", "world.llm", "tree.cost", "tree.name", "extra_attributes=",
                     'status == "completed"')


def test_12_no_hint_of_q3_prints_the_fork_that_answers_it():
    def resume_them(engine, run_ids):
        for run_id in run_ids:
            engine.resume(run_id)

    def fork_anew(engine, run_ids):
        for run_id in run_ids:
            engine.fork(run_id, from_step="email")

    for answer in (resume_them, fork_anew):
        for hint in all_hints("12_versioning", "q3", answer):
            no_answer_in(hint, "fork(", "from_step", "run id made from", "-fixed")


def test_09_q2_an_undo_given_another_steps_reference_is_told_what_the_undos_found():
    """Every line's undo given the charge's reference: the desk answers each that nothing is
    booked under it. The hint lists those undos, not the refused line's own (which rightly
    finds nothing)."""
    @dl.workflow("test-p09-undo-by-charge", version=1)
    def party_trip(ctx, folder, trip_id, offers):
        booked = []
        with dl.Saga(ctx, undo_retry=UNDO_RETRY) as saga:
            paid = ctx.idempotency_key("charge", trip_id)
            saga.step("charge", charge_card, folder, trip_id, trip_total(offers), paid,
                      undo=(refund_card, folder, paid))
            for line, offer in enumerate(offers):
                seat = ctx.idempotency_key("book", trip_id, line)
                booking = saga.step(OFFERS[offer]["kind"], book, folder, offer, seat, trip_id,
                                    undo=(cancel_booking, folder, paid))      # wrong reference
                booked.append(booking["booking_id"])
        return {"trip": trip_id, "charged": trip_total(offers), "bookings": booked}

    result = fails("09_compensation", "q2", party_trip,
                   tests=["a line in the middle", "the last line", "a line is booked but"])
    test = named(result, "a line in the middle")
    assert "does not balance" in test.message and "nothing was done under the reference" in test.hint
    refused_line = test.message.split("where line ")[1].split(" ")[0]
    kinds = test.hint.split("the undos ")[1].split("]")[0]
    assert kinds.count("undo:") == int(refused_line) - 1     # the lines booked before it
