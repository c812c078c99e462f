"""Exercise 10: read a long, lumpy run from its trace, and add what its export leaves out.

Every test lives through fresh runs of lesson 10's support agent, step for step
(`support_agent` below, `lumpy.support_agent` with names and models of its own): a ticket
that goes through the flaky CRM and two model calls, parks for the manager's answer, and is
finished by whichever worker is alive. What varies is drawn per case: how often the CRM
times out, how much history goes into the draft's prompt, when the manager answers
(approves, rejects, never answers in time, or has not answered yet), the workers' names (so
no answer can name one), how many workers die, where, and how long the run then lies with
nobody on it; and, on every ticket, what the lesson's ticket keeps fixed: the models the two
model steps call, each of a drawn provider at a price per 1,000 tokens of its own (the small
one $0.003-0.008, the large one $0.015-0.06: never the lesson's $0.01, never one price for
both), the steps' names (none the lesson's, except in the plans whose stories name the lookup
and the draft: the slowest step's and the draft's place), and the 0.05-0.5 s a worker takes
after each step it records before it goes on (writing the checkpoint, the workflow's own
code), so a worker's time is always more than its steps'. The learner's functions get the
trace the store holds afterwards (`build_trace`, what `engine.trace(run_id)` returns), built
anew for them, so nothing they change in it changes what they are judged against.

Where a question is about workers dying around the wait (q1's no-worker time, q3's
finisher), the workers killed after the wait are processes of their own, SIGKILLed as in the
lesson (`resume_in_worker` below, lumpy's for this module's agent): each leaves its lease
behind to run out, so every gap before the next worker is longer than a lease. Elsewhere
workers die in-process, at one of the engine's crash points or by a `Crash` raised while they
wait to retry the CRM (a hook only an engine in this process has), which costs a few
milliseconds instead of a process start. The trace either leaves is the same: an execution
with no ending, then a stretch with no worker.

What each answer is judged against:
- q1, where the time went: the grader's own trace of the same run, split by
  `dl.lab.time_split` and summed per step over every execution that ran it;
- q2, where the money went: the model provider's ledger. A recorded model step's answer
  names its generation; its dollars are what the provider billed for that generation, and
  the generations no recorded step holds were billed for calls the trace never saw;
- q3, who finished it: the grader's own account of which worker's go returned the run
  completed, not the trace;
- q4, the export: the spans an in-memory OpenTelemetry exporter received, compared with a
  plain `otel.export` of the same tree.

What a right answer must have, and how the cases vary it:

q1 `time_spent(tree)`, `slowest_step(tree)`
- three parts that add up to the run's duration, each to 0.01 s: working (executions, which
  last longer than their steps on every ticket: an answer that adds up step spans fails),
  parked (waits and sleeps: one case sleeps until the morning before its first step, so an
  answer that counts only waits fails), and no worker (the stretches after a dead worker's
  last record: workers SIGKILLed before and after the wait, each replaced 45 s to 20 min
  later);
- a run not finished yet: still waiting (its open wait is parked until now), or its last
  worker dead (no worker until now);
- the slowest step by working time, never the wait: a flaky CRM (the retried lookup is
  slowest) and a steady one with a long history (the draft is), shuffled; a step split over
  two executions by a death between retries, sized so only the sum of both parts makes it
  the slowest (neither part alone does, nor its attempts' count).
q2 `cost_by_step(tree)`, `unrecorded_cost(tree, world)`
- each model step's dollars as the provider billed the call the run recorded (to 1e-6),
  only steps, wherever they were recorded (a worker dying before the draft, so a later
  execution holds it); the two models' prices differ from each other and from the lesson's
  on every ticket, so tokens priced at the lesson's price, at the run's average price or at
  one model's price fail, and the steps of the first test are not named as the lesson's;
- what the provider billed for calls no span shows: workers killed right after a model call
  answered (billed, never recorded: one model's call lost twice and the other's once, so
  the lost tokens at any one price, or a recorded call's cost per lost call, are not what
  was lost), and workers killed anywhere else or not at all (0).
q3 `finished_by(tree)`
- the execution that completed the run, as the check watched it happen: with nobody dying,
  with workers dying before and after the wait and a restarted one back under a dead one's
  name, after a refusal or a deadline; None when nothing completed it (still waiting, or the
  last worker dead). Worker names are drawn per ticket.
q4 `export_run(tree, provider)`
- gen_ai.conversation.id, the id of the run exported (two runs, one after the other), on
  every model call's span and on no other (the steps and the models are named anew on both
  tickets, so model calls found by the lesson's step or model names are missed); every
  other span, parent, time and attribute as a plain export gives them; the spans sent to
  the provider it is given.
"""

import json
import math
import numbers
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from functools import partial
from typing import List, Optional

from ... import lumpy, otel
from ...clock import FakeClock
from ...engine import Engine
from ...errors import Crash
from ...faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP, CrashAt
from ...jsonvalue import decode
from ...lab.timeline import time_split
from ...policy import Retry, Step
from ...sim import FakeLLM, World
from ...store import SQLiteStore
from ...store.records import STEP
from ...trace import EXECUTION, STEP_SPAN, Span, build_trace, format_duration
from ...workflow import workflow
from ..checks import Exercise, Fail
from ..harness import START, crash_label, needs_callable, scratch
from ..ledgers import Ledgers
from ..plain import plain

EXERCISE = Exercise("10_tracing", "Reading a lumpy run's trace",
                    lesson="notebooks/10_tracing_a_lumpy_run.ipynb")

HOUR, DAY = 3600.0, lumpy.DAY
DEADLINE = 3 * DAY                   # how long support_agent waits for the manager
POOL = ("pod", "worker", "vm", "node", "box", "host")
LESSON_PRICE = 0.01                  # dollars per 1,000 tokens: sim.FakeLLM's, lesson 10's ticket's
SECONDS = 0.01                       # how close a time must be: an answer rounded to 0.01 s passes
DOLLARS = 1e-6                       # the provider bills to the millionth of a dollar
CONVERSATION = "gen_ai.conversation.id"


# the agent ---------------------------------------------------------------------------------
# Lesson 10's support agent, step for step, but with the names of its steps and the models it
# calls drawn per ticket: an answer that finds the model calls by the lesson's step names, or
# prices tokens at the lesson's one price, meets tickets where neither holds.
LESSON_NAMES = {step: step for step in ("classify", "lookup_order", "draft_reply", "refund",
                                        "send_reply", "close_ticket")}
OTHER_NAMES = {   # none is the lesson's name, or holds a word of a lesson's model step
    "classify": ("triage", "categorise", "label_ticket", "route_ticket", "sort_ticket"),
    "lookup_order": ("fetch_order", "crm_lookup", "get_order", "find_order", "load_order"),
    "draft_reply": ("write_reply", "compose_answer", "write_response", "compose_email",
                    "answer_customer"),
    "refund": ("pay_back", "issue_refund", "refund_card", "return_money"),
    "send_reply": ("email_customer", "mail_answer", "send_answer", "notify_customer"),
    "close_ticket": ("resolve_ticket", "mark_done", "close_case", "archive_ticket"),
}
MODEL_CALLS = {"classify": "small", "draft_reply": "large"}    # the model steps, by their size
PROVIDERS = ("acme-ai", "northwind-ml", "fabrikam-llm", "contoso-models", "tailspin-ai")
MODEL_NAMES = {"small": ("swift-mini", "lite-2", "flash-s", "nano-3"),
               "large": ("atlas-xl", "grand-2", "deep-pro", "sage-large")}
PRICES = {"small": (0.003, 0.008), "large": (0.015, 0.06)}   # dollars per 1,000 tokens
SECONDS_PER_OUTPUT_TOKEN = {"small": 0.01, "large": 0.03}    # as lumpy.chat spends them

_clocks = {}     # folder -> the FakeClock a model call spends its time on (as lumpy.use_clock)


def renamed(at: CrashAt, names) -> CrashAt:
    """The crash point `at` (named by the lesson's steps) in a ticket whose steps are `names`."""
    return CrashAt(names.get(at.step, at.step), at.when, at.occurrence, at.kill)


def model_call(folder, model, prompt):
    """lumpy.chat, on a model of the ticket's: billed at the model's own price in the world's
    model ledger (world.llm reads every call, whoever billed it), in as much time."""
    llm = FakeLLM(os.path.join(folder, World.llm.filename), price_per_1k_tokens=model["price"])
    try:
        answer = llm.complete(prompt)
    finally:
        llm.close()
    input_tokens = len(prompt.split())
    output_tokens = answer["tokens"] - input_tokens
    clock = _clocks.get(os.fspath(folder))
    if clock is not None:
        clock.advance(0.3 + input_tokens / 4000
                      + output_tokens * SECONDS_PER_OUTPUT_TOKEN[model["size"]])
    return {"text": answer["text"], "model": model["model"], "provider": model["provider"],
            "input_tokens": input_tokens, "output_tokens": output_tokens,
            "tokens": answer["tokens"], "cost": answer["cost"]}


def _dollars(answer):
    return answer["cost"]


@workflow("ex10-support-agent", version=1)
def support_agent(ctx, folder, order_id, amount, crm_failures, history_words, names, models,
                  nap=None):
    """lumpy.support_agent with its steps named by `names` and its model calls made on
    `models` ({model step: its model}); with `nap`, a ticket that came in after hours: the
    run first sleeps until the morning (a sleep parks a run as a wait does)."""
    if nap is not None:
        ctx.sleep(nap, "morning")
    topic = ctx.step(Step(names["classify"], cost=_dollars), model_call, folder,
                     models["classify"],
                     f"Classify this support ticket about order {order_id} in one word.")
    order = ctx.step(Step(names["lookup_order"],
                          retry=Retry(max_attempts=8, initial=1.0, jitter=False)),
                     lumpy.lookup_order, folder, order_id, crm_failures)
    draft = ctx.step(Step(names["draft_reply"], cost=_dollars), model_call, folder,
                     models["draft_reply"],
                     f"Topic: {topic['text']}. Order: {order}. Draft a reply offering a refund "
                     f"of {amount}. The customer's history: "
                     + lumpy.customer_history(order_id, history_words))
    decision = ctx.wait_for_signal("approval", timeout=DEADLINE)
    if not decision or not decision.get("approved"):
        ctx.step(names["close_ticket"], lumpy.close_ticket, folder, order["ticket"],
                 ctx.idempotency_key("close", order_id))
        return {"order": order_id, "refunded": 0}
    payment = ctx.step(names["refund"], lumpy.refund, folder, order_id, amount,
                       ctx.idempotency_key("refund", order_id))
    ctx.step(names["send_reply"], lumpy.send_reply, folder, order["email"], draft["text"],
             ctx.idempotency_key("reply", order_id))
    ctx.step(names["close_ticket"], lumpy.close_ticket, folder, order["ticket"],
             ctx.idempotency_key("close", order_id))
    return {"order": order_id, "refunded": amount, "refund_id": payment["refund_id"]}


# a worker that really dies: lumpy.resume_in_worker, for this module's agent ------------------
_WORKER = ("import sys; from durable_lite.grading.exercises.ex10_tracing import worker_main; "
           "worker_main(sys.argv[1])")


def resume_in_worker(store_path, folder, run_id, *, worker, at, kill_at) -> bool:
    """Resume `run_id` in a fresh Python process named `worker`, on a FakeClock set to `at`,
    which SIGKILLs itself at `kill_at`. True if it was killed there. (lumpy's own worker
    knows only lumpy's agent; this one imports this module, so it knows the one above.)"""
    spec = {"store": os.fspath(store_path), "folder": os.fspath(folder), "run_id": run_id,
            "worker": worker, "at": at, "kill_at": [kill_at.step, kill_at.when, kill_at.occurrence]}
    proc = subprocess.run([sys.executable, "-c", _WORKER, json.dumps(spec)],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(f"worker {worker} resuming run {run_id!r} failed (exit "
                           f"{proc.returncode}):\n{proc.stderr[-2000:]}")
    return proc.returncode == -signal.SIGKILL


def worker_main(spec_json: str):
    """The worker process's whole life: resume the run until the kill point kills it."""
    spec = json.loads(spec_json)
    clock = FakeClock(spec["at"])
    lumpy.use_clock(spec["folder"], clock)
    _clocks[spec["folder"]] = clock
    crash = CrashAt(*spec["kill_at"], kill=True)
    Engine(SQLiteStore(spec["store"]), clock, worker=spec["worker"], crash_at=crash) \
        .resume(spec["run_id"])


# the runs -----------------------------------------------------------------------------------
class Kill:
    """A worker that dies: at a crash point, or (`at` None) while it waits to retry the CRM
    after `backoff` timeouts. `gap`: seconds until another worker takes the run up."""

    def __init__(self, at: Optional[CrashAt] = None, backoff: int = 0, gap: float = 60.0):
        self.at, self.backoff, self.gap = at, backoff, gap

    def words(self, names=None) -> str:
        """In words, with the steps called as the ticket calls them (`names`)."""
        if self.at is None:
            return f"killed while waiting to retry the CRM after {self.backoff} timeouts"
        if self.at.step == "approval":
            return "killed right after it recorded the manager's answer"
        return "killed " + crash_label(renamed(self.at, names or LESSON_NAMES))

    def __repr__(self):
        return f"Kill({self.words()}, gap {self.gap:g} s)"


class _DiesInBackoff:
    """An engine's `sleep` that raises Crash on its `after`-th call: the worker is killed
    while it waits to retry, its failed attempts logged and nothing else."""

    def __init__(self, clock, after):
        self.clock, self.after, self.calls = clock, after, 0

    def __call__(self, seconds):
        self.calls += 1
        if self.calls >= self.after:
            raise Crash("killed while waiting to retry the CRM")
        self.clock.advance(seconds)


class Ticket:
    """One run of the support agent, lived through by workers that come and go.

    Workers take the run up one after another, each a fresh engine on the shared store (as
    a new process would be): in the first phase until one parks on the manager's answer,
    in the second (once the answer is in, or the deadline has passed) until one finishes
    it. `before` and `after` are the kills of each phase, in order; with sigkill, each
    worker killed in the second phase is a process of its own. decision: "approve",
    "reject", "timeout" (nobody answers in three days) or "pending" (the trace is taken
    while the run still waits). finished=False: the last worker of the second phase dies
    and nobody has taken the run up when the trace is taken. steps: {lesson's step name:
    this ticket's}; models: {model step: its model, provider, size and price}; between:
    the seconds a worker spends after each step it records (writing the checkpoint, the
    workflow's own code) before it goes on, so a worker's time is more than its steps'.
    The workers' names are drawn (`names`, in the order they take the run up).
    """

    def __init__(self, folder, draw, *, steps, models, between, crm_failures=4,
                 history_words=2400, decision="approve", before=(), after=(), finished=True,
                 reuse_name=False, sigkill=False, nap=None):
        self.folder = os.fspath(folder)
        os.makedirs(self.folder, exist_ok=True)
        self.store_path = os.path.join(self.folder, "runs.db")
        self.clock = FakeClock(START + draw.randint(0, 300) * DAY + round(draw.uniform(0, DAY), 3))
        self.started_at = self.clock()
        self.order, self.amount = draw.order_id(), draw.amount()
        self.run_id = draw.run_id("ticket")
        self.step_names, self.models, self.between = dict(steps), dict(models), between
        self.crm_failures, self.history_words = crm_failures, history_words
        self.decision, self.finished, self.sigkill = decision, finished, sigkill
        self.before, self.after = list(before), list(after)
        if decision == "timeout":
            self.delay = DEADLINE + round(draw.uniform(HOUR, DAY), 1)
        else:
            self.delay = round(draw.uniform(2 * HOUR, 2.8 * DAY), 1)
        self.tick = round(draw.uniform(1, 600), 1)    # from the answer to the scheduler's recover()
        self.nap = nap                                # seconds the run sleeps first, if any
        goes = len(self.before) + len(self.after) + 2 + (nap is not None)
        self.names = draw.distinct(lambda: f"{draw.choice(POOL)}-{draw.token(4)}", goes)
        if reuse_name and self.before:                # a restarted pod keeps its name
            self.names[-1] = self.names[0]
        self.executions: List[str] = []               # the worker of each go, in order
        self.finisher = None                          # (execution number, worker)
        self.story: List[str] = []
        lumpy.use_clock(self.folder, self.clock)
        _clocks[self.folder] = self.clock
        try:
            self._live()
        finally:
            lumpy.use_clock(self.folder, None)
            _clocks.pop(self.folder, None)

    # living through it -----------------------------------------------------------------
    def _engine(self, kill=None) -> Engine:
        worker = self.names[len(self.executions)]
        self.executions.append(worker)
        crash = sleep = None
        if kill is not None and kill.at is not None:
            crash = renamed(kill.at, self.step_names)
        elif kill is not None:
            sleep = _DiesInBackoff(self.clock, kill.backoff)
        engine = Engine(SQLiteStore(self.store_path), self.clock, worker=worker, crash_at=crash,
                        sleep=sleep)
        engine.on_step = self._carry_on
        return engine

    def _carry_on(self, label, how):
        """After each step a worker records, the time it takes to go on to the next."""
        if how == "executed":
            self.clock.advance(self.between)

    def _phase(self, kills, take_up, last_lives=True, sigkill=False):
        """Workers take the run up in turn: each of `kills` dies as planned, then (if
        last_lives) one more carries on. Returns (its engine, the run as it left it).
        sigkill: each doomed worker is a process of its own, really killed."""
        for kill in kills:
            if sigkill:
                worker = self._sigkilled(kill)
            else:
                engine = self._engine(kill)
                worker = engine.worker
                try:
                    take_up(engine)
                except Crash:
                    pass
                else:
                    raise RuntimeError(f"{kill} was planned for run {self.run_id!r}, but the "
                                       "worker never reached that point")
            later = format_duration(kill.gap)
            alone = not last_lives and kill is kills[-1]
            self.story.append(f"{worker} was {kill.words(self.step_names)}; " + (
                f"nobody had taken the run up {later} later" if alone
                else f"the next worker came {later} later"))
            self.clock.advance(kill.gap)
            take_up = Engine.recover
        if not last_lives:
            return None
        engine = self._engine()
        take_up(engine)
        return engine, engine.get(self.run_id)

    def _sigkilled(self, kill) -> str:
        """A worker in a process of its own, resuming the run on a fake clock set to now,
        SIGKILLed at the kill's point (as in the lesson). Its lease stays behind, to run
        out: every gap is longer than the lease."""
        worker = self.names[len(self.executions)]
        self.executions.append(worker)
        if not resume_in_worker(self.store_path, self.folder, self.run_id, worker=worker,
                                at=self.clock(), kill_at=renamed(kill.at, self.step_names)):
            raise RuntimeError(f"{kill} was planned for run {self.run_id!r}, but worker "
                               f"{worker} was not killed there")
        return worker

    def _live(self):
        timeouts = {0: "never timed out", 1: "timed out once"}.get(
            self.crm_failures, f"timed out {self.crm_failures} times")
        self.story.append(f"the CRM {timeouts}, and {self.history_words:,} words of history "
                          "went into the draft")

        def start(engine):
            engine.start(support_agent, self.folder, self.order, self.amount, self.crm_failures,
                         self.history_words, self.step_names, self.models, nap=self.nap,
                         run_id=self.run_id)

        if self.nap is not None:                      # one go that only puts the run to sleep
            start(self._engine())
            self.story.append(f"the ticket came in after hours, and the run slept "
                              f"{format_duration(self.nap)} until the morning")
            self.clock.advance(self.nap + self.tick)
            start = Engine.recover
        _, run = self._phase(self.before, start)
        if run.status != "waiting":
            raise RuntimeError(f"run {self.run_id!r} should be waiting, it is {run.status}")
        self.parked_at = self.clock()
        self.clock.advance(self.delay)
        if self.decision == "pending":
            self.story.append(f"the manager had not answered {format_duration(self.delay)} later")
            return
        if self.decision in ("approve", "reject"):
            manager = Engine(SQLiteStore(self.store_path), self.clock, worker="manager-console")
            manager.signal(self.run_id, "approval", {"approved": self.decision == "approve",
                                                      "by": "the manager"})
            verb = "approved" if self.decision == "approve" else "refused"
            self.story.append(f"the manager {verb} the refund {format_duration(self.delay)} later")
            self.clock.advance(self.tick)
        else:
            self.story.append("the manager never answered; the three-day deadline passed")
        outcome = self._phase(self.after, Engine.recover, last_lives=self.finished,
                              sigkill=self.sigkill)
        if outcome is not None:
            engine, run = outcome
            if run.status != "completed":
                raise RuntimeError(f"run {self.run_id!r} should have completed: {run}")
            self.finisher = (len(self.executions), engine.worker)

    # what it left ------------------------------------------------------------------------
    def trace(self) -> Span:
        """The run's trace as the store has it now: a new tree on every call."""
        store = SQLiteStore(self.store_path)
        try:
            return build_trace(store, self.run_id, now=self.clock())
        finally:
            store.close()

    def world(self):
        return Ledgers(self.folder).world

    def billed(self) -> dict:
        """{generation: dollars}: every model call the provider billed."""
        return {bill["generation"]: bill["cost"] for bill in Ledgers(self.folder).model_bills()}

    def model_steps(self) -> set:
        """The names of this ticket's model steps."""
        return {self.step_names[step] for step in MODEL_CALLS}

    def recorded_generations(self) -> dict:
        """{model step label: generation} for the model calls the store recorded."""
        store = SQLiteStore(self.store_path)
        try:
            entries = store.load_entries(self.run_id)
        finally:
            store.close()
        out = {}
        for entry in entries:
            if entry.kind == STEP and entry.name in self.model_steps():
                text = decode(entry.result_json)["text"]         # "[generation 7] ..."
                out[entry.label] = int(text.split("]")[0].split()[-1])
        return out

    def price_list(self) -> str:
        """This ticket's models and their prices, in words."""
        return "; ".join(f"{self.step_names[step]} calls {m['model']} of {m['provider']} at "
                         f"${m['price']:g} per 1,000 tokens"
                         for step, m in self.models.items())

    def describe(self) -> str:
        return f"ticket run {self.run_id!r}: " + "; ".join(self.story)

    def named(self) -> str:
        """The run in a few words, where its story does not matter."""
        return f"ticket run {self.run_id!r}"


# drawing the cases ---------------------------------------------------------------------------
BEFORE_WAIT = (CrashAt("classify", AFTER_EFFECT), CrashAt("lookup_order", BEFORE_STEP),
               CrashAt("lookup_order", AFTER_CHECKPOINT), CrashAt("draft_reply", BEFORE_STEP),
               CrashAt("draft_reply", AFTER_EFFECT), CrashAt("draft_reply", AFTER_CHECKPOINT))
AFTER_APPROVAL = (CrashAt("approval", AFTER_CHECKPOINT), CrashAt("refund", AFTER_EFFECT),
                  CrashAt("refund", AFTER_CHECKPOINT), CrashAt("send_reply", AFTER_EFFECT),
                  CrashAt("close_ticket", BEFORE_STEP))
AFTER_REFUSAL = (CrashAt("approval", AFTER_CHECKPOINT), CrashAt("close_ticket", AFTER_EFFECT))
LOSES_A_MODEL_CALL = (CrashAt("classify", AFTER_EFFECT), CrashAt("draft_reply", AFTER_EFFECT))
DRAFT_LATER = (CrashAt("lookup_order", BEFORE_STEP), CrashAt("lookup_order", AFTER_CHECKPOINT),
               CrashAt("draft_reply", BEFORE_STEP))


def _gap(draw) -> float:
    """Seconds from a worker's death to the next worker: longer than a lease (30 s)."""
    return round(draw.uniform(45, 1200), 1)


def _kill(draw, points) -> Kill:
    return Kill(draw.choice(points), gap=_gap(draw))


def _kills(draw, points, n) -> list:
    """n kills at different points, in the order the run reaches them (a later worker
    replays what an earlier one recorded, so it could never die there)."""
    chosen = sorted(draw.sample(range(len(points)), n))
    return [Kill(points[i], gap=_gap(draw)) for i in chosen]


def ticket(folder, draw, **plan) -> Ticket:
    """A ticket lived through in its own folder inside `folder`, from a plan (below)."""
    return Ticket(os.path.join(folder, draw.token(6)), draw, **full_plan(draw, plan))


def full_plan(draw, plan) -> dict:
    """The plan, with what it leaves open drawn: how often the CRM times out, how much
    history goes into the draft, the steps' names, the models and their prices, and the
    seconds a worker takes between two steps."""
    plan = dict(plan)
    plan.setdefault("crm_failures", draw.randint(0, 5))
    plan.setdefault("history_words", draw.randint(200, 4000))
    plan.setdefault("steps", step_names(draw))
    plan.setdefault("models", models(draw))
    plan.setdefault("between", round(draw.uniform(0.05, 0.5), 3))
    return plan


def step_names(draw) -> dict:
    """{lesson's step name: another}, none of them the lesson's."""
    return {step: draw.choice(OTHER_NAMES[step]) for step in LESSON_NAMES}


def models(draw) -> dict:
    """{model step: its model}: a small model for the first call and a large one for the
    draft, each of a drawn provider, at prices of their own (neither is the lesson's)."""
    return {step: {"size": size, "model": draw.choice(MODEL_NAMES[size]),
                   "provider": draw.choice(PROVIDERS),
                   "price": round(draw.uniform(*PRICES[size]), 4)}
            for step, size in MODEL_CALLS.items()}


# Plans: the branches the questions name, each a function of the test's draw. Every test
# lives through the plans its name promises, on every run. The plans about the slowest step
# and about the draft's place keep the lesson's step names (their stories, and the tests of
# them, name the lookup and the draft); every other plan's steps are named anew per ticket.
def quiet(draw) -> dict:
    """Nobody dies; the manager approves or refuses."""
    return {"decision": draw.choice(["approve", "reject"])}


def after_hours(draw) -> dict:
    """Nobody dies; the run sleeps a few hours before its first step (a sleep, not a wait)."""
    return {**quiet(draw), "nap": round(draw.uniform(2 * HOUR, 14 * HOUR), 1)}


def died_around_the_wait(draw) -> dict:
    """One worker dies before the wait, one or two after it, SIGKILLed as in the lesson."""
    return {"before": [_kill(draw, BEFORE_WAIT)],
            "after": _kills(draw, AFTER_APPROVAL, draw.randint(1, 2)), "sigkill": True}


def still_waiting(draw) -> dict:
    """The manager has not answered yet (a worker may have died before the wait)."""
    return {"decision": "pending",
            "before": [_kill(draw, BEFORE_WAIT)] if draw.random() < 0.5 else []}


def abandoned(draw) -> dict:
    """The last worker died, and nobody has taken the run up yet."""
    return {"before": [_kill(draw, BEFORE_WAIT)] if draw.random() < 0.5 else [],
            "after": [_kill(draw, AFTER_APPROVAL)], "finished": False}


def flaky_crm(draw) -> dict:
    """The CRM times out 3-5 times: the retried lookup is the slowest step."""
    return {"crm_failures": draw.randint(3, 5), "history_words": draw.randint(200, 3000),
            "steps": LESSON_NAMES}


def steady_crm(draw) -> dict:
    """The CRM times out at most once and the history is long: the draft is the slowest."""
    return {"crm_failures": draw.randint(0, 1), "history_words": draw.randint(2200, 6000),
            "after": [_kill(draw, AFTER_APPROVAL)] if draw.random() < 0.5 else [],
            "steps": LESSON_NAMES}


def split_lookup(draw) -> dict:
    """A worker dies between the CRM's retries, so the lookup's time is split over two
    executions. The history is sized so that the draft takes longer than either part of the
    lookup and less than the two together (the model's answer moves it by +-0.27 s)."""
    failures = draw.randint(4, 5)
    first = draw.randint(2, failures - 2)             # timeouts before the worker dies

    def attempts(failed):                             # seconds of `failed` attempts, then one more
        return sum(lumpy.CRM_CALL + (2 ** (i - 2) if i > 1 else 0) for i in range(1, failed + 2))

    before = attempts(first - 1)          # `first` failed attempts; the worker dies before the next
    after = attempts(failures - first)
    middle = (max(before, after) + before + after) / 2
    words = int((middle - 0.3 - 1.41) * 4000) - 45            # the draft's seconds (lumpy.chat)
    return {"crm_failures": failures, "history_words": words,
            "before": [Kill(backoff=first, gap=_gap(draw))], "steps": LESSON_NAMES}


def draft_later(draw) -> dict:
    """A worker dies before the draft is written (maybe one more after the first model
    call answered): a later execution records the draft."""
    kills = [_kill(draw, DRAFT_LATER)]
    if draw.random() < 0.5:
        kills.insert(0, Kill(CrashAt("classify", AFTER_EFFECT), gap=_gap(draw)))
    return {"before": kills, "steps": LESSON_NAMES}


def lost_model_call(draw) -> dict:
    """Three workers killed right after a model call answered, before its checkpoint: one
    model's call is lost twice, the other's once (which is drawn). The calls lost are then
    never the same mix as the calls recorded (one of each), so what was lost is not the
    lost tokens at any one price, nor a recorded call's cost for each lost call."""
    twice = draw.choice(LOSES_A_MODEL_CALL)
    return {"before": [Kill(at, gap=_gap(draw))
                       for at in LOSES_A_MODEL_CALL for _ in range(2 if at == twice else 1)]}


def killed_elsewhere(draw) -> dict:
    """Workers killed before and after the wait, never between a model call and its record."""
    return {"before": [_kill(draw, [p for p in BEFORE_WAIT if p not in LOSES_A_MODEL_CALL])],
            "after": [_kill(draw, AFTER_APPROVAL)]}


def restarted_name(draw) -> dict:
    """Workers die before and after the wait; the one that finishes has the name of the
    first, which died (a restarted pod keeps its name)."""
    return {**died_around_the_wait(draw), "reuse_name": True}


def refused(draw) -> dict:
    return {"decision": "reject",
            "after": [_kill(draw, AFTER_REFUSAL)] if draw.random() < 0.5 else []}


def timed_out(draw) -> dict:
    return {"decision": "timeout",
            "after": [_kill(draw, AFTER_REFUSAL)] if draw.random() < 0.5 else []}


def every_kind_of_span(draw) -> dict:
    """Failed attempts, dead executions before and after the wait, the wait itself."""
    return {"crm_failures": draw.randint(2, 4), "before": [_kill(draw, BEFORE_WAIT)],
            "after": [_kill(draw, AFTER_APPROVAL)]}


def approved(draw) -> dict:
    """Nobody dies; the manager approves."""
    return {"decision": "approve"}


def _judge_tickets(judge, answer, draw, *plans):
    """Live through a fresh ticket for each plan, in turn, and judge `answer` on each."""
    with scratch("ex10") as folder:
        for plan in plans:
            judge(answer, ticket(folder, draw, **plan(draw)))


# q1 · where did the time go -----------------------------------------------------------------
q1 = EXERCISE.question("q1", "where the time went", answers=["time_spent", "slowest_step"])

PARTS = ("working", "parked", "no worker")


def _number(value) -> bool:
    """A finite number (numpy's too), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) \
        and math.isfinite(value)


def _split_of(time_spent, tree) -> dict:
    needs_callable(time_spent, "time_spent")
    answer = plain(time_spent(tree), "time_spent(tree)")
    if not isinstance(answer, Mapping) or not all(k in answer for k in PARTS):
        raise Fail(f"time_spent returned {answer!r}; expected a dict with the keys "
                   "'working', 'parked' and 'no worker' (seconds each)")
    wrong = [k for k in PARTS if not _number(answer[k])]
    if wrong:
        raise Fail(f"time_spent returned {answer!r}: {wrong[0]!r} should be a number of seconds")
    return {k: float(answer[k]) for k in PARTS}


def _shown(split) -> str:
    return ", ".join(f"{k} {format_duration(split[k])} ({split[k]:.3f} s)" for k in PARTS)


def _judge_split(time_spent, case: Ticket):
    mine = time_split(case.trace())
    theirs = _split_of(time_spent, case.trace())
    if all(abs(theirs[k] - mine[k]) <= SECONDS for k in PARTS):
        return
    total = sum(theirs.values())
    if abs(total - mine["total"]) > 3 * SECONDS:
        raise Fail(f"{case.describe()}.\ntime_spent said {_shown(theirs)}: "
                   f"{format_duration(total)} in all, but the run lasted "
                   f"{format_duration(mine['total'])} from its start to the end of its trace",
                   "every second of the run is one of the three: a worker executing it, the run "
                   "parked on a wait or a sleep, or neither (no worker, yet not parked). "
                   "tree.duration is the whole")
    off = [k for k in PARTS if abs(theirs[k] - mine[k]) > SECONDS]
    raise Fail(f"{case.describe()}.\ntime_spent said {_shown(theirs)}: {' and '.join(off)} "
               f"{'is' if len(off) == 1 else 'are'} off. The run's children: "
               f"{_children(case.trace())}", _split_hint(case.trace(), theirs, mine, off))


def _split_hint(tree, theirs, mine, off) -> str:
    """Where the split went wrong, from the part that is off and what the run holds."""
    if "parked" in off:
        slept = any(s.kind == "sleep" for s in tree.children)
        return ("this run slept as well as waited: a sleep parks it too" if slept and
                theirs["parked"] < mine["parked"] else
                "parked is every second the run waited or slept, and nothing else")
    steps = sum(s.duration for s in tree.find(kind=STEP_SPAN))
    if "working" in off and abs(theirs["working"] - steps) <= SECONDS:
        return ("a worker's time is not all in its steps: between two steps it writes a "
                "checkpoint and runs the workflow's own code. Working is the time the "
                "executions lasted, each from its start to its last record")
    if "no worker" in off and mine["no worker"] > theirs["no worker"]:
        return ("an execution whose worker died ends at its last record, and the next begins "
                "when another worker takes the run up: the time between belongs to nobody")
    return ("working is the time the run's executions lasted, each from its start to its "
            "last record, whatever its steps did")


def _children(tree) -> str:
    """The run's children with their durations, and the run's own (the facts, not the sums)."""
    spans = [f"{s.name} ({s.worker}, {s.status}) {format_duration(s.duration)}"
             if s.kind == EXECUTION else
             f"{s.kind} {s.name} {format_duration(s.duration)}{' (still open)' if s.open else ''}"
             for s in tree.children]
    return "; ".join(spans) + f"; the run itself lasted {format_duration(tree.duration)}"


@q1.test("no worker died: the run worked, parked for the manager (and, after hours, slept until "
         "morning), and no second belongs to no worker",
         hint="a run is parked while it waits and while it sleeps: both are children of the run")
def _(time_spent, slowest_step, draw):
    needs_callable(time_spent, "time_spent")
    _judge_tickets(_judge_split, time_spent, draw, quiet, after_hours)


@q1.test("workers died before and after the wait: each stretch until the next worker took the "
         "run up is time with no worker",
         hint="an execution whose worker died ends at its last record; nothing covers the time "
              "from there to the next execution")
def _(time_spent, slowest_step, draw):
    needs_callable(time_spent, "time_spent")
    _judge_tickets(_judge_split, time_spent, draw, died_around_the_wait)


@q1.test("a run not finished yet: still waiting for the manager, or its last worker dead with "
         "nobody to take over",
         hint="a trace taken now ends now: an open wait is parked time until now; a dead "
              "worker's run is time with no worker until someone takes it up")
def _(time_spent, slowest_step, draw):
    needs_callable(time_spent, "time_spent")
    _judge_tickets(_judge_split, time_spent, draw, still_waiting, abandoned)


def _step_seconds(tree) -> dict:
    """{step name: seconds of working time}, summed over every execution that ran it."""
    out = {}
    for span in tree.walk():
        if span.kind == STEP_SPAN:
            out[span.name] = out.get(span.name, 0.0) + span.duration
    return out


def _asked(answer_fn, case: Ticket, what: str):
    """`answer_fn(tree)` on the case's tree, read as the checks read it: a span of that tree
    becomes the same span of a tree built afresh from the store (what the answer did to its
    tree does not count; the spans are listed before it sees them); anything else crosses
    as plain data (plain.py)."""
    tree = case.trace()
    spans = tree.find()
    answer = answer_fn(tree)
    if type(answer) is Span:
        place = next((i for i, span in enumerate(spans) if span is answer), None)
        if place is None:
            raise Fail(f"{what} returned a span that is not one of the tree's",
                       "return a span found in the tree you are given, itself")
        return case.trace().find()[place]
    return plain(answer, what)


def _slowest_of(slowest_step, case: Ticket) -> str:
    needs_callable(slowest_step, "slowest_step")
    answer = _asked(slowest_step, case, "slowest_step(tree)")
    if isinstance(answer, Span):
        if answer.kind != STEP_SPAN:
            raise Fail(f"{case.describe()}.\nslowest_step returned the {answer.kind} span "
                       f"{answer.name!r}, which is not a step",
                       "a wait is not work: look only at spans of kind 'step'")
        answer = answer.name
    if not isinstance(answer, str):
        raise Fail(f"slowest_step returned {answer!r}; expected a step's name, such as "
                   "'classify'")
    return answer


def _judge_slowest(slowest_step, case: Ticket, hint=""):
    seconds = _step_seconds(case.trace())
    expected = max(seconds, key=seconds.get)
    answer = _slowest_of(slowest_step, case)
    if answer == expected:
        return
    if answer not in seconds:
        raise Fail(f"{case.describe()}.\nslowest_step returned {answer!r}, which is not a step "
                   f"of this run; its step spans: {_step_spans(case.trace())}",
                   "a wait, an execution or the run itself is not a step: pick among the spans "
                   "of kind 'step'")
    raise Fail(f"{case.describe()}.\nslowest_step returned {answer!r}; the run's step spans: "
               f"{_step_spans(case.trace())}", hint)


def _step_spans(tree) -> str:
    """Each step span with its duration and its execution, in the tree's order (what
    tree.render() shows): the facts, not their sum."""
    return ", ".join(f"{step.name} {format_duration(step.duration)} (in {execution.name})"
                     for execution in tree.find(kind=EXECUTION) for step in execution.children)


@q1.test("the slowest step, with a flaky CRM and with a steady one and a long history: the "
         "step that took the most working time, never the wait",
         hint="compare the steps' durations (spans of kind 'step'), not their attempts, and "
              "not the wait's")
def _(time_spent, slowest_step, draw):
    needs_callable(slowest_step, "slowest_step")
    plans = [flaky_crm, steady_crm]
    draw.shuffle(plans)
    _judge_tickets(partial(_judge_slowest, hint="the slowest step is the one with the longest "
                           "duration, whatever its kind or its number of attempts"),
                   slowest_step, draw, *plans)


@q1.test("the slowest step when a worker died between the CRM's retries: its time is summed "
         "over every execution that ran it",
         hint="one step can appear under two executions: add up its spans by name before you "
              "compare")
def _(time_spent, slowest_step, draw):
    needs_callable(slowest_step, "slowest_step")
    _judge_tickets(partial(_judge_slowest, hint="the lookup ran under two executions here: its "
                           "working time is the sum of both"),
                   slowest_step, draw, split_lookup)


# q2 · where did the money go ----------------------------------------------------------------
q2 = EXERCISE.question("q2", "where the money went", answers=["cost_by_step", "unrecorded_cost"])


def _ledger_by_step(case: Ticket) -> dict:
    """{model step: dollars the provider billed for the call the run recorded}."""
    billed = case.billed()
    return {label: billed[g] for label, g in case.recorded_generations().items()}


def _judge_costs(cost_by_step, case: Ticket, hint=""):
    needs_callable(cost_by_step, "cost_by_step")
    expected = _ledger_by_step(case)
    answer = plain(cost_by_step(case.trace()), "cost_by_step(tree)")
    if not isinstance(answer, Mapping):
        raise Fail(f"cost_by_step returned {answer!r}; expected a dict {{step name: dollars}}")
    if not all(isinstance(k, str) and _number(v) for k, v in answer.items()):
        raise Fail(f"cost_by_step returned {answer!r}; expected step names mapped to dollars")
    spent = {k: float(v) for k, v in answer.items() if v}
    tree = case.trace()
    steps = {s.name for s in tree.find(kind=STEP_SPAN)}
    strangers = sorted(set(spent) - steps)
    shown = ", ".join(f"{k}: ${v:.6f}" for k, v in sorted(spent.items())) or "nothing"
    if strangers:
        raise Fail(f"{case.describe()}.\ncost_by_step gave {shown}; {strangers} "
                   f"{'is not a step' if len(strangers) == 1 else 'are not steps'} of this "
                   f"run (its steps: {', '.join(sorted(steps))})", _strangers_hint(strangers, tree))
    missing = sorted(set(expected) - set(spent))
    if missing:
        raise Fail(f"{case.describe()}.\ncost_by_step gave {shown}: nothing for "
                   f"{', '.join(missing)}, which the provider billed too", hint)
    wrong = [k for k in expected if abs(spent[k] - expected[k]) > DOLLARS]
    if wrong:
        k = wrong[0]
        tokens = sum(s.tokens for s in tree.find(kind=STEP_SPAN, name=k))
        raise Fail(f"{case.describe()}.\ncost_by_step gave {k!r} ${spent[k]:.6f}"
                   f"{_priced_as(spent[k], tokens)}; the provider billed ${expected[k]:.6f} "
                   f"for the call the run recorded ({case.price_list()})",
                   _price_hint(tree, spent[k], tokens))
    extra = sorted(set(spent) - set(expected))
    if extra:
        raise Fail(f"{case.describe()}.\ncost_by_step gave {shown}, but {extra} cost nothing: "
                   "the provider billed only the model calls")


def _strangers_hint(strangers, tree) -> str:
    """Why an answer named spans that are not steps, from what it named."""
    if set(strangers) & set(LESSON_NAMES):
        return ("this run's steps are not named as the lesson's are: take each step's name from "
                "its span")
    if any(s.kind != STEP_SPAN for name in strangers for s in tree.find(name=name)):
        return ("the run and its executions carry the sums of their steps' costs: keep to "
                "spans of kind 'step'")
    return "name each step as its span does"


def _priced_as(dollars, tokens) -> str:
    """What the learner's dollars are, when they are the step's tokens priced at the lesson's
    price (or the tokens themselves)."""
    if tokens and abs(dollars - tokens) < 0.5:
        return f" (its {tokens} tokens)"
    if tokens and abs(dollars - tokens * LESSON_PRICE / 1000) <= DOLLARS:
        return f" (its {tokens} tokens at the lesson's ${LESSON_PRICE:g} per 1,000)"
    return ""


def _price_hint(tree, dollars, tokens) -> str:
    """Where a step's dollars went wrong: tokens for dollars, tokens priced at one price (the
    lesson's, the run's average, another call's), or something else."""
    if tokens and abs(dollars - tokens) < 0.5:
        return "a step's cost is in dollars, not tokens: its span says what the step cost"
    calls = [s for s in tree.find(kind=STEP_SPAN) if s.is_model_call and s.tokens]
    prices = [LESSON_PRICE / 1000] + [s.cost / s.tokens for s in calls]
    if tree.tokens:
        prices.append(tree.cost / tree.tokens)
    if tokens and any(math.isclose(dollars / tokens, price, rel_tol=0.01) for price in prices):
        return ("the models here have prices of their own, which differ from each other: a "
                "step's span already holds the dollars its call was billed, with no price to "
                "apply")
    return "compare your dollars with what each step's span says the step cost"


@q2.test("no worker died: each model call's dollars, as the provider billed them",
         hint="a step's span says what the step cost; the run's and the executions' are sums of "
              "their steps', and a tool costs nothing")
def _(cost_by_step, unrecorded_cost, draw):
    needs_callable(cost_by_step, "cost_by_step")
    _judge_tickets(_judge_costs, cost_by_step, draw, quiet)


@q2.test("a worker died before the draft was recorded: the draft's dollars are found in the "
         "execution that recorded it",
         hint="look at the steps of every execution, not only the first")
def _(cost_by_step, unrecorded_cost, draw):
    needs_callable(cost_by_step, "cost_by_step")
    _judge_tickets(partial(_judge_costs, hint="the draft was written by a later execution: look "
                           "under every execution, not only the first"),
                   cost_by_step, draw, draft_later)


def _judge_unrecorded(unrecorded_cost, case: Ticket):
    needs_callable(unrecorded_cost, "unrecorded_cost")
    bills = Ledgers(case.folder).model_bills()
    seen = set(case.recorded_generations().values())
    unseen = [bill for bill in bills if bill["generation"] not in seen]
    expected = sum(bill["cost"] for bill in unseen)
    answer = plain(unrecorded_cost(case.trace(), case.world()), "unrecorded_cost(tree, world)")
    if not _number(answer):
        raise Fail(f"unrecorded_cost returned {answer!r}; expected a number of dollars")
    if abs(answer - expected) <= DOLLARS:
        return
    hint = ("the provider's ledger knows every call it billed, the trace only the calls the "
            "run recorded: what the one holds beyond the other is what is missing")
    tokens = sum(bill["tokens"] for bill in unseen)
    priced = ""
    if unseen and abs(answer - tokens * LESSON_PRICE / 1000) <= DOLLARS:
        priced = f" (the unrecorded {tokens} tokens at the lesson's ${LESSON_PRICE:g} per 1,000)"
        hint = ("each call was billed at its own model's price, and neither is the lesson's: the "
                "provider's ledger holds the dollars, not only the tokens")
    raise Fail(f"{case.describe()}.\nThe provider billed {len(bills)} model calls; the trace "
               f"shows {len(seen)}. unrecorded_cost returned ${answer:.6f}{priced}"
               + ("" if unseen else "; every call the provider billed is in the trace here")
               + f" ({case.price_list()})", hint)


@q2.test("a worker killed right after a model call ran: the provider billed a call the trace "
         "never saw",
         hint="a call whose worker died before its checkpoint is billed but never recorded; "
              "compare what the provider billed with what the trace holds")
def _(cost_by_step, unrecorded_cost, draw):
    needs_callable(unrecorded_cost, "unrecorded_cost")
    _judge_tickets(_judge_unrecorded, unrecorded_cost, draw, lost_model_call)


@q2.test("workers killed anywhere else, or none: the trace saw every call the provider billed",
         hint="when nothing was lost, the provider's bill and the trace agree")
def _(cost_by_step, unrecorded_cost, draw):
    needs_callable(unrecorded_cost, "unrecorded_cost")
    _judge_tickets(_judge_unrecorded, unrecorded_cost, draw, quiet, killed_elsewhere)


# q3 · which resume finished it --------------------------------------------------------------
q3 = EXERCISE.question("q3", "who finished it", answers=["finished_by"])


def _judge_finisher(finished_by, case: Ticket):
    needs_callable(finished_by, "finished_by")
    answer = _asked(finished_by, case, "finished_by(tree)")
    if case.finisher is None:
        if answer is not None:
            what = f"{answer.name} ({answer.worker})" if isinstance(answer, Span) else repr(answer)
            raise Fail(f"{case.describe()}.\nThe run has not completed, yet finished_by "
                       f"returned {what}",
                       "return None when no execution completed the run (look at the "
                       "executions' status)")
        return
    number, worker = case.finisher
    if answer is None:
        raise Fail(f"{case.describe()}.\nThe run completed, yet finished_by returned None")
    if not isinstance(answer, Span) or answer.kind != EXECUTION:
        what = (f"the {answer.kind} span {answer.name!r}" if isinstance(answer, Span)
                else repr(answer))
        raise Fail(f"{case.describe()}.\nfinished_by returned {what}; expected the execution "
                   "span that completed the run",
                   "return one of tree.find(kind='execution') itself, not its name or worker")
    if (answer.name, answer.worker) != (f"execution {number}", worker):
        raise Fail(f"{case.describe()}.\nfinished_by returned {answer.name} ({answer.worker}, "
                   f"{answer.status}); the run's workers, in order: {', '.join(case.executions)}",
                   "the execution that finished the run is the one whose status says so, "
                   "whichever worker ran it and wherever it sits in the list")


@q3.test("no worker died: the resume after the manager's answer finished the run",
         hint="each execution's status says how it ended")
def _(finished_by, draw):
    _judge_tickets(_judge_finisher, finished_by, draw, approved)


@q3.test("workers died before and after the wait, one of them restarted under its old name: "
         "the execution that completed the run",
         hint="a worker's name can appear on more than one execution: answer with the execution")
def _(finished_by, draw):
    _judge_tickets(_judge_finisher, finished_by, draw, restarted_name)


@q3.test("the manager refused, or never answered in three days: the run still completed",
         hint="a refusal or a deadline ends the run as well (it closes the ticket)")
def _(finished_by, draw):
    _judge_tickets(_judge_finisher, finished_by, draw, refused, timed_out)


@q3.test("not finished yet (still waiting for the manager, or its last worker dead with nobody "
         "to take over): None",
         hint="the last execution is not always the one that finished the run: there may be "
              "none")
def _(finished_by, draw):
    _judge_tickets(_judge_finisher, finished_by, draw, still_waiting, abandoned)


# q4 · an attribute the export leaves out ----------------------------------------------------
q4 = EXERCISE.question("q4", "the conversation id on model calls", answers=["export_run"])


def _provider(seed):
    """A TracerProvider whose spans go to an in-memory exporter: (provider, exporter)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=otel.SeededIds(seed))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _keyed(spans) -> dict:
    """{(names from the root down, start time): span}: a span's place in its tree."""
    by_id = {s.context.span_id: s for s in spans}

    def key(s):
        parent = by_id.get(s.parent.span_id) if s.parent is not None else None
        return (key(parent) if parent is not None else ()) + ((s.name, s.start_time),)

    return {key(s): s for s in spans}


def _exports(export_run, case: Ticket):
    """(the learner's spans, a plain export's spans), each keyed by its place in the tree."""
    needs_callable(export_run, "export_run")
    provider, exporter = _provider(case.run_id)
    export_run(case.trace(), provider)
    theirs = exporter.get_finished_spans()
    if not theirs:
        raise Fail(f"{case.named()}: export_run(tree, provider) sent no span to the "
                   "provider it was given",
                   "export into the provider export_run is given: the check reads only what it "
                   "received")
    reference, plain = _provider(case.run_id)
    otel.export(case.trace(), reference)
    return _keyed(theirs), _keyed(plain.get_finished_spans())


def _chat(span) -> bool:
    return span.attributes.get("gen_ai.operation.name") == "chat"


def _tagged(spans, case: Ticket) -> list:
    """The spans that carry the conversation id; Fail when none does (nothing to check yet)."""
    tagged = [s for s in spans.values() if CONVERSATION in s.attributes]
    if not tagged:
        raise Fail(f"{case.named()}: No span carries {CONVERSATION}: there is nothing "
                   "to check yet")
    return tagged


@q4.test("every model call's span ('chat ...') carries gen_ai.conversation.id, its run's id "
         "(two runs, exported one after the other)",
         hint="the run's id is the tree's name; give export an extra_attributes function that "
              "knows it")
def _(export_run, draw):
    with scratch("ex10") as folder:
        for case in (ticket(folder, draw, **every_kind_of_span(draw)),
                     ticket(folder, draw, **quiet(draw))):
            theirs, plain = _exports(export_run, case)
            for key, span in plain.items():
                if not _chat(span):
                    continue
                got = theirs.get(key)
                value = None if got is None else got.attributes.get(CONVERSATION)
                if value != case.run_id:
                    raise Fail(f"{case.named()}: The span {span.name!r} was exported with "
                               f"{CONVERSATION} = {value!r}; expected the id of the run it "
                               "belongs to",
                               "read the id from the tree export_run is given, not from the "
                               "notebook's run")


@q4.test("no other span carries it: not the run, its executions, tool calls, attempts or the "
         "wait",
         hint="only model calls belong to the conversation: span.is_model_call")
def _(export_run, draw):
    with scratch("ex10") as folder:
        case = ticket(folder, draw, **every_kind_of_span(draw))
        theirs, plain = _exports(export_run, case)
        tagged = _tagged(theirs, case)
        others = [s.name for s in tagged if not _chat(s)]
        if others:
            raise Fail(f"{case.named()}: {CONVERSATION} is on {len(others)} span(s) that "
                       f"are not model calls: {', '.join(sorted(set(others))[:6])}")


@q4.test("everything else is exported as before: the same spans, parents, times and attributes",
         hint="add to what otel.export sends, through its extra_attributes: do not build "
              "spans of your own or change the others' attributes")
def _(export_run, draw):
    with scratch("ex10") as folder:
        case = ticket(folder, draw, **every_kind_of_span(draw))
        theirs, plain = _exports(export_run, case)
        _tagged(theirs, case)
        missing = [key[-1][0] for key in plain if key not in theirs]
        extra = [key[-1][0] for key in theirs if key not in plain]
        if missing or extra:
            raise Fail(f"{case.named()}: The export differs from otel.export's: "
                       + "; ".join(part for part in (
                           f"missing {', '.join(missing[:5])}" if missing else "",
                           f"spans of its own: {', '.join(extra[:5])}" if extra else "") if part))
        for key, span in plain.items():
            got = theirs[key]
            attributes = {k: v for k, v in got.attributes.items() if k != CONVERSATION}
            if attributes != dict(span.attributes):
                changed = sorted(k for k in set(attributes) | set(span.attributes)
                                 if attributes.get(k) != span.attributes.get(k))
                raise Fail(f"{case.named()}: The span {span.name!r} was exported with "
                           f"other attributes changed: {', '.join(changed)}")
            if (got.end_time, got.kind, got.status.status_code) != \
                    (span.end_time, span.kind, span.status.status_code):
                raise Fail(f"{case.named()}: The span {span.name!r} was exported with "
                           "another end, kind or status than otel.export gives it")
