"""The parity suite, part 2: lesson 01's refund killed with SIGKILL at every step and crash
point, then resumed by a fresh process, on durable_lite (SQLite store) and on DBOS (a real
PostgreSQL started by the tests). The two must agree on everything the world remembers:
refunds paid, refund requests, emails, tickets closed, and on what the resume replayed.

For DBOS, "after effect" is inside the step function, after the side effect, before DBOS
records the step's output (see durable_lite/engines/dbos/faults.py).
"""

from engines_support import *  # noqa: F401,F403
from engines_support import pair

from durable_lite import examples as ex
from durable_lite.engines.compare import parity
from durable_lite.faults import CRASH_POINTS

pytestmark = pytest.mark.crash

CASES = [(step, when) for step in ex.REFUND_STEPS for when in CRASH_POINTS]


@pytest.mark.parametrize("step,when", CASES, ids=[f"{s}-{w}" for s, w in CASES])
def test_killed_at_the_same_point_both_engines_leave_the_same_ledger(tmp_path, postgres_url,
                                                                     step, when):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    dbos_world, _ = pair(tmp_path, "dbos")
    dl = parity.refund_killed_durable_lite(step, when, dl_world, dl_work)
    dbos = parity.refund_killed_dbos(step, when, dbos_world, postgres_url)
    assert dl == dbos
    assert dl["killed"] and dl["status"] == "completed"
    assert dl["result"] == {"order": "A-17", "refund_id": "R-1", "amount": 40}
    assert (dl["refunds paid"], dl["emails"], dl["tickets closed"]) == (1, 1, 1)
    # the provider was asked twice only when the kill fell inside the refund's window
    assert dl["refund requests"] == (2 if (step, when) == ("refund", "after_effect") else 1)


UNKEYED = [(step, when) for step in ("refund", "email", "close")
           for when in ("after_effect", "after_checkpoint")]


@pytest.mark.parametrize("step,when", UNKEYED, ids=[f"{s}-{w}-unkeyed" for s, w in UNKEYED])
def test_without_keys_both_engines_repeat_the_effect_whose_window_the_kill_fell_in(
        tmp_path, postgres_url, step, when):
    """The same kills on the refund of lesson 01 before the cure (no idempotency key
    anywhere): a kill inside an effect's window repeats that effect on both engines."""
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    dbos_world, _ = pair(tmp_path, "dbos")
    dl = parity.refund_killed_durable_lite(step, when, dl_world, dl_work, keyed=False)
    dbos = parity.refund_killed_dbos(step, when, dbos_world, postgres_url, keyed=False)
    assert dl == dbos
    assert dl["killed"] and dl["status"] == "completed"
    twice = {name: 2 if (when, step) == ("after_effect", effect) else 1
             for name, effect in (("refunds paid", "refund"), ("emails", "email"),
                                  ("tickets closed", "close"))}
    assert {name: dl[name] for name in twice} == twice
