"""Lesson 10's long, lumpy run: a support agent whose one run takes two days and three workers.

    support_agent(ctx, folder, order_id, amount, crm_failures=4, history_words=2400)

    classify      a cheap model call: what is this ticket about?
    lookup_order  the CRM, which times out `crm_failures` times before it answers
                  (retried with backoff 1, 2, 4, 8 s ...)
    draft_reply   an expensive model call: the customer's whole history goes into the prompt
    approval      a manager must approve the refund (the run waits up to three days)
    refund        the payment, with an idempotency key
    send_reply    the email, with a key
    close_ticket  the ticket desk, with a key

The simulated world answers instantly, so on a FakeClock every step would take no time at
all. Here each call *spends* simulated time instead: after `use_clock(folder, clock)`, every
call into the world moves that FakeClock on by the call's latency (a model call by its
tokens), so a trace of the run has durations worth looking at. On a real clock nothing
is moved.

`resume_in_worker(...)` resumes a run in a fresh Python process that has its own FakeClock
and worker name, and can SIGKILL that process at a crash point: a worker that really dies,
on a clock the lesson controls.
"""

import functools
import json
import os
import signal
import sys
from dataclasses import dataclass
from typing import Optional

from .clock import FakeClock
from .examples import world_at
from .policy import Retry, Step
from .workflow import workflow

DAY = 86400.0
MODELS = {"small": "fake-small", "large": "fake-large"}
PROVIDER = "durable_lite.sim"          # gen_ai.provider.name of the fake model

# Simulated latencies, in seconds.
CRM_CALL = 0.25
PAYMENT_CALL = 0.4
MAIL_CALL = 0.15
DESK_CALL = 0.1

_clocks = {}


def use_clock(folder, clock) -> None:
    """Make every call into the world at `folder` (in this process) spend time on `clock`."""
    _clocks[os.fspath(folder)] = clock


def _spend(folder, seconds):
    clock = _clocks.get(os.fspath(folder))
    if isinstance(clock, FakeClock):
        clock.advance(seconds)


# the steps --------------------------------------------------------------------------------
def chat(folder, size, prompt):
    """One model call. The fake model reports one token total; the prompt's words are its
    input tokens (it counts them that way), the rest is output. Slower for more tokens."""
    answer = world_at(folder).llm.complete(prompt)
    input_tokens = len(prompt.split())
    output_tokens = answer["tokens"] - input_tokens
    per_output_token = 0.01 if size == "small" else 0.03
    _spend(folder, 0.3 + input_tokens / 4000 + output_tokens * per_output_token)
    return {"text": answer["text"], "model": MODELS[size], "provider": PROVIDER,
            "input_tokens": input_tokens, "output_tokens": output_tokens,
            "tokens": answer["tokens"], "cost": answer["cost"]}


def lookup_order(folder, order_id, crm_failures):
    _spend(folder, CRM_CALL)
    crm = world_at(folder, fail_first=(("crm", crm_failures),)).tools
    crm.call("crm", order_id)                # raises ToolError on its first `crm_failures` calls
    return world_at(folder).orders.lookup(order_id)


def refund(folder, order_id, amount, idempotency_key):
    _spend(folder, PAYMENT_CALL)
    return world_at(folder).payments.refund(order_id, amount, idempotency_key=idempotency_key)


def send_reply(folder, to, text, idempotency_key):
    _spend(folder, MAIL_CALL)
    return world_at(folder).mailer.send(to, "About your order", text, idempotency_key=idempotency_key)


def close_ticket(folder, ticket, idempotency_key):
    _spend(folder, DESK_CALL)
    return world_at(folder).tickets.close(ticket, idempotency_key=idempotency_key)


@functools.lru_cache(maxsize=256)      # a long text, built again for every draft otherwise
def customer_history(order_id, words) -> str:
    """The customer's earlier messages: `words` words of them, the same every time."""
    vocabulary = ("parcel arrived damaged again box crushed the order late refund please "
                  "tracking number support agent said replacement never came").split()
    return " ".join(vocabulary[(i * 7 + len(order_id)) % len(vocabulary)] for i in range(words))


def _dollars(answer):
    return answer["cost"]


@workflow("support-agent", version=1)
def support_agent(ctx, folder, order_id, amount, crm_failures=4, history_words=2400):
    topic = ctx.step(Step("classify", cost=_dollars), chat, folder, "small",
                     f"Classify this support ticket about order {order_id} in one word.")
    order = ctx.step(Step("lookup_order", retry=Retry(max_attempts=8, initial=1.0, jitter=False)),
                     lookup_order, folder, order_id, crm_failures)
    draft = ctx.step(Step("draft_reply", cost=_dollars), chat, folder, "large",
                     f"Topic: {topic['text']}. Order: {order}. Draft a reply offering a refund "
                     f"of {amount}. The customer's history: "
                     + customer_history(order_id, history_words))
    decision = ctx.wait_for_signal("approval", timeout=3 * DAY)
    if not decision or not decision.get("approved"):
        ctx.step("close_ticket", close_ticket, folder, order["ticket"],
                 ctx.idempotency_key("close", order_id))
        return {"order": order_id, "refunded": 0}
    payment = ctx.step("refund", refund, folder, order_id, amount,
                       ctx.idempotency_key("refund", order_id))
    ctx.step("send_reply", send_reply, folder, order["email"], draft["text"],
             ctx.idempotency_key("reply", order_id))
    ctx.step("close_ticket", close_ticket, folder, order["ticket"],
             ctx.idempotency_key("close", order_id))
    return {"order": order_id, "refunded": amount, "refund_id": payment["refund_id"]}


# a worker that really dies -------------------------------------------------------------------
@dataclass(frozen=True)
class WorkerExit:
    returncode: int
    run: Optional[dict]            # what the worker reported, if it lived to report

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def resume_in_worker(store_path, folder, run_id: str, *, worker: str, at: float,
                     kill_at=None, timeout: float = 60.0) -> WorkerExit:
    """Resume `run_id` in a fresh Python process named `worker`, on a FakeClock set to `at`.

    kill_at: a `faults.CrashAt` (its `kill` is implied): the process SIGKILLs itself there.
    """
    import subprocess  # only needed here; kept out of `import durable_lite`

    spec = {"store": os.fspath(store_path), "folder": os.fspath(folder), "run_id": run_id,
            "worker": worker, "at": at,
            "kill_at": None if kill_at is None else [kill_at.step, kill_at.when, kill_at.occurrence]}
    child = "import sys; from durable_lite.lumpy import _worker_main; _worker_main(sys.argv[1])"
    proc = subprocess.run([sys.executable, "-c", child, json.dumps(spec)],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(f"worker {worker} resuming run {run_id!r} failed (exit "
                           f"{proc.returncode}):\n{proc.stderr[-2000:]}")
    report = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("RUN ")]
    return WorkerExit(proc.returncode, report[-1] if report else None)


def _worker_main(spec_json: str):
    from .engine import Engine
    from .faults import CrashAt
    from .store import SQLiteStore

    spec = json.loads(spec_json)
    clock = FakeClock(spec["at"])
    use_clock(spec["folder"], clock)
    crash = None if spec["kill_at"] is None else CrashAt(*spec["kill_at"], kill=True)
    engine = Engine(SQLiteStore(spec["store"]), clock, worker=spec["worker"], crash_at=crash)
    run = engine.resume(spec["run_id"])
    print("RUN " + json.dumps({"status": run.status, "executed": run.executed,
                               "replayed": run.replayed}))
