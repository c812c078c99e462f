"""The refund of lesson 01 on DBOS Transact, beside lite/refund.py line for line.

Checked against DBOS Transact for Python 3.4 (its docs and source): `@DBOS.workflow`,
`@DBOS.step` (here through faults.step, which adds the course's crash points),
`SetWorkflowID` for the run id, `DBOS.recv`/`DBOS.send` with a timeout for the approval,
`DBOS.sleep` for the cooling-off period, and a queue from `DBOS.register_queue`.

`refund` is lesson 01's workflow exactly (lookup -> refund -> email -> close), used by the
parity tests. `refund_with_approval` is the grown-up version of lite/refund.py.
Idempotency keys come from the same function as durable_lite's, fed with DBOS's workflow
id, so both engines send a provider the very same keys for the same run id.
"""

from dbos import DBOS, SetWorkflowID

from ... import examples as ex
from ...keys import derive_key
from .faults import step
from .support import off_the_loop

APPROVAL = "approval"          # the message topic (durable_lite: the signal name)
REFUNDS = "refunds"            # the queue


@step("lookup")
def lookup(folder, order_id):
    return ex.lookup_order(folder, order_id)


@step("refund")
def pay(folder, order_id, amount, idempotency_key=None, careless=False):
    return ex.issue_refund(folder, order_id, amount, idempotency_key=idempotency_key,
                           careless=careless)


@step("email")
def email(folder, to, subject, idempotency_key=None):
    return ex.email_customer(folder, to, subject, idempotency_key=idempotency_key)


@step("close")
def close(folder, ticket, idempotency_key=None):
    return ex.close_ticket(folder, ticket, idempotency_key=idempotency_key)


def idempotency_key(*parts):
    """durable_lite's ctx.idempotency_key on DBOS: the workflow id plays the run id."""
    return derive_key(DBOS.workflow_id, *parts)


@DBOS.workflow(name="refund")
def refund(folder, order_id, amount, use_key=True, careless=False, key_notices=False):
    """Lesson 01's refund, the same options as durable_lite.examples.refund."""
    order = lookup(folder, order_id)
    key = idempotency_key("refund", order_id) if use_key else None
    payment = pay(folder, order_id, amount, key, careless)
    email_key = idempotency_key("email", order_id) if key_notices else None
    email(folder, order["email"], f"Refund of {amount} for {order_id}", email_key)
    close_key = idempotency_key("close", order_id) if key_notices else None
    close(folder, order["ticket"], close_key)
    return {"order": order_id, "refund_id": payment["refund_id"], "amount": amount}


@DBOS.workflow(name="refund_with_approval")
def refund_with_approval(folder, order_id, amount, limit=100,
                         approval_timeout=2 * 86400, cooling_off=3600):
    order = lookup(folder, order_id)
    if amount > limit:
        decision = DBOS.recv(APPROVAL, timeout_seconds=approval_timeout)    # None: too late
        if not decision or not decision.get("approved"):
            email(folder, order["email"], f"Refund of {amount} for {order_id} declined",
                  idempotency_key("declined", order_id))
            return {"order": order_id, "refunded": False, "amount": amount}
    payment = pay(folder, order_id, amount, idempotency_key("refund", order_id))
    email(folder, order["email"], f"Refund of {amount} for {order_id}",
          idempotency_key("email", order_id))
    DBOS.sleep(cooling_off)
    close(folder, order["ticket"], idempotency_key("close", order_id))
    return {"order": order_id, "refunded": True, "refund_id": payment["refund_id"],
            "amount": amount}


# Helpers for starting and steering runs from outside a workflow. `off_the_loop` lets
# them work in a notebook too, where DBOS refuses blocking calls inside Jupyter's loop.
@off_the_loop
def start(folder, order_id, amount, run_id, **options):
    """Start the workflow `run_id` in the background; returns its handle at once."""
    with SetWorkflowID(run_id):
        return DBOS.start_workflow(refund_with_approval, folder, order_id, amount, **options)


@off_the_loop
def wait(handle):
    """Block until the workflow behind `handle` finishes; return its result."""
    return handle.get_result(polling_interval_sec=0.05)


@off_the_loop
def approve(run_id, by="ana"):
    """A person approves: the message waits in the database until the workflow takes it."""
    DBOS.send(run_id, {"approved": True, "by": by}, APPROVAL)


@off_the_loop
def run_refund(folder, order_id, amount, run_id, **options):
    """Lesson 01's refund under the workflow id `run_id`, to the end; returns its result."""
    with SetWorkflowID(run_id):
        return refund(folder, order_id, amount, **options)


@off_the_loop
def register_queue(poll=0.1):
    """Declare the refunds queue (after launch): one refund at a time on each worker, at
    most ten started a minute across all workers."""
    return DBOS.register_queue(REFUNDS, worker_concurrency=1,
                               limiter={"limit": 10, "period": 60}, polling_interval_sec=poll)


@off_the_loop
def enqueue(folder, order_id, amount, run_id, **options):
    """Put a refund on the queue; a worker with room starts it. Returns its handle."""
    with SetWorkflowID(run_id):
        return DBOS.enqueue_workflow(REFUNDS, refund_with_approval, folder, order_id, amount,
                                     **options)
