"""Two machines, one Postgres: DBOS workers in real processes, one of them SIGKILLed in the
middle of a refund, with every effect counted in the simulated world's ledgers.

The Postgres server is started by the tests (engines_support.postgres_url) in a temporary
data directory and stopped at the end of the session. Beside it, the same story on
durable_lite, where leases let any worker take over a run whose worker died.
"""

from engines_support import *  # noqa: F401,F403

import durable_lite as dl
from durable_lite import examples as ex
from durable_lite.engines.dbos import two_machines

pytestmark = pytest.mark.crash


def test_a_killed_machine_is_recovered_by_its_own_restart_not_by_the_other(postgres_url, world):
    seen = two_machines.run(postgres_url, world, watch=3.0)

    # machine A died inside the refund step: the money moved, DBOS recorded only the lookup
    assert seen["machine_a_killed"]
    assert seen["after_kill"] == {"status": "PENDING", "executor": "machine-a",
                                  "recorded": ["lookup"], "paid": 1}
    # machine B, alive all along, finished its own refund and did not take A's over
    assert seen["machine_b"]["status"] == "SUCCESS"
    assert seen["machine_b"]["executor"] == "machine-b"
    assert seen["while_b_watched"] == {"status": "PENDING", "executor": "machine-a"}
    # machine A's restart (same executor id) recovered it and finished it
    assert seen["after_restart"]["status"] == "SUCCESS"
    assert seen["after_restart"]["executor"] == "machine-a"
    assert seen["after_restart"]["result"] == {"order": "A-17", "refund_id": "R-1", "amount": 40}
    assert seen["after_restart"]["steps"] == ["lookup", "refund", "email", "close"]
    # every effect exactly once, per the world's own ledgers
    for order in ("A-17", "B-42"):
        assert seen["ledger"][order] == {"refunds paid": 1, "emails sent": 1,
                                         "tickets closed": 1}, order
    assert seen["refund requests"] == 3        # A-17 asked twice (the key paid once), B-42 once


def test_the_story_plays_again_on_the_same_database(postgres_url, world):
    """Lesson 14's try-this: rerun the two-machines cell (watch longer, say). The second play
    gets workflow ids and a world of its own and tells the same story, instead of finding
    its workflows finished (the worker used to exit at once: 'worker machine-a exited (0)')."""
    first = two_machines.run(postgres_url, world, watch=0.5)
    again = two_machines.run(postgres_url, world, watch=1.0)
    assert again["play"] == first["play"] + 1
    assert again["workflow_ids"] == {"machine-a": f"refund-A-17-{again['play']}",
                                     "machine-b": f"refund-B-42-{again['play']}"}
    for key in ("machine_a_killed", "after_kill", "while_b_watched", "ledger",
                "refund requests"):
        assert again[key] == first[key], key
    assert again["after_restart"]["result"] == first["after_restart"]["result"]
    assert again["watched_seconds"] == 1.0


def test_on_durable_lite_any_worker_takes_over_a_run_whose_lease_expired(tmp_path, world):
    """The same death on durable_lite: worker 1 is killed inside the refund step; worker 2,
    a different process, takes the run over once worker 1's lease has expired."""
    store = str(tmp_path / "runs.db")
    killed = dl.faults.run_in_child(store, "durable_lite.examples", "refund", world, "A-17", 40,
                                    run_id="refund-A-17", key_notices=True,
                                    crash_at=dl.faults.CrashAt("refund", "after_effect", kill=True))
    assert killed.killed
    clock = dl.FakeClock(start=2e10)           # far past any lease the dead worker took
    worker_2 = dl.Engine(dl.SQLiteStore(store), clock, worker="worker-2")
    [run] = worker_2.recover()
    assert run.status == "completed" and run.replayed == ["lookup"]
    world_now = ex.world_at(world)
    assert (world_now.payments.count(), world_now.mailer.count(), world_now.tickets.closes()) == (1, 1, 1)
