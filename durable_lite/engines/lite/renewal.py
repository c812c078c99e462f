"""A subscription renewal on durable_lite, for exercise 15 to port to Temporal and LangGraph.

One workflow with every kind of thing a port must carry across: a read, an effect with an
idempotency key and one without, a wait for a person with a deadline, and a branch on what
the wait returned.

    customer -> notice email (no key) -> wait for the customer's reply, with a deadline
             -> reply {"cancel": True}:  cancel the plan (keyed)
             -> otherwise (a reply that keeps the plan, or none in time):
                charge the renewal (keyed) -> receipt email (no key)

The services are the simulated world's, as in exercise 14 (subscription.py):
each takes the world's folder first, so any process (a durable_lite child, a Temporal
worker, a LangGraph worker) talks to the same world, and each accepts an optional
idempotency key, as real providers do. The renewal is charged on the world's own ledger
"charges"; cancellations go to "plans", like exercise 14's.
"""

from ...sim import world_at
from ...workflow import workflow
from .subscription import DAY, PLANS, cancel_plan, lookup_subscription, send_email

CHARGES = "charges"            # the payments provider's ledger of renewal charges
REPLY = "reply"                # the signal (Temporal: the signal's name) the customer answers on
# What a scheduler sends a LangGraph thread whose deadline has passed (LangGraph has no
# timers of its own: something outside must wake a waiting thread; see exercise 15).
WAKE_UP = {"wake up": "the deadline passed"}

__all__ = ["CHARGES", "DAY", "PLANS", "REPLY", "WAKE_UP", "cancel_plan", "charge_renewal",
           "lookup_subscription", "renew_subscription", "send_email"]


def charge_renewal(folder, sub_id, amount, idempotency_key=None):
    """The payments provider charges the renewal; a repeated key returns the first charge."""
    return world_at(folder).ledger(CHARGES).record(
        key=idempotency_key, detail={"subscription": sub_id, "amount": amount})


@workflow("ex15-renew-subscription", version=1)
def renew_subscription(ctx, folder, sub_id, price, deadline=2 * DAY):
    sub = ctx.step("customer", lookup_subscription, folder, sub_id)
    ctx.step("notice", send_email, folder, sub["email"],
             f"{sub_id} renews at {price}: reply within two days to cancel")
    reply = ctx.wait_for_signal(REPLY, timeout=deadline)          # None: no reply in time
    if reply is not None and reply["cancel"]:
        plan = ctx.step("cancel", cancel_plan, folder, sub_id,
                        idempotency_key=ctx.idempotency_key("cancel", sub_id))
        return {"subscription": sub_id, "outcome": "cancelled", "replied": True,
                "cancellation": plan["record_id"]}
    charge = ctx.step("charge", charge_renewal, folder, sub_id, price,
                      idempotency_key=ctx.idempotency_key("charge", sub_id))
    ctx.step("receipt", send_email, folder, sub["email"],
             f"{sub_id} renewed: {price} charged ({charge['record_id']})")
    return {"subscription": sub_id, "outcome": "renewed", "replied": reply is not None,
            "charge": charge["record_id"], "amount": price}
