"""`Engine`: starts, resumes, signals and recovers runs kept in a store.

An engine holds no run state of its own between calls: everything a run needs to continue
lives in the store. Any engine on the same store — in this process or a fresh one after a
crash — can pick a run up where its checkpoints end.
"""

import os
import random
import secrets
from typing import List, Optional

from . import jsonvalue
from .clock import FakeClock, SystemClock, random_ids, sleeper_for
from .context import Context, Halt, Park
from .faults import CrashPlan
from .errors import (LeaseHeldError, LeaseLostError, NonDeterminismError, RunArgumentsMismatch,
                     RunFinishedError, UnknownRunError, WorkflowNotRegistered)
from .lease import HOST, Heartbeat, owner_is_dead
from .policy import Budget, Usage
from .run import Run
from .store.records import (COMPLETED, ERROR, FAILED, HALTED, RUNNING, SLEEPING,
                            STEP, TIMER, WAITING, Event, RunRecord)
from .workflow import Workflow, latest, lookup


class Engine:
    """Run workflows durably on `store`.

    clock:  callable returning epoch seconds (default: real time). A `FakeClock` makes
            waits, deadlines and backoff instant and deterministic.
    ids:    callable returning a fresh id string (run ids, ctx.uuid). Default: uuid4.
    seed:   seeds ctx.random() and retry jitter.
    sleep:  how to wait between retries (default: the clock's own sleep, else time.sleep).
    lease_seconds: how long a worker's claim on a run lasts without renewal (see lease.py;
            a background heartbeat renews it while a step runs, on a real clock).
    crash_at: a faults.CrashAt (or a list) to inject a crash; each fires once.
    worker: this engine's name in leases and history (default "host:pid:random"). Two
            engines must never share a name: a lease "already ours" is renewed, not refused.
    """

    def __init__(self, store, clock=None, *, ids=None, seed=None, sleep=None,
                 lease_seconds: float = 30.0, crash_at=None, worker: Optional[str] = None):
        self.store = store
        self.clock = clock or SystemClock()
        self.ids = ids or random_ids
        self.rng = random.Random(seed)                  # ctx.random()
        self.jitter_rng = random.Random(seed)           # retry jitter, apart from ctx.random
        self.sleep = sleep or sleeper_for(self.clock)
        self.lease_seconds = lease_seconds
        self.worker = worker or f"{HOST}:{os.getpid()}:{secrets.token_hex(3)}"
        self.crash_at = crash_at
        self.on_step = None       # optional hook(label, "executed"|"replayed") for lab widgets
        self._lease_until = {}    # run id -> until when this worker surely holds its lease
        # Fake time does not pass while a step runs, so only a real clock needs a heartbeat.
        self._heartbeat = None if isinstance(self.clock, FakeClock) else Heartbeat(self)

    def __repr__(self):
        return f"Engine({self.store!r})"

    # starting and resuming --------------------------------------------------------------
    def start(self, wf, *args, run_id: Optional[str] = None, budget: Optional[Budget] = None,
              **kwargs) -> Run:
        """Start a run and execute it until it completes, fails, halts or parks.

        With a `run_id` that already exists this is "attempt 2": a completed run returns its
        recorded result; an unfinished or failed one continues from its checkpoints.
        """
        wf = wf if isinstance(wf, Workflow) else latest(wf)
        run_id = run_id or f"{wf.name}-{self.ids()}"
        args_json = jsonvalue.encode(list(args), what=f"the arguments of run {run_id!r} include")
        kwargs_json = jsonvalue.encode(kwargs, what=f"the keyword arguments of run {run_id!r} include")
        existing = self.store.get_run(run_id)
        if existing is None:
            now = self.clock()
            # The run is created with our lease already on it, so no other worker's
            # recover() can pick it up between its creation and its first step.
            record = RunRecord(
                run_id, wf.name, wf.version, args_json, kwargs_json, RUNNING, now, now,
                budget_json=None if budget is None else jsonvalue.encode(budget.to_json(), what="the budget is"),
                lease_owner=self.worker, lease_expires=now + self.lease_seconds)
            try:
                self.store.create_run(record)
            except ValueError:             # another process created it a moment ago
                existing = self.store.get_run(run_id)
                if existing is None:
                    raise
            else:
                self._lease_until[run_id] = record.lease_expires
                self._event(run_id, "started", detail=f"{wf.name} v{wf.version}")
                return self._drive(run_id, must_lease=True)
        _check_same_run(existing, wf, args_json, kwargs_json)
        return self._continue(existing, budget)

    def resume(self, run_id: str, budget: Optional[Budget] = None) -> Run:
        """Continue a run from its checkpoints, in this process or any other.

        A completed run is returned as it is. A halted run stays halted unless a new
        `budget` is given. A parked run re-checks its signal, deadline or wake time.
        """
        return self._continue(self._record(run_id), budget)

    def _continue(self, record, budget):
        if budget is not None:
            self.store.update_run(record.run_id, budget_json=jsonvalue.encode(budget.to_json(), what="the budget is"))
            if record.status == HALTED:
                self.store.update_run(record.run_id, status=RUNNING, halt_reason=None)
                record.status = RUNNING
        if record.status in (COMPLETED, HALTED):
            return self.get(record.run_id)
        return self._drive(record.run_id, must_lease=True)

    def recover(self) -> List[Run]:
        """Resume every unfinished run whose time has come; return what happened to each.

        That is: interrupted runs whose worker is gone, waiting runs whose signal arrived or
        whose deadline passed, sleeping runs whose wake time passed. Runs leased by a live
        worker are left to it, and so are runs whose workflow code this process has not
        registered (a process that has it will recover them). Failed and halted runs wait
        for an explicit `resume`.
        """
        out = []
        for record in self.store.list_runs([RUNNING, WAITING, SLEEPING]):
            if not self._is_due(record):
                continue
            try:
                lookup(record.workflow, record.version, run_id=record.run_id)
            except WorkflowNotRegistered:
                continue
            try:
                run = self._drive(record.run_id, must_lease=False)
            except LeaseLostError:
                continue               # another worker took the run over; it is in good hands
            except NonDeterminismError:
                continue               # recorded as a "diverged" event; fixed code can resume it
            if run is not None:
                out.append(run)
        return out

    def _is_due(self, record) -> bool:
        if record.status == WAITING:
            return (record.wake_at <= self.clock()
                    or self.store.pending_signal(record.run_id, record.waiting_for,
                                                 sent_by=record.wake_at) is not None)
        if record.status == SLEEPING:
            return record.wake_at <= self.clock()
        return record.status == RUNNING

    # signals ----------------------------------------------------------------------------
    def signal(self, run_id: str, name: str, payload=True) -> None:
        """Deliver a signal durably. A signal sent before the run waits for it is kept.
        Any run that has not completed can receive one (a failed or halted run may still
        be resumed).

        `payload` is what the run's `wait_for_signal` returns: any JSON value except None,
        which is how a wait says its deadline passed. With no payload the wait gets True.
        The run continues at the next `resume` or `recover` (in any process).
        """
        if payload is None:
            raise ValueError(f"signal {name!r} to run {run_id!r}: the payload cannot be None, "
                             "because the waiting workflow reads None as 'the deadline passed'. "
                             "Send a value, e.g. {'approved': False}.")
        record = self._record(run_id)
        if record.status == COMPLETED:      # failed and halted runs can still be resumed
            raise RunFinishedError(f"run {run_id!r} is {record.status}; it cannot receive signal {name!r}")
        text = jsonvalue.encode(payload, what=f"the payload of signal {name!r} to run {run_id!r} is")
        self.store.add_signal(run_id, name, text, self.clock())
        self._event(run_id, "signal", name=name, detail=text)

    # reading ----------------------------------------------------------------------------
    def get(self, run_id: str) -> Run:
        """The run as the store has it now."""
        record = self._record(run_id)
        return self._snapshot(record, self._usage(self.store.load_entries(run_id), record))

    @staticmethod
    def _snapshot(record, usage, executed=(), replayed=()) -> Run:
        return Run(record.run_id, record.workflow, record.version, record.status,
                   jsonvalue.decode(record.result_json), record.error, record.halt_reason,
                   record.waiting_for, record.wake_at, usage.steps, usage.cost,
                   list(executed), list(replayed))

    def runs(self, status: Optional[str] = None) -> List[Run]:
        return [self.get(r.run_id) for r in self.store.list_runs([status] if status else [])]

    def history(self, run_id: str) -> List[dict]:
        """One row per position of the run, in order: enough to draw its timeline.

        Columns: position, step (label), kind ("step", "error", "value", "timer", "signal",
        "woke"), status ("completed"; "failed" for a step that exhausted its attempts;
        "incomplete" for a step that was attempted but has no checkpoint yet, e.g. its
        worker crashed), attempts (every attempt at that position over the run's life,
        across resumes), started_at, ended_at, worker, cost, error (the last failed
        attempt's error, if any), errors (all of them), result.
        """
        self._record(run_id)
        failures = {}
        for e in self.store.events(run_id):
            if e.kind == "attempt_failed":
                failures.setdefault((e.position, e.name), []).append(e)
        rows = []
        for entry in self.store.load_entries(run_id):
            failed = failures.pop((entry.position, entry.label), [])
            errors = [e.detail for e in failed]
            if entry.kind == ERROR:
                recorded = jsonvalue.decode(entry.result_json)
                status, result = "failed", None
                attempts = max(len(failed), entry.attempts)
                errors = errors or [recorded["error"]]
            else:
                status, result = "completed", jsonvalue.decode(entry.result_json)
                attempts = len(failed) + 1 if entry.kind == STEP else entry.attempts
            rows.append({"position": entry.position, "step": entry.label, "kind": entry.kind,
                         "status": status, "attempts": attempts,
                         # failed attempts of earlier executions (before a resume) count too
                         "started_at": _earliest(entry.started_at, *(e.at for e in failed[:1])),
                         "ended_at": entry.ended_at, "worker": entry.worker, "cost": entry.cost,
                         "error": errors[-1] if errors else None, "errors": errors,
                         "result": result})
        for (position, label), failed in sorted(failures.items()):
            rows.append({"position": position, "step": label, "kind": STEP,
                         "status": "incomplete", "attempts": len(failed),
                         "started_at": failed[0].at, "ended_at": failed[-1].at,
                         "worker": failed[-1].worker, "cost": 0.0, "error": failed[-1].detail,
                         "errors": [e.detail for e in failed], "result": None})
        return rows

    def events(self, run_id: str) -> List[Event]:
        """The run's event log: starts, resumes, parks, signals, failed attempts, endings."""
        self._record(run_id)
        return self.store.events(run_id)

    def trace(self, run_id: str):
        """The run as a tree of spans — executions, steps, attempts, waits — with the time
        and money on each (see trace.py). Spans still open end at this engine's now."""
        from .trace import build_trace
        return build_trace(self.store, run_id, now=self.clock())

    def invalidate(self, run_id: str, step: str) -> List[str]:
        """Forget the checkpoint of `step` (a label such as "draft" or "search#2"; a failed
        step the workflow caught counts too) and every entry after it, so the next resume
        executes them again. Use it when a memo is stale on purpose (the source data
        changed). Returns the labels discarded: steps, and waits and sleeps, which wait
        again from scratch (a signal a wait received is not handed back). What every
        discarded entry held is kept in the run's event log.

        Raises LeaseHeldError while another worker executes the run: its next checkpoint
        would land after the gap this leaves.
        """
        record = self._record(run_id)
        if not self._take_lease(run_id, record):
            raise LeaseHeldError(f"run {run_id!r} is being executed by worker {record.lease_owner}; "
                                 f"invalidate {step!r} when it has stopped or parked")
        try:
            record = self._record(run_id)     # re-read under the lease
            entries = self.store.load_entries(run_id)
            match = [e for e in entries if e.label == step and e.kind in (STEP, ERROR)]
            if not match:
                labels = [e.label for e in entries if e.kind in (STEP, ERROR)]
                raise KeyError(f"run {run_id!r} has no recorded step {step!r} (it has {labels})")
            # The discarded work was done and paid for: the budget keeps counting it. Recorded
            # before the discard, so a crash in between can only over-count, never forget.
            doomed = self._usage([e for e in entries if e.position >= match[0].position])
            self.store.update_run(run_id, owner=self.worker,
                                  spent_steps=record.spent_steps + doomed.steps,
                                  spent_cost=record.spent_cost + doomed.cost)
            removed = self.store.discard_entries_from(run_id, match[0].position)
            for e in removed:
                self._event(run_id, "invalidated", position=e.position, name=e.label, detail=e.result_json)
            if record.status != HALTED:       # a halted run stays halted until a new budget
                # Finished or parked, it has work to do again now: recover() must see it.
                self.store.update_run(run_id, owner=self.worker, status=RUNNING, result_json=None,
                                      error=None, waiting_for=None, wake_at=None)
        finally:
            self._lease_until.pop(run_id, None)
            self.store.release_lease(run_id, self.worker)
        # One label per step, wait and sleep (each wait or sleep starts with its timer).
        return [e.label for e in removed if e.kind in (STEP, ERROR, TIMER)]

    # internals --------------------------------------------------------------------------
    def _record(self, run_id):
        record = self.store.get_run(run_id)
        if record is None:
            raise UnknownRunError(f"no run {run_id!r} in {self.store!r}")
        return record

    @staticmethod
    def _usage(entries, record=None) -> Usage:
        """Budget counters, derived from the checkpoints (a failed step counts as executed),
        plus, given the run's record, what checkpoints discarded by invalidate() had used."""
        steps = [e for e in entries if e.kind in (STEP, ERROR)]
        usage = Usage(len(steps), sum(e.cost for e in steps))
        if record is not None:
            usage.steps += record.spent_steps
            usage.cost += record.spent_cost
        return usage

    def _event(self, run_id, kind, position=None, name=None, detail=None):
        self.store.add_event(Event(run_id, self.clock(), kind, position, name, self.worker, detail))

    @property
    def crash_at(self):
        return self._crashes.pending

    @crash_at.setter
    def crash_at(self, crashes):
        """A faults.CrashAt, a list of them, or None. Each fires once."""
        self._crashes = CrashPlan(crashes)

    def _fault_point(self, step, occurrence, when):
        if self._crashes:          # nearly always empty: skip the search on the hot path
            self._crashes.check(step, occurrence, when)

    # leases: one worker per run at a time (the rules are in lease.py)
    def _take_lease(self, run_id, record) -> bool:
        now = self.clock()
        until = now + self.lease_seconds
        steal = record.lease_owner if owner_is_dead(record.lease_owner) else None
        if self.store.try_lease(run_id, self.worker, until, now, steal_from=steal):
            self._lease_until[run_id] = until
            return True
        return False

    def _keep_lease(self, run_id):
        """Before new work: make sure the lease is still ours, renewing it when half used.

        The renewal succeeds only while the store still names this worker as the owner, so
        a worker whose lease was taken over (or taken and released) stops here.
        """
        now = self.clock()
        if now < self._lease_until.get(run_id, 0) - self.lease_seconds / 2:
            return
        if not self.store.renew_lease(run_id, self.worker, now + self.lease_seconds):
            raise LeaseLostError(f"run {run_id!r}: worker {self.worker} lost its lease; another "
                                 "worker took the run over")
        self._lease_until[run_id] = now + self.lease_seconds

    def _renew_leases(self):
        """Heartbeat: extend every lease this worker still holds (called from its thread)."""
        if self._lease_until:
            self.store.renew_leases(self.worker, self.clock() + self.lease_seconds)

    def _drive(self, run_id, must_lease) -> Optional[Run]:
        record = self._record(run_id)
        if not self._take_lease(run_id, record):
            if must_lease:
                raise LeaseHeldError(f"run {run_id!r} is leased by worker {record.lease_owner} "
                                     f"until {record.lease_expires}; try again later")
            return None
        if self._heartbeat is not None:
            self._heartbeat.ensure_running()
        try:
            record = self._record(run_id)     # re-read: another worker may have moved it on
            if record.status in (COMPLETED, HALTED):
                return self.get(run_id) if must_lease else None
            if not must_lease and not self._is_due(record):
                return None                   # recover() read a stale list: nothing to do
            return self._execute(record)
        finally:
            self._lease_until.pop(run_id, None)
            self.store.release_lease(run_id, self.worker)

    def _execute(self, record) -> Run:
        run_id = record.run_id
        wf = lookup(record.workflow, record.version, run_id=run_id)
        entries = self.store.load_entries(run_id)
        if record.status == FAILED and entries and entries[-1].kind == ERROR:
            # The step whose failure ended the run gets its attempts again.
            self.store.discard_entries_from(run_id, entries[-1].position)
            self._event(run_id, "retrying", entries[-1].position, entries[-1].label)
            entries.pop()
        budget = Budget.from_json(jsonvalue.decode(record.budget_json))
        ctx = Context(self, record, entries, budget, on_step=self.on_step)
        if record.status != RUNNING or record.waiting_for is not None:
            self.store.update_run(run_id, owner=self.worker, status=RUNNING, waiting_for=None,
                                  wake_at=None, error=None, updated_at=self.clock())
        if entries:
            self._event(run_id, "resumed",
                        detail=f"{len(entries)} {'entry' if len(entries) == 1 else 'entries'} recorded")
        args = jsonvalue.decode(record.args_json)
        kwargs = jsonvalue.decode(record.kwargs_json)
        try:
            try:
                result = wf.fn(ctx, *args, **kwargs)
                # Encoded here so a result JSON cannot hold fails the run like any other
                # error, instead of leaving it "running" for every recover() to trip over.
                text = jsonvalue.encode(result, what=f"the workflow of run {run_id!r} returned")
            finally:
                ctx._check_usable()       # a fatal error the workflow caught still ends it
        except Park as park:
            self.store.update_run(run_id, owner=self.worker, status=park.status,
                                  waiting_for=park.waiting_for, wake_at=park.wake_at,
                                  updated_at=self.clock())
            self._event(run_id, park.status, name=park.waiting_for, detail=str(park.wake_at))
        except Halt as halt:
            self.store.update_run(run_id, owner=self.worker, status=HALTED, halt_reason=halt.reason,
                                  updated_at=self.clock())
            self._event(run_id, "halted", detail=halt.reason)
        except NonDeterminismError as exc:
            self._event(run_id, "diverged", detail=str(exc))
            raise     # a bug in the code: the history stays as it is, for fixed code to resume
        except LeaseLostError:
            raise     # a lost race: the worker that owns the run now carries on
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            self.store.update_run(run_id, owner=self.worker, status=FAILED, error=message,
                                  updated_at=self.clock())
            self._event(run_id, "failed", detail=message)
        else:
            if ctx.position < ctx.recorded:
                error = NonDeterminismError(
                    f"run {run_id!r} finished after {ctx.position} entries, but its history "
                    f"records {ctx.recorded}; the workflow code no longer reaches "
                    f"{entries[ctx.position].label!r}")
                self._event(run_id, "diverged", detail=str(error))
                raise error
            self.store.update_run(run_id, owner=self.worker, status=COMPLETED, result_json=text,
                                  updated_at=self.clock())
            self._event(run_id, "completed")
        # Build the answer from what this execution already holds: no second read of the
        # run's checkpoints (that would cost as much as the replay itself).
        final = self._record(run_id)
        return self._snapshot(final, self._usage(ctx.entries, final), ctx.executed, ctx.replayed)


def _earliest(*times):
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _check_same_run(existing, wf, args_json, kwargs_json):
    """`start` with an existing run id must describe the same run (argument order in a
    dict does not matter; values do)."""
    same = (existing.workflow == wf.name
            and jsonvalue.decode(existing.args_json) == jsonvalue.decode(args_json)
            and jsonvalue.decode(existing.kwargs_json) == jsonvalue.decode(kwargs_json))
    if not same:
        raise RunArgumentsMismatch(
            f"run {existing.run_id!r} already exists as {existing.workflow}{existing.args_json} "
            f"{existing.kwargs_json}; it cannot be started again as "
            f"{wf.name}{args_json} {kwargs_json}. Use a new run id.")
