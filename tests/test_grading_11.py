"""Exercise 11 (a flood, a small tenant and a provider's limit) can be failed, and passed by
more than one route.

- The cases are drawn fresh and cover what the questions describe: a provider's limit from
  every band in each test of q2, tenants whose names the answer cannot know (and, once,
  names that share a prefix), and a flood long enough that B always arrives to a long
  queue of A's runs.
- Plausible wrong answers fail the tests that name their mistake, with a hint, on one or
  more seeds; right answers written another way pass.
- The learner's objects are not trusted: a queue is judged by its fields, not by what it
  would tell the engine, and a workflow the notebook registers under the storm's name
  cannot stand in for the storm's (the flood runs in a process of its own).
- Graded as a notebook, wrong answers fail the questions they should. (test_grading.py
  grades the solution to full marks and the untouched exercise to zero.)

Each flood takes about a second; a failing answer stops at its first failing case.
"""

import hashlib

import pytest

import durable_lite as dl
from durable_lite import storm
from durable_lite.workflow import _registry
from durable_lite.grading import checks, exercise
from durable_lite.grading.cases import Draw
from durable_lite.grading.exercises import ex11_flow_control as ex11
from durable_lite.grading.generate import render
from durable_lite.grading.grader import grade_notebook

from grading_support import ROOT, failing_tests, learner, statuses

NAME = "11_flow_control"
TOGETHER, LOOKALIKE = (t.name for t in ex11.q1.tests)
NEVER_OVER, BUSY = (t.name for t in ex11.q2.tests)
BOTH_Q1, BOTH_Q2 = [TOGETHER, LOOKALIKE], [NEVER_OVER, BUSY]


def run(qid, answer, seed):
    return checks.run_question(exercise(NAME), qid, (answer,), seed=seed)


def failing(result):
    return [t.name for t in result.tests if t.status != checks.PASSED]


def fails(qid, answer, expected, seeds, words=()):
    """The answer fails exactly the tests `expected` names, on every seed, each with a
    message that names the case and a hint; the first failure's message holds `words`."""
    for seed in seeds:
        result = run(qid, answer, seed)
        assert failing(result) == expected, f"seed {seed}:\n{result.report()}"
        failed = [t for t in result.tests if t.status != checks.PASSED]
        for test in failed:
            assert test.status == checks.FAILED and test.message and test.hint, test
            assert "requests a second; tenant" in test.message, test.message
        for word in words:
            assert word in failed[0].message, failed[0].message
    return result


def passes(qid, answer, seeds):
    for seed in seeds:
        result = run(qid, answer, seed)
        assert result.status == checks.PASSED, f"seed {seed}:\n{result.report()}"


def meets_the_deadlines(make_queue, seed):
    """q2's deadline test alone (it fails a refusal or an unfinished run too): half the
    floods of the whole question, for answers that differ from the solution's in form."""
    test = next(t for t in ex11.q2.tests if t.name == BUSY)
    test.fn(make_queue, draw=Draw(seed))


def test_the_exercise_is_generated_from_its_solution():
    text = (ROOT / "exercises" / f"{NAME}.ipynb").read_text(encoding="utf-8")
    assert text == render(ROOT / "solutions" / f"{NAME}.ipynb")
    assert "BEGIN SOLUTION" not in text and "rate=(limit" not in text and "return tenant" not in text


# the cases ------------------------------------------------------------------------------------
def test_cases_are_new_on_every_run_and_every_test_of_q2_meets_every_band_of_limits():
    seen = set()
    for seed in range(200):
        cases = ex11.draw_cases(Draw(seed))
        assert sorted(ex11.BANDS.index(next(b for b in ex11.BANDS if b[0] <= c.limit <= b[1]))
                      for c in cases) == [0, 1, 2]
        for case in cases:
            assert case.a_name != case.b_name
            assert case.a_name.split("-")[0] != case.b_name.split("-")[0]
            seen.add(case)
    assert len(seen) == 600
    limits = {c.limit for c in seen}
    assert limits == set(range(6, 15))          # 20, the lesson's limit, is never drawn


def test_lookalike_tenants_share_everything_but_the_end_of_their_names():
    for seed in range(200):
        case = ex11.draw_case(Draw(seed), ex11.BANDS[1], lookalike=True)
        a, b = case.a_name, case.b_name
        assert a != b and a.split("-")[0] == b.split("-")[0] and len(a) == len(b)


def test_b_always_arrives_to_a_long_queue_of_a_and_its_deadline_is_shorter_than_that_wait():
    """Without keys, B's runs wait behind the rest of A's flood: longer than B's deadline."""
    for seed in range(500):
        for case in ex11.draw_cases(Draw(seed)):
            backlog = case.a_runs / case.limit - case.b_at      # A's runs still waiting, in seconds
            a_deadline, b_deadline = case.deadlines
            assert backlog >= 16.5 and b_deadline < backlog - 3, case
            assert a_deadline > 1.25 * (case.a_runs + case.b_runs) / case.limit


def test_the_deadlines_are_those_the_notebook_shows():
    assert ex11.deadlines(10, 300, 10) == (1.25 * 31 + 7, 1.25 * 2 + 7)
    text = (ROOT / "solutions" / f"{NAME}.ipynb").read_text(encoding="utf-8")
    assert "A by 45.75 s, B by 9.50 s" in text


# q1: the key ----------------------------------------------------------------------------------
def test_q1_the_solutions_keys_pass():
    passes("q1", lambda tenant, i: tenant, seeds=(101, 202))


@pytest.mark.parametrize("key_for, seed", [
    (lambda tenant, i: f"tenant:{tenant}", 303),
    (lambda tenant, i: hashlib.sha256(tenant.encode()).hexdigest(), 404),
    (lambda tenant, i: tenant.upper(), 505),
], ids=["prefixed", "hashed", "upper"])
def test_q1_right_keys_written_another_way_pass(key_for, seed):
    passes("q1", key_for, seeds=(seed,))


@pytest.mark.parametrize("key_for, expected, seeds, words", [
    (lambda tenant, i: None, BOTH_Q1, (101, 202), ["None for every run"]),
    (lambda tenant, i: f"{tenant}-{i}", BOTH_Q1, (101, 202), ["under", "shared none"]),
    (lambda tenant, i: "llm", BOTH_Q1, (303,), ["'llm'"]),
    (lambda tenant, i: str(i), BOTH_Q1, (404,), ["'0'"]),
    (lambda tenant, i: "B" if tenant == "B" else "A", BOTH_Q1, (505,), ["'A'"]),   # the lesson's names
    (lambda tenant, i: tenant.split("-")[0], [LOOKALIKE], (606,), ["both tenants' runs used"]),
], ids=["none", "a-key-per-run", "one-key-for-all", "by-index", "the-lessons-tenants",
        "cut-from-the-name"])
def test_q1_wrong_keys_fail_the_tests_that_name_their_mistake(key_for, expected, seeds, words):
    result = fails("q1", key_for, expected, seeds, words)
    message = next(t.message for t in result.tests if t.status != checks.PASSED)
    assert "B's deadline is" in message and "rate" not in message     # q2's answer stays hidden


def test_q1_a_key_that_is_not_a_string_is_named():
    result = run("q1", lambda tenant, i: hash(tenant), seed=11)
    assert failing(result) == BOTH_Q1
    assert "returned" in result.tests[0].message and "(int)" in result.tests[0].message


# q2: the limits -------------------------------------------------------------------------------
def test_q2_the_solutions_queue_passes():
    passes("q2", lambda limit: dl.Queue("llm", rate=(limit, 1.0)), seeds=(101, 202))


class HonestQueue(dl.Queue):
    """A subclass whose fields are what it enforces: judged like any queue."""


@pytest.mark.parametrize("make_queue, seed", [
    (lambda limit: dl.Queue("provider", rate=(limit, 1)), 303),
    (lambda limit: dl.Queue("llm", concurrency=ex11.WORKERS, rate=(limit, 1.0)), 404),
    (lambda limit: dl.Queue("llm", rate=(limit - 1, 1.0)), 505),        # a margin of one
    (lambda limit: dl.Queue("llm", per_key=4 * limit, rate=(limit, 1.0)), 606),
    (lambda limit: HonestQueue("llm", rate=(limit, 1.0)), 707),
], ids=["whole-seconds", "with-concurrency", "a-margin", "a-roomy-per-key", "a-subclass"])
def test_q2_right_queues_written_another_way_pass(make_queue, seed):
    meets_the_deadlines(make_queue, seed)


@pytest.mark.parametrize("make_queue, expected, seeds, words", [
    (lambda limit: dl.Queue("llm", concurrency=limit), [BUSY], (101, 202), ["a second on average", "A's deadline"]),
    (lambda limit: dl.Queue("llm"), BOTH_Q2, (101,), ["refused"]),
    (lambda limit: dl.Queue("llm", rate=(20, 1.0)), BOTH_Q2, (303,), ["refused"]),  # the lesson's
    (lambda limit: dl.Queue("llm", rate=(2 * limit, 2.0)), BOTH_Q2, (505,), ["refused"]),
    (lambda limit: dl.Queue("llm", rate=(limit + 1, 1.0)), BOTH_Q2, (606,), ["refused"]),
    (lambda limit: dl.Queue("llm", concurrency=3 * limit), BOTH_Q2, (707,), ["refused"]),
    (lambda limit: dl.Queue("llm", concurrency=limit, rate=(limit, 1.0)), [BUSY], (808,), ["A's deadline"]),
    (lambda limit: dl.Queue("llm", per_key=limit, rate=(limit, 1.0)), [BUSY], (909,), ["A's deadline"]),
    (lambda limit: dl.Queue("llm", rate=(max(1, limit // 2), 1.0)), [BUSY], (111,), ["A's deadline"]),
], ids=["concurrency-limit", "no-limits", "the-lessons-limit", "a-two-second-window",
        "one-over", "three-times-the-concurrency", "rate-and-concurrency", "per-key-limit",
        "half-the-rate"])
def test_q2_wrong_queues_fail_the_tests_that_name_their_mistake(make_queue, expected, seeds, words):
    fails("q2", make_queue, expected, seeds, words)


class LyingQueue(dl.Queue):
    """Declares no limits in its fields, but tells the engine it has the solution's rate."""

    def limits_json(self):
        return dl.Queue(self.name, rate=(LyingQueue.limit, 1.0)).limits_json()


def test_q2_a_queue_is_judged_by_its_fields_not_by_what_it_would_tell_the_engine():
    def make_queue(limit):
        LyingQueue.limit = limit
        return LyingQueue("llm")
    result = fails("q2", make_queue, BOTH_Q2, seeds=(12,), words=["Queue('llm')"])
    assert "rate" not in result.tests[0].message


def test_q2_a_queue_that_is_not_a_queue_or_not_returned_is_named():
    result = run("q2", lambda limit: {"rate": (limit, 1.0)}, seed=13)
    assert failing(result) == BOTH_Q2 and "not a dl.Queue" in result.tests[0].message
    result = run("q2", lambda limit: None, seed=14)
    assert failing(result) == BOTH_Q2 and "returned None" in result.tests[0].message


def test_a_workflow_registered_under_the_storms_name_does_not_stand_in_for_it():
    """A notebook could register its own `summarise`, one that never calls the provider:
    in the notebook's process it would replace the storm's. The floods run elsewhere."""
    key = (storm.summarise.name, storm.summarise.version)
    storms = _registry[key]
    try:
        @dl.workflow("summarise", version=1)
        def summarise(ctx, provider, doc, tenant=None, jitter=True):
            return {"doc": doc, "tokens": 0}
        fails("q2", lambda limit: dl.Queue("llm"), BOTH_Q2, seeds=(15,), words=["refused"])
    finally:
        _registry[key] = storms


def test_trying_a_flood_in_the_notebook_prints_what_the_checks_judge(capsys):
    outcome = ex11.try_flood(lambda limit: dl.Queue("llm", rate=(limit, 1.0)), lambda t, i: t,
                             limit=6, a_runs=60, b_runs=5, b_at=2.0)
    out = capsys.readouterr().out
    assert outcome.statuses == {"completed": 65} and outcome.provider["refused"] == 0
    assert "0 refused, at most 6 in one second" in out and "(deadline 9.1 s)" in out


# graded as a notebook -------------------------------------------------------------------------
def test_a_notebook_of_wrong_answers_fails_each_question_where_it_should(tmp_path):
    path = learner(NAME, tmp_path, start="solutions", cells={
        "def key_for": "def key_for(tenant, i):\n    return f\"{tenant}-{i}\"\n",
        "def make_queue": "def make_queue(limit):\n    return dl.Queue(\"llm\", concurrency=limit)\n"})
    score = grade_notebook(path, seed=2024)
    assert statuses(score) == {"q1": "failed", "q2": "failed"}, score.report()
    assert failing_tests(score, "q1") == BOTH_Q1
    assert failing_tests(score, "q2") == [BUSY]
