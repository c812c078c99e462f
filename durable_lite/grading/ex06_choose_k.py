"""Exercise 06: choose how many attempts each step gets, then prove it by simulation.

q1 checks the learner's smallest_k against the per-step retry formula on a table of
cases: the k it returns must reach the target, and one attempt fewer must not.
q2 runs the learner's plan workflow against a flaky tool whose failures the check
controls: first one run at a time (names, attempts, what a failure leaves alone), then
hundreds of runs on a FakeClock (backoff is free), whose finish rate and tool calls must
match the per-step formula for the k that the formula says is needed.
"""

import math
import numbers

from .. import examples
from ..clock import FakeClock, SequentialIds
from ..engine import Engine
from ..lab.reliability import DURABLE, expected_executions, per_step_retry_rate
from ..store import MemoryStore
from .checks import Exercise, Fail, NotAttempted
from .harness import needs_callable, needs_workflow, scratch

EXERCISE = Exercise("06_choose_k", "How many attempts per step?",
                    lesson="notebooks/06_plans_and_reliability_math.ipynb")


def reference_k(p, n, target):
    """The smallest k with (1 - (1-p)**k)**n >= target, by counting up."""
    k = 1
    while per_step_retry_rate(p, n, k) < target:
        k += 1
    return k


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "smallest_k", answers=["smallest_k"])

CASES = [(0.95, 6, 0.99), (0.9, 10, 0.999), (0.8, 20, 0.95), (0.99, 50, 0.99),
         (0.5, 3, 0.9), (0.7, 12, 0.9999), (0.95, 6, 0.7), (0.999, 4, 0.99)]


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
    if k < 1:
        raise Fail(f"smallest_k({p}, {n}, {target}) returned {k}; every step gets at least one "
                   "attempt, so k >= 1", "k counts attempts: start counting at 1, and round "
                   "a logarithm's answer up, not down")
    return int(k)


@q1.test("the k it returns reaches the target: (1 - (1-p)**k)**n >= target",
         hint="a step fails for good only if all k attempts fail, with probability (1-p)**k; "
              "the run needs all n steps to succeed")
def _(smallest_k):
    for p, n, target in CASES:
        k = _k(smallest_k, p, n, target)
        rate = per_step_retry_rate(p, n, k)
        if rate < target:
            hint = ""
            if per_step_retry_rate(p, n, k + 1) >= target:
                hint = ("one attempt short: stop at the first k that reaches the target, and "
                        "round a logarithm's answer up (math.ceil), not down")
            raise Fail(f"smallest_k({p}, {n}, {target}) = {k}, but with {k} attempt(s) per step "
                       f"a run finishes only {rate:.5%} of the time, below {target:.3%}", hint)


@q1.test("and it is the smallest: with one attempt fewer the run misses the target",
         hint="count k up from 1 and stop at the first k that reaches the target; the "
              "restart formula 1-(1-p**n)**k answers a different question")
def _(smallest_k):
    for p, n, target in CASES:
        k = _k(smallest_k, p, n, target)
        if k > 1 and per_step_retry_rate(p, n, k - 1) >= target:
            raise Fail(f"smallest_k({p}, {n}, {target}) = {k}, but {k - 1} attempt(s) per step "
                       f"already finish {per_step_retry_rate(p, n, k - 1):.5%} of runs")


@q1.test("a tool that never fails needs a single attempt",
         hint="with p = 1 the first attempt always works: k = 1")
def _(smallest_k):
    k = _k(smallest_k, 1.0, 10, 0.999)
    if k != 1:
        raise Fail(f"smallest_k(1.0, 10, 0.999) = {k}; a tool that never fails needs one attempt")


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "the plan, simulated", answers=["plan"])


def _world(folder, p, fail_first=None):
    """The world the learner's flaky_tool calls, with the failure rate this test wants."""
    world = examples.world_at(folder)
    world.tools.failure_rate = 1 - p
    world.tools.fail_first = dict(fail_first or {})
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
         hint='for i in 1..n: ctx.step(dl.Step(f"task-{i}", retry=...), flaky_tool, folder, f"task-{i}")')
def _(plan):
    with scratch("ex06") as folder:
        world = _world(folder, 1.0)
        engine = _engine()
        run = _start(plan, engine, folder, 5, 3, "plan-ok")
        if run.status != "completed":
            raise Fail(f"with a tool that never fails the run ended {run.status}: {run.error}")
        names = [name for name, _, _ in _steps(engine, "plan-ok")]
        want = [f"task-{i}" for i in range(1, 6)]
        if names != want:
            raise Fail(f"the run recorded the steps {names}; expected {want}")
        calls = {name: world.tools.calls(name) for name in want}
        if any(c != 1 for c in calls.values()):
            raise Fail(f"tool calls per task {calls}; each task's tool should be called once "
                       "(call flaky_tool with the task's own name)")


@q2.test("each step gets up to k attempts of its own, and a failure does not re-run earlier steps",
         hint="give every step dl.Retry(max_attempts=k): the engine retries that step only")
def _(plan):
    k = 3
    with scratch("ex06") as folder:          # task-2 fails k-1 times, then works
        world = _world(folder, 1.0, {"task-2": k - 1})
        engine = _engine()
        run = _start(plan, engine, folder, 4, k, "plan-retried")
        if run.status != "completed":
            raise Fail(f"task-2 failed {k - 1} times and then worked, but with k={k} the run "
                       f"ended {run.status}: {run.error}")
        calls = {f"task-{i}": world.tools.calls(f"task-{i}") for i in range(1, 5)}
        if calls != {"task-1": 1, "task-2": k, "task-3": 1, "task-4": 1}:
            raise Fail(f"tool calls per task {calls}; expected task-2 to be tried {k} times and "
                       "every other task once")
    with scratch("ex06") as folder:          # task-2 fails k times: the run gives up there
        world = _world(folder, 1.0, {"task-2": k})
        engine = _engine()
        run = _start(plan, engine, folder, 4, k, "plan-exhausted")
        calls = {f"task-{i}": world.tools.calls(f"task-{i}") for i in range(1, 5)}
        if calls["task-2"] != k:
            raise Fail(f"task-2 failed on every call and was tried {calls['task-2']} times; "
                       f"with k={k} it should be tried exactly {k} times")
        if run.status == "completed" and not calls["task-3"] and calls["task-1"] == 1:
            raise Fail(f"task-2 failed on all {k} attempts, yet the run ended completed",
                       "let dl.StepFailed propagate: a step that used up its attempts fails the "
                       "run, and that failure is what the formula counts")
        if run.status == "completed" or calls["task-3"] or calls["task-1"] != 1:
            raise Fail(f"after task-2 failed {k} times: run {run.status}, tool calls {calls}; "
                       "expected the run to stop at task-2 without re-running task-1 or "
                       "starting task-3")


RUNS = 400
P, N, TARGET = 0.9, 10, 0.99


def _simulate(plan, k):
    """Finish rate and tool calls per run of RUNS runs, on a fresh world."""
    with scratch("ex06") as folder:
        world = _world(folder, P)
        engine = _engine()
        finished = sum(_start(plan, engine, folder, N, k, f"sim-{i}").status == "completed"
                       for i in range(RUNS))
        return finished / RUNS, world.tools.calls() / RUNS


@q2.test(f"simulated: {RUNS} runs at p={P}, n={N} finish as often as the formula says, at the "
         "formula's cost in tool calls",
         hint="per-step retry is k attempts of each step, not k attempts of the whole run: "
              "a run that starts over spends more calls and finishes less often")
def _(plan):
    k = reference_k(P, N, TARGET)
    for attempts in (k, 1):
        rate, calls = _simulate(plan, attempts)
        expected = per_step_retry_rate(P, N, attempts)
        spread = math.sqrt(expected * (1 - expected) / RUNS)
        if abs(rate - expected) > 4 * spread + 1 / RUNS:
            hint = ""                    # the test's own hint: too few runs finished
            if rate > expected:
                hint = (f"more runs finished than {attempts} attempt(s) per step allow: give "
                        "each step exactly max_attempts=k, and let a step that used them all "
                        "fail the run (do not catch dl.StepFailed)")
            raise Fail(f"with k={attempts}, {rate:.1%} of {RUNS} simulated runs finished; the "
                       f"formula says {expected:.1%} (p={P}, n={N})", hint)
        cost = expected_executions(DURABLE, P, N, attempts)
        if abs(calls - cost) > 0.08 * cost:
            raise Fail(f"with k={attempts}, a run made {calls:.2f} tool calls on average; "
                       f"per-step retry should make about {cost:.2f}")
