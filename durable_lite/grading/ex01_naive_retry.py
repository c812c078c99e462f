"""Exercise 01: make the naive runner's double refund visible, then build that runner.

The expected numbers are derived from the workflow's step order, not from a reference
solution: a crash at (step, point) means the steps before it (and the step itself, unless
the crash came before it started) ran in attempt 1, and attempt 2 runs all four again.
"""

from .. import examples
from ..errors import Crash
from ..faults import AFTER_EFFECT, BEFORE_STEP, CrashAt, every_crash_point
from ..naive import NaiveRunner
from .checks import Exercise, Fail, NotAttempted
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
    needs_callable(run_naive, "run_naive")
    with scratch("ex01") as folder:
        got = run_naive(folder, crash)
    if not isinstance(got, dict):
        raise Fail(f"run_naive returned a {type(got).__name__}; it should return a dict",
                   "return {'attempts': ..., 'step_executions': ..., 'refunds': ..., "
                   "'emails': ..., 'tickets_closed': ...}")
    missing = [k for k in KEYS if k not in got]
    if missing:
        raise Fail(f"the dict has no {', '.join(repr(k) for k in missing)}",
                   f"return all of {', '.join(KEYS)}")
    return got


def _compare(got, crash):
    want = expected_counts(crash)
    wrong = [f"{k}: expected {want[k]}, got {got[k]!r}" for k in KEYS if got[k] != want[k]]
    where = "with no crash" if crash is None else f"crash {crash_label(crash)}"
    if wrong:
        raise Fail(f"{where}: " + "; ".join(wrong))


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
            raise NotAttempted("predicted_refunds returned None")
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
        self.steps = [(n, self._step(n)) for n in names]

    def _step(self, name):
        def fn():
            self.calls[name] += 1
            failing, kind = self.fail.get(name, (set(), None))
            if self.calls[name] in failing:
                raise kind(f"{name} failed on call {self.calls[name]}")
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
        raise Fail(f"retry_from_top raised {type(exc).__name__}: {exc}",
                   "catch the failure, then start the next attempt from the first step") from None
    if not isinstance(got, dict) or not {"status", "attempts", "executions"} <= set(got):
        raise Fail(f"retry_from_top returned {got!r}",
                   "return a dict with 'status', 'attempts', 'executions' and 'results'")
    return got


def _same(got, key, want):
    value = got.get(key)
    if key == "executions" and value is not None:
        value = [tuple(x) for x in value]
    if value != want:
        raise Fail(f"{key}: expected {want!r}, got {value!r}")


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
