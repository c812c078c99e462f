"""When not to bother: the decision table of lesson 13, as tables and a widget.

The chapter gives three reasons to reach for durability: the run is long (a redo from the
top is slow or expensive), it has irreversible effects, or it waits. `costs.reasons`
answers them for a workload; here a learner answers them first, for the five workloads
in `costs.EXAMPLES`, and checks.

`DecisionTableModel` holds the answers and the check, in plain Python, so tests drive it
without a browser; `DecisionTable` is the widget, a thin view: a yes/no toggle per cell,
the verdict each row's answers lead to, and a Check button that marks and colours every
cell, says why the wrong ones are wrong, and then shows the key.
"""

import html
from typing import Dict, Iterable, List, Optional

from .. import costs
from ..costs import REASONS

QUESTIONS = {"long": "long?", "irreversible": "irreversible effects?", "waits": "waits?"}


class DecisionTableModel:
    """A learner's answers for each workload and reason (True, False, or None: not yet)."""

    def __init__(self, workloads: Iterable[costs.Workload] = costs.EXAMPLES):
        self.workloads = tuple(workloads)
        self.answers: Dict[str, Dict[str, Optional[bool]]] = {
            w.name: {r: None for r in REASONS} for w in self.workloads}
        self.mismatches: Optional[List[costs.Mismatch]] = None     # None: not checked yet

    def set(self, workload: str, reason: str, value: Optional[bool]) -> "DecisionTableModel":
        if workload not in self.answers:
            raise KeyError(f"no workload {workload!r} in this table; it has {list(self.answers)}")
        if reason not in REASONS:
            raise KeyError(f"reason must be one of {REASONS}, not {reason!r}")
        if value not in (True, False, None):
            raise ValueError(f"an answer is True, False or None, not {value!r}")
        self.answers[workload][reason] = value
        self.mismatches = None                   # an answer changed: the old check is stale
        return self

    def fill(self, answers: Dict[str, Dict[str, Optional[bool]]]) -> "DecisionTableModel":
        """Set many answers at once: {workload: {reason: True/False}}."""
        for workload, row in answers.items():
            for reason, value in row.items():
                self.set(workload, reason, value)
        return self

    @property
    def answered(self) -> int:
        return sum(v is not None for row in self.answers.values() for v in row.values())

    @property
    def cells(self) -> int:
        return len(self.workloads) * len(REASONS)

    def verdict(self, workload: str) -> Optional[str]:
        """What this row's answers lead to, once all three are given."""
        row = self.answers[workload]
        return None if None in row.values() else costs.verdict(row)

    def check(self) -> List[costs.Mismatch]:
        """Mark the cells answered so far. A cell not answered yet is not marked, and its
        right answer is not shown: a Check pressed early must not give the key away."""
        self.mismatches = [m for m in costs.check_table(self.answers, self.workloads)
                           if self.answers[m.workload][m.reason] is not None]
        return self.mismatches

    def is_right(self, workload: str, reason: str) -> Optional[bool]:
        """After a check: was this cell right? (None before a check, or not answered.)"""
        if self.mismatches is None or self.answers[workload][reason] is None:
            return None
        return not any(m.workload == workload and m.reason == reason for m in self.mismatches)

    @property
    def right(self) -> Optional[int]:
        return None if self.mismatches is None else self.answered - len(self.mismatches)

    @property
    def complete(self) -> bool:
        """Every cell answered and checked: the key may be shown."""
        return self.mismatches is not None and self.answered == self.cells

    def summary(self) -> str:
        if self.mismatches is None:
            return f"{self.answered} of {self.cells} cells answered; press Check when done"
        if not self.answered:
            return "nothing answered yet: choose yes or no in a cell, then press Check"
        if self.answered < self.cells:
            return (f"{self.right} of the {self.answered} cells answered are right; "
                    f"{self.cells - self.answered} still to answer (the key shows once all are)")
        if not self.mismatches:
            return f"all {self.cells} cells right"
        return f"{self.right} of {self.cells} cells right"

    def __repr__(self):
        return f"DecisionTableModel({len(self.workloads)} workloads, {self.summary()})"


# tables -------------------------------------------------------------------------------------
def workloads_table(workloads: Iterable[costs.Workload] = costs.EXAMPLES):
    """What each workload does, with the two numbers "long" needs: its seconds of work
    and its model dollars per run. (Whether an effect is harmful, or the run waits, is
    for the learner to read in the description.) A DataFrame."""
    import pandas

    rows = [{"workload": w.name, "steps": len(w.steps),
             "work per run (s)": round(w.work_seconds, 1),
             "model $ per run": costs.money(w.dollars),
             "what it does": w.about} for w in workloads]
    return pandas.DataFrame(rows).set_index("workload")


def arithmetic_table(workloads: Iterable[costs.Workload] = costs.EXAMPLES,
                     crashes_per_hour: float = costs.CRASHES_PER_HOUR,
                     checkpoint_seconds: float = 23e-6, runs: int = 1000,
                     worker_dollars_per_hour: float = costs.WORKER_DOLLARS_PER_HOUR):
    """Per `runs` runs at `crashes_per_hour`: what restarting from the top spends beyond
    resuming (worker seconds, a held wait's included; model dollars; duplicated effects),
    what the checkpoints cost, and the ratio of the two in dollars. A DataFrame."""
    import pandas

    rows = []
    for w in workloads:
        b = costs.balance(w, crashes_per_hour, checkpoint_seconds, worker_dollars_per_hour)
        rows.append({"workload": w.name,
                     "worker seconds saved": _num(b.saved_seconds * runs),
                     "model $ saved": _num(b.saved_model_dollars * runs),
                     "duplicate effects": _num(b.duplicates * runs),
                     "checkpoint seconds": _num(b.spent_seconds * runs),
                     "saved / spent ($)": _num(b.ratio) + "x"})
    frame = pandas.DataFrame(rows).set_index("workload")
    frame.columns.name = f"per {runs:,} runs"
    return frame


def answer_key(workloads: Iterable[costs.Workload] = costs.EXAMPLES):
    """The three reasons and the verdict for each workload, with the fact behind each."""
    import pandas

    rows = []
    for w in workloads:
        answers = costs.reasons(w)
        rows.append({"workload": w.name,
                     **{QUESTIONS[r]: "yes" if answers[r] else "no" for r in REASONS},
                     "verdict": costs.verdict(answers)})
    return pandas.DataFrame(rows).set_index("workload")


def _num(value: float) -> str:
    """Three significant digits, in plain notation from 0.000001 to a billion; past a
    billion in powers of ten (a run that almost never finishes costs absurd amounts)."""
    if value == 0:
        return "0"
    if value == float("inf"):
        return "inf"
    if abs(value) < 1e-6:
        return "< 0.000001"
    if abs(value) >= 1e9:
        return f"{value:.2e}"
    digits = max(0, 2 - int(f"{abs(value):e}".split("e")[1]))
    return f"{value:,.{digits}f}"


# the widget ---------------------------------------------------------------------------------
_MARK = {True: "<b style='color:#1e8449'>✓</b>", False: "<b style='color:#c0392b'>✗</b>", None: ""}
RIGHT, WRONG = "dl-right", "dl-wrong"          # a cell's class after a check

# The panel's own CSS. A checked cell's chosen button is filled green or red through a class
# on the toggle, not through ToggleButtons.button_style: ipywidgets 8 redraws the buttons
# with the *previous* button_style whenever anything else about the toggle changes, which
# showed each Check's colours one change late.
_CSS = """<style>
.dl-decision-table .dl-answer .widget-toggle-button { min-width: 0; padding: 0 4px; }
.dl-decision-table .dl-answer .widget-toggle-button.mod-active { font-weight: bold; }
.dl-decision-table .dl-answer.dl-right .widget-toggle-button.mod-active {
  background: #1e8449 !important; color: #fff !important; }
.dl-decision-table .dl-answer.dl-wrong .widget-toggle-button.mod-active {
  background: #c0392b !important; color: #fff !important; }
.dl-decision-table .dl-key table { border-collapse: collapse; margin-top: 4px; }
.dl-decision-table .dl-key th, .dl-decision-table .dl-key td { padding: 2px 10px; text-align: left; }
.dl-decision-table .dl-key th { border-bottom: 1px solid #999; }
</style>"""

# One grid for the whole table, so every row's toggles and marks line up in columns and
# never wrap: the workload, then (answer, mark) for each reason, then the verdict. Too
# narrow a notebook scrolls the table sideways instead of stacking its toggles.
_COLUMNS = "minmax(8.5em, 12em) " + "max-content 1.4em " * len(REASONS) + "minmax(9em, 1fr)"


def key_html(workloads: Iterable[costs.Workload] = costs.EXAMPLES) -> str:
    """The answer key as an HTML table: the three reasons and the verdict per workload."""
    head = "".join(f"<th>{html.escape(h)}</th>"
                   for h in ("workload", *(QUESTIONS[r] for r in REASONS), "verdict"))
    rows = []
    for w in workloads:
        answers = costs.reasons(w)
        cells = [w.name, *("yes" if answers[r] else "no" for r in REASONS), costs.verdict(answers)]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return f"<b>The key</b><table><tr>{head}</tr>{''.join(rows)}</table>"


class DecisionTable:
    """The table to fill: one row per workload, a yes/no toggle per reason, the verdict the
    row's answers lead to, and Check. Check marks every cell ✓ or ✗ (and colours the chosen
    answer), says why each wrong one is wrong, and only then shows the key. A thin view
    over `DecisionTableModel`; `key` is empty until a check, so a saved notebook never
    carries the answers."""

    def __init__(self, workloads: Iterable[costs.Workload] = costs.EXAMPLES,
                 model: Optional[DecisionTableModel] = None):
        import ipywidgets as w

        self.model = model or DecisionTableModel(workloads)
        m = self.model
        self.toggles = {}
        self.marks = {}              # ✓ or ✗ beside each cell after a check
        self.verdicts = {}
        cells = [w.HTML("<b>workload</b>")]
        for r in REASONS:                   # a header as narrow as its toggle: one word a line
            cells += [w.HTML(f"<b>{'<br>'.join(html.escape(QUESTIONS[r]).split())}</b>"), w.HTML()]
        cells.append(w.HTML("<b>your verdict</b>"))
        for workload in m.workloads:
            cells.append(w.HTML(f"<span title='{html.escape(workload.about, quote=True)}'>"
                                f"{html.escape(workload.name)}</span>"))
            for reason in REASONS:
                toggle = w.ToggleButtons(options=[("yes", True), ("no", False)],
                                         value=m.answers[workload.name][reason],
                                         style={"button_width": "3.4em"},
                                         layout=w.Layout(width="max-content"))
                toggle.add_class("dl-answer")
                toggle.observe(self._answer(workload.name, reason), names="value")
                self.toggles[workload.name, reason] = toggle
                self.marks[workload.name, reason] = w.HTML()
                self.marks[workload.name, reason].add_class("dl-mark")
                cells += [toggle, self.marks[workload.name, reason]]
            self.verdicts[workload.name] = w.HTML()
            cells.append(self.verdicts[workload.name])
        self.grid = w.GridBox(cells, layout=w.Layout(grid_template_columns=_COLUMNS,
                                                     grid_gap="2px 6px", align_items="center",
                                                     width="max-content"))
        self.check_button = w.Button(description="Check", button_style="primary",
                                     icon="check")
        self.check_button.on_click(self._check)
        self.status = w.HTML()
        self.why = w.HTML()
        self.key = w.HTML()
        self.panel = w.VBox([w.HTML(_CSS),
                             w.Box([self.grid], layout=w.Layout(overflow="auto", width="100%")),
                             w.HBox([self.check_button, self.status]), self.why, self.key])
        # Stable names for the parts, for CSS and for tests in a real browser.
        for part, name in ((self.panel, "dl-decision-table"), (self.grid, "dl-grid"),
                           (self.check_button, "dl-check"), (self.status, "dl-status"),
                           (self.why, "dl-why"), (self.key, "dl-key")):
            part.add_class(name)
        self.refresh()

    def _answer(self, workload, reason):
        def on_change(change):
            try:
                self.model.set(workload, reason, change["new"])
                self.refresh()
            except Exception as exc:      # shown in the panel: a callback's error is otherwise lost
                self.status.value = f"<span style='color:#c0392b'>{html.escape(str(exc))}</span>"
        return on_change

    def _check(self, _button=None):
        try:
            self.model.check()
            self.refresh()
        except Exception as exc:
            self.status.value = f"<span style='color:#c0392b'>{html.escape(str(exc))}</span>"

    def state(self, workload: str, reason: str) -> Optional[str]:
        """The class a cell carries: RIGHT or WRONG after a check, None before."""
        toggle = self.toggles[workload, reason]
        return next((c for c in (RIGHT, WRONG) if c in toggle._dom_classes), None)

    def refresh(self):
        m = self.model
        for (workload, reason), toggle in self.toggles.items():
            right = m.is_right(workload, reason)
            wanted = {True: RIGHT, False: WRONG, None: None}[right]
            for name in (RIGHT, WRONG):
                if name != wanted and name in toggle._dom_classes:
                    toggle.remove_class(name)
            if wanted and wanted not in toggle._dom_classes:
                toggle.add_class(wanted)
            self.marks[workload, reason].value = _MARK[right]
        for workload, label in self.verdicts.items():
            verdict = m.verdict(workload)
            label.value = ("<span style='color:#999'>…</span>" if verdict is None
                           else html.escape(verdict))
        self.status.value = html.escape(m.summary())
        wrong = m.mismatches or []
        self.why.value = "".join(
            f"<div>✗ <b>{html.escape(x.workload)}</b>, {html.escape(QUESTIONS[x.reason])} "
            f"{'yes' if x.expected else 'no'}: {html.escape(x.why)}</div>" for x in wrong)
        self.key.value = key_html(m.workloads) if m.complete else ""

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.panel._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)        # short and stable for notebook diffs
        return bundle

    def __repr__(self):
        return f"DecisionTable({len(self.model.workloads)} workloads, {self.model.summary()})"
