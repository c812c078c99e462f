"""The approval inbox (lesson 06): waiting runs, Approve / Reject, restarts and deadlines."""

import pytest

import durable_lite as dl
from durable_lite.lab.inbox import ApprovalInbox, InboxModel

DAY = 24 * 3600


@dl.workflow("test-inbox-expense", version=1)
def expense(ctx, item, amount):
    ctx.step("ask", lambda: {"asked": item})
    decision = ctx.wait_for_signal("approval", timeout=2 * DAY)
    if decision is None:
        ctx.step("escalate", lambda: {"to": "manager"})
        return {"item": item, "outcome": "escalated"}
    if not decision["approved"]:
        return {"item": item, "outcome": "rejected", "by": decision["by"]}
    ctx.step("pay", lambda: {"paid": amount})
    return {"item": item, "outcome": "paid", "by": decision["by"]}


@pytest.fixture
def setup(tmp_path):
    clock = dl.FakeClock()
    path = tmp_path / "runs.db"
    engine = dl.Engine(dl.SQLiteStore(path), clock)
    for item, amount in (("laptop", 1800), ("chair", 300), ("desk", 600)):
        clock.advance(60)                       # one request a minute
        run = engine.start(expense, item, amount, run_id=f"expense-{item}")
        assert run.status == "waiting" and run.waiting_for == "approval"
    return engine, clock, path


def test_the_inbox_lists_runs_parked_on_its_signal(setup):
    engine, clock, _ = setup
    model = InboxModel(engine, reviewer="ana")
    assert [r.run_id for r in model.pending()] == ["expense-laptop", "expense-chair", "expense-desk"]
    assert model.hours_left(model.pending()[0]) == pytest.approx(48 - 2 / 60)
    assert InboxModel(engine, signal="other").pending() == []


def test_approve_and_reject_deliver_the_decision_and_continue_the_run(setup):
    engine, _, _ = setup
    model = InboxModel(engine, reviewer="ana")
    run = model.approve("expense-laptop")
    assert run.status == "completed"
    assert run.result == {"item": "laptop", "outcome": "paid", "by": "ana"}
    run = model.reject("expense-chair", note="too expensive")
    assert run.result == {"item": "chair", "outcome": "rejected", "by": "ana"}
    assert [r.run_id for r in model.pending()] == ["expense-desk"]
    assert [(d.run_id, d.approved, d.status) for d in model.decisions] == [
        ("expense-laptop", True, "completed"), ("expense-chair", False, "completed")]


def test_a_restart_loses_nothing_and_the_deadline_escalates(setup):
    engine, clock, path = setup
    InboxModel(engine).approve("expense-laptop")
    engine.store.close()
    del engine                                            # the "deploy"
    fresh = dl.Engine(dl.SQLiteStore(path), clock)
    model = InboxModel(fresh)
    assert [r.run_id for r in model.pending()] == ["expense-chair", "expense-desk"]
    clock.advance(2 * DAY)
    assert model.hours_left(model.pending()[0]) == pytest.approx(-1 / 60)
    finished = fresh.recover()
    assert sorted(r.result["outcome"] for r in finished) == ["escalated", "escalated"]
    assert model.pending() == []
    with pytest.raises(dl.RunFinishedError):
        model.approve("expense-desk")                     # too late: it escalated


def test_the_widget_lists_rows_and_its_buttons_decide(setup):
    engine, clock, _ = setup
    inbox = ApprovalInbox(engine, reviewer="ana", describe=lambda run: f"a {run.workflow}")
    assert repr(inbox) == "ApprovalInbox(3 waiting for 'approval')"
    assert "3 runs waiting" in inbox.header.value
    assert len(inbox.list.children) == 3
    assert "a test-inbox-expense" in inbox.rows[0].label.value
    assert "deadline in 2.0 days" in inbox.rows[0].label.value

    approve, reject = inbox.buttons("expense-laptop")
    approve.click()
    assert engine.get("expense-laptop").result["outcome"] == "paid"
    assert [row.run_id for row in inbox.rows] == ["expense-chair", "expense-desk"]
    assert "approved by ana" in inbox.log.value and "completed" in inbox.log.value

    inbox.buttons("expense-chair")[1].click()
    assert engine.get("expense-chair").result["outcome"] == "rejected"
    assert "1 run waiting" in inbox.header.value
    with pytest.raises(KeyError, match="not in the inbox"):
        inbox.buttons("expense-chair")

    clock.advance(47 * 3600)
    inbox.refresh_button.click()
    assert "deadline in 1.0 h" in inbox.rows[0].label.value      # the desk: asked last
    clock.advance(3600)
    inbox.refresh()
    assert "deadline passed" in inbox.rows[0].label.value

    bundle = inbox._repr_mimebundle_()
    assert bundle["text/plain"] == repr(inbox)
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_the_widget_on_an_empty_inbox(tmp_path):
    engine = dl.Engine(dl.MemoryStore(), dl.FakeClock())
    inbox = ApprovalInbox(engine)
    assert inbox.rows == [] and "0 runs waiting" in inbox.header.value
    assert "No decisions yet" in inbox.log.value


def test_exported_from_the_lab():
    assert dl.lab.ApprovalInbox is ApprovalInbox and dl.lab.InboxModel is InboxModel
