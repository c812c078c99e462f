"""What a check reads from an answer is plain data, and what it counts comes from the world's
files: nothing an answer does in its own process (the kernel the checks run in) changes
either.

1. `plain.plain` copies an answer's value made of exact built-in types, and refuses a
   subclass of one (an int whose `__eq__` always says yes) or any other type, with a
   message that names the type.
2. `ledgers.Ledgers` reads each ledger from its SQLite file with its own code. On real
   worlds it reports exactly what reading through `durable_lite.sim` reports (how it read
   them before), and it goes on reporting that after the answer's process has replaced the
   table of worlds, World's and the model's methods, or the model's words. The grader's
   watch records the ledgers' code, so replacing it is caught there.
3. Exercise 01: answers that forge — a table of worlds that under-reports, World's count
   patched, an int that equals everything, a dict, str or list of a class of its own — lose
   their points or are refused with a message that says so; right answers written other
   ways still pass.
"""

import json
import os
import random
import subprocess
import sys

import pytest

import durable_lite as dl
from durable_lite import sim
from durable_lite.grading import checks, exercise, ledgers, plain as plain_module, watch
from durable_lite.grading.checks import Fail
from durable_lite.grading.exercises import ex01_naive_retry as ex01
from durable_lite.grading.harness import scratch
from durable_lite.grading.ledgers import Ledgers
from durable_lite.grading.plain import plain

from grading_support import failed, run_tests, spelled_out
from test_grading_properties_01_07 import kernel

EX01 = "01_naive_retry"


# answers' own classes, as a notebook could define them ------------------------------------------
class Agreeable(int):
    """An int that says yes to every comparison."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


class Label(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class Counts(dict):
    pass


class Calls(list):
    pass


# 1. plain data -----------------------------------------------------------------------------------
def test_plain_values_come_back_as_fresh_copies_tuples_as_lists():
    value = {"n": 3, "ok": True, "x": 1.5, "none": None,
             "calls": [(1, "lookup"), (2, "refund")], "nested": {"s": ["a", ("b",)]}}
    copy = plain(value, "f()")
    assert copy == json.loads(json.dumps(value))             # what a JSON round trip gives
    assert copy is not value and copy["calls"] is not value["calls"]
    assert plain({"a", "b"}, "f()", sets=True) == {"a", "b"}
    assert plain(frozenset({1}), "f()", sets=True) == {1}


@pytest.mark.parametrize("value, named", [
    (Agreeable(2), "Agreeable (a subclass of int)"),
    (Label("completed"), "Label (a subclass of str)"),
    (Counts(refunds=1), "Counts (a subclass of dict)"),
    (Calls([1]), "Calls (a subclass of list)"),
    ({"refunds": Agreeable(1)}, "Agreeable (a subclass of int) (at ['refunds'])"),
    ([[1, Label("x")]], "Label (a subclass of str) (at [0][1])"),
    ({"a", "b"}, "set"),                                   # a set where none is asked for
    (object(), "object"),
])
def test_a_subclass_or_another_type_is_refused_by_name(value, named):
    with pytest.raises(Fail) as refused:
        plain(value, "f()")
    assert f"f() returned a {named}" in refused.value.message
    assert "plain value is expected" in refused.value.message


def test_keys_other_than_strings_sets_of_subclasses_and_loops_are_refused():
    loop = []
    loop.append(loop)
    for value, sets, words in [({1: "a"}, False, "key of type int"),
                               ({Label("k"): 1}, False, "key of type Label (a subclass of str)"),
                               ({Label("k")}, True, "Label (a subclass of str)"),
                               (loop, False, "contains itself")]:
        with pytest.raises(Fail) as refused:
            plain(value, "f()", sets=sets)
        assert words in refused.value.message, refused.value.message


def test_a_refusal_runs_none_of_the_answers_code():
    class Loud(type):
        @property
        def __name__(cls):
            raise AssertionError("the check ran the answer's code")

    class Sneaky(int, metaclass=Loud):
        pass

    with pytest.raises(Fail) as refused:
        plain(Sneaky(1), "f()")
    assert "a subclass of int" in refused.value.message


def test_a_class_whose_metaclass_equals_every_type_is_still_refused():
    class SaysYes(type):
        def __eq__(cls, other):
            return True

        __hash__ = type.__hash__

    class Twin(int, metaclass=SaysYes):
        pass

    assert Twin in (int,)                   # what a check asking `type(x) in (...)` would see
    for value, sets in [(Twin(1), False), ({"n": Twin(1)}, False), ({Twin(1)}, True)]:
        with pytest.raises(Fail):
            plain(value, "f()", sets=sets)


# 2. the ledgers, read from the world's files -------------------------------------------------------
def through_sim(folder) -> dict:
    """What Ledgers reported before it read the files itself: the world as
    `durable_lite.sim.world_at` hands it out, counted by its own methods."""
    world = sim.world_at(folder)
    used = world._used
    refunds = [{**r, "provider": p} for p in ("payments", "careless") if used(p)
               for r in getattr(world, p).refunds()]
    bills = ([{"generation": g, "prompt": p, "tokens": t, "cost": c} for g, p, t, c in
              world.llm._db.execute("SELECT generation, prompt, tokens, cost FROM calls "
                                    "ORDER BY generation")] if used("llm") else [])
    model = sim.FakeLLM(":memory:", seed=world.llm.seed if used("llm") else 0)
    answers = [model.complete(bill["prompt"])["text"] for bill in bills]
    model.close()
    recipients = sorted({m["to"] for m in world.mailer.sent()}) if used("mailer") else []
    desk = sim.travel_at(folder)
    travel = {"all": desk.statement(), "trip-1": desk.statement("trip-1"),
              **{name: world.ledger(name).records() for name in ("charges", "bookings",
                                                                 "cancellations")}}
    return {"counts": world.summary(), "refunds": refunds, "bills": bills, "answers": answers,
            "travel": travel,
            "model calls": world.llm.calls() if used("llm") else 0,
            "mail": world.mailer.sent() if used("mailer") else [],
            "mail to": {to: world.mailer.sent(to) for to in recipients}}


def from_files(folder) -> dict:
    read = Ledgers(folder)
    mail = read.mail()
    travel = {"all": read.travel_statement(), "trip-1": read.travel_statement("trip-1"),
              **{name: read.records(name) for name in ("charges", "bookings", "cancellations")}}
    return {"counts": read.counts(), "refunds": read.refunds(), "bills": read.model_bills(),
            "travel": travel,
            "answers": read.model_answers(), "model calls": read.model_calls(), "mail": mail,
            "mail to": {to: read.mail(to) for to in sorted({m["to"] for m in mail})}}


def busy_world(folder):
    """Every kind of ledger, written through sim as lessons and workflows write them."""
    world = sim.world_at(folder)
    world.payments.refund("A-1", 40, idempotency_key="k-1")
    world.payments.refund("A-1", 40, idempotency_key="k-1")          # a repeat: one refund
    world.payments.refund("A-2", 12.5)
    world.careless.refund("A-1", 40, idempotency_key="k-1")
    world.careless.refund("A-1", 40, idempotency_key="k-1")          # careless: pays twice
    world.mailer.send("ana@example.com", "Your refund")
    world.mailer.send("ana@example.com", "Your refund", idempotency_key="m")
    world.mailer.send("ana@example.com", "Your refund", idempotency_key="m")
    world.mailer.send("bo@example.com", "Hello")
    world.tickets.close("T-1")
    world.tickets.close("T-1")
    for prompt in ("classify: refund?", "draft a reply", "classify: refund?"):
        world.llm.complete(prompt)
    world.llm.plan("find the order", n_tasks=2)
    tools = sim.world_at(folder, fail_first=(("search", 1),)).tools
    for _ in range(2):
        try:
            tools.call("search", "q")
        except sim.ToolError:
            pass
    world.ledger("sms").record(key="s-1", detail={"to": "+44"})
    world.ledger("sms").record(key="s-1", detail={"to": "+44"})
    sim.travel_at(folder).charge("trip-1", 300, reference="c-1")
    sim.travel_at(folder).book("car-compact", reference="b-1", trip="trip-1")
    sim.travel_at(folder).book("car-van", reference="b-2", trip="trip-1")
    sim.travel_at(folder).charge("trip-2", 420, reference="c-2")
    sim.travel_at(folder).cancel("b-1", idempotency_key="u-1")
    sim.travel_at(folder).cancel("b-1")                                # twice, without a key
    sim.travel_at(folder).refund("c-2", idempotency_key="u-2")


def naive_world(folder):
    """The lesson's refund under the naive runner, crashed right after the refund."""
    dl.naive.NaiveRunner(max_attempts=3, crash_at=dl.faults.CrashAt("refund", "after_effect")).run(
        dl.examples.refund, folder, "A-17", 40, careless=True)


def another_process(folder):
    """Refunds, mail and model calls written by a process that has ended."""
    code = ("import sys; from durable_lite import sim; w = sim.World(sys.argv[1]); "
            "w.careless.refund('A-9', 9); w.careless.refund('A-9', 9); "
            "w.mailer.send('cy@example.com', 'Hi'); w.llm.complete('summarise')")
    subprocess.run([sys.executable, "-c", code, folder], check=True, timeout=60)


@pytest.mark.parametrize("make", [busy_world, naive_world, another_process, lambda folder: None],
                         ids=["every ledger", "a naive run", "another process", "nothing yet"])
def test_the_files_read_exactly_what_reading_through_sim_reads(make):
    with scratch("round4") as folder:
        make(folder)
        assert from_files(folder) == through_sim(folder)


def test_a_file_without_its_table_yet_counts_nothing():
    with scratch("round4") as folder:
        open(os.path.join(folder, "mail.db"), "wb").close()    # another process is making it
        assert Ledgers(folder).mail() == [] and Ledgers(folder).counts()["emails"] == 0


def test_the_ledgers_know_sims_files_and_the_models_recipe():
    services = {name: getattr(sim.World, name).filename for name in sim.World.SERVICES}
    assert dict(ledgers.PROVIDERS) == {p: services[p] for p in ("payments", "careless")}
    assert (ledgers.MAIL, ledgers.TICKETS, ledgers.MODEL, ledgers.TOOLS, ledgers.OWN) == (
        services["mailer"], services["tickets"], services["llm"], services["tools"],
        sim.LEDGERS_FILE)
    model = sim.FakeLLM(":memory:")
    prompts = ["classify: refund?", "plan: x", "", "a b c d e f"] * 2
    assert [model.complete(p)["text"] for p in prompts] == [
        ledgers.model_text(p, n) for n, p in enumerate(prompts, start=1)]
    model.close()


def test_nothing_replaced_in_sim_changes_what_the_ledgers_report(monkeypatch):
    with scratch("round4") as honest_folder, scratch("round4-empty") as empty:
        busy_world(honest_folder)
        before = from_files(honest_folder)
        elsewhere = sim.World(empty)
        with monkeypatch.context() as answer:
            # the table of worlds: every folder's world is an empty folder's
            class Elsewhere(dict):
                def __contains__(self, key):
                    return True

                def __getitem__(self, key):
                    return elsewhere
            answer.setattr(sim, "_worlds", Elsewhere())
            # every method a count could come from, and the model's recipe and words
            for cls, name, fake in [(sim.World, "summary", lambda self: {}),
                                    (sim.Payments, "refunds", lambda self, order_id=None: []),
                                    (sim.Payments, "count", lambda self, order_id=None: 0),
                                    (sim.Mailer, "sent", lambda self, to=None: []),
                                    (sim.TicketDesk, "closes", lambda self, ticket=None: 0),
                                    (sim.FakeLLM, "calls", lambda self: 0),
                                    (sim.FakeLLM, "complete", lambda self, prompt, nonce=None: {}),
                                    (sim.FlakyTool, "calls", lambda self, name=None: 0)]:
                answer.setattr(cls, name, fake)
            answer.setattr(sim, "_WORDS", ("forged",))
            answer.setattr(sim, "_seeded", lambda *parts: random.Random(0))
            ledgers._replayed.cache_clear()              # recomputed now, not remembered
            assert sim.world_at(honest_folder).summary() == {}    # sim itself now lies
            assert from_files(honest_folder) == before
        elsewhere.close()


def test_the_watch_records_the_ledgers_and_plain_but_not_sims_table(monkeypatch):
    record = watch._record(exercise(EX01))
    changed = watch._compare(record, type, id, len, sys.modules, tuple(vars(sys.modules["builtins"])))
    assert changed() == []
    monkeypatch.setattr(sim, "_worlds", {})           # not recorded: why Ledgers reads files
    assert changed() == []
    monkeypatch.setattr(ledgers.Ledgers, "counts", lambda self: {})
    monkeypatch.setattr(ledgers, "MODEL_WORDS", ("forged",))
    monkeypatch.setattr(plain_module, "plain", lambda value, *a, **k: value)
    assert {"durable_lite.grading.ledgers.Ledgers.counts", "durable_lite.grading.ledgers.MODEL_WORDS",
            "durable_lite.grading.plain.plain"} <= set(changed())


# 3. exercise 01 ----------------------------------------------------------------------------------
NO_CRASH_PASSED_ON = '''
def run_naive(folder, crash_at=None):
    """Never meets the crash, and makes up what a crashed run would have shown."""
    outcome = dl.naive.NaiveRunner(max_attempts=3).run(dl.examples.refund, folder, "A-17", 40,
                                                       careless=True)
    held = dl.examples.world_at(folder).summary()
    steps = ["lookup", "refund", "email", "close"]
    ran = 0 if crash_at is None else steps.index(crash_at.step) + (crash_at.when != "before_step")
    return {"attempts": outcome.attempts + (crash_at is not None),
            "step_executions": ran + len(steps),
            "refunds": held["refunds"], "emails": held["emails"],
            "tickets_closed": held["tickets_closed"]}
'''

QUIET_TABLE = '''
import durable_lite.sim


class AtMostOne(dict):
    """A table of worlds whose every world reports no more than one of anything."""

    def __setitem__(self, key, world):
        counted = world.summary
        world.summary = lambda: {ledger: min(n, 1) for ledger, n in counted().items()}
        dict.__setitem__(self, key, world)


durable_lite.sim._worlds = AtMostOne()
''' + NO_CRASH_PASSED_ON

QUIET_CLASS = '''
import durable_lite.sim

_summary, _count = durable_lite.sim.World.summary, durable_lite.sim.Payments.count
durable_lite.sim.World.summary = lambda self: {k: min(n, 1) for k, n in _summary(self).items()}
durable_lite.sim.Payments.count = lambda self, order_id=None: min(_count(self, order_id), 1)
''' + NO_CRASH_PASSED_ON


@pytest.fixture
def sim_put_back(monkeypatch):
    """The answer's cell changes durable_lite.sim for the whole process: put it back after,
    and measure the truth anew under the answer's changes, as a fresh kernel would."""
    monkeypatch.setattr(sim, "_worlds", sim._worlds)
    monkeypatch.setattr(sim.World, "summary", sim.World.summary)
    monkeypatch.setattr(sim.Payments, "count", sim.Payments.count)
    ex01.naive_sweep.cache_clear()
    yield
    ex01.naive_sweep.cache_clear()


@pytest.mark.parametrize("cell", [QUIET_TABLE, QUIET_CLASS], ids=["table of worlds", "World's count"])
def test_01_q1_a_world_that_under_reports_does_not_hide_a_run_that_never_crashed(cell, sim_put_back):
    answer = kernel(EX01, {"def run_naive": cell})["run_naive"]
    results = run_tests(exercise(EX01), "q1", answer, seed=5)
    assert failed(results) == {2, 3}, spelled_out(results)
    assert "never crashed" in results[2].message, spelled_out(results)


def agreeable_predictions(step, when):
    return Agreeable(1)                       # one guess for every crash point


def retry_counting_from_zero(steps, max_attempts=3):
    """Counts attempts from 0, and hands the count over in an int that agrees with anything."""
    calls, attempt = [], 0
    while attempt < max_attempts:
        results = {}
        try:
            for name, fn in steps:
                calls.append((attempt + 1, name))
                results[name] = fn()
        except BaseException:
            attempt += 1
            continue
        return {"status": "completed", "attempts": Agreeable(attempt), "executions": calls,
                "results": results}
    return {"status": "failed", "attempts": Agreeable(attempt), "executions": calls, "results": None}


def retry_once_with_agreeable_containers(steps, max_attempts=3):
    """Never retries; its status, calls and results agree with anything."""
    calls, results = Calls(), Counts()
    try:
        for name, fn in steps:
            calls.append((1, name))
            results[name] = fn()
    except BaseException:
        pass
    return {"status": Label("completed"), "attempts": 1, "executions": calls, "results": results}


@pytest.mark.parametrize("qid, answer, named", [
    ("q2", agreeable_predictions, "Agreeable (a subclass of int)"),
    ("q3", retry_counting_from_zero, "Agreeable (a subclass of int)"),
    ("q3", retry_once_with_agreeable_containers, "(a subclass of"),
])
def test_01_an_answer_of_its_own_classes_is_refused_on_every_test(qid, answer, named):
    results = run_tests(exercise(EX01), qid, answer, seed=7)
    assert failed(results) == set(results), spelled_out(results)
    for result in results.values():
        assert named in result.message and "plain value is expected" in result.message, \
            spelled_out(results)


def test_01_q1_a_dict_of_its_own_class_is_refused():
    def counts_in_a_dict_of_its_own(folder, crash_at=None):
        outcome = dl.naive.NaiveRunner(max_attempts=3, crash_at=crash_at).run(
            dl.examples.refund, folder, "A-17", 40, careless=True)
        held = dl.examples.world_at(folder).summary()
        return Counts(attempts=outcome.attempts, step_executions=outcome.step_executions,
                      refunds=held["refunds"], emails=held["emails"],
                      tickets_closed=held["tickets_closed"])

    results = run_tests(exercise(EX01), "q1", counts_in_a_dict_of_its_own, seed=3, only=[0, 2])
    assert failed(results) == {0, 2}, spelled_out(results)
    assert "run_naive returned a Counts (a subclass of dict)" in results[0].message


def test_01_the_solution_and_right_answers_written_other_ways_pass():
    solution = kernel(EX01)
    for qid, name in [("q1", "run_naive"), ("q2", "predicted_refunds"), ("q3", "retry_from_top")]:
        result = checks.run_question(exercise(EX01), qid, [solution[name]], seed=9)
        assert result.status == checks.PASSED, result.report()

    def predictions_as_whole_floats_made_ints(step, when):
        order = ["lookup", "refund", "email", "close"]
        paid = order.index(step) > 1 or (step == "refund" and when != "before_step")
        return int(1.0 + paid)

    def retry_with_lists_through_json(steps, max_attempts=3):
        made = []
        for attempt in range(1, max_attempts + 1):
            got = {}
            try:
                for name, fn in steps:
                    made.append([attempt, name])          # lists, not tuples
                    got[name] = fn()
            except (Exception, dl.Crash):
                continue
            return json.loads(json.dumps({"status": "completed", "attempts": attempt,
                                          "executions": made, "results": got}))
        return {"status": "failed", "attempts": max_attempts, "executions": tuple(made),
                "results": None}

    for qid, answer in [("q2", predictions_as_whole_floats_made_ints),
                        ("q3", retry_with_lists_through_json)]:
        for seed in (1, 2):
            result = checks.run_question(exercise(EX01), qid, [answer], seed=seed)
            assert result.status == checks.PASSED, result.report()
