"""Exercise 10 (reading a lumpy run's trace) can be failed, and can be passed another way.

- The tickets the checks live through are what their traces say: the worker the check saw
  finish a run is the trace's completed execution, the plans reach the branches their names
  promise (a slowest step that changes with the CRM and the history, a lookup split over
  two executions, a model call billed and never recorded).
- Plausible wrong answers fail the tests that name their mistake, on several seeds.
- Right answers written another way (the lesson's own tools, another selection) pass.
- The solution's own code passes on several seeds; graded as notebooks, wrong answers fail
  the questions they should. (test_grading.py grades the solution to full marks and the
  untouched exercise to zero.)
"""

import functools
import re

import nbformat
import pytest

import durable_lite as dl
from durable_lite import otel
from durable_lite.grading import checks, exercise
from durable_lite.grading.cases import Draw
from durable_lite.grading.exercises import ex10_tracing as ex10
from durable_lite.grading.generate import render
from durable_lite.grading.grader import grade_notebook
from durable_lite.grading.harness import scratch
from durable_lite.lab.timeline import time_split

from grading_support import ROOT, failing_tests, statuses, with_code

NAME = "10_tracing"
SEEDS = (101, 202)


def run(qid, *answers, seed):
    return checks.run_question(exercise(NAME), qid, answers, seed=seed)


def failing(result):
    """The failing tests' names, up to their colon (the part that names the branch)."""
    return [t.name.split(":")[0] for t in result.tests if t.status != checks.PASSED]


def test_the_exercise_is_generated_from_its_solution():
    text = (ROOT / "exercises" / f"{NAME}.ipynb").read_text(encoding="utf-8")
    assert text == render(ROOT / "solutions" / f"{NAME}.ipynb")
    assert "BEGIN SOLUTION" not in text and "Instructor" not in text


# the tickets are what their traces say ------------------------------------------------------
def lived(plan, seed):
    """(the ticket, its trace), for a plan of ex10 lived through on `seed`."""
    draw = Draw(seed)
    with scratch("test-ex10") as folder:
        case = ex10.ticket(folder, draw, **plan(draw))
        return case, case.trace(), case.billed(), case.recorded_generations()


PLANS = [ex10.quiet, ex10.died_around_the_wait, ex10.still_waiting, ex10.abandoned,
         ex10.restarted_name, ex10.refused, ex10.timed_out, ex10.draft_later,
         ex10.lost_model_call, ex10.killed_elsewhere, ex10.split_lookup, ex10.every_kind_of_span]


@pytest.mark.parametrize("plan", PLANS, ids=[p.__name__ for p in PLANS])
def test_the_worker_the_check_saw_finish_a_ticket_is_the_traces_completed_execution(plan):
    for seed in range(4):
        case, tree, _, _ = lived(plan, seed)
        executions = tree.find(kind="execution")
        assert [x.worker for x in executions] == case.executions, case.describe()
        completed = [(x.name, x.worker) for x in executions if x.status == "completed"]
        if case.finisher is None:
            assert completed == [] and tree.status in ("waiting", "running"), case.describe()
        else:
            number, worker = case.finisher
            assert completed == [(f"execution {number}", worker)], case.describe()
        dead = len(case.before) + len(case.after)
        assert sum(x.status == "interrupted" for x in executions) == dead, tree.render()
        split = time_split(tree)
        assert split["total"] == pytest.approx(case.clock() - case.started_at, abs=1e-6)


def test_a_ticket_nobody_killed_is_parked_from_the_wait_to_the_resume_and_never_without_a_worker():
    for seed in range(4):
        case, tree, _, _ = lived(ex10.quiet, seed)
        split = time_split(tree)
        assert split["parked"] == pytest.approx(case.delay + case.tick, abs=1e-6)
        assert split["no worker"] == pytest.approx(0, abs=1e-6)


def test_a_worker_killed_after_the_wait_is_a_real_sigkill_and_its_gap_belongs_to_no_worker():
    kill = ex10.Kill(dl.faults.CrashAt("refund", "after_effect"), gap=75.0)
    draw = Draw(7)
    with scratch("test-ex10") as folder:
        case = ex10.ticket(folder, draw, after=[kill], sigkill=True)
        tree = case.trace()
    assert case.finisher == (3, case.names[2])
    assert [x.status for x in tree.find(kind="execution")] == ["parked", "interrupted", "completed"]
    assert time_split(tree)["no worker"] == pytest.approx(75.0, abs=1e-6)


def step_seconds(tree):
    return {(x.name, s.name): s.duration for x in tree.find(kind="execution") for s in x.children}


def test_the_slowest_step_is_the_lookup_with_a_flaky_crm_and_the_draft_with_a_steady_one():
    for seed in range(8):
        for plan, slowest in ((ex10.flaky_crm, "lookup_order"), (ex10.steady_crm, "draft_reply")):
            _, tree, _, _ = lived(plan, seed)
            seconds = ex10._step_seconds(tree)
            ranked = sorted(seconds, key=seconds.get, reverse=True)
            assert ranked[0] == slowest, seconds
            assert seconds[ranked[0]] - seconds[ranked[1]] > 0.3, seconds   # no near tie


def test_in_the_split_lookup_case_only_the_sum_over_executions_finds_the_lookup():
    for seed in range(12):
        _, tree, _, _ = lived(ex10.split_lookup, seed)
        lookups = [s.duration for s in tree.find(kind="step", name="lookup_order")]
        draft = tree.find(kind="step", name="draft_reply")[0].duration
        assert len(lookups) == 2, tree.render()
        assert max(lookups) + 0.2 < draft < sum(lookups) - 0.2, (lookups, draft)


def test_a_killed_model_call_is_billed_and_not_recorded_and_the_other_kills_lose_nothing():
    for seed in range(6):
        _, tree, billed, recorded = lived(ex10.lost_model_call, seed)
        assert len(billed) > len(recorded) == 2
        assert sum(billed.values()) - tree.cost > 0.0001
        for plan in (ex10.quiet, ex10.killed_elsewhere, ex10.draft_later):
            _, tree, billed, recorded = lived(plan, seed)
            lost = set(billed) - set(recorded.values())
            if plan is ex10.draft_later:       # it may lose the first model call, on purpose
                assert lost <= {1}
            else:
                assert lost == set() and sum(billed.values()) == pytest.approx(tree.cost)


def test_in_the_draft_later_case_the_draft_is_not_in_the_first_execution():
    for seed in range(6):
        _, tree, _, _ = lived(ex10.draft_later, seed)
        first = tree.find(kind="execution")[0]
        assert "draft_reply" not in [s.name for s in first.children]
        assert tree.find(kind="step", name="draft_reply")


# the solution's code passes on several seeds --------------------------------------------------
@functools.lru_cache(maxsize=None)
def solution():
    """The names the solution notebook's code cells define (demonstrations left out)."""
    nb = nbformat.read(ROOT / "solutions" / f"{NAME}.ipynb", as_version=4)
    namespace = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and "demo" not in cell.metadata.get("tags", []) \
                and not cell.source.startswith("check("):
            exec(compile(cell.source, f"solutions/{NAME}", "exec"), namespace)
    return namespace


ANSWERS = {"q1": ("time_spent", "slowest_step"), "q2": ("cost_by_step", "unrecorded_cost"),
           "q3": ("finished_by",), "q4": ("export_run",)}


@pytest.mark.parametrize("qid", sorted(ANSWERS))
def test_the_solution_passes_every_question_on_several_seeds(qid):
    answers = [solution()[name] for name in ANSWERS[qid]]
    for seed in (1, 2):
        result = run(qid, *answers, seed=seed)
        assert result.status == checks.PASSED, result.report()


# wrong answers ---------------------------------------------------------------------------------
def sol(name):
    return solution()[name]


def executions_and_waits(tree):
    """Right, so each answer below is wrong in one thing only (a sleep parks a run too)."""
    working = sum(s.duration for s in tree.children if s.kind == "execution")
    parked = sum(s.duration for s in tree.children if s.kind in ("wait", "sleep"))
    return working, parked


def working_absorbs_no_worker(tree):           # the dead stretches counted as work
    _, parked = executions_and_waits(tree)
    return {"working": tree.duration - parked, "parked": parked, "no worker": 0.0}


def no_worker_left_out(tree):                  # three parts that do not add up to the run
    working, parked = executions_and_waits(tree)
    return {"working": working, "parked": parked, "no worker": 0.0}


def the_lessons_numbers(tree):                 # lesson 10's ticket, whatever the tree
    return {"working": 19.8, "parked": 172800.0, "no worker": 60.0}


def gaps_between_spans_only(tree):             # misses a dead worker's run lying there until now
    spans = sorted(tree.children, key=lambda s: s.start)
    working, parked = executions_and_waits(tree)
    gaps = sum(max(0.0, b.start - a.end) for a, b in zip(spans, spans[1:]))
    return {"working": working, "parked": parked, "no worker": gaps}


def finished_waits_only(tree):                 # an open wait is not parked time, it says
    working = sum(s.duration for s in tree.children if s.kind == "execution")
    parked = sum(s.duration for s in tree.children if s.kind in ("wait", "sleep") and not s.open)
    return {"working": working, "parked": parked, "no worker": tree.duration - working - parked}


def longest_span(tree):                        # the run itself
    return max(tree.walk(), key=lambda s: s.duration).name


def longest_child(tree):                       # the wait
    return max(tree.children, key=lambda s: s.duration).name


def longest_single_step(tree):                 # one span, not the step's total
    return max(tree.find(kind="step"), key=lambda s: s.duration).name


def always_the_lookup(tree):
    return "lookup_order"


def most_attempts(tree):
    return max(tree.find(kind="step"), key=lambda s: s.attributes.get("attempts", 1)).name


def completed_steps_only(tree):                # leaves out the dead worker's part of the lookup
    seconds = {}
    for s in tree.find(kind="step"):
        if s.status == "completed":
            seconds[s.name] = seconds.get(s.name, 0.0) + s.duration
    return max(seconds, key=seconds.get)


def tokens_not_dollars(tree):
    return {s.name: s.tokens for s in tree.find(kind="step") if s.tokens}


def first_execution_only(tree):
    return {s.name: s.cost for s in tree.find(kind="execution")[0].children if s.cost}


def every_span_with_a_cost(tree):              # the run and executions carry sums
    return {s.name: s.cost for s in tree.walk() if s.cost}


def the_costliest_only(tree):
    top = max(tree.find(kind="step"), key=lambda s: s.cost)
    return {top.name: top.cost}


def nothing_unrecorded(tree, world):           # trusts the trace
    return 0.0


def the_whole_bill(tree, world):
    return world.llm.total_cost()


def the_traces_cost(tree, world):
    return tree.cost


def an_average_per_missing_call(tree, world):
    calls = [s for s in tree.find(kind="step") if s.is_model_call]
    return (world.llm.calls() - len(calls)) * tree.cost / max(1, len(calls))


def worker_c(tree):                            # the lesson's finisher, by name
    return next((x for x in tree.find(kind="execution") if x.worker == "worker-c"), None)


def the_last_execution(tree):
    return tree.find(kind="execution")[-1]


def the_last_child(tree):
    return tree.children[-1]


def the_first_that_did_not_die(tree):
    return next((x for x in tree.find(kind="execution") if x.status != "interrupted"), None)


def the_workers_name(tree):
    done = next((x for x in tree.find(kind="execution") if x.status == "completed"), None)
    return None if done is None else done.worker


def first_execution_of_the_last_worker(tree):  # a restarted worker's name is on two executions
    if tree.status != "completed":
        return None
    last = tree.find(kind="step")[-1].worker
    return next(x for x in tree.find(kind="execution") if x.worker == last)


CONVERSATION = "gen_ai.conversation.id"


def exports_plainly(tree, provider):
    otel.export(tree, provider)


def tags_every_span(tree, provider):
    otel.export(tree, provider, extra_attributes=lambda span: {CONVERSATION: tree.name})


def tags_every_step(tree, provider):
    otel.export(tree, provider, extra_attributes=lambda span: (
        {CONVERSATION: tree.name} if span.kind == "step" else {}))


NOTEBOOK_RUN_ID = "ticket-2071"


def tags_the_notebooks_run(tree, provider):
    otel.export(tree, provider, extra_attributes=lambda span: (
        {CONVERSATION: NOTEBOOK_RUN_ID} if span.is_model_call else {}))


def tags_spans_named_chat(tree, provider):     # a trace span is named by its step, not "chat"
    otel.export(tree, provider, extra_attributes=lambda span: (
        {CONVERSATION: tree.name} if span.name.startswith("chat") else {}))


def exports_to_the_global_provider(tree, provider):
    otel.export(tree, extra_attributes=lambda span: (
        {CONVERSATION: tree.name} if span.is_model_call else {}))


def renames_every_steps_operation(tree, provider):
    otel.export(tree, provider, extra_attributes=lambda span: (
        {CONVERSATION: tree.name, "gen_ai.operation.name": "chat"} if span.is_model_call
        else {"gen_ai.operation.name": "chat"} if span.kind == "step" else {}))


def tags_the_step_name(tree, provider):
    otel.export(tree, provider, extra_attributes=lambda span: (
        {CONVERSATION: span.name} if span.is_model_call else {}))


def remembers_the_first_run(tree, provider, _seen=[]):   # noqa: B006 - the mistake itself
    _seen.append(tree.name)
    otel.export(tree, provider, extra_attributes=lambda span: (
        {CONVERSATION: _seen[0]} if span.is_model_call else {}))


Q1_QUIET, Q1_DIED, Q1_OPEN = ("no worker died", "workers died before and after the wait",
                              "a run not finished yet")
Q1_BRANCHES = "the slowest step, with a flaky CRM and with a steady one and a long history"
Q1_SPLIT = "the slowest step when a worker died between the CRM's retries"
Q2_QUIET, Q2_LATER = "no worker died", "a worker died before the draft was recorded"
Q2_LOST, Q2_ELSEWHERE = ("a worker killed right after a model call ran",
                         "workers killed anywhere else, or none")
Q3_QUIET = "no worker died"
Q3_RESTART = ("workers died before and after the wait, one of them restarted under its old "
              "name")
Q3_REFUSED, Q3_OPEN = ("the manager refused, or never answered in three days",
                       "not finished yet (still waiting for the manager, or its last worker "
                       "dead with nobody to take over)")
Q4_TAGGED, Q4_ONLY, Q4_REST = ("every model call's span ('chat ...') carries "
                               "gen_ai.conversation.id, its run's id (two runs, exported one "
                               "after the other)", "no other span carries it",
                               "everything else is exported as before")

WRONG = [  # (question, the wrong one of its answers, which answer it replaces, tests it fails)
    ("q1", working_absorbs_no_worker, 0, [Q1_DIED, Q1_OPEN]),
    ("q1", no_worker_left_out, 0, [Q1_DIED, Q1_OPEN]),
    ("q1", the_lessons_numbers, 0, [Q1_QUIET, Q1_DIED, Q1_OPEN]),
    ("q1", gaps_between_spans_only, 0, [Q1_OPEN]),
    ("q1", finished_waits_only, 0, [Q1_OPEN]),
    ("q1", longest_span, 1, [Q1_BRANCHES, Q1_SPLIT]),
    ("q1", longest_child, 1, [Q1_BRANCHES, Q1_SPLIT]),
    ("q1", longest_single_step, 1, [Q1_SPLIT]),
    ("q1", always_the_lookup, 1, [Q1_BRANCHES]),
    ("q1", most_attempts, 1, [Q1_BRANCHES]),
    ("q1", completed_steps_only, 1, [Q1_SPLIT]),
    ("q2", tokens_not_dollars, 0, [Q2_QUIET, Q2_LATER]),
    ("q2", first_execution_only, 0, [Q2_LATER]),
    ("q2", every_span_with_a_cost, 0, [Q2_QUIET, Q2_LATER]),
    ("q2", the_costliest_only, 0, [Q2_QUIET, Q2_LATER]),
    ("q2", nothing_unrecorded, 1, [Q2_LOST]),
    ("q2", the_whole_bill, 1, [Q2_LOST, Q2_ELSEWHERE]),
    ("q2", the_traces_cost, 1, [Q2_LOST, Q2_ELSEWHERE]),
    ("q2", an_average_per_missing_call, 1, [Q2_LOST]),
    ("q3", worker_c, 0, [Q3_QUIET, Q3_RESTART, Q3_REFUSED]),
    ("q3", the_last_execution, 0, [Q3_OPEN]),
    ("q3", the_last_child, 0, [Q3_OPEN]),
    ("q3", the_first_that_did_not_die, 0, [Q3_QUIET, Q3_RESTART, Q3_REFUSED, Q3_OPEN]),
    ("q3", the_workers_name, 0, [Q3_QUIET, Q3_RESTART, Q3_REFUSED]),
    ("q3", first_execution_of_the_last_worker, 0, [Q3_RESTART]),
    ("q4", exports_plainly, 0, [Q4_TAGGED, Q4_ONLY, Q4_REST]),
    ("q4", tags_every_span, 0, [Q4_ONLY]),
    ("q4", tags_every_step, 0, [Q4_ONLY]),
    ("q4", tags_the_notebooks_run, 0, [Q4_TAGGED]),
    ("q4", tags_spans_named_chat, 0, [Q4_TAGGED, Q4_ONLY, Q4_REST]),
    ("q4", exports_to_the_global_provider, 0, [Q4_TAGGED, Q4_ONLY, Q4_REST]),
    ("q4", renames_every_steps_operation, 0, [Q4_REST]),
    ("q4", tags_the_step_name, 0, [Q4_TAGGED]),
    ("q4", remembers_the_first_run, 0, [Q4_TAGGED]),
]


@pytest.mark.parametrize("qid, wrong, slot, fails, seed",
                         [(*w, SEEDS[i % len(SEEDS)]) for i, w in enumerate(WRONG)],
                         ids=[w[1].__name__ for w in WRONG])
def test_a_wrong_answer_fails_the_tests_that_name_its_mistake(qid, wrong, slot, fails, seed):
    """On one seed, the answers taking the seeds in turn: every seed draws each test's case
    (the tests of the drawn cases above show it over many seeds)."""
    answers = [sol(name) for name in ANSWERS[qid]]
    answers[slot] = wrong
    result = run(qid, *answers, seed=seed)
    assert failing(result) == fails, f"seed {seed}:\n{result.report()}"
    for test in result.tests:
        if test.status != checks.PASSED:
            assert test.hint, test.name                     # somewhere to look next
            assert "Traceback" not in test.message and "your code raised" not in test.message


def test_the_feedback_names_the_case_and_not_the_sum_it_asks_for():
    result = run("q1", sol("time_spent"), longest_single_step, seed=5)
    (test,) = [t for t in result.tests if t.status != checks.PASSED]
    assert re.search(r"ticket run 'ticket-[a-z0-9]{8}'", test.message)
    assert "killed while waiting to retry the CRM" in test.message
    # the facts (each span, with its execution), never the total the learner must add up
    assert re.search(r"lookup_order [\d.]+ s \(in execution 1\), .*lookup_order [\d.]+ s "
                     r"\(in execution 2\)", test.message)


def test_the_time_feedback_shows_the_learners_numbers_and_the_spans_but_not_the_expected_split():
    result = run("q1", no_worker_left_out, sol("slowest_step"), seed=5)
    messages = [t.message for t in result.tests if t.status != checks.PASSED]
    assert messages
    for message in messages:
        assert "no worker 0 s (0.000 s)" in message
        assert len(re.findall(r"\(\d+\.\d{3} s\)", message)) == 3     # theirs only
        assert "The run's children: execution 1" in message or "in all, but the run lasted" in message


def test_a_stub_is_not_attempted_and_the_other_answer_still_counts():
    def stub(tree):
        raise NotImplementedError("write it")

    result = run("q1", stub, sol("slowest_step"), seed=9)
    assert [t.status for t in result.tests] == [checks.NOT_ATTEMPTED] * 3 + [checks.PASSED] * 2


# right answers written another way ----------------------------------------------------------
def time_split_itself(tree):                    # the lesson's function: an extra key, "total"
    return dl.lab.time_split(tree)


def rounded_to_the_hundredth(tree):
    return {k: round(v, 2) for k, v in dl.lab.time_split(tree).items()}


def from_the_steps_table(tree):
    table = dl.lab.steps_table(tree)
    return table[table.kind.isin(["tool", "model call"])].seconds.idxmax()


def costs_from_the_steps_table(tree):          # numpy floats, rounded to the millionth
    table = dl.lab.steps_table(tree)
    return table[table.cost > 0].cost.to_dict()


def every_step_zeros_too(tree):
    costs = {}
    for step in tree.find(kind="step"):
        costs[step.name] = costs.get(step.name, 0.0) + step.cost
    return costs


def bill_minus_steps(tree, world):
    return round(world.llm.total_cost() - sum(s.cost for s in tree.find(kind="step")), 6)


def last_execution_of_a_completed_run(tree):
    return tree.find(kind="execution")[-1] if tree.status == "completed" else None


def chat_by_its_otel_name(tree, provider):
    otel.export(tree, provider, extra_attributes=lambda span: (
        {CONVERSATION: tree.name} if otel.span_name(span).startswith("chat") else {}))


class Conversation:
    def __init__(self, run_id):
        self.run_id = run_id

    def __call__(self, span):
        if otel.attributes_for(span).get("gen_ai.operation.name") == "chat":
            return {CONVERSATION: self.run_id}
        return None


def a_callable_object_by_operation(tree, provider):
    otel.export(tree, provider, extra_attributes=Conversation(tree.name))


def all_attributes_again(tree, provider):     # the same values again: nothing changes
    otel.export(tree, provider, extra_attributes=lambda span: (
        {**otel.attributes_for(span), CONVERSATION: tree.name} if span.is_model_call
        else otel.attributes_for(span)))


RIGHT = [("q1", time_split_itself, 0), ("q1", rounded_to_the_hundredth, 0),
         ("q1", from_the_steps_table, 1), ("q2", costs_from_the_steps_table, 0),
         ("q2", every_step_zeros_too, 0), ("q2", bill_minus_steps, 1),
         ("q3", last_execution_of_a_completed_run, 0), ("q4", chat_by_its_otel_name, 0),
         ("q4", a_callable_object_by_operation, 0), ("q4", all_attributes_again, 0)]


@pytest.mark.parametrize("qid, right, slot, seed",
                         [(*r, SEEDS[i % len(SEEDS)]) for i, r in enumerate(RIGHT)],
                         ids=[r[1].__name__ for r in RIGHT])
def test_a_right_answer_written_another_way_passes(qid, right, slot, seed):
    answers = [sol(name) for name in ANSWERS[qid]]
    answers[slot] = right
    result = run(qid, *answers, seed=seed)
    assert result.status == checks.PASSED, f"seed {seed}:\n{result.report()}"


# graded as notebooks ----------------------------------------------------------------------------
SAMPLE_TREE = '''def time_spent(tree_given):
    # wrong: the notebook's own ticket, whatever the check hands in
    return dl.lab.time_split(tree)


def slowest_step(tree):
    seconds = {}
    for step in tree.find(kind="step"):
        seconds[step.name] = seconds.get(step.name, 0.0) + step.duration
    return max(seconds, key=seconds.get)
'''

LAST_EXECUTION = '''def finished_by(tree):
    return tree.find(kind="execution")[-1]        # wrong: a run may not be finished
'''


def test_answers_about_the_notebooks_own_ticket_or_the_last_execution_fail_when_graded(tmp_path):
    path = with_code(NAME, "def time_spent", SAMPLE_TREE, tmp_path)
    nb = nbformat.read(path, as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and "def finished_by" in c.source]
    cell.source = LAST_EXECUTION
    nbformat.write(nb, path)
    score = grade_notebook(path)
    assert statuses(score) == {"q1": "failed", "q2": "passed", "q3": "failed", "q4": "passed"}, \
        score.report()
    assert failing_tests(score, "q1")[:3] == [t.name for t in exercise(NAME).questions["q1"].tests][:3]
    assert [name.split(":")[0] for name in failing_tests(score, "q3")] == [Q3_OPEN]
