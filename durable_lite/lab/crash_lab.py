"""The crash lab: run a workflow, crash it where you choose, resume it, count.

`CrashLabModel` holds all the logic in plain Python, so a test (or a curious learner) can
drive it without a browser. `CrashLab` is an ipywidgets panel that only displays a model
and forwards clicks to it.

By default it runs what the lessons run: `dl.examples.refund` (lookup -> refund -> email ->
close) against a `dl.sim.World` in its own folder, crashed with `dl.faults.CrashAt`.

    naive               `dl.naive.NaiveRunner`, no key, the careless payments provider.
                        Resume = the job queue redelivers the job: it starts from the top.
    checkpointed        `dl.Engine` on a SQLite store, no key, the careless provider.
                        Resume = a fresh engine (standing for a fresh process) continues
                        from the checkpoints in the store.
    checkpointed + key  the same, plus an idempotency key and the provider that honours it.

Any other workflow works too (its first parameter is the world's folder, as in every
lesson): `dl.lab.CrashLab(my_workflow, "A-17", 40)`. Its crash menu lists every point a
clean run passes, before each step, after its effect and after its checkpoint (found by
`dl.faults.crash_points`, the sweep's discovery, so the menu and a sweep's heat map list the
same points, under the same names: "sms · after effect"); its counters
are the world's ledgers that run touched, ledgers of your own included. Its modes are
"naive" and "checkpointed" (pass `modes=[dl.lab.CrashLabMode(...), ...]` for variants such
as a key). A run that waits for a signal gets it as soon as it parks (`waits="deadline"`
lets the deadline pass instead), so one click is one attempt of the process.

In a notebook: `dl.lab.CrashLab()` as the last line of a cell shows the panel.
In code: `dl.lab.CrashLabModel("checkpointed", ("refund", "after_effect")).play().counters`.
"""

import html
import json
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from .. import jsonvalue
from ..clock import FakeClock, SequentialIds
from ..engine import Engine
from ..errors import Crash
from ..examples import REFUND_STEPS, refund
from ..faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP, CrashAt
from ..naive import NaiveRunner
from ..sim import World, forget_worlds
from ..store import SQLiteStore
from ..store.records import COMPENSATED, COMPLETED, SLEEPING, STEP, WAITING

NAIVE = "naive"
CHECKPOINTED = "checkpointed"
WITH_KEY = "checkpointed + key"
MODES = (NAIVE, CHECKPOINTED, WITH_KEY)


@dataclass(frozen=True)
class CrashLabMode:
    """One way of running the lab's workflow: a label for the toggle, the runner ("naive"
    or "durable"), and keyword arguments the workflow gets in this mode only."""
    label: str
    runner: str = "durable"
    kwargs: dict = field(default_factory=dict)
    about: str = ""


REFUND_MODES = (
    CrashLabMode(NAIVE, "naive", {"use_key": False, "careless": True},
         "a job queue retries the whole job from the top; nothing is recorded"),
    CrashLabMode(CHECKPOINTED, "durable", {"use_key": False, "careless": True},
         "each step's result is checkpointed; a resume replays what is recorded"),
    CrashLabMode(WITH_KEY, "durable", {"use_key": True, "careless": False},
         "checkpoints, plus an idempotency key the payments provider honours"))

# Where a crash can land in the refund: nowhere, or at one of two points around each step.
# "after_effect" is the dangerous window: the step's work is done (money moved, mail sent)
# but its checkpoint is not written. The naive runner has no checkpoint, so for it both
# points are the same moment. ("before_step" of a step is the same moment as
# "after_checkpoint" of the one before, so the menu leaves it out.)
CRASH_CHOICES: Tuple[Optional[Tuple[str, str]], ...] = (
    None, *[(step, when) for step in REFUND_STEPS for when in (AFTER_EFFECT, AFTER_CHECKPOINT)])

RUN_ID = "refund-A-17"
FINISHED = ("completed", "compensated", "failed")       # the lab's statuses once a run ended
_DEFAULT = object()        # "the workflow's usual crash": ("email", AFTER_CHECKPOINT) for the refund
_MAX_PARKS = 20            # waits answered within one attempt before the lab gives up


def describe_crash(crash, order=REFUND_STEPS) -> str:
    """A short label for a crash choice, as the dropdown shows it. `order` lists the labels
    of the workflow's steps (and waits) in the order a run reaches them."""
    if crash is None:
        return "no crash"
    step, when = crash
    if when == AFTER_EFFECT:
        return f"{step}: after the effect, before the checkpoint"
    if when == BEFORE_STEP:
        return f"before {step}"
    order = list(order)
    later = order[order.index(step) + 1:] if step in order else []
    return f"between {step} and {later[0]}" if later else f"after {step}, before the run ends"


def crash_key(crash) -> str:
    """A string id for a crash choice ("none", "refund:after_effect")."""
    return "none" if crash is None else f"{crash[0]}:{crash[1]}"


def crash_from_key(key: str):
    if key == "none":
        return None
    step, _, when = key.rpartition(":")
    return (step, when)


@dataclass(frozen=True)
class LogLine:
    attempt: int
    kind: str        # "attempt", "executed", "replayed", "waiting", "crash", "note",
                     # "completed", "compensated", "failed"
    text: str
    step: Optional[str] = None


# Friendlier names for the built-in ledgers; a ledger of your own shows its own name.
LEDGER_LABELS = {"refunds": "refunds paid", "emails": "emails sent", "tickets_closed": "tickets closed",
                 "llm_calls": "model calls", "tool_calls": "tool calls"}


class CrashLabModel:
    """One run of one workflow, one world, one store; Run, crash, Resume, count.

    status: "ready" (nothing ran yet), "crashed" (waiting for Resume), "completed",
    "compensated" (a step failed for good and a saga undid what the run had done: an ending
    of its own, not an error), or "failed" (the run ended in an error; see the log).
    """

    def __init__(self, mode: Optional[str] = None, crash=_DEFAULT, *, workflow=None, args=None,
                 kwargs=None, modes=None, waits="signal"):
        from ..sweep import _registered, crash_points

        if workflow is None:
            self.workflow = refund
            self.args = ("A-17", 40) if args is None else tuple(args)
            self.run_id = RUN_ID
        else:
            self.workflow = _registered(workflow)
            self.args = tuple(args or ())
            self.run_id = f"{self.workflow.name}-lab"
        self.kwargs = dict(kwargs or {})
        self.waits = waits
        chosen = modes is not None
        modes = list(modes) if chosen else (
            list(REFUND_MODES) if workflow is None else
            [CrashLabMode(NAIVE, "naive", {}, "a job queue retries the whole job from the top"),
             CrashLabMode(CHECKPOINTED, "durable", {},
                          "each step is checkpointed; a resume replays them")])
        if not modes:
            raise ValueError("the crash lab needs at least one mode")
        self.modes = {m.label: m for m in modes}
        # The crash menu and the counters come from one clean run (the sweep's discovery),
        # by the first checkpointed mode: it also sees waits and sleeps.
        probe = next((m for m in modes if m.runner == "durable"), modes[0])
        clean, points = crash_points(self.workflow, *self.args, runner=probe.runner, waits=waits,
                                     run_id=self.run_id, **{**self.kwargs, **probe.kwargs})
        if not chosen and any(p.kind != "step" for p in points):
            # the naive runner has no waits or sleeps: offer it only for plain workflows
            self.modes = {k: m for k, m in self.modes.items() if m.runner != "naive"} or self.modes
        self.clean = clean
        self.order = list(dict.fromkeys(p.step for p in points))
        # A workflow of your own gets every point the sweep found, in the sweep's order, so
        # the menu and the sweep's heat map list the same points. The refund's menu, which
        # the lessons walk through, leaves out the "before" points: each is the moment just
        # after the previous step's checkpoint, "between lookup and refund" (CRASH_CHOICES).
        self.crash_choices = (None, *[(p.step, p.when) for p in points
                                      if workflow is not None or p.when != BEFORE_STEP])
        # ... and under the heat map's names for them ("sms · after effect"); the refund
        # keeps the names its lessons tell its story with ("between email and close").
        self._labels = None if workflow is None else {(p.step, p.when): p.label for p in points}
        self.ledgers = list(clean["effects"])
        if mode is None:
            mode = NAIVE if workflow is None and NAIVE in self.modes else next(iter(self.modes))
        if crash is _DEFAULT:
            crash = ("email", AFTER_CHECKPOINT) if workflow is None else None
        self._folder = None
        self.mode, self.crash = mode, None
        self.reset(mode, crash)

    # settings ---------------------------------------------------------------------------
    def reset(self, mode: Optional[str] = None, crash="unchanged"):
        """Start over: a fresh world, a fresh store, nothing run. Optionally new settings."""
        mode = self.mode if mode is None else mode
        crash = self.crash if crash == "unchanged" else crash
        if mode not in self.modes:
            raise ValueError(f"mode {mode!r} is not one of {tuple(self.modes)}")
        if crash is not None:
            crash = tuple(crash)
            if crash not in self.crash_choices:
                raise ValueError(f"crash point {crash!r} is not one of {self.crash_choices[1:]} (or None)")
        self._close()
        self.mode, self.crash = mode, crash
        from .workspace import scratch_folder
        self._folder = scratch_folder("crash-lab")
        self.world = World(self._folder)
        self.store = SQLiteStore(self._folder.file("runs.db"))
        self.clock = FakeClock()
        self.ids = SequentialIds("id")
        self.status = "ready"
        self.notice = ""            # a sentence for the learner, not an error (see resume)
        self.attempt = 0
        self.result = None
        self.log: List[LogLine] = []

    def describe(self, crash) -> str:
        """The dropdown's label for a crash choice of this workflow: for a workflow of your
        own, the name the sweep's heat map gives the same point."""
        if crash is not None and self._labels is not None:
            return self._labels.get(tuple(crash), describe_crash(crash, self.order))
        return describe_crash(crash, self.order)

    @property
    def about(self) -> str:
        """What the selected mode does, in a line."""
        return self.modes[self.mode].about

    # actions ----------------------------------------------------------------------------
    @property
    def can_run(self) -> bool:
        return self.status == "ready"

    @property
    def can_resume(self) -> bool:
        return self.status == "crashed"

    def run(self) -> str:
        """First attempt, with the chosen crash armed. Returns the new status."""
        if not self.can_run:
            raise RuntimeError(f"the run is {self.status}; press Reset to run it again")
        self.notice = ""
        return self._attempt(self.crash)

    def resume(self) -> str:
        """Next attempt after a crash (no crash armed this time). Returns the new status.

        With nothing to resume (the run finished, or has not started), nothing runs and
        nothing is refused: the status stays as it was, as `engine.resume` hands a finished
        run back unchanged, and `notice` says so in a sentence (the panel shows it; a
        second click that reaches the kernel after the run finished is no error)."""
        if not self.can_resume:
            self.notice = nothing_to_resume(self.status)
            return self.status
        self.notice = ""
        return self._attempt(None)

    def _attempt(self, crash) -> str:
        self.attempt += 1
        self.clock.advance(60)          # each attempt a minute later, so the history shows it
        self._say("attempt", self._attempt_title())
        crash_at = None
        if crash is not None:
            name, occurrence = _name_and_occurrence(crash[0])
            crash_at = CrashAt(name, crash[1], occurrence=occurrence)
        mode = self.modes[self.mode]
        try:
            if mode.runner == "naive":
                status, self.result, error = self._naive_attempt(mode, crash_at)
            else:
                status, self.result, error = self._durable_attempt(mode, crash_at)
        except Crash:
            step, when = crash
            if when == AFTER_EFFECT and mode.runner != "naive":
                # the step's function ran but no checkpoint was written, so the engine's
                # hook never reported it: log the work the world saw
                self._say("executed", f"{step}: executed (its checkpoint was never written)", step)
            self._say("crash", f"CRASH ({self.describe(crash)}): the process is gone", step)
            self.status = "crashed"
            return self.status
        if crash is not None:
            self._say("note", f"the crash point ({self.describe(crash)}) was never reached")
        if status == COMPLETED:
            self._say("completed", f"completed: {_result_text(self.result)}")
            self.status = "completed"
        elif status == COMPENSATED:
            self._say("compensated", f"compensated: {_undone_text(self.result)}")
            self.status = "compensated"
        else:
            self._say("failed", f"the run ended {status}: {error}")
            self.status = "failed"
        return self.status

    def _attempt_title(self) -> str:
        if self.attempt == 1:
            return "attempt 1: the job starts"
        if self.modes[self.mode].runner == "naive":
            return f"attempt {self.attempt}: the queue redelivers the job; it starts from the top"
        return f"attempt {self.attempt}: a fresh engine resumes the run from the store"

    def _naive_attempt(self, mode, crash_at):
        runner = NaiveRunner(max_attempts=1, clock=self.clock, ids=self.ids, crash_at=crash_at)
        try:
            outcome = runner.run(self.workflow, self._folder, *self.args, run_id=self.run_id,
                                 **{**self.kwargs, **mode.kwargs})
        finally:
            for _, step in runner.executions:
                self._say("executed", f"{step}: executed", step)
        if crash_at is not None and not runner._crashes:       # it fired: the process is gone
            raise Crash(outcome.errors[-1])
        return outcome.status, outcome.result, outcome.errors[-1] if outcome.errors else None

    def _durable_attempt(self, mode, crash_at):
        # a new Engine object per attempt: nothing carries over in memory, only the store
        engine = Engine(self.store, self.clock, ids=self.ids, worker=f"worker-{self.attempt}",
                        crash_at=crash_at)
        engine.on_step = lambda label, how: self._say(how, self._step_text(label, how), label)
        if self.attempt == 1:
            run = engine.start(self.workflow, self._folder, *self.args, run_id=self.run_id,
                               **{**self.kwargs, **mode.kwargs})
        else:
            run = engine.resume(self.run_id)
        for _ in range(_MAX_PARKS):      # a parked run is answered at once, in this attempt
            if run.status not in (WAITING, SLEEPING):
                break
            self._answer(engine, run)
            run = engine.resume(self.run_id)
        return run.status, run.result, run.error

    def _step_text(self, label, how) -> str:
        """The log line for a step. An executed step whose answer says the other side had
        seen its idempotency key before did its work no second time: the line says so, or
        a log showing "refund: executed" twice beside 1 refund paid would look like a bug."""
        if how == "executed":
            note = repeat_note(self._recorded_result(label))
            if note:
                return f"{label}: executed ({note})"
        return f"{label}: {how}"

    def _recorded_result(self, label):
        """The result the step's checkpoint holds (written just before the hook is called)."""
        for entry in reversed(self.store.load_entries(self.run_id)):
            if entry.label == label and entry.kind == STEP:
                return jsonvalue.decode(entry.result_json)
        return None

    def _answer(self, engine, run):
        name = run.waiting_for
        payload = (self.waits.get(name, True) if isinstance(self.waits, dict)
                   else True if self.waits == "signal" else None)
        if run.status == SLEEPING:
            self.clock.advance(max(0.0, run.wake_at - self.clock()))
            self._say("waiting", f"{name}: sleeping; the clock jumps to its wake time", name)
        elif payload is None:
            self.clock.advance(max(0.0, run.wake_at - self.clock()))
            self._say("waiting", f"{name}: waiting; nobody answers, the deadline passes", name)
        else:
            engine.signal(self.run_id, name, payload)
            self._say("waiting", f"{name}: waiting; the lab sends the signal {json.dumps(payload)}", name)

    def _say(self, kind, text, step=None):
        self.log.append(LogLine(self.attempt, kind, text, step))

    # what the world saw -----------------------------------------------------------------
    @property
    def effects(self) -> dict:
        """The world's ledgers the clean run touched (and any other that moved), counted now."""
        summary = self.world.summary()
        return {**{k: summary.get(k, 0) for k in self.ledgers},
                **{k: n for k, n in summary.items() if n and k not in self.ledgers}}

    @property
    def counters(self) -> dict:
        """Effects per ledger (refunds paid, emails sent, ...), step executions and replays so far."""
        return {**self.effects,
                "executed": sum(1 for line in self.log if line.kind == "executed"),
                "replayed": sum(1 for line in self.log if line.kind == "replayed"),
                "attempts": self.attempt}

    def history(self) -> list:
        """The engine's history of the run (empty in naive mode: nothing is recorded)."""
        if self.modes[self.mode].runner == "naive" or self.store.get_run(self.run_id) is None:
            return []
        return Engine(self.store, self.clock, worker="reader").history(self.run_id)

    def log_text(self) -> str:
        return "\n".join(("" if line.kind == "attempt" else "    ") + line.text for line in self.log)

    def play(self) -> "CrashLabModel":
        """Run, then resume until the run completes. Returns self, for chaining."""
        self.run()
        while self.can_resume:
            self.resume()
        return self

    def _close(self):
        """Release the previous world's files (a learner may press Reset many times)."""
        if self._folder is None:
            return
        forget_worlds(self._folder)
        self.world.close()
        self.store.close()

    def __repr__(self):
        return (f"CrashLabModel(mode={self.mode!r}, crash={self.describe(self.crash)!r}, "
                f"status={self.status!r}, counters={self.counters})")


def _name_and_occurrence(label: str):
    name, sep, n = label.rpartition("#")
    return (name, int(n)) if sep and n.isdigit() else (label, 1)


def nothing_to_resume(status: str) -> str:
    """What Resume says when the run has not crashed: plainly, that there is nothing to do."""
    if status == "ready":
        return "Nothing to resume: the run has not started yet. Press Run."
    if status == "failed":
        return "Nothing to resume: the run ended failed (see the log). Press Reset to start over."
    if status == "compensated":
        return "Nothing to resume: the run ended compensated. Press Reset to run it again."
    return f"Nothing to resume: the run has {status}. Press Reset to run it again."


def repeat_note(answer) -> Optional[str]:
    """What a step's answer says about its idempotency key, in words; None if the answer
    does not say it was a repeat. The simulated world's providers answer a repeated key with
    the first call's result and `"repeat": true` (as Stripe replays the first response)."""
    if not (isinstance(answer, dict) and answer.get("repeat") is True):
        return None
    if "refund_id" in answer:
        return f"the provider recognised the key and answered {answer['refund_id']} again: no new payment"
    if "message_id" in answer:
        return f"the mailer recognised the key and answered {answer['message_id']} again: no new email"
    return "the other side recognised the key: nothing was done a second time"


def _undone_text(result) -> str:
    """What a saga's result says: which step failed for good, and what was undone."""
    if not isinstance(result, dict):
        return _result_text(result)
    failed = result.get("failed_step")
    why = f"step {failed} failed for good" if failed else str(result.get("error") or "given up")
    undos = result.get("undos") or []
    return why + (f"; undone, newest first: {', '.join(undos)}" if undos else "; nothing to undo")


def _result_text(result) -> str:
    if isinstance(result, dict) and {"refund_id", "order"} <= set(result):
        return f"refund {result['refund_id']} for {result['order']}"
    text = json.dumps(result)
    return text if len(text) <= 100 else text[:97] + "..."


def crash_lab_sweep(modes=None, crashes=None, **model_options) -> List[dict]:
    """Play every mode x crash point to completion; one row of counters per pair.

    `modes` are labels of the model's modes, or `CrashLabMode` objects (then they are the modes).
    `model_options` go to `CrashLabModel` (e.g. workflow=..., args=...); by default the
    refund, in its three modes, at every crash point of its menu.
    """
    if modes is not None and all(isinstance(m, CrashLabMode) for m in modes):
        model_options["modes"] = list(modes)
        modes = [m.label for m in modes]
    model = CrashLabModel(None if modes is None else list(modes)[0], None, **model_options)
    modes = list(model.modes) if modes is None else list(modes)
    crashes = model.crash_choices if crashes is None else crashes
    rows = []
    for mode in modes:
        for crash in crashes:
            model.reset(mode, crash)
            counts = model.play().counters
            rows.append({"mode": mode, "crash": model.describe(crash), **counts})
    model._close()
    return rows


# the widget ------------------------------------------------------------------------------
_KIND_STYLE = {"attempt": "font-weight:bold; margin-top:4px",
               "executed": "color:#b35900; padding-left:1.5em",
               "replayed": "color:#2b7a3d; padding-left:1.5em",
               "waiting": "color:#6c3483; padding-left:1.5em",
               "crash": "color:#c0392b; font-weight:bold; padding-left:1.5em",
               "note": "color:#777; font-style:italic; padding-left:1.5em",
               "completed": "color:#1f4e99; padding-left:1.5em",
               "compensated": "color:#6c3483; padding-left:1.5em",
               "failed": "color:#c0392b; padding-left:1.5em"}

# The panel's own CSS: the selected mode filled dark blue, disabled buttons faded and
# struck through, so neither depends on the theme's subtle defaults.
_CSS = """<style>
.dl-crash-lab .dl-mode .widget-toggle-button.mod-active {
  background: #1f4e99 !important; color: #fff !important; font-weight: bold; box-shadow: none; }
.dl-crash-lab .dl-mode .widget-toggle-button:not(.mod-active) { background: #f2f4f6; color: #444; }
.dl-crash-lab .dl-mode .widget-toggle-button i.fa { margin-left: 0.45em; }
.dl-crash-lab button.jupyter-button:disabled {
  opacity: 0.35 !important; text-decoration: line-through; cursor: not-allowed; }
</style>"""


def _mode_width(modes) -> str:
    """A width for the mode buttons that holds the longest label in bold and its check
    mark: about 0.62 em a character, plus the icon and the padding."""
    return f"{0.62 * max(len(label) for label in modes) + 3.6:.1f}em"


def _counters_html(model) -> str:
    c = model.counters
    clean = model.clean["effects"]
    ledgers = [(LEDGER_LABELS.get(k, k), c[k], clean.get(k, 0)) for k in model.effects]
    cells = [*ledgers, ("steps executed", c["executed"], None), ("steps replayed", c["replayed"], None)]
    boxes = "".join(
        f"<div style='display:inline-block; min-width:7em; margin-right:1em; text-align:center'>"
        f"<div style='font-size:1.8em; font-weight:bold; color:{'#c0392b' if base is not None and n > base else '#222'}'>{n}</div>"
        f"<div class='dl-count-label' style='font-size:0.95em'>{label}</div></div>"
        for label, n, base in cells)
    return f"<div>{boxes}</div>{_bars_html(ledgers, model.status in FINISHED)}"


def _bars_html(ledgers, finished) -> str:
    """One bar per ledger with its count written on it, and a tick at the clean run's count.
    Once the run has finished, a note says how far each count is from the clean run's."""
    if not ledgers:
        return ""
    top = max(2, *(n for _, n, _ in ledgers), *(b for _, _, b in ledgers))
    rows = []
    for label, n, base in ledgers:
        color = "#c0392b" if n > base else "#2c7bb6" if n < base else "#7f8c8d"
        width = 100 * n / top
        rows.append(
            f"<div style='display:flex; align-items:center; margin:2px 0'>"
            f"<div style='width:9em'>{html.escape(label)}</div>"
            f"<div style='position:relative; width:16em; height:1.3em; background:#f2f4f6'>"
            f"<div style='width:{width:.0f}%; height:100%; background:{color}'></div>"
            f"<div style='position:absolute; left:{100 * base / top:.0f}%; top:-2px; bottom:-2px; "
            f"border-left:2px dashed #222' title='a run with no crash: {base}'></div>"
            f"<div style='position:absolute; left:0.4em; top:0; font-weight:bold; font-size:0.85em; "
            f"line-height:1.3em; color:{'#fff' if n else '#222'}'>{n}</div></div>"
            f"<div class='dl-versus' style='margin-left:0.6em; {_versus_style(n, base, finished)}'>"
            f"{_versus(n, base) if finished else f'so far (no crash: {base})'}</div></div>")
    caption = ("<div style='font-size:0.95em; color:#333; margin-top:0.4em'>Bars: what the world "
               "saw so far; the dashed line is what a run with no crash leaves.</div>")
    return caption + "".join(rows)


def _versus_style(n, base, finished) -> str:
    """The result beside a bar, as large as the panel's text: red and bold for an effect
    done twice, blue and bold for one lost, dark for the same as a run with no crash."""
    if finished and n > base:
        return "color:#c0392b; font-weight:bold"
    if finished and n < base:
        return "color:#1f4e99; font-weight:bold"
    return "color:#222"


def _versus(n, base) -> str:
    if n == base:
        return "as with no crash"
    return f"{n - base:+d} vs no crash ({base}): {'done twice' if n > base else 'lost'}"


def _log_html(model) -> str:
    if not model.log:
        return "<div style='color:#777'>Nothing has run yet. Press Run.</div>"
    lines = "".join(f"<div style='{_KIND_STYLE[line.kind]}'>{html.escape(line.text)}</div>"
                    for line in model.log)
    return f"<div style='font-family:monospace; font-size:0.9em; line-height:1.5'>{lines}</div>"


def _status_html(model) -> str:
    hint = {"ready": "Ready. Press Run.",
            "crashed": "Crashed. Press Resume to try again.",
            "completed": "Completed. Change a setting or press Reset to start over.",
            "compensated": "Compensated: a step failed for good, and the saga undid what the "
                           "run had done. Change a setting or press Reset to start over.",
            "failed": "The run failed (see the log). Press Reset to start over."}[model.status]
    return f"<b>{hint}</b>"


def _mode_html(model) -> str:
    about = f" — {html.escape(model.about)}" if model.about else ""
    return (f"<div style='font-size:1em'>Selected mode: <b style='color:#1f4e99'>"
            f"{html.escape(model.mode)}</b>{about}</div>")


def _notice_html(text) -> str:
    """A plain sentence where errors show, in the panel's own blue: nothing went wrong."""
    return ("<div style='color:#1f4e99; background:#eaf1fb; padding:4px 8px; border-radius:3px'>"
            f"{html.escape(text)}</div>")


def _error_html(exc) -> str:
    return ("<div style='color:#fff; background:#c0392b; padding:4px 8px; border-radius:3px'>"
            f"<b>{html.escape(type(exc).__name__)}:</b> {html.escape(str(exc))}</div>")


class CrashLab:
    """The panel: mode, crash point, Run / Resume / Reset, counters, bars and a log.

    `CrashLab()` is the refund; `CrashLab(wf, *args, **kwargs)` any workflow whose first
    parameter is the world's folder (the lab passes a fresh one). `mode`, `crash`, `modes`,
    `waits` and `model` are the lab's own keyword arguments; the rest go to the workflow.

    Changing the mode or the crash point starts over with a fresh world and store, so the
    counters always describe one run under one setting. An error in a click is shown in
    the panel, not only in the log console.
    """

    def __init__(self, wf=None, *args, mode: Optional[str] = None, crash=_DEFAULT,
                 model: Optional[CrashLabModel] = None, modes=None, waits="signal", **kwargs):
        import ipywidgets as w

        self.model = model or CrashLabModel(mode, crash, workflow=wf, args=args or None,
                                            kwargs=kwargs, modes=modes, waits=waits)
        m = self.model
        self.mode = w.ToggleButtons(options=list(m.modes), value=m.mode, description="Mode:",
                                    tooltips=[mode.about for mode in m.modes.values()],
                                    style={"button_width": _mode_width(m.modes),
                                           "description_width": "initial"},
                                    layout=w.Layout(width="auto", flex_flow="row wrap"))
        self.mode_caption = w.HTML()
        self.crash = w.Dropdown(options=[(m.describe(c), crash_key(c)) for c in m.crash_choices],
                                value=crash_key(m.crash), description="Crash:",
                                layout=w.Layout(width="420px"))
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.resume_button = w.Button(description="Resume", button_style="warning", icon="redo")
        self.reset_button = w.Button(description="Reset", icon="refresh")
        self.error = w.HTML()
        self.status = w.HTML()
        self.counters = w.HTML()
        self.log = w.HTML()
        self.panel = w.VBox([w.HTML(_CSS), self.mode, self.mode_caption, self.crash,
                             w.HBox([self.run_button, self.resume_button, self.reset_button]),
                             self.error, self.status, self.counters, self.log])
        # Stable names for the parts, for CSS and for tests in a real browser.
        for part, name in ((self.panel, "dl-crash-lab"), (self.mode, "dl-mode"),
                           (self.crash, "dl-crash-point"), (self.run_button, "dl-run"),
                           (self.resume_button, "dl-resume"), (self.reset_button, "dl-reset"),
                           (self.error, "dl-error"), (self.status, "dl-status"),
                           (self.counters, "dl-counters"), (self.log, "dl-log")):
            part.add_class(name)

        self.mode.observe(self._on_settings, names="value")
        self.crash.observe(self._on_settings, names="value")
        self.run_button.on_click(lambda _: self._do(self.model.run))
        self.resume_button.on_click(lambda _: self._do(self.model.resume))
        self.reset_button.on_click(lambda _: self._do(self.model.reset))
        self.refresh()

    def _on_settings(self, _change):
        self._do(lambda: self.model.reset(self.mode.value, crash_from_key(self.crash.value)))

    def _do(self, action):
        """Run a click's action; show any error in the panel (a callback's exception would
        otherwise only reach the browser's log console)."""
        try:
            action()
        except Exception as exc:
            self.refresh()
            self.error.value = _error_html(exc)
            return
        notice = getattr(self.model, "notice", "")
        self.error.value = _notice_html(notice) if notice else ""
        self.refresh()

    def refresh(self):
        m = self.model
        # the selected mode carries a check mark, so it stands out even without the CSS
        self.mode.icons = ["check" if label == m.mode else "" for label in m.modes]
        self.mode_caption.value = _mode_html(m)
        for button, enabled, style, why in (
                (self.run_button, m.can_run, "primary", "The run has started: press Reset to run again."),
                (self.resume_button, m.can_resume, "warning", "Nothing to resume: the run has not crashed.")):
            button.disabled = not enabled
            button.button_style = style if enabled else ""
            button.tooltip = "" if enabled else why
        self.status.value = _status_html(m)
        self.counters.value = _counters_html(m)
        self.log.value = _log_html(m)

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.panel._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)     # short and stable for notebook diffs
        return bundle

    def __repr__(self):
        m = self.model
        wf = "" if m.workflow is refund else f"{m.workflow.name!r}, "
        return f"CrashLab({wf}mode={m.mode!r}, crash={m.describe(m.crash)!r})"
