"""Exercise 15 can be failed, and passed in more than one way.

Each port below is written the way a learner would write the answer cell, saved as a
module below the question's given imports and imported, then given to the exercise's
checks; the checks save its source again as a module of their own for the worker
processes, exactly as they do with a notebook cell. Each property the checks' docstring
lists has a port below that is right in everything but that property, and fails the test
that names it, and only the tests it should; right ports written differently pass. One
wrong notebook is graded end to end by the grader (test_grading.py grades the solution and
the untouched exercise).

The checks run real processes (a Temporal dev server, Temporal workers, LangGraph workers,
durable_lite children, SIGKILL). To keep the suite short, every check this file needs runs
once, up front, several at a time (each case has a task queue, a thread, folders and run
ids of its own), and the tests read their results; one Temporal server serves them all,
and the last test proves it is stopped and no worker is left.
"""

import ast
import importlib
import os
import re
import secrets
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from durable_lite.grading import checks, exercise
from durable_lite.grading.exercises import ex15_port_to_temporal_and_langgraph as ex15
from durable_lite.grading.grader import grade_notebook

from grading_support import (ROOT, check_outputs, failed, learner, one_thread_at_a_time, run_tests,
                             spelled_out, statuses)

EX = exercise("15_port_to_temporal_and_langgraph")
pytestmark = pytest.mark.crash

# the tests of each question, by what they vary
KEEP, CANCEL, SILENT, LATE, KEYED, UNKEYED, DRAWN, KEYS = range(8)       # q1
DEADLINE = LATE                                                           # q2's fourth test
ALL = list(range(8))


# the ports ------------------------------------------------------------------------------------
TEMPORAL_ACTIVITIES = '''
import time
import uuid
from datetime import date


@activity("customer")
def customer(folder: str, sub_id: str) -> dict:
    return lookup_subscription(folder, sub_id)


@activity("notice")
def notice(folder: str, to: str, subject: str, key=None) -> dict:
    return send_email(folder, to, subject, idempotency_key=key)


@activity("cancel")
def cancel(folder: str, sub_id: str, key) -> dict:
    return cancel_plan(folder, sub_id, idempotency_key=KEY_IN_ACTIVITY)


@activity("charge")
def charge(folder: str, sub_id: str, amount: int, key) -> dict:
    return charge_renewal(folder, sub_id, amount, idempotency_key=KEY_IN_ACTIVITY)


@activity("receipt")
def receipt(folder: str, to: str, subject: str, key=None) -> dict:
    return send_email(folder, to, subject, idempotency_key=key)
'''


def temporal_port(key="derive_key(workflow.info().workflow_id, *parts)", key_in_activity="key",
                  notice_key="None", receipt_key="None", signal="REPLY",
                  wait="await workflow.wait_condition(lambda: self.reply is not None, "
                       "timeout=deadline)",
                  cancel_if="reply is not None and reply['cancel']", activities=None,
                  notice_line='await step("notice", folder, sub["email"], subject, {notice_key})',
                  result_charge='charged["record_id"]', name="NAME"):
    """A port of renew_subscription to Temporal with one thing changed from a right one."""
    text = (activities or TEMPORAL_ACTIVITIES).replace("KEY_IN_ACTIVITY", key_in_activity)
    notice_line = notice_line.format(notice_key=notice_key)
    return text + f'''

def idempotency_key(*parts):
    return {key}


@workflow.defn(name="{name}")
class RenewSubscription:
    def __init__(self):
        self.reply = None

    @workflow.signal(name={signal})
    def replied(self, reply: dict) -> None:
        self.reply = reply

    @workflow.run
    async def run(self, folder: str, sub_id: str, price: int, deadline: float = 2 * DAY) -> dict:
        sub = await step("customer", folder, sub_id)
        subject = f"{{sub_id}} renews at {{price}}: reply within two days to cancel"
        {notice_line}
        try:
            {wait}
        except asyncio.TimeoutError:
            pass
        reply = self.reply
        if {cancel_if}:
            plan = await step("cancel", folder, sub_id, idempotency_key("cancel", sub_id))
            return {{"subscription": sub_id, "outcome": "cancelled", "replied": True,
                    "cancellation": plan["record_id"]}}
        charged = await step("charge", folder, sub_id, price, idempotency_key("charge", sub_id))
        await step("receipt", folder, sub["email"],
                   f"{{sub_id}} renewed: {{price}} charged ({{charged['record_id']}})", {receipt_key})
        return {{"subscription": sub_id, "outcome": "renewed", "replied": reply is not None,
                "charge": {result_charge}, "amount": price}}
'''


LANGGRAPH_TASKS = '''
import time
import uuid


@task("customer")
def customer(folder, sub_id):
    return lookup_subscription(folder, sub_id)


@task("notice")
def notice(folder, to, subject, key=None):
    return send_email(folder, to, subject, idempotency_key=key)


@task("cancel")
def cancel(folder, sub_id, key):
    return cancel_plan(folder, sub_id, idempotency_key=KEY_IN_TASK)


@task("charge")
def charge(folder, sub_id, amount, key):
    return charge_renewal(folder, sub_id, amount, idempotency_key=KEY_IN_TASK)


@task("receipt")
def receipt(folder, to, subject, key=None):
    return send_email(folder, to, subject, idempotency_key=key)


@task("clock")
def clock():
    return time.time()
'''


def langgraph_port(key='derive_key(get_config()["configurable"]["thread_id"], *parts)',
                   key_in_task="key", notice_key="None", receipt_key="None",
                   deadline='inputs.get("deadline", 2 * DAY)', due="clock().result() + deadline",
                   late="clock().result() > due", wait='interrupt({"waiting for": REPLY, "due": due})',
                   cancel_if="reply is not None and reply['cancel']", tasks=None,
                   notice_line='notice(folder, sub["email"], subject, {notice_key}).result()'):
    """A port of renew_subscription to LangGraph with one thing changed from a right one."""
    text = (tasks or LANGGRAPH_TASKS).replace("KEY_IN_TASK", key_in_task)
    notice_line = notice_line.format(notice_key=notice_key)
    return text + f'''

def idempotency_key(*parts):
    return {key}


@entrypoint()
def renew_subscription(inputs):
    folder, sub_id, price = inputs["folder"], inputs["sub_id"], inputs["price"]
    deadline = {deadline}
    sub = customer(folder, sub_id).result()
    subject = f"{{sub_id}} renews at {{price}}: reply within two days to cancel"
    {notice_line}
    due = {due}
    reply = {wait}
    if {late}:
        reply = None
    if {cancel_if}:
        plan = cancel(folder, sub_id, idempotency_key("cancel", sub_id)).result()
        return {{"subscription": sub_id, "outcome": "cancelled", "replied": True,
                "cancellation": plan["record_id"]}}
    charged = charge(folder, sub_id, price, idempotency_key("charge", sub_id)).result()
    receipt(folder, sub["email"], f"{{sub_id}} renewed: {{price}} charged ({{charged['record_id']}})",
            {receipt_key}).result()
    return {{"subscription": sub_id, "outcome": "renewed", "replied": reply is not None,
            "charge": charged["record_id"], "amount": price}}
'''


# Right ports, written another way ------------------------------------------------------------
TEMPORAL_WRITTEN_DIFFERENTLY = '''
from datetime import timedelta

from temporalio import activity as temporal_activity


def key(*parts):
    """The workflow id, read inside the activity: Temporal tells an activity its workflow."""
    return derive_key(temporal_activity.info().workflow_id, *parts)


lookup = activity("customer")(lookup_subscription)


@activity("notice")
def tell(folder, to, subject):
    send_email(folder, to, subject)


@activity("cancel")
def end_plan(folder, sub_id):
    return cancel_plan(folder, sub_id, idempotency_key=key("cancel", sub_id))


@activity("charge")
def bill(folder, sub_id, amount):
    return charge_renewal(folder, sub_id, amount, idempotency_key=key("charge", sub_id))


@activity("receipt")
def thank(folder, to, subject):
    send_email(folder, to, subject)


@workflow.defn(name="NAME")
class Renewal:
    def __init__(self):
        self.replies = []

    @workflow.signal(name=REPLY)
    def on_reply(self, reply):
        self.replies.append(reply)

    @workflow.run
    async def run(self, folder, sub_id, price, deadline=2 * DAY):
        email = (await step("customer", folder, sub_id))["email"]
        await step("notice", folder, email, f"{sub_id} renews at {price}: reply within two days to cancel")
        try:
            await workflow.wait_condition(lambda: bool(self.replies),
                                          timeout=timedelta(seconds=deadline))
        except asyncio.TimeoutError:
            reply = None
        else:
            reply = self.replies[0]
        if reply and reply.get("cancel"):
            record = await step("cancel", folder, sub_id)
            return dict(subscription=sub_id, outcome="cancelled", replied=True,
                        cancellation=record["record_id"])
        record = await step("charge", folder, sub_id, price)
        await step("receipt", folder, email,
                   "%s renewed: %s charged (%s)" % (sub_id, price, record["record_id"]))
        return dict(subscription=sub_id, outcome="renewed", replied=reply is not None,
                    charge=record["record_id"], amount=price)


RenewSubscription = Renewal
'''

LANGGRAPH_WRITTEN_DIFFERENTLY = '''
from datetime import datetime


def thread_key(*parts):
    return derive_key(get_config()["configurable"]["thread_id"], *parts)


lookup = task("customer")(lookup_subscription)
tell = task("notice")(send_email)
thank = task("receipt")(send_email)


@task("cancel")
def end_plan(folder, sub_id):
    return cancel_plan(folder, sub_id, idempotency_key=thread_key("cancel", sub_id))


@task("charge")
def bill(folder, sub_id, amount):
    return charge_renewal(folder, sub_id, amount, idempotency_key=thread_key("charge", sub_id))


@task("when")
def now():
    return datetime.now().timestamp()


@entrypoint()
def renew_subscription(inputs):
    folder, sub_id, price = inputs["folder"], inputs["sub_id"], inputs["price"]
    email = lookup(folder, sub_id).result()["email"]
    tell(folder, email, f"{sub_id} renews at {price}: reply within two days to cancel").result()
    asked_at = now().result()
    answer = interrupt({"reply by": asked_at + inputs.get("deadline", 2 * DAY)})
    in_time = now().result() - asked_at <= inputs.get("deadline", 2 * DAY)
    reply = answer if in_time and answer != WAKE_UP else None
    if reply and reply.get("cancel"):
        return {"subscription": sub_id, "outcome": "cancelled", "replied": True,
                "cancellation": end_plan(folder, sub_id).result()["record_id"]}
    record = bill(folder, sub_id, price).result()
    thank(folder, email, "%s renewed: %s charged (%s)" % (sub_id, price, record["record_id"])).result()
    return {"subscription": sub_id, "outcome": "renewed", "replied": reply is not None,
            "charge": record["record_id"], "amount": price}
'''


# Each port, the questions' tests it is given, its seeds, and what it should fail.
# q1: Temporal --------------------------------------------------------------------------------
Q1 = {
    # the keys: none, or ones that change when another worker retries the activity a day later
    "no keys": (temporal_port(key="None"), [KEYED, KEYS], [1], {KEYED, KEYS}),
    "a key from today's date, in the activity": (
        temporal_port(key_in_activity='f"{key}-{date.today()}"'), [KEYED, KEYS], [2], {KEYED, KEYS}),
    "a key from uuid4(), in the activity": (
        temporal_port(key_in_activity="str(uuid.uuid4())"), [KEYED], [4], {KEYED}),
    # stable keys that are not the original's: the windows hold, the keys test does not
    "a key from workflow.now()": (
        temporal_port(key="derive_key(str(workflow.now().date()), *parts)"), [KEYS], [5],
        {KEYS}),
    "a key from Temporal's run id": (
        temporal_port(key="derive_key(workflow.info().run_id, *parts)"), [KEYED, KEYS], [6],
        {KEYS}),
    "a key from workflow.uuid4()": (
        temporal_port(key="derive_key(str(workflow.uuid4()), *parts)"), [KEYS], [7],
        {KEYS}),
    # the unkeyed emails stay unkeyed
    "a keyed receipt": (temporal_port(receipt_key='idempotency_key("receipt", sub_id)'),
                        [UNKEYED, KEYS], [8], {UNKEYED}),
    "a keyed notice": (temporal_port(notice_key='idempotency_key("notice", sub_id)'),
                       [UNKEYED], [9], {UNKEYED}),
    # every effect in an activity
    "an email sent from the workflow's code": (
        temporal_port(notice_line="send_email(folder, sub['email'], subject)"), [KEEP], [10],
        {KEEP}),
    # the branches and the wait
    "no cancel branch": (temporal_port(cancel_if="False"), [KEEP, CANCEL], [11], {CANCEL}),
    "no reply taken for a cancel": (
        temporal_port(cancel_if="reply is None or reply['cancel']"), [CANCEL, SILENT], [12],
        {SILENT}),
    "a hard-coded one-second deadline": (
        temporal_port(wait="await workflow.wait_condition(lambda: self.reply is not None, "
                           "timeout=1)"), [SILENT, LATE], [13], {SILENT, LATE}),
    "a hard-coded 3.9 s deadline": (
        temporal_port(wait="await workflow.wait_condition(lambda: self.reply is not None, "
                           "timeout=3.9)"), [SILENT], [14], {SILENT}),
    "a wait that ignores the deadline": (
        temporal_port(wait="await workflow.wait_condition(lambda: self.reply is not None)"),
        [SILENT], [15], {SILENT}),
    "a wait that sleeps out the deadline first": (
        temporal_port(wait="await workflow.sleep(deadline)"), [KEEP], [16], {KEEP}),
    "a reply on another signal": (temporal_port(signal='"answer"'), [KEEP], [17], {KEEP}),
    # the names and the crash points
    "an activity renamed": (
        temporal_port(activities=TEMPORAL_ACTIVITIES.replace('@activity("notice")',
                                                             '@activity("notify")'),
                      notice_line='await step("notify", folder, sub["email"], subject, None)'),
        [KEEP, UNKEYED], [18], {KEEP, UNKEYED}),
    "activities without the course's crash points": (
        temporal_port(activities="from temporalio import activity as plain\n" +
                      TEMPORAL_ACTIVITIES.replace('@activity("', '@plain.defn(name="')),
        [KEEP, KEYED], [19], {KEYED}),
    "a result with a fresh world's id": (temporal_port(result_charge='"charges-1"'), [KEEP],
                                         [20], {KEEP}),
}
# (The solution notebook's ports score full marks in test_grading.py.)
Q1_RIGHT = {"a right port written differently": (TEMPORAL_WRITTEN_DIFFERENTLY, ALL, [22], set()),
            "the wrong ports' template, unchanged": (temporal_port(), [KEEP, CANCEL], [21], set())}

# q2: LangGraph -------------------------------------------------------------------------------
Q2 = {
    "no keys": (langgraph_port(key="None"), [KEEP, KEYED, KEYS], [31], {KEYED, KEYS}),
    "a key from time.time(), in the task": (
        langgraph_port(key_in_task='f"{key}-{int(time.time())}"'), [KEYED, KEYS], [32],
        {KEYED, KEYS}),
    "a key from uuid4(), outside the tasks": (
        langgraph_port(key="str(uuid.uuid4())"), [KEYED], [33], {KEYED}),
    "a stable key without the thread id": (
        langgraph_port(key="derive_key(*parts)"), [KEYED, KEYS], [34], {KEYS}),
    "a keyed receipt": (langgraph_port(receipt_key='idempotency_key("receipt", sub_id)'),
                        [KEEP, UNKEYED], [35], {UNKEYED}),
    "an email sent outside a task": (
        langgraph_port(notice_line="send_email(folder, sub['email'], subject)"), [KEEP], [36],
        {KEEP}),
    "no cancel branch": (langgraph_port(cancel_if="False"), [KEEP, CANCEL], [37], {CANCEL}),
    "a wake-up taken for a reply": (
        langgraph_port(late="False", cancel_if="reply.get('cancel')"), [SILENT], [38], {SILENT}),
    "no deadline check (only the wake-up is no reply)": (
        langgraph_port(late="reply == WAKE_UP"), [KEEP, SILENT, DEADLINE], [39], {DEADLINE}),
    "a hard-coded two-day deadline": (
        langgraph_port(deadline="2 * DAY"), [DEADLINE], [40], {DEADLINE}),
    "the due time read outside a task": (
        langgraph_port(due="time.time() + deadline"), [SILENT, DEADLINE], [41],
        {SILENT, DEADLINE}),
    "a thread that never waits": (langgraph_port(wait="None"), [KEEP], [42], {KEEP}),
    "a task renamed": (
        langgraph_port(tasks=LANGGRAPH_TASKS.replace('@task("notice")', '@task("notify")')),
        [KEEP, UNKEYED], [43], {KEEP, UNKEYED}),
    "tasks without the course's crash points": (
        langgraph_port(tasks="from langgraph.func import task as plain_task\n" +
                       LANGGRAPH_TASKS.replace('@task("', '@plain_task(name="')),
        [KEEP, KEYED], [44], {KEEP, KEYED}),     # nor are they seen to run
}
Q2_RIGHT = {"a right port written differently": (LANGGRAPH_WRITTEN_DIFFERENTLY, ALL, [52], set()),
            "the wrong ports' template, unchanged": (langgraph_port(), [KEEP, DEADLINE], [51],
                                                     set())}
ANSWERS = {"q1": "RenewSubscription", "q2": "renew_subscription"}
GIVEN = {"q1": ex15.TEMPORAL_IMPORTS, "q2": ex15.LANGGRAPH_IMPORTS}


def make_port(folder, qid, source):
    """The answer from a module holding the question's given imports and `source`, its
    Temporal workflow registered under a name of its own, as a notebook cell would give it."""
    module = f"learner_{secrets.token_hex(4)}"
    text = GIVEN[qid] + textwrap.dedent(source).replace("NAME", f"{module}-renewal")
    (folder / f"{module}.py").write_text(text, encoding="utf-8")
    return getattr(importlib.import_module(module), ANSWERS[qid])


def run(qid, answer, seed, only=None):
    return run_tests(EX, qid, answer, seed, only)


PLAN = [(qid, label, *spec) for qid, ports in (("q1", {**Q1, **Q1_RIGHT}), ("q2", {**Q2, **Q2_RIGHT}))
        for label, spec in ports.items()]
TIMES = {}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{(question, port's label, seed): {test number: TestResult}} for every port above,
    four ports at a time."""
    folder = tmp_path_factory.mktemp("ports")
    sys.path.insert(0, str(folder))
    jobs = [(qid, label, make_port(folder, qid, source), only, seed)
            for qid, label, source, only, seeds, _ in PLAN for seed in seeds]

    def grade(job):
        qid, label, answer, only, seed = job
        began = time.monotonic()
        out = run(qid, answer, seed, only)
        TIMES[(qid, label)] = time.monotonic() - began
        return (qid, label, seed), out

    began = time.monotonic()
    try:
        with one_thread_at_a_time(), ThreadPoolExecutor(max_workers=4) as pool:
            results = dict(pool.map(grade, jobs))
        if os.environ.get("DL_EX15_DUMP"):          # every message and hint, to read them
            with open(os.environ["DL_EX15_DUMP"], "w", encoding="utf-8") as f:
                for key, tests in results.items():
                    for n, t in tests.items():
                        f.write(f"{key} {n} {t.status}\n  {t.message}\n  hint: {t.hint}\n")
        yield results
    finally:
        TIMES["all"] = time.monotonic() - began
        sys.path.remove(str(folder))


def outcome(graded, qid, label):
    [(key, results)] = [(k, v) for k, v in graded.items() if k[:2] == (qid, label)]
    return results


@pytest.mark.parametrize("qid, label, expected", [(p[0], p[1], p[5]) for p in PLAN],
                         ids=[f"{p[0]}: {p[1]}" for p in PLAN])
def test_each_port_fails_exactly_the_tests_of_its_mistake(graded, qid, label, expected):
    results = outcome(graded, qid, label)
    assert failed(results) == expected, spelled_out(results)
    for n in expected:
        # a text, not a tuple: pytest shows a text whole, but cuts the middle out of a tuple's
        # repr, where a hung worker's stacks are (a check error's message carries them)
        assert results[n].status == checks.FAILED, f"{results[n].status}: {results[n].message}"
        assert results[n].message and results[n].hint


# what the feedback says, for the mistakes whose hint is derived from what the test saw ----------
def test_no_keys_on_temporal_pays_twice_and_is_told_about_the_key(graded):
    results = outcome(graded, "q1", "no keys")
    message, hint = results[KEYED].message, results[KEYED].hint
    assert "charges 2 (the original's: 1)" in message or \
        "cancellations 2 (the original's: 1)" in message, message
    assert "killed right after step" in message and "same every time it runs" in hint
    assert "different idempotency keys" in results[KEYS].message
    assert "workflow id" in results[KEYS].hint


def test_a_key_from_the_date_pays_twice_when_the_next_worker_runs_a_day_later(graded):
    message = outcome(graded, "q1", "a key from today's date, in the activity")[KEYED].message
    assert "(the original's: 1)" in message and "2 (the original's" in message


def test_a_keyed_email_sends_one_where_the_original_sends_two(graded):
    for qid in ("q1", "q2"):
        result = outcome(graded, qid, "a keyed receipt")[UNKEYED]
        assert "emails 2 (the original's: 3)" in result.message, result.message
        assert "window included" in result.hint


def test_an_email_outside_an_activity_is_named(graded):
    result = outcome(graded, "q1", "an email sent from the workflow's code")[KEEP]
    assert "notice" in result.message, result.message


def test_an_email_outside_a_task_is_sent_again_when_the_thread_is_answered(graded):
    result = outcome(graded, "q2", "an email sent outside a task")[KEEP]
    assert "emails 3 (the original's: 2)" in result.message, result.message
    assert "invoked again" in result.hint or "@task" in result.hint or "task" in result.hint


def test_a_missing_branch_is_told_the_branch_differs(graded):
    for qid in ("q1", "q2"):
        result = outcome(graded, qid, "no cancel branch")[CANCEL]
        assert "charges 1 (the original's: 0)" in result.message
        assert "this reply says cancel and came in time" in result.hint, result.hint
        assert "key" not in result.hint


def test_a_hard_coded_deadline_is_told_how_long_the_wait_lasted(graded):
    results = outcome(graded, "q1", "a hard-coded one-second deadline")
    # The wait is read off the server's history: at least the second the port waits, less
    # than the drawn deadline; a busy machine's server fires a timer late (3.5 s seen at
    # load 20, beside three other checks), so the figure itself is not pinned to 1 s.
    said = re.search(r"your port's wait ended after ([\d.]+) s, before the deadline came "
                     r"\(([\d.]+) s into the wait\)", results[SILENT].message)
    assert said and 1.0 <= float(said[1]) < float(said[2]), results[SILENT].message
    assert "`deadline` argument" in results[SILENT].hint
    assert "before the reply came" in results[LATE].message + results[LATE].hint, results[LATE]
    lasted = outcome(graded, "q1", "a hard-coded 3.9 s deadline")[SILENT].message
    assert "your port's wait lasted" in lasted or "ended after" in lasted, lasted


def test_a_wait_without_a_deadline_is_still_running(graded):
    result = outcome(graded, "q1", "a wait that ignores the deadline")[SILENT]
    assert "still running" in result.message and "nobody replied" in result.hint
    assert "`deadline`" in result.hint


def test_a_wrong_signal_is_told_where_the_reply_comes_from(graded):
    result = outcome(graded, "q1", "a reply on another signal")[KEEP]
    assert "still running" in result.message and "signal REPLY" in result.hint


def test_a_renamed_step_is_never_killed_there(graded):
    for qid, label in (("q1", "an activity renamed"), ("q2", "a task renamed")):
        results = outcome(graded, qid, label)
        assert "without ever reaching that point" in results[UNKEYED].message
        assert "named as in the original" in results[UNKEYED].hint


def test_steps_without_the_crash_points_are_never_killed(graded):
    for qid, label in (("q1", "activities without the course's crash points"),
                       ("q2", "tasks without the course's crash points")):
        result = outcome(graded, qid, label)[KEYED]
        assert "without ever reaching that point" in result.message


def test_a_thread_that_never_waits_is_told_so(graded):
    result = outcome(graded, "q2", "a thread that never waits")[KEEP]
    assert "without stopping to wait" in result.message and "interrupt" in result.hint


def test_a_late_reply_taken_for_an_answer_is_told_how_late_it_came(graded):
    result = outcome(graded, "q2", "no deadline check (only the wake-up is no reply)")[DEADLINE]
    assert "cancellations 1 (the original's: 0)" in result.message, result.message
    assert "hours after the run's deadline of" in result.hint, result.hint
    assert "only a reply sent by the deadline" in result.hint


def test_no_reply_taken_for_a_cancel_is_told_nobody_replied(graded):
    result = outcome(graded, "q1", "no reply taken for a cancel")[SILENT]
    assert "cancellations 1 (the original's: 0)" in result.message, result.message
    assert "nobody replied in time" in result.hint


def test_a_wake_up_taken_for_a_reply_is_told_what_it_is(graded):
    result = outcome(graded, "q2", "a wake-up taken for a reply")[SILENT]
    assert "'replied': True" in result.message and "no reply" in result.hint, result


# the answer itself, before anything runs ---------------------------------------------------------
def test_an_untouched_answer_is_not_attempted():
    for qid in ("q1", "q2"):
        results = run(qid, None, seed=60)
        assert {t.status for t in results.values()} == {checks.NOT_ATTEMPTED}


def test_the_original_or_something_else_is_refused_with_a_hint():
    from durable_lite.engines.lite.renewal import renew_subscription as original
    for qid, answer, text in (("q1", original, "durable_lite workflow"),
                              ("q1", 42, "a Temporal workflow class, but it is an int"),
                              ("q1", object, "a Temporal workflow class, but it is a class"),
                              ("q2", original, "durable_lite workflow"),
                              ("q2", len, "a LangGraph entrypoint")):
        results = run(qid, answer, seed=61, only=[KEEP])
        assert text in results[KEEP].message, results[KEEP].message
        assert results[KEEP].hint


def test_where_the_engines_cannot_run_the_checks_say_so(monkeypatch, tmp_path):
    sys.path.insert(0, str(tmp_path))
    try:
        temporal = make_port(tmp_path, "q1", temporal_port())
        langgraph = make_port(tmp_path, "q2", langgraph_port())
    finally:
        sys.path.remove(str(tmp_path))
    monkeypatch.setattr(ex15, "available", lambda: (False, "the Temporal CLI is missing here"))
    for qid, answer in (("q1", temporal), ("q2", langgraph)):
        result = run(qid, answer, seed=62, only=[KEEP])[KEEP]
        assert "this Python cannot run them: the Temporal CLI is missing here" in result.message
        assert "nothing is wrong with your answer" in result.hint


def test_a_workflow_that_still_raises_not_implemented_is_not_attempted(tmp_path):
    sys.path.insert(0, str(tmp_path))
    try:
        answer = make_port(tmp_path, "q2", '''
@entrypoint()
def renew_subscription(inputs):
    raise NotImplementedError("port the workflow")
''')
    finally:
        sys.path.remove(str(tmp_path))
    assert run("q2", answer, seed=63, only=[KEEP])[KEEP].status == checks.NOT_ATTEMPTED


# the notebook ---------------------------------------------------------------------------------------
def solution():
    return nbformat.read(ROOT / "solutions" / "15_port_to_temporal_and_langgraph.ipynb",
                         as_version=4)


def test_the_setup_cell_binds_every_name_the_saved_modules_start_with():
    setup = next(c.source for c in solution().cells if c.cell_type == "code")
    cell = {}
    exec("\n".join(line for line in setup.splitlines() if not line.startswith("check")), cell)
    for given in (ex15.TEMPORAL_IMPORTS, ex15.LANGGRAPH_IMPORTS):
        names = {}
        exec(given, names)
        names.pop("__builtins__")
        assert names.items() <= cell.items()
        assert given in ex15.TEMPORAL_PREAMBLE + ex15.LANGGRAPH_PREAMBLE


def test_the_notebook_shows_the_original_as_it_is():
    import inspect

    from durable_lite.engines.lite.renewal import renew_subscription as original
    text = "\n".join(c.source for c in solution().cells)
    assert inspect.getsource(original.fn).rstrip() in text


def test_no_hint_quotes_the_solution():
    from test_grading_properties_01_07 import hints_of, learner_sees, runs_of, solution_lines
    name = "15_port_to_temporal_and_langgraph"
    shown = runs_of(learner_sees(nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)))
    secret = set().union(*(runs_of(line) for line in solution_lines(solution()))) - shown
    quoted = [(where, text.strip()[:100], " ".join(sorted(runs_of(text) & secret)[0]))
              for where, text in hints_of(name) if runs_of(text) & secret]
    assert not quoted, "hints that quote the solution:\n" + "\n".join(map(str, quoted))


def test_the_check_module_documents_every_test_it_runs():
    """Every test's name and hint is a sentence a newcomer reads: none is left empty, and
    the docstring lists the properties of both questions."""
    doc = ex15.__doc__
    assert "q1 (Temporal). Properties a right answer has" in doc
    assert "q2 (LangGraph). Properties a right answer has" in doc
    for question in EX.questions.values():
        assert len(question.tests) == 8
        assert all(t.name and t.hint for t in question.tests)


# a wrong notebook, graded end to end ---------------------------------------------------------------
WRONG_Q2 = langgraph_port(late="reply == WAKE_UP")       # a late reply counts as an answer


def test_a_notebook_with_q1_untouched_and_a_late_reply_taken_for_an_answer(tmp_path):
    """Exercise 15's entry in a class: test_grading_report.py's class of typical wrong
    answers leaves this exercise to this test, which checks what the class checks of the
    others (the untouched question says so in its check cell, no check cell raises)."""
    path = learner("15_port_to_temporal_and_langgraph", tmp_path,
                   cells={"renew_subscription = None": textwrap.dedent(WRONG_Q2)})
    score = grade_notebook(path, seed=64)
    assert statuses(score) == {"q1": "not attempted", "q2": "failed"}, score.report()
    assert score.notes == [] and not score.tampered
    text, errors = check_outputs(score)
    assert not errors and "Traceback" not in text, errors
    assert text.count("not attempted yet") == 1
    assert all(t["message"] for t in score.question("q2")["tests"] if t["status"] != "passed")
    q2 = [t["status"] for t in score.question("q2")["tests"]]
    assert q2 == ["passed"] * DEADLINE + ["failed"] + ["passed"] * (7 - DEADLINE), \
        [(t["name"][:40], t["message"]) for t in score.question("q2")["tests"]]


# the crash points ----------------------------------------------------------------------------------
def test_a_crash_right_after_the_answer_finds_the_answer_saved(tmp_path):
    """LangGraph saves an answer to an interrupt in the background, like a task's result. A
    port with no task between its interrupt and its next step, killed just before that step
    while saves are slow, must still find the answer when a fresh process resumes it: the
    crash point waits for the answer's save, as it does for results (langgraph/faults.py)."""
    from durable_lite.engines.langgraph.worker import start_worker
    from durable_lite.faults import CrashAt
    module = f"learner_{secrets.token_hex(4)}"
    (tmp_path / f"{module}.py").write_text(ex15.LANGGRAPH_PREAMBLE + textwrap.dedent(WRONG_Q2),
                                           encoding="utf-8")
    where = {"imports": [module], "python_path": [str(tmp_path)]}
    path, entrypoint = tmp_path / "langgraph.sqlite", f"{module}.renew_subscription"
    started = start_worker(path, entrypoint, "t", **where, start={
        "folder": str(tmp_path / "world"), "sub_id": "K-1", "price": 3, "deadline": 86400})
    assert started.result()["status"] == "waiting"
    answering = start_worker(path, entrypoint, "t", **where, answer={"cancel": True},
                             crash=CrashAt("cancel", "before_step"), slow_saves=1.0)
    answering.join()
    assert answering.killed
    resumed = start_worker(path, entrypoint, "t", **where, resume=True).result()
    assert resumed["status"] == "completed", resumed
    assert resumed["result"]["outcome"] == "cancelled"


# nothing is left behind ------------------------------------------------------------------------------
def test_a_check_stopped_by_its_time_limit_leaves_no_worker_behind(tmp_path):
    """The grader gives each test 20 s; a port that waits for ever is stopped there, in the
    middle of its runs: every worker the test started is killed with it."""
    sys.path.insert(0, str(tmp_path))
    try:
        answer = make_port(tmp_path, "q1", temporal_port(
            wait="await workflow.wait_condition(lambda: self.reply is not None)"))
    finally:
        sys.path.remove(str(tmp_path))
    ex15.temporal_address()                    # the server is shared: only workers must go
    # Only the workers this check starts: another test of this process (a lesson's two
    # machines, say) may still be ending its own on a busy machine.
    before = {pid for pid, kind in left_running() if kind == "worker"}

    def left():
        return [p for p in left_running() if p[1] == "worker" and p[0] not in before]

    part = checks.Exercise(EX.id, EX.title, EX.lesson)
    part.question("q1", "", ["RenewSubscription"]).tests = [EX.questions["q1"].tests[SILENT]]
    began = time.monotonic()
    [result] = checks.run_question(part, "q1", [answer], seed=65, time_limit=6).tests
    assert "took longer than 6 s" in result.message
    assert time.monotonic() - began < 30
    # Killed at once, but on a busy machine a SIGKILLed worker can take a while to be gone;
    # what is still there at the deadline is described as it was then, not after.
    deadline = time.monotonic() + 60
    while left() and time.monotonic() < deadline:
        time.sleep(0.1)
    leftovers = [d for d in (described(pid) for pid, _ in left()) if "gone" not in d]
    assert leftovers == [], leftovers


def described(pid) -> dict:
    """What /proc says of `pid`: enough to tell which of our processes a leftover is."""
    from durable_lite.engines.temporal.worker import started
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError as exc:
        return {"pid": pid, "gone": str(exc)}
    name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return {"pid": pid, "name": name, "state": fields[0], "parent": int(fields[1]),
            "age_s": round(age, 1), "ours": pid in started(), "command": command[:200]}



def left_running():
    """The Temporal servers and workers below this process, [(pid, "server" or "worker")]."""
    from durable_lite.engines.temporal.tour import left_running as below_us
    return below_us()


def test_zz_the_temporal_server_and_every_worker_are_gone_at_the_end(graded):
    """Runs last in this file: stop the server the checks shared, and find no Temporal
    server or worker of ours still running. (The seconds each port's checks took are
    printed for the report.)"""
    print({k: round(v, 1) for k, v in TIMES.items()})
    server = ex15._server.get("server")
    assert server is not None and server.running     # the checks above shared one server
    ex15.stop_server()
    deadline = time.monotonic() + 30
    while left_running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_running() == []
    assert not server.running and ex15._server == {}


@pytest.fixture(scope="module", autouse=True)
def no_server_left_behind():
    yield
    ex15.stop_server()


def test_the_ports_here_parse():
    for _, _, source, *_ in PLAN:
        ast.parse(textwrap.dedent(source))
