"""Two Temporal workers on one server, and what happens when one of them dies mid-refund.

    observed = machines.run(server.address, folder)

1. "machine-a" starts the refund A-17 and stops inside the refund activity, after the
   money moved and before it returned its result.
2. Machine A is killed there with SIGKILL. Nobody tells the server. Then "machine-b",
   another process, starts polling the same task queue (only now: any worker on the queue
   may take any task, and a machine B polling all along could take the refund's retry
   while a slow machine A still held it). The server notices A's death when the attempt's
   start-to-close timeout runs out (faults.STEP_TIMEOUT), and, by the activity's
   retry policy, schedules attempt 2 on the task queue, where machine B takes it; the
   workflow's next tasks go to machine B too.
3. Machine B finishes the run without anyone restarting machine A. The refund activity ran
   twice; the provider's idempotency key turned the second request into the first one's
   receipt.

Every step is read from the server's history and the simulated world's ledgers, never from
the workers' word (a killed worker has none). `recovery_seconds` is the time from the kill
to the run's end. Each call plays the story afresh (its own workflow id, task queue and
world), so a lesson cell can be run again.
"""

import os
import time

from . import support as temporal_support
from .worker import HoldAt, start_worker
from ...examples import world_at

ORDER, AMOUNT = "A-17", 40


def run(address, folder, order=ORDER, amount=AMOUNT) -> dict:
    """Play the story above on the server at `address`; return what was observed."""
    play = os.urandom(3).hex()
    workflow_id, queue = f"refund-{order}-{play}", f"machines-{play}"
    folder = os.path.join(folder, f"play-{play}")
    workers = []
    try:
        machine_a = start_worker(address, "machine-a", task_queue=queue,
                                 hold=HoldAt("refund", "after_effect"),
                                 start=[("refund", workflow_id,
                                         [folder, order, amount, True, False, True], {})])
        workers.append(machine_a)
        machine_a.wait_until_held()          # the money has moved; the server has not heard
        killed_at = time.monotonic()
        machine_a.kill()
        after_kill = {"status": temporal_support.status(address, workflow_id),
                      "recorded": temporal_support.completed_steps(address, workflow_id),
                      "paid": world_at(folder).payments.count(order)}
        machine_b = start_worker(address, "machine-b", task_queue=queue, wait_for=[workflow_id])
        workers.append(machine_b)
        report = machine_b.result()[workflow_id]
        recovery_seconds = time.monotonic() - killed_at
        world = world_at(folder)
        return {
            "workflow_id": workflow_id,
            "machine_a_killed": machine_a.killed,
            "after_kill": after_kill,
            "after_takeover": {"status": temporal_support.status_word(report["status"]),
                               "result": report["result"]},
            "history": temporal_support.history(address, workflow_id),
            "recovery_seconds": recovery_seconds,
            "ledger": {"refunds paid": world.payments.count(order),
                       "refund requests": world.payments.calls(),
                       "emails sent": world.mailer.count(),
                       "tickets closed": world.tickets.closes()},
        }
    finally:
        for worker in workers:
            worker.kill()
