"""Exercise 13: what a crash re-spends, where checkpoints pay, and when not to bother.

q1  expected_cost(steps): the average cost of a run of steps (cost, q) restarted from the
    top and resumed from checkpoints. Drawn runs of different steps, some that cannot
    crash (q = 0) among ones that can; one-step runs; runs with no crash at all.
q2  break_even_steps(w, q, h): the fewest equal steps for which a checkpoint per step
    pays, exactly. Drawn on both sides of the rule of thumb's validity: rare crashes, where
    the rule h < w*q*(n-1)/2 gives the answer (so using n for n - 1 is off by one), and
    frequent ones, where it does not; free checkpoints; no crashes.
q3  reasons_for(steps, long_seconds, long_dollars): the chapter's three reasons to reach
    for durability, for drawn workloads: none, each reason alone, several, and lines for
    "long" other than the lesson's.

What a right answer must have, and how the cases vary it:

q1 `expected_cost(steps)` -> (from_the_top, resumed)
- resumed: each step repeated by its own crashes only (runs of 2 to 9 drawn steps);
- from the top: each step sent back by crashes in it or in any step after it (the same
  draws: order matters, so a product over the steps before fails);
- the edges: one step (both ways the same), steps that cannot crash (q = 0) or cost nothing
  among ones that do, runs where nothing crashes at all;
- the shape: a pair of finite numbers, in that order, unrounded (compared to 1e-9).

q2 `break_even_steps(w, q, h)` -> the fewest n that pays, or None
- exact where the rule of thumb is: rare crashes (q * n <= 1%), where using n for n - 1 is
  one step short;
- exact where it is not: frequent crashes, where the rule asks for too many steps;
- the boundary: "pays" means saves *more* than it costs. Cases where some n saves exactly
  n * h (q = 1/2 or 3/4, whole-number worths: every sum is exact in floating point), so
  an answer that counts "as much as" for paying gives that n instead of the next;
- free checkpoints (h = 0: the first n that saves anything, never 1); no crashes (q = 0:
  None, at once, and with crashes an answer of None alone fails);
- the shape: an int of at least 1, or None; each call within 3 s.

q3 `reasons_for(steps, long_seconds, long_dollars)` -> the reasons that hold
- the shape: a set of reason names; as the question says, a list or tuple of them, or a
  dict {reason: bool} like `costs.reasons` returns, is read the same way (the reasons, not
  the container, are what the question is about); anything else, or a name that is not a
  reason, fails;
- each reason alone, none, and several at once, in drawn workloads (harmless effects in
  every one, so "any effect" is not "irreversible"; many small steps that are not long);
- irreversible is any harm at all: on every run one workload's only harmful step costs
  $0.01-0.10 if repeated (below every line and every other effect's harm), so an answer
  that wants the harm, or the total harm, above a threshold fails;
- long counts work, not waiting (a wait far longer than the line, and no work to speak of);
- the line is the one passed, not the lesson's 60 s and $1 (lines that cross between them);
- the boundary: exactly the line's seconds of work, or exactly its dollars, is not long
  ("more than"); whole seconds and quarters of a dollar, so every sum is exact, and lines
  at or below the lesson's, so the line's value does not decide this test.

The reference is `durable_lite.costs`, the lesson's own arithmetic, reached through a
conversion: the questions are posed the way the lesson's rule of thumb is (a crash chance
per attempt, a worth and a checkpoint cost in one unit, steps as plain dicts), not the way
`costs` takes them (seconds and a crash rate per hour, dollars, dataclasses).

A learner could still answer by converting back and calling `costs` (q1 is
`costs.expected` with a crash rate of one per second and costs in dollars). So every call
of a learner's function runs under a profile hook that sees any call into costs.py, and a
call found there fails the test: the exercise is to write the arithmetic, and the hook is
cheap next to the arithmetic it watches. (A learner who copies the module's code into a
cell is not stopped; they will have read the formulas.)
"""

import contextlib
import inspect
import math
import numbers
import sys
from fractions import Fraction

from ... import costs
from ..checks import Exercise, Fail, NotAttempted, time_limit
from ..harness import needs_callable
from ..plain import plain

EXERCISE = Exercise("13_costs", "What a crash re-spends, and when to bother",
                    lesson="notebooks/13_what_durability_costs.ipynb")

# The conversions into the terms `costs` takes. q1: at one crash per second of running, a
# step of t seconds is crashed with 1 - exp(-t), so a crash chance q is a step of
# -log(1 - q) seconds, and its cost goes in as dollars. q2: a worker paid a dollar a second
# makes a worth w a step of w seconds (at a crash rate that gives it the chance q), and a
# checkpoint cost h a checkpoint of h seconds.
ONE_CRASH_A_SECOND = costs.HOUR        # crashes per hour
A_DOLLAR_A_SECOND = costs.HOUR         # worker dollars per hour


# calling the learner's code -----------------------------------------------------------------
_COSTS_FILE = costs.expected.__code__.co_filename


@contextlib.contextmanager
def _watching_costs():
    """Collect the names of the durable_lite.costs functions called inside the block from
    outside it (what the answer called, not what those functions called in turn)."""
    called, previous = [], sys.getprofile()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == _COSTS_FILE \
                and (frame.f_back is None or frame.f_back.f_code.co_filename != _COSTS_FILE):
            called.append(getattr(frame.f_code, "co_qualname", frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(previous)


class _TooSlow(BaseException):
    """Raised in the learner's code when one call runs past its own limit (a BaseException,
    so a broad `except Exception` in a loop cannot swallow it)."""


def call(fn, name, shown, *args, limit=None, none_ok=False):
    """fn(*args), refused if it reaches into durable_lite.costs; `shown` is the call as the
    feedback writes it. A None it returns is a stub's ("not attempted") unless `none_ok`."""
    needs_callable(fn, name)
    try:
        inspect.signature(fn).bind(*args)
    except TypeError:
        raise Fail(f"{name} cannot be called as {shown}: it takes {inspect.signature(fn)}",
                   "keep the def line as the notebook gives it") from None
    except ValueError:                   # no signature to read (a builtin): just call it
        pass
    with _watching_costs() as called:
        try:
            with time_limit(limit, _TooSlow) if limit else contextlib.nullcontext():
                result = fn(*args)
        except _TooSlow:
            raise Fail(f"{shown} had not returned after {limit:g} s",
                       "look for a loop that waits for something that never happens with "
                       "these values") from None
    if called:
        names = ", ".join(dict.fromkeys(called))
        raise Fail(f"{shown} called durable_lite.costs ({names}): this exercise asks you to "
                   "write the arithmetic yourself",
                   "plain Python and the math module are all it takes; the formulas are in "
                   "the lesson's section 3")
    if result is None and not none_ok:
        raise NotAttempted(f"{name} returned None")
    return result


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def close(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


# q1 · expected_cost --------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "what a crash re-spends, both ways", answers=["expected_cost"])


def reference_cost(steps):
    """(from the top, resumed): `costs.expected` on the same run, its costs as dollars."""
    workload = costs.Workload("case", tuple(
        costs.StepCost(f"step {i + 1}", -math.log1p(-q), dollars=cost)
        for i, (cost, q) in enumerate(steps)))
    return (costs.expected(workload, ONE_CRASH_A_SECOND, durable=False).dollars,
            costs.expected(workload, ONE_CRASH_A_SECOND, durable=True).dollars)


def _p(steps):
    return [1 - q for _, q in steps]


# What learners write instead, each with what to tell them: (their formula, the hint).
def _top_whole_run(steps):          # every crash re-spends the whole run
    return sum(c for c, _ in steps) / math.prod(_p(steps))


def _top_prefix(steps):             # products over the steps before, not after
    p = _p(steps)
    return sum(c / math.prod(p[:j + 1]) for j, (c, _) in enumerate(steps))


def _top_after_only(steps):         # completions (the duplicates' count), not attempts
    p = _p(steps)
    return sum(c / math.prod(p[j + 1:]) for j, (c, _) in enumerate(steps))


def _clean(steps):                  # no repeat at all
    return sum(c for c, _ in steps)


def _own_crashes(steps):            # each step repeated by its own crashes only
    return sum(c / (1 - q) for c, q in steps)


_TOP_MISTAKES = (
    (_top_whole_run, "a crash in step j re-runs steps 1..j, not the whole run: the steps "
                     "after j had not run yet. So step j is sent back by crashes in it or in "
                     "any step after it"),
    (_top_prefix, "turn it around: step j is repeated by crashes in step j and in the steps "
                  "after it (j..n), not by the ones before it"),
    (_top_after_only, "count attempts, interrupted ones included: the crash inside step j "
                      "itself also sends the run back through step j"),
    (_clean, "without checkpoints, every crash sends the run back to its first step: the "
             "steps before it run again"),
    (_own_crashes, "that is the cost resumed from checkpoints: without them, a crash in a "
                   "later step also sends the run back through step j"),
)
_RESUMED_MISTAKES = (
    (_clean, "a crash repeats the step it interrupted: with crash chance q, a step takes "
             "1 / (1 - q) attempts on average, not one"),
    (lambda steps: sum(c * (1 + q) for c, q in steps),
     "1 + q is only the first two terms: the repeat can crash too. Sum the series, or think "
     "of the average number of tries until the first success"),
    (lambda steps: sum(c / q for c, q in steps if q) + sum(c for c, q in steps if not q),
     "q is the chance an attempt crashes; the chance it gets through is 1 - q"),
)


def _show_steps(steps):
    return "[" + ", ".join(f"({c:g}, {q:g})" for c, q in steps) + "]"


def _pair(expected_cost, steps):
    shown = f"expected_cost({_show_steps(steps)})"
    got = call(expected_cost, "expected_cost", shown, [tuple(s) for s in steps])
    try:                                 # a tuple, a list, a numpy array of two: all fine
        pair = None if isinstance(got, (dict, str, bytes)) else list(got)
    except TypeError:
        pair = None
    if pair is None or len(pair) != 2 or not all(_number(x) for x in pair):
        raise Fail(f"{shown} returned {got!r}; expected a pair of finite numbers",
                   "return (from_the_top, resumed), two floats, in that order")
    return shown, float(pair[0]), float(pair[1])


def _judge(expected_cost, steps, which=("from the top", "resumed")):
    shown, top, resumed = _pair(expected_cost, steps)
    want = dict(zip(("from the top", "resumed"), reference_cost(steps)))
    got = {"from the top": top, "resumed": resumed}
    for part in which:
        if close(got[part], want[part]):
            continue
        other = "resumed" if part == "from the top" else "from the top"
        if close(got[part], want[other]) and close(got[other], want[part]):
            raise Fail(f"{shown} returned ({top:g}, {resumed:g}): the two are the wrong way "
                       "round", "return (from_the_top, resumed): the run without "
                       "checkpoints first")
        mistakes = _TOP_MISTAKES if part == "from the top" else _RESUMED_MISTAKES
        hint = next((h for f, h in mistakes if close(got[part], f(steps))), "")
        which_number = ("its first number, the average cost restarted from the top"
                        if part == "from the top" else
                        "its second number, the average cost resumed from checkpoints")
        raise Fail(f"{shown} returned ({top!r}, {resumed!r}); {which_number}, is not what "
                   "such runs cost", hint)


def random_steps(draw, n, zeros=True):
    """n steps (cost, q): costs with two decimals, crash chances with three; with `zeros`,
    some steps that cannot crash and some that cost nothing."""
    steps = []
    for _ in range(n):
        cost = round(draw.uniform(0.1, 30), 2)
        q = round(draw.uniform(0.01, 0.3), 3)
        if zeros and draw.random() < 0.2:
            q = 0.0
        elif zeros and draw.random() < 0.1:
            cost = 0.0
        steps.append((cost, q))
    if all(q == 0 for _, q in steps):                  # at least one step that can crash
        steps[draw.randrange(n)] = (round(draw.uniform(0.1, 30), 2),
                                    round(draw.uniform(0.01, 0.3), 3))
    return steps


@q1.test("no crashes (every q is 0): both ways, one clean run",
         hint="with q = 0 no step is ever repeated")
def _(expected_cost, draw):
    for n in (1, draw.randint(2, 4), draw.randint(5, 12)):
        _judge(expected_cost, [(round(draw.uniform(0.1, 30), 2), 0.0) for _ in range(n)])


@q1.test("one step: restarting from the top and resuming are the same thing",
         hint="a one-step run's only crash is in that step: both ways repeat just it, "
              "until an attempt gets through")
def _(expected_cost, draw):
    for _ in range(3):
        _judge(expected_cost, [(round(draw.uniform(0.1, 30), 2), round(draw.uniform(0.01, 0.5), 3))])


@q1.test("resumed from checkpoints: each step is repeated by its own crashes only",
         hint="with a checkpoint after every step, a crash costs one more attempt of the "
              "step it interrupted; the steps are independent of each other")
def _(expected_cost, draw):
    for _ in range(4):
        _judge(expected_cost, random_steps(draw, draw.randint(2, 9)), which=("resumed",))


@q1.test("from the top: each step is sent back by crashes in it or in any step after it",
         hint="for step j, the run gets past it for good only when j and every step after "
              "it get through in one go; steps have different costs and crash chances")
def _(expected_cost, draw):
    for _ in range(4):
        _judge(expected_cost, random_steps(draw, draw.randint(2, 9)), which=("from the top",))


# q2 · break_even_steps ----------------------------------------------------------------------
q2 = EXERCISE.question("q2", "the break-even run length", answers=["break_even_steps"])
CALL_LIMIT = 3.0          # seconds one call of break_even_steps may take


def _rate(w, q):
    """Crashes per hour that give a step of w seconds the crash chance q."""
    return -math.log1p(-q) * costs.HOUR / w


def reference_break_even(w, q, h):
    """`costs.break_even_steps` for n equal steps worth w, crash chance q, checkpoint h."""
    return costs.break_even_steps(w, _rate(w, q), h, step_dollars=0.0,
                                  worker_dollars_per_hour=A_DOLLAR_A_SECOND)


def balance(w, q, h, n):
    """(saved, spent) per run of n equal steps, in the unit of w and h."""
    b = costs.balance(costs.Workload.uniform("case", n, w), _rate(w, q), h,
                      worker_dollars_per_hour=A_DOLLAR_A_SECOND)
    return b.saved, b.spent


def rule_of_thumb(w, q, h, minus_one=True):
    """The fewest n with h < w*q*(n-1)/2 (or, with minus_one=False, the off-by-one n/2)."""
    if q == 0:
        return None
    n = math.floor(2 * h / (w * q)) + (2 if minus_one else 1)
    return max(n, 1)


def _clear_cut(w, q, h, n):
    """n pays and n - 1 does not, each by a margin no way of summing can blur (a closed
    form for the re-spent sum loses up to about 1e-7 of it to cancellation)."""
    saved, spent = balance(w, q, h, n)
    before = balance(w, q, h, n - 1)
    return saved > spent * (1 + 1e-5) and before[0] < before[1] * (1 - 1e-5)


def rare_cases(draw, count=4):
    """(w, q, h) with rare crashes (q*n <= 1%): the rule of thumb with n - 1 is the answer,
    the off-by-one version with n is not."""
    out = []
    while len(out) < count:
        w = round(draw.uniform(0.5, 20), 2)
        q = float(f"{10 ** draw.uniform(-5, -3.3):.2g}")
        target = draw.randint(4, 60)
        h = float(f"{w * q * (target - 2 + draw.uniform(0.2, 0.8)) / 2:.4g}")
        n = reference_break_even(w, q, h)
        if (n is not None and n * q <= 0.01 and n == rule_of_thumb(w, q, h)
                and n != rule_of_thumb(w, q, h, minus_one=False) and _clear_cut(w, q, h, n)):
            out.append((w, q, h))
    return out


def frequent_cases(draw, count=4):
    """(w, q, h) with crashes frequent enough (q*n well above 1%) that the rule of thumb,
    made for rare crashes, asks for more steps than the exact answer."""
    out = []
    while len(out) < count:
        w = round(draw.uniform(0.5, 20), 2)
        q = round(draw.uniform(0.03, 0.25), 3)
        h = float(f"{w * 10 ** draw.uniform(-1.5, 0.7):.4g}")
        n = reference_break_even(w, q, h)
        if (n is not None and 3 <= n <= 80 and n != rule_of_thumb(w, q, h)
                and n != rule_of_thumb(w, q, h, minus_one=False) and _clear_cut(w, q, h, n)):
            out.append((w, q, h))
    return out


def _steps_answer(break_even_steps, w, q, h):
    shown = f"break_even_steps(w={w:g}, q={q:g}, h={h:g})"
    n = call(break_even_steps, "break_even_steps", shown, w, q, h, limit=CALL_LIMIT,
             none_ok=True)                       # None is an answer here
    if n is None:
        return shown, None
    if isinstance(n, float) and n.is_integer():
        raise Fail(f"{shown} returned the float {n!r}; a number of steps is an int",
                   "return int(n)")
    if isinstance(n, int) and type(n) is not int and not isinstance(n, bool):
        plain(n, shown)                          # an int of its own class: refused, named
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise Fail(f"{shown} returned {n!r}; expected a whole number of steps (an int, at "
                   "least 1) or None", "return the run length n as an int")
    return shown, int(n)


def _judge_steps(break_even_steps, w, q, h):
    shown, n = _steps_answer(break_even_steps, w, q, h)
    want = reference_break_even(w, q, h)
    if n == want:
        return
    if want is None:
        raise Fail(f"{shown} returned {n}; with these values, does any run length pay?",
                   "with no crash to save, checkpoints only cost: no run length pays, so "
                   "the answer is None")
    if n is None:
        raise Fail(f"{shown} returned None, as if no run length paid",
                   "count n up from 1 until the checkpoints cost less than they save")
    if n > 10 * want + 100:                      # the cases' answers are below a hundred
        raise Fail(f"{shown} returned {n}, but far fewer steps already pay",
                   "stop at the first n that pays")
    saved, spent = balance(w, q, h, n)
    if saved <= spent:
        if n == 1:
            hint = ("a one-step run never pays: its only crash costs both ways the same "
                    "step, so checkpoints save nothing")
        elif n == rule_of_thumb(w, q, h, minus_one=False):
            hint = ("one step short: the average crash throws away (n - 1) / 2 finished "
                    "steps, not n / 2 (the step it interrupts is lost either way)")
        elif n == 2 and h > 0:
            hint = "checkpoints are not free: n steps write n checkpoints, n * h per run"
        else:
            hint = ("compare the two costs of q1 for n equal steps: the difference is what "
                    "checkpoints save; they pay when it is more than n * h")
        what = "nothing" if saved == 0 else "less than that"
        raise Fail(f"{shown} returned {n}, but at n = {n} the checkpoints cost "
                   f"{n} * h = {spent:.6g} per run and save {what}", hint)
    fewer = balance(w, q, h, n - 1) if n > 1 else (0.0, 0.0)
    if fewer[0] > fewer[1]:
        hint = "stop at the first n that pays"
        if n in (rule_of_thumb(w, q, h), rule_of_thumb(w, q, h, minus_one=False)) and q * n > 0.01:
            hint = (f"the rule of thumb is made for rare crashes (q * n much less than 1; "
                    f"here q * n is {q * n:.2g}). Compute exactly what a crash re-spends both "
                    "ways (your q1) and compare it with n * h")
        raise Fail(f"{shown} returned {n}, but n = {n - 1} already pays: its checkpoints "
                   f"cost {fewer[1]:.6g} per run and save more than that", hint)
    raise Fail(f"{shown} returned {n}; that is not the fewest steps that pay")


@q2.test("rare crashes: the fewest equal steps whose checkpoints cost less than they save",
         hint="checkpoints pay when what a restart from the top spends beyond a resume is "
              "more than n * h; at these crash rates the lesson's rule of thumb gives it")
def _(break_even_steps, draw):
    for w, q, h in rare_cases(draw):
        _judge_steps(break_even_steps, w, q, h)


@q2.test("frequent crashes: the same question, where the rule of thumb is not the answer",
         hint="the rule of thumb only holds for rare crashes; compare the exact costs of n "
              "steps both ways (q1) with n * h")
def _(break_even_steps, draw):
    for w, q, h in frequent_cases(draw):
        _judge_steps(break_even_steps, w, q, h)


@q2.test("free checkpoints (h = 0): the shortest run that has anything to save",
         hint="with h = 0 checkpoints pay as soon as they save anything at all; a one-step "
              "run saves nothing")
def _(break_even_steps, draw):
    for _ in range(2):
        _judge_steps(break_even_steps, round(draw.uniform(0.5, 20), 2),
                     round(draw.uniform(0.01, 0.3), 3), 0.0)


@q2.test("no crashes (q = 0): no run length pays, so None, at once; with crashes, some does",
         hint="with q = 0 nothing is ever re-spent: decide that before counting n up, or "
              "the count never ends")
def _(break_even_steps, draw):
    w, h = round(draw.uniform(0.5, 20), 2), float(f"{draw.uniform(0.001, 2):.3g}")
    for q, cost in ((0.0, h), (0.0, 0.0)):
        _judge_steps(break_even_steps, w, q, cost)
    q = round(draw.uniform(0.05, 0.3), 3)         # with crashes, a run of two pays: an
    h = float(f"{w * q * draw.uniform(0.05, 0.3):.3g}")   # answer of None alone fails
    _judge_steps(break_even_steps, w, q, h)


def exact_saving(w, q, n) -> Fraction:
    """What checkpoints save on a run of n equal steps, exactly: from the top, step j is
    tried 1 / (1-q)^(n-j+1) times on average; resumed, 1 / (1-q) times."""
    p = 1 - Fraction(q)
    top = sum(Fraction(w) / p ** k for k in range(1, n + 1))
    return top - n * Fraction(w) / p


def boundary_cases(draw, count=3):
    """(w, q, h, n): n equal steps whose checkpoints cost exactly what they save, n * h.
    q is 1/2 or 3/4 and w a whole number, so the saving of every run length is a whole
    number (or a half or a quarter) and any way of adding it up in floats is exact."""
    out = []
    while len(out) < count:
        q = draw.choice([0.5, 0.75])
        n = draw.choice([2, 4, 8] if q == 0.5 else [2, 3, 4, 6])
        w = draw.randint(1, 20)
        h = exact_saving(w, q, n) / n
        if h.denominator in (1, 2, 4) and (q, n) not in [(c[1], c[3]) for c in out]:
            out.append((float(w), q, float(h), n))
    return out


@q2.test("on the boundary: a run length whose checkpoints cost exactly what they save does "
         "not pay yet",
         hint="checkpoints pay when they save more than they cost: a run length that only "
              "breaks even does not")
def _(break_even_steps, draw):
    for w, q, h, n in boundary_cases(draw):
        shown, got = _steps_answer(break_even_steps, w, q, h)
        if got == n + 1:
            continue
        if got == n:
            raise Fail(f"{shown} returned {n}; at n = {n} the checkpoints cost {n} * h = "
                       f"{n * h:g} per run and save exactly {float(exact_saving(w, q, n)):g}: "
                       "they break even, they do not pay yet")
        _judge_steps(break_even_steps, w, q, h)           # the usual feedback for the rest
        raise Fail(f"{shown} returned {got}; that is not the fewest steps that pay")


# q3 · reasons_for ---------------------------------------------------------------------------
q3 = EXERCISE.question("q3", "when not to bother", answers=["reasons_for"])
REASONS = costs.REASONS

_TOOLS = ("fetch order", "look up customer", "read ticket", "search docs", "resize image",
          "parse invoice", "load profile", "query catalog", "check stock", "render page")
_MODEL = ("summarise", "draft reply", "classify", "plan", "extract fields", "translate")
_HARMFUL = (("issue refund", 5, 200), ("charge card", 5, 300), ("email customer", 0.5, 3),
            ("ship parcel", 10, 60), ("post to social", 1, 20), ("page on-call", 1, 15))
_HARMLESS = ("overwrite file", "upsert row", "post internal note", "set status",
             "write cache", "tag ticket")
_WAITS = ("wait for manager", "wait for signature", "wait for payment", "wait for carrier",
          "wait for approval", "sleep until morning")


def _step(name, seconds, dollars=0.0, harm=0.0, waits=False):
    return {"name": name, "seconds": seconds, "dollars": dollars, "harm": harm, "waits": waits}


def reference_reasons(steps, long_seconds, long_dollars):
    """The reasons `costs.reasons` finds for these steps, as a set."""
    workload = costs.Workload("case", tuple(costs.StepCost(**s) for s in steps))
    return {r for r, yes in costs.reasons(workload, long_seconds, long_dollars).items() if yes}


def _split(draw, total, parts, digits=3):
    """`parts` positive numbers, rounded to `digits`, adding up to about `total`."""
    weights = [draw.uniform(0.5, 1.5) for _ in range(parts)]
    scale = total / sum(weights)
    return [max(round(w * scale, digits), 10 ** -digits) for w in weights]


def workload(draw, long_seconds, long_dollars, long_by=None, irreversible=False,
             waits=False, many=False, harm=None):
    """Steps with exactly the reasons asked for. long_by: None, "seconds" or "dollars".
    harm: what the harmful step's duplicate costs, if irreversible (None: drawn from the
    range of its kind of effect).
    The sums keep 20% from the line, so no way of adding them can cross it, and stay on
    the same side of the lesson's line (60 s, $1): only the test about the line tells an
    answer that uses the one passed from one that uses the lesson's."""
    low_s, high_s = sorted((long_seconds, costs.LONG_SECONDS))
    low_d, high_d = sorted((long_dollars, costs.LONG_DOLLARS))
    seconds = (high_s * draw.uniform(1.3, 4) if long_by == "seconds"
               else low_s * draw.uniform(0.1, 0.75))
    dollars = (high_d * draw.uniform(1.3, 4) if long_by == "dollars"
               else low_d * draw.uniform(0, 0.75))
    tag = draw.randint(100, 999)
    if many:                                       # many small steps, no model call
        count, tool = draw.randint(150, 1200), draw.choice(_TOOLS)
        each = round(seconds / count, 5)
        steps = [_step(f"{tool} {tag}-{i + 1}", each) for i in range(count)]
        if long_by == "dollars":
            steps.append(_step(f"{draw.choice(_MODEL)} {tag}", 2.0, round(dollars, 4)))
    else:
        calls = draw.randint(1, 4)
        tools = draw.randint(1, 4)
        model_seconds = seconds * draw.uniform(0.3, 0.7)
        steps = [_step(f"{draw.choice(_TOOLS)} {tag}-{i + 1}", s)
                 for i, s in enumerate(_split(draw, seconds - model_seconds, tools))]
        spend = _split(draw, dollars, calls, digits=4) if dollars >= 0.001 * calls else [0.0] * calls
        steps += [_step(f"{draw.choice(_MODEL)} {tag}-{i + 1}", s, d)
                  for i, (s, d) in enumerate(zip(_split(draw, model_seconds, calls), spend))]
        draw.shuffle(steps)
    for _ in range(draw.randint(1, 2)):            # effects that are harmless to repeat
        steps.insert(draw.randint(0, len(steps)), _step(f"{draw.choice(_HARMLESS)} {tag}",
                                                        round(draw.uniform(0.05, 0.5), 3)))
    if irreversible:
        name, low, high = draw.choice(_HARMFUL)
        harmful = _step(f"{name} {tag}", round(draw.uniform(0.1, 1), 3),
                        harm=round(draw.uniform(low, high), 2) if harm is None else harm)
        steps.insert(draw.randint(1, len(steps)), harmful)
    if waits:                                      # far longer than the line, and no work
        wait = round(high_s * draw.uniform(10, 2000))
        steps.insert(draw.randint(1, len(steps)), _step(f"{draw.choice(_WAITS)} {tag}", float(wait),
                                                        waits=True))
    return steps


def lines(draw):
    """A line for "long": seconds and dollars, near the lesson's 60 s and $1."""
    return float(draw.randint(20, 300)), round(draw.uniform(0.5, 5), 2)


def _show_workload(steps):
    """The steps, as the feedback shows them: one line per step, runs of alike steps folded."""
    def text(s):
        parts = [f"{s['seconds']:g} s"]
        if s["dollars"]:
            parts.append(f"${s['dollars']:g}")
        if s["harm"]:
            parts.append(f"harm {s['harm']:g}")
        if s["waits"]:
            parts.append("waits")
        return ", ".join(parts)

    out, i = [], 0
    while i < len(steps):
        j = i
        while j + 1 < len(steps) and text(steps[j + 1]) == text(steps[i]) \
                and not steps[i]["harm"] and not steps[i]["waits"]:
            j += 1
        if j - i >= 2:
            out.append(f"  {j - i + 1} steps {steps[i]['name']!r} … {steps[j]['name']!r}: "
                       f"{text(steps[i])} each")
        else:
            out.extend(f"  {steps[k]['name']!r}: {text(steps[k])}" for k in range(i, j + 1))
        i = j + 1
    return "\n".join(out)


def _reasons_answer(reasons_for, steps, long_seconds, long_dollars):
    shown = f"reasons_for(steps, {long_seconds:g}, {long_dollars:g})"
    got = plain(call(reasons_for, "reasons_for", shown, [dict(s) for s in steps], long_seconds,
                     long_dollars), shown, sets=True)    # a reason that equals every reason: no
    if isinstance(got, dict):                    # {"long": True, ...}, like costs.reasons
        named = {r for r, yes in got.items() if yes}
    elif isinstance(got, (set, frozenset, list, tuple)):
        named = set(got)
    elif isinstance(got, str):
        raise Fail(f"{shown} returned the string {got!r}; expected a set of reasons",
                   'return a set, e.g. {"irreversible"}; set() for none')
    else:
        raise Fail(f"{shown} returned {got!r}; expected a set of reasons",
                   'return a set of reason names, e.g. {"long", "waits"}; set() for none')
    unknown = named - set(REASONS)
    if unknown:
        raise Fail(f"{shown} named {sorted(unknown)}, which are not among the reasons "
                   f"{list(REASONS)}", "spell the reasons as the question does")
    return shown, named


def _long(steps, long_seconds, long_dollars, count_waits=False):
    work = math.fsum(s["seconds"] for s in steps if count_waits or not s["waits"])
    return work > long_seconds or math.fsum(s["dollars"] for s in steps) > long_dollars


def _hint(steps, long_seconds, long_dollars, said, want):
    """Where to look, from the reasons that differ (never which set is right)."""
    hints = []
    work = math.fsum(s["seconds"] for s in steps if not s["waits"])
    on_the_line = work == long_seconds or math.fsum(s["dollars"] for s in steps) == long_dollars
    if "long" in said - want and on_the_line:
        hints.append("this run costs exactly the line, and long is more than the line")
    elif "long" in said ^ want:
        if "long" in said and _long(steps, long_seconds, long_dollars, count_waits=True):
            hints.append("long is about the work a redo from the top repeats: a wait's seconds "
                         "are not work (no worker runs while a run waits)")
        if (long_seconds, long_dollars) != (costs.LONG_SECONDS, costs.LONG_DOLLARS) \
                and _long(steps, costs.LONG_SECONDS, costs.LONG_DOLLARS) == ("long" in said):
            hints.append("compare with the line the check passes (long_seconds, long_dollars), "
                         f"not the lesson's {costs.LONG_SECONDS:g} s and ${costs.LONG_DOLLARS:g}")
        if "long" in said and len(steps) > 20 and not hints:
            hints.append("many steps are not long by themselves: add up their seconds")
        if not hints:
            hints.append("long is more than long_seconds of work or more than long_dollars of "
                         "calls: add each up over the steps, and compare each with its line")
    if "irreversible" in said - want:
        hints.append("only a step whose duplicate does harm (harm > 0) counts; one that is "
                     "harmless to repeat does not, whatever it costs")
    if "irreversible" in want - said:
        hints.append("a single step whose duplicate does harm (harm > 0) is enough, however "
                     "little that harm is")
    if "waits" in said ^ want:
        hints.append("a run waits when one of its steps waits on a person or a system "
                     "(waits=True)")
    return "; and ".join(hints[:2])


def _judge_reasons(reasons_for, steps, long_seconds, long_dollars):
    shown, said = _reasons_answer(reasons_for, steps, long_seconds, long_dollars)
    want = reference_reasons(steps, long_seconds, long_dollars)
    if said != want:
        named = "{" + ", ".join(repr(r) for r in REASONS if r in said) + "}" if said else "set()"
        raise Fail(f"{shown} returned {named} for a workload of {len(steps)} steps "
                   f"(long means more than {long_seconds:g} s of work or ${long_dollars:g}):\n"
                   + _show_workload(steps),
                   _hint(steps, long_seconds, long_dollars, said, want))


# The cases of each test, drawn by a function of the test's draw (the tests judge them in
# order), so that what each test reaches on every seed can be shown without an answer.
def no_reason_cases(draw) -> list:
    """Two workloads with no reason (one of many small steps), then the second again with
    one of its harmless effects swapped for a harmful one: an answer that finds no reason
    anywhere fails there too. Each case is (steps, long_seconds, long_dollars)."""
    cases = []
    for many in (False, True):
        line = lines(draw)
        steps = workload(draw, *line, many=many)
        cases.append((steps, *line))
    swapped = [dict(s) for s in steps]
    i = draw.choice([i for i, s in enumerate(swapped) if s["name"].startswith(_HARMLESS)])
    name, low, high = draw.choice(_HARMFUL)
    swapped[i] = _step(f"{name} {swapped[i]['name'].split()[-1]}", swapped[i]["seconds"],
                       harm=round(draw.uniform(low, high), 2))
    cases.append((swapped, *line))
    return cases


def long_cases(draw) -> list:
    """Long by seconds in a few steps, by seconds in many small ones, and by dollars."""
    cases = []
    for long_by, many in (("seconds", False), ("seconds", True), ("dollars", False)):
        line = lines(draw)
        cases.append((workload(draw, *line, long_by=long_by, many=many), *line))
    return cases


def irreversible_cases(draw) -> list:
    """One harmful step among harmless ones: first a duplicate that costs a few cents (harm
    $0.01-0.10, far below every line and every ordinary effect's harm, so an answer that
    wants harm above some threshold, alone or added up, fails on every run), then two of
    ordinary harm."""
    cases = []
    for harm in (round(draw.uniform(0.01, 0.1), 2), None, None):
        line = lines(draw)
        cases.append((workload(draw, *line, irreversible=True, harm=harm), *line))
    return cases


def waits_cases(draw) -> list:
    cases = []
    for _ in range(2):
        line = lines(draw)
        cases.append((workload(draw, *line, waits=True), *line))
    return cases


def several_cases(draw) -> list:
    cases = []
    for long_by, irreversible, waits in (("seconds", True, False), (None, True, True),
                                         ("dollars", False, True), ("seconds", True, True)):
        line = lines(draw)
        cases.append((workload(draw, *line, long_by=long_by, irreversible=irreversible,
                               waits=waits), *line))
    return cases


def line_cases(draw) -> list:
    """Four workloads, each on the other side of the line passed than of the lesson's."""
    cases = [  # (line seconds, line dollars, work seconds, dollars): each crosses one line only
        (float(draw.randint(10, 40)), 1.0, None, None),         # long below 60 s
        (float(draw.randint(120, 600)), 1.0, "over 60", None),  # not long above 60 s
        (60.0, round(draw.uniform(0.1, 0.6), 2), None, "under 1"),   # long below $1
        (60.0, round(draw.uniform(2, 6), 2), None, "over 1"),        # not long above $1
    ]
    out = []
    for long_seconds, long_dollars, seconds_kind, dollars_kind in cases:
        tag = draw.randint(100, 999)
        if seconds_kind is None and dollars_kind is None:       # work between the line and 60
            work = draw.uniform(long_seconds * 1.3, 55)
        elif seconds_kind == "over 60":                         # work between 60 and the line
            work = draw.uniform(65, long_seconds * 0.8)
        else:
            work = draw.uniform(5, 40)
        dollars = 0.0
        if dollars_kind == "under 1":
            dollars = draw.uniform(long_dollars * 1.3, 0.95)
        elif dollars_kind == "over 1":
            dollars = draw.uniform(1.1, long_dollars * 0.8)
        parts = draw.randint(2, 5)
        steps = [_step(f"{draw.choice(_TOOLS)} {tag}-{i + 1}", s)
                 for i, s in enumerate(_split(draw, work * 0.6, parts))]
        steps.append(_step(f"{draw.choice(_MODEL)} {tag}", round(work * 0.4, 3), round(dollars, 4)))
        out.append((steps, long_seconds, long_dollars))
    return out


def on_the_line_cases(draw) -> list:
    """A workload of exactly the line's seconds of work, then one of exactly its dollars."""
    cases = []
    for on in ("seconds", "dollars"):
        # Whole seconds and quarters of a dollar, so every sum is exact; lines at or below
        # the lesson's 60 s and $1, so this test is about the boundary alone (the test
        # above is about which line).
        line_seconds = float(draw.randint(20, 60))
        line_dollars = draw.randint(2, 4) / 4
        tag = draw.randint(100, 999)
        if on == "seconds":
            parts = draw.randint(2, 5)
            cuts = sorted(draw.sample(range(1, int(line_seconds)), parts - 1))
            seconds = [b - a for a, b in zip([0] + cuts, cuts + [int(line_seconds)])]
            dollars = [0.0] * (parts - 1) + [line_dollars / 4]
        else:
            quarters = int(line_dollars * 4)
            calls = draw.randint(2, min(4, quarters))
            cuts = sorted(draw.sample(range(1, quarters), calls - 1))
            dollars = [(b - a) / 4 for a, b in zip([0] + cuts, cuts + [quarters])]
            seconds = [float(draw.randint(1, int(line_seconds / 2 / calls) or 1))
                       for _ in range(calls)]
        steps = [_step(f"{draw.choice(_MODEL if d else _TOOLS)} {tag}-{i + 1}", float(t), d)
                 for i, (t, d) in enumerate(zip(seconds, dollars))]
        cases.append((steps, line_seconds, line_dollars))
    return cases


def _judge_all(reasons_for, cases):
    for steps, long_seconds, long_dollars in cases:
        _judge_reasons(reasons_for, steps, long_seconds, long_dollars)


@q3.test("no reason: short, cheap runs whose every step is harmless to repeat",
         hint="none of the three reasons holds: the answer is an empty set")
def _(reasons_for, draw):
    _judge_all(reasons_for, no_reason_cases(draw))


@q3.test("long: more work than the line in seconds, or more dollars than the line in calls",
         hint="long is about what a redo from the top costs: the seconds of work and the "
              "dollars, each added up over the steps")
def _(reasons_for, draw):
    _judge_all(reasons_for, long_cases(draw))


@q3.test("irreversible: a step whose duplicate would do harm, however little, and only then",
         hint="look at each step's harm: more than 0 means a second run of it does damage")
def _(reasons_for, draw):
    _judge_all(reasons_for, irreversible_cases(draw))


@q3.test("waits: a run that waits on a person or a system, however little work it does",
         hint="a step with waits=True makes the run wait; its seconds are waiting, not work")
def _(reasons_for, draw):
    _judge_all(reasons_for, waits_cases(draw))


@q3.test("several reasons at once: every one that holds is named",
         hint="check each of the three reasons on its own; any number of them can hold")
def _(reasons_for, draw):
    _judge_all(reasons_for, several_cases(draw))


@q3.test("long is judged against the line the check passes, not a fixed 60 s or $1",
         hint="use the long_seconds and long_dollars arguments")
def _(reasons_for, draw):
    _judge_all(reasons_for, line_cases(draw))


@q3.test("on the line: exactly long_seconds of work, or exactly long_dollars, is not long",
         hint="long is more than the line: a run that costs exactly the line is not long")
def _(reasons_for, draw):
    _judge_all(reasons_for, on_the_line_cases(draw))
