"""An approval inbox: the runs parked on a person's decision, with Approve and Reject.

A run that calls `ctx.wait_for_signal("approval", timeout=...)` parks: it is a row in the
store with status "waiting", holding no thread and no process. The inbox is what a
reviewer sees. Deciding does two things, exactly what a web handler behind real buttons
would do:

    engine.signal(run_id, "approval", {"approved": True, "by": "ana", "note": ""})
    engine.recover()        # continue every run whose signal arrived or whose deadline passed

`InboxModel` is the logic in plain Python (tests drive it directly); `ApprovalInbox` is an
ipywidgets panel that only shows a model and forwards clicks to it. Build a new inbox on a
new engine after a restart: the inbox keeps nothing that the store does not.
"""

import html
from dataclasses import dataclass
from typing import Callable, List, Optional

from ..run import Run
from ..store.records import WAITING


@dataclass(frozen=True)
class Decision:
    """One click, and what the run did next."""

    run_id: str
    approved: bool
    by: str
    status: str              # the run's status right after the decision was delivered
    result: object = None


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

    def approve(self, run_id: str, note: str = "") -> Run:
        return self.decide(run_id, True, note)

    def reject(self, run_id: str, note: str = "") -> Run:
        return self.decide(run_id, False, note)

    def decide(self, run_id: str, approved: bool, note: str = "") -> Run:
        """Deliver the decision durably, then let the engine continue what is due."""
        payload = {"approved": bool(approved), "by": self.reviewer, "note": note}
        self.engine.signal(run_id, self.signal, payload)
        self.engine.recover()
        run = self.engine.get(run_id)
        self.decisions.append(Decision(run_id, bool(approved), self.reviewer, run.status, run.result))
        return run

    def __repr__(self):
        return f"InboxModel({len(self.pending())} waiting for {self.signal!r})"


# the widget --------------------------------------------------------------------------------
def _deadline_text(hours: float) -> str:
    if hours <= 0:
        return "<span style='color:#c0392b'>deadline passed: escalates at the next recover()</span>"
    if hours < 24:
        return f"<span style='color:#b35900'>deadline in {hours:.1f} h</span>"
    return f"deadline in {hours / 24:.1f} days"


@dataclass
class _Row:
    run_id: str
    label: object            # ipywidgets.HTML
    approve: object          # ipywidgets.Button
    reject: object           # ipywidgets.Button
    box: object              # ipywidgets.HBox


class ApprovalInbox:
    """The panel: one line per waiting run with Approve / Reject, and a log of decisions.

    `inbox.buttons(run_id)` returns that run's (approve, reject) buttons, so code can click
    them the way a reviewer would: `inbox.buttons("refund-A-101")[0].click()`.
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
        self.refresh_button = w.Button(description="Refresh", icon="refresh",
                                       tooltip="re-read the store (after a restart or a deadline)")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.panel = w.VBox([w.HBox([self.header, self.refresh_button]), self.list, self.log])
        self.rows: List[_Row] = []
        self.refresh()

    def buttons(self, run_id: str):
        for row in self.rows:
            if row.run_id == run_id:
                return row.approve, row.reject
        waiting = [row.run_id for row in self.rows]
        raise KeyError(f"run {run_id!r} is not in the inbox (waiting: {waiting})")

    def refresh(self):
        m = self.model
        pending = m.pending()
        self.rows = [self._row(run) for run in pending]
        self.list.children = [row.box for row in self.rows]
        noun = "run" if len(pending) == 1 else "runs"
        self.header.value = (f"<b>{len(pending)} {noun} waiting for "
                             f"<code>{html.escape(m.signal)}</code></b>")
        self.log.value = self._log_html()

    def _row(self, run: Run) -> _Row:
        w = self._w
        text = (f"<code>{html.escape(run.run_id)}</code> — {html.escape(self.model.describe(run))}"
                f" — {_deadline_text(self.model.hours_left(run))}")
        label = w.HTML(text, layout=w.Layout(width="560px"))
        approve = w.Button(description="Approve", button_style="success", icon="check")
        reject = w.Button(description="Reject", button_style="danger", icon="times")
        approve.on_click(lambda _, rid=run.run_id: self._decide(rid, True))
        reject.on_click(lambda _, rid=run.run_id: self._decide(rid, False))
        return _Row(run.run_id, label, approve, reject, w.HBox([label, approve, reject]))

    def _decide(self, run_id, approved):
        self.model.decide(run_id, approved)
        self.refresh()

    def _log_html(self) -> str:
        if not self.model.decisions:
            return "<div style='color:#777'>No decisions yet.</div>"
        lines = "".join(
            f"<div><code>{html.escape(d.run_id)}</code>: "
            f"{'approved' if d.approved else 'rejected'} by {html.escape(d.by)} → run "
            f"{html.escape(d.status)}{'' if d.result is None else ', ' + html.escape(str(d.result))}</div>"
            for d in self.model.decisions)
        return f"<div style='font-family:monospace; font-size:0.9em'>{lines}</div>"

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.panel._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)      # short and stable for notebook diffs
        return bundle

    def __repr__(self):
        return f"ApprovalInbox({len(self.rows)} waiting for {self.model.signal!r})"
