"""Exercise 08: a budget that survives the resume.

The check plays the platform that keeps restarting a crashing worker: each attempt is a
fresh Engine on the same SQLite file (a new process), which crashes after a fixed number of
model calls of its own; the next one calls the learner's start_agent again. It counts the
model calls in the simulated provider's own ledger — every call, whatever the run thinks —
and reads the run's status, halt reason and recorded cost from the store.

q1 runs the learner's agent workflow (does each model call record its cost?); q2 runs the
learner's start_agent with the check's own copy of a correct agent, so q2 can be answered
(and fails for the right reason) whatever state q1 is in.

The goal, the number of turns, the cost budget and how often workers die are drawn for
every check, and so is the step limit itself: q2 sets the notebook's MAX_STEPS to a drawn
value while it runs (and puts it back), so a limit typed in as a number fails.
"""

import contextlib
import os

from ... import examples
from ...clock import FakeClock, SequentialIds
from ...engine import Engine
from ...errors import Crash
from ...faults import AFTER_CHECKPOINT, CrashAt
from ...policy import Budget, Step
from ...store import SQLiteStore
from ...workflow import workflow
from ..checks import Exercise, Fail, NotAttempted
from ..harness import START, needs_callable, needs_workflow, scratch

EXERCISE = Exercise("08_budgets", "A budget that survives the resume",
                    lesson="notebooks/08_budgets_that_survive.ipynb")

GOALS = ("summarise every durable execution engine", "compare five vector databases",
         "plan a three-day trip to Lisbon", "review this quarter's incident reports",
         "draft a migration plan from cron to a workflow engine")


class Platform:
    """Restarts a worker after every crash. Each worker: a fresh engine, `every` calls."""

    def __init__(self, folder):
        self.folder = folder
        self.world_folder = os.path.join(folder, "world")
        self.clock = FakeClock(START)
        self.workers = 0

    def engine(self, crash=None):
        self.workers += 1
        return Engine(SQLiteStore(os.path.join(self.folder, "runs.db")), self.clock,
                      ids=SequentialIds("id"), seed=0, worker=f"worker-{self.workers}",
                      crash_at=crash)

    def calls(self):
        return examples.world_at(self.world_folder).llm.calls()

    def billed(self):
        return examples.world_at(self.world_folder).llm.total_cost()

    def keep_restarting(self, start, run_id, every=None, max_workers=60, namespaces=()):
        """Call `start(engine, run_id)` in worker after worker until the run stops running.

        A new worker is a new process: whatever the notebook kept in memory is back at its
        initial value. The one such value the exercise gives, `worker_limit`, is reset to
        None in `namespaces` (the globals of the learner's functions) before each worker.
        """
        for _ in range(max_workers):
            for namespace in namespaces:
                if "worker_limit" in namespace:
                    namespace["worker_limit"] = None
            self.clock.advance(60)
            done = self.calls()
            crash = None if every is None else CrashAt("think", AFTER_CHECKPOINT,
                                                        occurrence=done + every)
            engine = self.engine(crash)
            try:
                run = start(engine, run_id)
            except Crash:
                run = engine.get(run_id)
            if run is None:
                raise Fail("start_agent returned None; it should return the Run that "
                           "engine.start returns")
            if run.error and "NotImplementedError" in run.error:
                raise NotAttempted("the agent still raises NotImplementedError")
            if run.status != "running":
                return run
        raise Fail(f"the run was still going after {max_workers} workers and "
                   f"{self.calls()} model calls")


def _namespaces(fn):
    """The module globals a learner's function (or workflow) reads."""
    fn = getattr(fn, "fn", fn)
    namespace = getattr(fn, "__globals__", None)
    return [namespace] if isinstance(namespace, dict) else []


@contextlib.contextmanager
def _max_steps(namespaces, value):
    """Set MAX_STEPS in the learner's globals for one test, and put it back after."""
    missing = object()
    saved = [ns.get("MAX_STEPS", missing) for ns in namespaces]
    for ns in namespaces:
        ns["MAX_STEPS"] = value
    try:
        yield value
    finally:
        for ns, old in zip(namespaces, saved):
            if old is missing:
                ns.pop("MAX_STEPS", None)
            else:
                ns["MAX_STEPS"] = old


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "count the model's dollars", answers=["agent"])


def _option_hint(run) -> str:
    """Hint for a step option passed where the step function's own arguments go."""
    if run.error and "unexpected keyword argument 'cost'" in run.error:
        return ("every keyword argument of ctx.step goes to the step function; the cost is a "
                "step option: ctx.step(dl.Step(\"think\", cost=...), think, ...)")
    return ""

def _start_with(agent, platform, goal, budget=None, max_turns=None):
    """What each worker does in q1: start (or continue) the learner's agent directly."""
    needs_workflow(agent, "agent")
    extra = {} if max_turns is None else {"max_turns": max_turns}

    def start(engine, run_id):
        return engine.start(agent, platform.world_folder, goal, run_id=run_id, budget=budget,
                            **extra)
    return start


@q1.test("each model call's dollars are recorded with its step: the run's cost is what the "
         "model billed",
         hint='dl.Step("think", cost=lambda answer: answer["cost"]) records each call\'s dollars '
              "when it executes")
def _(agent, draw):
    turns = draw.randint(25, 50)
    with scratch("ex08") as folder:
        platform = Platform(folder)
        run = platform.keep_restarting(
            _start_with(agent, platform, draw.choice(GOALS), max_turns=turns), draw.run_id("cost"),
            every=draw.randint(8, 20), namespaces=_namespaces(agent))
        if run.status != "completed":
            raise Fail(f"a {turns}-turn run with no budget ended {run.status}: {run.error}",
                       _option_hint(run))
        if platform.calls() != turns:
            raise Fail(f"a run started with max_turns={turns} made {platform.calls()} model calls; "
                       f"expected {turns}, one per turn", "loop for turn in range(max_turns)")
        billed = platform.billed()
        if run.cost <= 0:
            raise Fail(f"the run's recorded cost is {run.cost}, but the model billed ${billed:.4f}",
                       'give the step a cost: dl.Step("think", cost=lambda answer: answer["cost"])')
        if abs(run.cost - billed) > 1e-9:
            raise Fail(f"the run's recorded cost is ${run.cost:.6f}; the model billed ${billed:.6f}",
                       "each call costs a different amount, and its answer says how much under "
                       "'cost': record that (cost=lambda answer: answer[\"cost\"]), not a fixed "
                       "number or the tokens")


@q1.test("a cost budget stops the run across crashes, before it overspends by more than one call",
         hint="the engine can only stop on cost if each step records what its call really cost")
def _(agent, draw):
    max_cost = round(draw.uniform(0.01, 0.03), 4)
    with scratch("ex08") as folder:
        platform = Platform(folder)
        run = platform.keep_restarting(
            _start_with(agent, platform, draw.choice(GOALS), Budget(max_cost=max_cost), 1000),
            draw.run_id("cost"), every=draw.randint(20, 40), namespaces=_namespaces(agent))
        billed = platform.billed()
        llm = examples.world_at(platform.world_folder).llm
        one_call = llm.total_cost() / max(1, llm.calls())
        if run.status != "halted" or "max_cost" not in (run.halt_reason or ""):
            raise Fail(f"with dl.Budget(max_cost={max_cost}) the run ended {run.status} "
                       f"({run.halt_reason or run.error}) after billing ${billed:.4f}",
                       _option_hint(run))
        if billed > max_cost + 2 * one_call:
            raise Fail(f"the run was billed ${billed:.4f} with a budget of ${max_cost}")


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "start_agent with a persisted budget", answers=["start_agent"])


def _think(folder, goal, turn):
    return examples.world_at(folder).llm.complete(f"{goal} (turn {turn})")


@workflow("ex08-check-agent", version=1)
def reference_agent(ctx, folder, goal, max_turns=1000):
    """The agent q2 runs: q1's answer, written by the check, so q2 does not depend on q1."""
    for turn in range(max_turns):
        ctx.step(Step("think", cost=lambda answer: answer["cost"]), _think, folder, goal, turn)
    return {"turns": max_turns}


def _via(start_agent, platform):
    needs_callable(start_agent, "start_agent")
    return lambda engine, run_id: start_agent(engine, reference_agent, platform.world_folder, run_id)


def _stopped_at_budget(run, platform, when, limit):
    calls = platform.calls()
    if calls > limit and run.status == "halted":
        raise Fail(f"{when}: the agent made {calls} model calls with MAX_STEPS = {limit}; "
                   f"the budget halted the run too late ({run.halt_reason})",
                   "max_steps counts every step the run has executed, across all workers: "
                   "use exactly MAX_STEPS — the name, not a number (the check changes it)")
    if calls > limit:
        raise Fail(f"{when}: the agent made {calls} model calls across {platform.workers} "
                   f"worker(s), with MAX_STEPS = {limit}; the run ended {run.status}",
                   "a limit kept in the worker's memory starts at zero in every new worker; "
                   "pass budget=dl.Budget(max_steps=MAX_STEPS) to engine.start, so the engine "
                   "counts the run's recorded steps instead")
    if run.status != "halted":
        detail = f": {run.error}" if run.error else ""
        raise Fail(f"{when}: the run ended {run.status}{detail} after {calls} model calls; "
                   "expected the engine's budget to halt it",
                   "a dl.Budget halts the run cleanly (status 'halted'); an exception raised "
                   "by a limit inside a step fails it instead")
    if calls != limit or "max_steps" not in (run.halt_reason or ""):
        hint = "use MAX_STEPS — the name, not a number (the check changes it)"
        if calls < limit and "max_steps" in (run.halt_reason or ""):
            hint = ("the engine already counts every step the run has executed, in every "
                    "worker: give the whole MAX_STEPS each time, not what seems to be left")
        raise Fail(f"{when}: halted after {calls} model calls ({run.halt_reason}); expected "
                   f"exactly MAX_STEPS = {limit}, halted by max_steps", hint)


def _budget_test(start_agent, draw, every):
    limit = draw.randint(120, 260)
    namespaces = _namespaces(start_agent)
    with scratch("ex08") as folder, _max_steps(namespaces, limit):
        platform = Platform(folder)
        crash_every = None if every is None else max(1, int(limit * every(draw)))
        run = platform.keep_restarting(_via(start_agent, platform), draw.run_id("agent"),
                                       every=crash_every, namespaces=namespaces)
        when = "with no crash" if every is None else f"with a crash every {crash_every} calls"
        _stopped_at_budget(run, platform, when, limit)


@q2.test("one worker, no crash: the run halts at MAX_STEPS model calls",
         hint="engine.start(agent, folder, GOAL, run_id=run_id, "
              "budget=dl.Budget(max_steps=MAX_STEPS))")
def _(start_agent, draw):
    _budget_test(start_agent, draw, None)


@q2.test("a worker dies every few dozen model calls and a fresh one calls start_agent: still "
         "MAX_STEPS calls in all",
         hint="the budget must be counted from the run's recorded steps, which every new worker reads")
def _(start_agent, draw):
    _budget_test(start_agent, draw, lambda d: d.uniform(0.2, 0.4))


@q2.test("a worker dies after most of MAX_STEPS model calls: still MAX_STEPS calls in all",
         hint="no single worker gets near the limit here: only a persisted count can stop the run")
def _(start_agent, draw):
    _budget_test(start_agent, draw, lambda d: d.uniform(0.6, 0.85))
