"""A refund that waits for an approval, in the three editions of its code a deploy day sees.

    original:  lookup -> ask -> wait "approval" -> refund -> email
    naive:     the same, with a fraud check edited in before "ask" (no gate)
    gated:     the fraud check behind ctx.patched("fraud-check")

`deploy(edition)` registers one of them as version 1 of "vx-approval". Importing the module
deploys "gated", the code a fresh process runs after the deploy, so a child process started
with `run_in_child(..., "versioning_workflows", "vx-approval", ...)` runs that. Every effect
goes to the simulated world in `folder`, with a key derived from the run id.
"""

import durable_lite as dl
from durable_lite.sim import world_at

NAME = "vx-approval"
APPROVER = "approver@example.com"
DAY = 24 * 3600
FRAUD = "fraud-checks"             # the world's ledger of fraud checks run


def lookup(folder, order_id):
    return world_at(folder).orders.lookup(order_id)


def fraud_check(folder, order_id, key):
    record = world_at(folder).ledger(FRAUD).record(key=key, detail={"order": order_id})
    return {"order": order_id, "score": 0.1, "check": record["record_id"]}


def ask(folder, order_id, amount, key):
    return world_at(folder).mailer.send(APPROVER, f"Approve {amount} for {order_id}?",
                                        idempotency_key=key)


def pay(folder, order_id, amount, key):
    return world_at(folder).payments.refund(order_id, amount, idempotency_key=key)


def tell(folder, to, text, key):
    return world_at(folder).mailer.send(to, text, idempotency_key=key)


def _finish(ctx, folder, order, order_id, amount, fraud):
    decision = ctx.wait_for_signal("approval", timeout=3 * DAY)
    if not decision:
        return {"order": order_id, "outcome": "not approved", "fraud": fraud}
    payment = ctx.step("refund", pay, folder, order_id, amount, ctx.idempotency_key("refund", order_id))
    ctx.step("email", tell, folder, order["email"], f"{amount} refunded",
             ctx.idempotency_key("email", order_id))
    return {"order": order_id, "outcome": "refunded", "refund_id": payment["refund_id"],
            "fraud": fraud}


def original(ctx, folder, order_id, amount):
    order = ctx.step("lookup", lookup, folder, order_id)
    ctx.step("ask", ask, folder, order_id, amount, ctx.idempotency_key("ask", order_id))
    return _finish(ctx, folder, order, order_id, amount, None)


def naive(ctx, folder, order_id, amount):
    order = ctx.step("lookup", lookup, folder, order_id)
    fraud = ctx.step("fraud-check", fraud_check, folder, order_id, ctx.idempotency_key("fraud", order_id))
    ctx.step("ask", ask, folder, order_id, amount, ctx.idempotency_key("ask", order_id))
    return _finish(ctx, folder, order, order_id, amount, fraud["score"])


def gated(ctx, folder, order_id, amount):
    order = ctx.step("lookup", lookup, folder, order_id)
    fraud = None
    if ctx.patched("fraud-check"):
        fraud = ctx.step("fraud-check", fraud_check, folder, order_id,
                         ctx.idempotency_key("fraud", order_id))["score"]
    ctx.step("ask", ask, folder, order_id, amount, ctx.idempotency_key("ask", order_id))
    return _finish(ctx, folder, order, order_id, amount, fraud)


def deprecated(ctx, folder, order_id, amount):
    """The gated code once no unfinished run takes the old branch."""
    order = ctx.step("lookup", lookup, folder, order_id)
    ctx.deprecate_patch("fraud-check")
    fraud = ctx.step("fraud-check", fraud_check, folder, order_id, ctx.idempotency_key("fraud", order_id))
    ctx.step("ask", ask, folder, order_id, amount, ctx.idempotency_key("ask", order_id))
    return _finish(ctx, folder, order, order_id, amount, fraud["score"])


EDITIONS = {"original": original, "naive": naive, "gated": gated, "deprecated": deprecated}


def deploy(edition):
    """Make `edition` the code of vx-approval v1 in this process (as a deploy would)."""
    return dl.workflow(NAME, version=1)(EDITIONS[edition])


deploy("gated")
