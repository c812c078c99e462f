"""An approval inbox: the runs parked on a person's decision, with Approve and Reject.

A run that calls `ctx.wait_for_signal("approval", timeout=...)` parks: it is a row in the
store with status "waiting", holding no thread and no process. The inbox is what a
reviewer sees. Deciding does two things, exactly what a web handler behind real buttons
would do:

    engine.signal(run_id, "approval", {"approved": True, "by": "ana", "note": ""})
    engine.recover()        # continue every run whose signal arrived or whose deadline passed

A screen is a picture of the store taken some time ago, so a click can come too late: the
deadline passed (the run will take its deadline branch however soon someone approves), the
run already finished, or another inbox decided first. The inbox checks the run before it
sends anything and reads the run back afterwards, and its log says what really happened.
A decision that arrives after the deadline is not sent at all: the engine would keep it for
the run's *next* wait of that name, where it would answer a question nobody asked yet.

`InboxModel` is the logic in plain Python (tests drive it directly); `ApprovalInbox` is an
ipywidgets panel that only shows a model and forwards clicks to it. Build a new inbox on a
new engine after a restart: the inbox keeps nothing that the store does not.

A row stays where it was drawn once its run is decided, however it was decided: by a click
here, by another inbox, by code, or by its deadline. It then says what became of the run
and offers no buttons. In a notebook the inbox re-reads the store after every cell runs
(an IPython `post_run_cell` hook), so a run that a later cell decides shows as decided up
here too, instead of still offering Approve and Reject.
"""

import html
import weakref
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from ..run import Run
from ..store.records import WAITING

# What became of a decision (Decision.outcome).
TAKEN = "taken"                  # the run's wait returned this decision
TOO_LATE = "too late"            # the deadline had passed: nothing sent, the deadline branch ran
NOT_WAITING = "not waiting"      # the run had moved on before the click: nothing sent
OVERTAKEN = "overtaken"          # another decision reached the wait first
DELIVERED = "delivered"          # sent and kept, but the run has not read it yet


@dataclass(frozen=True)
class Decision:
    """One click, and what the run did with it (read back from the store)."""

    run_id: str
    approved: bool
    by: str
    status: str              # the run's status right after the click was handled
    result: object = None
    outcome: str = TAKEN
    answer: object = None    # what the run's wait returned, if it has returned

    @property
    def verb(self) -> str:
        return "approve" if self.approved else "reject"

    def text(self) -> str:
        """One line for the log, in plain words."""
        did = "approved" if self.approved else "rejected"
        after = f"run {self.status}" + ("" if self.result is None else f", {self.result}")
        if self.outcome == TAKEN:
            return f"{self.run_id}: {did} by {self.by} → {after}"
        if self.outcome == TOO_LATE:
            return (f"{self.run_id}: too late to {self.verb}: its deadline had passed, so "
                    f"nothing was sent and the run took its deadline branch → {after}")
        if self.outcome == NOT_WAITING:
            return (f"{self.run_id}: no longer waiting for a decision ({self.status}"
                    f"{'' if self.result is None else ', ' + str(self.result)}); "
                    f"{self.verb} by {self.by} was not sent")
        if self.outcome == OVERTAKEN:
            return (f"{self.run_id}: {did} by {self.by}, but another decision reached the run "
                    f"first ({self.answer}) → {after}")
        return (f"{self.run_id}: {did} by {self.by}; the decision is stored, the run has not "
                f"read it yet (it continues at the next recover()) → {after}")


def default_describe(run: Run) -> str:
    return run.workflow


class InboxModel:
    """The runs waiting for `signal`, and the two things a reviewer can do about them."""

    def __init__(self, engine, signal: str = "approval", reviewer: str = "reviewer",
                 describe: Callable[[Run], str] = default_describe):
        self.engine, self.signal, self.reviewer, self.describe = engine, signal, reviewer, describe
        self.decisions: List[Decision] = []

    def pending(self) -> List[Run]:
        """Runs parked on this inbox's signal, nearest deadline first, read fresh from the store."""
        waiting = [r for r in self.engine.runs(WAITING) if r.waiting_for == self.signal]
        return sorted(waiting, key=lambda r: r.wake_at)

    def hours_left(self, run: Run) -> float:
        """Hours until the run's deadline, on the engine's clock (negative: overdue)."""
        return (run.wake_at - self.engine.clock()) / 3600

    def is_waiting(self, run: Run, seen: Optional[Run] = None) -> bool:
        """Is `run` (read now) still parked on this inbox's signal — the same wait as the
        snapshot `seen`, if given (a workflow may ask twice; each wait has its own deadline)?"""
        same_wait = seen is None or run.wake_at == seen.wake_at
        return run.status == WAITING and run.waiting_for == self.signal and same_wait

    def approve(self, run_id: str, note: str = "", seen: Optional[Run] = None) -> Run:
        return self.decide(run_id, True, note, seen)

    def reject(self, run_id: str, note: str = "", seen: Optional[Run] = None) -> Run:
        return self.decide(run_id, False, note, seen)

    def decide(self, run_id: str, approved: bool, note: str = "",
               seen: Optional[Run] = None) -> Run:
        """Deliver the decision durably, let the engine continue what is due, and record in
        `decisions` what the run really did with it.

        `seen` is the run as the reviewer saw it (a row on screen). Nothing is sent if the
        run is no longer waiting on that wait, or if its deadline has already passed (a
        signal sent after the deadline never answers this wait). Errors from the engine or
        the store (an unknown run, a closed store) are raised.
        """
        approved = bool(approved)
        before = self.engine.get(run_id)
        if not self.is_waiting(before, seen):
            return self._record(run_id, approved, before, NOT_WAITING)
        if self.engine.clock() > before.wake_at:
            self.engine.recover()                         # the deadline branch, now
            return self._record(run_id, approved, self.engine.get(run_id), TOO_LATE)
        payload = {"approved": approved, "by": self.reviewer, "note": note}
        self.engine.signal(run_id, self.signal, payload)
        self.engine.recover()
        after = self.engine.get(run_id)
        answered, answer = self._wait_answer(run_id, before.wake_at)
        if not answered:
            outcome = DELIVERED
        elif answer == payload:
            outcome = TAKEN
        elif answer is None:
            outcome = TOO_LATE     # the deadline passed between the check and the signal
        else:
            outcome = OVERTAKEN
        return self._record(run_id, approved, after, outcome, answer)

    def what_became_of(self, seen: Run) -> str:
        """In words, what happened to the wait `seen` showed (a run no longer waiting on it),
        read from the store: who decided, or that the deadline did, and the run's status."""
        run = self.engine.get(seen.run_id)
        answered, answer = self._wait_answer(seen.run_id, seen.wake_at)
        if not answered:
            how = "no longer waiting"
        elif answer is None:
            how = "nobody answered before the deadline"
        elif isinstance(answer, dict) and "approved" in answer:
            by = f" by {answer['by']}" if answer.get("by") else ""
            how = ("approved" if answer["approved"] else "rejected") + by
        else:
            how = f"answered {answer!r}"
        outcome = run.result.get("outcome") if isinstance(run.result, dict) else None
        return f"{how} → run {run.status}" + (f" ({outcome})" if outcome else "")

    def _wait_answer(self, run_id: str, deadline: float):
        """(True, value) if the wait whose deadline is `deadline` has returned `value`
        (None: the deadline won); (False, None) while it is still open. The wait's history
        is a timer entry holding the deadline, then a signal entry holding the answer."""
        rows = self.engine.history(run_id)
        for timer, answer in zip(rows, rows[1:]):
            if (timer["kind"] == "timer" and timer["step"] == self.signal
                    and timer["result"] == deadline and answer["kind"] == "signal"):
                return True, answer["result"]
        return False, None

    def _record(self, run_id, approved, run: Run, outcome, answer=None) -> Run:
        self.decisions.append(Decision(run_id, approved, self.reviewer, run.status, run.result,
                                       outcome, answer))
        return run

    def __repr__(self):
        return f"InboxModel({len(self.pending())} waiting for {self.signal!r})"


# the widget --------------------------------------------------------------------------------
def _deadline_text(hours: float) -> str:
    if hours < 0:
        return ("<span style='color:#c0392b'>deadline passed: a decision now is too late; "
                "the run escalates at the next recover()</span>")
    if hours < 24:
        return f"<span style='color:#b35900'>deadline in {hours:.1f} h</span>"
    if hours < 24 * 365:
        return f"deadline in {hours / 24:.1f} days"
    return f"deadline in {hours / 24 / 365.25:.1f} years"


@dataclass
class _Row:
    run: Run                 # the run as this row shows it
    label: object            # ipywidgets.HTML
    approve: object          # ipywidgets.Button
    reject: object           # ipywidgets.Button
    box: object              # ipywidgets.HBox
    decided: bool = False    # its run is no longer waiting on this wait

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def key(self) -> Tuple[str, float]:
        """A row is one wait: a workflow may ask twice, each wait with its own deadline."""
        return (self.run.run_id, self.run.wake_at)


class ApprovalInbox:
    """The panel: one line per waiting run with Approve / Reject, and a log of decisions.

    `inbox.buttons(run_id)` returns that run's (approve, reject) buttons, so code can click
    them the way a reviewer would: `inbox.buttons("refund-A-101")[0].click()`.
    `inbox.rows` are the rows still waiting for a decision, `inbox.decided` the rows whose
    run has been decided since they were drawn (they stay, saying what became of it).

    Every click re-reads the store: a row whose run has moved on (finished, escalated,
    decided elsewhere) sends nothing, says so in the log, and is shown as decided. So does
    every cell run in a notebook. An error raised while handling a click is shown in the
    panel's red error line (`inbox.error`), because Jupyter sends a callback's exception
    only to its log console, where nobody looks. `inbox.close(why)` retires an inbox whose
    engine is gone (the old process's, after a deploy): its buttons go, it stops re-reading.
    """

    def __init__(self, engine=None, signal: str = "approval", reviewer: str = "reviewer",
                 describe: Callable[[Run], str] = default_describe,
                 model: Optional[InboxModel] = None):
        import ipywidgets as w

        self._w = w
        self.model = model or InboxModel(engine, signal, reviewer, describe)
        self.header = w.HTML()
        self.list = w.VBox()
        self.log = w.HTML()
        self.error = w.HTML()
        self.last_error: Optional[BaseException] = None
        self.refresh_button = w.Button(description="Refresh", icon="refresh",
                                       tooltip="re-read the store (after a restart or a deadline)")
        self.refresh_button.on_click(lambda _: self._guarded(("Refresh", self.refresh)))
        self.panel = w.VBox([w.HBox([self.header, self.refresh_button]), self.error,
                             self.list, self.log])
        # Stable names for the parts (rows and their buttons get theirs in _row), for tests
        # in a real browser.
        for part, name in ((self.panel, "dl-approval-inbox"), (self.header, "dl-inbox-header"),
                           (self.refresh_button, "dl-refresh"), (self.error, "dl-error"),
                           (self.list, "dl-inbox-rows"), (self.log, "dl-inbox-log")):
            part.add_class(name)
        self._shown: Dict[Tuple[str, float], _Row] = {}    # every row drawn, in order
        self.rows: List[_Row] = []                          # ... those still waiting
        self.closed = False
        self.refresh()
        self._refresh_after_each_cell()

    @property
    def decided(self) -> List[_Row]:
        return [row for row in self._shown.values() if row.decided]

    def buttons(self, run_id: str):
        for row in self.rows:
            if row.run_id == run_id:
                return row.approve, row.reject
        waiting = [row.run_id for row in self.rows]
        raise KeyError(f"run {run_id!r} is not in the inbox (waiting: {waiting})")

    def refresh(self):
        """Re-read the store: new waiting runs get a row, rows whose run was decided say so."""
        if self.closed:
            return
        m = self.model
        pending = {(run.run_id, run.wake_at): run for run in m.pending()}
        for key, row in self._shown.items():
            if key in pending:
                row.run = pending[key]
                row.label.value = self._label(row.run)
            elif not row.decided:
                self._show_decided(row)
        for key, run in pending.items():
            if key not in self._shown:
                self._shown[key] = self._row(run)
        self.rows = [row for row in self._shown.values() if not row.decided]
        self.list.children = [row.box for row in self._shown.values()]
        noun = "run" if len(pending) == 1 else "runs"
        self.header.value = (f"<b>{len(pending)} {noun} waiting for "
                             f"<code>{html.escape(m.signal)}</code></b>")
        self.log.value = self._log_html()

    def close(self, why: str = "this inbox belonged to a process that has stopped") -> None:
        """Retire the inbox: no more buttons, no more reading the store (its engine may be
        gone), and a header that says why."""
        self.closed = True
        for row in self._shown.values():
            for button in (row.approve, row.reject):
                button.disabled = True
                button.layout.display = "none"
        self.refresh_button.disabled = True
        self.rows = []
        self.header.value = f"<b>Closed:</b> {html.escape(why)}"

    def _refresh_after_each_cell(self):
        """In IPython, re-read the store after every cell that runs. The hook holds the inbox
        weakly, and lets go of it once it is closed or can no longer read its store."""
        try:
            from IPython import get_ipython
        except ImportError:
            return
        shell = get_ipython()
        if shell is None:
            return
        inbox = weakref.ref(self)

        def after_cell(*_):
            me = inbox()
            if me is not None and not me.closed:
                try:
                    me.refresh()
                    return
                except Exception as exc:     # e.g. its store was closed by a "deploy"
                    me.close(f"it can no longer read its store ({type(exc).__name__}: {exc})")
            shell.events.unregister("post_run_cell", after_cell)

        shell.events.register("post_run_cell", after_cell)

    def _label(self, run: Run) -> str:
        return (f"<code>{html.escape(run.run_id)}</code> — {html.escape(self.model.describe(run))}"
                f" — {_deadline_text(self.model.hours_left(run))}")

    def _show_decided(self, row: _Row) -> None:
        row.decided = True
        row.label.value = (f"<span style='color:#555'><code>{html.escape(row.run_id)}</code> — "
                           f"{html.escape(self.model.describe(row.run))} — <b>decided:</b> "
                           f"{html.escape(self.model.what_became_of(row.run))}</span>")
        for button in (row.approve, row.reject):
            button.disabled = True
            button.layout.display = "none"
        row.box.add_class("dl-inbox-decided")

    def _row(self, run: Run) -> _Row:
        w = self._w
        label = w.HTML(self._label(run), layout=w.Layout(width="560px", min_width="240px"))
        approve = w.Button(description="Approve", button_style="success", icon="check")
        reject = w.Button(description="Reject", button_style="danger", icon="times")
        approve.on_click(lambda _, seen=run: self._decide(seen, True))
        reject.on_click(lambda _, seen=run: self._decide(seen, False))
        box = w.HBox([label, approve, reject], layout=w.Layout(flex_flow="row wrap"))
        for part, name in ((box, "dl-inbox-row"), (label, "dl-inbox-run"),
                           (approve, "dl-approve"), (reject, "dl-reject")):
            part.add_class(name)
        return _Row(run, label, approve, reject, box)

    def _decide(self, seen: Run, approved: bool):
        verb = "Approve" if approved else "Reject"
        self._guarded((f"{verb} {seen.run_id}",
                       lambda: self.model.decide(seen.run_id, approved, seen=seen)),
                      ("Refresh", self.refresh))                # redraw, whatever happened

    def _guarded(self, *actions):
        """Run a click's (label, action) pairs in order; show every error in the panel's
        error line instead of losing it, and clear the line when all went well."""
        errors = []
        for what, action in actions:
            try:
                action()
            except Exception as exc:  # shown, not raised: a raise vanishes into the log console
                self.last_error = exc
                errors.append(f"<div style='color:#c0392b'><b>{html.escape(what)} failed:</b> "
                              f"{html.escape(type(exc).__name__)}: {html.escape(str(exc))}</div>")
        if not errors:
            self.last_error = None
        self.error.value = "".join(errors)

    def _log_html(self) -> str:
        if not self.model.decisions:
            return "<div style='color:#777'>No decisions yet.</div>"
        lines = "".join(
            f"<div style='{'' if d.outcome == TAKEN else 'color:#b35900'}'>"
            f"{html.escape(d.text())}</div>" for d in self.model.decisions)
        return f"<div style='font-family:monospace; font-size:0.9em'>{lines}</div>"

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.panel._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)      # short and stable for notebook diffs
        return bundle

    def __repr__(self):
        return f"ApprovalInbox({len(self.rows)} waiting for {self.model.signal!r})"
