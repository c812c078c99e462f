"""The crash sweep: crash a workflow at every point it reaches, finish it, count the world.

The question the course is about — *if the process dies anywhere in my workflow, does
anything happen twice, or get lost?* — has a mechanical answer. Run the workflow once
without a crash, noting every crash point it passes. Then, for each point, start again in
a fresh world, crash there, resume until the run ends, and compare what the world's ledgers
saw with the uncrashed run.

    s = dl.faults.sweep(refund, "A-17", 40, use_key=False, careless=True)
    s.clean            # the uncrashed run: status, result, effects per ledger
    s.rows             # one dict per crash point (below)
    s.duplicates()     # the rows where some effect happened more often than in s.clean
    s.table()          # a pandas DataFrame of the rows
    s.plot()           # a heat map: crash point x ledger, the finding as its title

Each row: step (its label, "email#2" for a second occurrence), kind ("step", "wait",
"sleep"), when ("before_step" | "after_effect" | "after_checkpoint"), crashed (did the crash
fire), attempts, status, result, error, effects {ledger: n}, duplicates {ledger: extra n},
lost {ledger: missing n}, same_result (the clean run's status and result).

How a case runs
---------------
- The course's convention: a workflow's first parameter is the simulated world's folder.
  Every case gets a fresh folder (the first argument) and a fresh store; then come the
  arguments given to `sweep`. Everything lives in one temporary folder, removed at the end.
- Every attempt is a fresh engine (or naive runner), as a restarted process would be, on a
  `FakeClock` and `SequentialIds`, so results are deterministic. A restarted process's
  uuid4() never repeats the crashed one's, so neither does an id minted after a resume: a
  resume numbers its ids on from those the run has recorded (`ctx.uuid()` minted id-0001
  and id-0002 before the crash: the resume mints id-0003 next, as the uncrashed run did).
  The naive runner records nothing, so each of its attempts numbers its own (`id2-0001`,
  ...). The crash stays armed until it fires: a crash after a wait fires in the attempt
  that gets past the wait.
- A run that parks is answered and resumed. `waits="signal"` (the default) sends each wait
  its signal (payload True) the moment the run parks; `waits="deadline"` moves the fake
  clock to the wait's deadline instead, so `wait_for_signal` returns None; a dict
  `{wait name: payload, or None for the deadline}` chooses per wait. A sleep is ended by
  moving the fake clock to its wake time.
- `real_kill=False` (default) raises `dl.Crash` in this process, so it works for a workflow
  defined in a notebook cell. `real_kill=True` runs every attempt in a child process that
  SIGKILLs itself at the point; the workflow must then live in an importable module (the
  children import it). Cases run in parallel there, one per CPU core.
- `runner="naive"` sweeps the naive runner instead: each "resume" starts the job again
  from the top, as a job queue redelivering it would.
- Effects are the world's ledger counts (`World.summary()`): refunds, emails, ticket
  closes, model and tool calls, and every ledger of your own (`world.ledger("sms")`).

A sweep of more than a few dozen cases, or with real kills, shows a progress bar when
`tqdm` is installed (`progress=False` hides it, `progress=True` always shows it).
"""

import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from . import jsonvalue
from .clock import FakeClock, SequentialIds
from .engine import Engine
from .errors import Crash, NonDeterminismError, WorkflowNotRegistered
from .faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP, CrashAt, CrashPlan
from .naive import NaiveRunner
from .sim import forget_worlds, world_at
from .store import SQLiteStore
from .store.records import COMPLETED, SIGNAL, SLEEPING, VALUE, WAITING, WOKE
from .workflow import Workflow, latest

START = 1_767_225_600.0      # the FakeClock's default start: 2026-01-01 00:00 UTC
RUNNERS = ("durable", "naive")
_MOMENT = {BEFORE_STEP: "before", AFTER_EFFECT: "after effect", AFTER_CHECKPOINT: "after checkpoint"}


class SweepError(Exception):
    """A sweep could not finish a case; the message names the workflow and the case."""


@dataclass(frozen=True)
class Point:
    """One crash point: the label of a step, wait or sleep, its kind, and when."""
    step: str                  # "email", or "email#2" for its second occurrence
    when: str
    kind: str = "step"

    @property
    def name(self) -> str:
        return self.step.rpartition("#")[0] if "#" in self.step else self.step

    @property
    def occurrence(self) -> int:
        return int(self.step.rpartition("#")[2]) if "#" in self.step else 1

    def crash_at(self, kill: bool = False) -> CrashAt:
        return CrashAt(self.name, self.when, occurrence=self.occurrence, kill=kill)

    @property
    def label(self) -> str:
        """Its name in the heat map and in the crash lab's menu: "sms · after effect"."""
        return point_label(self.step, self.when, self.kind)

    def __str__(self):
        return f"{self.step} / {self.when}"


def point_label(step: str, when: str, kind: str = "step") -> str:
    """A crash point as the heat map's lines and the crash lab's menu both name it:
    "refund · before", "refund · after effect", "approval (wait) · after checkpoint"."""
    kind = "" if kind == "step" else f" ({kind})"
    return f"{step}{kind} · {_MOMENT[when]}"


def _label(name: str, occurrence: int) -> str:
    return name if occurrence == 1 else f"{name}#{occurrence}"


def world_effects(folder) -> Dict[str, int]:
    """What the simulated world in `folder` has seen, ledger by ledger (`World.summary()`).

    It reads through the folder's shared `world_at` object, which the sweep closes after
    each case: counting opens no file the workflow has not already opened."""
    return world_at(folder).summary()


@dataclass
class Sweep:
    """The result of `sweep(...)`: the uncrashed run, and one row per crash point."""
    workflow: str
    runner: str
    real_kill: bool
    waits: Any
    clean: dict
    rows: List[dict]
    ledgers: List[str]
    seconds: float = field(default=0.0, repr=False)    # wall time; varies, never printed

    @property
    def points(self) -> List[Point]:
        return [Point(r["step"], r["when"], r["kind"]) for r in self.rows]

    def duplicates(self) -> List[dict]:
        """Rows where some ledger saw more than the uncrashed run: something happened twice."""
        return [r for r in self.rows if r["duplicates"]]

    def lost(self) -> List[dict]:
        """Rows where some ledger saw less than the uncrashed run: something never happened."""
        return [r for r in self.rows if r["lost"]]

    def problems(self) -> List[dict]:
        """Rows that differ from the uncrashed run in any way: effects, result or status."""
        return [r for r in self.rows if r["duplicates"] or r["lost"] or not r["same_result"]
                or r["status"] != self.clean["status"]]

    def finding(self) -> str:
        """The sweep's result in one sentence (the heat map's title)."""
        n = len(self.rows)
        # a yes/no column (an effects hook's True/False) is never "repeated" or "lost"
        yes_no = {k for k in self.ledgers if _yes_no(self, k)}
        dup = [r for r in self.rows if set(r["duplicates"]) - yes_no]
        lost = [r for r in self.rows if set(r["lost"]) - yes_no]
        flipped = [r for r in self.rows if ({*r["duplicates"], *r["lost"]} & yes_no)]
        parts = []
        if dup:
            which = _joined(sorted({k for r in dup for k in r["duplicates"]} - yes_no,
                                   key=self.ledgers.index))
            parts.append(f"{len(dup)} of {n} crash points repeat an effect ({which})")
        if lost:
            which = _joined(sorted({k for r in lost for k in r["lost"]} - yes_no,
                                   key=self.ledgers.index))
            parts.append(f"{len(lost)} of {n} crash points lose an effect ({which})" if not dup
                         else f"{len(lost)} lose one ({which})")
        if flipped:
            which = _joined(sorted({k for r in flipped for k in (*r["duplicates"], *r["lost"])}
                                   & yes_no, key=self.ledgers.index))
            parts.append(f"{len(flipped)} of {n} crash points change a yes/no ({which})"
                         if not parts else f"{len(flipped)} change a yes/no ({which})")
        if not parts:
            differ = [r for r in self.rows if not r["same_result"] or r["status"] != self.clean["status"]]
            tail = f"; {len(differ)} end differently" if differ else ""
            return f"No effect repeated or lost at any of {n} crash points{tail}"
        return "; ".join(parts)

    def table(self):
        """The rows as a pandas DataFrame: one line per crash point, one column per ledger."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Sweep.table() needs pandas: pip install 'durable-lite[lab]'") from None
        records = []
        for r in self.rows:
            records.append({"step": r["step"], "when": r["when"],
                            **{ledger: r["effects"].get(ledger, 0) for ledger in self.ledgers},
                            "duplicates": _changes(r["duplicates"], "+"),
                            "lost": _changes(r["lost"], "-"),
                            "same_result": r["same_result"], "status": r["status"]})
        columns = ["step", "when", *self.ledgers, "duplicates", "lost", "same_result", "status"]
        return pd.DataFrame.from_records(records, columns=columns).set_index(["step", "when"])

    def plot(self, ax=None, title: Optional[str] = None):
        """A heat map: one line per crash point, one column per ledger, the count after the
        run finished in each cell; red where it is above the uncrashed run's (something
        happened twice), blue where below (something was lost). A yes/no column (True/False
        from an `effects` hook) says yes or no, purple where it is not the uncrashed run's:
        it is never read as a count. Its title is the finding.
        Returns the matplotlib Figure (in a notebook, end the cell with `plt.show()`)."""
        return _heat_map(self, ax, title)

    def __repr__(self):
        how = "real kills" if self.real_kill else "in-process crashes"
        return (f"<Sweep of {self.workflow!r} ({self.runner} runner, {how}): "
                f"{self.finding()}>")


def _joined(names) -> str:
    return ", ".join(name.replace("_", " ") for name in names)


def _changes(changes: dict, sign: str) -> str:
    return ", ".join(f"{k} {sign}{n}" for k, n in changes.items())


# running --------------------------------------------------------------------------------
def sweep(wf, *args, runner: str = "durable", real_kill: bool = False, waits="signal",
          leading: Optional[Callable] = None, effects: Optional[Callable] = None,
          restart_after: float = 0.0, max_attempts: int = 20, timeout: float = 60.0,
          workers: Optional[int] = None, progress: Optional[bool] = None,
          run_id=None, observe: Optional[Callable] = None, **kwargs) -> Sweep:
    """Crash `wf` at every point it reaches, finish each run, and compare the world's ledgers
    with an uncrashed run. `args` and `kwargs` go to the workflow as for `engine.start`,
    after the case's fresh world folder.

    runner:        "durable" (the engine) or "naive" (retry from the top).
    real_kill:     SIGKILL a child process at each point (the workflow must be importable).
    waits:         "signal", "deadline", or {wait name: payload or None}: how waits are answered.
    leading:       fn(folder) -> the arguments before `args` (default: [folder]), for a
                   workflow that wants more than the world's folder (e.g. a file of its own).
    effects:       fn(folder) -> {ledger: count} (default: `world_effects(folder)`). A
                   column whose values are True/False is a yes/no: the heat map writes yes
                   or no in it and colours only a change, never "more" or "fewer".
    restart_after: seconds the fake clock moves on between a crash and the resume.
    max_attempts:  attempts per case (the first and every resume) before giving up.
    timeout:       seconds one child process may take (real kills only).
    workers:       child processes at a time (real kills only; default: one per CPU core,
                   at most 4).
    progress:      a tqdm bar: None = when the sweep is big or uses real kills.
    run_id:        the run's id in every case (default "<workflow>-sweep"), or fn(case) -> id
                   for an id per case ("clean run", "crash at refund / after_effect").
    observe:       fn(folder) -> anything, called as each case ends (before its folder is
                   removed); its value is the row's "observed" (and the clean run's). For a
                   check that must look at what a case's world recorded, not only count it.

    The names above are the sweep's own; every other keyword argument goes to the workflow.
    """
    started = time.perf_counter()
    plan = _Plan(wf, args, kwargs, runner, real_kill, waits, leading, effects, restart_after,
                 max_attempts, timeout, run_id, observe)
    root = tempfile.mkdtemp(prefix="durable-lite-sweep-")
    bar = None
    try:
        clean, points = plan.discover(root)
        total = len(points)
        if progress or (progress is None and (real_kill or total > 40)):
            bar = _progress_bar(total, f"sweep {plan.name}")
        outcomes = plan.run_cases(root, points, workers, bar)
    finally:
        if bar is not None:
            bar.close()
        forget_worlds(root)
        shutil.rmtree(root, ignore_errors=True)
    return _assemble(plan, clean, points, outcomes, time.perf_counter() - started)


def crash_points(wf, *args, runner: str = "durable", waits="signal", leading=None, effects=None,
                 run_id=None, **kwargs):
    """The discovery half of a sweep: run `wf` once without a crash (in this process, in a
    temporary folder) and return (clean, points) — the clean run as `Sweep.clean` shows it,
    and every crash point it reached, in order, as `Point`s. The crash lab builds its menu
    from these."""
    plan = _Plan(wf, args, kwargs, runner, False, waits, leading, effects, 0.0, 20, 60.0, run_id)
    root = tempfile.mkdtemp(prefix="durable-lite-points-")
    try:
        clean, points = plan.discover(root)
    finally:
        forget_worlds(root)
        shutil.rmtree(root, ignore_errors=True)
    clean = {**clean, "effects": {k: n for k, n in clean["effects"].items() if n}}
    clean.pop("crashed", None)
    clean.pop("observed", None)
    return clean, points


def _progress_bar(total, desc):
    try:
        from tqdm.auto import tqdm
    except ImportError:        # tqdm is optional: no bar, same sweep
        return None
    return tqdm(total=total, desc=desc, unit="case")


class _Plan:
    """Everything one sweep needs to play a case, checked before any case runs."""

    def __init__(self, wf, args, kwargs, runner, real_kill, waits, leading, effects,
                 restart_after, max_attempts, timeout, run_id, observe=None):
        self.wf = _registered(wf)
        self.name = self.wf.name
        if runner not in RUNNERS:
            raise ValueError(f"sweep of {self.name!r}: runner must be one of {RUNNERS}, not {runner!r}")
        if not (isinstance(waits, dict) or waits in ("signal", "deadline")):
            raise ValueError(f"sweep of {self.name!r}: waits must be 'signal', 'deadline' or a "
                             f"dict {{wait name: payload, or None for the deadline}}, not {waits!r}")
        if max_attempts < 2:
            raise ValueError(f"sweep of {self.name!r}: max_attempts must be at least 2 "
                             "(the crashed attempt and one resume)")
        self.args, self.kwargs = list(args), dict(kwargs)
        where = f"sweep of {self.name!r}, clean run (and every case after it):"
        for i, value in enumerate(self.args, start=1):
            jsonvalue.encode(value, what=f"{where} argument {i} after the world's folder is")
        for key, value in self.kwargs.items():
            jsonvalue.encode(value, what=f"{where} keyword argument {key!r} is")
        self.runner, self.real_kill, self.waits = runner, real_kill, waits
        self.leading = leading or (lambda folder: [folder])
        self.effects = effects or world_effects
        self.observe = observe
        self.restart_after, self.max_attempts, self.timeout = restart_after, max_attempts, timeout
        self.run_id = run_id or f"{self.name}-sweep"     # or a function of the case's name
        self.module = _importable_module(self.wf) if real_kill else None
        self.stopping = threading.Event()        # set when one case failed: the rest stop

    # the clean run ----------------------------------------------------------------------
    def discover(self, root):
        """Run once without a crash, in-process, noting every crash point reached."""
        seen = []
        case = _Case(self, os.path.join(root, "clean"), None)
        outcome = case.play(_InProcess(self, case, seen=seen))
        if self.runner == "naive" and outcome["status"] != COMPLETED and \
                any(f"'{m}'" in (outcome["error"] or "") for m in ("wait_for_signal", "sleep")):
            raise SweepError(f"sweep of {self.name!r}, clean run: the naive runner cannot wait "
                             f"or sleep ({outcome['error']}); sweep this workflow with the "
                             "durable runner")
        kinds = case.kinds()
        points, known = [], set()
        for name, occurrence, when in seen:
            point = Point(_label(name, occurrence), when, kinds.get((name, occurrence), "step"))
            if (point.step, when) not in known:
                known.add((point.step, when))
                points.append(point)
        return outcome, points

    # the crashed runs -------------------------------------------------------------------
    def run_cases(self, root, points, workers, bar):
        def one(index, point):
            if self.real_kill:
                child_group(self)            # this sweep's children, and no one else's
            case = _Case(self, os.path.join(root, f"case-{index:03d}"), point)
            driver = _RealKill(self, case) if self.real_kill else _InProcess(self, case)
            try:
                return case.play(driver)
            finally:
                if bar is not None:
                    bar.update(1)

        if not self.real_kill:
            return [one(i, p) for i, p in enumerate(points)]
        # Real kills: each case its own folder, store and processes, so cases can overlap.
        from concurrent.futures import ThreadPoolExecutor

        from .child import child_group, kill_children
        workers = workers or min(4, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(one, i, p) for i, p in enumerate(points)]
            try:
                return [f.result() for f in futures]
            except BaseException:
                # A failed case or an interrupt: start nothing new, end what runs, then raise.
                self.stopping.set()
                for f in futures:
                    f.cancel()
                kill_children(self)
                raise


def _registered(wf) -> Workflow:
    if isinstance(wf, Workflow):
        return wf
    if isinstance(wf, str):
        try:
            return latest(wf)
        except WorkflowNotRegistered as exc:
            raise WorkflowNotRegistered(f"sweep of {wf!r}: {exc}. Run the cell that defines it "
                                        "first, or pass the workflow itself.") from None
    name = getattr(wf, "__name__", repr(wf))
    raise TypeError(f"sweep of {name!r}: it is a plain function, not a registered workflow; "
                    f"decorate it with @dl.workflow({name!r}) so a resume can find its code")


def _importable_module(wf) -> str:
    """The module a child process imports to register `wf`, or a clear error."""
    import importlib.util
    module = getattr(wf.fn, "__module__", None)
    where = "a notebook cell or a script run directly" if module == "__main__" else f"module {module!r}"
    spec = None
    if module and module != "__main__":
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
    if spec is None or spec.origin in (None, "built-in"):
        raise SweepError(
            f"sweep of {wf.name!r} with real_kill=True: the workflow is defined in {where}, "
            "which a fresh process cannot import. Move the workflow (and its step functions) "
            "into a .py file next to the notebook and import it from there, or sweep with "
            "real_kill=False (in-process crashes work for workflows defined in cells).")
    return module


class _Case:
    """One case: a folder, a store, a fake clock; played attempt after attempt to the end."""

    def __init__(self, plan, folder, point):
        self.plan, self.point = plan, point
        self.folder = folder                         # the workflow's world folder
        os.makedirs(folder)
        self.store_path = folder + ".runs.db"        # beside it, so `effects` counts only the world
        self.clock = FakeClock(START)
        self.what = "clean run" if point is None else f"crash at {point.step} / {point.when}"
        self.run_id = plan.run_id(self.what) if callable(plan.run_id) else plan.run_id

    def args(self):
        return [*self.plan.leading(self.folder), *self.plan.args]

    def ids(self, attempt) -> tuple:
        """(prefix, first number) of the ids attempt `attempt` mints. Deterministic, so an
        in-process crash and a real kill mint the same ones, and never one the case has
        minted before, as a fresh process's uuid4() never is. The engine's ids are minted
        only by ctx.uuid(), which records each at once: a resume numbers on from what the
        run has recorded, so an id is the one the uncrashed run minted at that point. The
        naive runner records nothing: each of its attempts has a prefix of its own."""
        if self.plan.runner == "naive":
            return ("id" if attempt == 1 else f"id{attempt}"), 1
        if attempt == 1 or not os.path.exists(self.store_path):
            return "id", 1
        store = SQLiteStore(self.store_path)
        try:
            entries = store.load_entries(self.run_id)
        finally:
            store.close()
        return "id", 1 + sum(e.kind == VALUE and e.name == "uuid" for e in entries)

    def play(self, driver) -> dict:
        plan = self.plan
        armed = self.point
        crashed = False
        try:
            for attempt in range(1, plan.max_attempts + 1):
                out = driver.attempt(attempt, armed)
                if out["crashed"]:
                    armed, crashed = None, True
                    self.clock.advance(plan.restart_after)
                    continue
                status = out["status"]
                if status == WAITING:
                    self._answer(driver, out)
                elif status == SLEEPING:
                    self.clock.t = max(self.clock.t, out["wake_at"])
                else:
                    return {"status": status, "result": out["result"], "error": out["error"],
                            "attempts": attempt, "crashed": crashed,
                            "effects": plan.effects(self.folder),
                            "observed": plan.observe(self.folder) if plan.observe else None}
            raise SweepError(
                f"sweep of {plan.name!r}, {self.what}: the run did not finish within "
                f"{plan.max_attempts} attempts (last status {out['status']!r}"
                + (f" at {out['waiting_for']!r}" if out.get("waiting_for") else "")
                + "). A workflow that waits or sleeps in a loop never ends under the sweep; "
                  "give it an end, or raise max_attempts.")
        finally:
            driver.close()
            forget_worlds(self.folder)

    def _answer(self, driver, out):
        name, waits = out["waiting_for"], self.plan.waits
        if isinstance(waits, dict):
            if name not in waits:
                raise SweepError(f"sweep of {self.plan.name!r}, {self.what}: the run waits for "
                                 f"{name!r}, which waits={waits!r} does not answer; add "
                                 f"{name!r}: payload (or None for its deadline)")
            payload = waits[name]
        else:
            payload = True if waits == "signal" else None
        if payload is None:
            self.clock.t = max(self.clock.t, out["wake_at"])      # the deadline passes
        else:
            driver.signal(name, payload)

    def kinds(self) -> dict:
        """(name, occurrence) -> "wait" | "sleep" for the waits and sleeps the run recorded."""
        if self.plan.runner == "naive" or not os.path.exists(self.store_path):
            return {}
        store = SQLiteStore(self.store_path)
        try:
            entries = store.load_entries(self.run_id)
        finally:
            store.close()
        names = {SIGNAL: "wait", WOKE: "sleep"}
        return {(e.name, e.occurrence): names[e.kind] for e in entries if e.kind in names}


class _InProcess:
    """Attempts in this process: the crash is `dl.Crash`, raised and caught."""

    def __init__(self, plan, case, seen=None):
        self.plan, self.case, self.seen = plan, case, seen
        self.store = SQLiteStore(case.store_path) if plan.runner == "durable" else None

    def attempt(self, n, armed) -> dict:
        plan, case = self.plan, self.case
        crash = None if armed is None else armed.crash_at()
        clock = FakeClock(case.clock.t)      # the attempt's own clock, as a process would have
        ids, seen = SequentialIds(*case.ids(n)), self.seen
        # The plan notes every crash point passed in `seen` (the clean run's discovery).
        crashes = CrashPlan(crash, seen=seen)
        try:
            if plan.runner == "naive":
                runner = NaiveRunner(max_attempts=1, clock=clock, ids=ids, seed=0, crash_at=crashes)
                outcome = runner.run(plan.wf, *case.args(), run_id=case.run_id, **plan.kwargs)
                if crash is not None and not crashes.pending:   # it fired: the queue redelivers
                    return {"crashed": True}
                out = {"status": outcome.status, "result": outcome.result,
                       "error": outcome.errors[-1] if outcome.errors else None}
            else:
                engine = Engine(self.store, clock, ids=ids, seed=0,
                                worker=f"sweep-attempt-{n}", crash_at=crashes)
                if n == 1:
                    run = engine.start(plan.wf, *case.args(), run_id=case.run_id, **plan.kwargs)
                else:
                    run = engine.resume(case.run_id)
                out = {"status": run.status, "result": run.result, "error": run.error,
                       "waiting_for": run.waiting_for, "wake_at": run.wake_at}
        except Crash:
            return {"crashed": True}       # the process is gone; its clock with it
        except NonDeterminismError as exc:
            out = {"status": "diverged", "result": None, "error": f"NonDeterminismError: {exc}"}
        except Exception as exc:
            raise SweepError(f"sweep of {plan.name!r}, {case.what}, attempt {n}: "
                             f"{type(exc).__name__}: {exc}") from exc
        case.clock.t = clock.t
        return {"crashed": False, **out}

    def signal(self, name, payload):
        Engine(self.store, self.case.clock, worker="sweep").signal(self.case.run_id, name, payload)

    def close(self):
        if self.store is not None:
            self.store.close()


class _RealKill:
    """Attempts in child processes: the crash is SIGKILL, the resume a fresh process."""

    def __init__(self, plan, case):
        self.plan, self.case = plan, case
        self.path = [p if p else os.getcwd() for p in sys.path if os.path.isdir(p or ".")]

    def attempt(self, n, armed) -> dict:
        from .child import run_in_child
        plan, case = self.plan, self.case
        if plan.stopping.is_set():
            raise SweepError(f"sweep of {plan.name!r}, {case.what}: stopped, another case failed")
        prefix, start = case.ids(n)
        options = {"clock": case.clock.t, "ids": prefix, "ids_start": start, "seed": 0,
                   "runner": "naive" if plan.runner == "naive" else "engine"}
        try:
            child = run_in_child(case.store_path, plan.module, plan.name, *case.args(),
                                 run_id=case.run_id, resume=n > 1 and plan.runner == "durable",
                                 crash_at=None if armed is None else armed.crash_at(kill=True),
                                 python_path=self.path, timeout=plan.timeout,
                                 engine_options=options, **plan.kwargs)
        except (RuntimeError, TimeoutError) as exc:
            raise SweepError(f"sweep of {plan.name!r}, {case.what}, attempt {n}: {exc}") from None
        if child.killed:
            return {"crashed": True}
        report = child.run
        case.clock.t = report.get("clock", case.clock.t)
        return {"crashed": False, "status": report["status"], "result": report["result"],
                "error": report.get("error"), "waiting_for": report.get("waiting_for"),
                "wake_at": report.get("wake_at")}

    def signal(self, name, payload):
        store = SQLiteStore(self.case.store_path)
        try:
            Engine(store, self.case.clock, worker="sweep").signal(self.case.run_id, name, payload)
        finally:
            store.close()

    def close(self):
        pass


# the result -----------------------------------------------------------------------------
def _assemble(plan, clean, points, outcomes, seconds) -> Sweep:
    clean_observed = clean["observed"]
    everything = [clean["effects"], *(o["effects"] for o in outcomes)]
    ledgers = []
    for counts in everything:
        for ledger, n in counts.items():
            if ledger not in ledgers and any(c.get(ledger, 0) for c in everything):
                ledgers.append(ledger)
    base = {k: clean["effects"].get(k, 0) for k in ledgers}
    rows = []
    for point, o in zip(points, outcomes):
        counts = {k: o["effects"].get(k, 0) for k in ledgers}
        rows.append({"step": point.step, "kind": point.kind, "when": point.when,
                     "crashed": o["crashed"], "attempts": o["attempts"], "status": o["status"],
                     "result": o["result"], "error": o["error"], "effects": counts,
                     "duplicates": {k: counts[k] - base[k] for k in ledgers if counts[k] > base[k]},
                     "lost": {k: base[k] - counts[k] for k in ledgers if counts[k] < base[k]},
                     "same_result": o["result"] == clean["result"] and o["status"] == clean["status"]})
        if plan.observe:
            rows[-1]["observed"] = o["observed"]
    clean = {"status": clean["status"], "result": clean["result"], "error": clean["error"],
             "attempts": clean["attempts"], "effects": base}
    if plan.observe:
        clean["observed"] = clean_observed
    return Sweep(plan.name, plan.runner, plan.real_kill, plan.waits, clean, rows, ledgers, seconds)


# the picture ----------------------------------------------------------------------------
_SAME, _MORE, _FEWER, _DIFFERENT, _BASE = "#e9edf0", "#d7301f", "#2c7bb6", "#f39c34", "#ffffff"
_FLIPPED = "#7d3c98"         # a yes/no column that says the other thing than the clean run


def _row_label(row) -> str:
    return point_label(row["step"], row["when"], row["kind"])


def _yes_no(s: Sweep, ledger: str) -> bool:
    """Is this column a yes/no (an `effects` hook's True/False), not a count? Then "fewer"
    means nothing: the heat map writes yes or no and colours only a change."""
    return all(isinstance(v, bool) for v in
               [s.clean["effects"][ledger], *(r["effects"][ledger] for r in s.rows)])


def _yes_no_text(value) -> str:
    return "yes" if value else "no"


def _heat_map(s: Sweep, ax, title):
    try:
        import matplotlib.pyplot as plt
        from matplotlib.colors import to_rgb
        from matplotlib.patches import Patch
    except ImportError:
        raise ImportError("Sweep.plot() needs matplotlib: pip install 'durable-lite[lab]'") from None
    columns = [*s.ledgers, "same result"]
    lines = [("no crash (the clean run)", None)] + [(_row_label(r), r) for r in s.rows]
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(7.5, 2.6 + 1.25 * len(columns)), 1.6 + 0.34 * len(lines)))
    fig = ax.figure
    yes_no = {ledger for ledger in s.ledgers if _yes_no(s, ledger)}
    colors, texts = [], []
    for _, row in lines:
        line_colors, line_texts = [], []
        for ledger in s.ledgers:
            base = s.clean["effects"][ledger]
            if row is None:
                line_colors.append(_BASE)
                line_texts.append(_yes_no_text(base) if ledger in yes_no else str(base))
                continue
            n = row["effects"][ledger]
            if ledger in yes_no:            # not a count: never "more" or "fewer"
                line_colors.append(_SAME if n == base else _FLIPPED)
                line_texts.append(_yes_no_text(n))
                continue
            line_colors.append(_MORE if n > base else _FEWER if n < base else _SAME)
            line_texts.append(f"{n} ({n - base:+d})" if n != base else str(n))
        if row is None:
            line_colors.append(_BASE)
            line_texts.append(s.clean["status"])
        else:
            line_colors.append(_SAME if row["same_result"] else _DIFFERENT)
            line_texts.append("yes" if row["same_result"] else
                              "no" if row["status"] == s.clean["status"] else row["status"])
        colors.append([to_rgb(c) for c in line_colors])
        texts.append(line_texts)
    ax.imshow(colors, aspect="auto", interpolation="nearest")
    for y, line_texts in enumerate(texts):
        for x, text in enumerate(line_texts):
            strong = colors[y][x] in (to_rgb(_MORE), to_rgb(_FEWER), to_rgb(_FLIPPED))
            ax.text(x, y, text, ha="center", va="center", fontsize=10,
                    color="white" if strong else "#222222",
                    weight="bold" if strong or y == 0 else "normal")
    ax.set_xticks(range(len(columns)), [c.replace("_", " ") for c in columns])
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(lines)), [text for text, _ in lines])
    ax.set_xticks([x - 0.5 for x in range(1, len(columns))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(lines))], minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="both", length=0)
    ax.axhline(0.5, color="#555555", linewidth=1.5)
    for spine in ax.spines.values():
        spine.set_visible(False)
    how = "SIGKILLed child processes" if s.real_kill else "in-process crashes"
    ax.set_title(title or f"{s.finding()}\n{s.workflow!r}, {s.runner} runner, {how}",
                 fontsize=11, pad=12)
    ax.set_ylabel("crash point (step · when)")
    ax.set_xlabel("what the world saw once the run finished (count per ledger"
                  + (", or yes/no)" if yes_no else ")"))
    legend = [Patch(color=_SAME, label="as in the clean run"),
              Patch(color=_MORE, label="more: done twice"),
              Patch(color=_FEWER, label="fewer: lost"),
              Patch(color=_DIFFERENT, label="different result")]
    if yes_no:                  # a yes/no column has a colour of its own, not a count's
        legend.append(Patch(color=_FLIPPED, label="yes/no not as in the clean run"))
    if fig.axes == [ax]:        # a figure of its own: the legend goes along its bottom edge
        # one row of entries where the figure is wide enough (about 1.75 in an entry), else two
        rows = 1 if fig.get_figwidth() >= 1.75 * len(legend) else 2
        fig.legend(handles=legend, loc="lower center", ncol=-(-len(legend) // rows),
                   frameon=False, fontsize=9)
        fig.tight_layout(rect=(0, (0.5 + 0.22 * (rows - 1)) / fig.get_figheight(), 1, 1))
    else:
        ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, fontsize=9)
    return fig
