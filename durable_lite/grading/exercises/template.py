"""A template for a new exercise's checks — copy it to `exNN_name.py` (it is not an exercise
itself: discovery only picks up `exNN_...` files).

The made-up exercise it checks: "09_notify_once", one question. The learner writes
`notify_once`, a workflow that looks an order up, refunds it, and texts the customer
through an SMS gateway of their own (`world.ledger("sms")`), once each, whatever crashes:

    def send_sms(folder, to, text, key):                  # given in the notebook
        return dl.examples.world_at(folder).ledger("sms").record(key=key, detail={"to": to})

    @dl.workflow("ex09-notify", version=1)
    def notify_once(ctx, folder, order_id, amount):
        order = ctx.step("lookup", lookup_order, folder, order_id)
        refund = ctx.step("refund", issue_refund, folder, order_id, amount,
                          idempotency_key=ctx.idempotency_key("refund", order_id))
        ctx.step("sms", send_sms, folder, order["email"], f"refunded {amount}",
                 ctx.idempotency_key("sms", order_id))
        return {"order": order_id, "refund": refund["refund_id"]}

Every test below keeps the three rules of README.md in this folder: cases drawn fresh (a
`draw` parameter), every branch the question names exercised on every run, and the answer
judged by the simulated world's ledgers, never by what it says about itself.
(tests/test_grading_template.py runs these tests on a right and a wrong answer.)
"""

from ..checks import Exercise, Fail
from ..harness import EngineRuns, crash_label, needs_workflow, scratch, sweep_of, unfinished
from ..ledgers import Ledgers

EXERCISE = Exercise("09_notify_once", "One text per charge",
                    lesson="notebooks/09_compensation.ipynb")

q1 = EXERCISE.question("q1", "notify_once", answers=["notify_once"])


def _order(draw):
    """The case: an order and an amount nobody can guess (so no literal passes)."""
    return draw.order_id(), draw.amount()


@q1.test("no crash: one refund, one text, and the result names the refund the provider recorded",
         hint="three steps: lookup, refund, sms; return the refund step's refund_id")
def _(notify_once, draw):
    needs_workflow(notify_once, "notify_once")
    order_id, amount = _order(draw)
    with scratch("ex09") as folder:
        run = EngineRuns(folder).run(notify_once, folder, order_id, amount,
                                     run_id=draw.run_id("notify"))
        if run.status != "completed":
            unfinished(run.status, run.error, "notify_once")
        world = Ledgers(folder)
        world.expect(refunds=1, sms=1, when="with no crash")          # counted, not believed
        world.expect_refund((run.result or {}).get("refund"), order_id, amount,
                            what="the result's refund")               # the provider's own id


@q1.test("a crash at every point, then a resume: still one refund and one text",
         hint="a crash after a step's effect re-runs it: give the provider and the gateway "
              "a key from ctx.idempotency_key(...), the same on every replay")
def _(notify_once, draw):
    needs_workflow(notify_once, "notify_once")
    order_id, amount = _order(draw)
    ids = draw.child("run ids")
    s = sweep_of(notify_once, order_id, amount, what="notify_once",
                 run_id=lambda case: ids.run_id("notify"))     # a fresh run id per case
    for row in s.rows:
        if row["duplicates"] or row["lost"]:
            changes = {**row["duplicates"], **{k: -n for k, n in row["lost"].items()}}
            raise Fail(f"crash {crash_label(row)}, then resume: {changes} compared with a run "
                       "that never crashed")
        if not row["same_result"]:
            raise Fail(f"crash {crash_label(row)}, then resume: the run returned "
                       f"{row['result']!r}; an uninterrupted run returned {s.clean['result']!r}")
