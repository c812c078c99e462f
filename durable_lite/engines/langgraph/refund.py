"""The refund of lesson 01 on LangGraph's functional API, beside lite/refund.py.

Checked against langgraph 1.2 (its docs and source): `@entrypoint` for the workflow,
`@task` for each effect (here through faults.step, which adds the course's
crash points), the thread id for the run id, `interrupt()` for the approval and
`Command(resume=...)` to answer it, `RetryPolicy` for a task that may be retried.

`refund` is lesson 01's workflow exactly (lookup -> refund -> email -> close), used by the
parity tests. `refund_with_approval` is the grown-up version of lite/refund.py:
over a limit a person must approve before a deadline, and the ticket closes after a
cooling-off period. Idempotency keys come from durable_lite's own key function, fed with
the thread id, so both engines send a provider the very same keys for the same run id.

LangGraph has no durable timer: `interrupt()` waits for an answer for ever. So a deadline
is data here. The workflow reads the clock once, in a task (a resume gets the same
reading), and puts the due time into its interrupt; `wake_due` is the timer you write
yourself, a sweep that answers every interrupt whose time has come. Until something runs
it, a thread past its deadline just waits. Whatever answer comes, the workflow reads the
clock again and declines one that came too late (a late click, or the sweep itself).
The cooling-off "sleep" is the same: an interrupt with a due time, woken by the sweep.
"""

import time

from langgraph.config import get_config
from langgraph.func import entrypoint
from langgraph.types import Command, RetryPolicy, interrupt

from ... import examples as ex
from ...keys import derive_key
from . import support as langgraph_support
from .faults import step

APPROVAL = "approval"          # what the first interrupt waits for (durable_lite: the signal)
COOLING_OFF = "cooling off"    # what the second waits for (durable_lite: ctx.sleep)
_clock = {"now": time.time}    # wall-clock time by default; set_clock swaps in a FakeClock


@step("lookup", retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.1))
def lookup(folder, order_id):
    return ex.lookup_order(folder, order_id)        # a read: safe to retry


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


@step("clock")
def read_clock():
    """The time, read once and saved: a resume replays the same reading."""
    return _clock["now"]()


def idempotency_key(*parts):
    """durable_lite's ctx.idempotency_key on LangGraph: the thread id plays the run id."""
    return derive_key(get_config()["configurable"]["thread_id"], *parts)


@entrypoint()
def refund(inputs):
    """Lesson 01's refund. An entrypoint takes one input, so the arguments come in a dict:
    folder, order_id, amount, and the options of durable_lite.examples.refund (use_key,
    careless, key_notices)."""
    folder, order_id, amount = inputs["folder"], inputs["order_id"], inputs["amount"]
    order = lookup(folder, order_id).result()
    key = idempotency_key("refund", order_id) if inputs.get("use_key", True) else None
    payment = pay(folder, order_id, amount, key, inputs.get("careless", False)).result()
    email_key = idempotency_key("email", order_id) if inputs.get("key_notices") else None
    email(folder, order["email"], f"Refund of {amount} for {order_id}", email_key).result()
    close_key = idempotency_key("close", order_id) if inputs.get("key_notices") else None
    close(folder, order["ticket"], close_key).result()
    return {"order": order_id, "refund_id": payment["refund_id"], "amount": amount}


@entrypoint()
def refund_with_approval(inputs):
    """inputs: folder, order_id, amount, and optionally limit (100), approval_timeout
    (2 days) and cooling_off (an hour), in seconds."""
    folder, order_id, amount = inputs["folder"], inputs["order_id"], inputs["amount"]
    approval_timeout = inputs.get("approval_timeout", 2 * 86400)
    order = lookup(folder, order_id).result()
    if amount > inputs.get("limit", 100):
        deadline = read_clock().result() + approval_timeout
        answer = interrupt({"waiting for": APPROVAL, "due": deadline})
        in_time = read_clock().result() <= deadline     # a late click, or wake_due itself
        if not (in_time and answer.get("approved")):
            email(folder, order["email"], f"Refund of {amount} for {order_id} declined",
                  idempotency_key("declined", order_id)).result()
            return {"order": order_id, "refunded": False, "amount": amount}
    payment = pay(folder, order_id, amount, idempotency_key("refund", order_id)).result()
    email(folder, order["email"], f"Refund of {amount} for {order_id}",
          idempotency_key("email", order_id)).result()
    wake_at = read_clock().result() + inputs.get("cooling_off", 3600)
    interrupt({"waiting for": COOLING_OFF, "due": wake_at})     # a "sleep": wake_due ends it
    close(folder, order["ticket"], idempotency_key("close", order_id)).result()
    return {"order": order_id, "refunded": True, "refund_id": payment["refund_id"],
            "amount": amount}


# Helpers for starting and steering runs from outside a workflow. `workflow` is an
# entrypoint above bound to a checkpointer (support.bind).
def start(workflow, folder, order_id, amount, run_id, durability="sync", **options):
    """Start the thread `run_id`; returns when it completes or reaches an interrupt."""
    inputs = {"folder": folder, "order_id": order_id, "amount": amount, **options}
    return workflow.invoke(inputs, langgraph_support.config(run_id), durability=durability)


def approve(workflow, run_id, by="ana", durability="sync"):
    """A person approves. `Command(resume=...)` answers whatever interrupt the thread is
    at, so this checks first that it is the approval (else a second click would end the
    cooling-off period instead)."""
    waiting_for = (langgraph_support.waiting(workflow).get(run_id) or {}).get("waiting for")
    if waiting_for != APPROVAL:
        raise ValueError(f"run {run_id!r} is not waiting for an approval "
                         f"(it is waiting for {waiting_for!r})")
    return workflow.invoke(Command(resume={"approved": True, "by": by}),
                           langgraph_support.config(run_id), durability=durability)


def wake_due(workflow, now=None, durability="sync") -> list:
    """The timer LangGraph does not have: answer every interrupt whose due time has come
    (for the approval: nobody answered in time). Run it from a scheduler (cron, a loop);
    returns the thread ids it woke. The answer is a dict, not None: langgraph 1.2 fails on
    Command(resume=None)."""
    now = _clock["now"]() if now is None else now
    woke = []
    for thread_id, value in langgraph_support.waiting(workflow).items():
        if isinstance(value, dict) and value.get("due", float("inf")) <= now:
            workflow.invoke(Command(resume={"woken at": now}),
                            langgraph_support.config(thread_id), durability=durability)
            woke.append(thread_id)
    return woke


def set_clock(clock):
    """Read time from `clock` (any callable returning seconds, e.g. dl.FakeClock()) in this
    process; returns the clock it replaces."""
    previous, _clock["now"] = _clock["now"], clock
    return previous
