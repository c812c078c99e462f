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

Patch gates (lesson 12) live here too, because they are a rule of replay: which branch a
run takes is decided by what its history holds at the gate's position (`Context.patched`).
A Context can also replay without doing anything (`replay_only`): it answers every recorded
position and stops with NewWork at the first one its history does not hold. That is how
versioning.py checks that code fits a run's history before a deploy, an upgrade or a fork.
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
from .store.records import (ERROR, PATCH, SIGNAL, SLEEPING, STEP, TIMER, VALUE, WAITING, WOKE,
                            Entry, Event)
from .usage import Usage

# The crash points of faults.py, by name. faults itself is loaded only when a crash is
# planned (Engine.crash_at), so `import durable_lite` does not pay for it.
BEFORE_STEP, AFTER_EFFECT, AFTER_CHECKPOINT = "before_step", "after_effect", "after_checkpoint"

_MISSING = object()
_decode = jsonvalue.decode
_entry = tuple.__new__      # _entry(Entry, fields): an Entry without its __new__'s defaults


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


def check_run_id(run_id) -> None:
    """A run id is a non-empty string a store can keep."""
    if not isinstance(run_id, str) or not run_id:
        raise TypeError(f"a run id must be a non-empty string (or None for a generated one), "
                        f"not {run_id!r}")
    try:
        run_id.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"the run id {run_id!r} is not text a store can keep (it holds a "
                         "lone surrogate)") from None


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


class NewWork(BaseException):
    """A replay-only Context reached a position its history does not hold. Not an error:
    the code fits the history up to there."""

    def __init__(self, position, kind, name):
        super().__init__(position)
        self.position, self.kind, self.name = position, kind, name


class RunEnding(Exception):
    """Raised by the workflow to end its run with a status of its own and a result, rather
    than completed or failed. A saga's Compensated is one: the run ends "compensated" with
    the undos as its result (saga.py). `status` is a run status the store knows."""

    status = None

    @property
    def result(self):
        return None


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
    """What a workflow function receives. The engine makes one per execution, handing it
    the worker's leases (to keep before new work) and its crash plan (faults.py), if any.
    `replay_only`: answer from the history and stop with NewWork where it ends."""

    def __init__(self, engine, run, entries, budget, on_step=None, *, leases=None,
                 crashes=None, replay_only=False):
        self._engine = engine
        self._leases = leases
        self._crashes = crashes or None    # an empty plan costs nothing on the hot path
        self.replay_only = replay_only
        # How each patch gate decided within the recorded history (read by replay checks).
        self.patch_decisions = {}
        self._run = run
        self.run_id = run.run_id
        self._entries = entries
        self._position = 0
        # How often each name has been asked for so far, per kind: the occurrence numbers.
        self._occurrences = {kind: {} for kind in (STEP, VALUE, TIMER, SIGNAL, WOKE, PATCH)}
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
        if self.replay_only:
            raise NewWork(position, STEP, name)
        label = name if occurrence == 1 else f"{name}#{occurrence}"
        engine = self._engine
        crashes = self._crashes            # the crash points, asked inline: a hot path
        started = self._before_new_work()
        if crashes is not None:
            crashes.check(name, occurrence, BEFORE_STEP)
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
        if crashes is not None:
            crashes.check(name, occurrence, AFTER_EFFECT)
        if unrecordable is not None:
            error = f"{type(unrecordable).__name__}: {unrecordable}"
            self._record_failure(name, position, occurrence, attempts, error, started,
                                 effect_happened=True)
            raise StepFailed(self.run_id, label, attempts, error, unrecordable)
        try:
            self._commit(_entry(Entry, (position, STEP, name, occurrence, text, attempts,
                                        started, engine.clock(), engine.worker, cost)), label)
        except StoreWriteError as refused:
            self._result_refused(name, position, occurrence, attempts, started, refused)
        usage = self.usage
        usage.steps += 1
        if cost:
            usage.add_cost(cost)
        if crashes is not None:
            crashes.check(name, occurrence, AFTER_CHECKPOINT)
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
                self._leases.keep(self.run_id)    # a backoff may have outlasted the lease
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
            if self.replay_only:       # before producing: a check must not use up an id
                raise NewWork(position, VALUE, name)
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
        self._crash_point(name, occurrence, BEFORE_STEP)      # reached, not yet answered
        now = engine.clock()
        # Only a signal sent by the deadline answers the wait: the outcome must not depend
        # on how soon after the deadline some worker happened to resume the run.
        pending = engine.store.pending_signal(self.run_id, name, sent_by=deadline)
        if pending is not None:
            signal_id, payload_json = pending
            self._commit(Entry(position, SIGNAL, name, occurrence, payload_json, 1, now, now,
                               engine.worker), _label(name, occurrence), consume_signal=signal_id)
            self._crash_point(name, occurrence, AFTER_CHECKPOINT)
            return jsonvalue.decode(payload_json)
        if now >= deadline:
            self._commit(Entry(position, SIGNAL, name, occurrence, "null", 1, now, now, engine.worker),
                         _label(name, occurrence))
            self._crash_point(name, occurrence, AFTER_CHECKPOINT)
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
        self._crash_point(name, occurrence, BEFORE_STEP)  # reached, not yet over
        now = self._engine.clock()
        if now < wake_at:
            raise Park(SLEEPING, name, wake_at)
        self._commit(Entry(position, WOKE, name, occurrence, json.dumps(now), 1, now, now,
                           self._engine.worker), _label(name, occurrence))
        self._crash_point(name, occurrence, AFTER_CHECKPOINT)

    # patch gates: one workflow function across a deploy (lesson 12) ---------------------
    def patched(self, name: str) -> bool:
        """Which branch of the patch gate `name` this run takes: True for the new code.

            if ctx.patched("fraud-check"):
                ctx.step("fraud", check_fraud, order)

        The rule looks at the run's history at the position the gate is reached (the next
        position, the one a step called here would take):

        - Nothing is recorded there yet: the run meets the gate under the code that has it
          (a new run; or an old run that had not got this far when the deploy happened).
          A *marker* — an entry of kind "patch" named `name` — is recorded at that position,
          and the answer is True. The marker is committed before the new branch runs, so a
          crash right after it keeps the run on the new branch.
        - The marker is recorded there: a replay of a run that took the new branch. The
          marker is replayed (it takes its position), and the answer is True again.
        - Anything else is recorded there: the run was recorded by code without the gate, and
          went past this point on the old branch. The answer is False, and the gate takes no
          position, so the old branch's calls replay at the positions they were recorded at.

        Either way the run never diverges at the gate: it follows the branch its history
        already holds. The same name may be used at several points of one workflow (each call
        decides at its own position; a second marker is labelled "name#2").

        Retiring a gate: once no unfinished run takes the old branch (`engine.patch_report`
        lists them: runs that replay the gate as False), replace `if ctx.patched(name):` and
        its else branch by `ctx.deprecate_patch(name)` followed by the new code alone. Once no
        unfinished run holds the marker either, delete that call too. Removing the gate at
        once instead makes every run holding the marker diverge, because its history has a
        marker where the code now asks for a step; removing it while runs still take the old
        branch makes those diverge.
        """
        self._check_callable_here("patched")
        check_name("patch", name, self.run_id)
        try:
            entry = self._recorded_here()
            if entry is not None and not (entry.kind == PATCH and entry.name == name):
                self._note_gate(name, False)
                return False
            position, occurrence = self._claim(PATCH, name)
            if entry is None:
                now = self._engine.clock()
                self._commit(Entry(position, PATCH, name, occurrence, "true", 1, now, now,
                                   self._engine.worker))
            else:
                self._note_gate(name, True)
            return True
        except Exception as exc:
            self.fatal = exc
            raise

    def deprecate_patch(self, name: str) -> None:
        """The patch gate `name` once its old branch is deleted (see `patched`).

        If the run's history holds the gate's marker at this position, it is replayed (it
        keeps its position, so the calls after it line up); otherwise nothing happens and
        nothing is recorded, so new runs carry no marker at all. Deprecate a gate only when
        no unfinished run takes its old branch: such a run would now meet the new branch's
        first call where its history holds the old branch's, and diverge. Delete the call
        when no unfinished run holds the marker.
        """
        self._check_callable_here("deprecate_patch")
        check_name("patch", name, self.run_id)
        entry = self._recorded_here()
        if entry is not None and entry.kind == PATCH and entry.name == name:
            self._claim(PATCH, name)
            self._note_gate(name, True)

    def _recorded_here(self):
        """The entry recorded at the position the next call would take, or None."""
        return self._entries[self._position] if self._position < len(self._entries) else None

    def _note_gate(self, name, new_branch):
        """How the gate decided inside the recorded history (a replay check reads it)."""
        self.patch_decisions[name] = self.patch_decisions.get(name, True) and new_branch

    # replay machinery -------------------------------------------------------------------
    def _claim(self, kind, name):
        """The next position, and which occurrence of (kind, name) this call is."""
        position = self._position
        self._position += 1
        counts = self._occurrences[kind]
        occurrence = counts[name] = counts.get(name, 0) + 1
        return position, occurrence

    def _replay_step(self, position, name, occurrence):
        """The recorded outcome of a step: its result, or its failure raised again.

        Every step of a resumed run passes here, so the entry's fields are read by index
        (an Entry is a tuple: 1 kind, 2 name, 4 result, 9 cost) rather than by property."""
        entry = self._entries[position]
        kind = entry[1]
        if entry[2] != name or (kind != STEP and kind != ERROR):
            raise self._divergence(position, entry, STEP, name, occurrence)
        label = name if occurrence == 1 else f"{name}#{occurrence}"
        self.replayed.append(label)
        if self._on_step is not None:
            self._on_step(label, "replayed")
        usage = self.usage
        usage.steps += 1
        if kind == ERROR:
            try:
                recorded = _decode(entry[4])
                attempts, error = recorded["attempts"], recorded["error"]
            except (ValueError, TypeError, KeyError) as exc:
                raise self._unreadable(entry, exc) from None
            raise StepFailed(self.run_id, label, attempts, error)
        if entry[9]:
            usage.add_cost(entry[9])
        try:
            return _decode(entry[4])
        except (ValueError, TypeError) as exc:      # costs nothing until it happens
            raise self._unreadable(entry, exc) from None

    def _replay(self, position, kind, name, occurrence):
        """The recorded value of a wait, sleep or ctx.now/uuid/random, or _MISSING."""
        if position >= len(self._entries):
            return _MISSING
        entry = self._entries[position]
        if entry.kind != kind or entry.name != name:
            raise self._divergence(position, entry, kind, name, occurrence)
        if kind in (SIGNAL, WOKE):
            self._log(entry.label, "replayed")
        try:
            return jsonvalue.decode(entry.result_json)
        except (ValueError, TypeError) as exc:
            raise self._unreadable(entry, exc) from None

    def _unreadable(self, entry, exc):
        """A checkpoint whose text is not JSON: the store's file was damaged or edited."""
        store = self._engine.store
        where = getattr(store, "path", None) or repr(store)
        return jsonvalue.unreadable(f"the checkpoint of {entry.label!r} (position "
                                    f"{entry.position}) of run {self.run_id!r} in {where}", exc)

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
        if not self._working:
            self._working = True
            self._leases.beat()
        now = self._engine.clock()
        if self.budget is not None:
            reason = self.usage.exceeded(self.budget, self._run.created_at, now)
            if reason:
                raise Halt(reason)
        self._leases.keep(self._run.run_id, now)
        return now

    def _crash_point(self, name, occurrence, when):
        if self._crashes is not None:          # nearly always None: one test and done
            self._crashes.check(name, occurrence, when)

    def _commit(self, entry, label=None, consume_signal=None):
        """Write one checkpoint; with `consume_signal`, mark that signal consumed with it."""
        if self.replay_only:
            raise NewWork(entry.position, entry.kind, entry.name)
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
