"""A port written outside the package (as a learner would write one) runs under the same
crash as durable_lite's refund, and comparing the two ledgers grades it: a faithful port
agrees, a port that drops the idempotency key pays twice and disagrees.

This is the mechanism an exercise can grade with: the learner's DBOS code saved as a
module, its steps declared with dbos/faults.py's step so the crash points exist, then
parity.refund_killed_durable_lite and parity.refund_killed_dbos at the same point.
"""

import textwrap

from engines_support import *  # noqa: F401,F403
from engines_support import pair

from durable_lite.engines.compare import parity

pytestmark = pytest.mark.crash

PORT = '''
from dbos import DBOS

from durable_lite import examples as ex
from durable_lite.engines.dbos.faults import step
from durable_lite.keys import derive_key


@step("lookup")
def lookup(folder, order_id):
    return ex.lookup_order(folder, order_id)


@step("refund")
def pay(folder, order_id, amount, key):
    return ex.issue_refund(folder, order_id, amount, idempotency_key=key, careless=CARELESS)


@step("email")
def email(folder, to, subject, key):
    return ex.email_customer(folder, to, subject, idempotency_key=key)


@step("close")
def close(folder, ticket, key):
    return ex.close_ticket(folder, ticket, idempotency_key=key)


@DBOS.workflow(name=NAME)
def refund(folder, order_id, amount, key_notices=True):
    key = lambda *parts: None if CARELESS else derive_key(DBOS.workflow_id, *parts)
    order = lookup(folder, order_id)
    payment = pay(folder, order_id, amount, key("refund", order_id))
    email(folder, order["email"], f"Refund of {amount} for {order_id}", key("email", order_id))
    close(folder, order["ticket"], key("close", order_id))
    return {"order": order_id, "refund_id": payment["refund_id"], "amount": amount}
'''


def write_port(folder, module, careless):
    source = f"NAME = {module!r}\nCARELESS = {careless}\n" + PORT
    with open(os.path.join(folder, f"{module}.py"), "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(source))


@pytest.mark.parametrize("careless", [False, True], ids=["faithful-port", "port-without-keys"])
def test_a_port_is_graded_by_its_ledger_under_the_same_crash(tmp_path, sqlite_url, careless):
    module = "learner_port_careless" if careless else "learner_port"
    code = tmp_path / "learner"
    code.mkdir()
    write_port(str(code), module, careless)
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    dbos_world, _ = pair(tmp_path, "dbos")
    expected = parity.refund_killed_durable_lite("refund", "after_effect", dl_world, dl_work)
    got = parity.refund_killed_dbos("refund", "after_effect", dbos_world, sqlite_url,
                                    workflow=f"{module}.refund", imports=[module],
                                    python_path=[str(code)])
    assert got["killed"] and got["status"] == "completed"
    if careless:
        assert got["refunds paid"] == 2 and got != expected      # paid twice: the grade fails
    else:
        assert got == expected
