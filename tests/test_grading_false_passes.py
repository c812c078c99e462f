"""Wrong answers that once scored full marks, each now failed by the question it answers.

Every answer here is wrong in a way a learner really wrote or could write: a value that
happens to equal what one fixed test case expected, a branch the test's fixed seed never
reached, a result compared only with the learner's own earlier run instead of the world's
ledgers, a key that collides. Each test runs the grader's checks in this process (fast) and
asserts the question fails, naming the test that catches it.

The first five are the false passes reported against the graders (with the exercises'
numbers as they are now); the rest were found by going through every question the same way.
"""

import hashlib
import json
import sqlite3

import durable_lite as dl
from durable_lite.examples import email_customer, lookup_order, world_at
from durable_lite.grading import checks, exercise

from given_code import AUTHOR, DAY, EDITOR, MANAGER, classify, forward, notify, publish, write_draft


def run(exercise_id, qid, *answers, seed=None):
    return checks.run_question(exercise(exercise_id), qid, answers, seed=seed)


def failing(result):
    return [t.name for t in result.tests if t.status != checks.PASSED]


def failed_over_seeds(exercise_id, qid, *answers, seeds=(1, 2, 3)):
    """The question fails on every seed (a false pass closed for good, not by luck)."""
    results = [run(exercise_id, qid, *answers, seed=s) for s in seeds]
    for seed, result in zip(seeds, results):
        assert result.status == checks.FAILED, f"seed {seed}: {result.report()}"
    return results[0]


# 1. exercise 07 without a "draft" step ----------------------------------------------------------
@dl.workflow("test-fp07-no-draft-step", version=1)
def publish_without_a_draft_step(ctx, folder, post_id):
    draft = write_draft(folder, post_id)     # wrong: a new generation on every replay
    ctx.step("ask-editor", notify, folder, EDITOR, f"Please review {post_id}")
    decision = ctx.wait_for_signal("approval", timeout=1 * DAY)
    if decision is None:
        ctx.step("escalate", notify, folder, MANAGER, f"{post_id} has waited a day")
        decision = ctx.wait_for_signal("approval", timeout=1 * DAY)
    if decision is None:
        ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} was not reviewed in time")
        return {"post": post_id, "outcome": "expired"}
    if decision["approved"]:
        ctx.step("publish", publish, folder, post_id, draft["text"])
        return {"post": post_id, "outcome": "published", "by": decision["by"]}
    ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} was rejected")
    return {"post": post_id, "outcome": "rejected", "by": decision["by"]}


def test_07_a_draft_written_outside_a_step_fails():
    # Three model calls for one post, and the text published is not the one the editor
    # was asked to review: the model is counted, and the published text compared with it.
    result = failed_over_seeds("07_approval_deadline", "q1", publish_without_a_draft_step)
    messages = " ".join(t.message for t in result.tests if t.status != checks.PASSED)
    assert "model" in messages and "draft" in messages, result.report()


# 2. exercise 05 q1 that never audits, or always picks the same desk ---------------------------
@dl.workflow("test-fp05-never-audits", version=1)
def triage_that_never_audits(ctx, folder, ticket):
    reply = ctx.step("classify", classify, folder, ticket)
    desk = "refunds" if "refund" in reply["text"] else "helpdesk"
    ctx.step(desk, forward, folder, desk, ticket)
    audited = False                          # wrong: no ticket is ever audited
    return {"desk": desk, "audited": audited, "answer": reply["text"]}


@dl.workflow("test-fp05-fixed-desk", version=1)
def triage_with_a_fixed_desk(ctx, folder, ticket):
    reply = ctx.step("classify", classify, folder, ticket)
    desk = "helpdesk"                        # wrong: the model's answer is ignored
    ctx.step(desk, forward, folder, desk, ticket)
    audited = ctx.random() < 0.25
    if audited:
        ctx.step("audit", forward, folder, "audit", ticket)
    return {"desk": desk, "audited": audited, "answer": reply["text"]}


def test_05_a_triage_that_never_audits_fails():
    result = failed_over_seeds("05_model_step", "q1", triage_that_never_audits)
    assert any("audit" in t.message for t in result.tests if t.status != checks.PASSED)


def test_05_a_triage_with_a_fixed_desk_fails():
    result = failed_over_seeds("05_model_step", "q1", triage_with_a_fixed_desk)
    assert any("refunds" in t.message for t in result.tests if t.status != checks.PASSED)


# 3. exercise 04 q1 with a receipt id shared by every receipt of an order ----------------------
@dl.workflow("test-fp04-receipt-per-order", version=1)
def receipt_named_after_the_order(ctx, folder, order_id):
    issued_at = ctx.now()
    receipt_id = "rcpt-" + order_id          # wrong: the second receipt repeats the first's id
    order = ctx.step("lookup", lookup_order, folder, order_id)
    ctx.step("email", email_customer, folder, order["email"],
             f"Receipt {receipt_id} for order {order_id}")
    return {"receipt": receipt_id, "issued_at": issued_at, "order": order_id}


def test_04_a_receipt_id_that_is_not_unique_per_receipt_fails():
    result = failed_over_seeds("04_determinism", "q1", receipt_named_after_the_order)
    assert any("unique" in name or "two receipts" in name for name in failing(result)), \
        result.report()


# 4. exercise 03 q1 with a key that concatenates without a separator ---------------------------
def key_without_a_separator(run_id, order_id):
    return hashlib.sha256((run_id + order_id).encode()).hexdigest()   # ("a1","2") == ("a","12")


def key_with_a_dash(run_id, order_id):
    return hashlib.sha256(f"{run_id}-{order_id}".encode()).hexdigest()  # ("a-b","c") == ("a","b-c")


def test_03_a_key_that_concatenates_without_a_separator_fails():
    result = failed_over_seeds("03_idempotency", "q1", key_without_a_separator)
    (name,) = failing(result)
    assert "collide" in name or "look alike" in name


def test_03_a_key_with_a_separator_that_ids_contain_fails():
    assert run("03_idempotency", "q1", key_with_a_dash).status == checks.FAILED


# more of the same kinds, found question by question -------------------------------------------
# a hard-coded value equal to the fixed case's answer
def counts_from_a_table(folder, crash_at=None):
    """Exercise 01 q1: the right numbers, typed in, and the refund never run."""
    if crash_at is None:
        return {"attempts": 1, "step_executions": 4, "refunds": 1, "emails": 1, "tickets_closed": 1}
    steps = ["lookup", "refund", "email", "close"]
    ran = steps.index(crash_at.step) + (crash_at.when != "before_step")
    return {"attempts": 2, "step_executions": ran + 4,
            **{k: 1 + (steps.index(s) < ran) for s, k in
               [("refund", "refunds"), ("email", "emails"), ("close", "tickets_closed")]}}


def test_01_counts_typed_in_without_running_the_refund_fail():
    result = failed_over_seeds("01_naive_retry", "q1", counts_from_a_table)
    assert any("ledger" in t.message for t in result.tests if t.status != checks.PASSED)


def retry_that_makes_up_results(steps, max_attempts=3):
    """Exercise 01 q3: runs every step, but reports results it made up from the names."""
    executions = []
    for attempt in range(1, max_attempts + 1):
        try:
            for name, fn in steps:
                executions.append((attempt, name))
                fn()
        except (Exception, dl.Crash):
            continue
        return {"status": "completed", "attempts": attempt, "executions": executions,
                "results": {name: f"{name}-result" for name, _ in steps}}
    return {"status": "failed", "attempts": max_attempts, "executions": executions,
            "results": None}


def test_01_results_made_up_from_the_step_names_fail():
    failed_over_seeds("01_naive_retry", "q3", retry_that_makes_up_results)


SMALLEST_K_TABLE = {(0.95, 6, 0.99): 3, (0.9, 10, 0.999): 4, (0.8, 20, 0.95): 4,
                    (0.99, 50, 0.99): 2, (0.5, 3, 0.9): 5, (0.7, 12, 0.9999): 10,
                    (0.95, 6, 0.7): 1, (0.999, 4, 0.99): 1, (1.0, 10, 0.999): 1}


def test_06_a_table_of_the_fixed_cases_fails():
    result = failed_over_seeds("06_choose_k", "q1", lambda p, n, t: SMALLEST_K_TABLE.get((p, n, t), 1))
    assert result.passed < result.total


def start_agent_with_a_literal_limit(engine, agent, folder, run_id):
    """Exercise 08 q2: 200 is MAX_STEPS today; the name, not the number, is the answer."""
    return engine.start(agent, folder, "goal", run_id=run_id, budget=dl.Budget(max_steps=200))


def test_08_a_literal_step_limit_instead_of_max_steps_fails():
    failed_over_seeds("08_budgets", "q2", start_agent_with_a_literal_limit)


def think(folder, goal, turn):
    return world_at(folder).llm.complete(f"{goal} (turn {turn})")


@dl.workflow("test-fp08-forty-turns", version=1)
def agent_with_forty_turns(ctx, folder, goal, max_turns=1000):
    for turn in range(40):                   # wrong: max_turns is ignored
        ctx.step(dl.Step("think", cost=lambda answer: answer["cost"]), think, folder, goal, turn)
    return {"turns": 40}


def test_08_an_agent_that_ignores_max_turns_fails():
    failed_over_seeds("08_budgets", "q1", agent_with_forty_turns)


# a result compared only with the learner's own earlier run, not with the world's ledgers
def refund_flow_with_a_made_up_id(db_path, folder, run_id, order_id, amount):
    """Exercise 02 q2, as a plain module function: pays, but names a refund of its own."""
    import durable_lite.examples as ex

    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE IF NOT EXISTS memo (run_id TEXT, name TEXT, result TEXT, "
               "PRIMARY KEY (run_id, name))")

    def memo(name, fn, *args):
        row = db.execute("SELECT result FROM memo WHERE run_id = ? AND name = ?",
                         (run_id, name)).fetchone()
        if row:
            return json.loads(row[0])
        value = fn(*args)
        db.execute("INSERT INTO memo VALUES (?, ?, ?)", (run_id, name, json.dumps(value)))
        db.commit()
        return value

    order = memo("lookup", ex.lookup_order, folder, order_id)
    memo("refund", ex.issue_refund, folder, order_id, amount)
    memo("email", ex.email_customer, folder, order["email"], "Refund")
    memo("close", ex.close_ticket, folder, order["ticket"])
    db.close()
    return {"order": order_id, "refund_id": "R-1", "amount": amount}   # wrong: not the provider's


def test_02_a_refund_id_that_is_not_the_providers_fails():
    result = failed_over_seeds("02_memoize", "q2", refund_flow_with_a_made_up_id, seeds=(1,))
    assert any("provider" in t.message for t in result.tests if t.status != checks.PASSED)


def open_sent(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE IF NOT EXISTS sent (key TEXT PRIMARY KEY, result TEXT NOT NULL)")
    db.commit()
    return db


def refund_once_with_a_made_up_answer(db, provider, key, order_id, amount):
    """Exercise 03 q2: pays once per key, but answers with a refund of its own invention."""
    row = db.execute("SELECT result FROM sent WHERE key = ?", (key,)).fetchone()
    if row is not None:
        return json.loads(row[0])
    provider.refund(order_id, amount)
    answer = {"refund_id": "R-1", "order_id": order_id, "amount": amount}   # wrong
    db.execute("INSERT INTO sent VALUES (?, ?)", (key, json.dumps(answer)))
    db.commit()
    return answer


def test_03_a_refund_once_that_makes_up_its_answer_fails():
    result = failed_over_seeds("03_idempotency", "q2", refund_once_with_a_made_up_answer, open_sent)
    assert any("provider" in t.message for t in result.tests if t.status != checks.PASSED)


def ex03_key(run_id, order_id):
    return hashlib.sha256(json.dumps([run_id, order_id]).encode()).hexdigest()


def ex03_pay_once(db_path, folder, key, order_id, amount):
    db = open_sent(db_path)
    try:
        row = db.execute("SELECT result FROM sent WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return json.loads(row[0])
        answer = world_at(folder).careless.refund(order_id, amount)
        db.execute("INSERT INTO sent VALUES (?, ?)", (key, json.dumps(answer)))
        db.commit()
        return answer
    finally:
        db.close()


@dl.workflow("test-fp03-made-up-refund-id", version=1)
def keyed_refund_naming_r1(ctx, folder, db_path, order_id, amount):
    ctx.step("lookup", lookup_order, folder, order_id)
    ctx.step("refund", ex03_pay_once, db_path, folder, ex03_key(ctx.run_id, order_id), order_id,
             amount)
    return {"order": order_id, "refund_id": "R-1", "amount": amount}   # wrong: typed in


def test_03_a_keyed_refund_that_types_in_its_refund_id_fails():
    failed_over_seeds("03_idempotency", "q4", keyed_refund_naming_r1, seeds=(1, 2))


# a branch the fixed case never reached
@dl.workflow("test-fp07-manager-cannot-reject", version=1)
def publish_where_the_manager_cannot_reject(ctx, folder, post_id):
    draft = ctx.step("draft", write_draft, folder, post_id)
    ctx.step("ask-editor", notify, folder, EDITOR, f"Please review {post_id}")
    decision = ctx.wait_for_signal("approval", timeout=1 * DAY)
    if decision is None:
        ctx.step("escalate", notify, folder, MANAGER, f"{post_id} has waited a day")
        second = ctx.wait_for_signal("approval", timeout=1 * DAY)
        if second is None:
            ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} was not reviewed in time")
            return {"post": post_id, "outcome": "expired"}
        ctx.step("publish", publish, folder, post_id, draft["text"])   # wrong: even a "no"
        return {"post": post_id, "outcome": "published", "by": second["by"]}
    if decision["approved"]:
        ctx.step("publish", publish, folder, post_id, draft["text"])
        return {"post": post_id, "outcome": "published", "by": decision["by"]}
    ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} was rejected")
    return {"post": post_id, "outcome": "rejected", "by": decision["by"]}


def test_07_a_manager_whose_rejection_publishes_fails():
    failed_over_seeds("07_approval_deadline", "q1", publish_where_the_manager_cannot_reject)


def refresh_from_the_first_step(engine, run_id):
    """Exercise 05 q2: forgets the whole run, not the stale step and what came after it."""
    first = next(row["step"] for row in engine.history(run_id) if row["kind"] == "step")
    engine.invalidate(run_id, first)
    return engine.resume(run_id)


def test_05_a_refresh_that_forgets_the_whole_run_fails():
    result = failed_over_seeds("05_model_step", "q2", refresh_from_the_first_step)
    assert "only the stale step and the steps after it run again, once each" in failing(result)
