"""The template for new exercises' checks works: a right answer passes it, a wrong one fails
it for the reason its test names. (It is an example, not an exercise: never discovered.)"""

import importlib

import durable_lite as dl
from durable_lite.examples import issue_refund, lookup_order, world_at
from durable_lite.grading import EXERCISES, checks

template = importlib.import_module("durable_lite.grading.exercises.template")


def send_sms(folder, to, text, key=None):
    return world_at(folder).ledger("sms").record(key=key, detail={"to": to, "text": text})


@dl.workflow("test-template-notify-once", version=1)
def notify_once(ctx, folder, order_id, amount):
    order = ctx.step("lookup", lookup_order, folder, order_id)
    refund = ctx.step("refund", issue_refund, folder, order_id, amount,
                      idempotency_key=ctx.idempotency_key("refund", order_id))
    ctx.step("sms", send_sms, folder, order["email"], f"refunded {amount}",
             ctx.idempotency_key("sms", order_id))
    return {"order": order_id, "refund": refund["refund_id"]}


@dl.workflow("test-template-texts-twice", version=1)
def notify_without_a_key(ctx, folder, order_id, amount):
    order = ctx.step("lookup", lookup_order, folder, order_id)
    refund = ctx.step("refund", issue_refund, folder, order_id, amount,
                      idempotency_key=ctx.idempotency_key("refund", order_id))
    ctx.step("sms", send_sms, folder, order["email"], f"refunded {amount}")   # no key
    return {"order": order_id, "refund": refund["refund_id"]}


def test_the_template_is_not_discovered_as_an_exercise():
    assert "template" not in " ".join(EXERCISES.values())


def test_the_template_passes_a_right_answer_and_fails_a_wrong_one():
    right = checks.run_question(template.EXERCISE, "q1", (notify_once,), seed=1)
    assert right.status == checks.PASSED, right.report()
    wrong = checks.run_question(template.EXERCISE, "q1", (notify_without_a_key,), seed=1)
    assert [t.name for t in wrong.tests if t.status != checks.PASSED] == [
        "a crash at every point, then a resume: still one refund and one text"]
    assert "'sms': 1" in wrong.tests[1].message and "sms / after_effect" not in wrong.tests[1].message
