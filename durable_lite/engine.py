"""`Engine`: starts, resumes, signals and recovers runs kept in a store.

An engine holds no run state of its own between calls: everything a run needs to continue
lives in the store. Any engine on the same store — in this process or a fresh one after a
crash — can pick a run up where its checkpoints end.
"""

import os
import random
import secrets
import socket
from typing import List, Optional

from . import jsonvalue
from .clock import SystemClock, random_ids, sleeper_for
from .context import Context, Halt, Park
from .faults import CrashPlan
from .errors import (LeaseHeldError, LeaseLostError, NonDeterminismError, RunArgumentsMismatch,
                     RunFinishedError, UnknownRunError)
from .policy import Budget, Usage
from .run import Run
from .store.records import (COMPLETED, FAILED, FINISHED, HALTED, PARKED, RUNNING, SLEEPING,
                            STEP, WAITING, Event, RunRecord)
from .workflow import Workflow, latest, lookup

_HOST = socket.gethostname()


class Engine:
    """Run workflows durably on `store`.

    clock:  callable returning epoch seconds (default: real time). A `FakeClock` makes
            waits, deadlines and backoff instant and deterministic.
    ids:    callable returning a fresh id string (run ids, ctx.uuid). Default: uuid4.
    seed:   seeds ctx.random() and retry jitter.
    sleep:  how to wait between retries (default: the clock's own sleep, else time.sleep).
    lease_seconds: how long a worker's claim on a run lasts without renewal.
    crash_at: a faults.CrashAt (or a list) to inject a crash; each fires once.
    """

    def __init__(self, store, clock=None, *, ids=None, seed=None, sleep=None,
                 lease_seconds: float = 30.0, crash_at=None, worker: Optional[str] = None):
        self.store = store
        self.clock = clock or SystemClock()
        self.ids = ids or random_ids
        self.rng = random.Random(seed)
        self.sleep = sleep or sleeper_for(self.clock)
        self.lease_seconds = lease_seconds
        self.worker = worker or f"{_HOST}:{os.getpid()}:{secrets.token_hex(3)}"
        self.crash_at = crash_at
        self.on_step = None       # optional hook(label, "executed"|"replayed") for lab widgets
        self._lease_until = {}

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
        args_json = jsonvalue.encode(list(args), what=f"the arguments of run {run_id!r}")
        kwargs_json = jsonvalue.encode(kwargs, what=f"the keyword arguments of run {run_id!r}")
        existing = self.store.get_run(run_id)
        if existing is not None:
            if (existing.workflow, existing.args_json, existing.kwargs_json) != (wf.name, args_json, kwargs_json):
                raise RunArgumentsMismatch(
                    f"run {run_id!r} already exists as {existing.workflow}{existing.args_json} "
                    f"{existing.kwargs_json}; it cannot be started again as "
                    f"{wf.name}{args_json} {kwargs_json}. Use a new run id.")
            return self._continue(existing, budget)
        now = self.clock()
        self.store.create_run(RunRecord(
            run_id, wf.name, wf.version, args_json, kwargs_json, RUNNING, now, now,
            budget_json=None if budget is None else jsonvalue.encode(budget.to_json(), what="budget")))
        self._event(run_id, "started", detail=f"{wf.name} v{wf.version}")
        return self._drive(run_id, must_lease=True)

    def resume(self, run_id: str, budget: Optional[Budget] = None) -> Run:
        """Continue a run from its checkpoints, in this process or any other.

        A completed run is returned as it is. A halted run stays halted unless a new
        `budget` is given. A parked run re-checks its signal, deadline or wake time.
        """
        return self._continue(self._record(run_id), budget)

    def _continue(self, record, budget):
        if budget is not None:
            self.store.update_run(record.run_id, budget_json=jsonvalue.encode(budget.to_json(), what="budget"))
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
        worker are left to it.
        """
        now = self.clock()
        out = []
        for record in self.store.list_runs([RUNNING, WAITING, SLEEPING]):
            if record.status == WAITING:
                due = record.wake_at <= now or self.store.pending_signal(record.run_id, record.waiting_for)
            elif record.status == SLEEPING:
                due = record.wake_at <= now
            else:
                due = True
            if due:
                try:
                    run = self._drive(record.run_id, must_lease=False)
                except LeaseLostError:
                    continue
                if run is not None:
                    out.append(run)
        return out

    # signals ----------------------------------------------------------------------------
    def signal(self, run_id: str, name: str, payload=None) -> None:
        """Deliver a signal durably. A signal sent before the run waits for it is kept.

        The run continues at the next `resume` or `recover` (in any process).
        """
        record = self._record(run_id)
        if record.status in FINISHED:
            raise RunFinishedError(f"run {run_id!r} is {record.status}; it cannot receive signal {name!r}")
        text = jsonvalue.encode(payload, what=f"the payload of signal {name!r} to run {run_id!r}")
        self.store.add_signal(run_id, name, text, self.clock())
        self._event(run_id, "signal", name=name, detail=text)

    # reading ----------------------------------------------------------------------------
    def get(self, run_id: str, executed=(), replayed=()) -> Run:
        record = self._record(run_id)
        usage = self._usage(self.store.load_entries(run_id))
        return Run(record.run_id, record.workflow, record.version, record.status,
                   jsonvalue.decode(record.result_json), record.error, record.halt_reason,
                   record.waiting_for, record.wake_at, usage.steps, usage.cost,
                   list(executed), list(replayed))

    def runs(self, status: Optional[str] = None) -> List[Run]:
        return [self.get(r.run_id) for r in self.store.list_runs([status] if status else [])]

    def history(self, run_id: str) -> List[dict]:
        """One row per recorded entry, plus a row for each step whose attempts all failed.

        Columns: position, step, kind, status, attempts, started_at, ended_at, worker, cost,
        error (the last failed attempt, if any).
        """
        self._record(run_id)
        failures = {}
        for e in self.store.events(run_id):
            if e.kind == "attempt_failed":
                failures.setdefault(e.position, []).append(e)
        rows = []
        for entry in self.store.load_entries(run_id):
            failed = failures.pop(entry.position, [])
            rows.append({"position": entry.position, "step": entry.label, "kind": entry.kind,
                         "status": "completed", "attempts": entry.attempts,
                         "started_at": entry.started_at, "ended_at": entry.ended_at,
                         "worker": entry.worker, "cost": entry.cost,
                         "error": failed[-1].detail if failed else None,
                         "result": jsonvalue.decode(entry.result_json)})
        for position, failed in sorted(failures.items()):
            rows.append({"position": position, "step": failed[-1].name, "kind": STEP,
                         "status": "failed", "attempts": len(failed),
                         "started_at": failed[0].at, "ended_at": failed[-1].at,
                         "worker": failed[-1].worker, "cost": 0.0, "error": failed[-1].detail,
                         "result": None})
        return rows

    def events(self, run_id: str) -> List[Event]:
        """The run's event log: starts, resumes, parks, signals, failed attempts, endings."""
        self._record(run_id)
        return self.store.events(run_id)

    def invalidate(self, run_id: str, step: str) -> List[str]:
        """Forget the checkpoint of `step` (a label such as "draft" or "search#2") and every
        entry after it, so the next resume executes them again. Use it when a memo is stale
        on purpose (the source data changed). Returns the labels discarded; what they held
        is kept in the run's event log.
        """
        record = self._record(run_id)
        entries = self.store.load_entries(run_id)
        match = [e for e in entries if e.label == step and e.kind == STEP]
        if not match:
            labels = [e.label for e in entries if e.kind == STEP]
            raise KeyError(f"run {run_id!r} has no recorded step {step!r} (it has {labels})")
        removed = self.store.discard_entries_from(run_id, match[0].position)
        for e in removed:
            self._event(run_id, "invalidated", position=e.position, name=e.label, detail=e.result_json)
        if record.status in (COMPLETED, FAILED):
            self.store.update_run(run_id, status=RUNNING, result_json=None, error=None)
        return [e.label for e in removed if e.kind == STEP]

    # internals --------------------------------------------------------------------------
    def _record(self, run_id):
        record = self.store.get_run(run_id)
        if record is None:
            raise UnknownRunError(f"no run {run_id!r} in {self.store!r}")
        return record

    @staticmethod
    def _usage(entries) -> Usage:
        steps = [e for e in entries if e.kind == STEP]
        return Usage(len(steps), sum(e.cost for e in steps))

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
        self._crashes.check(step, occurrence, when)

    # leases: one worker per run at a time
    def _take_lease(self, run_id, record) -> bool:
        now = self.clock()
        until = now + self.lease_seconds
        steal = record.lease_owner if _owner_is_dead(record.lease_owner) else None
        if self.store.try_lease(run_id, self.worker, until, now, steal_from=steal):
            self._lease_until[run_id] = until
            return True
        return False

    def _keep_lease(self, run_id):
        """Renew the lease when half of it is used up; fail if another worker took it."""
        now = self.clock()
        until = self._lease_until.get(run_id, 0)
        if now < until - self.lease_seconds / 2:
            return
        if until < now or not self.store.try_lease(run_id, self.worker, now + self.lease_seconds, now):
            raise LeaseLostError(f"run {run_id!r}: worker {self.worker} lost its lease; another "
                                 "worker may be running it")
        self._lease_until[run_id] = now + self.lease_seconds

    def _drive(self, run_id, must_lease) -> Optional[Run]:
        record = self._record(run_id)
        if not self._take_lease(run_id, record):
            if must_lease:
                raise LeaseHeldError(f"run {run_id!r} is leased by worker {record.lease_owner} "
                                     f"until {record.lease_expires}; try again later")
            return None
        try:
            record = self._record(run_id)     # re-read: another worker may have finished it
            if record.status in (COMPLETED, HALTED):
                return self.get(run_id)
            return self._execute(record)
        finally:
            self.store.release_lease(run_id, self.worker)
            self._lease_until.pop(run_id, None)

    def _execute(self, record) -> Run:
        run_id = record.run_id
        wf = lookup(record.workflow, record.version, run_id=run_id)
        entries = self.store.load_entries(run_id)
        budget = Budget.from_json(jsonvalue.decode(record.budget_json))
        ctx = Context(self, record, entries, self._usage(entries), budget, on_step=self.on_step)
        if record.status != RUNNING or record.waiting_for is not None:
            self.store.update_run(run_id, status=RUNNING, waiting_for=None, wake_at=None,
                                  error=None, updated_at=self.clock())
        if entries:
            self._event(run_id, "resumed", detail=f"{len(entries)} entries recorded")
        args = jsonvalue.decode(record.args_json)
        kwargs = jsonvalue.decode(record.kwargs_json)
        try:
            result = wf.fn(ctx, *args, **kwargs)
        except Park as park:
            self.store.update_run(run_id, status=park.status, waiting_for=park.waiting_for,
                                  wake_at=park.wake_at, updated_at=self.clock())
            self._event(run_id, park.status, name=park.waiting_for, detail=str(park.wake_at))
        except Halt as halt:
            self.store.update_run(run_id, status=HALTED, halt_reason=halt.reason, updated_at=self.clock())
            self._event(run_id, "halted", detail=halt.reason)
        except (NonDeterminismError, LeaseLostError):
            raise     # a bug in the code or a lost race: the history stays as it is
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            self.store.update_run(run_id, status=FAILED, error=message, updated_at=self.clock())
            self._event(run_id, "failed", detail=message)
        else:
            if ctx.position < ctx.recorded:
                raise NonDeterminismError(
                    f"run {run_id!r} finished after {ctx.position} entries, but its history "
                    f"records {ctx.recorded}; the workflow code no longer reaches "
                    f"{entries[ctx.position].label!r}")
            text = jsonvalue.encode(result, what=f"the workflow result of run {run_id!r}")
            self.store.update_run(run_id, status=COMPLETED, result_json=text, updated_at=self.clock())
            self._event(run_id, "completed")
        return self.get(run_id, ctx.executed, ctx.replayed)


def _owner_is_dead(owner: Optional[str]) -> bool:
    """A lease owner on this host whose process no longer exists can be taken over at once."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != _HOST or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
