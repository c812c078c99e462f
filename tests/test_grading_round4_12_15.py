"""Exercises 12 (q3) and 15 (q2): the cases that tell two held-out wrong answers from right
ones are drawn on every run, and those wrong answers now fail.

Exercise 12, q3 (`resend`): an answer that passes over a fork an earlier call made, instead
of seeing it through, kept full marks: the only call that died had sent its email already.
The crash test now has a call die right before a corrected email goes out, then the next
one right after one went out, then a third call in a new process.

Exercise 15, q2 (LangGraph): a port that counts the deadline from the run's start instead
of from when the wait began kept full marks: no run began its wait long after it started.
The deadline test now has a run killed right after its notice was recorded, taken over by a
fresh process the next day (its wait begins then), and answered hours before the deadline
counted from there, which is past it counted from the run's start.

For each new case: a sweep over many seeds, run cheaply, shows it is reached on every one;
wrong answers of that kind, written as a learner would, fail it; right ones written
differently pass. The ports run on real LangGraph, one case each, all at once (the right
ports of test_grading_15.py also run the whole deadline test).
"""

import sys
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from durable_lite.faults import BEFORE_STEP
from durable_lite.grading import checks, exercise, wall_clock
from durable_lite.grading.cases import Draw
from durable_lite.grading.checks import Fail
from durable_lite.grading.exercises import ex12_versioning as ex12
from durable_lite.grading.exercises import ex15_port_to_temporal_and_langgraph as ex15

from grading_support import failed, needs_exercise, one_thread_at_a_time, run_tests, spelled_out
from test_grading_12 import FORK_FROM_EMAIL, answer
from test_grading_15 import DEADLINE, make_port
from test_grading_properties_01_07 import ROOT, learner_sees, runs_of, solution_lines

EX12, EX15 = exercise("12_versioning"), exercise("15_port_to_temporal_and_langgraph")
AFTER_A_CRASH = 2                      # exercise 12, q3's tests: once, again, after a crash
SWEEP = range(20)                                      # seeds each new case is looked for in


# exercise 12, q3: a fork an earlier call left unfinished -----------------------------------------
def unfinished_without_its_email(receipts):
    """The listed orders for which the store holds a run a call of resend made and left
    unfinished, while the customer has not had the corrected email."""
    state = receipts.state()
    return [o.order_id for o in receipts.bad
            if receipts.left_unfinished(o) and
            f"${o.amount} refunded for {o.order_id}" not in state[o.order_id]["customer emails"]]


@pytest.fixture
def crash_test_seen(monkeypatch):
    """run(fn, seed): q3's crash test on `fn`, every call in this process (the fresh process
    it starts for the last call would only cost time here); for each call, in order, what it
    found before it began. A Fail of the test is raised."""
    original = ex12.Receipts.resend
    seen, answering = [], []

    def resend(self, fn, crash=None):
        seen.append(unfinished_without_its_email(self))
        original(self, fn, crash)

    monkeypatch.setattr(ex12.Receipts, "resend", resend)
    monkeypatch.setattr(ex12.Receipts, "resend_in_a_new_process",
                        lambda self, source: resend(self, answering[-1]))

    def run(fn, seed):
        seen.clear()
        answering.append(fn)
        ex12.q3.tests[AFTER_A_CRASH].fn(fn, Draw(seed))
        return list(seen)
    return run


def test_ex12_every_seed_has_a_later_call_meet_a_fork_left_before_its_email(crash_test_seen):
    solution = answer(FORK_FROM_EMAIL, "resend")
    for seed in SWEEP:
        first, second, _ = crash_test_seen(solution, seed)           # the solution passes
        assert first == [], seed
        assert second, f"seed {seed}: the second call found no fork left before its email"


SKIPS_AN_EXISTING_FORK = {
    "skips a fork id the store already holds": '''
def resend(engine, run_ids):
    for run_id in run_ids:
        fixed = "corrected-" + run_id
        if engine.store.get_run(fixed) is not None:
            continue                     # already resent
        engine.fork(run_id, from_step="email", run_id=fixed)
''',
    "skips a fork id among the engine's runs": '''
def resend(engine, run_ids):
    done = {run.run_id for run in engine.runs()}
    for run_id in run_ids:
        if run_id + ":resent" not in done:
            engine.fork(run_id, "email", run_id=run_id + ":resent")
''',
    "skips a run whose history says it was forked": '''
def resend(engine, run_ids):
    for run_id in run_ids:
        if any(event.kind == "forked_to" for event in engine.store.events(run_id)):
            continue
        engine.fork(run_id, from_step="email")
''',
    "marks the run as resent, then forks": '''
import json


def resend(engine, run_ids):
    for run_id in run_ids:
        folder = json.loads(engine.store.get_run(run_id).args_json)[0]
        marks = world_at(folder).ledger("resent")
        if any(mark["key"] == run_id for mark in marks.records()):
            continue
        marks.record(key=run_id, detail={"run": run_id})
        engine.fork(run_id, from_step="email", run_id=f"resent-{run_id}")
''',
}


def q3(fn, seed, only=None):
    """{test number: result} of q3's tests (or only those numbered) on `fn`."""
    return run_tests(EX12, "q3", fn, seed, only)


@pytest.mark.parametrize("mistake", sorted(SKIPS_AN_EXISTING_FORK))
def test_ex12_an_answer_that_passes_over_an_unfinished_fork_fails_the_crash_test(mistake):
    fn = answer(SKIPS_AN_EXISTING_FORK[mistake], "resend")
    for seed, only in ((41, None), (42, [AFTER_A_CRASH])):     # every test once, then its own
        results = q3(fn, seed, only)
        assert failed(results) == {AFTER_A_CRASH}, f"seed {seed}:\n{spelled_out(results)}"
        crash = results[AFTER_A_CRASH]
        assert "got 0 more email(s)" in crash.message, crash.message
        assert "the store still holds run" in crash.message and ", running" in crash.message
        assert "unfinished" in crash.hint and "passes it by" in crash.hint, crash.hint


SEES_IT_THROUGH = {
    "forks once, resumes what it finds unfinished": '''
def resend(engine, run_ids):
    for run_id in run_ids:
        fixed = "corrected-" + run_id
        found = engine.store.get_run(fixed)
        if found is None:
            engine.fork(run_id, from_step="email", run_id=fixed)
        elif found.status != "completed":
            engine.resume(fixed)
''',
    "asks the engine, resumes any fork not done": '''
from durable_lite.errors import UnknownRunError


def resend(engine, run_ids):
    for source in run_ids:
        fix = f"{source}.fix"
        try:
            status = engine.get(fix).status
        except UnknownRunError:
            engine.fork(source, "email", run_id=fix)
            continue
        if status in ("running", "waiting"):
            engine.resume(fix)
''',
}


@pytest.mark.parametrize("route", sorted(SEES_IT_THROUGH))
def test_ex12_a_resend_that_sees_an_unfinished_fork_through_passes(route):
    fn = answer(SEES_IT_THROUGH[route], "resend")
    for seed, only in ((43, None), (44, [AFTER_A_CRASH])):
        results = q3(fn, seed, only)
        assert failed(results) == set(), f"seed {seed}:\n{spelled_out(results)}"


# exercise 15, q2: a wait that began the day after the run -------------------------------------------
def test_ex15_every_seed_has_a_run_resumed_late_and_answered_near_its_deadline(monkeypatch):
    """The deadline test's runs, as it draws them (its ports never run here)."""
    drawn = []
    monkeypatch.setattr(ex15, "langgraph_cases",
                        lambda port, draw, cases: drawn.append(cases) or [])
    for seed in SWEEP:
        drawn.clear()
        ex15.q2.tests[DEADLINE].fn(object(), Draw(seed))
        [cases] = drawn
        late = [c for c in cases if c.resumed_after]
        assert len(late) == 1, seed
        [case] = late
        assert case.crash.step in ex15.BEFORE_WAIT and case.crash.when != BEFORE_STEP, seed
        assert case.reply == ex15.CANCEL, seed
        assert case.resumed_after >= ex15.renewal.DAY, seed             # the next day
        assert case.resumed_after < case.reply_at, seed                 # then the reply
        before_the_deadline = case.deadline - case.into_the_wait(case.reply_at)
        assert 2 * ex15.HOUR - 1 <= before_the_deadline <= 10 * ex15.HOUR + 1, seed
        assert case.reply_at > case.deadline + 12 * ex15.HOUR, seed     # late from the start


def test_ex15_the_process_that_takes_over_before_the_wait_reads_the_later_clock():
    """on_langgraph asks for each worker's clock in turn: the starter's (0), the one taking
    over after a kill before the wait (0 again), the answerer's (the reply's moment)."""
    case = ex15.resumed_late(Draw(7))
    environment = ex15.clock_of(case)
    moments = [environment(s) for s in (0.0, 0.0, case.reply_at)]
    assert moments == [wall_clock.environment(s) for s in (0.0, case.resumed_after, case.reply_at)]


# The five tasks every port of the renewal declares as the given code does; the wrong
# answers below differ only in how they time the wait.
THE_GIVEN_TASKS = '''@task("customer")
def customer(folder, sub_id):
    return lookup_subscription(folder, sub_id)


@task("notice")
def notice(folder, to, subject):
    return send_email(folder, to, subject)


@task("cancel")
def cancel(folder, sub_id, key):
    return cancel_plan(folder, sub_id, idempotency_key=key)


@task("charge")
def charge(folder, sub_id, amount, key):
    return charge_renewal(folder, sub_id, amount, idempotency_key=key)


@task("receipt")
def receipt(folder, to, subject):
    return send_email(folder, to, subject)'''


FROM_THE_START = {
    "a clock task before the lookup": '''
import time


''' + THE_GIVEN_TASKS + '''


@task("now")
def now():
    return time.time()


def key(*parts):
    return derive_key(get_config()["configurable"]["thread_id"], *parts)


@entrypoint()
def renew_subscription(inputs):
    started = now().result()                     # the run's start, not the wait's
    folder, sub_id, price = inputs["folder"], inputs["sub_id"], inputs["price"]
    sub = customer(folder, sub_id).result()
    notice(folder, sub["email"], f"{sub_id} renews at {price}: reply within two days to cancel").result()
    reply = interrupt("reply?")
    if reply == WAKE_UP or now().result() - started > inputs["deadline"]:
        reply = None
    if reply is not None and reply["cancel"]:
        plan = cancel(folder, sub_id, key("cancel", sub_id)).result()
        return {"subscription": sub_id, "outcome": "cancelled", "replied": True,
                "cancellation": plan["record_id"]}
    charged = charge(folder, sub_id, price, key("charge", sub_id)).result()
    receipt(folder, sub["email"], f"{sub_id} renewed: {price} charged ({charged['record_id']})").result()
    return {"subscription": sub_id, "outcome": "renewed", "replied": reply is not None,
            "charge": charged["record_id"], "amount": price}
''',
    "the lookup stamps the time": '''
from datetime import datetime, timezone


def moment():
    return datetime.now(timezone.utc).timestamp()


@task("customer")
def customer(folder, sub_id):
    return {**lookup_subscription(folder, sub_id), "looked_up_at": moment()}


@task("notice")
def notice(folder, to, subject):
    send_email(folder, to, subject)


@task("cancel")
def cancel(folder, sub_id, key):
    return cancel_plan(folder, sub_id, idempotency_key=key)


@task("charge")
def charge(folder, sub_id, amount, key):
    return charge_renewal(folder, sub_id, amount, idempotency_key=key)


@task("receipt")
def receipt(folder, to, subject):
    send_email(folder, to, subject)


@task("arrived")
def arrived():
    return moment()


@entrypoint()
def renew_subscription(inputs):
    thread = get_config()["configurable"]["thread_id"]
    folder, sub_id, price = inputs["folder"], inputs["sub_id"], inputs["price"]
    sub = customer(folder, sub_id).result()
    due = sub["looked_up_at"] + inputs.get("deadline", 2 * DAY)
    notice(folder, sub["email"], f"{sub_id} renews at {price}: reply within two days to cancel").result()
    answer = interrupt({"reply by": due})
    reply = answer if answer != WAKE_UP and arrived().result() <= due else None
    if reply and reply["cancel"]:
        plan = cancel(folder, sub_id, derive_key(thread, "cancel", sub_id)).result()
        return {"subscription": sub_id, "outcome": "cancelled", "replied": True,
                "cancellation": plan["record_id"]}
    charged = charge(folder, sub_id, price, derive_key(thread, "charge", sub_id)).result()
    receipt(folder, sub["email"], f"{sub_id} renewed: {price} charged ({charged['record_id']})").result()
    return {"subscription": sub_id, "outcome": "renewed", "replied": reply is not None,
            "charge": charged["record_id"], "amount": price}
''',
    "the notice returns when it went out": '''
import time


@task("customer")
def customer(folder, sub_id):
    return lookup_subscription(folder, sub_id)


@task("notice")
def notice(folder, to, subject):
    send_email(folder, to, subject)
    return time.time()                           # the customer was told now: count from here


@task("cancel")
def cancel(folder, sub_id, key):
    return cancel_plan(folder, sub_id, idempotency_key=key)


@task("charge")
def charge(folder, sub_id, amount, key):
    return charge_renewal(folder, sub_id, amount, idempotency_key=key)


@task("receipt")
def receipt(folder, to, subject):
    return send_email(folder, to, subject)


@task("clock")
def clock():
    return time.time()


def key(*parts):
    return derive_key(get_config()["configurable"]["thread_id"], *parts)


@entrypoint()
def renew_subscription(inputs):
    folder, sub_id, price = inputs["folder"], inputs["sub_id"], inputs["price"]
    sub = customer(folder, sub_id).result()
    told_at = notice(folder, sub["email"],
                     f"{sub_id} renews at {price}: reply within two days to cancel").result()
    reply = interrupt({"waiting for": REPLY})
    late = clock().result() > told_at + inputs.get("deadline", 2 * DAY)
    if late or reply == WAKE_UP:
        reply = None
    if reply is not None and reply["cancel"]:
        plan = cancel(folder, sub_id, key("cancel", sub_id)).result()
        return {"subscription": sub_id, "outcome": "cancelled", "replied": True,
                "cancellation": plan["record_id"]}
    charged = charge(folder, sub_id, price, key("charge", sub_id)).result()
    receipt(folder, sub["email"], f"{sub_id} renewed: {price} charged ({charged['record_id']})").result()
    return {"subscription": sub_id, "outcome": "renewed", "replied": reply is not None,
            "charge": charged["record_id"], "amount": price}
''',
}
FROM_THE_WAIT = {
    "a due time computed in a task at the wait": '''
import time


@task("customer")
def customer(folder, sub_id):
    return lookup_subscription(folder, sub_id)


@task("notice")
def notice(folder, to, subject):
    send_email(folder, to, subject)


@task("cancel")
def cancel(folder, sub_id, key):
    return cancel_plan(folder, sub_id, idempotency_key=key)


@task("charge")
def charge(folder, sub_id, amount, key):
    return charge_renewal(folder, sub_id, amount, idempotency_key=key)


@task("receipt")
def receipt(folder, to, subject):
    send_email(folder, to, subject)


@task("due")
def due_by(seconds):
    return time.time() + seconds


@task("checked")
def still_before(due):
    return time.time() <= due


@entrypoint()
def renew_subscription(inputs):
    thread = get_config()["configurable"]["thread_id"]
    folder, sub_id, price = inputs["folder"], inputs["sub_id"], inputs["price"]
    email = customer(folder, sub_id).result()["email"]
    notice(folder, email, f"{sub_id} renews at {price}: reply within two days to cancel").result()
    due = due_by(inputs.get("deadline", 2 * DAY)).result()
    got = interrupt(due)
    replied = got != WAKE_UP and still_before(due).result()
    if replied and got["cancel"]:
        record = cancel(folder, sub_id, derive_key(thread, "cancel", sub_id)).result()
        return {"subscription": sub_id, "outcome": "cancelled", "replied": True,
                "cancellation": record["record_id"]}
    record = charge(folder, sub_id, price, derive_key(thread, "charge", sub_id)).result()
    receipt(folder, email, f"{sub_id} renewed: {price} charged ({record['record_id']})").result()
    return {"subscription": sub_id, "outcome": "renewed", "replied": replied,
            "charge": record["record_id"], "amount": price}
''',
    "elapsed time since a stamp taken after the notice": '''
from datetime import datetime


''' + THE_GIVEN_TASKS + '''


@task("stamp")
def stamp():
    return datetime.now().isoformat()


def key(*parts):
    return derive_key(get_config()["configurable"]["thread_id"], *parts)


@entrypoint()
def renew_subscription(inputs):
    folder, sub_id, price = inputs["folder"], inputs["sub_id"], inputs["price"]
    sub = customer(folder, sub_id).result()
    notice(folder, sub["email"], f"{sub_id} renews at {price}: reply within two days to cancel").result()
    waiting_since = datetime.fromisoformat(stamp().result())
    reply = interrupt({"waiting since": waiting_since.isoformat()})
    waited = datetime.fromisoformat(stamp().result()) - waiting_since
    if reply == WAKE_UP or waited.total_seconds() > inputs.get("deadline", 2 * DAY):
        reply = None
    if reply is not None and reply["cancel"]:
        plan = cancel(folder, sub_id, key("cancel", sub_id)).result()
        return {"subscription": sub_id, "outcome": "cancelled", "replied": True,
                "cancellation": plan["record_id"]}
    charged = charge(folder, sub_id, price, key("charge", sub_id)).result()
    receipt(folder, sub["email"], f"{sub_id} renewed: {price} charged ({charged['record_id']})").result()
    return {"subscription": sub_id, "outcome": "renewed", "replied": reply is not None,
            "charge": charged["record_id"], "amount": price}
''',
}
THROUGH_THE_WHOLE_TEST = "a clock task before the lookup"    # the others: the new case alone
PORT_SEEDS = dict(zip([*FROM_THE_START, *FROM_THE_WAIT], range(51, 60)))


@pytest.fixture(scope="module")
def ports_judged(tmp_path_factory):
    """{label: what the deadline test made of the port}: for one wrong port, the whole test's
    result; for every other port, the Fail (or None) of the late-resumed case alone. All run
    at once, each case with folders, a thread and a checkpoint file of its own."""
    needs_exercise("15_port_to_temporal_and_langgraph")
    folder = tmp_path_factory.mktemp("ports")
    sys.path.insert(0, str(folder))
    ports = {label: make_port(folder, "q2", source)
             for label, source in {**FROM_THE_START, **FROM_THE_WAIT}.items()}

    def judged(label):
        port, seed = ports[label], PORT_SEEDS[label]
        if label == THROUGH_THE_WHOLE_TEST:
            return label, run_tests(EX15, "q2", port, seed, only=[DEADLINE])
        draw = Draw(seed)
        [(case, want, got)] = ex15.langgraph_cases(port, draw, [ex15.resumed_late(draw)])
        try:
            ex15.judge(ex15.LANGGRAPH, want, got, case)
        except Fail as fail:
            return label, fail
        return label, None

    try:
        with one_thread_at_a_time(), ThreadPoolExecutor(max_workers=len(ports)) as pool:
            results = dict(pool.map(judged, ports))
    finally:
        sys.path.remove(str(folder))
    return results


@pytest.mark.crash
def test_ex15_a_deadline_counted_from_the_run_start_fails_the_deadline_test(ports_judged):
    whole = ports_judged[THROUGH_THE_WHOLE_TEST]
    assert whole[DEADLINE].status == checks.FAILED, spelled_out(whole)
    assert "before its wait; a fresh process took over" in whole[DEADLINE].message
    for label in FROM_THE_START:
        fail = whole[DEADLINE] if label == THROUGH_THE_WHOLE_TEST else ports_judged[label]
        assert fail is not None, f"{label}: passed the late-resumed case"
        message, hint = fail.message, fail.hint
        assert "cancellations 0 (the original's: 1)" in message, (label, message)
        assert "counted from when the wait began (the wait began when the fresh process took " \
               "over" in hint, (label, hint)


@pytest.mark.crash
def test_ex15_a_deadline_counted_from_the_wait_passes_the_late_resumed_case(ports_judged):
    for label in FROM_THE_WAIT:
        fail = ports_judged[label]
        assert fail is None, (label, fail and (fail.message, fail.hint))


def test_ex12_the_crash_tests_hints_quote_no_line_of_the_solution():
    """The audit test_grading_properties_01_07.py runs on exercises 01 to 07 (and
    test_grading_15.py on 15), on the hints this change wrote for exercise 12."""
    name = "12_versioning"
    shown = runs_of(learner_sees(nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)))
    solution = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    secret = set().union(*(runs_of(line) for line in solution_lines(solution))) - shown
    crash_test = ex12.q3.tests[AFTER_A_CRASH]
    for text in (ex12.CARRY_ON, crash_test.hint, crash_test.name):
        assert not runs_of(text) & secret, text
