"""Step options, retry policies and budgets refuse nonsense when they are made.

An option is data the engine acts on in the middle of a run: a timeout read after the
step's function has started, a backoff computed after an attempt failed, a budget checked
before a step. A value found wrong only then fails the run after its effect happened, or
halts it for no reason. So every option is checked at construction, the way
`wait_for_signal` and `sleep` check theirs, and the error names the option and the value.
"""

import math

import pytest

from core_support import *  # noqa: F401,F403

NAN, INF = float("nan"), float("inf")

BAD_STEPS = [
    (dict(timeout=NAN), "timeout"), (dict(timeout=INF), "timeout"), (dict(timeout=1e300), "timeout"),
    (dict(timeout="5"), "timeout"), (dict(timeout=-1), "timeout"), (dict(timeout=0), "timeout"),
    (dict(timeout=True), "timeout"), (dict(cost=NAN), "cost"), (dict(cost=-0.5), "cost"),
    (dict(cost=INF), "cost"), (dict(cost="1"), "cost"), (dict(cost=True), "cost"),
    (dict(retry=3), "retry"), (dict(retry=None), "retry"),
]
BAD_RETRIES = [
    (dict(max_attempts=0), "max_attempts"), (dict(max_attempts=2.5), "max_attempts"),
    (dict(max_attempts=True), "max_attempts"), (dict(initial=NAN), "initial"),
    (dict(initial=-1), "initial"), (dict(initial=INF), "initial"), (dict(initial="1"), "initial"),
    (dict(multiplier=NAN), "multiplier"), (dict(multiplier=0), "multiplier"),
    (dict(multiplier=INF), "multiplier"), (dict(cap=INF), "cap"), (dict(cap=NAN), "cap"),
    (dict(cap=-2), "cap"), (dict(cap=1e300), "cap"), (dict(jitter="yes"), "jitter"),
    (dict(no_retry=ValueError), "no_retry"), (dict(no_retry=("oops",)), "no_retry"),
]
BAD_BUDGETS = [
    (dict(max_steps=-1), "max_steps"), (dict(max_steps=2.5), "max_steps"),
    (dict(max_steps=True), "max_steps"), (dict(max_cost=INF), "max_cost"),
    (dict(max_cost=NAN), "max_cost"), (dict(max_cost=-1), "max_cost"), (dict(max_cost="3"), "max_cost"),
    (dict(deadline=-5), "deadline"), (dict(deadline=INF), "deadline"),
    (dict(deadline=NAN), "deadline"), (dict(deadline=False), "deadline"),
]


def shown(value):
    return "nan" if isinstance(value, float) and math.isnan(value) else repr(value)


@pytest.mark.parametrize("options, option", BAD_STEPS)
def test_a_step_option_that_makes_no_sense_is_refused_naming_the_option(options, option):
    with pytest.raises((ValueError, TypeError)) as err:
        dl.Step("charge", **options)
    message = str(err.value)
    assert option in message and "'charge'" in message, message
    assert shown(options[option]) in message, message


@pytest.mark.parametrize("options, option", BAD_RETRIES)
def test_a_retry_option_that_makes_no_sense_is_refused_naming_the_option(options, option):
    with pytest.raises((ValueError, TypeError)) as err:
        dl.Retry(**options)
    assert option in str(err.value) and shown(options[option]) in str(err.value), str(err.value)


@pytest.mark.parametrize("options, option", BAD_BUDGETS)
def test_a_budget_option_that_makes_no_sense_is_refused_naming_the_option(options, option):
    with pytest.raises((ValueError, TypeError)) as err:
        dl.Budget(**options)
    assert option in str(err.value) and shown(options[option]) in str(err.value), str(err.value)


def test_sensible_options_are_accepted_as_given():
    assert dl.Step("s", timeout=2, cost=0).timeout == 2
    assert dl.Step("s", cost=lambda result: 1.0).cost_of(None) == 1.0
    assert dl.Retry(max_attempts=1, initial=0, multiplier=1, cap=0, jitter=False).delay(1) == 0
    assert dl.Retry(no_retry=(KeyError, ValueError)).no_retry == (KeyError, ValueError)
    assert dl.Budget(max_steps=0, max_cost=0, deadline=0) == dl.Budget(0, 0, 0)
    assert dl.Budget().to_json() == {"max_steps": None, "max_cost": None, "deadline": None}


def test_a_huge_multiplier_waits_the_cap_instead_of_overflowing(engine):
    calls = []

    def flaky():
        calls.append(engine.clock())
        raise OSError("down")

    @dl.workflow("options-huge-multiplier")
    def huge(ctx):
        retry = dl.Retry(max_attempts=4, initial=1, multiplier=1e308, cap=30, jitter=False)
        return ctx.step(dl.Step("flaky", retry=retry), flaky)

    run = engine.start(huge, run_id="huge")
    assert run.status == dl.FAILED and "after 4 attempt(s)" in run.error, run.error
    assert [b - a for a, b in zip(calls, calls[1:])] == [1, 30, 30]


def test_a_step_with_a_refused_option_never_runs_its_function(engine):
    effects = []

    @dl.workflow("options-never-run")
    def never(ctx):
        return ctx.step(dl.Step("charge", timeout=float("nan")), effects.append, 1)

    run = engine.start(never, run_id="never")
    assert run.status == dl.FAILED and "timeout" in run.error and effects == []
