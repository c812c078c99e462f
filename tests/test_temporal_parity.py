"""The crash table on Temporal, where the four-engine table does not reach: lesson 01's
refund killed by a real SIGKILL before its first step and just before the refund, then
finished by another worker process; each case must leave the simulated world exactly as
durable_lite's does (refunds paid, refund requests, emails, tickets closed), with the same
result and the same steps recorded when the first worker died.

Each effect killed inside its window and right after its checkpoint, keyed and not, is a
column of the four-engine table (test_parity_four_engines.py): run there once, against the
course's rule and the committed table, and not again here. The cases here run once per
module, on both engines, at the same time (each on a Temporal task queue and in folders of
its own, on the session's server); each test then judges one case.
"""

from concurrent.futures import ThreadPoolExecutor

from engines_support import *  # noqa: F401,F403

from durable_lite.engines.compare import parity

pytestmark = pytest.mark.crash

CASES = [("lookup", "before_step", True), ("refund", "before_step", False)]
IDS = [f"{s}-{w}-{'keyed' if k else 'unkeyed'}" for s, w, k in CASES]


@pytest.fixture(scope="module")
def outcomes(temporal_address, tmp_path_factory):
    """{case: (durable_lite's outcome, Temporal's)} for every case."""
    folder = tmp_path_factory.mktemp("crashes")

    def one(case):
        step, when, keyed = case
        here = folder / f"{step}-{when}-{keyed}"
        (here / "durable_lite").mkdir(parents=True)
        expected = parity.refund_killed_durable_lite(
            step, when, str(here / "durable_lite" / "world"), str(here / "durable_lite"),
            keyed=keyed)
        got = parity.refund_killed_temporal(step, when, str(here / "temporal" / "world"),
                                            temporal_address, keyed=keyed)
        return case, (expected, got)
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(one, CASES))


def expected_counts(step, when, keyed) -> tuple:
    """(refunds paid, refund requests, emails, tickets closed) the course teaches: a kill
    inside an effect's window repeats that effect; a key turns the repeat into a receipt."""
    repeated = when == "after_effect"
    return ((2 if repeated and step == "refund" and not keyed else 1),
            (2 if repeated and step == "refund" else 1),
            (2 if repeated and step == "email" and not keyed else 1),
            (2 if repeated and step == "close" and not keyed else 1))


@pytest.mark.parametrize("step,when,keyed", CASES, ids=IDS)
def test_killed_at_the_same_point_temporal_leaves_durable_lites_ledger(outcomes, step, when,
                                                                     keyed):
    expected, got = outcomes[(step, when, keyed)]
    assert got == expected
    assert got["killed"] and got["status"] == "completed"
    assert got["result"]["refund_id"] in ("R-1", "R-2")
    assert (got["refunds paid"], got["refund requests"], got["emails"],
            got["tickets closed"]) == expected_counts(step, when, keyed)
