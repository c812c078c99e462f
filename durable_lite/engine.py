"""`Engine`: starts, resumes, signals and recovers runs kept in a store.

An engine holds no run state of its own between calls: everything a run needs to continue
lives in the store. Any engine on the same store — in this process or a fresh one after a
crash — can pick a run up where its checkpoints end. One engine may also be shared by
threads (a widget callback and a notebook cell, a lesson's worker threads): calls about one
run take their turn (see lease.py), and the store keeps each of its writes whole.

Poison runs: when recovering a run is what kills the worker
-----------------------------------------------------------
recover() exists to continue runs whose execution was interrupted: the process was killed
(a deploy, an out-of-memory kill, SIGKILL) or a BaseException such as SystemExit or
KeyboardInterrupt escaped a step. But if a run's own step is what kills its worker, every
worker that recovers it dies too, again and again, and the runs queued behind it are never
reached. Such a run is a *poison run*, and durable_lite sets it aside:

- Every execution counts itself in the run's record before it starts, and an execution
  that ends — completed, failed, halted, parked, diverged — clears the count. An execution
  that finds the count set knows the one before it never ended: an *interruption*, logged
  as an "interrupted" event.
- Interruptions at the same position in a row are counted (`interruptions` in the record).
  When they reach `max_interruptions` (default 5), the next execution does not run the
  workflow: the run becomes DEAD, with the reason in `run.error` and a "dead" event, and
  recover() goes on with the other runs. An interruption that got further than the last
  one starts the count again, so a long run interrupted by many deploys is not poison.
- A dead run waits for a person: read its events (an interruption inside this process
  names the step and the exception; a killed process cannot say anything), fix the cause,
  then `engine.resume(run_id)` runs it again with a fresh count.

DBOS has the same safety valve with a different count: `max_recovery_attempts` (default
100) limits how many times a workflow is started or recovered at all, progress or not;
past it the workflow's status becomes MAX_RECOVERY_ATTEMPTS_EXCEEDED (DBOS's dead-letter
queue) until `DBOS.resume_workflow` puts it back. Counting only interruptions at one
position lets durable_lite's limit be small without ever catching a run that makes progress.

What a feature may rely on
--------------------------
Queues (queue.py), versioning (versioning.py) and sagas (saga.py) stand above the engine:
they never import this module, and use the public API plus this seam, and nothing else:

- `engine.holding(run_id)`, a context manager: this engine's turn at the run (no other of
  its threads executes it meanwhile) and the run's lease (no other worker does), taken
  together and released however the block ends; it yields the run's record. With
  `created=record`, a run this worker has just written with its lease on it (a queue's
  take, a fork) is held without asking the store again.
- `engine.drive(record, created=...)`: execute a run held that way until it completes,
  fails, halts or parks (replaying its checkpoints first), and return the Run.
- `engine.log_event(run_id, kind, ...)`: one line in the run's event log, by this worker.
- `engine.prepare_run(wf, run_id, args, kwargs, budget)`: a new run checked and encoded the
  way start() does it, before anything is written.
- `engine.record(run_id)`: the run's record as the store has it (UnknownRunError if none).
- `engine.worker`, `engine.store`, `engine.clock`, `engine.lease_seconds`; every write a
  feature makes to a run it holds is fenced with `owner=engine.worker`.

How leases are kept lives in one place, lease.Leases; a fourth feature adds no lease code.
"""

import contextlib
import functools
import json
import math
import os
import weakref

from . import jsonvalue
from .clock import FakeClock, SystemClock, random_ids, sleeper_for
from .context import Context, Halt, Park, RunEnding, check_name, check_run_id
from .errors import (DurableError, LeaseHeldError, LeaseLostError, NonDeterminismError,
                     QueuedRunError, RunArgumentsMismatch, RunFinishedError, StepResultNotJSON,
                     StoreFileError, StoreWriteError, UnknownRunError, WorkflowNotRegistered)
from .lease import HOST, Leases, RunTurns
from .store.records import (COMPENSATED, COMPLETED, DEAD, DIVERGED, ERROR, FAILED, HALTED,
                            QUEUED, RUNNING, SLEEPING, STEP, TIMER, UNFINISHED, WAITING, Event,
                            RunRecord)
from .usage import Usage
from .workflow import Workflow, latest, lookup

DEFAULT_MAX_INTERRUPTIONS = 5
# Runs that stay as they are until someone acts (a halted one: a resume with a new budget).
_SETTLED = (COMPLETED, HALTED, COMPENSATED)


class Engine:
    """Run workflows durably on `store`.

    clock:  callable returning epoch seconds (default: real time). A `FakeClock` makes
            waits, deadlines and backoff instant and deterministic.
    ids:    callable returning a fresh id string (run ids, ctx.uuid). Default: uuid4.
    seed:   seeds ctx.random() and retry jitter.
    sleep:  how to wait between retries (default: the clock's own sleep, else time.sleep).
    lease_seconds: how long a worker's claim on a run lasts without renewal (see lease.py;
            a background heartbeat renews it while a step runs, on a real clock).
    crash_at: a faults.CrashAt (or a list, or a faults.CrashPlan) to inject a crash; each
            fires once.
    worker: this engine's name in leases and history (default "host:pid:random", made anew
            in each forked child). Two engines must never share a name: a lease "already
            ours" is renewed, not refused.
    max_interruptions: after this many interruptions in a row at one position, a run is
            declared dead (see "Poison runs" above). None never declares a run dead.
    """

    def __init__(self, store, clock=None, *, ids=None, seed=None, sleep=None,
                 lease_seconds: float = 30.0, crash_at=None, worker: str | None = None,
                 max_interruptions: int | None = DEFAULT_MAX_INTERRUPTIONS):
        if max_interruptions is not None and (type(max_interruptions) is not int
                                              or max_interruptions < 1):
            raise ValueError(f"max_interruptions must be a whole number >= 1, or None for no "
                             f"limit; got {max_interruptions!r}")
        # A lease of 0 s (or less) is expired the moment it is taken: every other worker's
        # recover() would take the run over while this one executes it, and run its steps
        # again at the same time. Infinite, or NaN, a dead worker's runs are never freed.
        if type(lease_seconds) not in (int, float) or not 0 < lease_seconds < math.inf:
            raise ValueError(f"lease_seconds must be a finite number of seconds > 0 (how long "
                             f"a worker's claim on a run lasts without renewal); got "
                             f"{lease_seconds!r}")
        import random  # on first use: `import durable_lite` does without it
        self.store = store
        self.clock = clock or SystemClock()
        self.ids = ids or random_ids
        self.rng = random.Random(seed)                  # ctx.random()
        self.jitter_rng = random.Random(seed)           # retry jitter, apart from ctx.random
        self.sleep = sleep or sleeper_for(self.clock)
        self.lease_seconds = lease_seconds
        self.max_interruptions = max_interruptions
        self.crash_at = crash_at
        self.on_step = None       # optional hook(label, "executed"|"replayed") for lab widgets
        self._named = worker      # a name given by hand (None: one is made per process)
        self._start_process()
        _ENGINES.add(self)

    def _start_process(self, forked_from=None):
        """What belongs to one process rather than to the engine: the worker's name (a fork
        is a new worker), the leases it holds (lease.Leases) and its threads' turns."""
        self.worker = self._named or f"{HOST}:{os.getpid()}:{os.urandom(3).hex()}"
        # Fake time does not pass while a step runs, so only a real clock needs a heartbeat.
        self._leases = Leases(self.store, self.worker, self.lease_seconds, self.clock,
                              heartbeat=not isinstance(self.clock, FakeClock),
                              forked_from=forked_from)
        self._turns = RunTurns()  # which of this engine's threads executes which run

    def _after_fork(self, parent):
        """In a forked child: a made-up name is made anew, so the child is a worker of its
        own. A name given by hand is not ours to change, and sharing it would make the
        parent's leases look like the child's: that engine refuses to take any (lease.py)."""
        self._start_process(forked_from=parent if self._named is not None else None)

    def __repr__(self):
        return f"Engine({self.store!r})"

    # starting and resuming --------------------------------------------------------------
    def start(self, wf, *args, run_id: str | None = None, budget=None, **kwargs):
        """Start a run and execute it until it completes, fails, halts or parks.

        With a `run_id` that already exists this is "attempt 2": a completed run returns its
        recorded result; an unfinished or failed one continues from its checkpoints, on the
        workflow version it started with (the returned run's `note` says so when `wf` is
        another version).
        """
        new = self.prepare_run(wf, run_id, args, kwargs, budget)
        with self._turns.take(new.run_id):
            # The run is created with our lease already on it, so no other worker's
            # recover() can pick it up between its creation and its first step; and with
            # this execution already counted as taken up (see "Poison runs").
            record = new.record(RUNNING, self.clock(), lease_owner=self.worker,
                                lease_seconds=self.lease_seconds, taken_up_at=0)
            self._leases.adopt(new.run_id, record.lease_expires)   # a forked copy refuses here
            try:
                try:
                    with self.store.batch():
                        self.store.create_run(record)
                        self.log_event(new.run_id, "started",
                                       detail=f"{new.wf.name} v{new.wf.version}")
                except ValueError:             # the run id exists: this is "attempt 2"
                    self._leases.ended(new.run_id)         # that lease was never written
                    existing = self.store.get_run(new.run_id)
                    if existing is None:
                        raise
                else:
                    return self._execute(record, [])
            finally:
                self._leases.release(new.run_id)   # unless the run's ending let go of it
            new.check_same(existing)
            run = self._continue(existing, budget)
        if existing.version != new.wf.version:  # pinned: say so, so nobody believes wf ran
            note = (f"run {new.run_id!r} was recorded on {new.wf.name} v{existing.version} and "
                    f"continues on v{existing.version}: a run finishes on the code it started "
                    f"with. start() was given v{new.wf.version}; to run v{new.wf.version}, start "
                    "it with a new run id.")
            self.log_event(new.run_id, "pinned", detail=note)
            from dataclasses import replace
            run = replace(run, note=note)
        return run

    def resume(self, run_id: str, budget=None):
        """Continue a run from its checkpoints, in this process or any other.

        A completed or compensated run is returned as it is. A halted run stays halted unless a new
        `budget` is given. A parked run re-checks its signal, deadline or wake time.
        A failed, diverged or dead run is executed again — that is how someone acts on it:
        - failed: its last failed step gets its attempts again (unless its function ran
          and only its result could not be recorded: that failure is replayed instead);
        - diverged: its history and the code disagree at a position (see run.error). Either
          restore the code the run recorded and resume; or invalidate(run_id, step) from
          the position where they part, so the new code executes from there; or keep the
          old code under its version and give the new code a new version, so new runs use it;
        - dead: fix what kept interrupting it (its events), then resume it with a fresh count.
        """
        self.store.check_file()
        with self._turns.take(run_id):
            return self._continue(self.record(run_id), budget)

    def _continue(self, record, budget):
        if record.status == QUEUED:         # only a worker's work() starts it (queue.py)
            places = [q for q in self.store.queued_runs() if q.run_id == record.run_id]
            where = f"queue {places[0].queue!r}" if places else "a queue"
            if places and places[0].key is not None:
                where += f" (key {places[0].key!r})"
            raise QueuedRunError(f"run {record.run_id!r} waits in {where}: a worker's "
                                 "engine.work(queue) starts it when the queue's limits allow; "
                                 "it cannot be started or resumed around them")
        if budget is not None:
            self.store.update_run(record.run_id, budget_json=jsonvalue.encode(budget.to_json(), what="the budget is"))
            if record.status == HALTED:
                self.store.update_run(record.run_id, status=RUNNING, halt_reason=None)
                record.status = RUNNING
        if record.status in _SETTLED:
            return self.get(record.run_id)
        return self._drive(record.run_id, must_lease=True)

    def recover(self):
        """Resume every unfinished run whose time has come; return what happened to each.

        That is: interrupted runs whose worker is gone, waiting runs whose signal arrived or
        whose deadline passed, sleeping runs whose wake time passed. Runs leased by a live
        worker (or executed by another thread of this engine) are left to it, and so are
        runs whose workflow code this process has not registered (a process that has it will
        recover them). Failed, diverged and dead runs wait for an explicit `resume`, halted
        runs for a new budget. A run that turns out diverged or dead is reported and skipped.
        """
        self.store.check_file()
        out = []
        now = self.clock()
        for record in self.store.list_runs(UNFINISHED):
            if not self._is_due(record):
                continue
            if self._leases.held_by_another(record, now):
                # Left to the live worker that holds it, without a transaction: workers on
                # one queue each recover() every round while the others execute their runs.
                continue
            try:
                lookup(record.workflow, record.version, run_id=record.run_id)
            except WorkflowNotRegistered:
                continue
            with self._turns.take(record.run_id, wait=False) as ours:
                if not ours:
                    continue           # another thread of this engine is executing it
                try:
                    run = self._drive(record.run_id, must_lease=False)
                except LeaseLostError:
                    continue           # another worker took the run over; it is in good hands
                except NonDeterminismError:
                    run = self.get(record.run_id)     # now "diverged": left for a person
            if run is not None:
                out.append(run)
        return out

    def _is_due(self, record) -> bool:
        # A parked run with no wake time (written before deadlines were checked) is due:
        # executing it again meets the check, instead of stopping recover() for everyone.
        if record.status == WAITING:
            return (record.wake_at is None or record.wake_at <= self.clock()
                    or self.store.pending_signal(record.run_id, record.waiting_for,
                                                 sent_by=record.wake_at) is not None)
        if record.status == SLEEPING:
            return record.wake_at is None or record.wake_at <= self.clock()
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
        check_name("signal", name, run_id)
        if payload is None:
            raise ValueError(f"signal {name!r} to run {run_id!r}: the payload cannot be None, "
                             "because the waiting workflow reads None as 'the deadline passed'. "
                             "Send a value, e.g. {'approved': False}.")
        text = jsonvalue.encode(payload, what=f"the payload of signal {name!r} to run {run_id!r} is")
        self.store.check_file()
        record = self.record(run_id)
        if record.status in (COMPLETED, COMPENSATED):  # a failed, halted... run can still be resumed
            raise RunFinishedError(f"run {run_id!r} is {record.status}; it cannot receive signal {name!r}")
        self.store.add_signal(run_id, name, text, self.clock())
        self.log_event(run_id, "signal", name=name, detail=text)

    # durable queues (the rules are in queue.py) -----------------------------------------
    def enqueue(self, queue, wf, *args, key: str | None = None, run_id: str | None = None,
                budget=None, **kwargs):
        """Put a run of `wf` in `queue` instead of starting it: it is created with status
        "queued" and waits in the store until a worker's `work` starts it within the
        queue's limits. `key` names whose work it is (the tenant): the queue takes turns
        between keys and can cap each key's share. Enqueueing an existing run id into the
        same queue, under the same key, returns that run, so a caller that crashed may
        enqueue again; anywhere else it is refused."""
        from .queue import enqueue
        return enqueue(self, queue, wf, args, kwargs, key, run_id, budget)

    def work(self, *queues, rounds: int | None = None, poll: float = 0.1) -> list:
        """Be a worker: in each round, recover() the runs whose time has come, then start
        runs from `queues` one at a time while their limits allow, executing each until it
        completes, fails, halts or parks. Returns the runs it executed.

        Stops after `rounds` rounds; or, with rounds=None, once nothing is queued in
        `queues` and no run is unfinished. Between rounds that found nothing to do it waits
        `poll` seconds. (On a FakeClock it jumps instead to the next moment something can
        happen, and returns when only a signal from outside could change anything.)
        Several workers, threads or processes, may work the same queues on one store: the
        limits hold across all of them."""
        from .queue import work
        return work(self, queues, rounds=rounds, poll=poll)

    # reading ----------------------------------------------------------------------------
    def get(self, run_id: str):
        """The run as the store has it now."""
        record = self.record(run_id)
        return _snapshot(self.store, record, self._usage(self.store.load_entries(run_id), record))

    def runs(self, status: str | None = None) -> list:
        return [self.get(r.run_id) for r in self.store.list_runs([status] if status else [])]

    def history(self, run_id: str) -> list:
        """One row per position of the run, in order: enough to draw its timeline.

        Columns: position, step (label), kind ("step", "error", "value", "timer", "signal",
        "woke"), status ("completed"; "failed" for a step that failed for good;
        "incomplete" for a step that was attempted but has no checkpoint yet, e.g. its
        worker crashed or SystemExit stopped it), attempts (every attempt at that position over the run's life,
        across resumes), started_at, ended_at, worker, cost, error (the last failed
        attempt's error, if any), errors (all of them), result.
        """
        self.record(run_id)
        failures = {}
        for e in self.store.events(run_id):
            if e.kind == "attempt_failed":
                failures.setdefault((e.position, e.name), []).append(e)
        rows = []
        for entry in self.store.load_entries(run_id):
            failed = failures.pop((entry.position, entry.label), [])
            errors = [e.detail for e in failed]
            try:
                recorded = jsonvalue.decode(entry.result_json)
            except (ValueError, TypeError) as exc:
                raise jsonvalue.unreadable(_checkpoint_words(entry, run_id, self.store), exc) from None
            if entry.kind == ERROR:
                status, result = "failed", None
                attempts = max(len(failed), entry.attempts)
                errors = errors or [recorded["error"]]
            else:
                status, result = "completed", recorded
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

    def events(self, run_id: str) -> list:
        """The run's event log: starts, resumes, parks, signals, failed attempts,
        interruptions, endings (and why a run is dead or diverged)."""
        self.record(run_id)
        return self.store.events(run_id)

    def trace(self, run_id: str):
        """The run as a tree of spans — executions, steps, attempts, waits — with the time
        and money on each (see trace.py). Spans still open end at this engine's now."""
        from .trace import build_trace
        return build_trace(self.store, run_id, now=self.clock())

    def invalidate(self, run_id: str, step: str) -> list:
        """Forget the checkpoint of `step` (a label such as "draft" or "search#2"; a failed
        step the workflow caught counts too) and every entry after it, so the next resume
        executes them again. Use it when a memo is stale on purpose (the source data
        changed), or to let new code take over a diverged run from where it parted.
        Returns the labels discarded: steps, and waits and sleeps, which wait again from
        scratch (a signal a wait received is not handed back). What every discarded entry
        held is kept in the run's event log.

        Raises LeaseHeldError while another worker executes the run: its next checkpoint
        would land after the gap this leaves. (Another thread of this engine: it waits.)

        All of it is one transaction: the entries go, their values go into the event log,
        the budget keeps what they used and the run becomes due, together or not at all. A
        process killed midway leaves the run as it was, never a completed run with steps
        missing and their values nowhere.
        """
        with self.holding(run_id, busy=f"invalidate {step!r} when it has stopped or parked") as record:
            with self.store.batch():
                entries = self.store.load_entries(run_id)
                match = [e for e in entries if e.label == step and e.kind in (STEP, ERROR)]
                if not match:
                    labels = [e.label for e in entries if e.kind in (STEP, ERROR)]
                    raise KeyError(f"run {run_id!r} has no recorded step {step!r} (it has {labels})")
                removed = self.store.discard_entries_from(run_id, match[0].position)
                for e in removed:
                    self.log_event(run_id, "invalidated", position=e.position, name=e.label,
                                   detail=e.result_json)
                # The discarded work was done and paid for: the budget keeps counting it.
                spent = self._usage(removed, record)
                changes = {"spent_steps": spent.steps, "spent_cost": spent.cost}
                if record.status != HALTED:   # a halted run stays halted until a new budget
                    # Finished or parked, it has work to do again now: recover() must see it.
                    # (Someone acted on it, so its count of interruptions starts again too.)
                    changes.update(status=RUNNING, result_json=None, error=None,
                                   waiting_for=None, wake_at=None, interruptions=0,
                                   taken_up_at=None)
                self.store.update_run(run_id, owner=self.worker, **changes)
        # One label per step, wait and sleep (each wait or sleep starts with its timer).
        return [e.label for e in removed if e.kind in (STEP, ERROR, TIMER)]

    # versioning long-lived runs: upgrades, forks, and who still needs old code. The
    # mechanism is in versioning.py; these methods hand over to it. ---------------------
    def upgrade(self, run_id: str, to_version: int | None = None):
        """Move a run onto a newer version of its workflow (default: the newest registered),
        through the migrations registered with @dl.migration, after checking that the new
        code replays its history. Refused with UpgradeRefused, nothing changed, when no
        migration leads there or the history does not fit (see versioning.upgrade)."""
        from .versioning import upgrade
        return upgrade(self, run_id, to_version)

    def fork(self, source: str, /, from_step: str, *, run_id: str | None = None,
             version: int | None = None):
        """A new run with `source`'s checkpoints before `from_step`, executed from there on
        the code registered now (on `version`, through migrations, if given). Copied steps
        are not executed again; steps the fork executes derive new idempotency keys from its
        own run id, so their effects are new (see versioning.fork)."""
        from .versioning import fork
        return fork(self, source, from_step, run_id, version)

    def check_replay(self, run_id: str, version: int | None = None):
        """Replay a run's history on the code registered now (its version, or `version`),
        doing nothing, and say whether it fits: a deploy check (see versioning.replay)."""
        from .versioning import check_replay
        return check_replay(self, run_id, version)

    def runs_on(self, workflow: str, version: int | None = None,
                include_completed: bool = False) -> list:
        """Runs of `workflow` (on `version`), leaving out completed ones: while this list is
        not empty, that version's code must stay deployed."""
        from .versioning import runs_on
        return runs_on(self, workflow, version, include_completed)

    def patch_report(self, workflow: str, patch: str):
        """Which unfinished runs of `workflow` take the old branch of the gate `patch`, hold
        its marker, or have not reached it, and whether the gate can be retired."""
        from .versioning import patch_report
        return patch_report(self, workflow, patch)

    # the seam: what feature modules may rely on (see "What a feature may rely on") -----
    @contextlib.contextmanager
    def holding(self, run_id: str, *, created=None, busy: str = "try again when it has stopped or parked"):
        """Hold run `run_id` for the block: this engine's turn at it and its lease, taken in
        one go and released however the block ends. Yields the run's record, read under the
        lease. Raises LeaseHeldError, ending with `busy`, if another worker executes it.

        `created`: the record of a run this worker has just written with its lease on it,
        in a transaction still open (a queue's take, a fork): it is held as it is, without
        asking the store again, and no other thread of this engine can have its turn.
        """
        with self._turns.take(run_id, wait=created is None) as ours:
            if not ours:             # a run just written cannot be another thread's: a bug
                raise LeaseHeldError(f"run {run_id!r} is being executed by another thread of "
                                     "this engine already")
            if created is not None:
                self._leases.adopt(run_id, created.lease_expires)
                record = created
            else:
                with self.store.batch():
                    record = self.record(run_id)
                    if not self._leases.take(run_id, record):
                        raise LeaseHeldError(f"run {run_id!r} is being executed by worker "
                                             f"{record.lease_owner} (its lease runs until "
                                             f"{record.lease_expires}); {busy}")
            try:
                yield record
            finally:
                self._leases.release(run_id)

    def drive(self, record, *, created: bool = False):
        """Execute a run held with `holding` until it completes, fails, halts or parks,
        replaying its checkpoints first; return the Run. `created`: it has none yet."""
        if created:
            return self._execute(record, [])
        with self.store.batch():
            ready = self._take_up(record, must=True)
        return ready if not isinstance(ready, list) else self._execute(record, ready)

    def log_event(self, run_id, kind, position=None, name=None, detail=None):
        """One line in the run's event log, written by this worker at this engine's now."""
        self.store.add_event(Event(run_id, self.clock(), kind, position, name, self.worker, detail))

    def prepare_run(self, wf, run_id, args, kwargs, budget) -> "NewRun":
        """What start and enqueue check before they create a run: the workflow (by name, its
        newest version), the run id (given, or generated), the arguments and the budget as
        JSON; and that the store's file is still there. Nothing is written."""
        wf = wf if isinstance(wf, Workflow) else latest(wf)
        if run_id is None:
            run_id = f"{wf.name}-{self.ids()}"
        else:
            check_run_id(run_id)
        args_json = _encode_arguments(list(args), run_id, "argument")
        kwargs_json = _encode_arguments(kwargs, run_id, "keyword argument")
        budget_json = None if budget is None else jsonvalue.encode(budget.to_json(), what="the budget is")
        self.store.check_file()
        return NewRun(wf, run_id, args_json, kwargs_json, budget_json)

    def record(self, run_id):
        """The run's record as the store has it now."""
        record = self.store.get_run(run_id)
        if record is None:
            raise UnknownRunError(f"no run {run_id!r} in {self.store!r}")
        return record

    # internals --------------------------------------------------------------------------
    @staticmethod
    def _usage(entries, record=None) -> Usage:
        """Budget counters, derived from the checkpoints (a failed step counts as executed),
        plus, given the run's record, what checkpoints discarded by invalidate() had used.
        Costs add up exactly (usage.py), as Context adds them live."""
        costs = [e.cost for e in entries if e.kind == STEP or e.kind == ERROR]
        steps = len(costs)
        if record is not None:
            steps += record.spent_steps
            costs.append(record.spent_cost)
        return Usage(steps, math.fsum(costs))     # the same exact sum Usage keeps

    @property
    def crash_at(self):
        return self._crashes.pending if self._crashes else []

    @crash_at.setter
    def crash_at(self, crashes):
        """A faults.CrashAt, a list of them, a faults.CrashPlan, or None. Each fires once."""
        if crashes:
            from .faults import CrashPlan     # faults loads only when a crash is planned
            self._crashes = crashes if isinstance(crashes, CrashPlan) else CrashPlan(crashes)
        else:
            self._crashes = None

    def _drive(self, run_id, must_lease):
        """Take the run up under this worker's lease and execute it (resume, recover).

        Taking it up is one transaction: the lease, a read of the run and its checkpoints
        that no other worker can change meanwhile, and the count of this execution (see
        "Poison runs"). recover() (must_lease=False) leaves a run it cannot lease, or that
        is no longer due, and gets None.
        """
        try:
            with self.store.batch():
                record = self.record(run_id)
                if not self._leases.take(run_id, record):
                    if must_lease:
                        raise LeaseHeldError(f"run {run_id!r} is leased by worker "
                                             f"{record.lease_owner} until "
                                             f"{record.lease_expires}; try again later")
                    return None
                ready = self._take_up(record, must=must_lease)
            return ready if not isinstance(ready, list) else self._execute(record, ready)
        finally:
            self._leases.release(run_id)      # unless the run's ending let go of it already

    def _take_up(self, record, must):
        """In the transaction that holds the lease: the run's checkpoints, with this
        execution counted before it starts (see "Poison runs"). Or, instead of a list: the
        run as it is, if it has settled meanwhile (None for recover(), `must`=False); None
        if recover() finds it no longer due; the dead run, if its interruptions reached the
        limit."""
        run_id = record.run_id
        if record.status in _SETTLED:
            return self.get(run_id) if must else None
        if not must and not self._is_due(record):
            return None                       # recover() read a stale list: nothing to do
        lookup(record.workflow, record.version, run_id=run_id)   # before counting
        entries = self.store.load_entries(run_id)
        if (record.status == FAILED and entries and entries[-1].kind == ERROR
                and not _effect_happened(entries[-1], run_id, self.store)):
            # The step whose failure ended the run gets its attempts again.
            self.store.discard_entries_from(run_id, entries[-1].position)
            self.log_event(run_id, "retrying", entries[-1].position, entries[-1].label)
            entries.pop()
        here = len(entries)
        interruptions = 0
        if record.taken_up_at is not None:             # the last execution never ended
            interruptions = record.interruptions + 1 if here == record.taken_up_at else 1
            self.log_event(run_id, "interrupted", position=here,
                           detail=f"the execution that took the run up at position "
                                  f"{record.taken_up_at} never ended (its process died, or "
                                  f"SystemExit or the like stopped it): {interruptions} in a row "
                                  f"at position {here}")
            if self.max_interruptions is not None and interruptions >= self.max_interruptions:
                reason = self._dead_reason(run_id, here, interruptions, entries)
                self._end(record, "dead", reason, event_position=here, status=DEAD,
                          error=reason, waiting_for=None, wake_at=None,
                          interruptions=interruptions)
                return self.get(run_id)
        changes = {"interruptions": interruptions, "taken_up_at": here}
        if record.status != RUNNING or record.waiting_for is not None:
            changes.update(status=RUNNING, waiting_for=None, wake_at=None, error=None,
                           updated_at=self.clock())
        self._update(record, **changes)
        # Logged even with no checkpoints: each execution begins with an event of its own,
        # so the trace can tell a worker's second go at the run from its first.
        self.log_event(run_id, "resumed",
                       detail=f"{here} {'entry' if here == 1 else 'entries'} recorded")
        return entries

    def _execute(self, record, entries):
        run_id = record.run_id
        wf = lookup(record.workflow, record.version, run_id=run_id)
        budget = None
        if record.budget_json is not None:
            from .policy import Budget
            budget = Budget.from_json(jsonvalue.decode_recorded(
                record.budget_json, lambda: f"the budget of run {run_id!r} in {_where(self.store)}"))
        ctx = Context(self, record, entries, budget, on_step=self.on_step,
                      leases=self._leases, crashes=self._crashes)
        args = jsonvalue.decode_recorded(
            record.args_json, lambda: f"the arguments of run {run_id!r} in {_where(self.store)}")
        kwargs = jsonvalue.decode_recorded(
            record.kwargs_json, lambda: f"the keyword arguments of run {run_id!r} in {_where(self.store)}")
        try:
            try:
                result = wf.fn(ctx, *args, **kwargs)
                # Encoded here so a result JSON cannot hold fails the run like any other
                # error, instead of leaving it "running" for every recover() to trip over.
                text = jsonvalue.encode(result, what=f"the workflow of run {run_id!r} returned")
            finally:
                ctx._check_usable()       # a fatal error the workflow caught still ends it
        except Park as park:
            self._end(record, park.status, str(park.wake_at), event_name=park.waiting_for,
                      status=park.status, waiting_for=park.waiting_for, wake_at=park.wake_at)
        except Halt as halt:
            self._end(record, "halted", halt.reason, status=HALTED, halt_reason=halt.reason)
        except NonDeterminismError as exc:
            self._diverged(record, exc)
            raise     # a bug in the code: its history stays as it is, for a person to act on
        except (LeaseLostError, StoreWriteError):
            raise     # a lost race, or a store that cannot write: nothing more can be recorded
        except RunEnding as done:     # e.g. a saga undid the run's steps (status "compensated")
            text = jsonvalue.encode(done.result, what=f"the ending of run {run_id!r} is")
            self._end(record, done.status, str(done), status=done.status, result_json=text,
                      error=str(done))
        except Exception as exc:
            if isinstance(exc, StoreFileError) and exc is ctx.fatal:
                raise     # the run's own store is damaged: not the run's failure, and
                          # nothing more can be recorded in it
            message = f"{type(exc).__name__}: {exc}"
            self._end(record, "failed", message, status=FAILED, error=message)
        else:
            if ctx.position < ctx.recorded:
                error = NonDeterminismError(
                    f"run {run_id!r} finished after {ctx.position} entries, but its history "
                    f"records {ctx.recorded}; the workflow code no longer reaches "
                    f"{entries[ctx.position].label!r}")
                self._diverged(record, error)
                raise error
            self._end_completed(record, text)
        # Build the answer from what this execution already holds (the record it kept in
        # step with its writes, the usage it counted over every checkpoint): no second read.
        usage = ctx.usage if ctx.position >= ctx.recorded else self._usage(ctx.entries, record)
        return _snapshot(self.store, record, usage, ctx.executed, ctx.replayed)

    def _end_completed(self, record, text):
        """Record the run completed with its result; if the store refuses that result (too
        large for it, a constraint), fail the run saying why, rather than leave it running
        for every recover() to replay up to the same refusal."""
        try:
            self._end(record, "completed", status=COMPLETED, result_json=text)
        except DurableError:
            raise                    # a lost lease, a deleted file: said already
        except Exception as exc:     # noqa: BLE001 - told to the run's reader below
            message = (f"the workflow finished, but the store refused its result "
                       f"({type(exc).__name__}: {exc})")
            try:
                self._end(record, "failed", message, status=FAILED, error=message)
            except Exception:        # noqa: BLE001 - the store takes nothing: say so
                raise StoreWriteError(f"run {record.run_id!r}: {message}, and then refused "
                                      "to record that too") from exc

    def _dead_reason(self, run_id, here, interruptions, entries):
        where = f"after {entries[-1].label!r}" if entries else "before its first entry"
        notes = [e for e in self.store.events(run_id)
                 if e.kind == "attempt_failed" and e.position == here
                 and e.detail.endswith("(the execution stopped here)")]
        last = ""
        if notes:
            cause = notes[-1].detail.split(": ", 1)[-1].replace(" (the execution stopped here)", "")
            last = f" The last one stopped in step {notes[-1].name!r}: {cause}."
        return (f"dead: its executions were interrupted {interruptions} times in a row at "
                f"position {here} ({where}) without recording anything new, so recover() no "
                f"longer retries it.{last} Find the cause in engine.events({run_id!r}), fix it, "
                f"then engine.resume({run_id!r}) runs it again.")

    def _diverged(self, record, exc):
        self._end(record, "diverged", str(exc), status=DIVERGED, error=str(exc))

    def _end(self, record, event, detail=None, *, event_name=None, event_position=None, **fields):
        """Record how this execution ended: the run's new state and the event that says
        so, in one write that also lets go of the run's lease. It did end, so nothing is
        left in flight."""
        fields.setdefault("interruptions", 0)
        # The run's file may have been deleted or replaced while it executed: its writes
        # then went where nobody reads them. Say so before calling the run finished.
        self.store.check_file()
        with self.store.batch():
            self._update(record, taken_up_at=None, updated_at=self.clock(), lease_owner=None,
                         lease_expires=None, **fields)
            self.log_event(record.run_id, event, position=event_position, name=event_name,
                           detail=detail)
        self._leases.ended(record.run_id)

    def _update(self, record, **fields):
        """Change the run in the store (fenced: only while we hold its lease), and `record`
        with it, so the run this execution returns needs no second read."""
        self.store.update_run(record.run_id, owner=self.worker, **fields)
        for name, value in fields.items():
            setattr(record, name, value)


class NewRun:
    """A run checked and encoded by `Engine.prepare_run`, not yet written."""

    __slots__ = ("wf", "run_id", "args_json", "kwargs_json", "budget_json")

    def __init__(self, wf, run_id, args_json, kwargs_json, budget_json):
        self.wf, self.run_id = wf, run_id
        self.args_json, self.kwargs_json, self.budget_json = args_json, kwargs_json, budget_json

    def record(self, status, now, *, lease_owner=None, lease_seconds=None, taken_up_at=None):
        """Its record, created at `now` with `status` (and a lease, if given)."""
        return RunRecord(self.run_id, self.wf.name, self.wf.version, self.args_json,
                         self.kwargs_json, status, now, now, budget_json=self.budget_json,
                         lease_owner=lease_owner,
                         lease_expires=None if lease_owner is None else now + lease_seconds,
                         taken_up_at=taken_up_at)

    def check_same(self, existing):
        """An existing run under this id must be the same run (argument order in a dict
        does not matter; values, as JSON, do)."""
        same = (existing.workflow == self.wf.name
                and _same_json(existing.args_json, self.args_json)
                and _same_json(existing.kwargs_json, self.kwargs_json))
        if not same:
            raise RunArgumentsMismatch(
                f"run {existing.run_id!r} already exists as {existing.workflow}"
                f"{existing.args_json} {existing.kwargs_json}; it cannot be started again as "
                f"{self.wf.name}{self.args_json} {self.kwargs_json}. Use a new run id.")


def _snapshot(store, record, usage, executed=(), replayed=()):
    from .run import Run      # on first use (a dataclass: see policy.py on import time)
    result = jsonvalue.decode_recorded(
        record.result_json, lambda: f"the result of run {record.run_id!r} in {_where(store)}")
    return Run(record.run_id, record.workflow, record.version, record.status,
               result, record.error, record.halt_reason,
               record.waiting_for, record.wake_at, usage.steps, usage.cost,
               list(executed), list(replayed))


# Every engine of this process, so that a forked child can make each a worker of its own.
_ENGINES = weakref.WeakSet()
_PARENT = [os.getpid()]       # the forking process's pid, for the child's handler


def _before_fork():
    _PARENT[0] = os.getpid()


def _after_fork_in_child():
    for engine in list(_ENGINES):
        engine._after_fork(_PARENT[0])


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def _earliest(*times):
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _effect_happened(entry, run_id, store) -> bool:
    """A recorded failure whose step function did run: its result could not be recorded."""
    failure = jsonvalue.decode_recorded(
        entry.result_json, functools.partial(_checkpoint_words, entry, run_id, store))
    return isinstance(failure, dict) and bool(failure.get("effect_happened"))


def _encode_arguments(values, run_id, kind):
    """A run's arguments (a list) or keyword arguments (a dict) as JSON. One JSON cannot
    hold: the error names that argument, not the list or dict they were gathered in."""
    try:
        return jsonvalue.encode(values, what=f"the {kind}s of run {run_id!r} include")
    except StepResultNotJSON:
        named = enumerate(values, 1) if kind == "argument" else values.items()
        for name, value in named:
            shown = name if kind == "argument" else repr(name)
            jsonvalue.encode(value, what=f"the {kind}s of run {run_id!r} include, as {kind} "
                                         f"{shown},")
        raise


def _where(store) -> str:
    """The store, as an error names it: its file, if it has one."""
    return getattr(store, "path", None) or repr(store)


def _checkpoint_words(entry, run_id, store) -> str:
    return (f"the checkpoint of {entry.label!r} (position {entry.position}) of run {run_id!r} "
            f"in {_where(store)}")


def _same_json(a: str, b: str) -> bool:
    """The same JSON values, whatever the order of keys in an object. (Comparing the Python
    values would not do: True == 1 == 1.0, but they are three different arguments.)"""
    return (json.dumps(json.loads(a), sort_keys=True, separators=(",", ":"))
            == json.dumps(json.loads(b), sort_keys=True, separators=(",", ":")))
