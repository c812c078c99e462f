"""Exercises 10 and 13: the case that tells each property apart is drawn on every seed.

Each property named in the check modules' docstrings is reached by the cases its test draws
on every one of 50 seeds, shown cheaply from the drawing alone (ex10's plans as drawn,
before a ticket is lived through; ex13's workloads with the reference's reasons). Then
answers wrong in one property, written here as a learner might, fail the test that names
it on seeds 1, 2 and 3, and right answers written other ways pass. Every answer runs
in-process through only the tests it is about (a test's cases depend on its name, not on
which other tests run), so the whole file takes a few seconds.
"""

import math

import pytest

from durable_lite import otel
from durable_lite.trace import Span
from durable_lite.grading import checks, exercise
from durable_lite.grading.cases import Draw
from durable_lite.grading.exercises import ex10_tracing as ex10
from durable_lite.grading.exercises import ex13_costs as ex13
from durable_lite.grading.harness import scratch

SWEEP = range(50)           # seeds over which every distinguishing case must be drawn
WRONG_SEEDS = (1, 2, 3)     # a wrong answer must fail on each
RIGHT_SEEDS = (1, 2)


def run_tests(exercise_id, qid, answers, seed, only):
    """The tests numbered `only` of question `qid` on `answers`, with the cases of `seed`:
    {test number: TestResult}."""
    ex = exercise(exercise_id)
    question = ex.questions[qid]
    part = checks.Exercise(ex.id, ex.title, ex.lesson)
    part.question(qid, question.title, question.answers).tests = [question.tests[i]
                                                                   for i in only]
    result = checks.run_question(part, qid, list(answers), seed=seed)
    return dict(zip(only, result.tests))


def failed(results) -> set:
    return {n for n, t in results.items() if t.status != checks.PASSED}


def spelled_out(results) -> str:
    return "\n".join(f"test {n}: {t.status}: {t.message} (hint: {t.hint})"
                     for n, t in sorted(results.items()))


# What a hint of exercise 10 must never print (each answers a question outright), as in
# test_grading_properties_08_13.py.
ANSWERS_OF_10 = ("span.cost", "world.llm", "tree.cost", "tree.name", "extra_attributes=",
                 'status == "completed"')


def assert_fails(exercise_id, qid, answers, only, expected, seeds=WRONG_SEEDS, hint_has=""):
    """`answers` fail exactly the tests `expected` among those run (`only`) on every seed,
    each as a failure with a hint (holding `hint_has`, and no answer), never as the check's
    own error."""
    for seed in seeds:
        results = run_tests(exercise_id, qid, answers, seed, only)
        assert failed(results) == set(expected), f"seed {seed}:\n{spelled_out(results)}"
        for n in expected:
            hint = results[n].hint
            assert results[n].status == checks.FAILED and hint, spelled_out(results)
            assert hint_has in hint, spelled_out(results)
            if exercise_id == "10_tracing":
                assert not [a for a in ANSWERS_OF_10 if a in hint], hint


def assert_passes(exercise_id, qid, answers, seeds=RIGHT_SEEDS, only=None):
    """`answers` pass every test of `qid` (or those numbered `only`) on every seed."""
    only = range(len(exercise(exercise_id).questions[qid].tests)) if only is None else only
    for seed in seeds:
        results = run_tests(exercise_id, qid, answers, seed, only)
        assert not failed(results), f"seed {seed}:\n{spelled_out(results)}"


# 10 · the drawing, over 50 seeds ------------------------------------------------------------
def drawn(plan, seed):
    """A plan of ex10 as `ticket` completes it, for `seed`: nothing is lived through."""
    draw = Draw(seed)
    return ex10.full_plan(draw, plan(draw))


Q1_SPLIT_PLANS = (ex10.quiet, ex10.after_hours, ex10.died_around_the_wait, ex10.still_waiting,
                  ex10.abandoned)
Q2_PLANS = (ex10.quiet, ex10.draft_later, ex10.lost_model_call, ex10.killed_elsewhere)
Q4_PLANS = (ex10.every_kind_of_span, ex10.quiet)
MIN_PRICE_GAP = 0.002       # dollars per 1,000 tokens: on 48 tokens (the fewest a call bills),
                            # 9.6e-5, far more than the 1e-6 the check allows


def test_10_q1_every_ticket_of_the_split_tests_has_time_between_its_steps():
    """working is the executions' time: an answer adding up step spans is off by at least
    one `between` (an execution that records a step then goes on) on every ticket."""
    for seed in SWEEP:
        for plan in Q1_SPLIT_PLANS:
            assert drawn(plan, seed)["between"] >= 5 * ex10.SECONDS, (plan.__name__, seed)


@pytest.mark.parametrize("plan", [ex10.quiet, ex10.after_hours, ex10.still_waiting,
                                  ex10.abandoned], ids=lambda p: p.__name__)
def test_10_q1_the_time_between_steps_shows_in_the_trace(plan):
    """Lived through (in-process plans, a few seeds): executions last longer than their
    steps by more than the check's tolerance."""
    for seed in range(3):
        draw = Draw(seed)
        with scratch("test-ex10") as folder:
            case = ex10.ticket(folder, draw, **plan(draw))
            tree = case.trace()
        working = sum(s.duration for s in tree.find(kind="execution"))
        in_steps = sum(s.duration for s in tree.find(kind="step"))
        assert working - in_steps >= case.between - 1e-9 > ex10.SECONDS, tree.render()


def test_10_q2_every_ticket_prices_its_two_models_apart_and_never_at_the_lessons_price():
    for seed in SWEEP:
        for plan in Q2_PLANS:
            models = drawn(plan, seed)["models"]
            prices = [m["price"] for m in models.values()]
            assert len(prices) == 2, models
            assert all(abs(p - ex10.LESSON_PRICE) >= MIN_PRICE_GAP for p in prices), models
            assert abs(prices[0] - prices[1]) >= MIN_PRICE_GAP, models


def test_10_q2_the_branches_of_the_money_tests_are_drawn_on_every_seed():
    lesson = set(ex10.LESSON_NAMES)
    for seed in SWEEP:
        # no worker died: the steps are not named as the lesson's (a dict keyed by the
        # lesson's names misses them)
        assert not set(drawn(ex10.quiet, seed)["steps"].values()) & lesson
        # the draft later: the last kill comes before the draft is recorded
        last = drawn(ex10.draft_later, seed)["before"][-1].at
        assert last in ex10.DRAFT_LATER, last
        # a lost model call: every kill is right after a model call answered, one model's
        # call lost twice and the other's once
        kills = [k.at.step for k in drawn(ex10.lost_model_call, seed)["before"]]
        assert sorted(kills.count(step) for step in ("classify", "draft_reply")) == [1, 2]
        # killed elsewhere: kills before and after the wait, none losing a model call
        plan = drawn(ex10.killed_elsewhere, seed)
        assert plan["before"] and plan["after"]
        assert not any(k.at in ex10.LOSES_A_MODEL_CALL for k in plan["before"] + plan["after"])


def test_10_q3_the_branches_of_the_finisher_tests_are_drawn_on_every_seed():
    for seed in SWEEP:
        quiet = drawn(ex10.approved, seed)
        assert quiet.get("decision") == "approve" and not quiet.get("before") \
            and not quiet.get("after")
        restarted = drawn(ex10.restarted_name, seed)
        assert restarted["reuse_name"] and restarted["sigkill"]
        assert restarted["before"] and restarted["after"]
        assert drawn(ex10.refused, seed)["decision"] == "reject"
        assert drawn(ex10.timed_out, seed)["decision"] == "timeout"
        assert drawn(ex10.still_waiting, seed)["decision"] == "pending"
        abandoned = drawn(ex10.abandoned, seed)
        assert abandoned["finished"] is False and abandoned["after"]


def test_10_q4_every_ticket_of_the_export_tests_names_its_steps_and_models_anew():
    lesson_models = {"fake-small", "fake-large"}
    for seed in SWEEP:
        for plan in Q4_PLANS:
            full = drawn(plan, seed)
            names = set(full["steps"].values())
            assert not names & set(ex10.LESSON_NAMES), names
            assert not any("classif" in n or "draft" in n for n in names), names
            assert not {m["model"] for m in full["models"].values()} & lesson_models


# 10 · wrong answers, each failing the tests of its property ---------------------------------
def the_right_slowest(tree):
    seconds = {}
    for step in tree.find(kind="step"):
        seconds[step.name] = seconds.get(step.name, 0.0) + step.duration
    return max(seconds, key=seconds.get)


def _with_working(tree, working):
    parked = sum(s.duration for s in tree.children if s.kind in ("wait", "sleep"))
    return {"working": working, "parked": parked, "no worker": tree.duration - working - parked}


def working_is_the_steps(tree):                  # a worker's time is its steps'
    return _with_working(tree, sum(s.duration for s in tree.find(kind="step")))


def working_from_first_to_last_step(tree):       # each execution from its first step's start
    total = 0.0                                  # to its last step's end
    for execution in tree.find(kind="execution"):
        steps = [s for s in execution.children if s.kind == "step"]
        if steps:
            total += steps[-1].end - steps[0].start
    return _with_working(tree, total)


def working_is_each_executions_children(tree):   # an execution's time, added up from below
    return _with_working(tree, sum(child.duration for x in tree.find(kind="execution")
                                   for child in x.children))


@pytest.mark.parametrize("wrong, hint", [
    (working_is_the_steps, "not all in its steps"),
    (working_from_first_to_last_step, "the time the run's executions lasted"),
    (working_is_each_executions_children, "not all in its steps"),
], ids=lambda w: getattr(w, "__name__", ""))
def test_10_q1_working_time_from_the_steps_fails_the_split_tests(wrong, hint):
    """The in-process split tests (the one with SIGKILLed workers draws the same time
    between steps, and costs a process per worker)."""
    assert_fails("10_tracing", "q1", [wrong, the_right_slowest], only=(0, 2), expected={0, 2},
                 hint_has=hint)


LESSON_PRICE_PER_TOKEN = 0.01 / 1000


def priced_at_the_lessons_price(tree):
    return {s.name: s.tokens * LESSON_PRICE_PER_TOKEN for s in tree.find(kind="step")
            if s.is_model_call}


def priced_at_the_runs_average(tree):            # one price per token: the run's
    price = tree.cost / tree.tokens
    return {s.name: s.tokens * price for s in tree.find(kind="step") if s.is_model_call}


def priced_at_the_first_calls_price(tree):       # the price learned from one call
    calls = [s for s in tree.find(kind="step") if s.is_model_call]
    price = calls[0].cost / calls[0].tokens
    return {s.name: s.tokens * price for s in calls}


def keyed_by_the_lessons_names(tree):            # the lesson's two model steps, by name
    return {name: sum(s.cost for s in tree.find(kind="step", name=name))
            for name in ("classify", "draft_reply")}


def the_right_costs(tree):
    costs = {}
    for step in tree.find(kind="step"):
        if step.cost:
            costs[step.name] = costs.get(step.name, 0.0) + step.cost
    return costs


def the_right_unrecorded(tree, world):
    return world.llm.total_cost() - tree.cost


@pytest.mark.parametrize("wrong", [priced_at_the_lessons_price, priced_at_the_runs_average,
                                   priced_at_the_first_calls_price], ids=lambda f: f.__name__)
def test_10_q2_a_step_priced_from_its_tokens_fails_both_cost_tests(wrong):
    assert_fails("10_tracing", "q2", [wrong, the_right_unrecorded], only=(0, 1),
                 expected={0, 1}, hint_has="prices of their own")


def test_10_q2_steps_found_by_the_lessons_names_fail_where_they_are_named_anew():
    assert_fails("10_tracing", "q2", [keyed_by_the_lessons_names, the_right_unrecorded],
                 only=(0,), expected={0})


def test_10_q2_the_feedback_on_the_lessons_price_shows_it_and_the_tickets_prices():
    test = run_tests("10_tracing", "q2", [priced_at_the_lessons_price, the_right_unrecorded],
                     1, (0,))[0]
    assert "at the lesson's $0.01 per 1,000" in test.message
    assert "per 1,000 tokens" in test.message.split("provider billed")[-1]
    assert "prices of their own" in test.hint


def _lost_tokens(tree, world):
    return world.llm.total_tokens() - tree.tokens


def lost_tokens_at_the_lessons_price(tree, world):
    return _lost_tokens(tree, world) * LESSON_PRICE_PER_TOKEN


def lost_tokens_at_the_recorded_average(tree, world):
    return _lost_tokens(tree, world) * tree.cost / tree.tokens


def lost_tokens_at_the_dearest_price(tree, world):     # to be safe, the dearest model's
    calls = [s for s in tree.find(kind="step") if s.is_model_call]
    return _lost_tokens(tree, world) * max(s.cost / s.tokens for s in calls)


@pytest.mark.parametrize("wrong", [lost_tokens_at_the_lessons_price,
                                   lost_tokens_at_the_recorded_average,
                                   lost_tokens_at_the_dearest_price], ids=lambda f: f.__name__)
def test_10_q2_lost_calls_priced_from_their_tokens_fail_where_a_call_was_lost(wrong):
    assert_fails("10_tracing", "q2", [the_right_costs, wrong], only=(2, 3), expected={2})


def the_last_execution_that_lived(tree):        # a parked execution did not finish the run
    lived = [x for x in tree.find(kind="execution") if x.status != "interrupted"]
    return lived[-1] if lived else None


def the_execution_of_the_last_step(tree):       # the last step recorded, wherever the run is
    executions = tree.find(kind="execution")
    return next((x for x in reversed(executions) if x.find(kind="step")), None)


def the_latest_execution_to_end(tree):          # the last one to stop, however it stopped
    return max(tree.find(kind="execution"), key=lambda x: x.end)


@pytest.mark.parametrize("wrong", [the_last_execution_that_lived, the_execution_of_the_last_step,
                                   the_latest_execution_to_end], ids=lambda f: f.__name__)
def test_10_q3_an_execution_for_a_run_nothing_completed_fails_the_unfinished_test(wrong):
    assert_fails("10_tracing", "q3", [wrong], only=(3,), expected={3})


def the_execution_that_refunded(tree):          # a refusal or a deadline refunds nothing
    for execution in tree.find(kind="execution"):
        if any("refund" in s.name or "pay" in s.name for s in execution.children):
            return execution
    return None


def the_longest_execution(tree):                # the one that did the most work
    return max(tree.find(kind="execution"), key=lambda x: x.duration)


def the_execution_with_the_most_steps(tree):
    return max(tree.find(kind="execution"), key=lambda x: len(x.find(kind="step")))


@pytest.mark.parametrize("wrong, expected", [(the_execution_that_refunded, {2}),
                                             (the_longest_execution, {0, 2}),
                                             (the_execution_with_the_most_steps, {0, 2})],
                         ids=lambda w: getattr(w, "__name__", ""))
def test_10_q3_an_execution_chosen_by_what_it_did_fails_the_completed_tests(wrong, expected):
    """With nobody dying, and after a refusal or a deadline (the in-process tests; the one
    with SIGKILLed workers costs a process per worker)."""
    assert_fails("10_tracing", "q3", [wrong], only=(0, 2), expected=expected)


CONVERSATION = "gen_ai.conversation.id"


def _tagging(choose):
    def export_run(tree, provider):
        otel.export(tree, provider, extra_attributes=lambda span: (
            {CONVERSATION: tree.name} if choose(span) else {}))
    export_run.__name__ = choose.__name__
    return export_run


def by_the_lessons_step_names(span):
    return span.name in ("classify", "draft_reply")


def by_words_in_the_step_name(span):
    return "classif" in span.name or "draft" in span.name


def by_the_lessons_model_names(span):
    return span.attributes.get("model") in ("fake-small", "fake-large")


def every_step_but_the_lessons_tools(span):
    return span.kind == "step" and span.name not in ("lookup_order", "refund", "send_reply",
                                                     "close_ticket")


@pytest.mark.parametrize("choose", [by_the_lessons_step_names, by_words_in_the_step_name,
                                    by_the_lessons_model_names], ids=lambda f: f.__name__)
def test_10_q4_model_calls_found_by_the_lessons_names_are_missed(choose):
    assert_fails("10_tracing", "q4", [_tagging(choose)], only=(0,), expected={0})


def test_10_q4_every_step_but_the_lessons_tools_tags_the_renamed_tools_too():
    assert_fails("10_tracing", "q4", [_tagging(every_step_but_the_lessons_tools)],
                 only=(0, 1), expected={1})


# 10 · right answers written other ways --------------------------------------------------------
def working_from_each_executions_ends(tree):
    executions = tree.find(kind="execution")
    parked = sum(s.end - s.start for s in tree.walk() if s.kind in ("wait", "sleep"))
    working = sum(x.end - x.start for x in executions)
    return {"working": working, "parked": parked, "no worker": tree.duration - working - parked}


def working_as_what_the_gaps_leave(tree):        # no worker from the gaps between children
    spans = sorted(tree.children, key=lambda s: s.start)
    gaps = spans[0].start - tree.start + tree.end - max(s.end for s in spans)
    gaps += sum(max(0.0, b.start - a.end) for a, b in zip(spans, spans[1:]))
    parked = sum(s.duration for s in spans if s.kind in ("wait", "sleep"))
    return {"working": tree.duration - parked - gaps, "parked": parked, "no worker": gaps}


def costs_of_model_calls_by_walking(tree):
    out = {}
    for span in tree.walk():
        if span.is_model_call:
            out[span.name] = round(out.get(span.name, 0) + span.cost, 6)
    return out


def unrecorded_from_the_bills_and_the_steps(tree, world):
    recorded = sum(s.cost for s in tree.find(kind="step"))
    return max(0.0, round(world.llm.total_cost() - recorded, 6))


def the_last_completed_execution(tree):
    done = [x for x in tree.find(kind="execution") if x.status == "completed"]
    return done[-1] if done else None


def by_tokens_on_a_step(span):
    return span.kind == "step" and "tokens" in span.attributes


@pytest.mark.parametrize("qid, answers, only", [
    ("q1", [working_from_each_executions_ends, the_right_slowest], (0, 1, 2)),
    ("q1", [working_as_what_the_gaps_leave, the_right_slowest], (0, 1, 2)),
    ("q2", [costs_of_model_calls_by_walking, unrecorded_from_the_bills_and_the_steps], None),
    ("q3", [the_last_completed_execution], None),
    ("q4", [_tagging(by_tokens_on_a_step)], None),
], ids=["q1-ends", "q1-gaps", "q2-walk-and-bills", "q3-last-completed", "q4-tokens"])
def test_10_a_right_answer_written_another_way_passes(qid, answers, only):
    assert_passes("10_tracing", qid, answers, seeds=(1,), only=only)


# 13 · the drawing, over 50 seeds ------------------------------------------------------------
def reasons(case):
    return ex13.reference_reasons(*case)


def work(steps):
    return math.fsum(s["seconds"] for s in steps if not s["waits"])


def dollars(steps):
    return math.fsum(s["dollars"] for s in steps)


def harmless_effects(steps):
    return [s for s in steps if s["name"].startswith(ex13._HARMLESS)]


def test_13_q3_no_reason_many_steps_and_a_swapped_effect_on_every_seed():
    for seed in SWEEP:
        few, many, swapped = ex13.no_reason_cases(Draw(seed))
        assert reasons(few) == reasons(many) == set()
        assert len(many[0]) > 100 and work(many[0]) < many[1]    # many steps, not long
        assert reasons(swapped) == {"irreversible"}
        assert all(harmless_effects(case[0]) for case in (few, many))


def test_13_q3_long_by_seconds_in_few_and_many_steps_and_by_dollars_on_every_seed():
    for seed in SWEEP:
        few, many, by_dollars = ex13.long_cases(Draw(seed))
        assert reasons(few) == reasons(many) == reasons(by_dollars) == {"long"}
        assert len(many[0]) > 100 and max(s["seconds"] for s in many[0]) < many[1] / 5
        assert work(by_dollars[0]) < by_dollars[1]                 # long by its dollars only
        assert dollars(by_dollars[0]) > by_dollars[2]


def test_13_q3_a_harm_of_a_few_cents_is_drawn_on_every_seed():
    """The only harmful step of the first workload costs $0.01-0.10 if repeated: below
    every line, so no threshold on the harm (or on its total) passes it."""
    for seed in SWEEP:
        cases = ex13.irreversible_cases(Draw(seed))
        assert all(reasons(case) == {"irreversible"} for case in cases)
        steps, _, long_dollars = cases[0]
        harms = [s["harm"] for s in steps if s["harm"]]
        assert len(harms) == 1 and 0 < sum(harms) <= 0.1 < long_dollars, harms
        assert harmless_effects(steps)


def test_13_q3_a_wait_longer_than_the_line_with_little_work_on_every_seed():
    for seed in SWEEP:
        for steps, long_seconds, long_dollars in ex13.waits_cases(Draw(seed)):
            assert reasons((steps, long_seconds, long_dollars)) == {"waits"}
            wait = sum(s["seconds"] for s in steps if s["waits"])
            assert wait > long_seconds > work(steps)


def test_13_q3_several_reasons_at_once_on_every_seed():
    for seed in SWEEP:
        found = [reasons(case) for case in ex13.several_cases(Draw(seed))]
        assert all(len(r) >= 2 for r in found), found
        assert set().union(*found) == set(ex13.REASONS)


def test_13_q3_each_line_case_is_long_on_the_other_side_of_the_lessons_line_on_every_seed():
    for seed in SWEEP:
        for steps, long_seconds, long_dollars in ex13.line_cases(Draw(seed)):
            passed = "long" in reasons((steps, long_seconds, long_dollars))
            assert passed != ("long" in reasons((steps, 60.0, 1.0)))


def test_13_q3_the_work_or_the_dollars_is_exactly_the_line_on_every_seed():
    for seed in SWEEP:
        on_seconds, on_dollars = ex13.on_the_line_cases(Draw(seed))
        assert work(on_seconds[0]) == on_seconds[1] and dollars(on_dollars[0]) == on_dollars[2]
        for case in (on_seconds, on_dollars):
            assert "long" not in reasons(case)


# 13 · wrong answers, each failing the tests of its property ---------------------------------
NONE, LONG, IRREVERSIBLE, WAITS, SEVERAL, LINE, ON_THE_LINE = range(7)     # q3's tests, in order


def _reasons(steps, long_seconds, long_dollars, irreversible):
    long = work(steps) > long_seconds or dollars(steps) > long_dollars
    found = {"long"} if long else set()
    if irreversible:
        found.add("irreversible")
    if any(s["waits"] for s in steps):
        found.add("waits")
    return found


def total_harm_above_a_dollar(steps, long_seconds=60.0, long_dollars=1.0):
    return _reasons(steps, long_seconds, long_dollars, sum(s["harm"] for s in steps) > 1)


def total_harm_above_the_dollar_line(steps, long_seconds=60.0, long_dollars=1.0):
    return _reasons(steps, long_seconds, long_dollars,
                    sum(s["harm"] for s in steps) > long_dollars)


def some_harm_of_half_a_dollar(steps, long_seconds=60.0, long_dollars=1.0):
    return _reasons(steps, long_seconds, long_dollars, max(s["harm"] for s in steps) >= 0.5)


@pytest.mark.parametrize("wrong", [total_harm_above_a_dollar, total_harm_above_the_dollar_line,
                                   some_harm_of_half_a_dollar], ids=lambda f: f.__name__)
def test_13_q3_a_threshold_on_harm_fails_the_irreversible_test_on_every_seed(wrong):
    assert_fails("13_costs", "q3", [wrong], only=(IRREVERSIBLE,), expected={IRREVERSIBLE},
                 hint_has="however little")


def the_solution(steps, long_seconds=60.0, long_dollars=1.0):
    return _reasons(steps, long_seconds, long_dollars, any(s["harm"] > 0 for s in steps))


def joined_in_a_string(steps, long_seconds=60.0, long_dollars=1.0):
    return ", ".join(sorted(the_solution(steps, long_seconds, long_dollars)))


def capitalised(steps, long_seconds=60.0, long_dollars=1.0):
    return {r.capitalize() for r in the_solution(steps, long_seconds, long_dollars)}


def yes_and_no_as_words(steps, long_seconds=60.0, long_dollars=1.0):   # "no" is truthy
    found = the_solution(steps, long_seconds, long_dollars)
    return {r: "yes" if r in found else "no" for r in ex13.REASONS}


@pytest.mark.parametrize("wrong", [joined_in_a_string, capitalised, yes_and_no_as_words],
                         ids=lambda f: f.__name__)
def test_13_q3_an_answer_not_read_as_reasons_fails_where_there_are_reasons(wrong):
    assert_fails("13_costs", "q3", [wrong], only=(IRREVERSIBLE, WAITS, SEVERAL),
                 expected={IRREVERSIBLE, WAITS, SEVERAL})


def _long_by(measure):
    def reasons_for(steps, long_seconds=60.0, long_dollars=1.0):
        found = the_solution(steps, long_seconds, long_dollars) - {"long"}
        return found | ({"long"} if measure(steps, long_seconds, long_dollars) else set())
    reasons_for.__name__ = measure.__name__
    return reasons_for


def waits_are_work(steps, long_seconds, long_dollars):
    return sum(s["seconds"] for s in steps) > long_seconds or dollars(steps) > long_dollars


def the_longest_wait_or_step(steps, long_seconds, long_dollars):
    return max(s["seconds"] for s in steps) > long_seconds or dollars(steps) > long_dollars


def waits_count_half(steps, long_seconds, long_dollars):        # "someone is busy waiting"
    busy = sum(s["seconds"] * (0.5 if s["waits"] else 1) for s in steps)
    return busy > long_seconds or dollars(steps) > long_dollars


@pytest.mark.parametrize("measure", [waits_are_work, the_longest_wait_or_step,
                                     waits_count_half], ids=lambda f: f.__name__)
def test_13_q3_long_that_counts_waiting_fails_the_waits_test(measure):
    assert_fails("13_costs", "q3", [_long_by(measure)], only=(WAITS,), expected={WAITS})


def the_lessons_line(steps, long_seconds, long_dollars):
    return work(steps) > 60 or dollars(steps) > 1


def the_lower_of_the_two_lines(steps, long_seconds, long_dollars):
    return work(steps) > min(60, long_seconds) or dollars(steps) > min(1, long_dollars)


def seconds_line_only_passed(steps, long_seconds, long_dollars):
    return work(steps) > long_seconds or dollars(steps) > 1


@pytest.mark.parametrize("measure", [the_lessons_line, the_lower_of_the_two_lines,
                                     seconds_line_only_passed], ids=lambda f: f.__name__)
def test_13_q3_a_line_other_than_the_one_passed_fails_the_line_test(measure):
    assert_fails("13_costs", "q3", [_long_by(measure)], only=(LINE,), expected={LINE})


def at_or_over_the_line(steps, long_seconds, long_dollars):
    return work(steps) >= long_seconds or dollars(steps) >= long_dollars


def rounded_then_at_the_line(steps, long_seconds, long_dollars):
    return round(work(steps)) >= long_seconds or round(dollars(steps), 2) >= long_dollars


def over_the_line_less_a_cent(steps, long_seconds, long_dollars):
    return work(steps) > long_seconds - 0.5 or dollars(steps) > long_dollars - 0.01


@pytest.mark.parametrize("measure", [at_or_over_the_line, rounded_then_at_the_line,
                                     over_the_line_less_a_cent], ids=lambda f: f.__name__)
def test_13_q3_long_at_the_line_fails_the_boundary_test(measure):
    assert_fails("13_costs", "q3", [_long_by(measure)], only=(ON_THE_LINE,),
                 expected={ON_THE_LINE})


def the_first_reason_found(steps, long_seconds=60.0, long_dollars=1.0):
    found = the_solution(steps, long_seconds, long_dollars)
    return {next(r for r in ex13.REASONS if r in found)} if found else set()


def the_gravest_reason(steps, long_seconds=60.0, long_dollars=1.0):   # harm first, then waits
    found = the_solution(steps, long_seconds, long_dollars)
    return {next(r for r in ("irreversible", "waits", "long") if r in found)} if found else set()


def long_only_when_nothing_else(steps, long_seconds=60.0, long_dollars=1.0):
    found = the_solution(steps, long_seconds, long_dollars)
    return found - {"long"} if len(found) > 1 else found


@pytest.mark.parametrize("wrong", [the_first_reason_found, the_gravest_reason,
                                   long_only_when_nothing_else], ids=lambda f: f.__name__)
def test_13_q3_naming_fewer_than_every_reason_fails_the_several_test(wrong):
    assert_fails("13_costs", "q3", [wrong], only=(NONE, LONG, IRREVERSIBLE, WAITS, SEVERAL),
                 expected={SEVERAL})


# 13 · right answers written other ways: the question reads a set, a list, a tuple or a dict
def as_a_list(steps, long_seconds=60.0, long_dollars=1.0):
    return sorted(the_solution(steps, long_seconds, long_dollars))


def as_a_tuple_from_total_harm(steps, long_seconds=60.0, long_dollars=1.0):
    harmed = sum(s["harm"] for s in steps) > 0                 # harms are never negative
    return tuple(_reasons(steps, long_seconds, long_dollars, harmed))


def as_a_frozenset(steps, long_seconds=60.0, long_dollars=1.0):
    return frozenset(the_solution(steps, long_seconds, long_dollars))


def as_a_dict_of_bools(steps, long_seconds=60.0, long_dollars=1.0):
    found = the_solution(steps, long_seconds, long_dollars)
    return {r: r in found for r in ex13.REASONS}


@pytest.mark.parametrize("right", [the_solution, as_a_list, as_a_tuple_from_total_harm,
                                   as_a_frozenset, as_a_dict_of_bools],
                         ids=lambda f: f.__name__)
def test_13_q3_a_right_answer_in_any_shape_the_question_names_passes(right):
    assert_passes("13_costs", "q3", [right], seeds=WRONG_SEEDS)


def test_13_q3_the_test_numbers_here_are_the_checks():
    openings = ("no reason", "long:", "irreversible", "waits", "several", "long is judged",
                "on the line")
    assert [t.name.startswith(o) for t, o in zip(ex13.q3.tests, openings)] == [True] * 7


# no hint of 10 or 13 quotes the solution ------------------------------------------------------
@pytest.mark.parametrize("name", ["10_tracing", "13_costs"])
def test_no_hint_of_10_or_13_quotes_the_solution(name):
    """The audit of 01-07 (five code tokens in a row from a line of the solution, in a folded
    hint, a stub's hint or a check's message or hint), run on these two exercises."""
    from test_grading_properties_01_07 import test_no_hint_quotes_the_solution
    test_no_hint_quotes_the_solution(name)


# 10 · what an answer returns crosses as plain data, or as a span of the tree it was given ------
class EveryName(str):
    """A step's name that says it equals every name."""

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


def a_name_that_equals_every_name(tree):
    return EveryName("lookup")


def a_span_of_its_own_making(tree):             # claims the finisher it guessed: the last one
    last = tree.find(kind="execution")[-1]
    return Span("execution", last.name, last.start, last.end, "completed", last.worker)


def a_span_renamed_in_place(tree):              # the first execution, relabelled as the last
    executions = tree.find(kind="execution")
    first, last = executions[0], executions[-1]
    first.name, first.worker, first.status = last.name, last.worker, "completed"
    return first


def test_10_an_answer_of_its_own_class_or_span_is_not_taken_at_its_word():
    results = run_tests("10_tracing", "q1", [ex10.time_split, a_name_that_equals_every_name],
                        seed=1, only=(3,))
    assert "EveryName (a subclass of str)" in results[3].message, spelled_out(results)
    results = run_tests("10_tracing", "q3", [a_span_of_its_own_making], seed=1, only=(0,))
    assert "not one of the tree's" in results[0].message, spelled_out(results)
    assert_fails("10_tracing", "q3", [a_span_renamed_in_place], only=(0,), expected={0})


class EveryReason(str):
    """A reason that says it is every reason."""

    def __eq__(self, other):
        return True

    def __hash__(self):
        return hash("irreversible")


def reasons_that_match_anything(steps, long_seconds=60.0, long_dollars=1.0):
    return {EveryReason("irreversible")}


def test_13_q3_a_reason_of_its_own_class_is_refused_with_its_type_named():
    results = run_tests("13_costs", "q3", [reasons_that_match_anything], seed=1,
                        only=(IRREVERSIBLE,))
    assert "EveryReason (a subclass of str)" in results[IRREVERSIBLE].message, spelled_out(results)
