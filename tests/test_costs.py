"""durable_lite.costs: the break-even arithmetic of lesson 13, checked by hand and by a
simulation of crashing runs (formulas are only as good as the runs they predict)."""

import math
import random

import pytest

from durable_lite import costs
from durable_lite.costs import StepCost, Workload

H = 23e-6            # a SQLiteStore checkpoint, roughly


# the chance of a crash --------------------------------------------------------------------
def test_crash_chance_is_one_minus_exp_of_the_expected_number_of_crashes():
    assert costs.crash_chance(3600, 1.0) == pytest.approx(1 - math.exp(-1))
    assert costs.crash_chance(0, 5.0) == 0
    assert costs.crash_chance(10, 0) == 0
    with pytest.raises(ValueError):
        costs.crash_chance(-1, 1)


# attempts, by hand ------------------------------------------------------------------------
def _two_steps():
    return (StepCost("a", 3600), StepCost("b", 7200))


def test_attempts_by_hand_for_two_steps():
    p1, p2 = math.exp(-1), math.exp(-2)               # one crash an hour: 1 h and 2 h steps
    assert costs.attempts_resumed(_two_steps(), 1.0) == pytest.approx([1 / p1, 1 / p2])
    assert costs.attempts_from_the_top(_two_steps(), 1.0) == pytest.approx([1 / (p1 * p2), 1 / p2])
    # step a is completed 1/p2 times: every crash in b sends the run back through it
    assert costs.duplicates_from_the_top(_two_steps(), 1.0) == pytest.approx([1 / p2 - 1, 0])


def test_without_crashes_every_step_runs_once_either_way():
    steps = costs.example("refund").steps
    assert costs.attempts_resumed(steps, 0) == [1.0] * 4
    assert costs.attempts_from_the_top(steps, 0) == [1.0] * 4
    assert costs.duplicates_from_the_top(steps, 0) == [0.0] * 4


def test_a_durable_wait_holds_no_process_so_no_crash_lands_in_it():
    wait = (StepCost("ask", 1), StepCost("wait", 8 * 3600, waits=True), StepCost("grant", 1))
    assert costs.attempts_resumed(wait, 0.5)[1] == 1.0
    assert costs.attempts_from_the_top(wait, 0.5)[1] == pytest.approx(math.exp(4), rel=1e-3)


# attempts, by simulation ------------------------------------------------------------------
def _simulate(steps, crashes_per_hour, durable, runs, seed):
    """Run the workload `runs` times; a crash lands in an attempt with its crash chance.
    Returns mean attempts per step and mean completions per step."""
    rng = random.Random(seed)
    chance = [0.0 if durable and s.waits else costs.crash_chance(s.seconds, crashes_per_hour)
              for s in steps]
    attempts, completions = [0] * len(steps), [0] * len(steps)
    for _ in range(runs):
        j = 0
        while j < len(steps):
            attempts[j] += 1
            if rng.random() < chance[j]:               # crashed inside step j
                if not durable:
                    j = 0                              # from the top
                continue                               # resumed: step j again
            completions[j] += 1
            j += 1
    return [a / runs for a in attempts], [c / runs for c in completions]


@pytest.mark.parametrize("durable", [True, False])
def test_the_formulas_predict_simulated_crashing_runs(durable):
    steps = (StepCost("a", 600), StepCost("b", 1800), StepCost("c", 300, harm=1.0),
             StepCost("d", 1200))
    rate = 0.4                                         # crash chances of 4 % to 18 % a step
    seen, done = _simulate(steps, rate, durable, runs=20000, seed=13)
    if durable:
        assert seen == pytest.approx(costs.attempts_resumed(steps, rate), rel=0.03)
        assert done == [1.0] * 4
    else:
        assert seen == pytest.approx(costs.attempts_from_the_top(steps, rate), rel=0.03)
        extra = [c - 1 for c in done]
        assert extra == pytest.approx(costs.duplicates_from_the_top(steps, rate), rel=0.05,
                                      abs=0.01)


# expected costs and the balance -----------------------------------------------------------
def test_expected_cost_without_crashes_is_one_clean_run():
    w = costs.example("nightly research report")
    for durable in (True, False):
        e = costs.expected(w, 0, durable)
        assert e.worker_seconds == pytest.approx(w.work_seconds)
        assert e.dollars == pytest.approx(w.dollars)
        assert e.duplicates == 0 and e.harm == 0
    assert costs.expected(w, 0, True).checkpoints == len(w.steps)


def test_balance_adds_seconds_priced_model_dollars_and_harm():
    w = costs.example("refund")
    b = costs.balance(w, 0.5, H, worker_dollars_per_hour=3.6)    # a second costs $0.001
    assert b.dollars(1.0) == pytest.approx(0.001)
    assert b.spent_seconds == pytest.approx(4 * H)
    assert b.saved == pytest.approx(b.saved_seconds * 0.001 + b.saved_model_dollars + b.harm)
    assert b.duplicates > 0 and b.harm == pytest.approx(
        costs.expected(w, 0.5, durable=False).harm)
    assert b.pays and b.ratio == pytest.approx(b.saved / b.spent)


def test_no_crashes_no_waits_nothing_saved_checkpoints_are_pure_cost():
    b = costs.balance(costs.example("thumbnail batch"), 0, H)
    assert b.saved == 0 and b.spent > 0 and not b.pays and b.ratio == 0


def test_holding_a_wait_costs_worker_time_even_without_a_crash():
    w = costs.example("access request")
    b = costs.balance(w, 0, H)
    assert b.saved_seconds == pytest.approx(8 * 3600)


# the break-even ----------------------------------------------------------------------------
@pytest.mark.parametrize("seconds,dollars,rate", [(2.0, 0.004, 0.1), (0.3, 0.0, 0.1),
                                                  (0.002, 0.0, 100.0)])
def test_break_even_steps_is_where_the_balance_turns(seconds, dollars, rate):
    n = costs.break_even_steps(seconds, rate, H, dollars)
    assert n is not None and n >= 2
    at = costs.balance(Workload.uniform("u", n, seconds, dollars), rate, H)
    before = costs.balance(Workload.uniform("u", n - 1, seconds, dollars), rate, H)
    assert at.pays and not before.pays


def test_break_even_steps_is_none_when_nothing_could_pay():
    assert costs.break_even_steps(0.002, 0.0, H) is None              # no crashes at all
    assert costs.break_even_steps(1e-6, 0.01, H, limit=1000) is None


@pytest.mark.parametrize("steps,seconds,dollars", [(10, 0.3, 0.0), (3, 2.0, 0.004),
                                                    (1000, 0.002, 0.0), (40, 30.0, 0.04)])
def test_break_even_crash_rate_is_where_the_balance_turns(steps, seconds, dollars):
    rate = costs.break_even_crash_rate(steps, seconds, H, dollars)
    w = Workload.uniform("u", steps, seconds, dollars)
    assert costs.balance(w, rate * 1.01, H).pays
    assert not costs.balance(w, rate * 0.99, H).pays


@pytest.mark.parametrize("steps,seconds,dollars", [(10, 0.3, 0.0), (3, 2.0, 0.004),
                                                    (200, 1.0, 0.01)])
def test_the_rule_of_thumb_agrees_when_crashes_are_rare(steps, seconds, dollars):
    price = costs.WORKER_DOLLARS_PER_HOUR / 3600
    w, h = seconds * price + dollars, H * price
    thumb = 2 * h * 3600 / ((steps - 1) * w * seconds)          # from h = w q (n-1) / 2
    assert costs.break_even_crash_rate(steps, seconds, H, dollars) == pytest.approx(thumb, rel=0.01)


def test_the_rule_of_thumb_never_says_pays_where_the_exact_formula_does_not():
    # the exact saving grows faster than the first-order one, so the exact break-even rate
    # is never above the rule's
    price = costs.WORKER_DOLLARS_PER_HOUR / 3600
    for steps in (2, 10, 100, 1000):
        for seconds in (0.01, 1.0, 100.0):
            thumb = 2 * H * 3600 / ((steps - 1) * seconds * seconds * price) * price
            assert costs.break_even_crash_rate(steps, seconds, H) <= thumb * (1 + 1e-9)


def test_break_even_edges():
    assert costs.break_even_crash_rate(1, 1.0, H) == math.inf        # one step: nothing to save
    assert costs.break_even_crash_rate(10, 0.0, H) == math.inf       # no time for a crash
    assert costs.break_even_crash_rate(10, 1.0, 0.0) == 0.0          # free checkpoints


# the decision table ----------------------------------------------------------------------
ANSWER_KEY = {
    "ticket summary": {"long": False, "irreversible": False, "waits": False},
    "thumbnail batch": {"long": False, "irreversible": False, "waits": False},
    "nightly research report": {"long": True, "irreversible": False, "waits": False},
    "refund": {"long": False, "irreversible": True, "waits": False},
    "access request": {"long": False, "irreversible": False, "waits": True},
}


def test_the_five_examples_show_each_reason_alone_and_two_runs_not_worth_it():
    assert {w.name: costs.reasons(w) for w in costs.EXAMPLES} == ANSWER_KEY
    verdicts = [costs.verdict(costs.reasons(w)) for w in costs.EXAMPLES]
    assert verdicts.count(costs.RETRY) == 2 and verdicts.count(costs.DURABLE) == 3


def test_many_steps_are_not_long_and_a_dollar_is():
    assert not costs.reasons(costs.example("thumbnail batch"))["long"]     # 1,000 steps, 2 s
    pricey = Workload("one expensive call", (StepCost("call", 5, dollars=1.5),))
    assert costs.reasons(pricey)["long"]
    assert costs.reasons(pricey, long_dollars=2.0)["long"] is False


def test_check_table_finds_every_wrong_or_missing_cell_and_says_why():
    assert costs.check_table(ANSWER_KEY) == []
    assert len(costs.check_table({})) == 15
    wrong = {**ANSWER_KEY, "thumbnail batch": {**ANSWER_KEY["thumbnail batch"], "long": True}}
    (miss,) = costs.check_table(wrong)
    assert (miss.workload, miss.reason, miss.given, miss.expected) == \
        ("thumbnail batch", "long", True, False)
    assert "2.0 s of work" in miss.why
    truthy = {**ANSWER_KEY, "refund": {**ANSWER_KEY["refund"], "irreversible": 1}}
    assert len(costs.check_table(truthy)) == 1                 # an answer is True or False


def test_explanations_name_the_fact():
    assert "'issue refund'" in costs.explain(costs.example("refund"), "irreversible")
    assert "'wait for manager'" in costs.explain(costs.example("access request"), "waits")
    assert "$0.004" in costs.explain(costs.example("ticket summary"), "long")
    with pytest.raises(ValueError):
        costs.explain(costs.example("refund"), "fun")


def test_bad_input_is_refused_with_the_step_named():
    with pytest.raises(ValueError, match="step 'x': seconds"):
        StepCost("x", float("nan"))
    with pytest.raises(ValueError, match="step 'y': harm"):
        StepCost("y", 1, harm=-1)
    with pytest.raises(ValueError, match="no steps"):
        Workload("empty", ())
    with pytest.raises(KeyError, match="no example workload"):
        costs.example("payroll")


def test_money_is_written_as_people_write_it():
    assert [costs.money(x) for x in (0, 0.004, 0.8, 1234.5)] == ["0.00", "0.004", "0.80", "1,234.50"]
