"""Two things Temporal does that durable_lite does not, as workflows you can run.

1. Activities are retried by default. A failed or timed-out activity is tried again, with
   backoff, with no limit on attempts, unless its retry policy says otherwise. `Notify`
   sends one email through `send_then_fail`, a mail server that sends and then reports a
   timeout on its first `fail_times` attempts (a real pattern: the effect happened, the
   answer was lost). Without a key, every retry is another email in the customer's inbox;
   durable_lite runs the same step once and stops the run (dl.Retry would retry it, and
   send the same extra emails).

2. Workflow code runs in a sandbox. A Temporal worker replays a run's history through the
   workflow's code whenever it needs the run's state again, so that code must make the
   same decisions every time. The Python SDK enforces it: the workflow's module is
   re-imported in a sandbox that refuses the wall clock, random numbers, the environment
   and file I/O. A refused call fails the workflow task, which the server retries until
   the code is fixed; the run stays open meanwhile. `REFUSED` lists one workflow per kind;
   `Deterministic` uses the SDK's replay-safe versions (workflow.now(), workflow.random(),
   workflow.uuid4()) and runs. durable_lite replays the same way but only asks for it
   (lesson 04's ctx.now(), ctx.random()): nothing stops a workflow from calling time.time().
"""

import datetime
import os
import random
import time

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ...sim import ToolError, world_at
    from .faults import activity, step

ATTEMPTS = "mail attempts"      # a ledger of the world: one record per call of the mail server


# 1. retries by default -------------------------------------------------------------------
def send_then_fail(folder, to, subject, fail_times, idempotency_key=None) -> dict:
    """The mail server sends, then times out on its first `fail_times` calls (counted in
    the world's "mail attempts" ledger, so every engine and process sees the same count)."""
    world = world_at(folder)
    attempt = world.ledger(ATTEMPTS).count() + 1
    world.ledger(ATTEMPTS).record(detail={"attempt": attempt})
    sent = world.mailer.send(to, subject, idempotency_key=idempotency_key)
    if attempt <= fail_times:
        raise ToolError(f"the mail server timed out after sending (call {attempt})")
    return sent


@activity("notify")
def notify_activity(folder: str, to: str, subject: str, fail_times: int,
                    idempotency_key=None) -> dict:
    return send_then_fail(folder, to, subject, fail_times, idempotency_key)


@workflow.defn(name="notify")
class Notify:
    """One email, through a mail server that fails after sending; keyed or not."""

    @workflow.run
    async def run(self, folder: str, to: str, fail_times: int, keyed: bool) -> dict:
        key = f"{workflow.info().workflow_id}:notify" if keyed else None
        return await step("notify", folder, to, "Your refund is on its way", fail_times, key)


# 2. the sandbox ----------------------------------------------------------------------------
@workflow.defn(name="reads_the_clock")
class ReadsTheClock:
    @workflow.run
    async def run(self) -> float:
        return time.time()


@workflow.defn(name="reads_the_date")
class ReadsTheDate:
    @workflow.run
    async def run(self) -> str:
        return datetime.datetime.now().isoformat()


@workflow.defn(name="draws_a_random_number")
class DrawsARandomNumber:
    @workflow.run
    async def run(self) -> float:
        return random.random()


@workflow.defn(name="reads_a_file")
class ReadsAFile:
    @workflow.run
    async def run(self, path: str) -> str:
        with open(path, encoding="utf-8") as f:
            return f.read()


@workflow.defn(name="reads_the_environment")
class ReadsTheEnvironment:
    @workflow.run
    async def run(self) -> str:
        return os.environ.get("HOME", "")


@workflow.defn(name="deterministic")
class Deterministic:
    """The replay-safe versions: the same values on every replay of this run."""

    @workflow.run
    async def run(self) -> dict:
        return {"now": workflow.now().isoformat(), "random": workflow.random().random(),
                "uuid": str(workflow.uuid4())}


# (workflow name, what its code does, the call the sandbox refuses)
REFUSED = [("reads_the_clock", "time.time()", "time.time"),
           ("reads_the_date", "datetime.datetime.now()", "datetime.datetime.now"),
           ("draws_a_random_number", "random.random()", "random.random"),
           ("reads_a_file", "open(path)", "__builtins__.open"),
           ("reads_the_environment", "os.environ.get('HOME')", "os.environ.get")]


def sandbox_refusals(address, path) -> list:
    """Start every workflow of REFUSED, and Deterministic, on a worker of their own; give
    each a few seconds, then say what happened to it: one row per workflow (its code, its
    status, and the first words of the error its workflow task failed with, if any). `path`
    is a file the file-reading workflow tries to open."""
    from . import support as temporal_support
    from .worker import start_worker
    play = os.urandom(3).hex()
    runs = [(name, code, [path] if name == "reads_a_file" else [])
            for name, code, _ in REFUSED] + [("deterministic", "workflow.now(), ...", [])]
    worker = start_worker(address, "sandbox", task_queue=f"sandbox-{play}", timeout=5,
                          start=[(name, f"{name}-{play}", args, {}) for name, _, args in runs])
    try:
        worker.result()
    finally:
        worker.kill()
    rows = []
    for name, code, _ in runs:
        failures = [e["about"] for e in temporal_support.events(address, f"{name}-{play}")
                    if e["type"] == "WorkflowTaskFailed"]
        rows.append({"workflow": name, "its code": code,
                     "status": temporal_support.status(address, f"{name}-{play}"),
                     "refused": failures[0].split(" from inside")[0] if failures else ""})
    return rows
