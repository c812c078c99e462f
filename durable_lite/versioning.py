"""Versioning long-lived runs: patch gates, state migrations, forks, and who still needs old code.

A run can outlive the code that started it. A refund parked on a two-day approval is still
parked when Tuesday's deploy replaces Monday's code, and when the approval arrives, Tuesday's
code replays the history Monday's code recorded. If Tuesday's code asks for something else
at some position (a fraud check where Monday asked the approver), the run diverges.
durable_lite offers five ways through a deploy, from the least to the most code you keep:

1. Versions (workflow.py): `@dl.workflow("refund", version=2)` beside version 1. Every run
   finishes on the version it started on; you keep version 1's code until its runs are done.
2. Patch gates: one function, with `if ctx.patched("fraud-check"):` around the change.
   Runs recorded before the change replay down the old branch; every run that reaches the
   gate under the new code takes the new one. You keep the old branch until no unfinished
   run needs it (`patch_report`, below, says when). The rule itself is a rule of replay, so
   it lives with the other ones: `Context.patched` in context.py.
3. State migrations (below): `@dl.migration("refund", from_version=1, to_version=2)` turns a
   version-1 run's recorded state (arguments, step results, signal payloads) into what
   version 2 expects, and `engine.upgrade(run_id)` moves the run onto version 2 — after
   replaying its history on version 2's code to prove it fits. Then version 1's code can go.
4. Forks (below): `engine.fork(run_id, from_step="email", run_id="new")` copies the
   checkpoints before a step into a new run and executes from there on today's code: how you
   re-run a step after fixing its bug, without repeating what came before.
5. Replay checks (below): `engine.check_replay(run_id)` replays a run's history on the code
   registered now and stops where new work would begin, doing nothing. It is how the three
   tools above check themselves, and how you check a deploy before making it.

Everything here is recorded with what the store already keeps: a patch marker is an entry
of kind "patch", a run's version is its record's version, and what an upgrade or a fork did
(and every value it replaced) is in the run's event log.
"""

import contextlib
import json

from . import jsonvalue
from .context import Context, Halt, NewWork, Park, StepFailed, check_run_id
from .errors import (NonDeterminismError, RunArgumentsMismatch, RunFinishedError,
                     StepResultNotJSON, UnknownStepError, UpgradeRefused)
from .store.records import (COMPLETED, DIVERGED, ERROR, PARKED, RUNNING, SIGNAL, STEP, TIMER,
                            Entry, RunRecord)
from .workflow import latest, lookup, registered


# replay checks ----------------------------------------------------------------------------
class ReplayCheck:
    """What replaying a run's history on some code showed. `ok` is False if the code and the
    history disagree (`error` says where) or the code raised while replaying."""

    __slots__ = ("run_id", "workflow", "version", "ok", "outcome", "error", "gates", "park")

    def __init__(self, run_id, workflow, version, ok, outcome, error=None, gates=None, park=None):
        self.run_id, self.workflow, self.version = run_id, workflow, version
        self.ok, self.outcome, self.error = ok, outcome, error
        self.gates = dict(gates or {})   # gate name -> False if the history took its old branch
        self.park = park                 # (status, waiting for, wake time) if it parks there

    def __repr__(self):
        verdict = "fits" if self.ok else "does not fit"
        return (f"ReplayCheck({self.run_id!r} on {self.workflow} v{self.version}: {verdict}; "
                f"{self.outcome})")


def replay(engine, record, entries, wf) -> ReplayCheck:
    """Replay `entries` (a run's history) on workflow code `wf` without doing anything.

    The workflow function runs from the top against a context that answers every recorded
    position from the history and stops at the first position the history does not hold:
    no step runs, nothing is written, no signal is consumed.
    """
    ctx = Context(engine, record, list(entries), budget=None, replay_only=True)
    args, kwargs = jsonvalue.decode(record.args_json), jsonvalue.decode(record.kwargs_json)

    def result(ok, outcome, error=None, park=None):
        return ReplayCheck(record.run_id, wf.name, wf.version, ok, outcome, error,
                           ctx.patch_decisions, park)

    try:
        try:
            wf.fn(ctx, *args, **kwargs)
        finally:
            ctx._check_usable()          # an error the workflow caught still counts
    except NewWork as new:
        return result(True, f"new work at position {new.position}: {new.kind} {new.name!r}")
    except Park as park:
        return result(True, f"parks, {park.status} for {park.waiting_for!r}",
                      park=(park.status, park.waiting_for, park.wake_at))
    except Halt as halt:                 # not reachable without a budget; kept for safety
        return result(True, f"halts: {halt.reason}")
    except NonDeterminismError as exc:
        return result(False, "diverges", str(exc))
    except StepFailed as exc:            # a recorded failure the workflow does not catch
        return result(True, f"fails as recorded: {exc}")
    except Exception as exc:             # noqa: BLE001 - the code cannot handle this history
        last = next((e.label for e in reversed(entries[:ctx.position]) if e.kind == STEP), None)
        where = f"after step {last!r}" if last else "before its first step"
        return result(False, "raises", f"{type(exc).__name__} {where}: {exc}")
    if ctx.position < len(entries):
        return result(False, "diverges",
                      f"the code finishes after {ctx.position} entries but the history records "
                      f"{len(entries)}: it no longer reaches {entries[ctx.position].label!r}")
    return result(True, "finishes with no new work")


def check_replay(engine, run_id, version=None) -> ReplayCheck:
    """Replay run `run_id`'s history on the code registered now for its workflow (its own
    version, or `version`), doing nothing. Use it before a deploy: every unfinished run
    whose check is not ok would diverge on the new code."""
    record = engine.record(run_id)
    wf = lookup(record.workflow, record.version if version is None else version, run_id=run_id)
    return replay(engine, record, engine.store.load_entries(run_id), wf)


# who still needs old code -----------------------------------------------------------------
def runs_on(engine, workflow, version=None, include_completed=False) -> list:
    """The runs of `workflow` (on `version`, if given), oldest first. Completed runs are
    left out unless asked for: every other run may still execute again (a failed,
    diverged, dead or halted one when someone resumes it), so it still needs its code."""
    return [engine.get(r.run_id) for r in engine.store.list_runs()
            if r.workflow == workflow and (version is None or r.version == version)
            and (include_completed or r.status != COMPLETED)]


class PatchReport:
    """Where every unfinished run of a workflow stands with one patch gate.

    old:          runs whose history went past the gate on the old branch: they need it.
    new:          runs holding the gate's marker: they need the gate (or deprecate_patch).
    not_reached:  runs that have not reached the gate: they will take the new branch.
    broken:       {run id: why} runs whose history the code registered now cannot replay.
    unchecked:    {run id: why} runs whose version's code this process has not registered.
    """

    def __init__(self, workflow, patch):
        self.workflow, self.patch = workflow, patch
        self.old, self.new, self.not_reached = [], [], []
        self.broken, self.unchecked = {}, {}

    @property
    def advice(self) -> str:
        gate, call = repr(self.patch), f"ctx.deprecate_patch({self.patch!r})"
        if self.broken or self.unchecked:
            return (f"{len(self.broken) + len(self.unchecked)} run(s) could not be checked "
                    "(see .broken and .unchecked): fix that before changing the gate")
        if self.old:
            return (f"keep `if ctx.patched({gate}):` and its old branch: {len(self.old)} "
                    "unfinished run(s) still take the old branch")
        if self.new:
            return (f"no run needs the old branch: replace the gate by {call} and delete the "
                    f"old branch; delete {call} once the {len(self.new)} run(s) holding the "
                    "marker have finished")
        return f"no unfinished run has met the gate: it (and any {call}) can go"

    def __repr__(self):
        return (f"PatchReport({self.workflow!r}, {self.patch!r}: old branch {len(self.old)}, "
                f"new branch {len(self.new)}, not reached {len(self.not_reached)}"
                + (f", broken {len(self.broken)}" if self.broken else "")
                + (f", unchecked {len(self.unchecked)}" if self.unchecked else "")
                + f" — {self.advice})")


def patch_report(engine, workflow, patch) -> PatchReport:
    """Replay every unfinished run of `workflow` on its version's code registered now, and
    sort the runs by what the gate `patch` does for them (see PatchReport)."""
    report = PatchReport(workflow, patch)
    versions = registered().get(workflow, [])
    for record in engine.store.list_runs():
        if record.workflow != workflow or record.status == COMPLETED:
            continue
        if record.version not in versions:
            report.unchecked[record.run_id] = (f"no code for {workflow} v{record.version} is "
                                               f"registered in this process")
            continue
        check = replay(engine, record, engine.store.load_entries(record.run_id),
                       lookup(workflow, record.version))
        if not check.ok:
            report.broken[record.run_id] = check.error
        elif patch in check.gates:
            (report.new if check.gates[patch] else report.old).append(record.run_id)
        else:
            report.not_reached.append(record.run_id)
    return report


# state migrations -------------------------------------------------------------------------
_migrations = {}     # (workflow, from_version, to_version) -> Migration


class Migration:
    def __init__(self, workflow, from_version, to_version, fn):
        self.workflow, self.from_version, self.to_version, self.fn = workflow, from_version, to_version, fn

    def __repr__(self):
        return f"<migration {self.workflow!r} v{self.from_version} -> v{self.to_version}: {self.fn.__name__}>"


def migration(workflow: str, from_version: int, to_version: int):
    """Decorator: register `fn(state) -> state`, which turns a run's recorded state on
    `from_version` into what `to_version` of the workflow expects.

        @dl.migration("refund", from_version=1, to_version=2)
        def amounts_in_cents(state):
            order_id, dollars = state.args
            state.args = [order_id, round(dollars * 100)]
            return state

    `state` is a RunState: `args`, `kwargs`, `steps` ({label: recorded result}) and `waits`
    ({label: what the wait returned}); change them in place or return a new RunState. A
    migration cannot add or remove steps: positions in a history are fixed (fork a run
    to execute a step again). Migrations chain: a run on v1 upgraded to v3 goes through
    1->2 and 2->3. Re-running the defining cell replaces the registration.
    """
    for what, value in (("from_version", from_version), ("to_version", to_version)):
        if type(value) is not int or value < 1:
            raise ValueError(f"migration of {workflow!r}: {what} must be a positive integer, "
                             f"got {value!r}")
    if to_version <= from_version:
        raise ValueError(f"migration of {workflow!r}: to_version ({to_version}) must be newer "
                         f"than from_version ({from_version}); runs only move forward")

    def register(fn):
        _migrations[(workflow, from_version, to_version)] = Migration(workflow, from_version,
                                                                      to_version, fn)
        return fn

    return register


class RunState:
    """A run's recorded state at one workflow version: what a migration reads and changes."""

    def __init__(self, run_id, workflow, version, args, kwargs, steps, waits):
        self.run_id, self.workflow, self.version = run_id, workflow, version
        self.args, self.kwargs = args, kwargs
        self.steps, self.waits = steps, waits     # {label: value}, in the order recorded

    def __repr__(self):
        return (f"RunState({self.run_id!r}, {self.workflow} v{self.version}, args={self.args!r}, "
                f"kwargs={self.kwargs!r}, steps={list(self.steps)}, waits={list(self.waits)})")


def _state_of(record, entries):
    values = {STEP: {}, SIGNAL: {}}
    for e in entries:
        if e.kind in values:
            values[e.kind][e.label] = jsonvalue.decode(e.result_json)
    return RunState(record.run_id, record.workflow, record.version,
                    jsonvalue.decode(record.args_json), jsonvalue.decode(record.kwargs_json),
                    values[STEP], values[SIGNAL])


def _path(workflow, start, target, refuse):
    """The migrations that lead from version `start` to `target`, in order (at each version,
    the one that goes furthest without passing the target)."""
    path, at = [], start
    while at < target:
        options = [m for (w, f, t), m in _migrations.items() if w == workflow and f == at and t <= target]
        if not options:
            known = sorted(f"v{f}->v{t}" for (w, f, t) in _migrations if w == workflow)
            refuse(f"no migration from {workflow} v{at} is registered (registered: "
                   f"{', '.join(known) or 'none'}). Define one with @dl.migration({workflow!r}, "
                   f"from_version={at}, to_version={target}) to turn the run's arguments and "
                   "recorded results into what the new version expects.")
        step = max(options, key=lambda m: m.to_version)
        path.append(step)
        at = step.to_version
    return path


def _migrate(record, entries, path, refuse):
    """Run the migrations over the run's state; return (new record, new entries, changed
    positions). Nothing is written."""
    state = _state_of(record, entries)
    for m in path:
        labels = (list(state.steps), list(state.waits))
        try:
            out = m.fn(state)
        except Exception as exc:     # noqa: BLE001 - reported with the run and migration named
            refuse(f"the migration {m.workflow} v{m.from_version}->v{m.to_version} "
                   f"({m.fn.__name__}) raised {type(exc).__name__}: {exc}")
        state = state if out is None else out
        if not isinstance(state, RunState):
            refuse(f"the migration {m.fn.__name__} returned {type(state).__name__}, not the "
                   "RunState it was given (or None after changing it in place)")
        if (list(state.steps), list(state.waits)) != labels:
            refuse(f"the migration {m.fn.__name__} added or removed recorded steps or waits "
                   f"(before: {labels}; after: {(list(state.steps), list(state.waits))}); a "
                   "history's positions are fixed: fork the run to execute a step again")
        if not isinstance(state.args, list) or not isinstance(state.kwargs, dict):
            refuse(f"the migration {m.fn.__name__} left args as {type(state.args).__name__} "
                   f"and kwargs as {type(state.kwargs).__name__}; they must be a list and a dict")
        _check_json(state, m, refuse)
        state.version = m.to_version
    what = f"the migrated state of run {record.run_id!r}"
    new_record = record.copy(version=state.version,
                             args_json=jsonvalue.encode(state.args, what=f"{what}: args are"),
                             kwargs_json=jsonvalue.encode(state.kwargs, what=f"{what}: kwargs are"))
    new_entries, changed = [], []
    values = {STEP: state.steps, SIGNAL: state.waits}
    for e in entries:
        if e.kind in values:
            text = jsonvalue.encode(values[e.kind][e.label], what=f"{what}: {e.label!r} is")
            if text != jsonvalue.encode(jsonvalue.decode(e.result_json), what="a recorded value"):
                e = Entry(*e[:4], text, *e[5:])
                changed.append(e.position)
        new_entries.append(e)
    return new_record, new_entries, changed


def _check_json(state, m, refuse):
    """Every value a migration leaves must be recordable, or the upgrade is refused naming it."""
    values = [("args", state.args), ("kwargs", state.kwargs),
              *((f"step {label!r}", v) for label, v in state.steps.items()),
              *((f"wait {label!r}", v) for label, v in state.waits.items())]
    for what, value in values:
        try:
            jsonvalue.encode(value, what=f"{what} is")
        except StepResultNotJSON as exc:
            refuse(f"the migration {m.fn.__name__} left a value JSON cannot hold: {exc}")


def _where(record, entries) -> str:
    """Where a run stands, for error messages: its status and its last step or wait."""
    last = next((e.label for e in reversed(entries) if e.kind in (STEP, ERROR)), None)
    place = f"after step {last!r}" if last else "before its first step"
    state = f"waiting for {record.waiting_for!r}" if record.waiting_for else record.status
    return f"{state} {place}"


def _write_entries(engine, run_id, entries):
    """Record `entries` into run `run_id`, each under the name of the worker that executed
    it, fenced by this worker's lease (which the caller holds, inside a store batch)."""
    for e in entries:
        if e.worker is None:                 # written before entries named their worker
            e = Entry(*e[:8], engine.worker, e.cost)
        engine.store.record_entry(run_id, e, fence=engine.worker)


def _note(run, text):
    from dataclasses import replace     # on first use (see run.py on import time)
    return replace(run, note=text)


def upgrade(engine, run_id, to_version=None):
    """Move run `run_id` onto `to_version` (default: the newest registered) of its workflow.

    1. The registered migrations from the run's version to the target turn its recorded
       state (arguments, step results, signal payloads) into the target's.
    2. The target's code replays the migrated history (a replay check): if it diverges
       or raises, the upgrade is refused with the reason, and nothing is changed.
    3. In one transaction: the run's version and arguments, the entries whose values
       changed (re-recorded in place, each under the worker that first recorded it), and
       an "upgraded" event holding the old arguments, plus a "migrated" event per changed
       entry holding its old value.

    A parked run stays parked if the target parks it the same way; otherwise it is made
    due, so the next recover() continues it. A diverged run whose history the target
    replays cleanly is no longer diverged: it is made due too. A completed run cannot be
    upgraded (fork it onto the new version instead); runs never move to an older version.
    Raises UpgradeRefused (naming the run, versions and where it stands), RunFinishedError,
    WorkflowNotRegistered (no code for the target here), or LeaseHeldError (another worker
    is executing the run: upgrade it when it stops or parks).
    """
    record = engine.record(run_id)
    target = latest(record.workflow).version if to_version is None else to_version
    if record.status != COMPLETED and target == record.version:
        return _note(engine.get(run_id), f"run {run_id!r} is on {record.workflow} "
                                         f"v{target} already: nothing to do")
    wf = _upgrade_target(record, target)
    with engine.holding(run_id, busy="upgrade it when it has stopped or parked") as record:
        _upgrade_target(record, target)        # the same answer, now that nothing can change
        return _upgrade(engine, record, target, wf)


def _upgrade_target(record, target):
    """The code of version `target`, if run `record` may move there; else why not."""
    run_id = record.run_id
    if record.status == COMPLETED:
        raise RunFinishedError(
            f"run {run_id!r} completed on {record.workflow} v{record.version}; an upgrade "
            f"cannot change what happened. To run part of it again on v{target}, "
            f"fork it: engine.fork({run_id!r}, from_step=..., version={target}).")
    if target < record.version:
        raise UpgradeRefused(f"run {run_id!r} is on {record.workflow} v{record.version}; "
                             f"it cannot move back to v{target}: runs only move forward")
    return lookup(record.workflow, target, run_id=run_id)


def _upgrade(engine, record, target, wf):
    store, run_id = engine.store, record.run_id
    entries = store.load_entries(run_id)
    old = record.version

    def refuse(reason):
        raise UpgradeRefused(f"run {run_id!r} ({record.workflow} v{old}, {_where(record, entries)}) "
                             f"cannot move to v{target}: {reason} Nothing was changed.")

    path = _path(record.workflow, old, target, refuse)
    new_record, new_entries, changed = _migrate(record, entries, path, refuse)
    check = replay(engine, new_record, new_entries, wf)
    if not check.ok:
        refuse(f"replayed on v{target}'s code, its history does not fit ({check.error}).")
    fields = {"version": target, "args_json": new_record.args_json,
              "kwargs_json": new_record.kwargs_json}
    parked_the_same = (record.status in PARKED and check.park is not None
                       and check.park == (record.status, record.waiting_for, record.wake_at))
    if record.status == DIVERGED or (record.status in PARKED and not parked_the_same):
        fields.update(status=RUNNING, waiting_for=None, wake_at=None, error=None,
                      interruptions=0, taken_up_at=None)
    steps = " then ".join(f"v{m.from_version}->v{m.to_version} ({m.fn.__name__})" for m in path)
    with store.batch():
        store.update_run(run_id, owner=engine.worker, updated_at=engine.clock(), **fields)
        if changed:
            store.discard_entries_from(run_id, changed[0])
            _write_entries(engine, run_id, [e for e in new_entries if e.position >= changed[0]])
        for position in changed:
            before = entries[position]
            engine.log_event(run_id, "migrated", position=position, name=before.label,
                             detail=before.result_json)
        engine.log_event(run_id, "upgraded", detail=json.dumps(
            {"from": old, "to": target, "migrations": steps,
             "args": jsonvalue.decode(record.args_json),
             "kwargs": jsonvalue.decode(record.kwargs_json)}))
    due = " It is due now: the next recover() continues it." if fields.get("status") == RUNNING else ""
    return _note(engine.get(run_id), f"run {run_id!r} moved from {record.workflow} v{old} to "
                                     f"v{target} by {steps}; {len(changed)} recorded "
                                     f"value(s) changed.{due}")


# forks ------------------------------------------------------------------------------------
def fork(engine, source_id, from_step, run_id=None, version=None):
    """Start a new run that copies run `source_id`'s checkpoints before `from_step` and
    executes from there, on today's code (on `version`, with migrations, if given).

    `from_step` is the label of a recorded step ("email", "search#2") or wait. The new run
    gets the source's arguments, budget and every entry before that position (step results,
    ctx.now/uuid/random values, waits and their payloads, patch markers), each recorded as
    by the worker "copied from <source>"; those steps are not executed again. Everything
    from `from_step` on executes for real, as in any run.

    Idempotency keys: `ctx.idempotency_key(...)` derives a key from the run's id and its
    parts, so the fork — a new run id — derives new keys. A step the fork executes again is
    a new effect to every provider (a refund forked from "refund" pays again: fork from the
    first step you want to happen again). A copied step is not executed at all, so its
    effect is not repeated. (A key a step computed and returned is copied with its result:
    a later step that uses that recorded key is recognised as a repeat by its provider.)
    Signals sent to the source are not copied: a wait after the fork point waits again.
    The copied steps count toward the fork's budget, as they do in its history.

    The copied history is replayed on the target code first (a replay check); if it does
    not fit, the fork is refused and nothing is created. Calling fork again with the same
    run id, source and step continues that fork instead of starting another.
    """
    source = engine.record(source_id)
    entries = engine.store.load_entries(source_id)
    at = next((e.position for e in entries if e.label == from_step and e.kind in (STEP, ERROR, TIMER)), None)
    if at is None:
        labels = list(dict.fromkeys(e.label for e in entries if e.kind in (STEP, ERROR, TIMER)))
        raise UnknownStepError(f"run {source_id!r} has no recorded step or wait {from_step!r} to "
                               f"fork from (it has {labels})")
    target = source.version if version is None else version
    if target < source.version:
        raise UpgradeRefused(f"run {source_id!r} is on {source.workflow} v{source.version}; a "
                             f"fork of it cannot move back to v{target}")
    wf = lookup(source.workflow, target, run_id=source_id)
    if run_id is None:
        run_id = f"{source_id}-fork-{engine.ids()}"
    else:
        check_run_id(run_id)
    # Copied entries name where they come from instead of the worker that executed them
    # (the source's history keeps that), so the fork's history and trace show which steps
    # it executed itself and which it copied.
    copied = f"copied from {source_id}"
    prefix = [Entry(*e[:8], copied, e.cost) for e in entries[:at]]
    copy = source.copy(run_id=run_id, status=RUNNING, result_json=None, error=None,
                       halt_reason=None, waiting_for=None, wake_at=None, spent_steps=0,
                       spent_cost=0.0, interruptions=0, taken_up_at=None)

    def refuse(reason):
        raise UpgradeRefused(f"run {source_id!r} ({source.workflow} v{source.version}) cannot be "
                             f"forked from {from_step!r} onto v{target}: {reason} Nothing was created.")

    if target != source.version:
        copy, prefix, _ = _migrate(copy, prefix, _path(source.workflow, source.version, target,
                                                       refuse), refuse)
    check = replay(engine, copy, prefix, wf)
    if not check.ok:
        refuse(f"replayed on v{target}'s code, the copied steps do not fit ({check.error}).")
    lineage = json.dumps({"from": source_id, "step": from_step, "position": at, "version": target})
    now = engine.clock()
    record = RunRecord(run_id, source.workflow, target, copy.args_json, copy.kwargs_json,
                       RUNNING, now, now, budget_json=source.budget_json,
                       lease_owner=engine.worker, lease_expires=now + engine.lease_seconds)
    with contextlib.ExitStack() as hold:
        try:
            with engine.store.batch():
                engine.store.create_run(record)
                hold.enter_context(engine.holding(run_id, created=record))
                _write_entries(engine, run_id, prefix)
                engine.log_event(run_id, "forked", position=at, name=from_step, detail=lineage)
                engine.log_event(source_id, "forked_to", position=at, name=from_step,
                                 detail=json.dumps({"run": run_id, "version": target}))
        except ValueError:                       # the run id exists
            existing = engine.store.get_run(run_id)
            if existing is None:
                raise
            same = [e for e in engine.store.events(run_id) if e.kind == "forked" and e.detail == lineage]
            if not same:
                raise RunArgumentsMismatch(
                    f"run {run_id!r} already exists and is not a fork of {source_id!r} from "
                    f"{from_step!r} on v{target}; choose another run id for the fork") from None
            return _note(engine.resume(run_id),
                         f"run {run_id!r} is the fork of {source_id!r} from {from_step!r} made "
                         "before: it was continued, not made again")
        run = engine.drive(record)               # replays the copied entries, then executes
    return _note(run, f"forked from {source_id!r} at {from_step!r}: {_entries(len(prefix))} "
                      f"copied, executed from position {at} on {source.workflow} v{target}")


def _entries(n) -> str:
    return f"{n} {'entry' if n == 1 else 'entries'}"
