"""Exercise 08: a budget that survives the resume.

The check plays the platform that keeps restarting a crashing worker: each attempt is a
fresh Engine on the same SQLite file (a new process), which crashes after a fixed number of
model calls of its own; the next one calls the learner's start_agent again. It counts the
model calls in the simulated provider's own ledger — every call, whatever the run thinks —
and reads the run's status, halt reason, steps and recorded costs from the store.

q1 runs the learner's agent workflow (does each model call record its cost?); q2 runs the
learner's start_agent with the check's own copy of a correct agent, so q2 can be answered
(and fails for the right reason) whatever state q1 is in.

What a right answer must have, and how the cases vary it:

q1 `agent(ctx, folder, goal, max_turns=1000)`
- the name: every model call is a step named "think", as given (the platform's crash
  points, a dashboard and `invalidate` find it by that name). Read from the run's history,
  and the workers die at "think" steps, so a renamed step also never crashes.
- the loop: one model call per turn, `max_turns` of them (drawn, 25 to 50), about the goal
  it was given (drawn: every prompt the provider saw must hold it), returning
  {"turns": max_turns}.
- the dollars: each step records what the provider billed for its own call, compared call by
  call (each call costs a different amount, so a fixed number fails), and the run's cost is
  their sum. The provider's price per token is drawn for every case, so a price of the
  learner's own (the tokens times the lesson's price) fails too.
- across crashes: workers die every 8 to 20 calls; what the replayed steps cost is counted
  once, so the run's cost is the bill, however many workers it took.
- the budget it makes possible: a drawn `max_cost` halts the run, across crashes, before it
  overspends by more than a call or two.

q2 `start_agent(engine, agent, folder, run_id)`
- the limit lives with the run: every worker is a fresh engine, and workers die after 20 to
  40% or 60 to 85% of the limit, so no count kept in a worker's memory reaches it; with no
  crash, a limit that fails the run instead of halting it is caught too. In the 20 to 40%
  test every worker is a new Python process that runs the answer's cells again and is
  SIGKILLed at its crash point: nothing the kernel keeps reaches the next worker.
- the boundary: exactly MAX_STEPS model calls in all, not one more or fewer.
- the name: MAX_STEPS is drawn (120 to 260, never the notebook's 200) and set in the
  notebook's globals while the test runs (and put back), so a limit typed in as a number
  fails.
- the ending: "halted", by max_steps — not failed by an exception inside a step.
- the run: start_agent returns the Run of `run_id`, a run of the `agent` it was given.
- after the halt: one more worker calls start_agent, as a restarted pod would; it makes no
  model call (a budget computed from what seems left, or grown per worker, fails here).
- no other cap: the provider is dear (drawn, $2.50 to $20 per 1,000 tokens: `budget_case`),
  so MAX_STEPS calls cost at least $10 on every run, and a dollar cap the task does not ask
  for (the lesson's $0.50, a few dollars) halts the run before MAX_STEPS; and once the run
  halts at MAX_STEPS, the budget stored with it is read, so a cap on dollars or on time that
  this run did not reach fails too (a dearer or a slower run would reach it).
"""

import contextlib
import os

from ... import examples, jsonvalue
from ...clock import FakeClock, SequentialIds
from ...engine import Engine
from ...errors import Crash
from ...faults import AFTER_CHECKPOINT, CrashAt
from ...policy import Budget, Step
from ...run import Run
from ...store import SQLiteStore
from ...workflow import workflow
from ..checks import Exercise, Fail, NotAttempted
from ..child import run_fresh, write_module
from ..harness import START, needs_callable, needs_workflow, scratch
from ..ledgers import Ledgers
from ..plain import plain
from ..portable import NotPortable, module_source

EXERCISE = Exercise("08_budgets", "A budget that survives the resume",
                    lesson="notebooks/08_budgets_that_survive.ipynb")

# The goals the cases draw from; never the notebook's own GOAL, so an agent that asks about
# that one instead of the goal it is given is found out.
GOALS = ("compare five vector databases", "plan a three-day trip to Lisbon",
         "review this quarter's incident reports",
         "draft a migration plan from cron to a workflow engine",
         "find the slowest query in last week's logs", "summarise the on-call handbook")


class Platform:
    """Restarts a worker after every crash. Each worker: a fresh engine, `every` calls.
    price: the provider's dollars per 1,000 tokens (drawn: a price only it knows).

    Once `_fresh_workers` is called, every worker is a new Python process that runs the
    answer's cells again (`portable.module_source`) and is SIGKILLed at its crash point, as a
    pod is: nothing the notebook's kernel holds reaches it. Before, workers are engines in
    this process, and the one value the exercise's code keeps per worker, `worker_limit`, is
    put back to None before each (the lesson's own picture of a new process)."""

    def __init__(self, folder, price=None):
        self.folder = folder
        self.world_folder = os.path.join(folder, "world")
        self.clock = FakeClock(START)
        self.workers = 0
        self.price = price
        self.fresh = None        # or the answer's name, once _fresh_workers made workers processes
        self.spec = {}
        if price is not None:
            examples.world_at(self.world_folder).llm.price = price

    def engine(self, crash=None):
        self.workers += 1
        return Engine(SQLiteStore(os.path.join(self.folder, "runs.db")), self.clock,
                      ids=SequentialIds("id"), seed=0, worker=f"worker-{self.workers}",
                      crash_at=crash)

    def calls(self):
        return len(Ledgers(self.world_folder).model_bills())

    def billed(self):
        return round(sum(bill["cost"] for bill in Ledgers(self.world_folder).model_bills()), 6)

    def history(self, run_id):
        """The run's steps as the store has them (read by the check, not by a worker)."""
        reader = Engine(SQLiteStore(os.path.join(self.folder, "runs.db")), self.clock,
                        worker="the-check")
        return [row for row in reader.history(run_id) if row["kind"] == "step"]

    def budget(self, run_id):
        """The budget stored with the run, the one the engine enforces (read by the check)."""
        store = SQLiteStore(os.path.join(self.folder, "runs.db"))
        try:
            record = store.get_run(run_id)
        finally:
            store.close()
        if record is None or record.budget_json is None:
            return None
        return Budget.from_json(jsonvalue.decode(record.budget_json))

    def keep_restarting(self, start, run_id, every=None, max_workers=60, namespaces=()):
        """Call `start(engine, run_id)` in worker after worker until the run stops running."""
        for _ in range(max_workers):
            run = self.one_worker(start, run_id, every, namespaces)
            if run.status != "running":
                return run
        raise Fail(f"the run was still going after {max_workers} workers and "
                   f"{self.calls()} model calls")

    def one_worker(self, start, run_id, every=None, namespaces=()):
        self.clock.advance(60)
        done = self.calls()
        kill_at = None if every is None else done + every
        if self.fresh is not None:
            return self._worker_in_a_new_process(run_id, kill_at)
        for namespace in namespaces:
            if "worker_limit" in namespace:
                namespace["worker_limit"] = None
        crash = None if kill_at is None else CrashAt("think", AFTER_CHECKPOINT, occurrence=kill_at)
        engine = self.engine(crash)
        try:
            run = start(engine, run_id)
        except Crash:
            if engine.store.get_run(run_id) is None:
                raise Fail(f"a worker called start_agent(engine, agent, folder, {run_id!r}) and "
                           f"died in the middle of a run, but the store has no run {run_id!r}",
                           "use the run_id start_agent is called with") from None
            run = engine.get(run_id)
        _returned(type(run).__name__, run.run_id if type(run) is Run else None, run_id,
                  lambda: repr(run))
        if run.error and "NotImplementedError" in run.error:
            raise NotAttempted("the agent still raises NotImplementedError")
        return engine.get(run_id)        # as the store has it, not as the answer said

    def _worker_in_a_new_process(self, run_id, kill_at):
        """One worker as a new process, SIGKILLed after its model call `kill_at` is recorded."""
        self.workers += 1
        spec = dict(self.spec, folder=self.folder, run_id=run_id, now=self.clock(),
                    worker=f"worker-{self.workers}", kill_at=kill_at, price=self.price)
        child = run_fresh(self.folder, "check_worker", spec, timeout=60)
        if child.error and "NotImplementedError" in child.error:
            raise NotAttempted(f"{self.fresh} still raises NotImplementedError")
        if not (child.finished or child.killed):
            raise Fail(f"worker {self.workers}, a new Python process, could not run your "
                       f"{self.fresh}: {child.error or f'exit status {child.returncode}'}",
                       RESTARTED)
        store = SQLiteStore(os.path.join(self.folder, "runs.db"))
        try:
            run = None if store.get_run(run_id) is None else \
                Engine(store, self.clock, worker="the-check").get(run_id)
        finally:
            store.close()
        if run is None:
            raise Fail(f"worker {self.workers}, a new Python process, called {self.fresh} and "
                       f"{'was killed' if child.killed else 'ended'}, but the store has no run "
                       f"{run_id!r}", "use the run_id start_agent is called with")
        if child.finished:
            _returned(child.result["type"], child.result["run_id"], run_id,
                      lambda: child.result["repr"])
        if run.error and "NotImplementedError" in run.error:
            raise NotAttempted("the agent still raises NotImplementedError")
        return run


def _returned(type_name, returned_id, run_id, shown):
    """What a worker's start_agent handed back must be the Run it was asked for."""
    if type_name == "NoneType":
        raise Fail("start_agent returned None; it should return the Run it started or "
                   "continued", "a function without a `return` line returns None: return "
                   "what the engine gives back")
    if type_name != "Run":
        raise Fail(f"start_agent returned {type_name} {shown():.80}; it should "
                   "return the Run it started or continued",
                   "return what the engine gives back, not a part of it")
    if plain(returned_id, "the returned run's run_id") != run_id:
        raise Fail(f"start_agent(engine, agent, folder, {run_id!r}) returned run "
                   f"{returned_id!r}: every worker must start or continue the run it is "
                   "given", "use the run_id start_agent is called with")


RESTARTED = ("each worker of this test is a new Python process that runs your notebook's "
             "cells again, as a restarted pod does, and is killed (SIGKILL) at its crash "
             "point: nothing your code kept in memory from one worker to the next was there")

# What a worker process runs: the answer's cells (module_source), then this.
_WORKER_IN_A_NEW_PROCESS = """

def check_worker(spec):
    from durable_lite.grading.exercises.ex08_budgets import worker as _worker
    return _worker(globals(), spec)
"""


def worker(namespace, spec) -> dict:
    """One worker, in a new process: a fresh engine on the shared store, killed (SIGKILL)
    once its run has recorded model call `kill_at`; calls the answer as the platform does."""
    world_folder = os.path.join(spec["folder"], "world")
    if spec["price"] is not None:
        examples.world_at(world_folder).llm.price = spec["price"]
    crash = None if spec["kill_at"] is None else \
        CrashAt("think", AFTER_CHECKPOINT, occurrence=spec["kill_at"], kill=True)
    engine = Engine(SQLiteStore(os.path.join(spec["folder"], "runs.db")),
                    FakeClock(spec["now"]), ids=SequentialIds("id"), seed=0,
                    worker=spec["worker"], crash_at=crash)
    namespace["MAX_STEPS"] = spec["max_steps"]         # the drawn limit, as in this process
    run = namespace["start_agent"](engine, reference_agent, world_folder, spec["run_id"])
    return {"type": type(run).__name__, "repr": repr(run)[:200],
            "run_id": run.run_id if type(run) is Run else None}


def _fresh_workers(platform, start_agent, max_steps):
    """Make `platform`'s workers new processes that run the answer's cells again."""
    try:
        source = module_source(start_agent, extra=_WORKER_IN_A_NEW_PROCESS,
                               call_as={"start_agent": start_agent}, given=("MAX_STEPS",))
    except NotPortable as exc:
        raise Fail(str(exc)) from None
    write_module(platform.folder, source)
    platform.fresh, platform.spec = "start_agent", {"max_steps": max_steps}


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

LESSONS_PRICE = 0.01          # dollars per 1,000 tokens: the fake model's price in the lessons
STEP_NAME = "think"


def _price(draw) -> float:
    """A provider's price per 1,000 tokens, never the lessons' (so only the answer knows it)."""
    return round(draw.choice([draw.uniform(0.002, 0.007), draw.uniform(0.013, 0.03)]), 4)


def _option_hint(run) -> str:
    """Hint for a step option passed where the step function's own arguments go."""
    if run.error and "unexpected keyword argument 'cost'" in run.error:
        return ("every keyword argument of ctx.step goes to the step function: a step's own "
                "options, such as what it cost, go where the step is named")
    return ""


def _start_with(agent, platform, goal, budget=None, max_turns=None):
    """What each worker does in q1: start (or continue) the learner's agent directly."""
    needs_workflow(agent, "agent")
    extra = {} if max_turns is None else {"max_turns": max_turns}

    def start(engine, run_id):
        return engine.start(agent, platform.world_folder, goal, run_id=run_id, budget=budget,
                            **extra)
    return start


def _completed(agent, draw, folder, price=None):
    """A drawn number of turns about a drawn goal, through crashes, with no budget: returns
    (platform, run, turns, goal, run id) once the run completed."""
    turns, goal, run_id = draw.randint(25, 50), draw.choice(GOALS), draw.run_id("cost")
    platform = Platform(folder, price)
    run = platform.keep_restarting(_start_with(agent, platform, goal, max_turns=turns), run_id,
                                   every=draw.randint(8, 20), namespaces=_namespaces(agent))
    if run.status != "completed":
        raise Fail(f"a {turns}-turn run with no budget ended {run.status}: {run.error}",
                   _option_hint(run))
    return platform, run, turns, goal, run_id


def _names(rows) -> list:
    """The step names of history rows, without their occurrence numbers ("think#3")."""
    return [row["step"].split("#")[0] for row in rows]


@q1.test("one model call per turn, recorded as a step named 'think', about the goal it was "
         "given, through crashes",
         hint="the loop, its step's name and its arguments stay as given: only the step's "
              "options change")
def _(agent, draw):
    with scratch("ex08") as folder:
        platform, run, turns, goal, run_id = _completed(agent, draw, folder)
        names = sorted(set(_names(platform.history(run_id))))
        if names != [STEP_NAME]:
            raise Fail(f"the run recorded its model calls as steps named {names}; the task keeps "
                       f"the name {STEP_NAME!r}",
                       "a step's name is how the platform, a dashboard or an invalidate finds it "
                       "(the platform here crashes workers at 'think' steps): keep it")
        if platform.calls() != turns:
            raise Fail(f"a run started with max_turns={turns} made {platform.calls()} model calls; "
                       f"expected {turns}, one per turn",
                       "the loop runs max_turns turns, one model call each, as given")
        strays = [bill["prompt"] for bill in Ledgers(platform.world_folder).model_bills()
                  if goal not in bill["prompt"]]
        if strays:
            raise Fail(f"the run was started with the goal {goal!r}, but the model was asked "
                       f"{strays[0]!r}", "pass the goal the workflow is given on to think")
        if run.result != {"turns": turns}:
            raise Fail(f"the run returned {run.result!r}; expected {{'turns': {turns}}}, as given")


def _rounded_to(costs, billed):
    """The number of decimals the recorded costs are the bills rounded to, if they are."""
    for decimals in range(6):
        rounded = [round(bill, decimals) for bill in billed]
        if rounded != billed and all(abs(c - r) < 1e-12 for c, r in zip(costs, rounded)):
            return decimals
    return None


def _cost_hint(recorded, bills) -> str:
    """Where the recorded dollars went wrong, from what the steps recorded next to what the
    provider billed for the same calls (never the code that records them right)."""
    costs = [cost for cost, _ in recorded]
    billed = [bill["cost"] for _, bill in recorded]
    if not any(costs):
        # A step given no cost and a step given its bill rounded to cents look alike here:
        # both record 0. Say what was seen, and both ways it comes about.
        return (f"no step recorded any dollars: each recorded $0, while the provider billed "
                f"every call a fraction of a cent (${min(billed):.6f} to ${max(billed):.6f}). "
                "The engine learns what a step cost from the step's options, as it records "
                "the step's result, and a bill rounded to whole cents is $0 here too")
    decimals = _rounded_to(costs, billed)
    if decimals is not None:
        return (f"each step recorded its call's bill rounded to {decimals} decimal place(s); "
                "the engine adds up what every step cost, so record the dollars as the call "
                "reported them")
    if len(set(costs)) == 1:
        return (f"every step recorded the same ${costs[0]:g}, but the provider billed each call "
                "a different amount: the dollars of a call are in what the call returned")
    if all(abs(cost - bill["tokens"]) < 1e-9 for cost, bill in recorded):
        return "each step recorded its call's tokens, not its dollars"
    if all(abs(cost - bill["tokens"] / 1000 * LESSONS_PRICE) < 1e-6 for cost, bill in recorded):
        return ("each step recorded its tokens at the lessons' price; this provider charges "
                "another price. What the call itself reported costing is the bill")
    ratios = {round(cost / bill["cost"], 6) for cost, bill in recorded if bill["cost"]}
    if len(ratios) == 1:
        return (f"each step recorded {ratios.pop():g} times what the provider billed for its "
                "call: record the dollars as the answer reports them")
    return "compare what each step recorded with what its own call reported costing"


@q1.test("each model call's dollars are recorded with its step, as the provider billed them: "
         "the run's cost is the bill, across crashes",
         hint="the engine counts a step's dollars once, when it executes; a replayed step is "
              "not billed again")
def _(agent, draw):
    with scratch("ex08") as folder:
        platform, run, turns, goal, run_id = _completed(agent, draw, folder, _price(draw))
        bills = {bill["generation"]: bill for bill in Ledgers(platform.world_folder).model_bills()}
        recorded = []
        for row in platform.history(run_id):
            answer = row["result"] if isinstance(row["result"], dict) else {}
            bill = bills.get(answer.get("generation"))
            if bill is not None:
                recorded.append((row["cost"], bill))
        wrong = [(row_cost, bill) for row_cost, bill in recorded
                 if abs(row_cost - bill["cost"]) > 1e-9]
        billed = platform.billed()
        if wrong:
            cost, bill = wrong[0]
            raise Fail(f"{len(wrong)} of the run's {len(recorded)} 'think' steps recorded other "
                       f"dollars than the provider billed: the call of generation "
                       f"{bill['generation']} recorded ${cost:.6f}, billed ${bill['cost']:.6f} "
                       f"({bill['tokens']} tokens)", _cost_hint(recorded, bills))
        if abs(run.cost - billed) > 1e-9:
            raise Fail(f"the run's recorded cost is ${run.cost:.6f}; the model billed "
                       f"${billed:.6f} over {platform.workers} workers",
                       "every call the provider billed is a step the run recorded: count each "
                       "once, with its step")


@q1.test("a cost budget stops the run across crashes, before it overspends by more than one call",
         hint="the engine can only stop on cost if each step records what its call really cost")
def _(agent, draw):
    price = _price(draw)
    max_cost = round(draw.uniform(2.2, 5.0) * price, 6)     # about 40 to 90 calls' worth
    with scratch("ex08") as folder:
        platform = Platform(folder, price)
        run = platform.keep_restarting(
            _start_with(agent, platform, draw.choice(GOALS), Budget(max_cost=max_cost), 1000),
            draw.run_id("cost"), every=draw.randint(12, 25), namespaces=_namespaces(agent))
        billed = platform.billed()
        one_call = billed / max(1, platform.calls())
        if run.status != "halted" or "max_cost" not in (run.halt_reason or ""):
            raise Fail(f"with dl.Budget(max_cost={max_cost}) the run ended {run.status} "
                       f"({run.halt_reason or run.error}) after billing ${billed:.4f}",
                       _option_hint(run) or "the engine can only stop on cost if each step "
                                            "records what its call really cost")
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


NAME_NOT_NUMBER = "use MAX_STEPS, the name, not its value: the check gives it other values"


OTHER_CAP = ("the run was halted by a limit the task does not set: it stops after MAX_STEPS "
             "model calls, whatever they cost and however long they take")


def _stopped_at_budget(run, platform, when, limit):
    calls = platform.calls()
    if run.workflow != reference_agent.name:
        raise Fail(f"{when}: the run is a run of {run.workflow!r}; start_agent was given the "
                   f"agent {reference_agent.name!r}",
                   "start the agent start_agent is given, not one of the notebook's")
    if run.status == "halted" and "max_steps" not in (run.halt_reason or ""):
        raise Fail(f"{when}: the run was halted after {calls} model call(s), billed "
                   f"${platform.billed():.2f}, by {run.halt_reason}; expected it to go on to "
                   f"MAX_STEPS = {limit} calls", OTHER_CAP)
    if calls > limit and run.status == "halted":
        raise Fail(f"{when}: the agent made {calls} model calls with MAX_STEPS = {limit}; "
                   f"the budget halted the run too late ({run.halt_reason})",
                   "the engine counts every step the run has executed, across all workers, "
                   "and halts before the one past the limit: " + NAME_NOT_NUMBER)
    if calls > limit:
        several = platform.workers > 1
        raise Fail(f"{when}: the agent made {calls} model calls across {platform.workers} "
                   f"worker(s), with MAX_STEPS = {limit}; the run ended {run.status}",
                   "a limit kept in the worker's memory starts at zero in every new worker: "
                   "only one the engine keeps with the run, in the store, sees every worker's "
                   "steps" if several else
                   "nothing stopped the run at the limit, even in one worker")
    if run.status != "halted":
        detail = f": {run.error}" if run.error else ""
        raise Fail(f"{when}: the run ended {run.status}{detail} after {calls} model calls; "
                   "expected the engine's budget to halt it",
                   "an engine's budget halts the run cleanly (status 'halted'); an exception "
                   "raised by a limit inside a step fails it instead")
    if calls != limit or "max_steps" not in (run.halt_reason or ""):
        hint = NAME_NOT_NUMBER
        if calls < limit and "max_steps" in (run.halt_reason or ""):
            hint = ("the engine already counts every step the run has executed, in every "
                    "worker: give the whole MAX_STEPS each time, not what seems to be left")
        raise Fail(f"{when}: halted after {calls} model calls ({run.halt_reason}); expected "
                   f"exactly MAX_STEPS = {limit}, halted by max_steps", hint)


def _no_other_cap(platform, run_id, when, limit):
    """A cap on dollars or on time that this run did not reach halts a dearer or a slower run
    before MAX_STEPS: read the budget stored with the run, the one the engine enforces."""
    budget = platform.budget(run_id)
    caps = [] if budget is None else [f"{name}={value}" for name, value in
                                      (("max_cost", budget.max_cost), ("deadline", budget.deadline))
                                      if value is not None]
    if caps:
        raise Fail(f"{when}: the run halted at MAX_STEPS = {limit} model calls (billed "
                   f"${platform.billed():.2f}), but the budget stored with it also has "
                   f"{' and '.join(caps)}: a run whose calls cost more, or take longer, would be "
                   "halted before MAX_STEPS", OTHER_CAP)


# q2's provider is dear: MAX_STEPS model calls cost at least $10 on every run (120 calls or
# more, of 40 tokens or more, at $2.50 or more per 1,000 tokens), so a dollar cap the task does
# not ask for, such as the lesson's $0.50 or a few dollars, halts the run before MAX_STEPS.
LIMITS = (120, 260)                 # MAX_STEPS, drawn
NOTEBOOKS_LIMIT = 200               # MAX_STEPS as the notebook sets it: never drawn
DEAR_PRICES = (2.5, 20.0)           # dollars per 1,000 tokens, drawn
FEWEST_TOKENS = 40                  # a call's least: 20, 3 per answer word (6 or more), and
                                    # the prompt's words ("(turn N)" alone is 2)


def budget_case(draw, crash_after=None) -> tuple:
    """(MAX_STEPS, the provider's price per 1,000 tokens, the model calls a worker makes before
    it dies or None): `crash_after` is the range of fractions of MAX_STEPS to crash after."""
    limit = draw.choice([n for n in range(LIMITS[0], LIMITS[1] + 1) if n != NOTEBOOKS_LIMIT])
    price = round(draw.uniform(*DEAR_PRICES), 2)
    crash_every = None if crash_after is None else max(1, int(limit * draw.uniform(*crash_after)))
    return limit, price, crash_every


def _budget_test(start_agent, draw, crash_after, fresh=False):
    limit, price, crash_every = budget_case(draw, crash_after)
    namespaces = _namespaces(start_agent)
    with scratch("ex08") as folder, _max_steps(namespaces, limit):
        platform = Platform(folder, price)
        start, run_id = _via(start_agent, platform), draw.run_id("agent")
        if fresh:
            _fresh_workers(platform, start_agent, limit)
        run = platform.keep_restarting(start, run_id, every=crash_every, namespaces=namespaces)
        when = "with no crash" if crash_every is None else f"with a crash every {crash_every} calls"
        _stopped_at_budget(run, platform, when, limit)
        _no_other_cap(platform, run_id, when, limit)
        calls = platform.calls()
        again = platform.one_worker(start, run_id, namespaces=namespaces)   # a pod restarts
        if platform.calls() != calls or again.status != "halted":
            raise Fail(f"{when}: the run halted at MAX_STEPS = {limit} model calls; then one more "
                       f"worker called start_agent, and the run ended {again.status} after "
                       f"{platform.calls()} calls in all",
                       "a restarted worker calls start_agent for a run that already halted: "
                       "the limit it gives must be the same MAX_STEPS, whatever the run has "
                       "used so far")


@q2.test("one worker, no crash: the run halts at MAX_STEPS model calls",
         hint="the limit is the run's, given when the run starts, and the engine enforces it "
              "(lesson 08, section 2)")
def _(start_agent, draw):
    _budget_test(start_agent, draw, None)


@q2.test("a worker dies every few dozen model calls (SIGKILL) and a new process calls "
         "start_agent: still MAX_STEPS calls in all",
         hint="the budget must be counted from the run's recorded steps, which every new worker reads")
def _(start_agent, draw):
    _budget_test(start_agent, draw, (0.2, 0.4), fresh=True)


@q2.test("a worker dies after most of MAX_STEPS model calls: still MAX_STEPS calls in all",
         hint="no single worker gets near the limit here: only a persisted count can stop the run")
def _(start_agent, draw):
    _budget_test(start_agent, draw, (0.6, 0.85))
