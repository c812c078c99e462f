"""Every property a right answer to exercises 01-07 has is judged, one test per property.

Each check module's docstring (durable_lite/grading/exercises/ex01_... to ex07_...) lists
the properties of a right answer to each question. Here, for each property, an answer wrong
in that property alone — the solution notebook with one answer cell changed, the way a
learner's notebook differs from it — fails the test that names the property, on every seed;
and right answers written other ways still pass. The answers run in this process, in the
namespace the notebook's cells build (as a kernel would), so the checks see them exactly as
they see a learner's.

At the end, the hints of exercises 01-07 are audited: no hint may quote the solution.
"""

import ast
import itertools
import linecache
import re
from pathlib import Path

import nbformat
import pytest

from durable_lite.grading import checks, exercise

ROOT = Path(__file__).resolve().parent.parent
SEEDS = (1,)        # one seed: tests/test_grading_round4_*.py prove every seed draws each case
_cells = itertools.count()


# answers, as a notebook's cells make them ------------------------------------------------------
def solution_cell(name, marker):
    """The source of the one code cell of solutions/NAME that contains `marker`."""
    nb = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    found = [c.source for c in nb.cells if c.cell_type == "code" and marker in c.source]
    assert len(found) == 1, f"{marker!r} should be in exactly one cell of solutions/{name}"
    return found[0]


def changed(name, marker, *edits):
    """The solution's cell containing `marker`, with each (old, new) edit made once: an
    answer one change away from the right one."""
    answer, stub, rest = solution_cell(name, marker).partition("### BEGIN STUB")
    for old, new in edits:                 # in the answer, not in the stub commented out after it
        assert answer.count(old) == 1, f"{old!r} should be in the answer exactly once"
        answer = answer.replace(old, new)
    return answer + stub + rest


def kernel(name, cells=None):
    """The namespace a kernel has after running solutions/NAME top to bottom — its check
    cells and demonstrations left out — with the cell containing each marker of `cells`
    replaced by the source given. Each cell is compiled under a name of its own and kept in
    linecache, as IPython keeps cells, so a check can copy functions into a fresh process."""
    nb = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    namespace, used = {"__name__": "__main__", "_ih": [""]}, set()   # _ih: the input, as IPython keeps it
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or {"demo", "raises-exception"} & set(tags) or \
                cell.source.lstrip().startswith("check("):
            continue
        source = cell.source
        for marker, new in (cells or {}).items():
            if marker in source:
                source = new
                used.add(marker)
        filename = f"<notebook cell {next(_cells)}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace["_ih"].append(source)
        exec(compile(source, filename, "exec"), namespace)
    assert used == set(cells or {}), f"no cell of solutions/{name} holds {set(cells) - used}"
    return namespace


def judged(name, qid, cells=None, seeds=SEEDS):
    """The question's results, one per seed, for the notebook with `cells` changed. The
    notebook is run again for every seed, so each check sees the workflows it defines as the
    latest registered (a resume looks a workflow up by its name)."""
    question = exercise(name).questions[qid]
    results = []
    for seed in seeds:
        namespace = kernel(name, cells)
        answers = tuple(namespace[a] for a in question.answers)
        results.append(checks.run_question(exercise(name), qid, answers, seed=seed))
    return results


def failing(result):
    return [t.name for t in result.tests if t.status != checks.PASSED]


def fails(name, qid, cells, *tests, seeds=SEEDS, only=True):
    """The question fails on every seed, and the failing tests are the ones whose names
    begin with `tests` (only those, unless only=False). Returns the first seed's result."""
    results = judged(name, qid, cells, seeds)
    for seed, result in zip(seeds, results):
        names = failing(result)
        assert result.status == checks.FAILED, f"seed {seed}:\n{result.report()}"
        for test in tests:
            assert any(n.startswith(test) for n in names), f"seed {seed}, {test!r}:\n{result.report()}"
        if only:
            assert all(n.startswith(tests) for n in names), f"seed {seed}:\n{result.report()}"
    return results[0]


def passes(name, qid, cells, seeds=SEEDS):
    for seed, result in zip(seeds, judged(name, qid, cells, seeds)):
        assert result.status == checks.PASSED, f"seed {seed}:\n{result.report()}"


def failed_tests(result):
    return [t for t in result.tests if t.status != checks.PASSED]


@pytest.mark.parametrize("name", ["01_naive_retry", "02_memoize", "03_idempotency",
                                  "04_determinism", "05_model_step", "06_choose_k",
                                  "07_approval_deadline"])
def test_the_solution_passes_every_question_in_this_process(name):
    for qid in exercise(name).questions:
        passes(name, qid, None, seeds=(3,))


# 01 --------------------------------------------------------------------------------------------
EX01 = "01_naive_retry"
RUN_NAIVE, RETRY = "def run_naive", "def retry_from_top"


def test_01_q1_each_property_fails_alone():
    # the five keys
    fails(EX01, "q1", {RUN_NAIVE: changed(EX01, RUN_NAIVE, ('"tickets_closed": world.tickets.closes()}', "}"))},
          "returns a dict with", "no crash", "a crash just after", "every one of the 12")
    # the folder it is given: a run in a folder of its own leaves `folder` empty
    fails(EX01, "q1", {RUN_NAIVE: changed(
        EX01, RUN_NAIVE, ("dl.examples.refund, folder,", 'dl.examples.refund, str(dl.lab.scratch_folder("mine")),'),
        ("world = dl.examples.world_at(folder)", 'world = dl.examples.world_at(dl.lab.scratch_folder("mine"))'))},
        "no crash", "a crash just after", "every one of the 12")
    # the careless provider
    fails(EX01, "q1", {RUN_NAIVE: changed(EX01, RUN_NAIVE, ("careless=True", "careless=False"))},
          "no crash", "a crash just after", "every one of the 12")
    # the crash passed on
    fails(EX01, "q1", {RUN_NAIVE: changed(EX01, RUN_NAIVE, ("max_attempts=3, crash_at=crash_at", "max_attempts=3"))},
          "a crash just after", "every one of the 12")
    # counted from the ledgers, after the run
    fails(EX01, "q1", {RUN_NAIVE: changed(EX01, RUN_NAIVE, ('"emails": world.mailer.count()', '"emails": result.attempts'))},
          "a crash just after", "every one of the 12")
    # executions from the runner's result
    fails(EX01, "q1", {RUN_NAIVE: changed(EX01, RUN_NAIVE, ('"step_executions": result.step_executions',
                                                           '"step_executions": 4 * result.attempts'))},
          "a crash just after", "every one of the 12")


PREDICTED = "def predicted_refunds"


def test_01_q2_each_crash_point_is_judged():
    # after_checkpoint taken for safe: the naive runner records nothing
    fails(EX01, "q2", {PREDICTED: changed(EX01, PREDICTED, ('when != "before_step")', 'when == "after_effect")'))},
          "crashes around the refund")
    # a crash at the email or the close taken for harmless
    fails(EX01, "q2", {PREDICTED: changed(EX01, PREDICTED, ('STEPS.index(step) > STEPS.index("refund")',
                                                           'STEPS.index(step) > STEPS.index("email")'))},
          "crashes at the email and the close")
    # a number written as text
    fails(EX01, "q2", {PREDICTED: changed(EX01, PREDICTED, ("return 2 if money_moved else 1", 'return "2" if money_moved else "1"'))},
          "crashes at the lookup", "crashes around the refund", "crashes at the email")


def test_01_q3_each_property_fails_alone():
    # results None when every attempt failed, not what the last attempt got through
    result = fails(EX01, "q3", {RETRY: changed(EX01, RETRY, ('"results": None}', '"results": results}'))},
                   "gives up after max_attempts")
    assert "None" in failed_tests(result)[0].hint
    # every attempt starts at the first step
    fails(EX01, "q3", {RETRY: '''
def retry_from_top(steps, max_attempts=3):
    executions, results, done = [], {}, set()
    for attempt in range(1, max_attempts + 1):
        try:
            for name, fn in steps:
                if name in done:                 # wrong: skips what already ran
                    continue
                executions.append((attempt, name))
                results[name] = fn()
                done.add(name)
        except (Exception, dl.Crash):
            continue
        return {"status": "completed", "attempts": attempt, "executions": executions,
                "results": results}
    return {"status": "failed", "attempts": max_attempts, "executions": executions, "results": None}
'''}, "a step fails once", only=False)      # when the first step fails, nothing is skipped
    # the call that failed is listed too
    fails(EX01, "q3", {RETRY: changed(EX01, RETRY, ("                executions.append((attempt, name))\n                results[name] = fn()",
                                                   "                results[name] = fn()\n                executions.append((attempt, name))"))},
          "a step fails once", "a dl.Crash", "gives up after", only=False)
    # no exception after the last attempt
    fails(EX01, "q3", {RETRY: changed(EX01, RETRY, ('    return {"status": "failed", "attempts": max_attempts, "executions": executions,\n            "results": None}',
                                                   '    raise RuntimeError("gave up")'))},
          "gives up after max_attempts")
    # exactly max_attempts attempts
    fails(EX01, "q3", {RETRY: changed(EX01, RETRY, ("range(1, max_attempts + 1)", "range(1, max_attempts)"))},
          "gives up after max_attempts", "a step that fails on every attempt but the last")
    # the boundary: an attempt that gets through on the last try completed
    fails(EX01, "q3", {RETRY: changed(EX01, RETRY, (
        '            continue      # redelivered: the next attempt starts again at the first step\n',
        '            continue      # redelivered: the next attempt starts again at the first step\n'
        '        if attempt == max_attempts:\n            break                       # wrong: "all attempts used"\n'))},
        "a step that fails on every attempt but the last")


# 02 --------------------------------------------------------------------------------------------
EX02 = "02_memoize"
MEMO, FLOW = "def memo_step", "def refund_flow"
DICT_IN_FRONT = '''
MEMO = {}


def memo_step(db, run_id, name, fn, *args):
    if (run_id, name) in MEMO:                  # wrong: the process remembers, not the file
        return MEMO[(run_id, name)]
    row = db.execute("SELECT result FROM memo WHERE run_id = ? AND name = ?",
                     (run_id, name)).fetchone()
    if row is None:
        result = fn(*args)
        db.execute("INSERT INTO memo (run_id, name, result) VALUES (?, ?, ?)",
                   (run_id, name, json.dumps(result)))
        db.commit()
        row = (json.dumps(result),)
    MEMO[(run_id, name)] = json.loads(row[0])
    return MEMO[(run_id, name)]
'''


def test_02_q1_each_property_fails_alone():
    fails(EX02, "q1", {MEMO: DICT_IN_FRONT}, "a new memo file")
    # writes the table, but answers from memory only
    fails(EX02, "q1", {MEMO: '''
SEEN = {}


def memo_step(db, run_id, name, fn, *args):
    if (run_id, name) in SEEN:
        return SEEN[(run_id, name)]
    result = fn(*args)
    db.execute("INSERT OR REPLACE INTO memo VALUES (?, ?, ?)", (run_id, name, json.dumps(result)))
    db.commit()
    SEEN[(run_id, name)] = result
    return result
'''}, "a new memo file", "a result recorded by another process")
    # not committed: lost with the connection, whichever process recorded it
    fails(EX02, "q1", {MEMO: changed(EX02, MEMO, ("    db.commit()                            # durable before the workflow moves on\n", ""))},
          "the result is committed", "a result recorded by another process")
    fails(EX02, "q1", {MEMO: changed(EX02, MEMO, ("return json.loads(row[0])", "return eval(row[0])"),
                                     ("text = json.dumps(result)", "text = repr(result)"),
                                     ("return json.loads(text)", "return result"))},
          "results are stored as JSON")
    # one joined key
    fails(EX02, "q1", {MEMO: changed(EX02, MEMO, ("(run_id, name)).fetchone()", "(run_id + name, '')).fetchone()"),
                                     ("(run_id, name, text)", "(run_id + name, '', text)"))},
          "another run, or another step name", "results are stored as JSON")
    # fn run twice on a first call
    fails(EX02, "q1", {MEMO: changed(EX02, MEMO, ("    text = json.dumps(result)", "    text = json.dumps(fn(*args))"))},
          "the first call runs fn once", "a crash inside fn", only=False)
    # never replays
    fails(EX02, "q1", {MEMO: changed(EX02, MEMO, ("    if row is not None:\n", "    if False:\n"),
                                     ("INSERT INTO memo", "INSERT OR REPLACE INTO memo"))},
          "a second call for the same run", "a result recorded by another process", "the result is committed")


def test_02_q2_each_property_fails_alone():
    fails(EX02, "q2", {FLOW: changed(EX02, FLOW, *[(f'memo_step(db, run_id, "{s}"', f'memo_step(db, order_id, "{s}"')
                                                 for s in ("lookup", "refund", "email", "close")])},
          "the memo file records this run's four steps", "two runs that refund the same order", seeds=(1,))
    fails(EX02, "q2", {FLOW: changed(EX02, FLOW, ('"refund", issue_refund', '"pay", issue_refund'))},
          "the memo file records this run's four steps", seeds=(1,))
    # one memo_step around the whole flow: a kill after any effect repeats every step
    fails(EX02, "q2", {FLOW: '''
def whole_flow(folder, order_id, amount):
    order = lookup_order(folder, order_id)
    payment = issue_refund(folder, order_id, amount)
    email_customer(folder, order["email"], f"Refund of {amount} for {order_id}")
    close_ticket(folder, order["ticket"])
    return payment


def refund_flow(db_path, folder, run_id, order_id, amount):
    db = open_memo(db_path)
    try:
        payment = memo_step(db, run_id, "refund", whole_flow, folder, order_id, amount)
    finally:
        db.close()
    return {"order": order_id, "refund_id": payment["refund_id"], "amount": amount}
'''}, "the memo file records this run's four steps", "killed (SIGKILL) just before a step",
        "killed right after a step's effect", seeds=(1,))


# 03 --------------------------------------------------------------------------------------------
EX03 = "03_idempotency"
KEY, ONCE, KEYED = "def refund_key", "def refund_once", "def keyed_refund"


def key_with(expression, imports=""):
    return f'''{imports}
def refund_key(run_id, order_id):
    material = json.dumps(["refund", run_id, order_id, {expression}])
    return "refund-" + hashlib.sha256(material.encode()).hexdigest()[:32]
'''


def test_03_q1_each_property_fails_alone():
    # a date from datetime.now(): the same all day in this process, another one days later
    fails(EX03, "q1", {KEY: key_with('datetime.now().strftime("%Y-%m-%d")', "from datetime import datetime")},
          "a fresh Python process, days later")
    fails(EX03, "q1", {KEY: key_with("datetime.date.today().isoformat()", "import datetime")},
          "the same run and order give the same key", "a fresh Python process, days later")
    fails(EX03, "q1", {KEY: key_with("hash(run_id)")}, "a fresh Python process, days later")
    fails(EX03, "q1", {KEY: changed(EX03, KEY, ('["refund", run_id, order_id]', '["refund", order_id]'))},
          "another run, or another order")
    fails(EX03, "q1", {KEY: changed(EX03, KEY, ('"refund-" + hashlib.sha256(material.encode()).hexdigest()[:32]',
                                               'material * 20'))}, "returns a non-empty string")


def test_03_q2_and_q3_each_property_fails_alone():
    fails(EX03, "q2", {ONCE: '''
def refund_once(db, provider, key, order_id, amount):
    row = db.execute("SELECT result FROM sent WHERE key = ?", (key,)).fetchone()
    if row is not None:
        return json.loads(row[0])
    db.execute("INSERT INTO sent (key, result) VALUES (?, ?)", (key, "null"))   # wrong: first
    db.commit()
    answer = provider.refund(order_id, amount)
    db.execute("UPDATE sent SET result = ? WHERE key = ?", (json.dumps(answer), key))
    db.commit()
    return answer
'''}, "a provider call that fails records nothing")
    fails(EX03, "q2", {ONCE: changed(EX03, ONCE, ("    db.commit()                                 # ... and closes here\n", ""))},
          "it survives a restart", "the keys live in the sent table", only=False)
    fails(EX03, "q2", {ONCE: changed(EX03, ONCE, ("    if row is not None:\n", "    if False:\n"),
                                     ("INSERT INTO sent", "INSERT OR REPLACE INTO sent"))},
          "the same key again", "it survives a restart")
    fails(EX03, "q3", {"window = {": changed(EX03, "window = {", ('"after_call": 2,', '"after_call": 1,'))},
          "after_call")


def keyed_with(key):
    return changed(EX03, KEYED, ("key = refund_key(ctx.run_id, order_id)", f"key = {key}"))


def test_03_q4_a_key_from_the_wall_clock_fails_on_a_resume_another_day():
    # the mistakes lesson 03 teaches against: the resume in the same second hides them, a
    # resume in another process whose clock reads days later does not
    for key in ('refund_key(f"{ctx.run_id}@{int(time.time())}", order_id)',
                "refund_key(f\"{ctx.run_id}@{datetime.date.today()}\", order_id)"):
        source = "import time\nimport datetime\n" + keyed_with(key)
        result = fails(EX03, "q4", {KEYED: source}, "killed right after the refund was paid",
                       only=False)        # the sweep catches it only when a second ticks over
        assert set(failing(result)) <= {
            "killed right after the refund was paid, resumed by another process days later by "
            "the wall clock: still exactly one refund",
            "a crash at each of the 6 crash points, then a resume: exactly one refund, and the "
            "result of an uninterrupted run"}
        test = next(t for t in failed_tests(result) if t.name.startswith("killed"))
        assert "paid 2 times" in test.message and "2 different keys" in test.message, test.message


def test_03_q4_each_other_property_fails_alone():
    fails(EX03, "q4", {KEYED: keyed_with('refund_key("refund", order_id)')},
          "two runs for the same order are two refunds")
    fails(EX03, "q4", {KEYED: changed(EX03, KEYED, ('ctx.step("refund", pay_once', 'ctx.step("pay", pay_once'))},
          "no crash", "killed right after the refund was paid")


def test_03_q4_a_key_from_a_recorded_time_passes():
    # ctx.now() is recorded: the same on every replay, in any process, on any day
    passes(EX03, "q4", {KEYED: keyed_with('refund_key(f"{ctx.run_id}@{ctx.now()}", order_id)')})


# 04 --------------------------------------------------------------------------------------------
EX04, RECEIPT = "04_determinism", "def receipt"


def receipt_with(*edits):
    return {RECEIPT: changed(EX04, RECEIPT, *edits)}


def test_04_a_receipt_id_from_the_second_collides_with_the_next_receipt():
    for id_expression in ('f"rcpt-{int(ctx.now())}"', 'f"rcpt-{order_id}-{int(ctx.now())}"'):
        result = fails(EX04, "q1", receipt_with(('"rcpt-" + ctx.uuid()', id_expression)),
                       "two receipts for the same order")
        assert "same second" in failed_tests(result)[0].name


def test_04_each_other_property_fails_alone():
    fails(EX04, "q1", receipt_with(('"rcpt-" + ctx.uuid()', '"rcpt-" + uuid.uuid4().hex[:8]')),
          "a crash at any point", "the receipt in the customer's email", "two receipts for the same order",
          "killed (SIGKILL)")
    fails(EX04, "q1", receipt_with(("issued_at = ctx.now()", "issued_at = 1_767_225_600.0")),
          "in a result of the given shape")
    # the given steps and the result's shape are kept (judged inside tests the given code fails)
    result = fails(EX04, "q1", receipt_with(('ctx.step("email"', 'ctx.step("send"')),
                   "a crash at any point of the given steps")
    assert "['lookup', 'send']" in failed_tests(result)[0].message
    result = fails(EX04, "q1", receipt_with(('"rcpt-" + ctx.uuid()', 'ctx.uuid()')),
                   "in a result of the given shape")
    assert "'rcpt-' prefix" in failed_tests(result)[0].message
    fails(EX04, "q1", receipt_with(('{"receipt": receipt_id,', '{"receipt": receipt_id, "when": issued_at,')),
          "in a result of the given shape")
    # the customer emailed another id than the one returned
    fails(EX04, "q1", receipt_with(('f"Receipt {receipt_id} for order {order_id}")',
                                    'f"Receipt rcpt-{ctx.uuid()} for order {order_id}")')),
          "the receipt in the customer's email", "two receipts for the same order", "killed (SIGKILL)")


def test_04_an_id_recorded_after_the_lookup_passes():
    passes(EX04, "q1", receipt_with(('    receipt_id = "rcpt-" + ctx.uuid()      # likewise\n', ""),
                                    ('    ctx.step("email"', '    receipt_id = "rcpt-" + ctx.uuid()\n    ctx.step("email"')))


# 05 --------------------------------------------------------------------------------------------
EX05, TRIAGE, REFRESH = "05_model_step", "def triage", "def refresh_lookup"


def test_05_q1_the_forwarding_steps_keep_their_names():
    # judged inside the branch test, which the code given to fix fails too
    for edit in (("ctx.step(desk, forward", 'ctx.step("forward", forward'),
                 ('ctx.step("audit"', 'ctx.step("audit-ticket"')):
        result = fails(EX05, "q1", {TRIAGE: changed(EX05, TRIAGE, edit)}, "every branch")
        assert "forwards should be recorded as" in failed_tests(result)[0].message


@pytest.mark.parametrize("rate", ["0.2", "0.3", "0.5"])
def test_05_q1_an_audit_at_another_rate_fails(rate):
    # every coin lands just below or just above 0.25, on the side its branch needs
    result = fails(EX05, "q1", {TRIAGE: changed(EX05, TRIAGE, ("ctx.random() < 0.25", f"ctx.random() < {rate}"))},
                   "every branch")
    assert "ctx.random() came out" in failed_tests(result)[0].message


def test_05_q2_a_refresh_of_the_wrong_step_fails():
    fails(EX05, "q2", {REFRESH: changed(EX05, REFRESH, ('engine.invalidate(run_id, "lookup")', 'engine.invalidate(run_id, "email")'))},
          "the same run, resumed, reads the new address", "only the stale step",
          "a second move, a second refresh")


# 06 --------------------------------------------------------------------------------------------
EX06, SMALLEST, PLAN = "06_choose_k", "def smallest_k", "def plan"


def test_06_q1_greater_than_where_the_question_says_at_least_fails_on_the_boundary():
    result = fails(EX06, "q1", {SMALLEST: changed(EX06, SMALLEST, ("** n < target", "** n <= target"))},
                   "on the boundary")
    assert "exactly the target" in failed_tests(result)[0].message
    # solved with logarithms and rounded down plus one: also one too many there
    fails(EX06, "q1", {SMALLEST: '''
import math


def smallest_k(p, n, target):
    if p >= 1:
        return 1
    return math.floor(math.log(1 - target ** (1 / n)) / math.log(1 - p)) + 1
'''}, "on the boundary", only=False)


@pytest.mark.parametrize("log", ["math.log(x) / math.log(1 - p)", "math.log2(x) / math.log2(1 - p)",
                                 "math.log10(x) / math.log10(1 - p)", "math.log(x, 1 - p)",
                                 "math.log1p(-root) / math.log1p(-p)"])
def test_06_q1_every_usual_logarithm_misses_a_target_floats_cannot_hold(log):
    # each closed form is a hair off somewhere: the cases hold a p and a target where
    # rounding up its float lands one attempt short or one too many, on every run
    fails(EX06, "q1", {SMALLEST: f'''
import math


def smallest_k(p, n, target):
    if p >= 1:
        return 1
    root = target ** (1 / n)
    x = 1 - root
    return max(1, math.ceil({log}))
'''}, "the k it returns", "on the boundary", only=False)


def test_06_q2_retries_in_a_loop_inside_one_step_fail():
    result = fails(EX06, "q2", {PLAN: '''
def with_retries(folder, name, k):
    for attempt in range(1, k + 1):
        try:
            return flaky_tool(folder, name)
        except Exception:
            if attempt == k:
                raise


@dl.workflow("ex06-plan", version=1)
def plan(ctx, folder, n, k):
    for i in range(1, n + 1):
        ctx.step(f"task-{i}", with_retries, folder, f"task-{i}", k)   # wrong: retries the engine cannot see
    return {"tasks": n}
'''}, "the engine does the retrying")
    assert "records 1 attempt" in failed_tests(result)[0].message


def test_06_q2_a_retry_policy_with_its_own_backoff_passes():
    passes(EX06, "q2", {PLAN: changed(EX06, PLAN, ("dl.Retry(max_attempts=k)", "dl.Retry(max_attempts=k, initial=0.1, jitter=False)"))})


# 07 --------------------------------------------------------------------------------------------
EX07, POST = "07_approval_deadline", "def publish_post"


def post_with(*edits):
    return {POST: changed(EX07, POST, *edits)}


ASK_AUTHOR_ON_APPROVAL = ('''        ctx.step("publish", publish, folder, post_id, draft["text"])
''', '''        ctx.step("publish", publish, folder, post_id, draft["text"])
        ctx.step("thank-author", notify, folder, AUTHOR, f"{post_id} is out")     # wrong
''')
ASK_EDITOR_AGAIN = ('''        decision = ctx.wait_for_signal("approval", timeout=1 * DAY)
    if decision is None:                                   # nobody''', '''        ctx.step("remind-editor", notify, folder, EDITOR, f"{post_id} still waits")   # wrong
        decision = ctx.wait_for_signal("approval", timeout=1 * DAY)
    if decision is None:                                   # nobody''')
COPY_MANAGER_ON_REJECTION = ('''    ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} was rejected by {decision['by']}")
''', '''    ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} was rejected by {decision['by']}")
    ctx.step("copy-manager", notify, folder, MANAGER, f"{post_id} was rejected")     # wrong
''')


def test_07_a_renamed_step_fails_the_names_test_only():
    fails(EX07, "q1", post_with(('ctx.step("ask-editor"', 'ctx.step("review"')), "on every path the steps")
    fails(EX07, "q1", post_with(('ctx.step("escalate"', 'ctx.step("escalation"')), "on every path the steps")


def test_07_the_second_wait_must_last_one_day():
    fails(EX07, "q1", post_with(('''        decision = ctx.wait_for_signal("approval", timeout=1 * DAY)
    if decision is None:                                   # nobody''', '''        decision = ctx.wait_for_signal("approval", timeout=2 * DAY)
    if decision is None:                                   # nobody''')),
          "no answer for a day", "nobody answers for two days", "on every path")


@pytest.mark.parametrize("edit", [ASK_AUTHOR_ON_APPROVAL, ASK_EDITOR_AGAIN, COPY_MANAGER_ON_REJECTION],
                         ids=["author-told-on-approval", "editor-asked-again", "manager-told-of-rejection"])
def test_07_too_much_mail_from_steps_is_not_blamed_on_a_step_missing(edit):
    # Section 3 of the grading review: every email here is inside a step, and the feedback
    # used to say "an email sent outside a step is sent again on replay". It says what the
    # test saw: which step sent the extra mail, on which path.
    result = judged(EX07, "q1", post_with(edit), seeds=(1,))[0]
    wrong = [t for t in failed_tests(result) if "extra mail" in t.message]
    assert wrong, result.report()
    for test in wrong:
        assert "outside a step" not in test.hint and "from step '" in test.message, test.message
        assert "came from a step" in test.hint


def test_07_an_email_really_sent_outside_a_step_is_named_so():
    result = judged(EX07, "q1", post_with(('ctx.step("escalate", notify, folder, MANAGER, f"{post_id} has waited a day for review")',
                                           'notify(folder, MANAGER, f"{post_id} has waited a day for review")')), seeds=(1,))[0]
    wrong = [t for t in failed_tests(result) if "extra mail" in t.message]
    assert wrong, result.report()
    assert all("no step was running" in t.message and "outside a step" in t.hint for t in wrong)


def test_07_a_draft_written_again_in_the_publish_step_is_told_so():
    result = fails(EX07, "q1", post_with(('ctx.step("publish", publish, folder, post_id, draft["text"])',
                                          'ctx.step("publish", lambda: publish(folder, post_id, write_draft(folder, post_id)["text"]))')),
                   "the editor approves", "after the escalation the manager's answer counts",
                   "restarted between every two actions")
    for test in failed_tests(result):
        assert "step 'publish'" in test.message and "model was called 2 times" in test.message
        assert "write the draft in a step" not in test.hint and "'draft' step" in test.hint


# the hints of 01-07 never quote the solution ----------------------------------------------------
EXERCISES_01_07 = ["01_naive_retry", "02_memoize", "03_idempotency", "04_determinism",
                   "05_model_step", "06_choose_k", "07_approval_deadline"]
RUN = 5                               # tokens in a row: `engine.resume(run_id)` is 6
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|[^\sA-Za-z0-9_`]")


def runs_of(text, n=RUN) -> set:
    """Every run of n code tokens in `text` (quotes made alike, backticks dropped)."""
    tokens = _TOKEN.findall(text.replace("'", '"'))
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def solution_lines(nb) -> list:
    """The code lines of the answers: between BEGIN SOLUTION and BEGIN STUB / END SOLUTION."""
    lines = []
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines() if cell.cell_type == "code" else ():
            text = line.strip()
            if text.startswith(("### BEGIN SOLUTION", "### BEGIN STUB", "### END SOLUTION")):
                inside = text.startswith("### BEGIN SOLUTION")
            elif inside and text and not text.startswith("#"):
                lines.append(text.split("  #")[0])
    return lines


def learner_sees(nb) -> str:
    """What the learner's notebook shows before any hint: its cells, without the folded hints
    and the hint in each stub's NotImplementedError."""
    return "\n".join("\n".join(line for line in c.source.splitlines() if "NotImplementedError(" not in line)
                     for c in nb.cells if not (c.cell_type == "markdown" and "<details>" in c.source))


def hints_of(name) -> list:
    """(where, text): the folded hints and stub hints of the notebook, and every message and
    hint the exercise's checks can show (the strings given to Fail, to a test, to `hint`)."""
    nb = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    out = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            out += [("folded hint", h) for h in re.findall(r"</summary>(.*?)</details>", cell.source, re.S)]
        else:
            out += [("stub hint", h) for h in re.findall(r"### HINT:(.*)", cell.source)]
    module = next((ROOT / "durable_lite" / "grading" / "exercises").glob(f"ex{name[:2]}_*.py"))
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Call):
            called = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if called in ("Fail", "test"):
                out += [("check", _text(a)) for a in node.args]
            out += [("check", _text(k.value)) for k in node.keywords if k.arg == "hint"]
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "hint" for t in node.targets):
            out.append(("check", _text(node.value)))
    return out


def _text(node) -> str:
    """The literal text of a string expression; each computed part becomes a break."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v) if isinstance(v, ast.Constant) else " \0 " for v in node.values)
    if isinstance(node, (ast.BinOp, ast.IfExp)):
        parts = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.body, node.orelse)
        return " \0 ".join(_text(p) for p in parts)
    return " \0 "


@pytest.mark.parametrize("name", EXERCISES_01_07)
def test_no_hint_quotes_the_solution(name):
    """A hint says where to look, never the answer: no hint (folded in the notebook, in a
    stub, or shown by a check) holds five code tokens in a row from a line of the solution,
    unless the learner's notebook already shows them (the question, the given code)."""
    solution = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    shown = runs_of(learner_sees(nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)))
    secret = set().union(*(runs_of(line) for line in solution_lines(solution))) - shown
    quoted = [(where, text.strip()[:100], " ".join(sorted(runs_of(text) & secret)[0]))
              for where, text in hints_of(name) if runs_of(text) & secret]
    assert not quoted, "hints that quote the solution:\n" + "\n".join(map(str, quoted))


def test_the_audit_catches_a_hint_that_quotes_the_solution():
    secret = runs_of("decision = ctx.wait_for_signal(\"approval\", timeout=1 * DAY)")
    assert runs_of("use ctx.wait_for_signal('approval', timeout=1 * DAY) here") & secret
    assert not runs_of("wait for the signal with a timeout of one day") & secret
