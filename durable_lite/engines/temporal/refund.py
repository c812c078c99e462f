"""The refund of lesson 01, and the approval of lesson 07, on Temporal.

Checked against the Temporal Python SDK (temporalio 1.35: its docs and source):

- a workflow is a class: `@workflow.defn` on it, `@workflow.run` on its async entry point;
- a step is an activity: a plain function with `@activity.defn` (here through
  faults.activity, which adds the course's crash point inside it), called from the
  workflow with `workflow.execute_activity` (here through faults.step, which adds
  the other two and the course's timeouts and retry policy);
- the run id is the workflow id; the idempotency keys come from the same function as
  durable_lite's, fed with it, so every engine sends a provider the very same keys;
- the approval is a signal, awaited with `workflow.wait_condition(..., timeout=...)`;
  the cooling-off period is a durable timer, `workflow.sleep`.

A Temporal worker runs this module's workflow code inside a sandbox that re-imports the
module, so everything it imports from durable_lite is passed through (imported once, not
per run), and nothing at module level starts anything.
"""

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ... import examples as ex
    from ...keys import derive_key
    from .faults import activity, step

APPROVAL = "approval"          # the signal (durable_lite: the signal name; DBOS: the topic)


# the activities: the same service calls as durable_lite.examples --------------------------
@activity("lookup")
def lookup(folder: str, order_id: str) -> dict:
    return ex.lookup_order(folder, order_id)


@activity("refund")
def pay(folder: str, order_id: str, amount: int, idempotency_key=None, careless=False) -> dict:
    return ex.issue_refund(folder, order_id, amount, idempotency_key=idempotency_key,
                           careless=careless)


@activity("email")
def email(folder: str, to: str, subject: str, idempotency_key=None) -> dict:
    return ex.email_customer(folder, to, subject, idempotency_key=idempotency_key)


@activity("close")
def close(folder: str, ticket: str, idempotency_key=None) -> dict:
    return ex.close_ticket(folder, ticket, idempotency_key=idempotency_key)


ACTIVITIES = [lookup, pay, email, close]


def idempotency_key(*parts) -> str:
    """durable_lite's ctx.idempotency_key on Temporal: the workflow id plays the run id."""
    return derive_key(workflow.info().workflow_id, *parts)


# lesson 01's refund ----------------------------------------------------------------------
@workflow.defn(name="refund")
class Refund:
    """Lesson 01's refund, the same options as durable_lite.examples.refund."""

    @workflow.run
    async def run(self, folder: str, order_id: str, amount: int, use_key: bool = True,
                  careless: bool = False, key_notices: bool = False) -> dict:
        order = await step("lookup", folder, order_id)
        key = idempotency_key("refund", order_id) if use_key else None
        payment = await step("refund", folder, order_id, amount, key, careless)
        email_key = idempotency_key("email", order_id) if key_notices else None
        await step("email", folder, order["email"], f"Refund of {amount} for {order_id}",
                   email_key)
        close_key = idempotency_key("close", order_id) if key_notices else None
        await step("close", folder, order["ticket"], close_key)
        return {"order": order_id, "refund_id": payment["refund_id"], "amount": amount}


# lesson 07's approval with a deadline, and a cooling-off timer ---------------------------
@workflow.defn(name="refund_with_approval")
class RefundWithApproval:
    def __init__(self):
        self.decision = None

    @workflow.signal(name=APPROVAL)
    def approval(self, decision: dict) -> None:
        """A person's answer: kept in the workflow's state, even if it comes before the wait."""
        self.decision = decision

    @workflow.run
    async def run(self, folder: str, order_id: str, amount: int, limit: int = 100,
                  approval_timeout: float = 2 * 86400, cooling_off: float = 3600) -> dict:
        order = await step("lookup", folder, order_id)
        if amount > limit:
            try:
                await workflow.wait_condition(lambda: self.decision is not None,
                                              timeout=approval_timeout,
                                              timeout_summary="approval deadline")
            except asyncio.TimeoutError:        # nobody answered in time
                pass
            if not self.decision or not self.decision.get("approved"):
                await step("email", folder, order["email"],
                           f"Refund of {amount} for {order_id} declined",
                           idempotency_key("declined", order_id))
                return {"order": order_id, "refunded": False, "amount": amount}
        payment = await step("refund", folder, order_id, amount,
                             idempotency_key("refund", order_id))
        await step("email", folder, order["email"], f"Refund of {amount} for {order_id}",
                   idempotency_key("email", order_id))
        await workflow.sleep(cooling_off, summary="cooling off")        # a durable timer
        await step("close", folder, order["ticket"], idempotency_key("close", order_id))
        return {"order": order_id, "refunded": True, "refund_id": payment["refund_id"],
                "amount": amount}


WORKFLOWS = [Refund, RefundWithApproval]
