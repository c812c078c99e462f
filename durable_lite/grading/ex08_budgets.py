"""Exercise 08: a budget that survives the resume.

The check plays the platform that keeps restarting a crashing worker: each attempt is a
fresh Engine on the same SQLite file (a new process), which crashes after a fixed number of
model calls of its own; the next one calls the learner's start_agent again. It counts the
model calls in the simulated provider's own ledger — every call, whatever the run thinks —
and reads the run's status, halt reason and recorded cost from the store.

q1 runs the learner's agent workflow (does each model call record its cost?); q2 runs the
learner's start_agent with the check's own copy of a correct agent, so q2 can be answered
(and fails for the right reason) whatever state q1 is in.
"""

import os

from .. import examples
from ..clock import FakeClock, SequentialIds
from ..engine import Engine
from ..errors import Crash
from ..faults import AFTER_CHECKPOINT, CrashAt
from ..policy import Budget, Step
from ..store import SQLiteStore
from ..workflow import workflow
from .checks import Exercise, Fail, NotAttempted
from .harness import START, needs_callable, needs_workflow, scratch

EXERCISE = Exercise("08_budgets", "A budget that survives the resume",
                    lesson="notebooks/08_budgets_that_survive.ipynb")

MAX_STEPS = 200
GOAL = "summarise every durable execution engine"


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

    def keep_restarting(self, start, run_id, every=None, max_workers=40, namespaces=()):
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


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "count the model's dollars", answers=["agent"])


def _option_hint(run) -> str:
    """Hint for a step option passed where the step function's own arguments go."""
    if run.error and "unexpected keyword argument 'cost'" in run.error:
        return ("every keyword argument of ctx.step goes to the step function; the cost is a "
                "step option: ctx.step(dl.Step(\"think\", cost=...), think, ...)")
    return ""

MAX_COST = 0.02


def _start_with(agent, platform, budget=None, max_turns=None):
    """What each worker does in q1: start (or continue) the learner's agent directly."""
    needs_workflow(agent, "agent")
    extra = {} if max_turns is None else {"max_turns": max_turns}

    def start(engine, run_id):
        return engine.start(agent, platform.world_folder, GOAL, run_id=run_id, budget=budget,
                            **extra)
    return start


@q1.test("each model call's dollars are recorded with its step: the run's cost is what the "
         "model billed",
         hint='dl.Step("think", cost=lambda answer: answer["cost"]) records each call\'s dollars '
              "when it executes")
def _(agent):
    with scratch("ex08") as folder:
        platform = Platform(folder)
        run = platform.keep_restarting(_start_with(agent, platform, max_turns=40), "cost-1",
                                       every=15, namespaces=_namespaces(agent))
        if run.status != "completed":
            raise Fail(f"a 40-turn run with no budget ended {run.status}: {run.error}",
                       _option_hint(run))
        billed = platform.billed()
        if run.cost <= 0:
            raise Fail(f"the run's recorded cost is {run.cost}, but the model billed ${billed:.4f}",
                       'give the step a cost: dl.Step("think", cost=lambda answer: answer["cost"])')
        if abs(run.cost - billed) > 1e-9:
            raise Fail(f"the run's recorded cost is ${run.cost:.6f}; the model billed ${billed:.6f}",
                       "each call costs a different amount, and its answer says how much under "
                       "'cost': record that (cost=lambda answer: answer[\"cost\"]), not a fixed "
                       "number or the tokens")


@q1.test(f"a cost budget of ${MAX_COST} stops the run across crashes, before it overspends "
         "by more than one call",
         hint="the engine can only stop on cost if each step records what its call really cost")
def _(agent):
    with scratch("ex08") as folder:
        platform = Platform(folder)
        run = platform.keep_restarting(_start_with(agent, platform, Budget(max_cost=MAX_COST), 400),
                                       "cost-2", every=25, namespaces=_namespaces(agent))
        billed = platform.billed()
        llm = examples.world_at(platform.world_folder).llm
        one_call = llm.total_cost() / max(1, llm.calls())
        if run.status != "halted" or "max_cost" not in (run.halt_reason or ""):
            raise Fail(f"with dl.Budget(max_cost={MAX_COST}) the run ended {run.status} "
                       f"({run.halt_reason or run.error}) after billing ${billed:.4f}",
                       _option_hint(run))
        if billed > MAX_COST + 2 * one_call:
            raise Fail(f"the run was billed ${billed:.4f} with a budget of ${MAX_COST}")


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



def _stopped_at_budget(run, platform, when):
    calls = platform.calls()
    if calls > MAX_STEPS and run.status == "halted":
        raise Fail(f"{when}: the agent made {calls} model calls with a limit of {MAX_STEPS}; "
                   f"the budget halted the run too late ({run.halt_reason})",
                   "max_steps counts every step the run has executed, across all workers: "
                   "use exactly MAX_STEPS")
    if calls > MAX_STEPS:
        raise Fail(f"{when}: the agent made {calls} model calls across {platform.workers} "
                   f"worker(s), with a limit of {MAX_STEPS}; the run ended {run.status}",
                   "a limit kept in the worker's memory starts at zero in every new worker; "
                   "pass budget=dl.Budget(max_steps=MAX_STEPS) to engine.start, so the engine "
                   "counts the run's recorded steps instead")
    if run.status != "halted":
        detail = f": {run.error}" if run.error else ""
        raise Fail(f"{when}: the run ended {run.status}{detail} after {calls} model calls; "
                   "expected the engine's budget to halt it",
                   "a dl.Budget halts the run cleanly (status 'halted'); an exception raised "
                   "by a limit inside a step fails it instead")
    if calls != MAX_STEPS or "max_steps" not in (run.halt_reason or ""):
        hint = ""
        if calls < MAX_STEPS and "max_steps" in (run.halt_reason or ""):
            hint = ("the engine already counts every step the run has executed, in every "
                    "worker: give the whole MAX_STEPS each time, not what seems to be left")
        raise Fail(f"{when}: halted after {calls} model calls ({run.halt_reason}); expected "
                   f"exactly {MAX_STEPS}, halted by max_steps", hint)


@q2.test(f"one worker, no crash: the run halts at {MAX_STEPS} model calls",
         hint="engine.start(agent, folder, GOAL, run_id=run_id, "
              "budget=dl.Budget(max_steps=MAX_STEPS))")
def _(start_agent):
    with scratch("ex08") as folder:
        platform = Platform(folder)
        run = platform.keep_restarting(_via(start_agent, platform), "agent-1",
                                       namespaces=_namespaces(start_agent))
        _stopped_at_budget(run, platform, "with no crash")


@q2.test(f"a worker dies every 60 model calls and a fresh one calls start_agent: still "
         f"{MAX_STEPS} calls in all",
         hint="the budget must be counted from the run's recorded steps, which every new worker reads")
def _(start_agent):
    with scratch("ex08") as folder:
        platform = Platform(folder)
        run = platform.keep_restarting(_via(start_agent, platform), "agent-2", every=60,
                                       namespaces=_namespaces(start_agent))
        _stopped_at_budget(run, platform, "with a crash every 60 calls")


@q2.test(f"a worker dies every 150 model calls: still {MAX_STEPS} calls in all",
         hint="no single worker gets near the limit here: only a persisted count can stop the run")
def _(start_agent):
    with scratch("ex08") as folder:
        platform = Platform(folder)
        run = platform.keep_restarting(_via(start_agent, platform), "agent-3", every=150,
                                       namespaces=_namespaces(start_agent))
        _stopped_at_budget(run, platform, "with a crash every 150 calls")
