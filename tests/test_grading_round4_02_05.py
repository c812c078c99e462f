"""Exercises 02 and 05, round 4 of the review: the wrong answers that scored full marks now
fail on every seed, and right answers written other ways still pass.

- 02 q1: a memo that takes a falsy result (None, 0, [], {}...) for "not recorded". Every run
  of the check now meets every falsy JSON value.
- 05 q1: a model answer kept in the process's memory (a module-level dict, an lru_cache, a
  global counter) used to pass "resumed after a crash", because the resume happened in the
  kernel, where the memory survived. Every resume now happens in a fresh process, after a
  real SIGKILL of the one that started the run.
- 05 q1: the question asks for one ticket in four audited. Any quarter of the coin's range is
  accepted now (`>= 0.75` too), and every other rate still fails on every seed.
- 05 q2: a refresh that calls engine.recover() also resumes other runs that are due; the
  store now always holds two of them.

Each "on every seed" claim is proven twice: the case drawing runs over many seeds (cheap,
no answer involved) and the distinguishing case is asserted on each; then answers run
in-process (`kernel`, as a notebook's cells make them) on seeds 1, 2 and 3.
"""

import json
import random
from types import SimpleNamespace

import nbformat
import pytest

from durable_lite.grading import checks, exercise
from durable_lite.grading.cases import Draw
from durable_lite.grading.exercises import ex02_memoize as ex02
from durable_lite.grading.exercises import ex05_model_step as ex05
from durable_lite.grading.ledgers import replay_model

from test_grading_properties_01_07 import ROOT, changed, kernel

SEEDS = (1, 2, 3)
MANY = range(100)            # seeds for the case drawing alone: no answer runs


def judged(name, qid, cells, seed, only=None):
    """The question's results for the notebook with `cells` changed, on `seed`, running
    only the tests whose names begin with one of `only` (every test if None)."""
    ex = exercise(name)
    question = ex.questions[qid]
    namespace = kernel(name, cells)
    part = checks.Exercise(ex.id, ex.title, ex.lesson)
    part.question(qid, question.title, question.answers).tests = [
        t for t in question.tests if only is None or t.name.startswith(only)]
    answers = tuple(namespace[a] for a in question.answers)
    return checks.run_question(part, qid, answers, seed=seed)


def failing(result) -> list:
    return [t for t in result.tests if t.status != checks.PASSED]


def assert_fails(name, qid, cells, test, seeds=SEEDS):
    """The test whose name begins with `test` fails on every seed; its failures."""
    out = []
    for seed in seeds:
        result = judged(name, qid, cells, seed, only=test)
        assert [t.name[:len(test)] for t in failing(result)] == [test], \
            f"seed {seed}:\n{result.report()}"
        out.append(failing(result)[0])
    return out


def assert_passes(name, qid, cells, seeds=SEEDS, only=None):
    for seed in seeds:
        result = judged(name, qid, cells, seed, only=only)
        assert result.status == checks.PASSED, f"seed {seed}:\n{result.report()}"


# 02 q1: falsy results ------------------------------------------------------------------------
EX02, MEMO = "02_memoize", "def memo_step"
FALSY_TEST = "a result that reads as false"


def test_02_every_seed_meets_every_falsy_json_value():
    kinds = {(type(v), json.dumps(v)) for v in ex02.FALSY_RESULTS}
    assert len(kinds) == 7 and not any(ex02.FALSY_RESULTS)
    for seed in MANY:
        values = ex02.falsy_results(Draw(seed))
        assert {(type(v), json.dumps(v)) for v in values} == kinds, seed


# Each takes a recorded falsy result for "no record", a different way.
MEMO_TRUSTING_TRUTHINESS = '''
def memo_step(db, run_id, name, fn, *args):
    row = db.execute("SELECT result FROM memo WHERE run_id = ? AND name = ?",
                     (run_id, name)).fetchone()
    recorded = json.loads(row[0]) if row else None
    if recorded:                                   # a recorded 0 or [] looks like nothing
        return recorded
    result = fn(*args)
    db.execute("INSERT OR REPLACE INTO memo VALUES (?, ?, ?)", (run_id, name, json.dumps(result)))
    db.commit()
    return result
'''
MEMO_WITH_NONE_FOR_MISSING = '''
def recorded_result(db, run_id, name):
    row = db.execute("SELECT result FROM memo WHERE run_id = ? AND name = ?",
                     (run_id, name)).fetchone()
    return None if row is None else json.loads(row[0])


def memo_step(db, run_id, name, fn, *args):
    earlier = recorded_result(db, run_id, name)
    if earlier is not None:                        # a step that answered None never replays
        return earlier
    result = fn(*args)
    db.execute("REPLACE INTO memo (run_id, name, result) VALUES (?, ?, ?)",
               (run_id, name, json.dumps(result)))
    db.commit()
    return result
'''
MEMO_SKIPPING_EMPTY_RESULTS = '''
def memo_step(db, run_id, name, fn, *args):
    found = db.execute("SELECT result FROM memo WHERE run_id = ? AND name = ?",
                       (run_id, name)).fetchall()
    if found:
        return json.loads(found[0][0])
    value = fn(*args)
    if value:                                      # nothing worth keeping, it thinks
        db.execute("INSERT INTO memo VALUES (?, ?, ?)", (run_id, name, json.dumps(value)))
        db.commit()
    return value
'''
MEMO_WITH_OR = '''
def memo_step(db, run_id, name, fn, *args):
    def run_and_record():
        value = fn(*args)
        db.execute("INSERT INTO memo VALUES (?, ?, ?)", (run_id, name, json.dumps(value)))
        db.commit()
        return value
    row = db.execute("SELECT result FROM memo WHERE run_id = ? AND name = ?",
                     (run_id, name)).fetchone()
    return (row and json.loads(row[0])) or run_and_record()
'''


@pytest.mark.parametrize("memo", [MEMO_TRUSTING_TRUTHINESS, MEMO_WITH_NONE_FOR_MISSING,
                                  MEMO_SKIPPING_EMPTY_RESULTS, MEMO_WITH_OR])
def test_02_a_memo_that_takes_a_falsy_result_for_no_record_fails(memo):
    for failure in assert_fails(EX02, "q1", {MEMO: memo}, FALSY_TEST):
        assert "fn answered" in failure.message and "again" in failure.message
    # wrong in that property alone: every other test of q1 passes
    result = judged(EX02, "q1", {MEMO: memo}, seed=1)
    assert [t.name[:len(FALSY_TEST)] for t in failing(result)] == [FALSY_TEST], result.report()


MEMO_WITH_A_SENTINEL = '''
_NOTHING = object()


def memo_step(db, run_id, name, fn, *args):
    found = _NOTHING
    for (text,) in db.execute("SELECT result FROM memo WHERE run_id = ? AND name = ?",
                              (run_id, name)):
        found = json.loads(text)
    if found is not _NOTHING:
        return found
    value = fn(*args)
    with db:                                       # commits on leaving the block
        db.execute("INSERT INTO memo (run_id, name, result) VALUES (?, ?, ?)",
                   (run_id, name, json.dumps(value)))
    return value
'''
MEMO_COUNTING_ROWS = '''
def memo_step(db, run_id, name, fn, *args):
    (rows,) = db.execute("SELECT COUNT(*) FROM memo WHERE run_id = ? AND name = ?",
                         (run_id, name)).fetchone()
    if rows == 0:
        db.execute("INSERT INTO memo VALUES (?, ?, ?)", (run_id, name, json.dumps(fn(*args))))
        db.commit()
    (text,) = db.execute("SELECT result FROM memo WHERE run_id = ? AND name = ?",
                         (run_id, name)).fetchone()
    return json.loads(text)
'''


@pytest.mark.parametrize("memo", [MEMO_WITH_A_SENTINEL, MEMO_COUNTING_ROWS])
def test_02_memos_that_tell_a_row_from_its_value_pass(memo):
    assert_passes(EX02, "q1", {MEMO: memo}, only=FALSY_TEST)
    assert_passes(EX02, "q1", {MEMO: memo}, seeds=(1,))


# 05 q1: the coins --------------------------------------------------------------------------------
EX05, TRIAGE, REFRESH = "05_model_step", "def triage", "def refresh_lookup"
BRANCH_TEST, BILL_TEST = "every branch", "the model is called once per run"
ONE_QUARTER = {"below 0.25": lambda c: c < 0.25, "0.25 to 0.5": lambda c: 0.25 <= c < 0.5,
               "0.5 to 0.75": lambda c: 0.5 <= c < 0.75, "from 0.75": lambda c: c >= 0.75}
OTHER_RATES = {"< 0.2": lambda c: c < 0.2, "< 0.3": lambda c: c < 0.3,
               "< 0.5": lambda c: c < 0.5, "> 0.25": lambda c: c > 0.25,
               "<= 0.24": lambda c: c <= 0.24, ">= 0.74": lambda c: c >= 0.74,
               "two eighths": lambda c: c < 0.125 or c >= 0.875,
               "never": lambda c: False}


def outcomes_of(cases, rule):
    """What the branch test sees of an answer that audits by `rule`, branches aside."""
    return [SimpleNamespace(case=case, result={"audited": rule(case.coin)}) for case in cases]


def test_05_every_seed_puts_a_coin_near_both_ends_of_every_quarter_one_per_desk():
    for seed in MANY:
        cases = ex05.branch_cases(Draw(seed))
        for case in cases:
            answer, = replay_model([ex05.PROMPT.format(case.ticket)])
            assert ex05._desk_for(answer) == case.desk, seed
        for quarter in range(4):
            low, high = quarter / 4, (quarter + 1) / 4
            mine = sorted((c for c in cases if c.quarter == quarter), key=lambda c: c.coin)
            assert len(mine) == 2, seed
            assert low <= mine[0].coin < low + ex05.EDGE and high - ex05.EDGE < mine[1].coin < high
            assert {c.desk for c in mine} == {"refunds", "helpdesk"}, seed
        # whichever quarter an answer audits, each desk is met audited and not
        for rule in ONE_QUARTER.values():
            met = {(c.desk, rule(c.coin)) for c in cases}
            assert met == {(d, a) for d in ("refunds", "helpdesk") for a in (True, False)}, seed
            ex05._audits_one_quarter(outcomes_of(cases, rule))
        for what, rule in OTHER_RATES.items():
            with pytest.raises(checks.Fail, match="ctx.random\\(\\) came out"):
                ex05._audits_one_quarter(outcomes_of(cases, rule))


def test_05_every_seed_resumes_each_sweep_case_on_the_other_side_of_the_answers_rule():
    for seed in MANY:
        for rule in ONE_QUARTER.values():
            probes = ex05.quarter_cases(Draw(seed))
            chosen = ex05.audited_and_not([(c, c) for c in probes], lambda c: rule(c.coin))
            assert [rule(case.coin) for case, _ in chosen] == [True, False], seed
            for case, _ in chosen:
                resumed_coin = random.Random(case.resume_seed).random()
                assert rule(resumed_coin) != rule(case.coin), seed


def triage_with(audit_line):
    """The solution's triage with its audit decision written another way."""
    return {TRIAGE: changed(EX05, TRIAGE, ("    audited = ctx.random() < 0.25 ", audit_line + " "))}


@pytest.mark.parametrize("audit_line", [
    "    audited = ctx.random() > 0.25",                      # three tickets in four
    "    audited = ctx.random() < 0.22",                      # about one in four, not quite
    "    coin = ctx.random()\n    audited = coin < 0.125 or coin >= 0.875",   # two eighths
])
def test_05_an_audit_of_another_share_fails_the_branch_test(audit_line):
    for failure in assert_fails(EX05, "q1", triage_with(audit_line), BRANCH_TEST):
        assert "ctx.random() came out" in failure.message and "quarter" in failure.hint


@pytest.mark.parametrize("audit_line", [
    "    audited = ctx.random() >= 0.75",
    "    audited = int(ctx.random() * 4) == 2",
])
def test_05_an_audit_of_any_one_quarter_passes(audit_line):
    assert_passes(EX05, "q1", triage_with(audit_line), only=BRANCH_TEST)


# 05 q1: an answer kept in memory, resumed in another process -------------------------------------
MODEL_ANSWER_IN_A_DICT = '''
_REPLIES = {}


@dl.workflow("ex05-triage", version=1)
def triage(ctx, folder, ticket):
    key = (folder, ticket)
    if key not in _REPLIES:                        # asked once per process, then remembered
        _REPLIES[key] = classify(folder, ticket)
    reply = _REPLIES[key]
    desk = "refunds" if "refund" in reply["text"] else "helpdesk"
    ctx.step(desk, forward, folder, desk, ticket)
    audited = ctx.random() < 0.25
    if audited:
        ctx.step("audit", forward, folder, "audit", ticket)
    return {"desk": desk, "audited": audited, "answer": reply["text"]}
'''
MODEL_ANSWER_IN_AN_LRU_CACHE = '''
from functools import lru_cache


@lru_cache(maxsize=256)
def ask_once(folder, ticket):
    return classify(folder, ticket)["text"]


@dl.workflow("ex05-triage", version=1)
def triage(ctx, folder, ticket):
    text = ask_once(folder, ticket)
    desk = "refunds" if "refund" in text else "helpdesk"
    ctx.step(desk, forward, folder, desk, ticket)
    audited = ctx.random() < 0.25
    if audited:
        ctx.step("audit", forward, folder, "audit", ticket)
    return {"desk": desk, "audited": audited, "answer": text}
'''
MODEL_ANSWER_BEHIND_A_GLOBAL_COUNTER = '''
import collections

executions = collections.Counter()                 # how often each run's workflow has executed
first_replies = {}


@dl.workflow("ex05-triage", version=1)
def triage(ctx, folder, ticket):
    executions[ctx.run_id] += 1
    if executions[ctx.run_id] == 1:                # the first execution asks; replays reuse it
        first_replies[ctx.run_id] = classify(folder, ticket)
    reply = first_replies[ctx.run_id]
    desk = "refunds" if "refund" in reply["text"] else "helpdesk"
    ctx.step(desk, forward, folder, desk, ticket)
    audited = ctx.random() < 0.25
    if audited:
        ctx.step("audit", forward, folder, "audit", ticket)
    return {"desk": desk, "audited": audited, "answer": reply["text"]}
'''


@pytest.mark.parametrize("triage", [MODEL_ANSWER_IN_A_DICT, MODEL_ANSWER_IN_AN_LRU_CACHE,
                                    MODEL_ANSWER_BEHIND_A_GLOBAL_COUNTER])
def test_05_a_model_answer_kept_in_memory_is_billed_again_by_the_process_that_resumes(triage):
    for failure in assert_fails(EX05, "q1", {TRIAGE: triage}, BILL_TEST):
        assert "1 by the process that was killed, 1 by the one that resumed" in failure.message
        assert "survives a restart" in failure.hint


def test_05_the_given_code_fails_every_test_of_q1():
    # the exercise starts from code to fix: every test, resumed in another process, fails it
    given = nbformat.read(ROOT / "exercises" / f"{EX05}.ipynb", as_version=4)
    cell, = [c.source for c in given.cells if c.cell_type == "code" and TRIAGE in c.source]
    result = judged(EX05, "q1", {TRIAGE: cell}, seed=1)
    assert len(failing(result)) == len(result.tests) == 4, result.report()


# 05 q2: other runs in the store ----------------------------------------------------------------
BYSTANDERS_TEST = "the other runs in the store"
REFRESHES_THAT_RESUME_OTHERS = [
    '''def refresh_lookup(engine, run_id):
    engine.invalidate(run_id, "lookup")
    engine.recover()                               # the run is due again: let recovery take it
    return engine.get(run_id)
''',
    '''def refresh_lookup(engine, run_id):
    engine.invalidate(run_id, "lookup")
    return [run for run in engine.recover() if run.run_id == run_id][0]
''',
    '''def refresh_lookup(engine, run_id):
    engine.invalidate(run_id, "lookup")
    for unfinished in engine.runs("running"):      # every run left running, this one too
        engine.resume(unfinished.run_id)
    return engine.get(run_id)
''',
]


@pytest.mark.parametrize("refresh", REFRESHES_THAT_RESUME_OTHERS)
def test_05_a_refresh_that_resumes_other_runs_too_fails(refresh):
    seeds = range(1, 11)                           # cheap: no fresh process in q2
    for failure in assert_fails(EX05, "q2", {REFRESH: refresh}, BYSTANDERS_TEST, seeds=seeds):
        assert "another customer's statement, interrupted" in failure.message


def test_05_a_refresh_of_that_run_alone_passes_with_other_runs_due():
    resume_by_hand = '''def refresh_lookup(engine, run_id):
    forgotten = engine.invalidate(run_id, "lookup")
    assert forgotten[0] == "lookup"
    run = engine.resume(run_id)
    return run
'''
    assert_passes(EX05, "q2", {REFRESH: resume_by_hand})
