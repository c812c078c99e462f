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
    run = model.approve("expense-desk")                   # too late: it escalated
    assert run.result["outcome"] == "escalated"
    assert model.decisions[-1].outcome == "not waiting"
    assert "no longer waiting" in model.decisions[-1].text()
    with pytest.raises(dl.RunFinishedError):
        fresh.signal("expense-desk", "approval", {"approved": True})   # the engine refuses too


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
    assert "deadline in 0.0 h" in inbox.rows[0].label.value     # a decision now is still in time
    clock.advance(1)
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


# what really happened: the store, read back after each click --------------------------------
def _log_lines(inbox):
    return [line for line in inbox.log.value.split("</div>") if "expense-" in line]


def test_approving_after_the_deadline_says_too_late_and_sends_nothing(setup):
    """The deadline passed, nobody has called recover() yet: the row still has buttons.
    Approve must not claim the run was approved when it takes the deadline branch."""
    engine, clock, _ = setup
    inbox = ApprovalInbox(engine, reviewer="ana")
    clock.advance(2 * DAY)                                   # every deadline has passed
    inbox.buttons("expense-laptop")[0].click()
    run = engine.get("expense-laptop")
    assert run.result == {"item": "laptop", "outcome": "escalated"}
    decision = inbox.model.decisions[-1]
    assert (decision.outcome, decision.status, decision.result) == (
        "too late", "completed", {"item": "laptop", "outcome": "escalated"})
    text = _log_lines(inbox)[-1]
    assert "too late to approve" in text and "deadline branch" in text and "escalated" in text
    assert "approved by" not in text
    assert inbox.error.value == ""
    # nothing was sent: a late approval must not wait in the store for some later wait
    assert engine.store.pending_signal("expense-laptop", "approval") is None
    # recover() ran, so the other overdue runs escalated too, and the list says so
    assert inbox.rows == [] and "0 runs waiting" in inbox.header.value


def test_a_decision_that_becomes_late_on_its_way_is_reported_as_late(setup, monkeypatch):
    """The deadline passes between the check and the signal (a slow network): the run
    ignores the late signal, and the log reads the answer back from the run's history."""
    engine, clock, _ = setup
    model = InboxModel(engine, reviewer="ana")
    deliver = engine.signal

    def slow_signal(*args, **kwargs):
        clock.advance(2 * DAY)
        return deliver(*args, **kwargs)

    monkeypatch.setattr(engine, "signal", slow_signal)
    run = model.reject("expense-chair")
    assert run.result["outcome"] == "escalated"
    assert model.decisions[-1].outcome == "too late"
    assert "too late to reject" in model.decisions[-1].text()


def test_a_row_whose_run_escalated_says_so_and_is_shown_decided(setup):
    """An inbox drawn before recover() escalated a run keeps its row; a click on it sends
    nothing, says why, and redraws the row as decided (no silent error)."""
    engine, clock, _ = setup
    inbox = ApprovalInbox(engine, reviewer="ana")
    clock.advance(2 * DAY)
    engine.recover()                                          # a scheduler, elsewhere
    assert len(inbox.rows) == 3                               # the screen is stale
    approve, _ = inbox.buttons("expense-desk")
    approve.click()
    assert inbox.error.value == "" and inbox.last_error is None
    decision = inbox.model.decisions[-1]
    assert (decision.outcome, decision.result["outcome"]) == ("not waiting", "escalated")
    text = _log_lines(inbox)[-1]
    assert "no longer waiting" in text and "escalated" in text and "was not sent" in text
    assert inbox.rows == [] and "0 runs waiting" in inbox.header.value
    assert all("decided:" in row.label.value for row in inbox.decided) and len(inbox.decided) == 3


def test_a_row_decided_by_another_inbox_says_so(setup):
    engine, _, _ = setup
    mine = ApprovalInbox(engine, reviewer="ana")
    theirs = ApprovalInbox(engine, reviewer="bo")
    theirs.buttons("expense-chair")[1].click()                # bo rejects first
    assert "expense-chair" in [row.run_id for row in mine.rows]
    mine.buttons("expense-chair")[0].click()                  # ana's screen was stale
    assert engine.get("expense-chair").result == {"item": "chair", "outcome": "rejected", "by": "bo"}
    assert mine.model.decisions[-1].outcome == "not waiting"
    assert "no longer waiting" in _log_lines(mine)[-1]
    assert "expense-chair" not in [row.run_id for row in mine.rows]


def test_a_decision_sent_elsewhere_but_not_yet_read_wins_and_the_log_says_so(setup):
    """Another process signalled but has not resumed the run yet: the run is still
    'waiting', so the click sends; the wait takes the older signal, and the log says so."""
    engine, _, _ = setup
    inbox = ApprovalInbox(engine, reviewer="ana")
    engine.signal("expense-laptop", "approval", {"approved": False, "by": "bo", "note": ""})
    inbox.buttons("expense-laptop")[0].click()
    assert engine.get("expense-laptop").result["outcome"] == "rejected"
    decision = inbox.model.decisions[-1]
    assert decision.outcome == "overtaken"
    assert decision.answer == {"approved": False, "by": "bo", "note": ""}
    assert "another decision reached the run first" in _log_lines(inbox)[-1]


def test_a_decision_the_run_has_not_read_yet_is_reported_as_stored(setup, monkeypatch):
    """With recover() left to a scheduler elsewhere, the decision is stored, not taken yet."""
    engine, _, _ = setup
    monkeypatch.setattr(engine, "recover", lambda: [])
    inbox = ApprovalInbox(engine, reviewer="ana")
    inbox.buttons("expense-laptop")[0].click()
    assert inbox.model.decisions[-1].outcome == "delivered"
    assert "has not read it yet" in _log_lines(inbox)[-1]
    assert engine.get("expense-laptop").status == "waiting"
    monkeypatch.undo()
    engine.recover()
    assert engine.get("expense-laptop").result["outcome"] == "paid"


@dl.workflow("test-inbox-two-approvals", version=1)
def two_approvals(ctx, item):
    first = ctx.wait_for_signal("approval", timeout=DAY)
    second = ctx.wait_for_signal("approval", timeout=DAY)
    return {"item": item, "first": first and first["by"], "second": second and second["by"]}


def test_a_row_for_an_earlier_wait_does_not_answer_the_next_one(tmp_path):
    """A workflow asking twice: a row drawn for the first question must not answer the second."""
    clock = dl.FakeClock()
    engine = dl.Engine(dl.SQLiteStore(tmp_path / "runs.db"), clock)
    engine.start(two_approvals, "server", run_id="two")
    stale = ApprovalInbox(engine, reviewer="ana")
    fresh = ApprovalInbox(engine, reviewer="bo")
    clock.advance(60)
    fresh.buttons("two")[0].click()                           # bo answers the first question
    assert engine.get("two").status == "waiting"              # ... and the second one is asked
    assert "bo → run waiting" in fresh.model.decisions[-1].text()
    stale.buttons("two")[0].click()                           # ana's row is for the first
    assert stale.model.decisions[-1].outcome == "not waiting"
    assert engine.get("two").status == "waiting"
    assert [row.run_id for row in stale.rows] == ["two"]      # redrawn: the second question
    stale.buttons("two")[0].click()
    assert engine.get("two").result == {"item": "server", "first": "bo", "second": "ana"}


def test_an_error_from_a_click_shows_in_the_widget(setup):
    engine, _, _ = setup
    inbox = ApprovalInbox(engine, reviewer="ana")
    engine.store.close()                                      # e.g. the old process's engine
    inbox.buttons("expense-laptop")[0].click()                # no exception escapes the click
    assert inbox.last_error is not None
    assert "Approve expense-laptop failed" in inbox.error.value
    assert type(inbox.last_error).__name__ in inbox.error.value
    inbox.refresh_button.click()
    assert "Refresh failed" in inbox.error.value


def test_error_text_is_escaped_and_cleared_by_the_next_good_click(setup, monkeypatch):
    engine, _, _ = setup
    inbox = ApprovalInbox(engine, reviewer="ana")

    def broken(*args, **kwargs):
        raise RuntimeError("<b>store</b> unavailable")

    monkeypatch.setattr(inbox.model, "decide", broken)
    inbox.buttons("expense-laptop")[0].click()
    assert "&lt;b&gt;store&lt;/b&gt; unavailable" in inbox.error.value
    assert "<b>store</b>" not in inbox.error.value
    monkeypatch.undo()
    inbox.buttons("expense-laptop")[0].click()
    assert inbox.error.value == "" and inbox.last_error is None
    assert engine.get("expense-laptop").result["outcome"] == "paid"


def test_an_unknown_run_is_an_error_from_the_model():
    engine = dl.Engine(dl.MemoryStore(), dl.FakeClock())
    with pytest.raises(dl.UnknownRunError):
        InboxModel(engine).approve("nobody")


def test_the_inbox_names_its_parts_with_stable_css_classes(setup):
    engine, _, _ = setup
    inbox = ApprovalInbox(engine, reviewer="ana")
    parts = {"dl-approval-inbox": inbox.panel, "dl-refresh": inbox.refresh_button,
             "dl-inbox-log": inbox.log, "dl-error": inbox.error}
    for name, widget in parts.items():
        assert name in widget._dom_classes, name
    assert len(inbox.rows) == 3
    for row in inbox.rows:
        assert "dl-inbox-row" in row.box._dom_classes
        assert "dl-approve" in row.approve._dom_classes and "dl-reject" in row.reject._dom_classes


# decided elsewhere: the row says so instead of offering buttons -----------------------------
def test_a_run_decided_by_code_shows_as_decided_with_no_buttons(setup):
    """Lesson 07 after Run All: later cells decide runs an inbox further up still showed."""
    engine, clock, _ = setup
    inbox = ApprovalInbox(engine, reviewer="ana")
    engine.signal("expense-chair", "approval", {"approved": False, "by": "bo"})
    engine.recover()
    clock.advance(2 * DAY)
    engine.recover()                                          # the desk and the laptop escalate
    inbox.refresh()
    assert inbox.rows == [] and len(inbox.decided) == 3
    assert [row.run_id for row in inbox.decided] == ["expense-laptop", "expense-chair", "expense-desk"]
    assert len(inbox.list.children) == 3                      # the rows stay where they were
    chair = next(row for row in inbox.decided if row.run_id == "expense-chair")
    assert "decided:" in chair.label.value
    assert "rejected by bo → run completed (rejected)" in chair.label.value
    desk = next(row for row in inbox.decided if row.run_id == "expense-desk")
    assert "nobody answered before the deadline → run completed (escalated)" in desk.label.value
    for row in inbox.decided:
        assert row.approve.disabled and row.reject.disabled
        assert row.approve.layout.display == "none" and "dl-inbox-decided" in row.box._dom_classes
    with pytest.raises(KeyError):
        inbox.buttons("expense-chair")
    assert "0 runs waiting" in inbox.header.value


def test_a_click_decides_its_row_in_place(setup):
    engine, _, _ = setup
    inbox = ApprovalInbox(engine, reviewer="ana")
    inbox.buttons("expense-desk")[0].click()
    assert [row.run_id for row in inbox.rows] == ["expense-laptop", "expense-chair"]
    (desk,) = inbox.decided
    assert "approved by ana → run completed (paid)" in desk.label.value
    assert inbox.list.children[2] is desk.box                 # still third, now decided


@pytest.fixture
def shell():
    """A real IPython shell, as in a notebook's kernel, for the after-each-cell hook."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    yield shell
    InteractiveShell.clear_instance()


def test_in_a_notebook_every_cell_refreshes_the_inbox(setup, shell):
    engine, clock, _ = setup
    shell.user_ns.update(engine=engine, ApprovalInbox=ApprovalInbox)
    shell.run_cell("inbox = ApprovalInbox(engine, reviewer='ana')")
    inbox = shell.user_ns["inbox"]
    assert len(inbox.rows) == 3
    shell.run_cell("engine.signal('expense-laptop', 'approval', {'approved': True, 'by': 'bo'})\n"
                   "engine.recover()")                        # a later cell, not a click
    assert [row.run_id for row in inbox.rows] == ["expense-chair", "expense-desk"]
    assert "approved by bo → run completed (paid)" in inbox.decided[0].label.value


def test_a_closed_inbox_stops_offering_and_reading(setup, shell):
    engine, _, path = setup
    shell.user_ns.update(engine=engine, ApprovalInbox=ApprovalInbox)
    shell.run_cell("old = ApprovalInbox(engine, reviewer='ana')")
    old = shell.user_ns["old"]
    old.close("the old process is gone: use the inbox below")
    assert old.rows == [] and old.refresh_button.disabled
    assert "Closed:" in old.header.value and "use the inbox below" in old.header.value
    assert all(row.approve.layout.display == "none" for row in old._shown.values())
    engine.store.close()                                     # its engine's store goes away
    result = shell.run_cell("1 + 1")
    assert result.success and old.error.value == ""          # it no longer reads the store
    hooks = shell.events.callbacks["post_run_cell"]
    assert not [h for h in hooks if getattr(h, "__name__", "") == "after_cell"]


def test_an_inbox_whose_store_closes_under_it_says_so_and_lets_go(setup, shell):
    engine, _, _ = setup
    shell.user_ns.update(engine=engine, ApprovalInbox=ApprovalInbox)
    shell.run_cell("inbox = ApprovalInbox(engine)")
    inbox = shell.user_ns["inbox"]
    engine.store.close()
    assert shell.run_cell("2 + 2").success                   # the hook never breaks a cell
    assert inbox.closed and "can no longer read its store" in inbox.header.value
