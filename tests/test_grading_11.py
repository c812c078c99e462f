"""Exercise 11 (a flood, a small tenant and a provider's limit) can be failed, and passed by
more than one route.

- The cases are drawn fresh and cover what the questions describe: a provider's limit from
  every band in each test of q2, tenants whose names the answer cannot know (and, once,
  names that share a prefix), and a flood long enough that B always arrives to a long
  queue of A's runs.
- Plausible wrong answers fail the tests that name their mistake, with a hint; right
  answers written another way pass; the solution passes on cases of several seeds.
- The learner's objects are not trusted: a queue is judged by its fields, not by what it
  would tell the engine, and a workflow the notebook registers under the storm's name
  cannot stand in for the storm's (the flood runs in a process of its own).
- Graded as a notebook, wrong answers fail the questions they should. (test_grading.py
  grades the solution to full marks and the untouched exercise to zero.)

Every flood is a second or so of work, so each test runs as few as show its point: a wrong
answer is run through the one test that names its mistake (with the cases that test draws
in a full check of that seed; a failing answer stops at its first failing case), a right
one through one flood judged as both questions judge it, the solution's two questions in
full once each, and one notebook of wrong answers graded once for three tests.
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


def key_for(tenant, i):                    # the solution's answers
    return tenant


def make_queue(limit):
    return dl.Queue("llm", rate=(limit, 1.0))


def run(qid, answer, seed):
    """The whole question, as check(...) runs it."""
    return checks.run_question(exercise(NAME), qid, (answer,), seed=seed)


def run_one(qid, name, answer, seed):
    """Test `name` of question `qid` alone, on the cases it draws in a full check with
    this seed (a test's cases depend on the seed, the question and its name only)."""
    question = exercise(NAME).questions[qid]
    only = [t for t in question.tests if t.name == name]
    alone = checks.Exercise(NAME, "", "", {qid: checks.Question(qid, question.title,
                                                               question.answers, only)})
    [result] = checks.run_question(alone, qid, (answer,), seed=seed).tests
    return result


def failing(result):
    return [t.name for t in result.tests if t.status != checks.PASSED]


def named(result, words=()):
    """A failed test's feedback: it names the case, has a hint, and holds `words`."""
    assert result.status == checks.FAILED and result.message and result.hint, result
    assert "requests a second; tenant" in result.message, result.message
    for word in words:
        assert word in result.message, result.message
    return result


def one_flood(make_queue, key_for, case):
    """One case judged as both questions judge it: the learner's queue and keys, read as
    the checks read them, flooded in a process of its own."""
    queue, keys = ex11.queue_of(make_queue, case.limit), ex11.keys_of(key_for, case)
    flood = ex11.simulate(queue, case, keys)
    ex11.judge_limit(flood, f"the queue {queue!r}")
    ex11.judge_busy(flood, f"the queue {queue!r}", "")
    ex11.judge_deadlines(flood, f"the queue {queue!r}", "", "", keys)
    return flood


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


def test_the_numbers_are_those_the_notebook_shows():
    """The notebook shows the rules from dl.lab, and the checks use the very same."""
    assert ex11.deadlines is dl.lab.flood_deadlines and ex11.WORKERS == dl.lab.FLOOD_WORKERS
    assert ex11.deadlines(10, 300, 10) == (1.25 * 31 + 7, 1.25 * 2 + 7)
    text = (ROOT / "solutions" / f"{NAME}.ipynb").read_text(encoding="utf-8")
    assert "A by 45.75 s, B by 9.50 s" in text
    assert f"{ex11.WORKERS} workers" in text and f"workers: {ex11.WORKERS}" in text
    assert "durable_lite.grading.exercises" not in text      # the learner's cells use dl.lab


# the solution ---------------------------------------------------------------------------------
# (The solution passes both questions, each test with one case of every band of limits: its
# notebook scores full marks in test_grading_every_notebook.py, on a new seed every run.)
@pytest.mark.parametrize("seed", [303, 404])
def test_the_solution_meets_both_questions_on_cases_of_more_seeds(seed):
    draw = Draw(seed)
    case = ex11.draw_case(draw, ex11.BANDS[seed % 3], lookalike=seed % 2 == 1)
    flood = one_flood(make_queue, key_for, case)
    assert flood.requests == case.a_runs + case.b_runs and flood.refused == 0


# q1: the key ----------------------------------------------------------------------------------
@pytest.mark.parametrize("key_for, seed", [
    (lambda tenant, i: hashlib.sha256(tenant.encode()).hexdigest(), 404),
    (lambda tenant, i: tenant.upper(), 505),
], ids=["hashed", "upper"])
def test_q1_right_keys_written_another_way_pass_even_for_lookalike_tenants(key_for, seed):
    result = run_one("q1", LOOKALIKE, key_for, seed)
    assert result.status == checks.PASSED, result


@pytest.mark.parametrize("key_for, test, seed, words", [
    (lambda tenant, i: None, TOGETHER, 101, ["None for every run"]),
    (lambda tenant, i: f"{tenant}-{i}", TOGETHER, 202, ["under", "shared none"]),
    (lambda tenant, i: "acme", TOGETHER, 303, ["'acme'"]),                # the lesson's key
    (lambda tenant, i: str(i), TOGETHER, 404, ["'0'"]),
    (lambda tenant, i: tenant.split("-")[0], LOOKALIKE, 606, ["both tenants' runs used"]),
], ids=["none", "a-key-per-run", "the-lessons-key", "by-index", "cut-from-the-name"])
def test_q1_wrong_keys_fail_the_test_that_names_their_mistake(key_for, test, seed, words):
    result = named(run_one("q1", test, key_for, seed), words)
    assert "B's deadline is" in result.message and "rate" not in result.message  # q2's answer stays hidden


def test_q1_a_key_that_is_not_a_string_is_named():
    result = run("q1", lambda tenant, i: hash(tenant), seed=11)
    assert failing(result) == BOTH_Q1
    assert "returned" in result.tests[0].message and "(int)" in result.tests[0].message


# q2: the limits -------------------------------------------------------------------------------
@pytest.mark.parametrize("make_queue, seed", [
    (lambda limit: dl.Queue("llm", concurrency=ex11.WORKERS, rate=(limit, 1.0)), 404),
    (lambda limit: dl.Queue("llm", per_key=4 * limit, rate=(limit, 1.0)), 606),
], ids=["with-concurrency", "a-roomy-per-key"])
def test_q2_right_queues_written_another_way_pass(make_queue, seed):
    draw = Draw(seed)
    one_flood(make_queue, key_for, ex11.draw_case(draw, ex11.BANDS[seed % 3]))


class HonestQueue(dl.Queue):
    """A subclass whose fields are what it enforces: judged like any queue."""


def test_q2_a_queue_is_flooded_as_the_plain_queue_its_fields_declare():
    """So a queue of another name, a subclass or whole seconds floods as the solution's
    does (the flood does not depend on the queue's name)."""
    for made in (dl.Queue("provider", rate=(9, 1)), HonestQueue("llm", rate=(9, 1.0))):
        queue = ex11.queue_of(lambda limit: made, 9)
        assert type(queue) is dl.Queue and queue.rate == (9, 1.0) and queue.limits_json() == \
            make_queue(9).limits_json()


@pytest.mark.parametrize("make_queue, test, seed, words", [
    (lambda limit: dl.Queue("llm", rate=(20, 1.0)), NEVER_OVER, 303, ["refused"]),  # the lesson's
    (lambda limit: dl.Queue("llm", rate=(2 * limit, 2.0)), NEVER_OVER, 505, ["refused"]),
    (lambda limit: dl.Queue("llm", rate=(limit + 1, 1.0)), NEVER_OVER, 606, ["refused"]),
    (lambda limit: dl.Queue("llm", concurrency=3 * limit), NEVER_OVER, 707, ["refused"]),
    (lambda limit: dl.Queue("llm", per_key=limit, rate=(limit, 1.0)), BUSY, 909, ["full"]),
    (lambda limit: dl.Queue("llm", rate=(limit - 1, 1.0)), BUSY, 505, ["full"]),  # a margin of one
], ids=["the-lessons-limit", "a-two-second-window", "one-over", "three-times-the-concurrency",
        "per-key-limit", "a-margin-of-one"])
def test_q2_wrong_queues_fail_the_test_that_names_their_mistake(make_queue, test, seed, words):
    result = named(run_one("q2", test, make_queue, seed), words)
    if test == NEVER_OVER:
        assert "in second" in result.message and "it answers" in result.message


class LyingQueue(dl.Queue):
    """Declares no limits in its fields, but tells the engine it has the solution's rate."""

    def limits_json(self):
        return dl.Queue(self.name, rate=(LyingQueue.limit, 1.0)).limits_json()


def test_q2_a_queue_is_judged_by_its_fields_not_by_what_it_would_tell_the_engine():
    def make_queue(limit):
        LyingQueue.limit = limit
        return LyingQueue("llm")
    result = named(run_one("q2", NEVER_OVER, make_queue, seed=12), ["Queue('llm')", "refused"])
    assert "rate" not in result.message


def test_q2_a_queue_that_is_not_a_queue_or_not_returned_is_named():
    result = run("q2", lambda limit: {"rate": (limit, 1.0)}, seed=13)
    assert failing(result) == BOTH_Q2 and "not a dl.Queue" in result.tests[0].message
    result = run("q2", lambda limit: None, seed=14)
    assert failing(result) == BOTH_Q2 and "returned None" in result.tests[0].message


def test_a_queue_without_limits_fails_both_tests_even_with_a_summarise_of_the_notebooks_own():
    """No deadline is met by going over the limit: the deadline test fails it too. And a
    notebook could register its own `summarise`, one that never calls the provider: in the
    notebook's process it would replace the storm's. The floods run elsewhere."""
    key = (storm.summarise.name, storm.summarise.version)
    storms = _registry[key]
    try:
        @dl.workflow("summarise", version=1)
        def summarise(ctx, provider, doc, tenant=None, jitter=True):
            return {"doc": doc, "tokens": 0}
        result = run("q2", lambda limit: dl.Queue("llm"), seed=15)
        assert failing(result) == BOTH_Q2
        named(result.tests[0], ["refused", "in second"])
        named(result.tests[1], ["no deadline is met by going over the limit"])
    finally:
        _registry[key] = storms


def test_trying_a_flood_in_the_notebook_prints_what_the_checks_judge(capsys):
    outcome = dl.lab.try_flood(make_queue, key_for, limit=6, a_runs=60, b_runs=5, b_at=2.0)
    out = capsys.readouterr().out
    assert outcome.statuses == {"completed": 65} and outcome.provider["refused"] == 0
    assert "0 refused, at most 6 in one second" in out and "(deadline 9.1 s)" in out
    assert "its full 6 in" in out and "seconds while runs waited" in out


# graded as a notebook -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wrong_notebook(tmp_path_factory):
    """A notebook with a key per run and a queue that counts runs in flight, graded once."""
    path = learner(NAME, tmp_path_factory.mktemp("ex11"), start="solutions", cells={
        "def key_for": "def key_for(tenant, i):\n    return f\"{tenant}-{i}\"\n",
        "def make_queue": "def make_queue(limit):\n    return dl.Queue(\"llm\", concurrency=limit)\n"})
    return grade_notebook(path, seed=2024)


def test_graded_as_a_notebook_each_question_fails(wrong_notebook):
    assert statuses(wrong_notebook) == {"q1": "failed", "q2": "failed"}, wrong_notebook.report()
    assert wrong_notebook.passed == 1 and wrong_notebook.total == 4


def test_graded_as_a_notebook_a_key_per_run_fails_both_tests_of_q1(wrong_notebook):
    assert failing_tests(wrong_notebook, "q1") == BOTH_Q1
    for test in wrong_notebook.question("q1")["tests"]:
        assert "the two tenants shared none" in test["message"] and test["hint"], test


def test_graded_as_a_notebook_counting_runs_in_flight_keeps_the_limit_but_idles_the_provider(
        wrong_notebook):
    """The first test of q2 passes (on a provider of every band), the second names the pace."""
    assert failing_tests(wrong_notebook, "q2") == [BUSY]
    [busy] = [t for t in wrong_notebook.question("q2")["tests"] if t["name"] == BUSY]
    for words in ("Queue('llm', concurrency=", "its full", "of those seconds"):
        assert words in busy["message"], busy["message"]


class AlwaysTheSameKey(str):
    """A key that says it equals every other key: any two runs would look alike."""

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


def test_q1_a_key_of_a_class_of_its_own_is_refused_with_its_type_named():
    result = run("q1", lambda tenant, i: AlwaysTheSameKey(tenant), seed=15)
    assert failing(result) == BOTH_Q1
    assert "AlwaysTheSameKey (a subclass of str)" in result.tests[0].message
