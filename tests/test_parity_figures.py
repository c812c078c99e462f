"""The parity suite, part 1: the source review's figures and a wait with a deadline, run
on durable_lite and on DBOS (SQLite system database). Both must leave the simulated world
with the same ledgers and return the same results.

Figure 1 (naive retry, 7 executions and 2 emails) has no DBOS side: it is recorded in
differences.py and shown in test_parity_differences.py.
"""

from engines_support import *  # noqa: F401,F403
from engines_support import pair

from durable_lite.engines.compare import parity


def both(tmp_path, sqlite_url, dl_runner, dbos_runner):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    dbos_world, _ = pair(tmp_path, "dbos")
    return dl_runner(dl_world, dl_work), dbos_runner(dbos_world, sqlite_url)


def test_figure_2_a_failed_run_continues_to_5_executions_and_1_email_on_both(tmp_path, sqlite_url):
    dl, dbos = both(tmp_path, sqlite_url, parity.failed_then_resumed_durable_lite,
                    parity.failed_then_resumed_dbos)
    assert dl == dbos
    assert dl["first run"] == "failed" and dl["status"] == "completed"
    assert dl["tool calls"] == 5 and dl["emails"] == 1
    assert dl["replayed"] == ["retrieval", "extraction"]


def test_figure_3_a_changed_nonce_keeps_generation_1_on_both(tmp_path, sqlite_url):
    dl, dbos = both(tmp_path, sqlite_url, parity.changed_nonce_durable_lite,
                    parity.changed_nonce_dbos)
    assert dl == dbos
    assert dl["status"] == "completed" and dl["draft"] == "[generation 1]"
    assert dl["model calls"] == 1 and dl["deliveries"] == 1


def test_figure_4_a_fresh_process_finishes_without_resending_on_both(tmp_path, sqlite_url):
    dl, dbos = both(tmp_path, sqlite_url, parity.fresh_process_durable_lite,
                    parity.fresh_process_dbos)
    assert dl == dbos
    assert dl["status"] == "completed" and dl["emails"] == 1 and dl["tool calls"] == 5
    assert dl["replayed"] == ["retrieval", "extraction"]


def test_figure_5_fifty_attempts_make_one_delivery_on_both(tmp_path, sqlite_url):
    dl, dbos = both(tmp_path, sqlite_url, parity.fifty_attempts_durable_lite,
                    parity.fifty_attempts_dbos)
    assert dl == dbos
    assert dl["attempts"] == 50 and dl["deliveries"] == 1 and dl["deliver checkpoints"] == 1
    assert dl["status"] == "completed"


@pytest.mark.parametrize("approve", [True, False], ids=["approval-arrives", "deadline-passes"])
def test_a_wait_with_a_deadline_ends_the_same_way_on_both(tmp_path, sqlite_url, approve):
    dl, dbos = both(tmp_path, sqlite_url,
                    lambda f, w: parity.approval_durable_lite(approve, f, w),
                    lambda f, u: parity.approval_dbos(approve, f, u))
    assert dl == dbos
    assert dl["asked for approval"] and dl["status"] == "completed"
    if approve:
        assert dl["result"]["refunded"] and dl["refunds paid"] == 1
        assert dl["emails"] == 1 and dl["tickets closed"] == 1
    else:
        assert dl["result"] == {"order": "A-17", "refunded": False, "amount": 250}
        assert dl["refunds paid"] == 0 and dl["emails"] == 1 and dl["tickets closed"] == 0
