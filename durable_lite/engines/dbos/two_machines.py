"""Two DBOS workers on one Postgres, and what happens when one of them dies mid-refund.

    observed = two_machines.run(pg.url, folder)

1. "machine-a" and "machine-b" start, each a process with its own executor id, each with
   a refund of its own (A-17 on machine A, B-42 on machine B).
2. Machine A stops inside the refund step, after the money moved and before DBOS recorded
   it, and is killed there with SIGKILL.
3. Machine B (started once A is stuck, so refunds are numbered the same way every run)
   finishes its own refund and stays up, watching, for `watch` seconds. The run
   A-17 stays PENDING and owned by machine-a: DBOS hands a dead executor's workflows to
   another one only when told to (DBOS Conductor, the hosted control plane, does that after
   an executor timeout), not by itself.
4. Machine B goes home; machine A comes back with the same executor id. At launch DBOS looks for PENDING
   workflows of that executor and puts them back on its internal queue, where any live
   worker may take them; the refund step runs again, and the provider's idempotency key
   turns the second payment request into the first one's receipt.

Every step of the story is read from the database and the simulated world's ledgers, never
from the workers' own word (a killed worker has none).

Each call is a fresh play of the story: on a database where it was played before (a lesson
cell run again), the runs get new workflow ids ("refund-A-17-2", ...) and a world of their
own (`folder`/play-N), so the second play shows what the first did instead of finding
its workflows already finished.
"""

import os

import time

from . import support as dbos_support
from .worker import HoldAt, start_worker
from ...examples import world_at
from ...sim import Orders

ORDERS = {"machine-a": ("A-17", 40), "machine-b": ("B-42", 60)}


def _status(client, workflow_id):
    status = client.retrieve_workflow(workflow_id).get_status()
    return {"status": status.status, "executor": status.executor_id}


def run(url, folder, watch=2.0) -> dict:
    """Play the story above on the system database at `url`; return what was observed."""
    workers = []
    client = dbos_support.client(url)
    try:
        a_order, a_amount = ORDERS["machine-a"]
        b_order, b_amount = ORDERS["machine-b"]
        play = _next_play(client, f"refund-{a_order}")
        a_id, b_id = (f"refund-{order}" + ("" if play == 1 else f"-{play}")
                      for order in (a_order, b_order))
        folder = os.path.join(folder, f"play-{play}")
        machine_a = start_worker(url, "machine-a", hold=HoldAt("refund", "after_effect"),
                                 start=[("refund.refund", a_id,
                                         [folder, a_order, a_amount], {"key_notices": True})])
        workers.append(machine_a)
        machine_a.wait_until_held()        # A-17's money has moved; DBOS has not recorded it
        # B starts now, so the provider numbers the refunds the same way on every run.
        machine_b = start_worker(url, "machine-b", linger=watch,
                                 start=[("refund.refund", b_id,
                                         [folder, b_order, b_amount], {"key_notices": True})])
        workers.append(machine_b)
        machine_b.wait_until_ready()
        machine_a.kill()
        after_kill = {**_status(client, a_id),
                      "recorded": dbos_support.recorded_steps(client, a_id),
                      "paid": world_at(folder).payments.count(a_order)}
        time.sleep(watch)                  # machine B is up all this time
        while_b_watched = _status(client, a_id)
        b_report = machine_b.result()[b_id]
        started = time.monotonic()
        machine_a2 = start_worker(url, "machine-a", wait_for=[a_id])
        workers.append(machine_a2)
        a_report = machine_a2.result()[a_id]
        recovery_seconds = time.monotonic() - started
        world = world_at(folder)
        return {
            "play": play, "workflow_ids": {"machine-a": a_id, "machine-b": b_id},
            "machine_a_killed": machine_a.killed,
            "after_kill": after_kill,
            "watched_seconds": watch,
            "while_b_watched": while_b_watched,
            "machine_b": b_report,
            "after_restart": a_report,
            "recovery_seconds": recovery_seconds,
            "ledger": {order: {"refunds paid": world.payments.count(order),
                               "emails sent": world.mailer.count(_customer(order)),
                               "tickets closed": world.tickets.closes(_ticket(order))}
                       for order, _ in ORDERS.values()},
            "refund requests": world.payments.calls(),      # both orders together
        }
    finally:
        for worker in workers:
            worker.kill()
        client.destroy()


def _next_play(client, first_id) -> int:
    """1 on a fresh database; else one more than the plays it has seen already."""
    from sqlalchemy.exc import ProgrammingError, OperationalError
    play = 1
    try:
        while client.list_workflows(workflow_ids=[first_id if play == 1
                                                  else f"{first_id}-{play}"],
                                    load_input=False, load_output=False):
            play += 1
    except (ProgrammingError, OperationalError):      # no DBOS tables yet: a fresh database
        return 1
    return play


def _customer(order_id):
    return Orders().lookup(order_id)["email"]


def _ticket(order_id):
    return Orders().lookup(order_id)["ticket"]
