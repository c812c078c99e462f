"""Exercise 12 can be failed, and passed by more than one route.

Every answer here is written as a learner writes it: a cell's source, run in a namespace
that holds the notebook's own given cells (its imports, `refund_v1` and the step functions),
under `__main__` as in a kernel, so that q3's check can copy it into a fresh process. Wrong
answers fail the tests that name their mistake, and answers right by another route than the
solution's pass, each on one seed, spread over two (one_seed: every seed draws every test's
case); the solution passes on each. Two notebooks are graded whole, as an
instructor would (test_grading.py grades the solution and the untouched exercise).
"""

import inspect
import linecache
import re

import nbformat
import pytest

from durable_lite.grading import checks, exercise
from durable_lite.grading.exercises import ex12_versioning as ex12
from durable_lite.grading.grader import grade_notebook
from durable_lite.workflow import registered

from grading_support import ROOT, failing_tests, learner, one_seed, statuses

NAME = "12_versioning"
SOLUTION = ROOT / "solutions" / f"{NAME}.ipynb"
Q1_SEEDS, SEEDS = (101, 202), (11, 22)

DEPLOYED_AT_ONCE, WHOLE_DAY, FRAUD_FIRST, SWEEP_APPROVED, SWEEP_NEVER = (t.name for t in ex12.q1.tests)
ONE_BY_ONE, DEADLINES_PASSED, NOT_REACHED = (t.name for t in ex12.q2.tests)
ONCE, AGAIN, AFTER_A_CRASH = (t.name for t in ex12.q3.tests)


def given_cells():
    """The source of the notebook's code cells before q1's answer: imports and given code."""
    nb = nbformat.read(SOLUTION, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    return "\n\n".join(code[:2])


def answer(source, name):
    """The function `name` defined by `source`, as a notebook cell below the given cells
    would define it (under __main__, with its source readable)."""
    text = given_cells() + "\n\n" + source
    filename = f"<ex12 cell {abs(hash(text))}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = {"__name__": "__main__", "_ih": ["", text]}   # as IPython keeps its input
    exec(compile(text, filename, "exec"), namespace)
    return namespace[name]


def run(qid, fn, seed):
    return checks.run_question(exercise(NAME), qid, (fn,), seed=seed)


def failing(result):
    return [t.name for t in result.tests if t.status != checks.PASSED]


def fails(qid, source, name, expected, seeds=SEEDS):
    """The answer fails exactly the tests `expected` names, with a message and a hint for
    each, on one of `seeds` (one_seed: every seed draws every test's case)."""
    seed = one_seed(seeds, source)
    result = run(qid, answer(source, name), seed)
    assert failing(result) == expected, f"seed {seed}:\n{result.report()}"
    for test in result.tests:
        if test.status != checks.PASSED:
            assert test.message and test.hint, test
    return result


def passes(qid, source, name, seeds=SEEDS, every=False):
    """The answer passes on one of `seeds`, or on each if `every` (the solution)."""
    for seed in (seeds if every else (one_seed(seeds, source),)):
        result = run(qid, answer(source, name), seed)
        assert result.status == checks.PASSED, f"seed {seed}:\n{result.report()}"


# the notebook and the checks agree -------------------------------------------------------------
def test_the_notebook_shows_the_code_the_checks_run():
    given = given_cells()
    for fn in ex12.GIVEN:
        assert inspect.getsource(fn).strip() in given or fn is ex12.tell_customer_in_cents
    nb = nbformat.read(SOLUTION, as_version=4)
    assert any(inspect.getsource(ex12.tell_customer_in_cents).strip() == c.source.strip()
               for c in nb.cells if c.cell_type == "code")
    for constant in ('APPROVER, LEAD = "approver@example.com", "lead@example.com"',
                     'GATE = "fraud-check"'):
        assert constant in given


def test_the_checks_leave_no_workflow_of_theirs_registered():
    solution = answer(GATE_IN_V1, "deploy")
    before = {n for n in registered() if n.startswith("ex12-")}
    assert run("q1", solution, seed=5).status == checks.PASSED
    run("q2", answer(PATCH_REPORT, "can_retire"), seed=5)
    run("q3", answer(FORK_FROM_EMAIL, "resend"), seed=5)
    assert {n for n in registered() if n.startswith("ex12-")} == before


# q1 · deploy ---------------------------------------------------------------------------------
TAIL = '''
        if ctx.wait_for_signal("approval", timeout=3 * DAY) is None:
            ctx.step("escalate", escalate, folder, order_id, ctx.idempotency_key("escalate", order_id))
            return {"order": order_id, "outcome": "escalated"}
        ctx.step("refund", pay, folder, order_id, amount, REFUND_KEY)
        ctx.step("email", tell_customer, folder, order["email"], order_id, amount,
                 ctx.idempotency_key("email", order_id))
        return {"order": order_id, "outcome": "refunded"}
'''
KEYED = 'ctx.idempotency_key("refund", order_id)'


def deploy_source(middle, register, refund_key=KEYED):
    """A deploy whose workflow runs `middle` between the lookup and the wait."""
    return (f"def deploy(name):\n"
            f"    def refund(ctx, folder, order_id, amount):\n"
            f"        order = ctx.step(\"lookup\", lookup_order, folder, order_id)\n"
            f"{middle}" + TAIL.replace("REFUND_KEY", refund_key) + register)


FRAUD = ('ctx.step("fraud-check", fraud_check, folder, order_id, '
         'ctx.idempotency_key("fraud-check", order_id))')
ASK = ('        ctx.step("ask", ask_approver, folder, order_id, amount, score,\n'
       '                 ctx.idempotency_key("ask", order_id))\n')
GATED = (f"        score = None\n        if ctx.patched(GATE):\n            score = {FRAUD}\n" + ASK)
ALWAYS = f"        score = {FRAUD}\n" + ASK
AS_V1 = "    dl.workflow(name, version=1)(refund)\n"
AS_V2 = "    dl.workflow(name, version=1)(refund_v1)\n    dl.workflow(name, version=2)(refund)\n"

GATE_IN_V1 = deploy_source(GATED, AS_V1)


def test_q1_the_solution_passes():
    nb = nbformat.read(SOLUTION, as_version=4)
    source = next(c.source for c in nb.cells if c.source.startswith("def deploy("))
    passes("q1", source, "deploy", seeds=Q1_SEEDS, every=True)


Q1_WRONG = {
    # the lesson's naive deploy: the new step added in place, parked runs diverge
    "in place": (deploy_source(ALWAYS, AS_V1), [DEPLOYED_AT_ONCE, WHOLE_DAY]),
    # version 2 alone: the new process cannot continue any version 1 run
    "v2 drops v1": (deploy_source(ALWAYS, "    dl.workflow(name, version=2)(refund)\n"),
                    [DEPLOYED_AT_ONCE, WHOLE_DAY]),
    # a gate that asks the wall clock: at replay time it is always after the deploy
    "wall-clock gate": (deploy_source(GATED.replace("ctx.patched(GATE)", "time.time() >= DEPLOYED"),
                                      AS_V1).replace("def deploy(name):\n",
                                                     "import time\nDEPLOYED = time.time()\n\n\n"
                                                     "def deploy(name):\n"),
                        [DEPLOYED_AT_ONCE, WHOLE_DAY]),
    # no key on the refund: a process killed right after paying pays again
    "unkeyed refund": (deploy_source(ALWAYS, AS_V2, refund_key="None"), [WHOLE_DAY, SWEEP_APPROVED]),
    # a gate, but the refund's key renamed: an old run killed after paying pays again on new code
    "renamed refund key": (deploy_source(GATED, AS_V1,
                                         refund_key='ctx.idempotency_key("refund-v2", order_id)'),
                           [WHOLE_DAY]),
    # no key on the fraud check: a kill right after it checks twice
    "unkeyed fraud check": (deploy_source(GATED.replace('ctx.idempotency_key("fraud-check", order_id)',
                                                        "None"), AS_V1),
                            [FRAUD_FIRST, SWEEP_APPROVED, SWEEP_NEVER]),
    # the check runs after the approver was asked: the approver never sees the score
    "fraud check after ask": (deploy_source(
        ASK.replace("score,", "None,") + f"        {FRAUD}\n", AS_V2),
        [FRAUD_FIRST]),
    # the old code shipped again: nothing new happens
    "nothing new": ("def deploy(name):\n    dl.workflow(name, version=1)(refund_v1)\n",
                    [FRAUD_FIRST, SWEEP_APPROVED, SWEEP_NEVER]),
    # the new step under a name of its own, although the question names it "fraud-check"
    "another step name": (deploy_source(GATED.replace('ctx.step("fraud-check"', 'ctx.step("score-order"'),
                                        AS_V1), [FRAUD_FIRST]),
    # the check called outside a step: its key keeps the ledger right, but the run's history
    # has no fraud check (a plain call runs again on every replay)
    "a plain call": (deploy_source(GATED.replace('ctx.step("fraud-check", fraud_check,', 'fraud_check('),
                                   AS_V1), [FRAUD_FIRST]),
    # registered under the production name, not the one the check gives
    "fixed name": (GATE_IN_V1.replace("def deploy(name):", "def deploy(ignored):\n    name = "
                                      "\"approval-refund\""),
                   [DEPLOYED_AT_ONCE, WHOLE_DAY, FRAUD_FIRST, SWEEP_APPROVED, SWEEP_NEVER]),
}


@pytest.mark.parametrize("mistake", sorted(Q1_WRONG))
def test_q1_a_wrong_deploy_fails_the_tests_that_name_its_mistake(mistake):
    source, expected = Q1_WRONG[mistake]
    fails("q1", source, "deploy", expected, seeds=Q1_SEEDS)


def test_q1_feedback_names_the_run_and_where_it_parts_from_its_history():
    result = run("q1", answer(Q1_WRONG["in place"][0], "deploy"), seed=7)
    message = result.tests[0].message
    assert re.search(r"order [A-Z]-\d+ \(.+\) does not fit the deployed code", message)
    assert "recorded step 'ask' there, but the workflow now asks for step 'fraud-check'" in message
    dropped = run("q1", answer(Q1_WRONG["v2 drops v1"][0], "deploy"), seed=7)
    assert "has only version(s) [2]" in dropped.tests[0].message
    assert "still waiting" in dropped.tests[1].message or "still running" in dropped.tests[1].message
    assert "register the code of every version" in dropped.tests[1].hint


Q1_RIGHT = {
    "v2 beside v1": deploy_source(ALWAYS, AS_V2),
    # version 2 written with its own helper, and a key of another name for the new step
    "v2 and a helper": '''
def deploy(name):
    def ask_with_score(ctx, folder, order_id, amount):
        score = ctx.step("fraud-check", fraud_check, folder, order_id, ctx.idempotency_key("score", order_id))
        return ctx.step("ask", ask_approver, folder, order_id, amount, score,
                        ctx.idempotency_key("ask", order_id))

    @dl.workflow(name, version=2)
    def refund_v2(ctx, folder, order_id, amount):
        order = ctx.step("lookup", lookup_order, folder, order_id)
        ask_with_score(ctx, folder, order_id, amount)
        answer = ctx.wait_for_signal("approval", timeout=3 * DAY)
        if answer is None:
            ctx.step("escalate", escalate, folder, order_id, ctx.idempotency_key("escalate", order_id))
            return {"order": order_id, "outcome": "escalated"}
        ctx.step("refund", pay, folder, order_id, amount, ctx.idempotency_key("refund", order_id))
        ctx.step("email", tell_customer, folder, order["email"], order_id, amount,
                 ctx.idempotency_key("email", order_id))
        return {"order": order_id, "outcome": "refunded"}

    dl.workflow(name, version=1)(refund_v1)
''',
    # a gate in a version 2 (version 1 kept too): both ways at once
    "gate in v2 beside v1": deploy_source(GATED, AS_V2),
}


@pytest.mark.parametrize("route", sorted(Q1_RIGHT))
def test_q1_a_right_deploy_by_another_route_passes(route):
    passes("q1", Q1_RIGHT[route], "deploy", seeds=Q1_SEEDS)


# q2 · can_retire -----------------------------------------------------------------------------
PATCH_REPORT = '''
def can_retire(engine, name):
    return not engine.patch_report(name, GATE).old
'''
EVERY_PROBE = [ONE_BY_ONE, DEADLINES_PASSED, NOT_REACHED]
Q2_WRONG = {
    "no run waiting": ("return not engine.runs(\"waiting\")", EVERY_PROBE),
    "no run on version 1": ("return not engine.runs_on(name, version=1)", EVERY_PROBE),
    "every deadline passed": ("return all(r.wake_at <= engine.clock() for r in engine.runs(\"waiting\"))",
                              EVERY_PROBE),
    "three days since the oldest start": (
        "starts = [engine.history(r.run_id)[0]['started_at'] for r in engine.runs_on(name) "
        "if engine.history(r.run_id)]\n    return not starts or engine.clock() - min(starts) > 3 * DAY",
        EVERY_PROBE),
    "no marker either": ("report = engine.patch_report(name, GATE)\n"
                         "    return not report.old and not report.new", EVERY_PROBE),
    "not reached counts as old": ("report = engine.patch_report(name, GATE)\n"
                                  "    return not report.old and not report.not_reached", [NOT_REACHED]),
    "every workflow's runs": (
        "for run in engine.runs():\n"
        "        rows = engine.history(run.run_id)\n"
        "        if run.status != 'completed' and any(r['step'] == 'ask' for r in rows) \\\n"
        "                and not any(r['kind'] == 'patch' for r in rows):\n"
        "            return False\n"
        "    return True", [NOT_REACHED]),
    "the report itself": ("return engine.patch_report(name, GATE)", EVERY_PROBE),
    "always True": ("return True", EVERY_PROBE),
    "always False": ("return False", EVERY_PROBE),
    "recovers to find out": ("engine.recover()\n    return not engine.patch_report(name, GATE).old",
                             EVERY_PROBE),
}


def retire_source(body):
    return f"def can_retire(engine, name):\n    {body}\n"


@pytest.mark.parametrize("mistake", sorted(Q2_WRONG))
def test_q2_a_wrong_can_retire_fails_the_moments_that_name_its_mistake(mistake):
    body, expected = Q2_WRONG[mistake]
    fails("q2", retire_source(body), "can_retire", expected)


def test_q2_feedback_names_the_moment_and_the_runs():
    result = run("q2", answer(retire_source(Q2_WRONG["three days since the oldest start"][0]),
                              "can_retire"), seed=3)
    message = result.tests[1].message
    assert message.startswith("past every old run's deadline, before recover(), can_retire said True")
    assert re.search(r"order [A-Z]-\d+ \(parked on its approval\)", message)
    again = run("q2", answer(retire_source("return False"), "can_retire"), seed=3)
    other = run("q2", answer(retire_source("return False"), "can_retire"), seed=4)
    assert [t.message for t in again.tests] != [t.message for t in other.tests]   # drawn names
    assert "changed the runs" in run("q2", answer(retire_source(Q2_WRONG["recovers to find out"][0]),
                                                  "can_retire"), seed=3).tests[0].message


Q2_RIGHT = {
    "patch_report": PATCH_REPORT,
    "the module function": retire_source(
        "return len(dl.versioning.patch_report(engine, name, GATE).old) == 0"),
    "replay checks": retire_source(
        "return all(engine.check_replay(r.run_id).gates.get(GATE, True) for r in engine.runs_on(name))"),
    "the histories, read directly": '''
def can_retire(engine, name):
    for run in engine.runs_on(name):
        rows = engine.history(run.run_id)
        asked = any(row["step"] == "ask" and row["kind"] == "step" for row in rows)
        marked = any(row["kind"] == "patch" for row in rows)
        if asked and not marked:
            return False
    return True
''',
}


@pytest.mark.parametrize("route", sorted(Q2_RIGHT))
def test_q2_a_right_can_retire_by_another_route_passes(route):
    passes("q2", Q2_RIGHT[route], "can_retire")


# q3 · resend ---------------------------------------------------------------------------------
FORK_FROM_EMAIL = '''
def resend(engine, run_ids):
    for run_id in run_ids:
        engine.fork(run_id, from_step="email", run_id=f"{run_id}-fixed")
'''
FACTS = '''
import json


def facts(engine, run_id):
    """The world's folder, the order's customer, the order id and the amount of a run."""
    folder, order_id, amount = json.loads(engine.store.get_run(run_id).args_json)
    order = next(row["result"] for row in engine.history(run_id) if row["step"] == "lookup")
    return folder, order["email"], order_id, amount
'''


def resend_source(body, prelude=""):
    return f"{prelude}\n\ndef resend(engine, run_ids):\n    {body}\n"


EVERY_CALL = [ONCE, AGAIN, AFTER_A_CRASH]
Q3_WRONG = {
    "fork from refund": (resend_source(
        'for r in run_ids:\n        engine.fork(r, from_step="refund", run_id=f"{r}-fixed")'), EVERY_CALL),
    "fork from lookup": (resend_source(
        'for r in run_ids:\n        engine.fork(r, from_step="lookup", run_id=f"{r}-fixed")'), EVERY_CALL),
    "a new fork id on every call": (resend_source(
        'for r in run_ids:\n        engine.fork(r, from_step="email")'), [AGAIN, AFTER_A_CRASH]),
    "a fork id from the clock": (resend_source(
        'for r in run_ids:\n        engine.fork(r, from_step="email", run_id=f"{r}-{engine.clock():.0f}")'),
        [AGAIN, AFTER_A_CRASH]),
    "a set in memory": (resend_source(
        'for r in run_ids:\n        if r not in RESENT:\n            RESENT.add(r)\n'
        '            engine.fork(r, from_step="email")', prelude="RESENT = set()"), [AGAIN, AFTER_A_CRASH]),
    "resume": (resend_source("for r in run_ids:\n        engine.resume(r)"), EVERY_CALL),
    "invalidate and resume": (resend_source(
        'for r in run_ids:\n        engine.invalidate(r, "email")\n        engine.resume(r)'), EVERY_CALL),
    "every completed run": (resend_source(
        'for run in engine.runs("completed"):\n'
        '        if run.result["outcome"] == "refunded":\n'
        '            engine.fork(run.run_id, from_step="email", run_id=f"{run.run_id}-fixed")'), EVERY_CALL),
    "the mailer, without a key": (resend_source(
        "for r in run_ids:\n        folder, to, order_id, amount = facts(engine, r)\n"
        "        tell_customer(folder, to, order_id, amount, None)", prelude=FACTS), [AGAIN, AFTER_A_CRASH]),
}


@pytest.mark.parametrize("mistake", sorted(Q3_WRONG))
def test_q3_a_wrong_resend_fails_the_tests_that_name_its_mistake(mistake):
    source, expected = Q3_WRONG[mistake]
    fails("q3", source, "resend", expected)


def test_q3_feedback_says_what_each_customer_got():
    result = run("q3", answer(Q3_WRONG["a new fork id on every call"][0], "resend"), seed=9)
    message = result.tests[1].message
    assert re.search(r"the customer of order [A-Z]-\d+ \(told '\$\d+ refunded for [A-Z]-\d+'\) got "
                     r"2 more email\(s\)", message)
    assert "what could it find, in the store" in result.tests[1].hint
    assert "fork" not in result.tests[1].hint                 # a hint says where to look
    paid = run("q3", answer(Q3_WRONG["fork from refund"][0], "resend"), seed=9)
    assert re.search(r"order [A-Z]-\d+ was paid 2 times \(before: 1\)", paid.tests[0].message)


Q3_RIGHT = {
    "fork": FORK_FROM_EMAIL,
    "the module function, another id": resend_source(
        'for r in run_ids:\n        dl.versioning.fork(engine, r, "email", run_id="resend-" + r)'),
    "the mailer, with a key of its own": resend_source(
        "for r in run_ids:\n        folder, to, order_id, amount = facts(engine, r)\n"
        "        tell_customer(folder, to, order_id, amount, f'resend:{r}')", prelude=FACTS),
}


@pytest.mark.parametrize("route", sorted(Q3_RIGHT))
def test_q3_a_right_resend_by_another_route_passes(route):
    passes("q3", Q3_RIGHT[route], "resend")


# whole notebooks, graded as an instructor grades them ----------------------------------------
def test_a_notebook_of_wrong_answers_fails_each_question_with_its_own_tests(tmp_path):
    path = learner(NAME, tmp_path, start="solutions", cells={
        "def deploy(name)": Q1_WRONG["in place"][0],
        "def can_retire(": retire_source(Q2_WRONG["no run waiting"][0]),
        "def resend(": Q3_WRONG["a set in memory"][0]})
    score = grade_notebook(path)
    assert statuses(score) == {"q1": "failed", "q2": "failed", "q3": "failed"}, score.report()
    assert failing_tests(score, "q1") == [DEPLOYED_AT_ONCE, WHOLE_DAY]
    assert failing_tests(score, "q2") == EVERY_PROBE
    assert failing_tests(score, "q3") == [AGAIN, AFTER_A_CRASH]
    assert score.passed == 3 + 0 + 1


def test_a_notebook_of_right_answers_by_other_routes_scores_full_marks(tmp_path):
    path = learner(NAME, tmp_path, start="solutions", cells={
        "def deploy(name)": Q1_RIGHT["v2 and a helper"],
        "def can_retire(": Q2_RIGHT["replay checks"],
        "def resend(": Q3_RIGHT["the mailer, with a key of its own"]})
    score = grade_notebook(path)
    assert score.passed == score.total == 11, score.report()
