"""`Context`: what a workflow function receives, and where replay happens.

The workflow function (the orchestration) runs from the top on every execution of a run.
Each call to `ctx.step`, `ctx.now`, `ctx.wait_for_signal`… takes the next position in the
run's history. If that position is already recorded, the recorded value is returned and
nothing runs (replay). If not, the work is done once, its JSON result is committed, and
only then does the workflow continue.

Because the orchestration re-runs, it must make the same calls in the same order every
time. Anything that could differ — the clock, randomness, ids, a model's answer — belongs
inside a step or one of the ctx helpers that record it. Replay checks the kind and name at
every position and raises NonDeterminismError when they disagree.

Naming steps an agent invents at run time
-----------------------------------------
When a model chooses the next tool, the step's name is not in the source code. Make the
model call a step, and build the tool step's name from its *recorded* answer::

    decision = ctx.step("choose", llm_choose_tool, question)     # recorded once
    result = ctx.step(f"tool:{decision['tool']}", call_tool, decision["tool"], decision["args"])

On replay `decision` comes from the checkpoint, so the name is the same string again and
the position lines up. Calling the same tool twice is fine: the second "tool:search" is
labelled "tool:search#2" (occurrence numbers count per name, in call order, so they are
deterministic too). Never build a name from anything that is not recorded (the clock, a
fresh model call outside a step): the next replay would ask for a different name and stop
with NonDeterminismError.
"""

import functools
import json
import math
import threading

from . import jsonvalue
from .errors import LeaseLostError, NonDeterminismError, StepResultNotJSON, StepTimeout
from .keys import derive_key
from .faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP
from .policy import Step, Usage
from .store.records import ERROR, SIGNAL, SLEEPING, STEP, TIMER, VALUE, WAITING, WOKE, Entry, Event

_MISSING = object()

# ctx.step("name", ...) with no options: one shared Step per name, not a new one per call.
_plain_step = functools.lru_cache(maxsize=4096)(Step)


class Park(BaseException):
    """Internal: the run must wait (for a signal or a wake time). Not an error."""

    def __init__(self, status, waiting_for, wake_at):
        super().__init__(status)
        self.status, self.waiting_for, self.wake_at = status, waiting_for, wake_at


class Halt(BaseException):
    """Internal: a budget limit was reached before the next step."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class StepFailed(Exception):
    """A step exhausted its attempts. Raised into the workflow, which may catch it.

    The failure is recorded like a result, so a replay raises it again at the same point
    (and takes the same fallback path) instead of quietly trying the step once more.
    `error` is the last attempt's error as text; `cause` is the exception itself when the
    step failed in this execution (None when the failure is replayed).
    """

    def __init__(self, run_id, label, attempts, error, cause=None):
        super().__init__(f"step {label!r} of run {run_id!r} failed after {attempts} "
                         f"attempt(s): {error}")
        self.run_id, self.step, self.attempts, self.error, self.cause = run_id, label, attempts, error, cause


# Errors that mean this execution must stop: the history and the code disagree, a result
# cannot be recorded, or another worker owns the run now. Once raised, every later ctx call
# raises it again, so `except Exception:` in workflow code cannot carry on past one.
_FATAL = (NonDeterminismError, StepResultNotJSON, LeaseLostError)


class Context:
    def __init__(self, engine, run, entries, budget, on_step=None):
        self._engine = engine
        self._run = run
        self._entries = entries
        self._position = 0
        self._occurrences = {}
        # Usage up to the current position: replayed steps add their recorded counts, so
        # the workflow reads the same numbers live and on replay, and the budget check
        # before new work sees everything the run has ever executed.
        # It starts from what discarded checkpoints had used (engine.invalidate).
        self.usage = Usage(run.spent_steps, run.spent_cost)
        self.budget = budget
        self.executed = []
        self.replayed = []
        self._on_step = on_step     # lab hook: called with (label, "executed"|"replayed")
        self.fatal = None           # a _FATAL error raised in this execution, if any

    @property
    def run_id(self) -> str:
        return self._run.run_id

    # the core: step ---------------------------------------------------------------------
    def step(self, step, fn, *args, **kwargs):
        """Run `fn(*args, **kwargs)` once for this run; on replay, return its recorded result.

        `step` is a name, or a `dl.Step(name, retry=..., timeout=..., cost=...)`. Every
        keyword argument goes to `fn`, so step options never collide with fn's own.
        If every attempt fails, the failure is recorded and StepFailed is raised.
        """
        self._check_usable()
        if isinstance(step, str) and step:
            spec = _plain_step(step)
        elif isinstance(step, Step) and isinstance(step.name, str) and step.name:
            spec = step
        else:
            name = step.name if isinstance(step, Step) else step
            raise TypeError(f"run {self.run_id!r}: a step name must be a non-empty string, "
                            f"not {name!r}")
        try:
            position, occurrence = self._claim(STEP, spec.name)
            recorded = self._replay(position, STEP, spec.name, occurrence)
            if recorded is not _MISSING:
                return recorded
            return self._execute_step(spec, position, occurrence, fn, args, kwargs)
        except _FATAL as exc:
            self.fatal = exc
            raise

    def _execute_step(self, spec, position, occurrence, fn, args, kwargs):
        label = _label(spec.name, occurrence)
        engine = self._engine
        self._before_new_work()
        engine._fault_point(spec.name, occurrence, BEFORE_STEP)
        started = engine.clock()
        try:
            result, attempts = self._attempt(spec, label, position, fn, args, kwargs)
        except StepFailed as failed:
            # Record the failure before the workflow sees it: a replay must meet it again.
            detail = jsonvalue.encode({"error": failed.error, "attempts": failed.attempts},
                                      what=f"the failure of step {label!r} in run {self.run_id!r} is")
            self._commit(Entry(position, ERROR, spec.name, occurrence, detail, failed.attempts,
                               started, engine.clock(), engine.worker), label)
            self.usage.steps += 1
            raise
        text, value = jsonvalue.roundtrip(
            result, what=lambda: f"step {label!r} of run {self.run_id!r} returned")
        engine._fault_point(spec.name, occurrence, AFTER_EFFECT)
        cost = self._cost_of(spec, label, value)
        self._commit(Entry(position, STEP, spec.name, occurrence, text, attempts, started,
                           engine.clock(), engine.worker, cost), label)
        self.usage.steps += 1
        self.usage.cost += cost
        engine._fault_point(spec.name, occurrence, AFTER_CHECKPOINT)
        return value

    def _cost_of(self, spec, label, value) -> float:
        """The step's cost, which budgets add up: a finite number >= 0, or the run stops.

        Fatal like a result JSON cannot hold: the step has no checkpoint, so the workflow
        must not carry on to the next position as if it had one.
        """
        try:
            cost = spec.cost_of(value)
            if not 0 <= cost < math.inf:          # also refuses NaN
                raise ValueError(f"got {cost!r}")
            return cost
        except Exception as exc:
            self.fatal = ValueError(f"step {label!r} of run {self.run_id!r}: its cost must be a "
                                    f"finite number >= 0 ({type(exc).__name__}: {exc})")
            raise self.fatal from exc

    def _attempt(self, spec, label, position, fn, args, kwargs):
        engine = self._engine
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1:
                engine._keep_lease(self.run_id)   # a backoff may have outlasted the lease
            try:
                return _call(fn, args, kwargs, spec.timeout, f"step {label!r} of run {self.run_id!r}"), attempt
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                engine.store.add_event(Event(self.run_id, engine.clock(), "attempt_failed", position,
                                             label, engine.worker, f"attempt {attempt}: {error}"))
                if not spec.retry.should_retry(exc, attempt):
                    raise StepFailed(self.run_id, label, attempt, error, exc) from exc
                engine.sleep(spec.retry.delay(attempt, engine.jitter_rng))

    # recorded values --------------------------------------------------------------------
    def now(self) -> float:
        """The current time, recorded on first execution and replayed after."""
        return self._value("now", self._engine.clock)

    def uuid(self) -> str:
        """A fresh id, recorded on first execution and replayed after."""
        return self._value("uuid", self._engine.ids)

    def random(self) -> float:
        """A number in [0, 1), recorded on first execution and replayed after."""
        return self._value("random", self._engine.rng.random)

    def idempotency_key(self, *parts) -> str:
        """A key derived only from this run's id and `parts`: the same on every replay and
        in every process, different for every run. Pass it to providers that dedupe on it.
        """
        return derive_key(self.run_id, *parts)

    def _value(self, name, produce):
        self._check_usable()
        try:
            position, occurrence = self._claim(VALUE, name)
            recorded = self._replay(position, VALUE, name, occurrence)
            if recorded is not _MISSING:
                return recorded
            text, value = jsonvalue.roundtrip(produce(), what=f"ctx.{name}() in run {self.run_id!r} returned")
            now = self._engine.clock()
            self._commit(Entry(position, VALUE, name, occurrence, text, 1, now, now, self._engine.worker))
            return value
        except _FATAL as exc:
            self.fatal = exc
            raise

    def _timer(self, name, seconds):
        """A wake-up time fixed the first time this point is reached, so resumes never move it."""
        position, occurrence = self._claim(TIMER, name)
        recorded = self._replay(position, TIMER, name, occurrence)
        if recorded is not _MISSING:
            return recorded
        now = self._engine.clock()
        at = now + seconds
        self._commit(Entry(position, TIMER, name, occurrence, json.dumps(at), 1, now, now,
                           self._engine.worker))
        return at

    # waiting ----------------------------------------------------------------------------
    def wait_for_signal(self, name: str, timeout: float):
        """Park the run until `engine.signal(run_id, name, payload)` or `timeout` seconds pass.

        Returns the payload, or None if the deadline passed first: a signal sent after the
        deadline (by the sender's clock) is kept for a later wait of that name, however late
        the run is resumed. While parked, no thread or process is held: the call to
        start/resume returns a run with status 'waiting'.
        """
        self._check_usable()
        if timeout is None or timeout <= 0:
            raise ValueError(f"run {self.run_id!r}: wait_for_signal({name!r}) needs a positive "
                             "timeout; a wait with no deadline can hang a run forever")
        try:
            return self._wait(name, timeout)
        except _FATAL as exc:
            self.fatal = exc
            raise

    def _wait(self, name, timeout):
        deadline = self._timer(name, timeout)
        position, occurrence = self._claim(SIGNAL, name)
        recorded = self._replay(position, SIGNAL, name, occurrence)
        if recorded is not _MISSING:
            return recorded
        engine = self._engine
        engine._fault_point(name, occurrence, BEFORE_STEP)      # reached, not yet answered
        now = engine.clock()
        # Only a signal sent by the deadline answers the wait: the outcome must not depend
        # on how soon after the deadline some worker happened to resume the run.
        pending = engine.store.pending_signal(self.run_id, name, sent_by=deadline)
        if pending is not None:
            signal_id, payload_json = pending
            engine.store.consume_signal_into(
                self.run_id, signal_id,
                Entry(position, SIGNAL, name, occurrence, payload_json, 1, now, now, engine.worker))
            self._log(_label(name, occurrence), "executed")
            engine._fault_point(name, occurrence, AFTER_CHECKPOINT)
            return jsonvalue.decode(payload_json)
        if now >= deadline:
            self._commit(Entry(position, SIGNAL, name, occurrence, "null", 1, now, now, engine.worker),
                         _label(name, occurrence))
            engine._fault_point(name, occurrence, AFTER_CHECKPOINT)
            return None
        raise Park(WAITING, name, deadline)

    def sleep(self, seconds: float, name: str = "sleep"):
        """Durable sleep: park the run until `seconds` from the first time this is reached."""
        self._check_usable()
        try:
            self._sleep(name, seconds)
        except _FATAL as exc:
            self.fatal = exc
            raise

    def _sleep(self, name, seconds):
        wake_at = self._timer(name, seconds)
        position, occurrence = self._claim(WOKE, name)
        recorded = self._replay(position, WOKE, name, occurrence)
        if recorded is not _MISSING:
            return
        self._engine._fault_point(name, occurrence, BEFORE_STEP)  # reached, not yet over
        now = self._engine.clock()
        if now < wake_at:
            raise Park(SLEEPING, name, wake_at)
        self._commit(Entry(position, WOKE, name, occurrence, json.dumps(now), 1, now, now,
                           self._engine.worker), _label(name, occurrence))
        self._engine._fault_point(name, occurrence, AFTER_CHECKPOINT)

    # replay machinery -------------------------------------------------------------------
    def _claim(self, kind, name):
        """The next position, and which occurrence of (kind, name) this call is."""
        position = self._position
        self._position += 1
        key = (kind, name)
        occurrence = self._occurrences.get(key, 0) + 1
        self._occurrences[key] = occurrence
        return position, occurrence

    def _replay(self, position, kind, name, occurrence):
        if position >= len(self._entries):
            return _MISSING
        entry = self._entries[position]
        failed = kind == STEP and entry.kind == ERROR
        if (entry.kind != kind and not failed) or entry.name != name:
            raise NonDeterminismError(
                f"run {self.run_id!r} diverged from its history at position {position}: it "
                f"recorded {entry.kind} {entry.label!r} there, but the workflow now asks for "
                f"{kind} {_label(name, occurrence)!r}. The orchestration must make the same "
                "calls in the same order on every replay: move clock reads, random choices "
                "and ids into steps (or ctx.now/ctx.random/ctx.uuid), or give changed code "
                "a new workflow version.")
        if kind in (STEP, SIGNAL, WOKE):
            self._log(entry.label, "replayed")
        if kind == STEP:
            self.usage.steps += 1
            self.usage.cost += entry.cost
        if failed:
            recorded = jsonvalue.decode(entry.result_json)
            raise StepFailed(self.run_id, entry.label, recorded["attempts"], recorded["error"])
        return jsonvalue.decode(entry.result_json)

    # fatal errors (each public method above remembers one in self.fatal) ----------------
    def _check_usable(self):
        """Refuse to go on after a fatal error, even if the workflow caught it."""
        if self.fatal is not None:
            raise self.fatal

    def _before_new_work(self):
        engine = self._engine
        reason = self.usage.exceeded(self.budget, self._run.created_at, engine.clock())
        if reason:
            raise Halt(reason)
        engine._keep_lease(self._run.run_id)

    def _commit(self, entry, label=None):
        self._engine.store.record_entry(self.run_id, entry)
        self._entries.append(entry)
        if label:
            self._log(label, "executed")

    def _log(self, label, how):
        (self.executed if how == "executed" else self.replayed).append(label)
        if self._on_step is not None:
            self._on_step(label, how)

    @property
    def position(self) -> int:
        return self._position

    @property
    def recorded(self) -> int:
        return len(self._entries)

    @property
    def entries(self):
        """Every checkpoint of the run as this execution knows it (recorded + new)."""
        return self._entries


def _label(name, occurrence):
    return name if occurrence == 1 else f"{name}#{occurrence}"


def _call(fn, args, kwargs, timeout, what):
    if timeout is None:
        return fn(*args, **kwargs)
    # A thread cannot be killed: on timeout the call is abandoned, not stopped, and may still
    # finish its side effect later. That is one more reason side effects need idempotency keys.
    box = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed back to the caller's thread below
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True, name=what)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise StepTimeout(f"{what} did not finish within {timeout}s")
    if "error" in box:
        raise box["error"]
    return box["value"]
