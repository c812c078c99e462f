"""Right answers written differently from the solutions still score full marks.

Drawn cases, ledger checks and collision-prone keys make the checks stricter; none of it
may fail an answer that is right. Each answer below is correct by another route than the
solution's, and must pass on several seeds. (More in test_grading.py and
test_grading_06_08.py: a model step under another name, a clock read after the lookup, a
numpy smallest_k, an agent run resumed instead of started.)
"""

import hashlib
import json
import math
import sqlite3
import uuid

import pytest

import durable_lite as dl
from durable_lite.examples import lookup_order, world_at
from durable_lite.grading import checks, exercise

from given_code import AUTHOR, EDITOR, MANAGER, classify, forward, notify, publish, write_draft

SEEDS = (11, 22, 33)
DAY = 24 * 3600


def passes(exercise_id, qid, *answers):
    for seed in SEEDS:
        result = checks.run_question(exercise(exercise_id), qid, answers, seed=seed)
        assert result.status == checks.PASSED, f"seed {seed}:\n{result.report()}"


# 01 -------------------------------------------------------------------------------------------
def run_naive_from_the_summary(folder, crash_at=None):
    outcome = dl.naive.NaiveRunner(max_attempts=3, crash_at=crash_at).run(
        dl.examples.refund, folder, "A-17", 40, careless=True)
    seen = world_at(folder).summary()                 # every ledger at once
    return {"attempts": outcome.attempts, "step_executions": len(outcome.executions),
            **{k: seen[k] for k in ("refunds", "emails", "tickets_closed")}}


PREDICTIONS = {("lookup", w): 1 for w in dl.faults.CRASH_POINTS}
PREDICTIONS.update({("refund", "before_step"): 1, ("refund", "after_effect"): 2,
                    ("refund", "after_checkpoint"): 2})
PREDICTIONS.update({(s, w): 2 for s in ("email", "close") for w in dl.faults.CRASH_POINTS})


def retry_with_a_while_loop(steps, max_attempts=3):
    executions, attempt = [], 0
    while attempt < max_attempts:
        attempt += 1
        try:
            results = {}
            for name, fn in steps:
                executions.append((attempt, name))
                results[name] = fn()
            return {"status": "completed", "attempts": attempt, "executions": executions,
                    "results": results}
        except BaseException:           # a dl.Crash too (and anything else a step raises)
            pass
    return {"status": "failed", "attempts": attempt, "executions": executions, "results": None}


def test_01_counting_from_the_summary_a_table_of_predictions_and_a_while_loop_pass():
    passes("01_naive_retry", "q1", run_naive_from_the_summary)
    passes("01_naive_retry", "q2", lambda step, when: PREDICTIONS[(step, when)])
    passes("01_naive_retry", "q3", retry_with_a_while_loop)


# 02 -------------------------------------------------------------------------------------------
# q1's answer (memo_step commits with a transaction block) and q2's (the flow written under
# another name), in one notebook cell
MEMO_IN_A_BLOCK_AND_FLOW_UNDER_ANOTHER_NAME = '''
import json
import sqlite3
from durable_lite.examples import close_ticket, email_customer, issue_refund, lookup_order


def open_memo(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE IF NOT EXISTS memo (run_id TEXT NOT NULL, name TEXT NOT NULL, "
               "result TEXT NOT NULL, PRIMARY KEY (run_id, name))")
    db.commit()
    return db


def memo_step(db, run_id, name, fn, *args):
    found = db.execute("SELECT result FROM memo WHERE run_id = ? AND name = ?",
                       (run_id, name)).fetchall()
    if found:
        return json.loads(found[0][0])
    value = json.loads(json.dumps(fn(*args)))
    with db:                                          # commits on leaving the block
        db.execute("INSERT OR REPLACE INTO memo VALUES (?, ?, ?)", (run_id, name, json.dumps(value)))
    return value


def my_refund_flow(db_path, folder, run_id, order_id, amount):
    db = open_memo(db_path)
    order = memo_step(db, run_id, "lookup", lookup_order, folder, order_id)
    paid = memo_step(db, run_id, "refund", issue_refund, folder, order_id, amount)
    memo_step(db, run_id, "email", email_customer, folder, order["email"], "Your refund")
    memo_step(db, run_id, "close", close_ticket, folder, order["ticket"])
    db.close()
    return {"order": order_id, "refund_id": paid["refund_id"], "amount": amount}


refund_flow = my_refund_flow          # written under another name, handed in under the task's
'''


def notebook_cell(source):
    """Define functions the way a notebook cell does: in __main__, source kept in linecache
    (the check copies them from there into a fresh process)."""
    import linecache
    filename = f"<notebook cell {abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__", "_ih": ["", source]}   # as IPython keeps its input
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def test_02_a_transaction_block_and_a_flow_defined_under_another_name_pass():
    cell = notebook_cell(MEMO_IN_A_BLOCK_AND_FLOW_UNDER_ANOTHER_NAME)
    passes("02_memoize", "q1", cell["memo_step"], cell["open_memo"])
    passes("02_memoize", "q2", cell["refund_flow"])


# 03 -------------------------------------------------------------------------------------------
def key_uuid5(run_id, order_id):
    return str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps([run_id, order_id])))


def key_of_a_tuple(run_id, order_id):
    return hashlib.sha256(repr((run_id, order_id)).encode()).hexdigest()


def key_length_prefixed(run_id, order_id):
    return hashlib.sha256(f"{len(run_id)}:{run_id}{order_id}".encode()).hexdigest()


def key_of_two_hashes(run_id, order_id):
    return "".join(hashlib.sha256(part.encode()).hexdigest()[:40] for part in (run_id, order_id))


def key_from_the_library(run_id, order_id):
    return dl.keys.derive_key(run_id, "refund", order_id)


@pytest.mark.parametrize("make_key", [key_uuid5, key_of_a_tuple, key_length_prefixed,
                                      key_of_two_hashes, key_from_the_library])
def test_03_keys_built_other_ways_pass(make_key):
    passes("03_idempotency", "q1", make_key)


def open_sent(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE IF NOT EXISTS sent (key TEXT PRIMARY KEY, result TEXT NOT NULL)")
    db.commit()
    return db


def refund_once_in_a_block(db, provider, key, order_id, amount):
    row = db.execute("SELECT result FROM sent WHERE key = ?", (key,)).fetchone()
    if row:
        return json.loads(row[0])
    answer = provider.refund(order_id, amount)
    with db:
        db.execute("INSERT INTO sent (key, result) VALUES (?, ?)", (key, json.dumps(answer)))
    return answer


# q4's answer in a notebook cell: one of its checks resumes the run in a fresh process,
# which gets the learner's functions copied from the cell they were defined in
KEYED_BY_THE_CONTEXT = '''
import json
import sqlite3
import durable_lite as dl
from durable_lite.examples import lookup_order, world_at


def open_sent(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE IF NOT EXISTS sent (key TEXT PRIMARY KEY, result TEXT NOT NULL)")
    db.commit()
    return db


def refund_once_in_a_block(db, provider, key, order_id, amount):
    row = db.execute("SELECT result FROM sent WHERE key = ?", (key,)).fetchone()
    if row:
        return json.loads(row[0])
    answer = provider.refund(order_id, amount)
    with db:
        db.execute("INSERT INTO sent (key, result) VALUES (?, ?)", (key, json.dumps(answer)))
    return answer


def pay_once(db_path, folder, key, order_id, amount):
    db = open_sent(db_path)
    try:
        return refund_once_in_a_block(db, world_at(folder).careless, key, order_id, amount)
    finally:
        db.close()


@dl.workflow("test-alt03-keyed-by-the-context", version=1)
def keyed_refund_with_the_contexts_key(ctx, folder, db_path, order_id, amount):
    order = ctx.step("lookup", lookup_order, folder, order_id)
    payment = ctx.step("refund", pay_once, db_path, folder,
                       ctx.idempotency_key("refund", order["id"]), order_id, amount)
    return {"order": order_id, "refund_id": payment["refund_id"], "amount": payment["amount"]}
'''


def test_03_a_transaction_block_and_the_contexts_own_key_pass():
    passes("03_idempotency", "q2", refund_once_in_a_block, open_sent)
    passes("03_idempotency", "q3", {"before_call": 1, "after_call": 2, "after_record": 1},
           refund_once_in_a_block, open_sent)
    passes("03_idempotency", "q4", notebook_cell(KEYED_BY_THE_CONTEXT)["keyed_refund_with_the_contexts_key"])


# 04 -------------------------------------------------------------------------------------------
@dl.workflow("test-alt04-all-after-the-lookup", version=1)
def receipt_made_after_the_lookup(ctx, folder, order_id):
    order = ctx.step("lookup", lookup_order, folder, order_id)
    receipt_id = f"rcpt-{ctx.uuid()[-6:]}-{order_id}"      # another shape, same recorded id
    issued_at = ctx.now()
    ctx.step("email", dl.examples.email_customer, folder, order["email"],
             f"Receipt {receipt_id} for order {order_id}")
    return {"receipt": receipt_id, "issued_at": issued_at, "order": order_id}


@dl.workflow("test-alt04-id-from-the-run", version=1)
def receipt_named_after_its_run(ctx, folder, order_id):
    issued_at = ctx.now()
    receipt_id = "rcpt-" + ctx.run_id                     # one receipt per run: unique too
    order = ctx.step("lookup", lookup_order, folder, order_id)
    ctx.step("email", dl.examples.email_customer, folder, order["email"],
             f"Receipt {receipt_id} for order {order_id}")
    return {"receipt": receipt_id, "issued_at": issued_at, "order": order_id}


@pytest.mark.parametrize("receipt", [receipt_made_after_the_lookup, receipt_named_after_its_run])
def test_04_receipt_ids_recorded_other_ways_pass(receipt):
    passes("04_determinism", "q1", receipt)


# 05 -------------------------------------------------------------------------------------------
@dl.workflow("test-alt05-coin-first", version=1)
def triage_flipping_the_coin_first(ctx, folder, ticket):
    audit = ctx.random() < 1 / 4                          # drawn before the model is asked
    answer = ctx.step("ask the model", classify, folder, ticket)["text"]
    desk = "refunds" if "refund" in answer else "helpdesk"
    ctx.step(desk, forward, folder, desk, ticket)
    if audit:
        ctx.step("audit", forward, folder, "audit", ticket)
    return {"desk": desk, "audited": audit, "answer": answer}


def refresh_by_the_steps_name(engine, run_id):
    stale = next(row["step"] for row in engine.history(run_id) if row["step"] == "lookup")
    engine.invalidate(run_id, stale)
    return engine.resume(run_id)


def test_05_a_coin_flipped_first_and_a_refresh_found_in_the_history_pass():
    passes("05_model_step", "q1", triage_flipping_the_coin_first)
    passes("05_model_step", "q2", refresh_by_the_steps_name)


# 06 -------------------------------------------------------------------------------------------
def smallest_k_by_logarithms_then_checked(p, n, target):
    # a logarithm's guess, then the formula itself decides: a hair either way is corrected
    if p >= 1:
        return 1
    k = max(1, math.ceil(math.log(1 - target ** (1 / n)) / math.log(1 - p)))
    while k > 1 and (1 - (1 - p) ** (k - 1)) ** n >= target:
        k -= 1
    while (1 - (1 - p) ** k) ** n < target:
        k += 1
    return k


def test_06_a_k_guessed_with_logarithms_and_checked_by_the_formula_passes():
    passes("06_choose_k", "q1", smallest_k_by_logarithms_then_checked)


# 07 -------------------------------------------------------------------------------------------


@dl.workflow("test-alt07-a-loop-over-reviewers", version=1)
def publish_post_with_a_loop(ctx, folder, post_id):
    text = ctx.step("draft", write_draft, folder, post_id)["text"]
    decision = None
    for step, reviewer in (("ask-editor", EDITOR), ("escalate", MANAGER)):
        ctx.step(step, notify, folder, reviewer, f"{post_id} is waiting for you")
        decision = ctx.wait_for_signal("approval", timeout=DAY)
        if decision is not None:
            break
    else:
        ctx.step("tell-author", notify, folder, AUTHOR, f"nobody reviewed {post_id}")
        return {"post": post_id, "outcome": "expired"}
    if not decision["approved"]:
        ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id}: no")
        return {"post": post_id, "outcome": "rejected", "by": decision["by"]}
    ctx.step("publish", publish, folder, post_id, text)
    return {"post": post_id, "outcome": "published", "by": decision["by"]}


def test_07_reviewers_asked_in_a_loop_pass():
    passes("07_approval_deadline", "q1", publish_post_with_a_loop)


# 08 -------------------------------------------------------------------------------------------
def think(folder, goal, turn):
    return world_at(folder).llm.complete(f"{goal} (turn {turn})")


def price_of(answer):
    return answer["cost"]


@dl.workflow("test-alt08-named-cost", version=1)
def agent_with_a_named_cost_function(ctx, folder, goal, max_turns=1000):
    thinking = dl.Step("think", cost=price_of)
    for turn in range(max_turns):
        ctx.step(thinking, think, folder, goal, turn)
    return {"turns": max_turns}


def test_08_a_cost_function_with_a_name_passes():
    passes("08_budgets", "q1", agent_with_a_named_cost_function)
