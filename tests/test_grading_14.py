"""Exercise 14 can be failed, and passed in more than one way.

Each port below is written the way a learner would write the answer cell, saved as a
module and imported, then given to the exercise's checks; the checks save its source again
as a module of their own for the DBOS workers, exactly as they do with a notebook cell.
Wrong ports fail the test that names their mistake, and only the tests they should; right
ports written differently pass. One wrong notebook is graded end to end by the grader
(test_grading.py grades the solution and the untouched exercise).

The checks run real processes (DBOS workers, durable_lite children, SIGKILL), so these
tests take a few minutes. The test install brings DBOS, a SQLite it can use and a Postgres
on every Python, so nothing here is skipped: a test shows the checks can run here, and
another that where they cannot, they say so instead of scoring.

Each property the checks' docstring lists has a wrong answer below that is right in
everything but that property, and fails.
"""

import ast
import importlib
import re
import secrets
import subprocess
import sys
import textwrap

import pytest

from durable_lite.grading import checks, exercise
from durable_lite.grading.exercises import ex14_port_to_dbos as ex14
from durable_lite.grading.grader import grade_notebook

from grading_support import learner, statuses

EX = exercise("14_port_to_dbos")
pytestmark = pytest.mark.crash


def needs_dbos(test):
    """Marks a test that runs DBOS (all of them may, here: see the module docstring)."""
    return test

# q1's tests, by what they crash
(NO_CRASH, NOTHING_TO_REFUND, CANCEL_WINDOW, REFUND_WINDOW, GOODBYE_WINDOW, DRAWN,
 KEYS) = range(7)
# q2's tests, by the customer's answer
YES, NO, SILENT, LATE = range(4)


def test_the_checks_can_run_on_this_python():
    assert ex14.available() == (True, "")


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    """port(source, name): the answer `name` from a module holding the given imports and
    `source`, its DBOS workflow registered under a name no other port uses (DBOS refuses
    one name from two files in a process)."""
    folder = tmp_path_factory.mktemp("ports")
    sys.path.insert(0, str(folder))

    def make(source, name):
        module = f"learner_{secrets.token_hex(4)}"
        text = ex14.PREAMBLE + textwrap.dedent(source).replace("WORKFLOW_NAME", f"{module}-{name}")
        (folder / f"{module}.py").write_text(text, encoding="utf-8")
        return getattr(importlib.import_module(module), name)

    yield make
    sys.path.remove(str(folder))


def run(qid, answer, seed, only=None):
    """The question's tests (or only those numbered in `only`) on `answer`, with the cases of
    `seed`: {test number: TestResult}."""
    question = EX.questions[qid]
    numbers = list(range(len(question.tests))) if only is None else list(only)
    part = checks.Exercise(EX.id, EX.title, EX.lesson)
    part.question(qid, question.title, question.answers).tests = [question.tests[i]
                                                                   for i in numbers]
    result = checks.run_question(part, qid, [answer], seed=seed)
    return dict(zip(numbers, result.tests))


def failed(results) -> set:
    return {n for n, t in results.items() if t.status != checks.PASSED}


# q1: the ports -------------------------------------------------------------------------------
STEPS = '''
@step("lookup")
def lookup(folder, sub_id):
    return lookup_subscription(folder, sub_id)


@step("cancel")
def cancel(folder, sub_id, key):
    return cancel_plan(folder, sub_id, idempotency_key=key)


@step("refund")
def refund(folder, sub_id, amount, key):
    return refund_unused(folder, sub_id, amount, idempotency_key=key)


@step("goodbye")
def goodbye(folder, to, subject, key=None):
    return send_email(folder, to, subject, idempotency_key=key)
'''


def cancel_port(cancel_key="derive_key(DBOS.workflow_id, 'cancel', sub_id)",
                refund_key="derive_key(DBOS.workflow_id, 'refund', sub_id)",
                goodbye_key="None", refund_if="unused > 0", steps=STEPS,
                result='{"subscription": sub_id, "cancellation": plan["record_id"], '
                       '"refund_id": refund_id, "amount": unused}',
                name='"WORKFLOW_NAME"', order=("cancel", "refund")):
    """A port of cancel_subscription with one thing changed from a right one."""
    cancel_line = f"    plan = cancel(folder, sub_id, {cancel_key})\n"
    refund_lines = (f"    refund_id = None\n"
                    f"    if {refund_if}:\n"
                    f"        refund_id = refund(folder, sub_id, unused, {refund_key})"
                    f"['refund_id']\n")
    if order == ("cancel", "refund"):
        body = cancel_line + refund_lines
    else:
        body = refund_lines + cancel_line
    return steps + f'''

@DBOS.workflow(name={name})
def cancel_subscription(folder, sub_id, unused):
    import uuid, time
    sub = lookup(folder, sub_id)
{body}    goodbye(folder, sub["email"], f"{{sub_id}} is cancelled", {goodbye_key})
    return {result}
'''


@needs_dbos
def test_a_port_without_keys_fails_the_keyed_windows_and_the_keys(port):
    answer = port(cancel_port(cancel_key="None", refund_key="None"), "cancel_subscription")
    results = run("q1", answer, seed=12)
    assert failed(results) == {CANCEL_WINDOW, REFUND_WINDOW, KEYS}
    message = results[REFUND_WINDOW].message
    assert "refunds paid 2 (the original's: 1)" in message
    assert "killed right after step 'refund' ran" in message
    assert "same every time the step runs" in results[REFUND_WINDOW].hint
    assert "plan records 2 (the original's: 1)" in results[CANCEL_WINDOW].message


@needs_dbos
@pytest.mark.parametrize("seed", [13, 14])
def test_a_key_made_fresh_on_every_attempt_pays_twice(port, seed):
    answer = port(cancel_port(refund_key="derive_key(str(uuid.uuid4()), 'refund', sub_id)"),
                  "cancel_subscription")
    results = run("q1", answer, seed, only=[REFUND_WINDOW, KEYS])
    assert failed(results) == {REFUND_WINDOW, KEYS}
    assert "refunds paid 2 (the original's: 1)" in results[REFUND_WINDOW].message


@needs_dbos
@pytest.mark.parametrize("key", ["derive_key('refund', sub_id)", "f'refund-{sub_id}'",
                                 "derive_key(DBOS.workflow_id, sub_id, 'refund')"])
def test_a_stable_key_that_is_not_the_originals_fails_the_keys_only(port, key):
    answer = port(cancel_port(refund_key=key), "cancel_subscription")
    results = run("q1", answer, seed=15, only=[REFUND_WINDOW, KEYS])
    assert failed(results) == {KEYS}            # stable, so the window holds; but not the same key
    assert "different idempotency keys" in results[KEYS].message
    assert "workflow id" in results[KEYS].hint


@needs_dbos
@pytest.mark.parametrize("seed", [16, 17])
def test_a_goodbye_email_given_a_key_sends_one_email_where_the_original_sends_two(port, seed):
    answer = port(cancel_port(goodbye_key="derive_key(DBOS.workflow_id, 'goodbye', sub_id)"),
                  "cancel_subscription")
    results = run("q1", answer, seed, only=[NO_CRASH, GOODBYE_WINDOW, KEYS])
    assert failed(results) == {GOODBYE_WINDOW}
    assert "emails 1 (the original's: 2)" in results[GOODBYE_WINDOW].message
    assert "window included" in results[GOODBYE_WINDOW].hint


@needs_dbos
def test_steps_declared_with_plain_dbos_step_are_never_killed(port):
    plain = STEPS.replace('@step("', '@DBOS.step(name="')
    answer = port(cancel_port(steps=plain), "cancel_subscription")
    results = run("q1", answer, seed=18, only=[NO_CRASH, REFUND_WINDOW])
    assert failed(results) == {REFUND_WINDOW}
    assert "without ever reaching that point" in results[REFUND_WINDOW].message
    assert "dbos_faults" in results[REFUND_WINDOW].hint


@needs_dbos
@pytest.mark.parametrize("seed", [19, 20])
def test_a_port_that_always_refunds_fails_the_branch_with_nothing_to_refund(port, seed):
    answer = port(cancel_port(refund_if="True"), "cancel_subscription")
    results = run("q1", answer, seed, only=[NO_CRASH, NOTHING_TO_REFUND])
    assert failed(results) == {NOTHING_TO_REFUND}
    assert "refunds paid 1 (the original's: 0)" in results[NOTHING_TO_REFUND].message
    # the hint comes from what was observed (a refund step the original did not run),
    # not from the first rule that could explain a second refund (a key)
    hint = results[NOTHING_TO_REFUND].hint
    assert "refund step where the original runs none" in hint and "key" not in hint


@needs_dbos
def test_a_port_that_never_refunds_is_told_it_ran_no_refund_step(port):
    answer = port(cancel_port(refund_if="False"), "cancel_subscription")
    results = run("q1", answer, seed=32, only=[NO_CRASH, NOTHING_TO_REFUND])
    assert failed(results) == {NO_CRASH}
    assert "refunds paid 0 (the original's: 1)" in results[NO_CRASH].message
    assert "no refund step where the original ran one" in results[NO_CRASH].hint


@needs_dbos
def test_a_step_renamed_fails_on_the_recorded_steps_and_is_never_killed_there(port):
    answer = port(cancel_port(steps=STEPS.replace('@step("goodbye")', '@step("farewell")')),
                  "cancel_subscription")
    results = run("q1", answer, seed=33, only=[NO_CRASH, GOODBYE_WINDOW])
    assert failed(results) == {NO_CRASH, GOODBYE_WINDOW}
    assert "'farewell'" in results[NO_CRASH].message and "by the end" in results[NO_CRASH].message
    assert "named as in the original" in results[NO_CRASH].hint
    assert "without ever reaching that point" in results[GOODBYE_WINDOW].message


@needs_dbos
def test_a_port_that_refunds_before_it_cancels_fails_on_the_recorded_steps(port):
    answer = port(cancel_port(order=("refund", "cancel")), "cancel_subscription")
    results = run("q1", answer, seed=21, only=[NO_CRASH, CANCEL_WINDOW])
    assert failed(results) == {NO_CRASH, CANCEL_WINDOW}   # the same ledgers, another order
    assert "DBOS had recorded the steps ['lookup', 'refund']" in results[CANCEL_WINDOW].message
    assert "in another order" in results[NO_CRASH].hint


@needs_dbos
@pytest.mark.parametrize("seed", [22, 23, 24])
def test_a_result_with_the_ids_of_a_fresh_world_fails(port, seed):
    literal = ('{"subscription": sub_id, "cancellation": "plans-1", "refund_id": "R-1", '
               '"amount": unused}')
    answer = port(cancel_port(result=literal), "cancel_subscription")
    results = run("q1", answer, seed, only=[NO_CRASH])
    assert failed(results) == {NO_CRASH}
    assert "'cancellation': 'plans-1'" in results[NO_CRASH].message


@needs_dbos
def test_a_result_of_another_shape_fails(port):
    answer = port(cancel_port(result='{"subscription": sub_id, "refund": refund_id}'),
                  "cancel_subscription")
    results = run("q1", answer, seed=25, only=[NO_CRASH])
    assert failed(results) == {NO_CRASH}
    assert "your port returned" in results[NO_CRASH].message


@needs_dbos
def test_a_name_the_lesson_already_uses_fails_every_test(port):
    def answer(folder, sub_id, unused):
        return None
    answer.dbos_function_name = "refund"   # what @DBOS.workflow(name="refund") sets
    results = run("q1", answer, seed=26)
    assert failed(results) == set(range(len(EX.questions["q1"].tests)))
    assert "'refund', which a workflow of the lesson already uses" in results[NO_CRASH].message


@needs_dbos
def test_the_names_taken_are_those_a_fresh_worker_registers():
    """The names a worker registers before it imports a port, asked of a fresh process."""
    code = ("from durable_lite.engines import dbos_worker\n"
            "from dbos._dbos import _get_or_create_dbos_registry\n"
            "print(sorted(n for n in _get_or_create_dbos_registry().workflow_info_map "
            "if not n.startswith('<temp>.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    registered = set(ast.literal_eval(out.stdout.strip().splitlines()[-1]))
    assert ex14._taken_names() == registered >= {"refund", "refund_with_approval"}


@needs_dbos
def test_a_step_left_in_another_cell_is_named(port):
    answer = port(cancel_port(steps=STEPS.replace("def goodbye", "def _goodbye")),
                  "cancel_subscription")
    results = run("q1", answer, seed=27, only=[NO_CRASH])
    assert failed(results) == {NO_CRASH}
    assert "NameError" in results[NO_CRASH].message
    assert "one cell" in results[NO_CRASH].hint


def test_not_a_dbos_workflow_is_refused_with_a_hint(port):
    import durable_lite as dl
    from durable_lite.engines.subscription_durable_lite import cancel_subscription as original

    def plain(folder, sub_id, unused):
        return None

    for answer, text in ((original, "durable_lite workflow"), (plain, "not a DBOS workflow"),
                         (42, "but it is a int")):
        results = run("q1", answer, seed=28, only=[NO_CRASH])
        assert text in results[NO_CRASH].message
    assert dl is not None


def test_an_untouched_answer_is_not_attempted():
    results = run("q1", None, seed=29)
    assert {t.status for t in results.values()} == {checks.NOT_ATTEMPTED}
    results = run("q2", None, seed=29)
    assert {t.status for t in results.values()} == {checks.NOT_ATTEMPTED}


@needs_dbos
def test_a_workflow_that_still_raises_not_implemented_is_not_attempted(port):
    answer = port('''
@DBOS.workflow(name="WORKFLOW_NAME")
def cancel_subscription(folder, sub_id, unused):
    raise NotImplementedError("port the workflow")
''', "cancel_subscription")
    results = run("q1", answer, seed=30, only=[NO_CRASH])
    assert results[NO_CRASH].status == checks.NOT_ATTEMPTED


def test_where_dbos_cannot_run_the_checks_say_so(port, monkeypatch):
    def answer(folder, sub_id, unused):
        return None
    answer.dbos_function_name = "ex14-somewhere"          # looks like a DBOS workflow
    monkeypatch.setattr(ex14, "available", lambda: (False, "the Postgres wheel is missing here"))
    results = run("q1", answer, seed=31, only=[NO_CRASH])
    assert "not available on this Python" in results[NO_CRASH].message
    assert "the Postgres wheel is missing here" in results[NO_CRASH].message
    assert "nothing is wrong with your answer" in results[NO_CRASH].hint


# q1: right ports written differently --------------------------------------------------------
KEYS_IN_THE_STEPS = '''
lookup = step("lookup")(lookup_subscription)


@step("cancel")
def cancel(folder, sub_id):
    key = derive_key(DBOS.workflow_id, "cancel", sub_id)
    return cancel_plan(folder, sub_id, idempotency_key=key)


@step("refund")
def refund(folder, sub_id, amount):
    key = derive_key(DBOS.workflow_id, "refund", sub_id)
    return refund_unused(folder, sub_id, amount, idempotency_key=key)


goodbye = step("goodbye")(send_email)


@DBOS.workflow(name="WORKFLOW_NAME")
def my_cancel(folder, sub_id, unused):
    customer = lookup(folder, sub_id)
    cancelled = cancel(folder, sub_id)
    paid = refund(folder, sub_id, unused) if unused else None
    goodbye(folder, customer["email"], sub_id + " is cancelled")
    return dict(subscription=sub_id, cancellation=cancelled["record_id"],
                refund_id=paid and paid["refund_id"], amount=unused)


cancel_subscription = my_cancel
'''

HELPER_AND_KEYWORDS = '''
def key_for(*parts):
    return derive_key(DBOS.workflow_id, *parts)


@step("lookup")
def lookup(folder, sub_id):
    return lookup_subscription(folder=folder, sub_id=sub_id)


@step("cancel")
def cancel(folder, sub_id, *, idempotency_key):
    return cancel_plan(folder, sub_id, idempotency_key=idempotency_key)


@step("refund")
def refund(folder, sub_id, amount, *, idempotency_key):
    return refund_unused(folder, sub_id, amount, idempotency_key=idempotency_key)


@step("goodbye")
def goodbye(folder, to, subject):
    return send_email(folder, to, subject)


@DBOS.workflow()
def cancel_subscription(folder, sub_id, unused):
    """No name given: DBOS registers it under the function's name, which no one else uses."""
    sub = lookup(folder, sub_id)
    plan = cancel(folder, sub_id, idempotency_key=key_for("cancel", sub_id))
    result = {"subscription": sub_id, "cancellation": plan["record_id"], "refund_id": None,
              "amount": unused}
    if unused > 0:
        result["refund_id"] = refund(folder, sub_id, unused,
                                     idempotency_key=key_for("refund", sub_id))["refund_id"]
    goodbye(folder, sub["email"], f"{sub_id} is cancelled")
    return result
'''


@needs_dbos
def test_a_port_with_its_keys_inside_the_steps_passes_every_test(port):
    results = run("q1", port(KEYS_IN_THE_STEPS, "cancel_subscription"), seed=41)
    assert failed(results) == set(), {n: t.message for n, t in results.items()}


@needs_dbos
def test_a_port_with_a_key_helper_keywords_and_no_name_passes(port):
    results = run("q1", port(HELPER_AND_KEYWORDS, "cancel_subscription"), seed=42,
                  only=[NO_CRASH, NOTHING_TO_REFUND, REFUND_WINDOW, KEYS])
    assert failed(results) == set(), {n: t.message for n, t in results.items()}


# q2 -----------------------------------------------------------------------------------------
PAUSE_STEPS = '''
@step("lookup")
def lookup(folder, sub_id):
    return lookup_subscription(folder, sub_id)


@step("ask")
def ask(folder, to, subject):
    return send_email(folder, to, subject)


@step("unchanged")
def unchanged(folder, to, subject):
    return send_email(folder, to, subject)


@step("pause")
def pause(folder, sub_id, months, key):
    return pause_plan(folder, sub_id, months, idempotency_key=key)
'''


def pause_port(wait="DBOS.recv(CONFIRM, timeout_seconds=deadline)", months='answer["months"]',
               no_answer="answer is None",
               key="derive_key(DBOS.workflow_id, 'pause', sub_id)", before_wait=""):
    return PAUSE_STEPS + f'''

@DBOS.workflow(name="WORKFLOW_NAME")
def pause_subscription(folder, sub_id, deadline=2 * DAY):
    sub = lookup(folder, sub_id)
    ask(folder, sub["email"], f"Pause {{sub_id}}? Answer within two days")
    {before_wait}
    answer = {wait}
    if {no_answer}:
        unchanged(folder, sub["email"], f"No answer: {{sub_id}} stays active")
        return {{"subscription": sub_id, "outcome": "no answer"}}
    if not answer["pause"]:
        unchanged(folder, sub["email"], f"{{sub_id}} stays active")
        return {{"subscription": sub_id, "outcome": "kept"}}
    plan = pause(folder, sub_id, {months}, {key})
    return {{"subscription": sub_id, "outcome": "paused", "months": {months},
            "pause": plan["record_id"]}}
'''


@needs_dbos
def test_a_right_pause_passes_every_test(port):
    results = run("q2", port(pause_port(), "pause_subscription"), seed=51)
    assert failed(results) == set(), {n: t.message for n, t in results.items()}


@needs_dbos
def test_a_hard_coded_one_second_deadline_fails(port):
    """The answer a newcomer gave: DBOS.recv(CONFIRM, timeout_seconds=1), the constant the
    hint warns against. It hears a prompt answer, but gives up early on the long deadline
    (whatever is drawn: no constant lasts both of the silent test's deadlines) and misses
    a late answer."""
    answer = port(pause_port(wait="DBOS.recv(CONFIRM, timeout_seconds=1)"), "pause_subscription")
    results = run("q2", answer, seed=64)
    assert failed(results) == {SILENT, LATE}
    assert re.search(r"your port's wait ended after 1\.[0-4] s, before the deadline",
                     results[SILENT].message), results[SILENT].message
    assert "`deadline` argument" in results[SILENT].hint
    assert re.search(r"ended after 1\.[0-4] s, before the answer came", results[LATE].message)


@needs_dbos
def test_a_hard_coded_longer_deadline_fails_the_silent_runs(port):
    """3.9 s lasts too long for the short deadline (at most 1.7 s, and 2 s of slack) and
    not long enough for the long one (at least 4.3 s): whichever run comes first fails."""
    answer = port(pause_port(wait="DBOS.recv(CONFIRM, timeout_seconds=3.9)"),
                  "pause_subscription")
    results = run("q2", answer, seed=66, only=[SILENT])
    assert failed(results) == {SILENT}
    assert re.search(r"your port's wait lasted (3\.9|4\.[0-4]) s", results[SILENT].message), \
        results[SILENT].message


@needs_dbos
def test_a_wait_that_ignores_the_deadline_argument_fails_when_nobody_answers(port):
    answer = port(pause_port(wait="DBOS.recv(CONFIRM, timeout_seconds=2 * DAY)"),
                  "pause_subscription")
    results = run("q2", answer, seed=53, only=[SILENT])
    assert failed(results) == {SILENT}
    assert "later your port was still waiting" in results[SILENT].message


@needs_dbos
def test_a_wait_on_another_topic_never_hears_the_answer(port):
    answer = port(pause_port(wait='DBOS.recv("confirmation", timeout_seconds=deadline)'),
                  "pause_subscription")
    results = run("q2", answer, seed=54, only=[YES, SILENT, LATE])
    assert failed(results) == {YES, LATE}
    assert "still waiting" in results[YES].message and "topic" in results[YES].hint


@needs_dbos
def test_a_wait_that_sleeps_out_the_deadline_before_it_looks_fails_the_answers(port):
    answer = port(pause_port(before_wait="DBOS.sleep(deadline)",
                             wait="DBOS.recv(CONFIRM, timeout_seconds=0)"), "pause_subscription")
    results = run("q2", answer, seed=55, only=[NO, SILENT])
    assert failed(results) == {NO}                # right outcome, a day or two too late
    assert "still waiting" in results[NO].message


@needs_dbos
@pytest.mark.parametrize("seed", [56, 57])
def test_no_answer_taken_for_a_no_fails(port, seed):
    wait = "DBOS.recv(CONFIRM, timeout_seconds=deadline) or {'pause': False}"
    answer = port(pause_port(no_answer="answer is None and False", wait=wait),
                  "pause_subscription")
    results = run("q2", answer, seed, only=[NO, SILENT, LATE])
    assert failed(results) == {SILENT}
    assert "'outcome': 'kept'" in results[SILENT].message


@needs_dbos
@pytest.mark.parametrize("seed", [58, 59])
def test_months_not_read_from_the_answer_fail(port, seed):
    answer = port(pause_port(months="1"), "pause_subscription")
    results = run("q2", answer, seed, only=[YES])
    assert failed(results) == {YES}


@needs_dbos
def test_a_pause_key_without_the_workflow_id_fails(port):
    answer = port(pause_port(key="derive_key('pause', sub_id)"), "pause_subscription")
    results = run("q2", answer, seed=60, only=[YES])
    assert failed(results) == {YES}
    assert "key" in results[YES].message


@needs_dbos
def test_an_email_sent_outside_a_step_fails_on_the_recorded_steps(port):
    outside = pause_port().replace('    ask(folder, sub["email"]',
                                   '    send_email(folder, sub["email"]')     # no step
    answer = port(outside, "pause_subscription")
    results = run("q2", answer, seed=63, only=[NO])
    assert failed(results) == {NO}
    assert "DBOS recorded the steps ['lookup', 'unchanged']" in results[NO].message


PAUSE_WRITTEN_DIFFERENTLY = PAUSE_STEPS.replace('@step("', '@DBOS.step(name="') + '''

@DBOS.workflow(name="WORKFLOW_NAME")
def pause_subscription(folder, sub_id, deadline=2 * DAY):
    email = lookup(folder, sub_id)["email"]
    ask(folder, email, "Pause " + sub_id + "?")
    reply = DBOS.recv(topic=CONFIRM, timeout_seconds=deadline)
    if reply and reply.get("pause"):
        record = pause(folder, sub_id, reply["months"],
                       derive_key(DBOS.workflow_id, "pause", sub_id))
        return {"subscription": sub_id, "outcome": "paused", "months": reply["months"],
                "pause": record["record_id"]}
    unchanged(folder, email, sub_id + " stays active")
    return {"subscription": sub_id, "outcome": "kept" if reply else "no answer"}
'''


@needs_dbos
def test_a_pause_written_differently_passes(port):
    results = run("q2", port(PAUSE_WRITTEN_DIFFERENTLY, "pause_subscription"), seed=61)
    assert failed(results) == set(), {n: t.message for n, t in results.items()}


# a wrong notebook, graded end to end ----------------------------------------------------------
NO_KEYS_CELL = cancel_port(cancel_key="None", refund_key="None").replace(
    "WORKFLOW_NAME", "ex14-cancel-subscription")
NO_ANSWER_IS_NO_CELL = pause_port(
    no_answer="answer is None and False",
    wait="DBOS.recv(CONFIRM, timeout_seconds=deadline) or {'pause': False}").replace(
    "WORKFLOW_NAME", "ex14-pause-subscription")


@needs_dbos
def test_a_notebook_with_a_port_without_keys_and_no_answer_taken_for_a_no(tmp_path):
    path = learner("14_port_to_dbos", tmp_path,
                   cells={"cancel_subscription = None": NO_KEYS_CELL,
                          "pause_subscription = None": NO_ANSWER_IS_NO_CELL})
    score = grade_notebook(path, seed=62)
    assert statuses(score) == {"q1": "failed", "q2": "failed"}, score.report()
    assert score.notes == [] and not score.tampered
    q1, q2 = (score.question(q)["tests"] for q in ("q1", "q2"))
    assert [t["status"] for t in q1] == ["passed", "passed", "failed", "failed", "passed",
                                         "passed", "failed"]
    assert [t["status"] for t in q2] == ["passed", "passed", "failed", "passed"]
    assert "refunds paid 2 (the original's: 1)" in q1[REFUND_WINDOW]["message"]
    assert "'outcome': 'kept'" in q2[SILENT]["message"]


def test_the_setup_cell_binds_every_name_the_saved_module_starts_with():
    import nbformat

    from grading_support import ROOT
    nb = nbformat.read(ROOT / "solutions" / "14_port_to_dbos.ipynb", as_version=4)
    setup = next(c.source for c in nb.cells if c.cell_type == "code")
    preamble, cell = {}, {}
    exec(ex14.PREAMBLE, preamble)
    exec("\n".join(line for line in setup.splitlines() if not line.startswith("check")), cell)
    assert {k: v for k, v in preamble.items() if k != "__builtins__"}.items() <= cell.items()


def test_the_notebook_shows_the_originals_as_they_are():
    import inspect

    import nbformat

    from durable_lite.engines import subscription_durable_lite as original
    from grading_support import ROOT
    text = "\n".join(c.source for c in nbformat.read(ROOT / "solutions" / "14_port_to_dbos.ipynb",
                                                     as_version=4).cells)
    for wf in (original.cancel_subscription, original.pause_subscription):
        assert inspect.getsource(wf.fn).rstrip() in text


@needs_dbos
def test_where_dbos_cannot_use_sqlite_the_checks_run_on_a_throwaway_postgres(port, monkeypatch):
    from durable_lite.engines import dbos_support
    monkeypatch.setattr(dbos_support, "sqlite_usable", lambda: (False, "SQLite too old here"))
    try:
        # two tests of the same seed, so the same run ids, on one server: each test gets
        # a database of its own and never meets the other's workflows
        for _ in range(2):
            results = run("q1", port(cancel_port(), "cancel_subscription"), seed=71,
                          only=[NO_CRASH, REFUND_WINDOW])
            assert failed(results) == set(), {n: t.message for n, t in results.items()}
        assert ex14._postgres and ex14._postgres[0].running
    finally:
        while ex14._postgres:
            ex14._postgres.pop().stop()
