"""Exercise 01: make the naive runner's double refund visible, then build that runner.

The expected numbers are derived from the workflow's step order, not from a reference
solution: a crash at (step, point) means the steps before it (and the step itself, unless
the crash came before it started) ran in attempt 1, and attempt 2 runs all four again.
"""

import numbers

from .. import examples
from ..errors import Crash
from ..faults import AFTER_EFFECT, BEFORE_STEP, CrashAt, every_crash_point
from ..naive import NaiveRunner
from .checks import Exercise, Fail
from .harness import crash_label, needs_callable, scratch

EXERCISE = Exercise("01_naive_retry", "The double refund, counted",
                    lesson="notebooks/01_the_double_refund.ipynb")

STEPS = list(examples.REFUND_STEPS)                        # lookup, refund, email, close
EFFECTS = {"refund": "refunds", "email": "emails", "close": "tickets_closed"}
KEYS = ("attempts", "step_executions", "refunds", "emails", "tickets_closed")


def expected_counts(crash):
    """What the ledgers show after the naive runner meets `crash` once (None: no crash)."""
    if crash is None:
        return {"attempts": 1, "step_executions": 4, "refunds": 1, "emails": 1, "tickets_closed": 1}
    ran_in_attempt_1 = STEPS.index(crash.step) + (crash.when != BEFORE_STEP)
    counts = {"attempts": 2, "step_executions": ran_in_attempt_1 + len(STEPS)}
    for step, key in EFFECTS.items():
        counts[key] = 1 + (STEPS.index(step) < ran_in_attempt_1)
    return counts


def measured_refunds(crash) -> int:
    """Run the real thing: the careless provider's ledger after one naive run."""
    with scratch("ex01") as folder:
        NaiveRunner(max_attempts=3, crash_at=crash).run(examples.refund, folder, "A-17", 40,
                                                       careless=True)
        return examples.world_at(folder).careless.count()


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "count the damage", answers=["run_naive"])


def _counts(run_naive, crash):
    """(what run_naive returned, what the ledgers in its folder really hold)."""
    needs_callable(run_naive, "run_naive")
    with scratch("ex01") as folder:
        got = run_naive(folder, crash)
        world = examples.world_at(folder)
        ledgers = {"refunds": world.careless.count(), "careful_refunds": world.payments.count(),
                   "emails": world.mailer.count(), "tickets_closed": world.tickets.closes()}
    if not isinstance(got, dict):
        raise Fail(f"run_naive returned a {type(got).__name__}; it should return a dict",
                   "return {'attempts': ..., 'step_executions': ..., 'refunds': ..., "
                   "'emails': ..., 'tickets_closed': ...}")
    missing = [k for k in KEYS if k not in got]
    if missing:
        raise Fail(f"the dict has no {', '.join(repr(k) for k in missing)}",
                   f"return all of {', '.join(KEYS)}")
    return got, ledgers


def _compare(answer, crash):
    got, ledgers = answer
    want = expected_counts(crash)
    wrong = [f"{k}: expected {want[k]}, got {got[k]!r}" for k in KEYS if got[k] != want[k]]
    where = "with no crash" if crash is None else f"crash {crash_label(crash)}"
    if not wrong:
        return
    message = f"{where}: " + "; ".join(wrong)
    if crash is not None and all(got[k] == v for k, v in expected_counts(None).items()):
        raise Fail(message + "\nThese are the counts of a run that never crashed.",
                   "pass the crash on: dl.naive.NaiveRunner(max_attempts=3, crash_at=crash_at)")
    if ledgers["careful_refunds"]:
        raise Fail(message + f"\nThe run paid through the provider that honours keys "
                   f"({ledgers['careful_refunds']} refund(s) there), so a retry could not pay twice.",
                   "run the refund with careless=True, and count dl.examples.world_at(folder)"
                   ".careless.count()")
    counted = [k for k in ("refunds", "emails", "tickets_closed") if got[k] != ledgers[k]]
    if counted:
        raise Fail(message + "\nThe ledgers in `folder` hold " + ", ".join(
                   f"{k}={ledgers[k]}" for k in counted) + ": those are not the numbers returned.",
                   "count from the world kept in the folder the check passes in: "
                   "dl.examples.world_at(folder).careless.count(), .mailer.count(), "
                   ".tickets.closes()")
    if any(got[k] != want[k] for k in ("attempts", "step_executions")):
        raise Fail(message, "take attempts and step_executions from what the runner's .run(...) "
                            "returns (a NaiveResult: .attempts, .step_executions)")
    raise Fail(message)


@q1.test("returns a dict with attempts, step_executions, refunds, emails, tickets_closed")
def _(run_naive):
    _counts(run_naive, None)


@q1.test("no crash: 1 attempt, 4 step executions, one refund, one email, one ticket closed",
         hint="attempts and step_executions come from the NaiveResult "
              "(.attempts, .step_executions); the rest from the world's ledgers")
def _(run_naive):
    _compare(_counts(run_naive, None), None)


@q1.test("a crash just after the refund ran: 2 attempts, 6 step executions, 2 refunds",
         hint="count refunds in the provider's ledger: dl.examples.world_at(folder).careless.count() "
              "(run the refund with careless=True, the provider that ignores keys)")
def _(run_naive):
    crash = CrashAt("refund", AFTER_EFFECT)
    _compare(_counts(run_naive, crash), crash)


@q1.test("every one of the 12 crash points: the counts match what really happened",
         hint="pass crash_at to dl.naive.NaiveRunner(max_attempts=3, crash_at=crash_at), and "
              "count from the world in `folder` (a fresh folder for every call)")
def _(run_naive):
    for crash in every_crash_point(STEPS):
        _compare(_counts(run_naive, crash), crash)


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "predict the refunds", answers=["predicted_refunds"])


def _predictions(predicted_refunds, steps):
    needs_callable(predicted_refunds, "predicted_refunds")
    wrong = []
    for crash in every_crash_point(steps):
        guess = predicted_refunds(crash.step, crash.when)
        if guess is None:
            raise Fail(f"predicted_refunds({crash.step!r}, {crash.when!r}) returned None",
                       "return the number of refunds (an int); a function without a `return` "
                       "line returns None")
        if isinstance(guess, bool) or not isinstance(guess, numbers.Integral):
            raise Fail(f"predicted_refunds({crash.step!r}, {crash.when!r}) returned "
                       f"{guess!r}, a {type(guess).__name__}",
                       "return the number of refunds the provider records: 1 or 2, an int")
        actual = measured_refunds(crash)
        if guess != actual:
            wrong.append(f"crash {crash_label(crash)}: you predicted {guess!r}, "
                         f"the provider recorded {actual}")
    if wrong:
        raise Fail("\n".join(wrong))


@q2.test("crashes at the lookup (before, after its effect, after it finished)",
         hint="nothing has been paid yet when the lookup crashes; the retry pays once")
def _(predicted_refunds):
    _predictions(predicted_refunds, ["lookup"])


@q2.test("crashes around the refund",
         hint="before_step: the money has not moved yet. after_effect and after_checkpoint: it "
              "has, and the naive retry starts again from the lookup")
def _(predicted_refunds):
    _predictions(predicted_refunds, ["refund"])


@q2.test("crashes at the email and the close",
         hint="by then the refund is done; does the naive retry remember that?")
def _(predicted_refunds):
    _predictions(predicted_refunds, ["email", "close"])


# q3 -----------------------------------------------------------------------------------------
q3 = EXERCISE.question("q3", "a naive retry loop", answers=["retry_from_top"])


class Script:
    """Steps for retry_from_top: each records its calls; some fail on chosen calls."""

    def __init__(self, names, fail=None):
        self.calls = {n: 0 for n in names}
        self.fail = fail or {}            # name -> (set of call numbers that fail, exception type)
        self.raised = []                  # the exceptions the steps raised, in order
        self.steps = [(n, self._step(n)) for n in names]

    def _step(self, name):
        def fn():
            self.calls[name] += 1
            failing, kind = self.fail.get(name, (set(), None))
            if self.calls[name] in failing:
                error = kind(f"{name} failed on call {self.calls[name]}")
                self.raised.append(error)
                raise error
            return f"{name}-result"
        return fn


def _retry(retry_from_top, script, max_attempts):
    needs_callable(retry_from_top, "retry_from_top")
    try:
        got = retry_from_top(script.steps, max_attempts=max_attempts)
    except Crash:
        raise Fail("a dl.Crash escaped from retry_from_top",
                   "dl.Crash is a BaseException (like a worker being killed), so `except "
                   "Exception` misses it; catch (Exception, dl.Crash) and start again") from None
    except NotImplementedError:
        raise
    except Exception as exc:
        if any(exc is e for e in script.raised):
            raise Fail(f"a step's {type(exc).__name__} escaped from retry_from_top: {exc}",
                       "catch the failure, then start the next attempt from the first step; "
                       "after the last attempt, return {'status': 'failed', ...}") from None
        raise Fail(f"retry_from_top raised {type(exc).__name__}: {exc}",
                   "when every attempt has failed, return {'status': 'failed', ...} instead "
                   "of raising") from None
    if not isinstance(got, dict) or not {"status", "attempts", "executions"} <= set(got):
        raise Fail(f"retry_from_top returned {got!r}",
                   "return a dict with 'status', 'attempts', 'executions' and 'results'")
    return got


def _same(got, key, want):
    value = got.get(key)
    if key == "executions" and isinstance(value, (list, tuple)):
        value = [tuple(x) if isinstance(x, (list, tuple)) else x for x in value]
    if value != want:
        hint = _executions_hint(value, want) if key == "executions" else ""
        if key == "attempts" and isinstance(value, int) and value == want - 1:
            hint = "count attempts from 1: the first try is attempt 1 (range(1, max_attempts + 1))"
        raise Fail(f"{key}: expected {want!r}, got {value!r}", hint)


def _executions_hint(got, want) -> str:
    """Name the likely mistake behind a wrong `executions` list."""
    if not isinstance(got, list) or not all(isinstance(x, tuple) and len(x) == 2 for x in got):
        return "executions is a list of (attempt, step name) pairs, one per step call"
    if got == [(a - 1, n) for a, n in want]:
        return "count attempts from 1: the first try is attempt 1 (range(1, max_attempts + 1))"
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


@q3.test("every step succeeds: one attempt, each step once, results by step name")
def _(retry_from_top):
    got = _retry(retry_from_top, Script(["a", "b", "c"]), 3)
    _same(got, "status", "completed")
    _same(got, "attempts", 1)
    _same(got, "executions", [(1, "a"), (1, "b"), (1, "c")])
    _same(got, "results", {"a": "a-result", "b": "b-result", "c": "c-result"})


@q3.test("a step fails once: every step before it runs again",
         hint="record (attempt, name) before calling each step, and restart at the first step")
def _(retry_from_top):
    script = Script(["a", "b", "c"], fail={"b": ({1}, RuntimeError)})
    got = _retry(retry_from_top, script, 3)
    _same(got, "status", "completed")
    _same(got, "attempts", 2)
    _same(got, "executions", [(1, "a"), (1, "b"), (2, "a"), (2, "b"), (2, "c")])


@q3.test("a dl.Crash (the worker died) is retried too, from the top")
def _(retry_from_top):
    script = Script(["a", "b", "c"], fail={"c": ({1}, Crash)})
    got = _retry(retry_from_top, script, 3)
    _same(got, "status", "completed")
    _same(got, "executions", [(1, "a"), (1, "b"), (1, "c"), (2, "a"), (2, "b"), (2, "c")])


@q3.test("gives up after max_attempts: status 'failed', no exception",
         hint="after the last attempt fails, return {'status': 'failed', ...} instead of raising")
def _(retry_from_top):
    script = Script(["a", "b"], fail={"b": ({1, 2, 3, 4}, ValueError)})
    got = _retry(retry_from_top, script, 2)
    _same(got, "status", "failed")
    _same(got, "attempts", 2)
    _same(got, "executions", [(1, "a"), (1, "b"), (2, "a"), (2, "b")])
