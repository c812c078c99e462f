"""The refund of lesson 01, grown up, on durable_lite: dbos/refund.py is the same on DBOS.

Over a limit, a person must approve the refund; the run waits for the approval, and
declines politely if the deadline passes first. After paying and telling the customer it
waits a cooling-off period before closing the ticket (a reply may reopen the case). Every
effect carries an idempotency key derived from the run id, so a crash anywhere costs one
repeated call at most, never a second refund.

Read it beside dbos/refund.py: the two files have the same shape, line for line.
"""

from ... import examples as ex
from ...workflow import workflow

APPROVAL = "approval"          # the signal (DBOS: the message topic) that answers the wait


@workflow("refund-with-approval", version=1)
def refund_with_approval(ctx, folder, order_id, amount, limit=100,
                         approval_timeout=2 * 86400, cooling_off=3600):
    order = ctx.step("lookup", ex.lookup_order, folder, order_id)
    if amount > limit:
        decision = ctx.wait_for_signal(APPROVAL, timeout=approval_timeout)   # None: too late
        if not decision or not decision.get("approved"):
            ctx.step("email", ex.email_customer, folder, order["email"],
                     f"Refund of {amount} for {order_id} declined",
                     idempotency_key=ctx.idempotency_key("declined", order_id))
            return {"order": order_id, "refunded": False, "amount": amount}
    payment = ctx.step("refund", ex.issue_refund, folder, order_id, amount,
                       idempotency_key=ctx.idempotency_key("refund", order_id))
    ctx.step("email", ex.email_customer, folder, order["email"],
             f"Refund of {amount} for {order_id}",
             idempotency_key=ctx.idempotency_key("email", order_id))
    ctx.sleep(cooling_off)
    ctx.step("close", ex.close_ticket, folder, order["ticket"],
             idempotency_key=ctx.idempotency_key("close", order_id))
    return {"order": order_id, "refunded": True, "refund_id": payment["refund_id"],
            "amount": amount}


def start(engine, folder, order_id, amount, run_id, **options):
    """Start (or continue) the run `run_id`; it returns when the run completes or parks."""
    return engine.start(refund_with_approval, folder, order_id, amount, run_id=run_id, **options)


def approve(engine, run_id, by="ana"):
    """A person approves: the answer is kept in the store until the run takes it."""
    engine.signal(run_id, APPROVAL, {"approved": True, "by": by})


def work(engine):
    """A worker's loop body: durable_lite has no queue; every worker runs what is due."""
    return engine.recover()
