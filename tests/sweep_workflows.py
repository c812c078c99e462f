"""Workflows the sweep tests crash, importable so real-kill children can register them too.

Each takes the world's folder first (the course's convention), like a learner's would.
"""

import os
import time

import durable_lite as dl
from durable_lite import examples as ex


def send_sms(folder, to, text, key=None):
    """A learner's own tool: its effect goes on a ledger of its own, "sms"."""
    return dl.sim.world_at(folder).ledger("sms").record(key=key, detail={"to": to, "text": text})


@dl.workflow("sweep-sms")
def sms_refund(ctx, folder, order_id, amount, sms_key=False):
    """lookup -> refund (keyed, honest provider) -> sms, with or without a key on the sms."""
    order = ctx.step("lookup", ex.lookup_order, folder, order_id)
    paid = ctx.step("refund", ex.issue_refund, folder, order_id, amount,
                    idempotency_key=ctx.idempotency_key("refund", order_id))
    key = ctx.idempotency_key("sms", order_id) if sms_key else None
    ctx.step("sms", send_sms, folder, "+44 7700 900123", f"{amount} refunded", key)
    return {"order": order["id"], "refund_id": paid["refund_id"]}


@dl.workflow("sweep-lost-sms")
def sms_only_when_new(ctx, folder, order_id, amount):
    """A subtle bug: the text goes out only when the provider says the refund is new. After a
    crash in the refund's window, the resumed refund is a repeat, and the text is lost."""
    paid = ctx.step("refund", ex.issue_refund, folder, order_id, amount,
                    idempotency_key=ctx.idempotency_key("refund", order_id))
    if not paid["repeat"]:
        ctx.step("sms", send_sms, folder, "+44 7700 900123", "refunded", ctx.idempotency_key("sms"))
    return {"refund_id": paid["refund_id"]}


@dl.workflow("sweep-two-emails")
def two_emails(ctx, folder, to):
    """The same step name twice: crash points "email" and "email#2"."""
    for subject in ("Received", "Done"):
        ctx.step("email", ex.email_customer, folder, to, subject)
    return "sent"


@dl.workflow("sweep-nap")
def nap(ctx, folder, order_id):
    """A durable sleep between two effects."""
    ctx.step("first", send_sms, folder, "+1", "first", ctx.idempotency_key("first"))
    ctx.sleep(3600, name="nap")
    ctx.step("second", send_sms, folder, "+1", "second", ctx.idempotency_key("second"))
    return "rested"


@dl.workflow("sweep-cleanup")
def with_cleanup(ctx, folder, order_id):
    """A hold released in a `finally:` block. A SIGKILL runs no finally, so no crashed case
    may release the hold in the process that crashed: only the one that finishes the run."""
    try:
        ctx.step("hold", send_sms, folder, "+1", f"hold {order_id}", ctx.idempotency_key("hold"))
        ctx.step("charge", send_sms, folder, "+1", f"charge {order_id}", ctx.idempotency_key("charge"))
    finally:
        ctx.step("release", release, folder, order_id)
    return "charged"


def release(folder, order_id):
    """No key: a release that happens twice shows on its ledger."""
    return dl.sim.world_at(folder).ledger("releases").record(detail={"order": order_id})


@dl.workflow("sweep-uuid-keys")
def uuid_keys(ctx, folder):
    """Each text keyed by a recorded uuid: right, as long as no id minted after a resume
    equals one minted before the crash (a fresh process's uuid4() never does)."""
    keys = []
    for name in ("first", "second"):
        keys.append(ctx.uuid())
        ctx.step(name, send_sms, folder, "+1", name, keys[-1])
    return keys


def slow(seconds):
    time.sleep(seconds)
    return os.getpid()


@dl.workflow("sweep-slow")
def slow_step(ctx, folder, seconds):
    return ctx.step("slow", slow, seconds)
