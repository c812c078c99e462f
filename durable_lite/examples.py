"""The course's two running examples, importable so a fresh process can resume them.

A notebook can define workflows in cells, but a child process that is killed and a fresh
one that resumes need to import the code. These workflows take the world's folder as their
first argument, so every process talks to the same simulated bank, mailer and desk.

refund:   lookup -> refund -> email -> close        (the chapter's support-agent story)
research: retrieval -> extraction (+ email) -> drafting -> deliver
          (the review's companion script: drafting fails on its first call)
approved-refund: lookup -> wait for "approval" -> refund -> email
          (a refund a person must approve; escalated when nobody answers in time)
"""

from .sim import _worlds, world_at  # noqa: F401  (the shared cache, under its old address too)
from .workflow import workflow


# refund -----------------------------------------------------------------------------------
def lookup_order(folder, order_id):
    return world_at(folder).orders.lookup(order_id)


def issue_refund(folder, order_id, amount, idempotency_key=None, careless=False):
    world = world_at(folder)
    provider = world.careless if careless else world.payments
    return provider.refund(order_id, amount, idempotency_key=idempotency_key)


def email_customer(folder, to, subject, idempotency_key=None):
    return world_at(folder).mailer.send(to, subject, idempotency_key=idempotency_key)


def close_ticket(folder, ticket, idempotency_key=None):
    return world_at(folder).tickets.close(ticket, idempotency_key=idempotency_key)


REFUND_STEPS = ("lookup", "refund", "email", "close")


@workflow("refund", version=1)
def refund(ctx, folder, order_id, amount, use_key=True, careless=False, key_notices=False):
    """Refund an order, tell the customer, close their ticket.

    use_key:     pass an idempotency key to the payments provider.
    careless:    use the provider that ignores keys.
    key_notices: also pass keys to the mailer and the ticket desk, closing the
                 crash window for every side effect, not only for the money.
    """
    order = ctx.step("lookup", lookup_order, folder, order_id)
    key = ctx.idempotency_key("refund", order_id) if use_key else None
    payment = ctx.step("refund", issue_refund, folder, order_id, amount,
                       idempotency_key=key, careless=careless)
    email_key = ctx.idempotency_key("email", order_id) if key_notices else None
    ctx.step("email", email_customer, folder, order["email"], f"Refund of {amount} for {order_id}",
             idempotency_key=email_key)
    close_key = ctx.idempotency_key("close", order_id) if key_notices else None
    ctx.step("close", close_ticket, folder, order["ticket"], idempotency_key=close_key)
    return {"order": order_id, "refund_id": payment["refund_id"], "amount": amount}


# research ---------------------------------------------------------------------------------
def research_world(folder):
    """The research world: drafting fails on its very first call, like the source script."""
    return world_at(folder, fail_first=(("drafting", 1),))


def research_tool(folder, name, payload=None):
    return research_world(folder).tools.call(name, payload)


def extract_and_notify(folder, docs, to):
    """Extraction has a side effect: it emails the stakeholder that extraction is done."""
    world = research_world(folder)
    out = world.tools.call("extraction", docs["output"])
    world.mailer.send(to, "Extraction finished")
    return out


def draft(folder, facts, nonce):
    world = research_world(folder)
    world.tools.call("drafting", facts["output"])
    return world.llm.complete(f"Draft a report from {facts['output']}", nonce=nonce)


@workflow("research", version=1)
def research(ctx, folder, topic, to="team@example.com", nonce=1):
    docs = ctx.step("retrieval", research_tool, folder, "retrieval", topic)
    facts = ctx.step("extraction", extract_and_notify, folder, docs, to)
    report = ctx.step("drafting", draft, folder, facts, nonce)
    ctx.step("deliver", research_tool, folder, "deliver", report["text"])
    return {"topic": topic, "draft": report["text"]}


# approval: a refund that waits for a human ------------------------------------------------
def notify(folder, to, subject, idempotency_key=None):
    return world_at(folder).mailer.send(to, subject, idempotency_key=idempotency_key)


@workflow("approved-refund", version=1)
def approved_refund(ctx, folder, order_id, amount, hours=48, use_key=True):
    """Refund only once a person approves; escalate if nobody answers within `hours`.

    lookup -> wait for "approval" -> refund -> email (or, past the deadline: escalate).
    The approval is a signal: `engine.signal(run_id, "approval", {"approved": True})`.
    """
    order = ctx.step("lookup", lookup_order, folder, order_id)
    decision = ctx.wait_for_signal("approval", timeout=hours * 3600)
    if decision is None:
        ctx.step("escalate", notify, folder, "support-leads@example.com",
                 f"Refund {order_id} waited {hours} h for a decision")
        return {"order": order_id, "outcome": "escalated"}
    if isinstance(decision, dict) and not decision.get("approved", True):
        ctx.step("decline", notify, folder, order["email"], f"Refund for {order_id} declined")
        return {"order": order_id, "outcome": "declined"}
    key = ctx.idempotency_key("refund", order_id) if use_key else None
    payment = ctx.step("refund", issue_refund, folder, order_id, amount, idempotency_key=key,
                       careless=not use_key)
    ctx.step("email", email_customer, folder, order["email"], f"Refund of {amount} for {order_id}")
    return {"order": order_id, "outcome": "refunded", "refund_id": payment["refund_id"]}
