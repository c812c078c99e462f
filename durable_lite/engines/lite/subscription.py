"""Two subscription workflows on durable_lite, for exercise 14 to port to DBOS.

The services are the simulated world's: the payments provider refunds the unused part of
a plan, the mailer writes to the customer, and the subscription provider keeps its own
ledger, "plans", of every cancellation and pause it carried out. Each service function
takes the world's folder first, so any process (a durable_lite child, a DBOS worker) talks
to the same world, and each accepts an optional idempotency key, as real providers do.

cancel_subscription:  lookup -> cancel (keyed) -> refund the unused part, if any (keyed)
                      -> goodbye email (no key: a crash right after it sends it twice)
pause_subscription:   lookup -> ask email -> wait for the "confirm" signal, with a deadline
                      -> pause (keyed), or a "stays active" email

The exercise's learner ports both to DBOS; a port is graded by running it beside these,
under the same crash or the same answers, and comparing the worlds' ledgers.
"""

from ...sim import world_at
from ...workflow import workflow

PLANS = "plans"                # the subscription provider's ledger
CONFIRM = "confirm"            # the signal (DBOS: the message topic) that answers the pause
DAY = 24 * 3600


# the services ------------------------------------------------------------------------------
def lookup_subscription(folder, sub_id):
    """The subscription's customer (read-only: the same answer every time)."""
    customer = world_at(folder).orders.lookup(sub_id)
    return {"id": sub_id, "email": customer["email"]}


def cancel_plan(folder, sub_id, idempotency_key=None):
    """The provider cancels the plan; a repeated key returns the first cancellation."""
    return world_at(folder).ledger(PLANS).record(
        key=idempotency_key, detail={"subscription": sub_id, "action": "cancel"})


def pause_plan(folder, sub_id, months, idempotency_key=None):
    """The provider pauses the plan for `months`; a repeated key returns the first pause."""
    return world_at(folder).ledger(PLANS).record(
        key=idempotency_key, detail={"subscription": sub_id, "action": "pause", "months": months})


def refund_unused(folder, sub_id, amount, idempotency_key=None):
    """The payments provider refunds `amount`; a repeated key returns the first refund."""
    return world_at(folder).payments.refund(sub_id, amount, idempotency_key=idempotency_key)


def send_email(folder, to, subject, idempotency_key=None):
    """One email (without a key, every call is another email)."""
    return world_at(folder).mailer.send(to, subject, idempotency_key=idempotency_key)


# the workflows -----------------------------------------------------------------------------
@workflow("ex14-cancel-subscription", version=1)
def cancel_subscription(ctx, folder, sub_id, unused):
    sub = ctx.step("lookup", lookup_subscription, folder, sub_id)
    plan = ctx.step("cancel", cancel_plan, folder, sub_id,
                    idempotency_key=ctx.idempotency_key("cancel", sub_id))
    refund_id = None
    if unused > 0:                             # nothing left to refund on the plan's last day
        refund = ctx.step("refund", refund_unused, folder, sub_id, unused,
                          idempotency_key=ctx.idempotency_key("refund", sub_id))
        refund_id = refund["refund_id"]
    ctx.step("goodbye", send_email, folder, sub["email"], f"{sub_id} is cancelled")
    return {"subscription": sub_id, "cancellation": plan["record_id"],
            "refund_id": refund_id, "amount": unused}


@workflow("ex14-pause-subscription", version=1)
def pause_subscription(ctx, folder, sub_id, deadline=2 * DAY):
    sub = ctx.step("lookup", lookup_subscription, folder, sub_id)
    ctx.step("ask", send_email, folder, sub["email"], f"Pause {sub_id}? Answer within two days")
    answer = ctx.wait_for_signal(CONFIRM, timeout=deadline)        # None: no answer in time
    if answer is None:
        ctx.step("unchanged", send_email, folder, sub["email"], f"No answer: {sub_id} stays active")
        return {"subscription": sub_id, "outcome": "no answer"}
    if not answer["pause"]:
        ctx.step("unchanged", send_email, folder, sub["email"], f"{sub_id} stays active")
        return {"subscription": sub_id, "outcome": "kept"}
    plan = ctx.step("pause", pause_plan, folder, sub_id, answer["months"],
                    idempotency_key=ctx.idempotency_key("pause", sub_id))
    return {"subscription": sub_id, "outcome": "paused", "months": answer["months"],
            "pause": plan["record_id"]}
