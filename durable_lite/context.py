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
deterministic too; that is why a name itself may not contain "#"). Never build a name from anything that is not recorded (the clock, a
fresh model call outside a step): the next replay would ask for a different name and stop
with NonDeterminismError.
"""

import functools
import json
import math
import threading
from threading import get_ident

from . import jsonvalue
from .errors import (ContextCallError, Crash, DurableError, NonDeterminismError,
                     StepResultNotJSON, StepTimeout, StoreWriteError)
from .keys import derive_key
from .store.records import ERROR, SIGNAL, SLEEPING, STEP, TIMER, VALUE, WAITING, WOKE, Entry, Event
from .usage import Usage

# The crash points of faults.py, by name. faults itself is loaded only when a crash is
# planned (Engine.crash_at), so `import durable_lite` does not pay for it.
BEFORE_STEP, AFTER_EFFECT, AFTER_CHECKPOINT = "before_step", "after_effect", "after_checkpoint"

_MISSING = object()


class _NameRefused(ValueError):
    """A name no store could keep; the message says why (see _name_problem)."""


@functools.lru_cache(maxsize=4096)
def _plain_step(name):
    """ctx.step("name", ...) with no options: one shared Step per name, not one per call,
    its name checked once."""
    problem = _name_problem(name)
    if problem:
        raise _NameRefused(problem)
    from .policy import Step          # loaded on first use (see policy.py)
    return Step(name)


@functools.lru_cache(maxsize=4096)
def _name_problem(name: str):
    """Why a store could not keep `name` as a step, wait or signal name, or None."""
    if "#" in name:
        return ("contains '#', which separates a name from its occurrence number in labels "
                "such as 'search#2'; use another character")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not text a store can keep (it holds a lone surrogate)"
    return None


def check_name(what: str, name, run_id) -> None:
    """Refuse a name before anything runs, rather than at the checkpoint after the effect."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"run {run_id!r}: a {what} name must be a non-empty string, not {name!r}")
    problem = _name_problem(name)
    if problem:
        raise ValueError(f"run {run_id!r}: the {what} name {name!r} {problem}")


def _check_timeout(run_id, name, timeout):
    """A wait's timeout: a finite number of seconds > 0, or the wait could last forever."""
    if timeout is None or (_is_number(timeout) and timeout <= 0):
        raise ValueError(f"run {run_id!r}: wait_for_signal({name!r}) needs a positive timeout; "
                         "a wait with no deadline can hang a run forever")
    if not _is_number(timeout) or not math.isfinite(timeout):
        raise ValueError(f"run {run_id!r}: wait_for_signal({name!r}) needs a finite number of "
                         f"seconds as its timeout, not {timeout!r}; a wait with no deadline "
                         "can hang a run forever")


def _check_duration(run_id, name, seconds):
    """A sleep's duration: a finite number of seconds >= 0."""
    if not _is_number(seconds) or not 0 <= seconds < math.inf:      # also refuses NaN
        raise ValueError(f"run {run_id!r}: sleep({name!r}) needs a finite number of seconds "
                         f">= 0, not {seconds!r}; a sleep that never ends parks a run forever")


def _is_number(value) -> bool:
    return type(value) in (int, float)        # not bool: True is not a number of seconds


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
    """A step failed for good: it exhausted its attempts, or its function ran but what it
    returned cannot be recorded. Raised into the workflow, which may catch it.

    The failure is recorded like a result, so a replay raises it again at the same point
    (and takes the same fallback path) instead of quietly trying the step once more.
    `error` is the last attempt's error as text; `cause` is the exception itself when the
    step failed in this execution (None when the failure is replayed).
    """

    def __init__(self, run_id, label, attempts, error, cause=None):
        super().__init__(f"step {label!r} of run {run_id!r} failed after {attempts} "
                         f"attempt(s): {error}")
        self.run_id, self.step, self.attempts, self.error, self.cause = run_id, label, attempts, error, cause


# Once a ctx call has taken a position, any error but a recorded StepFailed means this
# execution must stop: the history and the code disagree (NonDeterminismError), another
# worker owns the run now (LeaseLostError), the store could not write (StoreWriteError)...
# Carrying on would record the next call one position too far. So the error is kept in
# `ctx.fatal` and every later ctx call raises it again: `except Exception:` in workflow
# code cannot carry on past one, and the engine ends the execution with it.
#
# The same goes for what ends an execution from outside the workflow's say: a simulated
# crash (`Crash`, standing for a SIGKILL), the run parking (`Park`) or halting (`Halt`), a
# KeyboardInterrupt. Python unwinds the stack for these, so the workflow's `finally:`
# blocks run; a killed process runs none. A ctx call in such a block (a "cleanup" step)
# therefore raises the same exception again and records nothing: an in-process crash
# leaves exactly the history a real kill would.


class Context:
    def __init__(self, engine, run, entries, budget, on_step=None):
        self._engine = engine
        self._run = run
        self.run_id = run.run_id
        self._entries = entries
        self._position = 0
        # How often each name has been asked for so far, per kind: the occurrence numbers.
        self._occurrences = {kind: {} for kind in (STEP, VALUE, TIMER, SIGNAL, WOKE)}
        self._thread = threading.get_ident()   # the thread running the workflow function
        self._in_step = None                   # label of the step whose function is running
        self._working = False                  # has this execution done new work yet?
        # Usage up to the current position: replayed steps add their recorded counts, so
        # the workflow reads the same numbers live and on replay, and the budget check
        # before new work sees everything the run has ever executed.
        # It starts from what discarded checkpoints had used (engine.invalidate).
        self.usage = Usage(run.spent_steps, run.spent_cost)
        self.budget = budget
        self.executed = []
        self.replayed = []
        self._on_step = on_step     # lab hook: called with (label, "executed"|"replayed")
        self.fatal = None           # the error that ended this execution, if any

    # the core: step ---------------------------------------------------------------------
    def step(self, step, fn, *args, **kwargs):
        """Run `fn(*args, **kwargs)` once for this run; on replay, return its recorded result.

        `step` is a name, or a `dl.Step(name, retry=..., timeout=..., cost=...)`. Every
        keyword argument goes to `fn`, so step options never collide with fn's own.
        If every attempt fails, the failure is recorded and StepFailed is raised. So is a
        result that cannot be recorded (not JSON, or a cost that is not a number): the
        effect happened, so a resume meets the recorded failure instead of repeating it.
        """
        if self.fatal is not None or self._in_step is not None or get_ident() != self._thread:
            self._check_callable_here("step")                  # says what is wrong
        name = step if type(step) is str else getattr(step, "name", step)
        try:
            position = self._position                     # _claim(STEP, name), inline:
            self._position = position + 1                 # this is the hottest path
            counts = self._occurrences[STEP]
            occurrence = counts[name] = counts.get(name, 0) + 1
            if position < len(self._entries):
                return self._replay_step(position, name, occurrence)
            return self._execute_step(self._spec(step), position, occurrence, fn, args, kwargs)
        except StepFailed:
            raise                       # recorded at its position: the workflow may go on
        except BaseException as exc:    # an error, or a crash, park or halt (see above)
            self.fatal = exc
            raise

    def _spec(self, step):
        """The Step options for a name or a dl.Step, once its name is checked (before the
        step runs: a name no store can keep must not be found out after the effect)."""
        if type(step) is str and step:
            try:
                return _plain_step(step)
            except _NameRefused as refused:
                raise ValueError(f"run {self.run_id!r}: the step name {step!r} {refused}") from None
        from .policy import Step
        check_name("step", step.name if isinstance(step, Step) else step, self.run_id)
        return step

    def _execute_step(self, spec, position, occurrence, fn, args, kwargs):
        name = spec.name
        label = name if occurrence == 1 else f"{name}#{occurrence}"
        engine = self._engine
        started = self._before_new_work()
        engine._fault_point(name, occurrence, BEFORE_STEP)
        self._in_step = label
        try:
            result, attempts = self._attempt(spec, label, position, fn, args, kwargs)
        except StepFailed as failed:
            # Record the failure before the workflow sees it: a replay must meet it again.
            self._record_failure(name, position, occurrence, failed.attempts, failed.error, started)
            raise
        finally:
            self._in_step = None
        try:
            text, value = jsonvalue.roundtrip(
                result, what=lambda: f"step {label!r} of run {self.run_id!r} returned")
            cost = 0.0 if spec.cost is None else self._cost_of(spec, label, value)
            unrecordable = None
        except (StepResultNotJSON, ValueError) as exc:
            unrecordable = exc
        engine._fault_point(name, occurrence, AFTER_EFFECT)
        if unrecordable is not None:
            error = f"{type(unrecordable).__name__}: {unrecordable}"
            self._record_failure(name, position, occurrence, attempts, error, started,
                                 effect_happened=True)
            raise StepFailed(self.run_id, label, attempts, error, unrecordable)
        try:
            self._commit(Entry(position, STEP, name, occurrence, text, attempts, started,
                               engine.clock(), engine.worker, cost), label)
        except StoreWriteError as refused:
            self._result_refused(name, position, occurrence, attempts, started, refused)
        usage = self.usage
        usage.steps += 1
        if cost:
            usage.add_cost(cost)
        engine._fault_point(name, occurrence, AFTER_CHECKPOINT)
        return value

    def _record_failure(self, name, position, occurrence, attempts, error, started,
                        effect_happened=False):
        """Record a step that failed for good, in place of its result.

        `effect_happened`: its function returned, but what it returned cannot be recorded.
        Resuming a failed run normally gives its last failed step new attempts; this one
        it must not run again, or the effect would happen twice (engine.py).
        """
        failure = {"error": error, "attempts": attempts}
        if effect_happened:
            failure["effect_happened"] = True
        detail = jsonvalue.encode(failure, what=lambda: f"the failure of step {name!r} in run {self.run_id!r} is")
        self._commit(Entry(position, ERROR, name, occurrence, detail, attempts, started,
                           self._engine.clock(), self._engine.worker), _label(name, occurrence))
        self.usage.steps += 1

    def _result_refused(self, name, position, occurrence, attempts, started, refused):
        """The store would not take this step's result, after its function ran.

        If the store still takes a small entry, the refusal was about this result (too
        large for the store, a constraint on the file) and waiting will not change it: the
        failure is recorded in the result's place, with the effect marked as happened, as
        for a result that is not JSON. Otherwise the store takes nothing at all: the
        original error stops the execution with the position free (StoreWriteError)."""
        cause = refused.__cause__ or refused
        error = (f"the store refused its result ({type(cause).__name__}: {cause}); its "
                 "function ran, so it is not run again")
        try:
            self._record_failure(name, position, occurrence, attempts, error, started,
                                 effect_happened=True)
        except StoreWriteError:
            raise refused from None
        raise StepFailed(self.run_id, _label(name, occurrence), attempts, error, refused)

    def _cost_of(self, spec, label, value) -> float:
        """The step's cost, which budgets add up: a finite number >= 0, or ValueError."""
        try:
            cost = spec.cost_of(value)
            if not 0 <= cost < math.inf:          # also refuses NaN
                raise ValueError(f"got {cost!r}")
            return cost
        except Exception as exc:
            raise ValueError(f"step {label!r} of run {self.run_id!r}: its cost must be a "
                             f"finite number >= 0 ({type(exc).__name__}: {exc})") from exc

    def _attempt(self, spec, label, position, fn, args, kwargs):
        engine = self._engine
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1:
                engine._keep_lease(self.run_id)   # a backoff may have outlasted the lease
            try:
                if spec.timeout is None:
                    return fn(*args, **kwargs), attempt
                return _call_with_timeout(fn, args, kwargs, spec.timeout,
                                          f"step {label!r} of run {self.run_id!r}"), attempt
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                engine.store.add_event(Event(self.run_id, engine.clock(), "attempt_failed", position,
                                             label, engine.worker, f"attempt {attempt}: {error}"))
                if not spec.retry.should_retry(exc, attempt):
                    raise StepFailed(self.run_id, label, attempt, error, exc) from exc
                engine.sleep(spec.retry.delay(attempt, engine.jitter_rng))
            except Crash:
                raise          # a simulated kill: like a real one, it leaves no note
            except BaseException as exc:
                # SystemExit, KeyboardInterrupt, GeneratorExit: the execution stops here.
                # Leave a note, if the store still takes one, so the history (and the reason
                # a run is declared dead) can name the step. A killed process cannot.
                self._note_interruption(position, label, attempt, exc)
                raise

    def _note_interruption(self, position, label, attempt, exc):
        engine = self._engine
        try:
            engine.store.add_event(Event(
                self.run_id, engine.clock(), "attempt_failed", position, label, engine.worker,
                f"attempt {attempt}: {_describe(exc)} (the execution stopped here)"))
        except Exception:      # noqa: BLE001 - the interruption matters more than the note
            pass

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
        self._check_callable_here(name)
        try:
            position, occurrence = self._claim(VALUE, name)
            recorded = self._replay(position, VALUE, name, occurrence)
            if recorded is not _MISSING:
                return recorded
            text, value = jsonvalue.roundtrip(produce(), what=f"ctx.{name}() in run {self.run_id!r} returned")
            now = self._engine.clock()
            self._commit(Entry(position, VALUE, name, occurrence, text, 1, now, now, self._engine.worker))
            return value
        except BaseException as exc:
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
        start/resume returns a run with status 'waiting'. `timeout` must be a finite number
        of seconds: every wait has a deadline.
        """
        self._check_callable_here("wait_for_signal")
        check_name("wait_for_signal", name, self.run_id)
        _check_timeout(self.run_id, name, timeout)
        try:
            return self._wait(name, timeout)
        except BaseException as exc:
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
            self._commit(Entry(position, SIGNAL, name, occurrence, payload_json, 1, now, now,
                               engine.worker), _label(name, occurrence), consume_signal=signal_id)
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
        self._check_callable_here("sleep")
        check_name("sleep", name, self.run_id)
        _check_duration(self.run_id, name, seconds)
        try:
            self._sleep(name, seconds)
        except BaseException as exc:
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

    # versioning: patch gates (the rule and how to retire a gate are in versioning.py) -----
    def patched(self, name: str) -> bool:
        """Which branch of the patch gate `name` to take: `if ctx.patched("fraud-check"):`.

        True if the run reaches this point under code that has the gate: a marker is
        recorded here, and every replay finds it and answers True again. False if the run's
        history already holds something else at this position, i.e. it was recorded before
        the gate existed and went past this point on the old branch; the gate then takes no
        position, so the old branch replays as it was recorded. Never a divergence.
        Retire it with `ctx.deprecate_patch(name)` once `engine.patch_report(...)` finds no
        unfinished run on the old branch (versioning.patched says exactly how).
        """
        from .versioning import patched
        return patched(self, name)

    def deprecate_patch(self, name: str) -> None:
        """What replaces `if ctx.patched(name):` once no unfinished run takes its old branch:
        replays the gate's marker where a run holds one, records nothing where it does not."""
        from .versioning import deprecate_patch
        deprecate_patch(self, name)

    # replay machinery -------------------------------------------------------------------
    def _claim(self, kind, name):
        """The next position, and which occurrence of (kind, name) this call is."""
        position = self._position
        self._position += 1
        counts = self._occurrences[kind]
        occurrence = counts[name] = counts.get(name, 0) + 1
        return position, occurrence

    def _replay_step(self, position, name, occurrence):
        """The recorded outcome of a step: its result, or its failure raised again."""
        entry = self._entries[position]
        kind = entry.kind
        if entry.name != name or (kind != STEP and kind != ERROR):
            raise self._divergence(position, entry, STEP, name, occurrence)
        label = name if occurrence == 1 else f"{name}#{occurrence}"
        self.replayed.append(label)
        if self._on_step is not None:
            self._on_step(label, "replayed")
        usage = self.usage
        usage.steps += 1
        if kind == ERROR:
            recorded = jsonvalue.decode(entry.result_json)
            raise StepFailed(self.run_id, label, recorded["attempts"], recorded["error"])
        if entry.cost:
            usage.add_cost(entry.cost)
        return jsonvalue.decode(entry.result_json)

    def _replay(self, position, kind, name, occurrence):
        """The recorded value of a wait, sleep or ctx.now/uuid/random, or _MISSING."""
        if position >= len(self._entries):
            return _MISSING
        entry = self._entries[position]
        if entry.kind != kind or entry.name != name:
            raise self._divergence(position, entry, kind, name, occurrence)
        if kind in (SIGNAL, WOKE):
            self._log(entry.label, "replayed")
        return jsonvalue.decode(entry.result_json)

    def _divergence(self, position, entry, kind, name, occurrence):
        return NonDeterminismError(
            f"run {self.run_id!r} diverged from its history at position {position}: it "
            f"recorded {entry.kind} {entry.label!r} there, but the workflow now asks for "
            f"{kind} {_label(name, occurrence)!r}. The orchestration must make the same "
            "calls in the same order on every replay: move clock reads, random choices "
            "and ids into steps (or ctx.now/ctx.random/ctx.uuid), or give changed code "
            "a new workflow version.")

    # where ctx may be used, and what stops it (each public method above keeps its fatal
    # error in self.fatal) ------------------------------------------------------------------
    def _check_usable(self):
        """Refuse to go on after a fatal error, even if the workflow caught it."""
        if self.fatal is not None:
            raise self.fatal

    def _check_callable_here(self, call):
        """ctx belongs to the workflow function: not to a step's function (its result is
        recorded as one value, so nothing it does inside can be replayed), and not to
        another thread (a run records its calls in one order)."""
        self._check_usable()
        if self._in_step is not None:
            raise ContextCallError(
                f"ctx.{call} called inside step {self._in_step!r} of run {self.run_id!r}. A "
                f"step's function must not use ctx: call ctx.{call} from the workflow function, "
                "before or after the step.")
        if threading.get_ident() != self._thread:
            raise ContextCallError(
                f"ctx.{call} called from another thread than the one running the workflow of "
                f"run {self.run_id!r}. Only the workflow function itself may use ctx.")

    def _before_new_work(self) -> float:
        """Stop if the budget is spent or the lease lost; return the time the work starts."""
        engine = self._engine
        if not self._working:
            self._working = True
            engine._start_heartbeat()
        now = engine.clock()
        if self.budget is not None:
            reason = self.usage.exceeded(self.budget, self._run.created_at, now)
            if reason:
                raise Halt(reason)
        engine._keep_lease(self._run.run_id, now)
        return now

    def _commit(self, entry, label=None, consume_signal=None):
        """Write one checkpoint; with `consume_signal`, mark that signal consumed with it."""
        store = self._engine.store
        try:
            if consume_signal is None:
                store.record_entry(self.run_id, entry)
            else:
                store.consume_signal_into(self.run_id, consume_signal, entry)
        except DurableError:
            raise                      # LeaseLostError and friends say what happened already
        except Exception as exc:
            raise StoreWriteError(
                f"run {self.run_id!r}: the checkpoint of {entry.label!r} at position "
                f"{entry.position} could not be written to {store!r} ({type(exc).__name__}: "
                f"{exc}). The execution stopped there, with the position still free: resume "
                "the run once the store works again, and it carries on from that step (which "
                "runs again: the window an idempotency key closes).") from exc
        self._entries.append(entry)
        if label:
            self.executed.append(label)
            if self._on_step is not None:
                self._on_step(label, "executed")

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


def _describe(exc) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _label(name, occurrence):
    return name if occurrence == 1 else f"{name}#{occurrence}"


def _call_with_timeout(fn, args, kwargs, timeout, what):
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
