"""Exercise 01: make the naive runner's double refund visible, then build that runner.

What "really happened" at each crash point is measured, not derived by hand: a naive sweep
(`dl.faults.sweep(refund, ..., runner="naive")`) crashes the lesson's refund at every point,
lets the job queue redeliver it, and counts the world's ledgers — from the world's files,
with `ledgers.Ledgers` (never through `durable_lite.sim`, which the answer's own cells can
change in the kernel the checks run in), both in the sweep and after the answer's run. What
the checks read from an answer (run_naive's dict, a prediction, retry_from_top's dict) is
copied as plain data first (`plain.plain`): a value of a class of the answer's own, such as
an int that equals everything, is refused with a message that says so.

The properties a right answer has, each judged by the test that names it, and how the cases
vary it (tests/test_grading_properties_01_07.py has, for each, an answer wrong in that
property alone, and it fails):

q1 run_naive(folder, crash_at)
  - it returns the five counts, under the keys its docstring names;
  - it runs the lesson's refund in the folder it is given, through the careless provider:
    every call gets a fresh folder, and the ledgers there must hold what the answer says
    (counts typed in, or counted in a folder of its own, fail);
  - it passes the crash on: all 12 crash points, in a drawn order, each compared with the
    naive sweep (effects that match an uncrashed run fail);
  - it counts from the ledgers after the run has ended, and takes attempts and step
    executions from the runner's result.
  The order and the amount are the task's own ("A-17", 40). max_attempts=3 is not judged:
  with a single crash no count can tell it from 2.
q2 predicted_refunds(step, when)
  - an int for each of the 12 crash points, equal to what the sweep measured: the lookup's
    three, the refund's three (after_checkpoint is no safer than after_effect for a runner
    that records nothing) and the six of the email and the close.
q3 retry_from_top(steps, max_attempts)
  Steps have drawn names, return a value drawn for each call (so results cannot be made up
  from the names), and fail at drawn places with a drawn kind of error; max_attempts is
  drawn.
  - every step succeeds: one attempt, each step once, in order, results by step name;
  - a failure starts the next attempt at the first step, and the call that failed is listed;
  - a dl.Crash (a BaseException) is retried like an exception;
  - the boundary: a run that gets through on attempt max_attempts has completed;
  - after max_attempts failed attempts: status "failed", results None, and no exception.
"""

import functools

from ... import examples
from ...errors import Crash
from ...faults import AFTER_EFFECT, BEFORE_STEP, CrashAt
from ..checks import Exercise, Fail
from ..harness import crash_label, needs_callable, scratch, sweep_of
from ..ledgers import Ledgers
from ..plain import plain

EXERCISE = Exercise("01_naive_retry", "The double refund, counted",
                    lesson="notebooks/01_the_double_refund.ipynb")

STEPS = list(examples.REFUND_STEPS)                        # lookup, refund, email, close
EFFECTS = ("refunds", "emails", "tickets_closed")
KEYS = ("attempts", "step_executions", *EFFECTS)


@functools.lru_cache(maxsize=1)
def naive_sweep() -> tuple:
    """The refund under the naive runner, crashed once at each of its 12 points and
    redelivered, as the task runs it: order A-17, 40, the careless provider.

    Returns (the clean run's effects, one (step, when, attempts, effects) per crash point),
    effects in the order of EFFECTS. Tuples only: the cache lives in the kernel the
    answer's cells run in, and the grader's watch notices a grading module's value being
    replaced, not a list or dict inside it being edited."""
    sweep = sweep_of(examples.refund, "A-17", 40, careless=True, runner="naive",
                     effects=_world_counts, what="the lesson's refund under the naive runner")
    rows = tuple((r["step"], r["when"], r["attempts"], _effects(r)) for r in sweep.rows)
    return _effects(sweep.clean), rows


def _world_counts(folder) -> dict:
    """The sweep's count of a case's world: read from its files (ledgers.py)."""
    return Ledgers(folder).counts()


def _effects(row) -> tuple:
    return tuple(row["effects"].get(k, 0) for k in EFFECTS)


def truth(crash):
    """{attempts, step_executions, refunds, emails, tickets_closed} after one naive run that
    met `crash` (None: no crash). Effects and attempts come from the sweep; the executions
    follow from them: the steps that ran before the crash, then all four again."""
    clean, rows = naive_sweep()
    if crash is None:
        return {"attempts": 1, "step_executions": len(STEPS), **dict(zip(EFFECTS, clean))}
    attempts, effects = next((a, e) for step, when, a, e in rows
                             if (step, when) == (crash.step, crash.when))
    ran_before = STEPS.index(crash.step) + (crash.when != BEFORE_STEP)
    return {"attempts": attempts, "step_executions": ran_before + len(STEPS),
            **dict(zip(EFFECTS, effects))}


def crash_points():
    return [CrashAt(step, when) for step, when, _, _ in naive_sweep()[1]]


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "count the damage", answers=["run_naive"])


def _counts(run_naive, crash):
    """(what run_naive returned, what the ledgers in its folder really hold)."""
    needs_callable(run_naive, "run_naive")
    with scratch("ex01") as folder:
        got = plain(run_naive(folder, crash), "run_naive")
        world = Ledgers(folder)
        counts = world.counts()
        held = {k: counts[k] for k in EFFECTS}
        careful = sum(r["provider"] == "payments" for r in world.refunds())
    if type(got) is not dict:
        raise Fail(f"run_naive returned a {type(got).__name__}; it should return a dict",
                   "return a dict with the five counts, under the keys the docstring names")
    missing = [k for k in KEYS if k not in got]
    if missing:
        raise Fail(f"the dict has no {', '.join(repr(k) for k in missing)}",
                   f"return all of {', '.join(KEYS)}")
    return got, held, careful


def _listing(counts) -> str:
    return ", ".join(f"{k}={counts[k]}" for k in EFFECTS)


def _compare(answer, crash):
    """The world must show what the sweep measured, and the answer what the world shows."""
    got, held, careful = answer
    want = truth(crash)
    where = "with no crash" if crash is None else f"crash {crash_label(crash)}"
    if careful:
        raise Fail(f"{where}: the run paid through the provider that honours keys "
                   f"({careful} refund(s) there), so a retry could not pay twice",
                   "run the refund through the careless provider, as the task says, and count "
                   "refunds in that provider's ledger")
    if not any(held.values()):
        raise Fail(f"{where}: run_naive returned {_listing(got)}, but the ledgers of the world in "
                   "`folder` recorded nothing at all: the refund never ran there",
                   "run the lesson's refund in the folder the check passes in, then count from "
                   "the world kept in that folder")
    if held != {k: want[k] for k in EFFECTS}:
        if crash is not None and held == {k: truth(None)[k] for k in EFFECTS}:
            raise Fail(f"{where}: the ledgers hold {_listing(held)}, the effects of a run that "
                       "never crashed",
                       "pass crash_at on to the naive runner, so the run meets the crash")
        raise Fail(f"{where}: the ledgers hold {_listing(held)}; a naive run that meets this "
                   f"crash leaves {_listing(want)}",
                   "run the lesson's refund once, with the order, amount and provider the task "
                   "gives, under the naive runner with the crash passed on")
    counted = [k for k in EFFECTS if got[k] != held[k]]
    if counted:
        raise Fail(f"{where}: run_naive returned {_listing(got)}, but the ledgers in `folder` "
                   f"hold {_listing(held)}",
                   "count after the run has ended, from the world's ledgers in `folder`")
    wrong = [f"{k}: expected {want[k]}, got {got[k]!r}" for k in ("attempts", "step_executions")
             if got[k] != want[k]]
    if wrong:
        raise Fail(f"{where}: " + "; ".join(wrong),
                   "take attempts and step_executions from the result the runner's run returns, "
                   "not from a count of your own")


@q1.test("returns a dict with attempts, step_executions, refunds, emails, tickets_closed")
def _(run_naive):
    _counts(run_naive, None)


@q1.test("no crash: 1 attempt, 4 step executions, one refund, one email, one ticket closed",
         hint="attempts and step_executions come from the NaiveResult "
              "(.attempts, .step_executions); the rest from the world's ledgers")
def _(run_naive):
    _compare(_counts(run_naive, None), None)


@q1.test("a crash just after the refund ran: 2 attempts, 6 step executions, 2 refunds",
         hint="count refunds in the ledger of the provider that ignores keys (the careless "
              "one, which the task asks for): every call it gets pays")
def _(run_naive):
    crash = CrashAt("refund", AFTER_EFFECT)
    _compare(_counts(run_naive, crash), crash)


@q1.test("every one of the 12 crash points, in a new order each time: the counts are what the "
         "ledgers recorded",
         hint="pass crash_at on to the naive runner, and count from the world in `folder` "
              "(a fresh folder for every call)")
def _(run_naive, draw):
    points = crash_points()
    draw.shuffle(points)
    for crash in points:
        _compare(_counts(run_naive, crash), crash)


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "predict the refunds", answers=["predicted_refunds"])


def _predictions(predicted_refunds, steps):
    needs_callable(predicted_refunds, "predicted_refunds")
    wrong = []
    for crash in [c for c in crash_points() if c.step in steps]:
        called = f"predicted_refunds({crash.step!r}, {crash.when!r})"
        guess = plain(predicted_refunds(crash.step, crash.when), called)
        if guess is None:
            raise Fail(f"{called} returned None",
                       "return the number of refunds (an int); a function without a `return` "
                       "line returns None")
        if type(guess) is not int:
            raise Fail(f"{called} returned {guess!r}, a {type(guess).__name__}",
                       "return the number of refunds the provider records: 1 or 2, an int")
        actual = truth(crash)["refunds"]
        if guess != actual:
            wrong.append(f"crash {crash_label(crash)}: you predicted {guess!r}, "
                         f"the provider recorded {actual}")
    if wrong:
        raise Fail("\n".join(wrong))


@q2.test("crashes at the lookup (before, after its effect, after it finished)",
         hint="when the lookup crashes, has any money moved yet? The retry starts again at the top")
def _(predicted_refunds):
    _predictions(predicted_refunds, ["lookup"])


@q2.test("crashes around the refund",
         hint="for each of the three moments ask: had the refund's function already run when "
              "the process died? The naive retry starts again at the top either way")
def _(predicted_refunds):
    _predictions(predicted_refunds, ["refund"])


@q2.test("crashes at the email and the close",
         hint="by then the refund is done; does the naive retry remember that?")
def _(predicted_refunds):
    _predictions(predicted_refunds, ["email", "close"])


# q3 -----------------------------------------------------------------------------------------
q3 = EXERCISE.question("q3", "a naive retry loop", answers=["retry_from_top"])


class Script:
    """Steps for retry_from_top, with drawn names: each records its calls, returns a value
    drawn for that very call (so results cannot be made up from the names), and fails on
    the calls the test chooses."""

    def __init__(self, draw, n, fail=None):
        self.names = draw.distinct(lambda: f"{draw.word()}-{draw.randint(1, 99)}", n)
        self.calls = {name: 0 for name in self.names}
        self.returned = []                # (name, value) for every call that returned
        self.fail = {self.names[i]: spec for i, spec in (fail or {}).items()}
        self.raised = []                  # the exceptions the steps raised, in order
        self.token = draw.token
        self.steps = [(name, self._step(name)) for name in self.names]

    def _step(self, name):
        def fn():
            self.calls[name] += 1
            failing, kind = self.fail.get(name, (set(), None))
            if self.calls[name] in failing:
                error = kind(f"{name} failed on call {self.calls[name]}")
                self.raised.append(error)
                raise error
            value = f"{name}:{self.token()}"
            self.returned.append((name, value))
            return value
        return fn

    def last_results(self):
        """The value each step returned on its last call: the successful attempt's results."""
        return {name: value for name, value in self.returned}


def _retry(retry_from_top, script, max_attempts):
    needs_callable(retry_from_top, "retry_from_top")
    try:
        got = retry_from_top(script.steps, max_attempts=max_attempts)
    except Crash:
        raise Fail("a dl.Crash escaped from retry_from_top",
                   "dl.Crash is a BaseException (like a worker being killed), so `except "
                   "Exception` misses it; catch it too, and start again") from None
    except NotImplementedError:
        raise
    except Exception as exc:
        if any(exc is e for e in script.raised):
            raise Fail(f"a step's {type(exc).__name__} escaped from retry_from_top: {exc}",
                       "catch the failure, then start the next attempt from the first step; "
                       "after the last attempt, return the failed status") from None
        raise Fail(f"retry_from_top raised {type(exc).__name__}: {exc}",
                   "when every attempt has failed, return the failed status instead of "
                   "raising") from None
    got = plain(got, "retry_from_top")       # outside the try: a refusal is not its error
    if type(got) is not dict or not {"status", "attempts", "executions"} <= set(got):
        raise Fail(f"retry_from_top returned {got!r}",
                   "return a dict with the four keys the question names")
    return got


def _same(got, key, want):
    value = got.get(key)
    if key == "executions" and isinstance(value, (list, tuple)):
        value = [tuple(x) if isinstance(x, (list, tuple)) else x for x in value]
    if value != want:
        hint = _executions_hint(value, want) if key == "executions" else ""
        if key == "attempts" and isinstance(value, int) and value == want - 1:
            hint = "count attempts from 1: the first try is attempt 1, the last attempt max_attempts"
        if key == "results":
            hint = ("results holds, by step name, what each step's function returned in the "
                    "attempt that completed" if want is not None else
                    "no attempt completed, so there are no results: the question asks for "
                    "None, not what the last attempt got through before it failed")
        raise Fail(f"{key}: expected {want!r}, got {value!r}", hint)


def _executions_hint(got, want) -> str:
    """Name the likely mistake behind a wrong `executions` list."""
    if not isinstance(got, list) or not all(isinstance(x, tuple) and len(x) == 2 for x in got):
        return "executions is a list of (attempt, step name) pairs, one per step call"
    if got == [(a - 1, n) for a, n in want]:
        return "count attempts from 1: the first try is attempt 1, the last attempt max_attempts"
    last_of_failed = [want[i] for i in range(len(want) - 1) if want[i][0] != want[i + 1][0]]
    if last_of_failed and all(call not in got for call in last_of_failed):
        return ("the call that failed is missing: append (attempt, name) before calling the "
                "step's function, so a call that raises is listed too")
    first = want[0][1]
    starts = [got[i][1] for i in range(1, len(got)) if got[i][0] != got[i - 1][0]]
    if any(name != first for name in starts):
        return (f"every attempt starts again at the first step ({first!r}): the naive runner "
                "remembers nothing, so it cannot skip what already ran")
    return "append (attempt, name) for every step call, in order, across all attempts"


def _calls(names, attempts_upto):
    """(attempt, name) for attempts 1.. where attempt a stops after names[:upto[a]]."""
    return [(a, name) for a, upto in enumerate(attempts_upto, start=1) for name in names[:upto]]


@q3.test("every step succeeds: one attempt, each step once, results by step name")
def _(retry_from_top, draw):
    script = Script(draw, draw.randint(3, 5))
    got = _retry(retry_from_top, script, draw.randint(2, 5))
    _same(got, "status", "completed")
    _same(got, "attempts", 1)
    _same(got, "executions", _calls(script.names, [len(script.names)]))
    _same(got, "results", script.last_results())


@q3.test("a step fails once: every step before it runs again",
         hint="record (attempt, name) before calling each step, and restart at the first step")
def _(retry_from_top, draw):
    n = draw.randint(3, 5)
    where = draw.randint(1, n - 1)                 # never the first: something must repeat
    script = Script(draw, n, fail={where: ({1}, draw.choice([RuntimeError, ValueError, KeyError]))})
    got = _retry(retry_from_top, script, 3)
    _same(got, "status", "completed")
    _same(got, "attempts", 2)
    _same(got, "executions", _calls(script.names, [where + 1, n]))
    _same(got, "results", script.last_results())


@q3.test("a dl.Crash (the worker died) is retried too, from the top")
def _(retry_from_top, draw):
    n = draw.randint(3, 5)
    where = draw.randint(0, n - 1)
    script = Script(draw, n, fail={where: ({1}, Crash)})
    got = _retry(retry_from_top, script, 3)
    _same(got, "status", "completed")
    _same(got, "executions", _calls(script.names, [where + 1, n]))


@q3.test("gives up after max_attempts: status 'failed', results None, no exception",
         hint="after the last attempt fails, return the failed status instead of raising")
def _(retry_from_top, draw):
    n, attempts = draw.randint(2, 4), draw.randint(2, 4)
    where = draw.randint(0, n - 1)
    script = Script(draw, n, fail={where: (set(range(1, attempts + 2)), ValueError)})
    got = _retry(retry_from_top, script, attempts)
    _same(got, "status", "failed")
    _same(got, "attempts", attempts)
    _same(got, "executions", _calls(script.names, [where + 1] * attempts))
    _same(got, "results", None)


@q3.test("a step that fails on every attempt but the last: completed on attempt max_attempts",
         hint="the last attempt is an attempt like the others: if it gets through every step, "
              "the run completed")
def _(retry_from_top, draw):
    n, attempts = draw.randint(2, 4), draw.randint(2, 5)
    where = draw.randint(0, n - 1)
    script = Script(draw, n, fail={where: (set(range(1, attempts)), draw.choice([ValueError, KeyError]))})
    got = _retry(retry_from_top, script, attempts)
    _same(got, "status", "completed")
    _same(got, "attempts", attempts)
    _same(got, "executions", _calls(script.names, [where + 1] * (attempts - 1) + [n]))
    _same(got, "results", script.last_results())
