"""The crash lab: run the refund workflow, crash it where you choose, resume it, count.

`CrashLabModel` holds all the logic in plain Python, so a test (or a curious learner) can
drive it without a browser. `CrashLab` is an ipywidgets panel that only displays a model
and forwards clicks to it.

It runs exactly what the lessons run: `dl.examples.refund` (lookup -> refund -> email ->
close) against a `dl.sim.World` in its own folder, crashed with `dl.faults.CrashAt`.

    naive               `dl.naive.NaiveRunner`, no key, the careless payments provider.
                        Resume = the job queue redelivers the job: it starts from the top.
    checkpointed        `dl.Engine` on a SQLite store, no key, the careless provider.
                        Resume = a fresh engine (standing for a fresh process) continues
                        from the checkpoints in the store.
    checkpointed + key  the same, plus an idempotency key and the provider that honours it.

In a notebook: `dl.lab.CrashLab()` as the last line of a cell shows the panel.
In code: `dl.lab.CrashLabModel("checkpointed", ("refund", "after_effect")).play().counters`.
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..clock import FakeClock, SequentialIds
from ..engine import Engine
from ..errors import Crash
from ..examples import REFUND_STEPS, refund
from ..faults import AFTER_CHECKPOINT, AFTER_EFFECT, CrashAt
from ..naive import NaiveRunner
from ..sim import World, _Ledger
from ..store import SQLiteStore

NAIVE = "naive"
CHECKPOINTED = "checkpointed"
WITH_KEY = "checkpointed + key"
MODES = (NAIVE, CHECKPOINTED, WITH_KEY)

# Where a crash can land: nowhere, or at one of two points around each step. "after_effect"
# is the dangerous window: the step's work is done (money moved, mail sent) but its
# checkpoint is not written. The naive runner has no checkpoint, so for it both points are
# the same moment.
CRASH_CHOICES: Tuple[Optional[Tuple[str, str]], ...] = (
    None, *[(step, when) for step in REFUND_STEPS for when in (AFTER_EFFECT, AFTER_CHECKPOINT)])

RUN_ID = "refund-A-17"


def describe_crash(crash) -> str:
    """A short label for a crash choice, as the dropdown shows it."""
    if crash is None:
        return "no crash"
    step, when = crash
    if when == AFTER_EFFECT:
        return f"{step}: after the effect, before the checkpoint"
    later = REFUND_STEPS[REFUND_STEPS.index(step) + 1:]
    return f"between {step} and {later[0]}" if later else f"after {step}, before the run ends"


def crash_key(crash) -> str:
    """A string id for a crash choice ("none", "refund:after_effect")."""
    return "none" if crash is None else f"{crash[0]}:{crash[1]}"


def crash_from_key(key: str):
    if key == "none":
        return None
    step, _, when = key.partition(":")
    return (step, when)


@dataclass(frozen=True)
class LogLine:
    attempt: int
    kind: str        # "attempt", "executed", "replayed", "crash", "completed"
    text: str
    step: Optional[str] = None


class CrashLabModel:
    """One refund run, one world, one store; Run, crash, Resume, count.

    status: "ready" (nothing ran yet), "crashed" (waiting for Resume), "completed".
    """

    def __init__(self, mode: str = NAIVE, crash=("email", AFTER_CHECKPOINT),
                 order_id: str = "A-17", amount: float = 40):
        self.order_id, self.amount = order_id, amount
        self._folder = None
        self.reset(mode, crash)

    # settings ---------------------------------------------------------------------------
    def reset(self, mode: Optional[str] = None, crash="unchanged"):
        """Start over: a fresh world, a fresh store, nothing run. Optionally new settings."""
        mode = self.mode if mode is None else mode
        crash = self.crash if crash == "unchanged" else crash
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {MODES}")
        if crash is not None:
            crash = tuple(crash)
            if crash not in CRASH_CHOICES:
                raise ValueError(f"crash point {crash!r} is not one of {CRASH_CHOICES[1:]} (or None)")
        self._close()
        self.mode, self.crash = mode, crash
        from .workspace import scratch_folder
        self._folder = scratch_folder("crash-lab")
        self.world = World(self._folder)
        self.store = SQLiteStore(self._folder.file("runs.db"))
        self.clock = FakeClock()
        self.ids = SequentialIds("id")
        self.status = "ready"
        self.attempt = 0
        self.result = None
        self.log: List[LogLine] = []

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
        return self._attempt(self.crash)

    def resume(self) -> str:
        """Next attempt after a crash (no crash armed this time). Returns the new status."""
        if not self.can_resume:
            raise RuntimeError(f"the run is {self.status}; there is nothing to resume")
        return self._attempt(None)

    def _attempt(self, crash) -> str:
        self.attempt += 1
        self.clock.advance(60)          # each attempt a minute later, so the history shows it
        self._say("attempt", self._attempt_title())
        crash_at = None if crash is None else CrashAt(*crash)
        try:
            if self.mode == NAIVE:
                self.result = self._naive_attempt(crash_at)
            else:
                self.result = self._durable_attempt(crash_at)
        except Crash:
            step, when = crash
            if when == AFTER_EFFECT and self.mode != NAIVE:
                # the step's function ran but no checkpoint was written, so the engine's
                # hook never reported it: log the work the world saw
                self._say("executed", f"{step}: executed (its checkpoint was never written)", step)
            self._say("crash", f"CRASH ({describe_crash(crash)}): the process is gone", step)
            self.status = "crashed"
        else:
            self._say("completed", f"completed: refund {self.result['refund_id']} for "
                                   f"{self.result['order']}")
            self.status = "completed"
        return self.status

    def _attempt_title(self) -> str:
        if self.attempt == 1:
            return "attempt 1: the job starts"
        if self.mode == NAIVE:
            return f"attempt {self.attempt}: the queue redelivers the job; it starts from the top"
        return f"attempt {self.attempt}: a fresh engine resumes the run from the store"

    def _naive_attempt(self, crash_at):
        runner = NaiveRunner(max_attempts=1, clock=self.clock, ids=self.ids, crash_at=crash_at)
        try:
            outcome = runner.run(refund, self._folder, self.order_id, self.amount,
                                 use_key=False, careless=True, run_id=RUN_ID)
        finally:
            for _, step in runner.executions:
                self._say("executed", f"{step}: executed", step)
        if outcome.status != "completed":
            raise Crash(outcome.errors[-1])
        return outcome.result

    def _durable_attempt(self, crash_at):
        keyed = self.mode == WITH_KEY
        # a new Engine object per attempt: nothing carries over in memory, only the store
        engine = Engine(self.store, self.clock, ids=self.ids, worker=f"worker-{self.attempt}",
                        crash_at=crash_at)
        engine.on_step = lambda label, how: self._say(how, f"{label}: {how}", label)
        if self.attempt == 1:
            run = engine.start(refund, self._folder, self.order_id, self.amount,
                               use_key=keyed, careless=not keyed, run_id=RUN_ID)
        else:
            run = engine.resume(RUN_ID)
        return run.result

    def _say(self, kind, text, step=None):
        self.log.append(LogLine(self.attempt, kind, text, step))

    # what the world saw -----------------------------------------------------------------
    @property
    def counters(self) -> dict:
        """Refunds paid, emails sent, ticket closes, step executions and replays so far."""
        world = self.world
        return {"refunds": world.payments.count() + world.careless.count(),
                "emails": world.mailer.count(),
                "tickets_closed": world.tickets.closes(),
                "executed": sum(1 for line in self.log if line.kind == "executed"),
                "replayed": sum(1 for line in self.log if line.kind == "replayed"),
                "attempts": self.attempt}

    def history(self) -> list:
        """The engine's history of the run (empty in naive mode: nothing is recorded)."""
        if self.mode == NAIVE or self.store.get_run(RUN_ID) is None:
            return []
        return Engine(self.store, self.clock, worker="reader").history(RUN_ID)

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
        from .. import examples
        for key in [k for k in examples._worlds if k[0] == self._folder]:
            _close_world(examples._worlds.pop(key))
        _close_world(self.world)
        self.store.close()

    def __repr__(self):
        return (f"CrashLabModel(mode={self.mode!r}, crash={describe_crash(self.crash)!r}, "
                f"status={self.status!r}, counters={self.counters})")


def _close_world(world):
    # World.close() trips over TicketDesk.close(ticket), which shadows the ledger's own
    # close(); close each service's connection through the base class instead.
    for service in (world.payments, world.careless, world.mailer, world.tickets, world.llm,
                    world.tools):
        _Ledger.close(service)


def crash_lab_sweep(modes=MODES, crashes=CRASH_CHOICES) -> List[dict]:
    """Play every mode x crash point to completion; one row of counters per pair."""
    rows = []
    for mode in modes:
        model = CrashLabModel(mode, None)
        for crash in crashes:
            model.reset(mode, crash)
            counts = model.play().counters
            rows.append({"mode": mode, "crash": describe_crash(crash), **counts})
        model._close()
    return rows


# the widget ------------------------------------------------------------------------------
_KIND_STYLE = {"attempt": "font-weight:bold; margin-top:4px",
               "executed": "color:#b35900; padding-left:1.5em",
               "replayed": "color:#2b7a3d; padding-left:1.5em",
               "crash": "color:#c0392b; font-weight:bold; padding-left:1.5em",
               "completed": "color:#1f4e99; padding-left:1.5em"}


def _counters_html(model) -> str:
    c = model.counters
    cells = [("refunds paid", c["refunds"]), ("emails sent", c["emails"]),
             ("tickets closed", c["tickets_closed"]), ("steps executed", c["executed"]),
             ("steps replayed", c["replayed"])]
    boxes = "".join(
        f"<div style='display:inline-block; min-width:7em; margin-right:1em; text-align:center'>"
        f"<div style='font-size:1.8em; font-weight:bold; color:{'#c0392b' if n > 1 and i < 3 else '#222'}'>{n}</div>"
        f"<div style='font-size:0.85em'>{label}</div></div>"
        for i, (label, n) in enumerate(cells))
    return f"<div>{boxes}</div>"


def _log_html(model) -> str:
    if not model.log:
        return "<div style='color:#777'>Nothing has run yet. Press Run.</div>"
    import html
    lines = "".join(f"<div style='{_KIND_STYLE[line.kind]}'>{html.escape(line.text)}</div>"
                    for line in model.log)
    return f"<div style='font-family:monospace; font-size:0.9em; line-height:1.5'>{lines}</div>"


def _status_html(model) -> str:
    hint = {"ready": "Ready. Press Run.",
            "crashed": "Crashed. Press Resume to try again.",
            "completed": "Completed. Change a setting or press Reset to start over."}[model.status]
    return f"<b>{hint}</b>"


class CrashLab:
    """The panel: mode, crash point, Run / Resume / Reset, counters and a log.

    Changing the mode or the crash point starts over with a fresh world and store, so the
    counters always describe one run under one setting.
    """

    def __init__(self, mode: str = NAIVE, crash=("email", AFTER_CHECKPOINT),
                 model: Optional[CrashLabModel] = None):
        import ipywidgets as w

        self.model = model or CrashLabModel(mode, crash)
        self.mode = w.ToggleButtons(options=list(MODES), value=self.model.mode,
                                    description="Mode:", style={"button_width": "150px",
                                                                "description_width": "initial"})
        self.crash = w.Dropdown(options=[(describe_crash(c), crash_key(c)) for c in CRASH_CHOICES],
                                value=crash_key(self.model.crash), description="Crash:",
                                layout=w.Layout(width="420px"))
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.resume_button = w.Button(description="Resume", button_style="warning", icon="redo")
        self.reset_button = w.Button(description="Reset", icon="refresh")
        self.status = w.HTML()
        self.counters = w.HTML()
        self.log = w.HTML()
        self.panel = w.VBox([self.mode, self.crash,
                             w.HBox([self.run_button, self.resume_button, self.reset_button]),
                             self.status, self.counters, self.log])

        self.mode.observe(self._on_settings, names="value")
        self.crash.observe(self._on_settings, names="value")
        self.run_button.on_click(lambda _: self._do(self.model.run))
        self.resume_button.on_click(lambda _: self._do(self.model.resume))
        self.reset_button.on_click(lambda _: self._do(self.model.reset))
        self.refresh()

    def _on_settings(self, _change):
        self.model.reset(self.mode.value, crash_from_key(self.crash.value))
        self.refresh()

    def _do(self, action):
        action()
        self.refresh()

    def refresh(self):
        m = self.model
        self.run_button.disabled = not m.can_run
        self.resume_button.disabled = not m.can_resume
        self.status.value = _status_html(m)
        self.counters.value = _counters_html(m)
        self.log.value = _log_html(m)

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.panel._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)     # short and stable for notebook diffs
        return bundle

    def __repr__(self):
        return f"CrashLab(mode={self.model.mode!r}, crash={describe_crash(self.model.crash)!r})"

