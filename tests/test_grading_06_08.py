"""Exercises 06-08 can be failed: known-wrong answers fail the question they should, with
feedback that says why (test_grading.py grades every solution and untouched exercise).

The notebook-level tests grade real notebooks with the grader (one kernel each); the
in-process tests at the end call the checks directly with more wrong answers.
"""


import re

import pytest

import durable_lite as dl
from durable_lite.examples import world_at
from durable_lite.grading import checks, exercise
from durable_lite.grading.generate import render
from durable_lite.grading.grader import grade_notebook

from given_code import notify, write_draft
from grading_support import ROOT, failing_tests, statuses, with_code
NAMES = ["06_choose_k", "07_approval_deadline", "08_budgets"]
DAY = 24 * 3600


# generated files ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_the_exercise_is_generated_from_its_solution(name):
    text = (ROOT / "exercises" / f"{name}.ipynb").read_text(encoding="utf-8")
    assert text == render(ROOT / "solutions" / f"{name}.ipynb")
    assert "BEGIN SOLUTION" not in text and "Instructor" not in text


# known-wrong answers, graded as notebooks ---------------------------------------------------
ONE_TOO_SMALL = '''
def smallest_k(p, n, target):
    k = 1
    while (1 - (1 - p) ** k) ** n < target:
        k += 1
    return max(1, k - 1)          # wrong: one attempt short of the target
'''


def test_a_k_one_too_small_fails_q1_only(tmp_path):
    score = grade_notebook(with_code("06_choose_k", "def smallest_k", ONE_TOO_SMALL, tmp_path))
    assert statuses(score) == {"q1": "failed", "q2": "passed"}, score.report()
    assert failing_tests(score, "q1") == [
        "the k it returns reaches the target: (1 - (1-p)**k)**n >= target",
        'on the boundary: a k whose run finishes exactly at the target is enough ("at least")']
    test = score.question("q1")["tests"][0]
    assert re.search(r"smallest_k\([\d.]+, \d+, [\d.]+\) = \d+, but with \d+ attempt", test["message"])
    assert "one attempt short" in test["hint"]


NO_DEADLINE = '''
@dl.workflow("ex07-publish-post", version=1)
def publish_post(ctx, folder, post_id):
    draft = ctx.step("draft", write_draft, folder, post_id)
    ctx.step("ask-editor", notify, folder, EDITOR, f"Please review {post_id}")
    decision = ctx.wait_for_signal("approval", timeout=3650 * DAY)   # wrong: "no deadline"
    if decision["approved"]:
        ctx.step("publish", publish, folder, post_id, draft["text"])
        return {"post": post_id, "outcome": "published", "by": decision["by"]}
    ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} was rejected")
    return {"post": post_id, "outcome": "rejected", "by": decision["by"]}
'''


def test_a_wait_without_a_real_deadline_or_escalation_fails_the_deadline_tests(tmp_path):
    score = grade_notebook(with_code("07_approval_deadline", "def publish_post", NO_DEADLINE, tmp_path))
    assert statuses(score) == {"q1": "failed"}, score.report()
    assert [name.split(":")[0] for name in failing_tests(score, "q1")] == [
        "start() returns at once", "no answer for a day",
        "after the escalation the manager's answer counts",
        "after the escalation the manager rejects", "nobody answers for two days",
        "on every path the steps are recorded under the names the task gives",
        "restarted between every two actions (the run started here; the editor's day running "
        "out, then the manager's approval, each handled by a new Python process)"]
    assert score.passed == 2        # approve and reject within the day still work


ATTEMPT_LOCAL = '''
def start_agent(engine, agent, folder, run_id):
    global worker_limit
    worker_limit = StepLimit(MAX_STEPS)        # wrong: restarts at zero in every worker
    return engine.start(agent, folder, GOAL, run_id=run_id)
'''


def test_an_attempt_local_budget_fails_q2_only(tmp_path):
    score = grade_notebook(with_code("08_budgets", "def start_agent(", ATTEMPT_LOCAL, tmp_path))
    assert statuses(score) == {"q1": "passed", "q2": "failed"}, score.report()
    assert len(failing_tests(score, "q2")) == 3
    messages = [t["message"] for t in score.question("q2")["tests"]]
    assert any(re.search(r"made \d+ model calls across \d+ worker\(s\), with MAX_STEPS = \d+", m)
               for m in messages), messages


# more wrong answers, checked in this process (fast) ---------------------------------------
def run(exercise_id, qid, *answers):
    return checks.run_question(exercise(exercise_id), qid, answers)


def names_failing(result):
    return [t.name for t in result.tests if t.status != checks.PASSED]


def test_06_the_restart_formula_gives_a_k_that_is_too_big():
    def restart_k(p, n, target):
        k = 1
        while 1 - (1 - p ** n) ** k < target:
            k += 1
        return k

    result = run("06_choose_k", "q1", restart_k)
    failing = names_failing(result)
    assert "and it is the smallest: with one attempt fewer the run misses the target" in failing
    assert set(failing) <= {"and it is the smallest: with one attempt fewer the run misses the target",
                            'on the boundary: a k whose run finishes exactly at the target is '
                            'enough ("at least")'}


def test_06_a_float_or_a_zero_is_not_a_number_of_attempts():
    assert run("06_choose_k", "q1", lambda p, n, t: 3.0).passed == 0
    assert run("06_choose_k", "q1", lambda p, n, t: 0).passed == 0


def flaky_tool(folder, name):
    return world_at(folder).tools.call(name)


@dl.workflow("test-ex06-no-retry", version=1)
def plan_without_retry(ctx, folder, n, k):
    for i in range(1, n + 1):
        ctx.step(f"task-{i}", flaky_tool, folder, f"task-{i}")        # wrong: k is ignored
    return {"tasks": n}


@dl.workflow("test-ex06-restart", version=1)
def plan_that_restarts(ctx, folder, n, k):
    # wrong: k attempts of the whole plan, each a fresh set of steps
    for attempt in range(1, k + 1):
        try:
            for i in range(1, n + 1):
                ctx.step(f"task-{i}", flaky_tool, folder, f"task-{i}")
            return {"tasks": n}
        except dl.StepFailed:
            continue
    raise RuntimeError("gave up")


def test_06_a_plan_without_per_step_retry_fails_q2():
    result = run("06_choose_k", "q2", plan_without_retry)
    assert result.status == checks.FAILED
    assert [name.split(":")[0].split(",")[0] for name in names_failing(result)] == [
        "each step gets up to k attempts of its own", "the engine does the retrying", "simulated"]


def test_06_a_plan_that_restarts_from_the_top_fails_q2():
    result = run("06_choose_k", "q2", plan_that_restarts)
    assert result.status == checks.FAILED
    assert "each step gets up to k attempts of its own, and a failure does not re-run earlier steps" \
        in names_failing(result)


def settle(ctx, folder, post_id, decision, draft):
    """The correct ending both wrong answers below share: publish, reject, or expire."""
    if decision is None:
        ctx.step("tell-author", notify, folder, "author@example.com", "expired")
        return {"post": post_id, "outcome": "expired"}
    if decision["approved"]:
        ctx.step("publish", notify, folder, "readers@example.com", f"{post_id}: {draft['text'][:40]}")
        return {"post": post_id, "outcome": "published", "by": decision["by"]}
    ctx.step("tell-author", notify, folder, "author@example.com", "rejected")
    return {"post": post_id, "outcome": "rejected", "by": decision["by"]}


@dl.workflow("test-ex07-no-escalation", version=1)
def publish_without_escalation(ctx, folder, post_id):
    draft = ctx.step("draft", write_draft, folder, post_id)
    ctx.step("ask-editor", notify, folder, "editor@example.com", f"Please review {post_id}")
    decision = ctx.wait_for_signal("approval", timeout=1 * DAY)
    return settle(ctx, folder, post_id, decision, draft)   # wrong: gives up at once, nobody else is asked


def test_07_a_deadline_without_escalation_fails_the_escalation_tests():
    result = run("07_approval_deadline", "q1", publish_without_escalation)
    assert [t.name.split(":")[0] for t in result.tests if t.status != checks.PASSED] == [
        "no answer for a day", "after the escalation the manager's answer counts",
        "after the escalation the manager rejects", "nobody answers for two days",
        "on every path the steps are recorded under the names the task gives",
        "restarted between every two actions (the run started here; the editor's day running "
        "out, then the manager's approval, each handled by a new Python process)"]


def think(folder, goal, turn):
    return world_at(folder).llm.complete(f"{goal} (turn {turn})")


@dl.workflow("test-ex08-no-cost", version=1)
def agent_without_cost(ctx, folder, goal, max_turns=1000):
    for turn in range(max_turns):
        ctx.step("think", think, folder, goal, turn)                  # wrong: no cost
    return {"turns": max_turns}


def test_08_an_agent_that_records_no_cost_fails_q1():
    result = run("08_budgets", "q1", agent_without_cost)
    assert names_failing(result) == [t.name for t in result.tests[1:]]   # the loop is right
    assert re.search(r"recorded \$0.000000, billed \$0.00\d+", result.tests[1].message)


def off_by_one(engine, agent, folder, run_id):
    return engine.start(agent, folder, "goal", run_id=run_id,
                        budget=dl.Budget(max_steps=MAX_STEPS + 1))     # noqa: F821 (set by the check)


def test_08_a_budget_one_step_too_generous_fails_q2():
    result = run("08_budgets", "q2", off_by_one)
    assert result.passed == 0
    assert re.search(r"made (\d+) model calls with MAX_STEPS = \d+", result.tests[0].message)
    assert "MAX_STEPS" not in globals()              # the check put the namespace back


# wrong answers told what is wrong, right answers written differently ------------------------
def test_06_a_numpy_integer_is_a_number_of_attempts():
    np = pytest.importorskip("numpy")

    def smallest_k(p, n, target):          # right, counted with an array instead of a loop
        ks = np.arange(1, 200)
        return ks[np.argmax((1 - (1 - p) ** ks) ** n >= target)]

    assert run("06_choose_k", "q1", smallest_k).status == checks.PASSED


def test_06_a_forgotten_return_is_failed_and_named():
    result = run("06_choose_k", "q1", lambda p, n, t: None)
    assert result.status == checks.FAILED
    assert "returned None" in result.tests[0].message


@dl.workflow("test-ex06-swallows-failures", version=1)
def plan_that_swallows_failures(ctx, folder, n, k):
    for i in range(1, n + 1):
        try:
            ctx.step(dl.Step(f"task-{i}", retry=dl.Retry(max_attempts=k)), flaky_tool, folder,
                     f"task-{i}")
        except dl.StepFailed:              # wrong: a run that gave up reports success
            return {"tasks": n, "failed": f"task-{i}"}
    return {"tasks": n}


def test_06_a_plan_that_hides_a_failed_step_is_told_to_let_it_fail():
    result = run("06_choose_k", "q2", plan_that_swallows_failures)
    failing = [t for t in result.tests if t.status != checks.PASSED]
    assert [t.name.split(",")[0].split(":")[0] for t in failing] == [
        "each step gets up to k attempts of its own", "simulated"]
    assert all("StepFailed" in t.hint for t in failing)


@dl.workflow("test-ex07-escalation-outside-a-step", version=1)
def publish_escalating_outside_a_step(ctx, folder, post_id):
    draft = ctx.step("draft", write_draft, folder, post_id)
    ctx.step("ask-editor", notify, folder, "editor@example.com", f"Please review {post_id}")
    decision = ctx.wait_for_signal("approval", timeout=1 * DAY)
    if decision is None:
        notify(folder, "manager@example.com", "escalated")      # wrong: sent on every replay
        decision = ctx.wait_for_signal("approval", timeout=1 * DAY)
    return settle(ctx, folder, post_id, decision, draft)


def test_07_an_email_outside_a_step_is_named_as_the_cause():
    result = run("07_approval_deadline", "q1", publish_escalating_outside_a_step)
    failing = [t for t in result.tests if t.status != checks.PASSED and "mail sent" in t.message]
    assert failing and all("'manager': 2" in t.message for t in failing)
    assert all("no step was running" in t.message and "outside a step" in t.hint for t in failing)


def test_08_a_budget_of_what_seems_left_fails_q2_with_the_reason():
    def start_agent(engine, agent, folder, run_id):
        try:
            used = engine.get(run_id).steps
        except dl.UnknownRunError:
            used = 0
        return engine.start(agent, folder, "goal", run_id=run_id,
                            budget=dl.Budget(max_steps=MAX_STEPS - used))   # noqa: F821  wrong: counted twice

    result = run("08_budgets", "q2", start_agent)
    failing = [t for t in result.tests if t.status != checks.PASSED]
    assert len(failing) == 2 and all("whole MAX_STEPS" in t.hint for t in failing)


def test_08_resuming_an_existing_run_instead_of_starting_it_passes():
    def start_agent(engine, agent, folder, run_id):
        try:
            return engine.resume(run_id)          # the budget was stored with the run
        except dl.UnknownRunError:
            return engine.start(agent, folder, "goal", run_id=run_id,
                                budget=dl.Budget(max_steps=MAX_STEPS))     # noqa: F821

    result = run("08_budgets", "q2", start_agent)
    assert result.status == checks.PASSED, [t.message for t in result.tests]
