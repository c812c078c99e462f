"""Exercises 04 and 07: what a restart loses is judged in new Python processes.

A receipt id or a model draft kept in a module-level dict or behind `functools.lru_cache`
used to pass "resumed after a crash": the resume happened in the kernel, where the cache
survived. Each property about a restart now runs the answer's cells again, from their
source, in new Python processes (`portable.module_source`, `child.run_fresh`): in exercise
04 the first process is SIGKILLed right after the customer was emailed and another one
resumes the run, and two receipts are issued by two new processes; in exercise 07 every
action after start() is handled by a new process.

Each wrong answer below is a fix a learner could believe in: it keeps something in memory
so that a replay in the same process finds it again. It passes the tests that resume in the
kernel, and fails the test of the property it breaks on seeds 1, 2 and 3, with a hint that
says what the restart lost. Answers that keep a cache of what the run recorded (harmless)
still pass. Only the test that names the property runs (`run_tests(..., only=...)`): a
fresh process costs a few tenths of a second, a whole question several of them.
"""

import pytest

from durable_lite.grading import checks, exercise

from grading_support import run_tests
from test_grading_properties_01_07 import kernel

SEEDS = (1, 2, 3)


def number_of(ex, qid, beginning) -> int:
    """The number of the one test of question `qid` whose name begins with `beginning`."""
    found = [i for i, test in enumerate(ex.questions[qid].tests) if test.name.startswith(beginning)]
    assert len(found) == 1, f"{beginning!r} should begin exactly one test's name"
    return found[0]


def results_of(name, marker, cell, answer, test, seeds):
    """The result of the one test whose name begins with `test`, for the solution notebook
    with its answer cell (the cell holding `marker`) replaced by `cell`, per seed. The
    notebook runs again for every seed, as a kernel would run it."""
    ex = exercise(name)
    n = number_of(ex, "q1", test)
    return [run_tests(ex, "q1", kernel(name, {marker: cell})[answer], seed, only=[n])[n]
            for seed in seeds]


def fails_on_every_seed(name, marker, cell, answer, test):
    results = results_of(name, marker, cell, answer, test, SEEDS)
    for seed, result in zip(SEEDS, results):
        assert result.status == checks.FAILED, f"seed {seed}: {result.status}: {result.message}"
    return results


def passes(name, marker, cell, answer, tests, seed=3):
    for test in tests:
        result, = results_of(name, marker, cell, answer, test, (seed,))
        assert result.status == checks.PASSED, f"{test}: {result.message} (hint: {result.hint})"


# 04 ---------------------------------------------------------------------------------------------
EX04, RECEIPT = "04_determinism", "def receipt"
KILLED = "killed (SIGKILL) right after the customer was emailed"
TWO_RECEIPTS = "two receipts for the same order"

RECEIPT_TAIL = '''    order = ctx.step("lookup", lookup_order, folder, order_id)
    ctx.step("email", email_customer, folder, order["email"],
             f"Receipt {receipt_id} for order {order_id}")
    return {"receipt": receipt_id, "issued_at": issued_at, "order": order_id}
'''

ID_IN_A_DICT = '''
issued = {}                         # run id -> its receipt id, for the replays


@dl.workflow("ex04-receipt", version=1)
def receipt(ctx, folder, order_id):
    issued_at = ctx.now()
    if ctx.run_id not in issued:
        issued[ctx.run_id] = "rcpt-" + uuid.uuid4().hex[:10]
    receipt_id = issued[ctx.run_id]
''' + RECEIPT_TAIL

ID_BEHIND_LRU_CACHE = '''
from functools import lru_cache


@lru_cache(maxsize=None)
def receipt_id_of(run_id):
    return f"rcpt-{uuid.uuid4().hex[:12]}"      # made once per run, then the cache answers


@dl.workflow("ex04-receipt", version=1)
def receipt(ctx, folder, order_id):
    issued_at = ctx.now()
    receipt_id = receipt_id_of(ctx.run_id)
''' + RECEIPT_TAIL

ID_FROM_A_SALT = '''
import hashlib

SALT = uuid.uuid4().hex             # so that nobody can guess a receipt id from its run


@dl.workflow("ex04-receipt", version=1)
def receipt(ctx, folder, order_id):
    issued_at = ctx.now()
    receipt_id = "rcpt-" + hashlib.sha256(f"{SALT}:{ctx.run_id}".encode()).hexdigest()[:12]
''' + RECEIPT_TAIL

NUMBERED_BY_A_COUNTER = '''
import itertools

next_number = itertools.count(1)
numbers = {}                        # run id -> its receipt number, for the replays


@dl.workflow("ex04-receipt", version=1)
def receipt(ctx, folder, order_id):
    issued_at = ctx.now()
    if ctx.run_id not in numbers:
        numbers[ctx.run_id] = next(next_number)
    receipt_id = f"rcpt-{numbers[ctx.run_id]:06d}"
''' + RECEIPT_TAIL


@pytest.mark.parametrize("cell", [ID_IN_A_DICT, ID_BEHIND_LRU_CACHE, ID_FROM_A_SALT],
                         ids=["a-module-level-dict", "an-lru-cache", "a-salt-drawn-at-import"])
def test_04_a_receipt_id_kept_by_the_process_fails_the_resume_in_a_new_process(cell):
    for result in fails_on_every_seed(EX04, RECEIPT, cell, "receipt", KILLED):
        assert "the killed process had emailed the customer" in result.message, result.message
        assert "new Python process" in result.hint and "memory" in result.hint, result.hint


def test_04_a_receipt_number_counted_in_memory_repeats_in_every_new_process():
    for result in fails_on_every_seed(EX04, RECEIPT, NUMBERED_BY_A_COUNTER, "receipt", TWO_RECEIPTS):
        assert "returned the same receipt 'rcpt-000001'" in result.message, result.message
        assert "every new process counts from the start again" in result.hint, result.hint


@pytest.mark.parametrize("cell", [
    '''
recorded = {}                       # a cache of what the run recorded: harmless


@dl.workflow("ex04-receipt", version=1)
def receipt(ctx, folder, order_id):
    issued_at = ctx.now()
    receipt_id = recorded.setdefault(ctx.run_id, "rcpt-" + ctx.uuid())
''' + RECEIPT_TAIL,
    '''
@dl.workflow("ex04-receipt", version=1)
def receipt(ctx, folder, order_id):
    issued_at = ctx.now()
    receipt_id = ctx.step("mint", lambda: f"rcpt-{uuid.uuid4().hex[:12]}")   # a step records it
''' + RECEIPT_TAIL], ids=["a-dict-of-recorded-ids", "an-id-minted-in-a-step"])
def test_04_a_receipt_id_the_run_recorded_survives_the_restart(cell):
    passes(EX04, RECEIPT, cell, "receipt", [KILLED, TWO_RECEIPTS])


# 07 ---------------------------------------------------------------------------------------------
EX07, POST = "07_approval_deadline", "def publish_post"
RESTARTED = "restarted between every two actions"

DECISIONS = '''    if decision is None:
        ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} expired")
        return {"post": post_id, "outcome": "expired"}
    if not decision["approved"]:
        ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} rejected")
        return {"post": post_id, "outcome": "rejected", "by": decision["by"]}
'''

DRAFT_IN_A_DICT = '''
drafts = {}                         # post -> the model's draft: the model writes each post once


def draft_once(folder, post_id):
    if post_id not in drafts:
        drafts[post_id] = write_draft(folder, post_id)
    return drafts[post_id]


@dl.workflow("ex07-publish-post", version=1)
def publish_post(ctx, folder, post_id):
    ctx.step("draft", draft_once, folder, post_id)
    ctx.step("ask-editor", notify, folder, EDITOR, f"Please review {post_id}")
    decision = ctx.wait_for_signal("approval", timeout=DAY)
    if decision is None:
        ctx.step("escalate", notify, folder, MANAGER, f"{post_id} is still waiting")
        decision = ctx.wait_for_signal("approval", timeout=DAY)
''' + DECISIONS + '''    ctx.step("publish", publish, folder, post_id, draft_once(folder, post_id)["text"])
    return {"post": post_id, "outcome": "published", "by": decision["by"]}
'''

DRAFT_BEHIND_LRU_CACHE = '''
from functools import lru_cache


@lru_cache(maxsize=None)
def drafted(folder, post_id):
    return write_draft(folder, post_id)["text"]      # asked once, however often we replay


@dl.workflow("ex07-publish-post", version=1)
def publish_post(ctx, folder, post_id):
    text = drafted(folder, post_id)
    ctx.step("draft", lambda: {"text": text})
    ctx.step("ask-editor", notify, folder, EDITOR, f"Please review {post_id}")
    decision = ctx.wait_for_signal("approval", timeout=DAY)
    if decision is None:
        ctx.step("escalate", notify, folder, MANAGER, f"{post_id} is still waiting")
        decision = ctx.wait_for_signal("approval", timeout=DAY)
''' + DECISIONS + '''    ctx.step("publish", publish, folder, post_id, text)
    return {"post": post_id, "outcome": "published", "by": decision["by"]}
'''

MANAGER_TOLD_ONCE_BY_A_COUNTER = '''
from collections import Counter

times_told = Counter()              # post -> how often its manager was told


@dl.workflow("ex07-publish-post", version=1)
def publish_post(ctx, folder, post_id):
    draft = ctx.step("draft", write_draft, folder, post_id)
    ctx.step("ask-editor", notify, folder, EDITOR, f"Please review {post_id}")
    decision = ctx.wait_for_signal("approval", timeout=DAY)
    if decision is None:
        if times_told[post_id] == 0:          # once, not on every replay
            notify(folder, MANAGER, f"{post_id} has waited a day")
        times_told[post_id] += 1
        ctx.step("escalate", lambda: {"manager": "told"})
        decision = ctx.wait_for_signal("approval", timeout=DAY)
''' + DECISIONS + '''    ctx.step("publish", publish, folder, post_id, draft["text"])
    return {"post": post_id, "outcome": "published", "by": decision["by"]}
'''


@pytest.mark.parametrize("cell, seen", [
    (DRAFT_IN_A_DICT, "the model was called 2 times"),
    (DRAFT_BEHIND_LRU_CACHE, "the model was called 3 times"),
    (MANAGER_TOLD_ONCE_BY_A_COUNTER, "The extra mail to the manager went out"),
], ids=["a-draft-in-a-module-level-dict", "a-draft-behind-an-lru-cache",
        "an-email-held-back-by-a-counter"])
def test_07_what_a_process_kept_in_memory_fails_after_a_restart(cell, seen):
    for result in fails_on_every_seed(EX07, POST, cell, "publish_post", RESTARTED):
        assert seen in result.message and "(in a new Python process)" in result.message, \
            result.message
        assert "while no step was running" in result.message, result.message
        assert "outside a step" in result.hint, result.hint
        assert "nothing your code kept in memory between two actions" in result.hint, result.hint


@pytest.mark.parametrize("cell", [
    '''
from functools import lru_cache


@lru_cache(maxsize=None)
def draft_for(folder, post_id):
    return write_draft(folder, post_id)         # inside the step: the step records it


@dl.workflow("ex07-publish-post", version=1)
def publish_post(ctx, folder, post_id):
    draft = ctx.step("draft", draft_for, folder, post_id)
    ctx.step("ask-editor", notify, folder, EDITOR, f"Please review {post_id}")
    decision = ctx.wait_for_signal("approval", timeout=DAY)
    if decision is None:
        ctx.step("escalate", notify, folder, MANAGER, f"{post_id} is still waiting")
        decision = ctx.wait_for_signal("approval", timeout=DAY)
''' + DECISIONS + '''    ctx.step("publish", publish, folder, post_id, draft["text"])
    return {"post": post_id, "outcome": "published", "by": decision["by"]}
''',
    '''
@dl.workflow("ex07-publish-post", version=1)
def publish_post(ctx, folder, post_id):
    text = ctx.step("draft", write_draft, folder, post_id)["text"]
    decision = None
    for step, reviewer in (("ask-editor", EDITOR), ("escalate", MANAGER)):
        ctx.step(step, notify, folder, reviewer, f"{post_id} is waiting for you")
        decision = ctx.wait_for_signal("approval", timeout=DAY)
        if decision is not None:
            break
''' + DECISIONS + '''    ctx.step("publish", publish, folder, post_id, text)
    return {"post": post_id, "outcome": "published", "by": decision["by"]}
'''], ids=["a-cache-inside-the-draft-step", "reviewers-asked-in-a-loop"])
def test_07_right_answers_written_other_ways_survive_the_restarts(cell):
    passes(EX07, POST, cell, "publish_post", [RESTARTED])
