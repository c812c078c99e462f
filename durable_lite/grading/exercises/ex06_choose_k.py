"""Exercise 06: choose how many attempts each step gets, then prove it by simulation.

q1 checks the learner's smallest_k against the per-step retry formula on cases drawn for
every check (so a table of answers cannot pass). q2 runs the learner's plan workflow against
a flaky tool whose failures the check controls: first one run at a time, then hundreds of
runs on a FakeClock (backoff is free).

The properties a right answer has, each judged by the test that names it, and how the cases
vary it (tests/test_grading_properties_01_07.py and tests/test_grading_round4_06_08.py have,
for each, an answer wrong in that property alone, and it fails):

q1 smallest_k(p, n, target)  (drawn cases; the grader decides each answer exactly, with
fractions, wherever floating point could decide it: `reaches`)
  - the k it returns reaches the target, and is an int >= 1 (read as a plain int: a numpy
    integer is one, an int subclass is judged by its value, not its comparisons). Ten
    clear-cut cases (the exact real-valued k well away from a whole number, so rounding
    cannot decide them): one met by a single attempt, one that needs more than 10 attempts
    and one more than 20 on every run (a search that gives up at 10 or 20 fails), the rest
    drawn freely;
  - it is the smallest: k - 1 misses the target (the restart formula fails), on those cases;
  - the boundary, "at least": cases where k attempts reach the target exactly (exact binary
    fractions, p = 1 - 2**-a, whose targets print as the decimals they are: every way of
    computing, in floats, fractions or decimals, gives the same k), so `>` in place of `>=`
    fails on every run;
  - it is judged by the formula, not by a solution of it: near the boundary with a p floats
    cannot hold exactly (three decimals, not a binary fraction), cases whose target is the
    formula's own value at k as floats compute it (k is enough: judged with the boundary)
    and cases one to three units in the last place above it (k is not: judged with "reaches
    the target"). Each is kept only if every way a right answer counts agrees on its k: the
    formula as written, with each power one unit in the last place off either way (libm's,
    numpy's), as products, through exp and log1p, and exactly for the floats given and for
    the decimals they print as. Both kinds are drawn, on every run, until each usual closed
    form rounded up (the n-th root by ** or exp/log, then log, log2, log10, log with a base
    or log1p) lands on the wrong side of one of them, so a k solved for with logarithms and
    not checked against the formula fails on every run, as does one nudged by a tolerance
    (it fails the cases just past the boundary) or a comparison with the root of the target;
  - a tool that never fails (p = 1) needs one attempt.
q2 plan(ctx, folder, n, k)  (drawn n, k, failing step, failure rate, seeds)
  - n steps named task-1 ... task-n, each calling flaky_tool once with its own name;
  - each step gets k attempts of its own: a failure does not re-run earlier steps, and a
    step that fails k times fails the run (caught StepFailed fails);
  - the retries are the engine's: the history records each attempt of a step that failed
    and then worked (a Python loop inside one step, which the engine cannot see, count or
    space out, fails);
  - 300 simulated runs finish as often, and cost as many tool calls, as the formula says,
    for the k the formula needs and for k = 1.
"""

import math
import numbers
from fractions import Fraction

from ... import examples
from ...clock import FakeClock, SequentialIds
from ...engine import Engine
from ...lab.reliability import DURABLE, expected_executions, per_step_retry_rate
from ...store import MemoryStore
from ..checks import Exercise, Fail, NotAttempted
from ..harness import needs_callable, needs_workflow, scratch

EXERCISE = Exercise("06_choose_k", "How many attempts per step?",
                    lesson="notebooks/06_plans_and_reliability_math.ipynb")


def exact_rate(p, n, k) -> Fraction:
    """(1 - (1-p)**k)**n without any rounding, for p exactly as the float it is."""
    return (1 - (1 - Fraction(p)) ** k) ** n


def reaches(p, n, k, target) -> bool:
    """Do k attempts per step reach the target? Read in floating point where the answer is
    clear-cut, and exactly, with fractions, where rounding could decide it."""
    rate = per_step_retry_rate(p, n, k)
    if abs(rate - target) > 1e-9:
        return rate >= target
    return exact_rate(p, n, k) >= Fraction(target)


def reference_k(p, n, target):
    """The smallest k whose run reaches the target, by counting up."""
    k = 1
    while not reaches(p, n, k, target):
        k += 1
    return k


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "smallest_k", answers=["smallest_k"])

# What the regular cases of every run need, besides cases drawn freely: a single attempt, and
# more attempts than a search that gives up at ten, or at twenty, would ever try.
ONE, MORE_THAN_10, MORE_THAN_20 = range(1, 2), range(11, 21), range(21, 46)


def longest_plan(p, most) -> int:
    """The most steps a case has (at most `most`): p**n stays >= 0.001, a plan that finishes
    now and then on its first try. The restart formula, a common wrong answer, then stops
    counting in well under a second (and fails with a message) instead of running for
    minutes."""
    return max(1, min(most, int(math.log(0.001) / math.log(p))))


def _clear_cut(draw, needs=None) -> tuple:
    """(p, n, target) whose answer is clear-cut: the exact k (a real number) where
    (1 - (1-p)**k)**n meets the target lies well away from a whole number, so rounding it up
    gives the same k as counting, in floating point or not. With `needs`, a k in that range."""
    while True:
        # many attempts come from tools that fail more often than they work
        low, high = (0.05, 0.45) if needs is not None and needs.start > 10 else (0.3, 0.999)
        p = round(draw.uniform(low, high), 3)
        n = draw.randint(1, longest_plan(p, 60))
        target = round(draw.uniform(0.5, 0.9999), 4)
        if needs == ONE:
            target = round(per_step_retry_rate(p, n, 1) * draw.uniform(0.5, 0.99), 4)
        if not 0 < target < 1:
            continue
        exact = math.log(1 - target ** (1 / n)) / math.log(1 - p)
        if abs(exact - round(exact)) < 1e-3:
            continue
        k = reference_k(p, n, target)
        if k <= MORE_THAN_20[-1] and (needs is None or k in needs):      # none needs more
            return p, n, target


def cases(draw, count=10) -> list:
    """(p, n, target) triples, all clear-cut: one met by a single attempt, one that needs more
    than 10 attempts and one more than 20, the rest drawn freely (most need a few)."""
    out = [_clear_cut(draw, needs) for needs in (ONE, MORE_THAN_10, MORE_THAN_20)]
    out += [_clear_cut(draw) for _ in range(count - len(out))]
    draw.shuffle(out)
    return out


# Near the boundary, with a p floats cannot hold exactly. The exact k is a whole number there
# (or a hair above one), and what a closed form gives depends on how its floating-point
# logarithms round; what a count gives does not. --------------------------------------------
def _float_rates(p, n, k):
    """The formula at k as a right answer might compute it in floating point: as written, by
    a product of each power's factors, through exp and log1p, and with each power taken by a
    `**` or pow() that is off by up to one unit in the last place (as libm's and numpy's are)."""
    q = 1 - p
    all_failed = 1.0
    for _ in range(k):
        all_failed *= q
    step, run = 1 - q ** k, 1.0
    for _ in range(n):
        run *= step
    yield from (per_step_retry_rate(p, n, k), (1 - all_failed) ** n, run,
                math.exp(n * math.log1p(-q ** k)))
    for failed in _faithful(Fraction(q) ** k):
        yield from _faithful(Fraction(1 - failed) ** n)


def _faithful(exact: Fraction) -> set:
    """The floats a power within one unit in the last place of `exact` can return."""
    nearest = float(exact)                              # correctly rounded
    if Fraction(nearest) == exact:
        return {nearest}
    return {nearest, math.nextafter(nearest, math.inf if Fraction(nearest) < exact else -math.inf)}


CLOSE = Fraction(1, 10 ** 30)


def _everyone_agrees(p, n, target, k) -> bool:
    """k is the answer whichever way a right answer counts: every float evaluation of the
    formula says that k reaches the target and k - 1 does not, and so does the exact one,
    for the floats given and for the decimals they print as, by a margin that decimals of 30
    digits also see."""
    if not all(rate >= target for rate in _float_rates(p, n, k)):
        return False
    if any(rate >= target for rate in _float_rates(p, n, k - 1)):
        return False
    for exact_p, exact_target in ((Fraction(p), Fraction(target)),
                                  (Fraction(repr(p)), Fraction(repr(target)))):
        if (1 - (1 - exact_p) ** k) ** n - exact_target < CLOSE:
            return False
        if exact_target - (1 - (1 - exact_p) ** (k - 1)) ** n < CLOSE:
            return False
    return True


# The usual closed forms, each rounded up: the n-th root of the target taken with ** or
# through exp and log, then solved for k with log, log2, log10, log with a base, or log1p.
ROOTS = (lambda target, n: target ** (1 / n), lambda target, n: math.exp(math.log(target) / n))
LOGS = (lambda root, p: math.log(1 - root) / math.log(1 - p),
        lambda root, p: math.log2(1 - root) / math.log2(1 - p),
        lambda root, p: math.log10(1 - root) / math.log10(1 - p),
        lambda root, p: math.log(1 - root, 1 - p),
        lambda root, p: math.log1p(-root) / math.log1p(-p))


def closed_forms(p, n, target) -> list:
    """k as each usual closed form computes it, rounded up (None where one cannot compute)."""
    out = []
    for root in ROOTS:
        for log in LOGS:
            try:
                out.append(math.ceil(log(root(target, n), p)))
            except (ValueError, ZeroDivisionError, OverflowError):
                out.append(None)
    return out


AT, PAST = "at", "past"


def near_boundary(draw, side) -> list:
    """(p, n, target, k) with k the answer, p of three decimals that is not a binary fraction.

    AT: the target is the formula's value at k as floats compute it, so k is enough ("at
    least"). PAST: the target is one to three units in the last place above that, so k is
    not enough and k + 1 is. Cases are kept only where every way of counting agrees on k
    (`_everyone_agrees`), and drawn until each usual closed form rounded up without checking
    its k against the formula lands on the wrong side of at least one of them."""
    kept, fooled = [], set()
    while len(kept) < 3 or len(fooled) < len(ROOTS) * len(LOGS):
        p, k = round(draw.uniform(0.3, 0.99), 3), draw.randint(2, 12)
        n = draw.randint(1, longest_plan(p, 30))
        if Fraction(p) == Fraction(repr(p)):
            continue                                    # 0.375, 0.875: floats hold these exactly
        target = per_step_retry_rate(p, n, k)
        if side == PAST:
            for _ in range(draw.randint(1, 3)):
                target = math.nextafter(target, 1)
            k += 1
        if not 0.5 <= target <= 1 - 1e-7:
            continue
        wrong = {i for i, got in enumerate(closed_forms(p, n, target)) if got != k}
        if (wrong - fooled or len(kept) < 3) and _everyone_agrees(p, n, target, k):
            kept.append((p, n, target, k))
            fooled |= wrong
    draw.shuffle(kept)
    return kept


def _k(smallest_k, p, n, target):
    needs_callable(smallest_k, "smallest_k")
    k = smallest_k(p, n, target)
    if k is None:
        raise Fail(f"smallest_k({p}, {n}, {target}) returned None",
                   "return k (an int); a function without a `return` line returns None")
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        if isinstance(k, float) and k.is_integer():
            raise Fail(f"smallest_k({p}, {n}, {target}) returned the float {k!r}; a number of "
                       "attempts is an int", "return int(k)")
        raise Fail(f"smallest_k({p}, {n}, {target}) returned {k!r}; expected a whole number "
                   "of attempts (an int)")
    # Judged as a plain int (a numpy integer becomes one): an int of a class of the answer's
    # own would compare as its own code says.
    k = int(k)
    if type(k) is not int:
        raise Fail(f"smallest_k({p}, {n}, {target}) returned a {type(k).__name__}; expected a "
                   "plain int", "return a built-in int, not an object of a class of your own")
    if k < 1:
        raise Fail(f"smallest_k({p}, {n}, {target}) returned {k}; every step gets at least one "
                   "attempt, so k >= 1", "k counts attempts: start counting at 1, and round "
                   "a logarithm's answer up, not down")
    return k


# Hints for an answer a hair off near the boundary: what the test saw, and where such a k
# comes from (the case itself says which side it missed).
ROUNDED_DOWN = ("one attempt short, by a hair: with that k the formula comes out just below the "
                "target. Solving for k with logarithms, or comparing with a root of the target "
                "instead of the target, rounds in floating point and can land a hair on the "
                "wrong side of a whole number: judge each k by the formula itself")
ROUNDED_UP = ("one attempt fewer already reaches the target, by the formula itself. Solving for "
              "k with logarithms rounds in floating point: a whole number can come out a hair "
              "above itself, and rounding up then adds one. Judge the k you get by the formula "
              "(does one attempt fewer reach the target too?)")


@q1.test("the k it returns reaches the target: (1 - (1-p)**k)**n >= target",
         hint="a step fails for good only if all k attempts fail, with probability (1-p)**k; "
              "the run needs all n steps to succeed")
def _(smallest_k, draw):
    for p, n, target in cases(draw):
        k = _k(smallest_k, p, n, target)
        rate = per_step_retry_rate(p, n, k)
        if not reaches(p, n, k, target):
            hint = ""
            if reaches(p, n, k + 1, target):
                hint = ("one attempt short: stop at the first k that reaches the target, and "
                        "round a logarithm's answer up (math.ceil), not down")
            raise Fail(f"smallest_k({p}, {n}, {target}) = {k}, but with {k} attempt(s) per step "
                       f"a run finishes only {rate:.5%} of the time, below {target:.3%}", hint)
    for p, n, target, right in near_boundary(draw, PAST):
        k = _k(smallest_k, p, n, target)
        if not reaches(p, n, k, target):
            raise Fail(f"smallest_k({p}, {n}, {target!r}) = {k}, but with {k} attempt(s) per "
                       f"step a run finishes with probability {per_step_retry_rate(p, n, k)!r}, "
                       f"just below the target {target!r}",
                       ROUNDED_DOWN if k == right - 1 else "")


@q1.test("and it is the smallest: with one attempt fewer the run misses the target",
         hint="count k up from 1 and stop at the first k that reaches the target; the "
              "restart formula 1-(1-p**n)**k answers a different question")
def _(smallest_k, draw):
    for p, n, target in cases(draw):
        k = _k(smallest_k, p, n, target)
        if k > 1 and reaches(p, n, k - 1, target):
            raise Fail(f"smallest_k({p}, {n}, {target}) = {k}, but {k - 1} attempt(s) per step "
                       f"already finish {per_step_retry_rate(p, n, k - 1):.5%} of runs")


def boundary_cases() -> list:
    """(p, n, k) where k attempts per step reach the target exactly: the target is
    (1 - (1-p)**k)**n itself. Only exact binary fractions (p = 1 - 2**-a) whose target prints
    as the decimal it is, so the formula is computed without rounding in floating point, in
    fractions and in decimals alike, and only cases where the usual closed forms
    (`closed_forms`) also land exactly on k: whichever way an answer computes, `>` in place
    of `>=` gets k + 1 here, and nothing else makes it miss."""
    out = []
    for a in (1, 2, 3, 4):
        p = 1 - 2.0 ** -a
        for n in (1, 2, 3, 4):
            for k in range(2, 7):
                target = per_step_retry_rate(p, n, k)
                if Fraction(target) != (1 - Fraction(1, 2 ** (a * k))) ** n:
                    continue                           # not exact in floating point
                if Fraction(repr(target)) != Fraction(target):
                    continue                           # nor in the decimals it prints as
                if all(got == k for got in closed_forms(p, n, target)) and \
                        per_step_retry_rate(p, n, k - 1) < target:
                    out.append((p, n, k))
    return out


BOUNDARY = boundary_cases()


@q1.test("on the boundary: a k whose run finishes exactly at the target is enough (\"at least\")",
         hint="the question asks for a probability of at least the target: equal to it is "
              "enough, so compare with >=, not >")
def _(smallest_k, draw):
    for p, n, k in draw.sample(BOUNDARY, 4):
        target = per_step_retry_rate(p, n, k)
        got = _k(smallest_k, p, n, target)
        if got != k:
            raise Fail(f"smallest_k({p}, {n}, {target}) = {got}; with {k} attempts per step a "
                       f"run finishes with probability (1 - {1 - p}**{k})**{n} = {target}, which "
                       f"is exactly the target, so {k} attempts are enough")
    # The cases above passed, so `>=` is right; what is left to miss here is the rounding.
    for p, n, target, k in near_boundary(draw, AT):
        got = _k(smallest_k, p, n, target)
        if got < k:
            raise Fail(f"smallest_k({p}, {n}, {target!r}) = {got}, but with {got} attempt(s) per "
                       f"step a run finishes with probability {per_step_retry_rate(p, n, got)!r}, "
                       f"below the target {target!r}",
                       "with that k the formula falls short of the target: a right k reaches it")
        if got > k:
            raise Fail(f"smallest_k({p}, {n}, {target!r}) = {got}; with {k} attempts per step a "
                       f"run finishes with probability (1 - (1 - {p})**{k})**{n} = {target!r}, "
                       "the target itself as floating point computes it (and no less in exact "
                       f"arithmetic), so {k} attempts are enough",
                       ROUNDED_UP if got == k + 1 else "")


@q1.test("a tool that never fails needs a single attempt",
         hint="with p = 1 the first attempt always works: how many attempts does a step need?")
def _(smallest_k, draw):
    n, target = draw.randint(1, 60), round(draw.uniform(0.5, 0.9999), 4)
    k = _k(smallest_k, 1.0, n, target)
    if k != 1:
        raise Fail(f"smallest_k(1.0, {n}, {target}) = {k}; a tool that never fails needs one attempt")


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "the plan, simulated", answers=["plan"])


def _world(folder, p, fail_first=None, seed=0):
    """The world the learner's flaky_tool calls, with the failure rate this test wants."""
    world = examples.world_at(folder)
    world.tools.failure_rate = 1 - p
    world.tools.fail_first = dict(fail_first or {})
    world.tools.seed = seed
    return world


def _engine(seed=0):
    return Engine(MemoryStore(), FakeClock(), ids=SequentialIds("run"), seed=seed)


def _start(plan, engine, folder, n, k, run_id):
    needs_workflow(plan, "plan")
    run = engine.start(plan, folder, n, k, run_id=run_id)
    if run.error and "NotImplementedError" in run.error:
        raise NotAttempted("plan still raises NotImplementedError")
    return run


def _steps(engine, run_id):
    return [(row["step"], row["attempts"], row["status"]) for row in engine.history(run_id)
            if row["kind"] in ("step", "error")]


@q2.test("a run of n steps named task-1 ... task-n, each calling flaky_tool once when it works",
         hint="one step per task, named task-1 ... task-n, each calling flaky_tool once with "
              "its own name")
def _(plan, draw):
    n, k = draw.randint(3, 8), draw.randint(2, 5)
    with scratch("ex06") as folder:
        world = _world(folder, 1.0)
        engine = _engine()
        run = _start(plan, engine, folder, n, k, "plan-ok")
        if run.status != "completed":
            raise Fail(f"with a tool that never fails the run ended {run.status}: {run.error}")
        names = [name for name, _, _ in _steps(engine, "plan-ok")]
        want = [f"task-{i}" for i in range(1, n + 1)]
        if names != want:
            raise Fail(f"plan(folder, n={n}, k={k}) recorded the steps {names}; expected {want}")
        calls = {name: world.tools.calls(name) for name in want}
        if any(c != 1 for c in calls.values()) or world.tools.calls() != n:
            raise Fail(f"tool calls per task {calls} (and {world.tools.calls()} in all); each "
                       "task's tool should be called once (call flaky_tool with the task's own name)")


@q2.test("each step gets up to k attempts of its own, and a failure does not re-run earlier steps",
         hint="give every step dl.Retry(max_attempts=k): the engine retries that step only")
def _(plan, draw):
    n, k = draw.randint(3, 6), draw.randint(2, 5)
    bad = f"task-{draw.randint(2, n - 1)}"          # a step with others before and after it
    tasks = [f"task-{i}" for i in range(1, n + 1)]
    before, after = tasks[:tasks.index(bad)], tasks[tasks.index(bad) + 1:]
    with scratch("ex06") as folder:          # the step fails k-1 times, then works
        world = _world(folder, 1.0, {bad: k - 1})
        engine = _engine()
        run = _start(plan, engine, folder, n, k, "plan-retried")
        if run.status != "completed":
            raise Fail(f"{bad} failed {k - 1} times and then worked, but with k={k} the run "
                       f"ended {run.status}: {run.error}")
        calls = {task: world.tools.calls(task) for task in tasks}
        if calls != {task: k if task == bad else 1 for task in tasks}:
            raise Fail(f"tool calls per task {calls}; expected {bad} to be tried {k} times and "
                       "every other task once")
    with scratch("ex06") as folder:          # the step fails k times: the run gives up there
        world = _world(folder, 1.0, {bad: k})
        engine = _engine()
        run = _start(plan, engine, folder, n, k, "plan-exhausted")
        calls = {task: world.tools.calls(task) for task in tasks}
        if calls[bad] != k:
            raise Fail(f"{bad} failed on every call and was tried {calls[bad]} times; "
                       f"with k={k} it should be tried exactly {k} times")
        rerun = any(calls[t] != 1 for t in before)
        went_on = any(calls[t] for t in after)
        if run.status == "completed" and not went_on and not rerun:
            raise Fail(f"{bad} failed on all {k} attempts, yet the run ended completed",
                       "let dl.StepFailed propagate: a step that used up its attempts fails the "
                       "run, and that failure is what the formula counts")
        if run.status == "completed" or went_on or rerun:
            raise Fail(f"after {bad} failed {k} times: run {run.status}, tool calls {calls}; "
                       f"expected the run to stop at {bad} without re-running the steps before "
                       "it or starting the ones after it")


@q2.test("the engine does the retrying: the history records every attempt of a step that "
         "failed and then worked",
         hint="retries written as a loop inside the step's function are invisible to the engine: "
              "it cannot record them, count them or wait between them. Give the step a retry "
              "policy instead, as the question says")
def _(plan, draw):
    n, k = draw.randint(3, 6), draw.randint(2, 5)
    bad = f"task-{draw.randint(1, n)}"
    with scratch("ex06") as folder:
        world = _world(folder, 1.0, {bad: k - 1})          # fails k-1 times, then works
        engine = _engine()
        run = _start(plan, engine, folder, n, k, "plan-recorded")
        if run.status != "completed":
            raise Fail(f"{bad} failed {k - 1} times and then worked, but with k={k} the run "
                       f"ended {run.status}: {run.error}")
        calls = world.tools.calls(bad)
        attempts = {name: tries for name, tries, _ in _steps(engine, "plan-recorded")}
    if attempts.get(bad) != calls:
        raise Fail(f"{bad} failed {k - 1} time(s) and then worked: the tool was called {calls} "
                   f"times for it, and the engine's history records {attempts.get(bad)} "
                   "attempt(s) of that step")


RUNS, TARGET = 300, 0.99


def _simulate(plan, p, n, k, seed):
    """(finish rate, tool calls per run, their standard error) over RUNS runs, on a fresh
    world. The calls of one run vary a lot (with k=1 a run stops at its first failure), so
    the cost is judged against its own spread, not a fixed percentage."""
    with scratch("ex06") as folder:
        world = _world(folder, p, seed=seed)
        engine = _engine()
        finished, calls = 0, []
        for i in range(RUNS):
            before = world.tools.calls()
            finished += _start(plan, engine, folder, n, k, f"sim-{i}").status == "completed"
            calls.append(world.tools.calls() - before)
        mean = sum(calls) / RUNS
        spread = math.sqrt(sum((c - mean) ** 2 for c in calls) / (RUNS - 1) / RUNS)
        return finished / RUNS, mean, spread


@q2.test(f"simulated: {RUNS} runs of a plan of flaky steps finish as often as the formula says, "
         "at the formula's cost in tool calls",
         hint="per-step retry is k attempts of each step, not k attempts of the whole run: "
              "a run that starts over spends more calls and finishes less often")
def _(plan, draw):
    p, n = draw.choice([0.8, 0.85, 0.9, 0.95]), draw.randint(6, 12)
    k = reference_k(p, n, TARGET)
    for attempts in (k, 1):
        rate, calls, calls_error = _simulate(plan, p, n, attempts, seed=draw.randint(1, 2**31))
        expected = per_step_retry_rate(p, n, attempts)
        spread = math.sqrt(expected * (1 - expected) / RUNS)
        if abs(rate - expected) > 5 * spread + 1 / RUNS:
            hint = ""                    # the test's own hint: too few runs finished
            if rate > expected:
                hint = (f"more runs finished than {attempts} attempt(s) per step allow: give "
                        "each step exactly max_attempts=k, and let a step that used them all "
                        "fail the run (do not catch dl.StepFailed)")
            raise Fail(f"with k={attempts}, {rate:.1%} of {RUNS} simulated runs finished; the "
                       f"formula says {expected:.1%} (p={p}, n={n})", hint)
        cost = expected_executions(DURABLE, p, n, attempts)
        if abs(calls - cost) > 5 * calls_error + 0.02 * cost:
            raise Fail(f"with k={attempts}, a run made {calls:.2f} tool calls on average; "
                       f"per-step retry should make about {cost:.2f} (p={p}, n={n})")
