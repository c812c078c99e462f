"""Exercise 12: a deploy while refunds wait for a yes — ship a new step, say when the old
path can go, and fix what a bad step already sent.

The notebook gives `refund_v1`, an approval refund in production: lookup -> ask the
approver -> wait up to three days for "approval" -> refund -> email the customer (or, with
no answer, escalate to the lead). Every step passes an idempotency key.

q1 `deploy(name)`: the code a new process runs after the deploy, registered under `name`;
   a fraud check before the approver is asked. Each test plays a whole deploy day in a
   private world and store: runs of v1 in every state a deploy finds them (parked on their
   approval, approved but not yet continued, paid, killed right after the refund was paid,
   killed before their first checkpoint), then a new process that knows only what
   `deploy` registers, new runs, approvals at drawn times (some after the deadline, some
   never), processes killed right after a step ran, recovery. Judged by the world's
   ledgers: refunds, approval emails, customer emails, escalations and fraud checks per
   order, and by the runs' statuses in the grader's own store.
q2 `can_retire(engine, name)`: may the fraud-check gate's old branch be deleted now? The
   check deploys a gated version itself and asks at moments where the true answer is known
   from the runs' histories: while old runs wait, after each finishes, past every deadline
   before the scheduler ran, with runs that never reached the gate and runs of another
   workflow around.
q3 `resend(engine, run_ids)`: runs completed with an email step that printed cents as
   dollars; the fix is deployed; each listed customer must get one corrected email, nobody
   is paid again, and a second call adds nothing — made by a fresh Python process that has
   only the answer cell's code (so no memory of the first call helps), after the first call
   returned, or after calls whose processes died right before and right after a corrected
   email went out.

Every test draws its orders, amounts, times and the workflow's name (a new name per test:
nothing a notebook registered or remembered can answer for it).

What a right answer must have, and how the cases vary it:

q1 `deploy(name)`
- old runs keep their path: every unfinished run of v1 replays on the deployed code right
  after the deploy, and every one finishes without diverging — parked, approved but not
  continued, killed right after its refund was paid, killed before its first checkpoint
  (runs in every such state, a drawn number of each);
- the code it registers: under the name it is given (drawn per test), and only that: a new
  process knows nothing else, so v1's code must be registered again if v1 runs remain;
- new runs get the new step: a step named "fraud-check", between "lookup" and "ask", read
  from each new run's history; its score in the approval email; runs that asked before the
  deploy never checked;
- nothing twice: processes killed right after "fraud-check", "ask", "refund" and "email"
  ran, and every crash point of a new run swept, approved and never approved: one check,
  one approval email, one refund (or one escalation), one customer email per order;
- the ending: approvals in time, too late and never, drawn per order; each run returns
  what refund_v1 returns for it.

q2 `can_retire(engine, name)`
- True exactly when no unfinished run of `name` went past the gate on the old branch,
  asked at moments where the histories decide it: while old runs wait and after each
  finishes (one killed mid-refund, so its status says "running"); past every old deadline
  before recover() (statuses and the clock mislead); with runs that never reached the gate
  and runs of another workflow in the same store;
- a bool, and it only looks (the store is compared before and after).

q3 `resend(engine, run_ids)`
- one corrected email per listed run, sent by the code deployed now; nobody paid or asked
  again; nobody else mailed (runs told correctly, an escalated run, in the same store);
- a second call, by a fresh Python process holding only the answer's code, adds nothing;
- calls that die part-way, then one in a new process: still one corrected email per
  customer. Every run draws both ways a call can leave its work: a first call dies right
  before a corrected email goes out (whatever it made for that customer is in the store,
  unfinished, and the email never went out: an answer that passes over what an earlier call
  made, instead of seeing it through, leaves that customer without one), a second call
  dies right after one went out (an answer that makes it again sends two).
"""

import json
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

from ...clock import FakeClock
from ...engine import Engine
from ...errors import Crash, LeaseHeldError, NonDeterminismError, WorkflowNotRegistered
from ...faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP, CrashAt
from ...sim import world_at
from ...store import SQLiteStore
from ...store.records import COMPLETED, PATCH, RUNNING, STEP, WAITING
from ...workflow import forget, latest, registered, workflow
from ..checks import Exercise, Fail, NotAttempted
from ..child import run_fresh, write_module
from ..harness import START, SeededIds, crash_label, diverged, needs_callable, scratch, sweep_of
from ..ledgers import Ledgers
from ..portable import NotPortable, module_source

EXERCISE = Exercise("12_versioning", "Deploy day: a new step while runs wait",
                    lesson="notebooks/12_versioning_long_lived_runs.ipynb")

q1 = EXERCISE.question("q1", "deploy: a fraud check, shipped while runs wait", answers=["deploy"])
q2 = EXERCISE.question("q2", "can_retire: when the old branch can go", answers=["can_retire"])
q3 = EXERCISE.question("q3", "resend: fix what a bad step sent", answers=["resend"])

MINUTE, HOUR, DAY = 60, 3600, 24 * 3600


# the given code: the notebook shows exactly these definitions ------------------------------
APPROVER, LEAD = "approver@example.com", "lead@example.com"
GATE = "fraud-check"


def lookup_order(folder, order_id):
    return world_at(folder).orders.lookup(order_id)


def fraud_check(folder, order_id, key):
    """The new step: the order's fraud score, 0.0 to 0.9. The world's "fraud-checks"
    ledger records every check (a repeated key is recorded once)."""
    score = sum(map(ord, order_id)) % 10 / 10
    world_at(folder).ledger("fraud-checks").record(key=key, detail={"order": order_id,
                                                                    "score": score})
    return score


def ask_approver(folder, order_id, amount, score, key):
    risk = "no fraud check" if score is None else f"fraud score {score}"
    return world_at(folder).mailer.send(APPROVER, f"Approve ${amount} for {order_id}? ({risk})",
                                        idempotency_key=key)


def pay(folder, order_id, amount, key):
    return world_at(folder).payments.refund(order_id, amount, idempotency_key=key)


def tell_customer(folder, to, order_id, amount, key):
    return world_at(folder).mailer.send(to, f"${amount} refunded for {order_id}", idempotency_key=key)


def escalate(folder, order_id, key):
    return world_at(folder).mailer.send(LEAD, f"No answer on {order_id}", idempotency_key=key)


def refund_v1(ctx, folder, order_id, amount):
    order = ctx.step("lookup", lookup_order, folder, order_id)
    ctx.step("ask", ask_approver, folder, order_id, amount, None,
             ctx.idempotency_key("ask", order_id))
    if ctx.wait_for_signal("approval", timeout=3 * DAY) is None:
        ctx.step("escalate", escalate, folder, order_id, ctx.idempotency_key("escalate", order_id))
        return {"order": order_id, "outcome": "escalated"}
    ctx.step("refund", pay, folder, order_id, amount, ctx.idempotency_key("refund", order_id))
    ctx.step("email", tell_customer, folder, order["email"], order_id, amount,
             ctx.idempotency_key("email", order_id))
    return {"order": order_id, "outcome": "refunded"}


def tell_customer_in_cents(folder, to, order_id, amount, key):
    """The email step as a later deploy shipped it: the amount printed in cents."""
    return world_at(folder).mailer.send(to, f"${amount * 100} refunded for {order_id}",
                                        idempotency_key=key)


GIVEN = (lookup_order, fraud_check, ask_approver, pay, tell_customer, escalate, refund_v1,
         tell_customer_in_cents)


# the grader's own code for q2 and q3 -------------------------------------------------------
def _gated(ctx, folder, order_id, amount):
    """The fraud check behind a patch gate in version 1: what q2's check deploys."""
    order = ctx.step("lookup", lookup_order, folder, order_id)
    score = None
    if ctx.patched(GATE):
        score = ctx.step("fraud-check", fraud_check, folder, order_id,
                         ctx.idempotency_key("fraud-check", order_id))
    ctx.step("ask", ask_approver, folder, order_id, amount, score, ctx.idempotency_key("ask", order_id))
    return _approved_then_paid(ctx, folder, order, order_id, amount, tell_customer)


def _sending(email):
    """Version 1 with the customer email sent by `email`: q3 deploys it with the bug, then
    with the fix (same steps, same names: a fork's copied history fits both)."""
    def refund(ctx, folder, order_id, amount):
        order = ctx.step("lookup", lookup_order, folder, order_id)
        ctx.step("ask", ask_approver, folder, order_id, amount, None, ctx.idempotency_key("ask", order_id))
        return _approved_then_paid(ctx, folder, order, order_id, amount, email)
    return refund


def _approved_then_paid(ctx, folder, order, order_id, amount, email):
    if ctx.wait_for_signal("approval", timeout=3 * DAY) is None:
        ctx.step("escalate", escalate, folder, order_id, ctx.idempotency_key("escalate", order_id))
        return {"order": order_id, "outcome": "escalated"}
    ctx.step("refund", pay, folder, order_id, amount, ctx.idempotency_key("refund", order_id))
    ctx.step("email", email, folder, order["email"], order_id, amount, ctx.idempotency_key("email", order_id))
    return {"order": order_id, "outcome": "refunded"}


def _forget(name):
    """What a new process knows of workflow `name`: nothing until its code registers it.

    A deploy replaces the process, so the code that runs after it is exactly what
    `deploy(name)` registers. `name` is one this check made up: no other code uses it."""
    forget(name)


# one deploy day, in a private folder -------------------------------------------------------
PARKED = "parked on its approval"
APPROVED = "approved before the deploy, not yet continued"
PAID = "paid and completed before the deploy"
KILLED_AFTER_REFUND = "killed before the deploy right after its refund was paid"
NEVER_STARTED = "killed before its first checkpoint"
AFTER_LOOKUP = "killed right after its lookup was recorded"
NEW = "started after the deploy"
ASKED_BEFORE = (PARKED, APPROVED, PAID, KILLED_AFTER_REFUND)    # recorded 'ask' on v1
KINDS = ("in time", "late", "never")                            # when a yes comes, if at all


@dataclass
class Order:
    order_id: str
    amount: int
    run_id: str
    story: str                         # how the run stood at the deploy, for messages
    answer_at: Optional[float] = None  # when the approver says yes (None: never)
    crash: Optional[str] = None        # the step a process dies right after, once approved
    answered: bool = False             # the yes was delivered (or came after the run ended)
    refunded: bool = False             # the truth: a yes delivered by the run's deadline

    def __str__(self):
        return f"order {self.order_id} ({self.story})"


class Day:
    """A deploy day: a world, a store and a fake clock in `folder`, v1 in production under a
    name drawn for this test. Every action is taken by a new Engine — a new process — with
    ids of its own, as uuid4 would give them."""

    def __init__(self, folder, draw):
        self.draw, self.folder = draw, folder
        self.world = os.path.join(folder, "world")
        self.store_path = os.path.join(folder, "runs.db")
        self.name = f"ex12-refund-{draw.token(6)}"
        self.clock = FakeClock(START + draw.randint(0, 90) * DAY + draw.randint(0, 23) * HOUR)
        self.numbers = iter(draw.sample(range(100, 10000), 60))   # one customer per order
        self.ids = draw.child("ids")
        self.orders, self.stores, self.processes = [], [], 0
        self.deployed_at, self._reader = None, None
        workflow(self.name, 1)(refund_v1)

    def close(self):
        for store in self.stores:
            store.close()
        _forget(self.name)
        _forget(self.name + "-eu")

    def engine(self, crash=None):
        self.processes += 1
        store = SQLiteStore(self.store_path)
        self.stores.append(store)
        return Engine(store, self.clock, ids=SeededIds(self.ids.token(12)), seed=0,
                      worker=f"process-{self.processes}", crash_at=crash)

    def later(self, low, high):
        self.clock.advance(self.draw.randint(low, high) * MINUTE)

    # runs ------------------------------------------------------------------------------------
    def order(self, story, ours=True) -> Order:
        """A new order, with a customer of its own. `ours`: a run of this day's workflow (the
        orders the checks judge), not of another one in the same store."""
        order_id = f"{self.draw.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}-{next(self.numbers)}"
        order = Order(order_id, self.draw.amount(), f"refund-{order_id}-{self.draw.token(4)}", story)
        if ours:
            self.orders.append(order)
        return order

    def start(self, order, wf=None, crash=None):
        """Start the order's run (by name: the newest version registered), maybe killing
        its process at `crash`."""
        try:
            self.engine(crash).start(wf or self.name, self.world, order.order_id, order.amount,
                                     run_id=order.run_id)
        except Crash:
            pass
        except WorkflowNotRegistered as exc:
            raise Fail(f"a run started after the deploy found no code: {exc}",
                       "deploy(name) must register the code new runs start on under `name`") from None

    def say_yes(self, order, crash=None):
        """The approver's yes, then a process continues the run (and maybe dies)."""
        self.say_yes_later(order)
        self.resume(order, crash)

    def say_yes_later(self, order):
        """The approver's yes; the run continues at the next recover(). A yes sent after the
        run's deadline is kept for nobody: the run escalates."""
        engine = self.engine()
        order.answered = True
        order.refunded = self.clock() <= engine.get(order.run_id).wake_at
        engine.signal(order.run_id, "approval")

    def resume(self, order, crash=None):
        try:
            self.engine(CrashAt(crash, AFTER_EFFECT) if crash else None).resume(order.run_id)
        except (Crash, NonDeterminismError, WorkflowNotRegistered, LeaseHeldError):
            pass                                 # the end of the day shows what became of it

    def recover(self):
        self.engine().recover()

    @property
    def reader(self):
        """The grader's own view of the store (not a process of the workflow's)."""
        if self._reader is None:
            self._reader = SQLiteStore(self.store_path)
            self.stores.append(self._reader)
        return self._reader

    def record(self, run_id):
        return self.reader.get_run(run_id)

    # the day ---------------------------------------------------------------------------------
    def before_deploy(self, parked=(2, 4), approved=(1, 2), paid=(1, 2), killed=True):
        """v1 in production: runs in every state a deploy can find them in."""
        for story, (low, high) in ((PARKED, parked), (APPROVED, approved), (PAID, paid)):
            for _ in range(self.draw.randint(low, high)):
                self.start(self.order(story))
                self.later(5, 50)
        if killed:
            self.start(self.order(KILLED_AFTER_REFUND))
            self.later(5, 50)
        for order in self.story(PAID):
            self.say_yes_later(order)
        self.recover()
        for order in self.story(KILLED_AFTER_REFUND):
            self.later(5, 50)
            self.say_yes(order, crash="refund")
        self.later(5, 50)
        for order in self.story(APPROVED):
            self.say_yes_later(order)
        self.later(5, 50)

    def not_reached(self):
        """Runs the deploy finds before they reached the point where the new step goes."""
        self.start(self.order(NEVER_STARTED), crash=CrashAt("lookup", BEFORE_STEP))
        self.later(2, 10)

    def deploy(self, deploy):
        """A new process: it knows exactly the code `deploy(name)` registers."""
        needs_callable(deploy, "deploy")
        _forget(self.name)
        try:
            deploy(self.name)
        except NotImplementedError:
            raise NotAttempted("deploy still raises NotImplementedError") from None
        except Exception as exc:           # noqa: BLE001 - the learner's code: feedback, not a traceback
            raise Fail(f"deploy({self.name!r}) raised {type(exc).__name__}: {exc}") from None
        if not registered().get(self.name):
            raise Fail(f"deploy({self.name!r}) registered no workflow under {self.name!r}",
                       "register the code under the name deploy() is given: "
                       "dl.workflow(name, version=...)(fn) (the check picks a new name each time)")
        self.deployed_at = self.clock()

    def after_deploy(self, new=(3, 5)):
        """New runs, then approvals at drawn times over five days, processes killed right
        after a step ran, and a scheduler that recovers every three hours."""
        killed_at = ["fraud-check", "ask"]     # the first two new runs' processes die there
        for _ in range(self.draw.randint(*new)):
            self.later(10, 90)
            step = killed_at.pop(0) if killed_at else None
            self.start(self.order(NEW), crash=CrashAt(step, AFTER_EFFECT) if step else None)
        self.recover()
        self.schedule_answers()
        while self.clock() < self.deployed_at + 5 * DAY:
            self.clock.advance(3 * HOUR)
            self.recover()
            for order in self.orders:
                if not order.answered and (order.answer_at or float("inf")) <= self.clock():
                    self.answer(order)
        for _ in range(3):                     # the last deadlines pass; a final sweep of recover()
            self.clock.advance(DAY)
            self.recover()

    def schedule_answers(self):
        """Draw when each waiting order's yes comes: in time, too late, or never. Every day
        has an old run approved in time (its process dies right after the email) and one
        approved too late, a new run approved in time (its process dies right after the
        refund) and one never approved; the others are drawn."""
        for index, order in enumerate(self.story(PARKED)):
            deadline = self.record(order.run_id).wake_at or self.deployed_at + 2 * DAY
            kind = ("in time", "late")[index] if index < 2 else self.draw.choice(KINDS)
            order.answer_at = self.when(kind, deadline)
            order.crash = "email" if index == 0 else self.draw.choice([None, None, "refund", "email"])
        for index, order in enumerate(self.story(NEW) + self.story(NEVER_STARTED)):
            deadline = self.deployed_at + 3 * DAY         # roughly: they park soon after the deploy
            kind = ("in time", "never")[index] if index < 2 else self.draw.choice(KINDS)
            order.answer_at = self.when(kind, deadline)
            order.crash = "refund" if index == 0 else self.draw.choice([None, None, "refund", "email"])

    def when(self, kind, deadline):
        if kind == "never":
            return None
        if kind == "late":
            return deadline + self.draw.randint(1, 30) * HOUR
        return self.deployed_at + self.draw.uniform(HOUR, deadline - self.deployed_at - 7 * HOUR)

    def answer(self, order):
        record = self.record(order.run_id)
        if record.status == RUNNING:
            return                             # a process died in it: answer once it is recovered
        if record.status != WAITING:
            order.answered = True              # too late (it escalated), or it went wrong:
            return                             # either way, no refund is owed
        self.say_yes(order, crash=order.crash)

    def story(self, story):
        return [o for o in self.orders if o.story == story]

    # what the day left behind ----------------------------------------------------------------
    def records(self):
        """The runs of this day's workflow, as the store has them."""
        return [r for r in self.reader.list_runs() if r.workflow == self.name]

    def entries(self, run_id):
        return self.reader.load_entries(run_id)


@contextmanager
def _a_day(draw):
    """A Day in a scratch folder of its own, closed (stores, workflows) whatever happens."""
    with scratch("ex12") as folder:
        day = Day(folder, draw)
        try:
            yield day
        finally:
            day.close()


def _play(deploy, day):
    day.before_deploy()
    day.not_reached()
    day.deploy(deploy)
    day.after_deploy()


def _refunds_of(world, order_id) -> list:
    """The refunds the payments provider recorded for one order, read from its file."""
    return [r for r in world.refunds() if r["provider"] == "payments" and r["order_id"] == order_id]


def _fraud_checks(world):
    """{order id: [scores]} from the world's fraud-check ledger."""
    out = {}
    for record in world.records("fraud-checks"):
        out.setdefault(record["detail"]["order"], []).append(record["detail"]["score"])
    return out


ASK = re.compile(r"Approve \$(?P<amount>\S+) for (?P<order>\S+)\? \((?P<risk>.*)\)")


def _asks(world):
    """{order id: [what each approval email said about fraud]}."""
    out = {}
    for message in world.mail(APPROVER):
        match = ASK.fullmatch(message["subject"])
        if match:
            out.setdefault(match["order"], []).append(match["risk"])
    return out


# q1 ------------------------------------------------------------------------------------------
KEEP_OLD_PATH = ("a run recorded before the deploy replays its history on the code deployed "
                 "now: it must meet the calls it recorded, in their order (lesson 12, sections "
                 "2 to 4)")
KEEP_OLD_CODE = ("a deploy replaces the process: the new one must still register the code of "
                 "every version that has unfinished runs")
SAME_KEYS = ("pay, ask and tell with the keys v1 uses (ctx.idempotency_key(\"refund\", order_id) "
             "and so on): a step that runs again after a crash, or on the new code, is then "
             "recognised by the provider")
CHECK_FIRST = ("the new step goes between 'lookup' and 'ask', in a step with a key of its own, "
               "and its score goes to ask_approver in place of None")
NEW_KEY = ("every effect of the new code goes through a step with a key derived with "
           "ctx.idempotency_key(...): the fraud check too")


@q1.test("right after the deploy, every unfinished run's history replays on the deployed code "
         "(engine.check_replay)",
         hint=KEEP_OLD_PATH)
def _(deploy, draw):
    with _a_day(draw) as day:
        day.before_deploy()
        day.not_reached()
        day.deploy(deploy)
        engine = day.engine()
        for order in day.orders:
            record = day.record(order.run_id)
            if record.status == COMPLETED:
                continue
            try:
                check = engine.check_replay(order.run_id)
            except WorkflowNotRegistered:
                raise Fail(f"{order} is a run of version {record.version}, and the new process "
                           f"has only version(s) {registered().get(day.name, [])} of "
                           f"{day.name!r}: nothing can ever continue it", KEEP_OLD_CODE) from None
            if not check.ok:
                raise Fail(f"{order} does not fit the deployed code: {check.error}", KEEP_OLD_PATH)


def _finished_runs(day):
    """{run id: Run} once the day is over; Fail for the first run that did not complete."""
    engine = day.engine()
    runs = {order.run_id: engine.get(order.run_id) for order in day.orders}
    for order in day.orders:
        run = runs[order.run_id]
        if run.status == COMPLETED:
            continue
        if diverged(run.status, run.error):
            raise Fail(f"{order} diverged when it continued after the deploy: "
                       f"{(run.error or '').split('. ')[0]}", KEEP_OLD_PATH)
        if run.version not in registered().get(day.name, []):
            raise Fail(f"{order} is still {run.status}, days after its deadline: it is a run of "
                       f"version {run.version}, and the new process has no code for it, so "
                       "recover() leaves it alone", KEEP_OLD_CODE)
        raise Fail(f"{order} ended {run.status}" + (f": {run.error}" if run.error else ""),
                   "call each step with the arguments v1 passes, and return what v1 returns")
    return runs


@q1.test("a whole deploy day (approvals in time, too late and never; processes killed right "
         "after a step ran): every run completes, each approved order is paid once, the "
         "approver is asked once per order, each customer told once",
         hint=SAME_KEYS)
def _(deploy, draw):
    with _a_day(draw) as day:
        _play(deploy, day)
        runs = _finished_runs(day)
        world = Ledgers(day.world)
        asks = _asks(world)
        for order in day.orders:
            outcome = "refunded" if order.refunded else "escalated"
            result = {"order": order.order_id, "outcome": outcome}
            if runs[order.run_id].result != result:
                raise Fail(f"{order}: the run returned {runs[order.run_id].result!r}; "
                           f"expected {result!r}", "return what v1 returns, from every version")
            paid = _refunds_of(world, order.order_id)
            said = "approved in time" if order.refunded else "not approved in time"
            if len(paid) != (1 if order.refunded else 0):
                raise Fail(f"{order} was {said}, and the provider paid it {len(paid)} times",
                           SAME_KEYS)
            if paid and paid[0]["amount"] != order.amount:
                raise Fail(f"{order} was paid {paid[0]['amount']:g}, not {order.amount}")
            asked = len(asks.get(order.order_id, []))
            if asked != 1:
                raise Fail(f"{order}: the approver was asked {asked} times; expected once",
                           SAME_KEYS)
            told = len(world.mail(lookup_order(day.world, order.order_id)["email"]))
            if told != (1 if order.refunded else 0):
                raise Fail(f"{order} was {said}, and its customer got {told} emails; expected "
                           f"{1 if order.refunded else 0}", SAME_KEYS)
        escalated = sum(not o.refunded for o in day.orders)
        if len(world.mail(LEAD)) != escalated:
            raise Fail(f"{escalated} orders waited past their deadline, and the lead got "
                       f"{len(world.mail(LEAD))} emails", SAME_KEYS)


STEP_NAMES = ("the question names the new step \"fraud-check\": its name is how a history, a "
              "dashboard or a crash point finds it, and it must be a step of the run, between "
              "\"lookup\" and \"ask\"")


def _expect_step_names(day, order):
    """A new run's history holds lookup, fraud-check, ask, in that order, at its start."""
    names = [e.name for e in day.entries(order.run_id) if e.kind == STEP]
    if names[:3] != ["lookup", GATE, "ask"]:
        raise Fail(f"{order}: the run recorded the steps {names}; a run started after the "
                   f"deploy starts with 'lookup', {GATE!r}, 'ask'", STEP_NAMES)


@q1.test("every run started after the deploy is fraud-checked once, in a step 'fraud-check' "
         "before the approver is asked (the approval email shows its score); runs that asked "
         "before the deploy are not",
         hint=CHECK_FIRST)
def _(deploy, draw):
    with _a_day(draw) as day:
        _play(deploy, day)
        world = Ledgers(day.world)
        checks, asks = _fraud_checks(world), _asks(world)
        for order in day.orders:
            if order.story == NEW:
                _expect_step_names(day, order)
            scores, said = checks.get(order.order_id, []), asks.get(order.order_id, [])
            if order.story in ASKED_BEFORE and scores:
                raise Fail(f"{order} asked the approver before the deploy, yet was "
                           f"fraud-checked {len(scores)} time(s) after it",
                           "a run that went past the new step's place on the old code "
                           "follows the path it recorded")
            if order.story == NEW and len(scores) != 1:
                raise Fail(f"{order} was fraud-checked {len(scores)} times; expected once",
                           CHECK_FIRST if not scores else NEW_KEY)
            if len(scores) > 1:
                raise Fail(f"{order} was fraud-checked {len(scores)} times; expected at most once",
                           NEW_KEY)
            if scores and f"fraud score {scores[0]}" not in said:
                raise Fail(f"{order} was fraud-checked (score {scores[0]}), but the approval "
                           f"email said {said!r}: the approver must be asked after the check, "
                           "with its score", CHECK_FIRST)


def _sweep(deploy, draw, waits, what):
    """Sweep the code new runs start on after the deploy (the newest version of a new name)."""
    needs_callable(deploy, "deploy")
    name = f"ex12-refund-{draw.token(6)}"
    try:
        try:
            deploy(name)
        except NotImplementedError:
            raise NotAttempted("deploy still raises NotImplementedError") from None
        except Exception as exc:           # noqa: BLE001 - the learner's code
            raise Fail(f"deploy({name!r}) raised {type(exc).__name__}: {exc}") from None
        if not registered().get(name):
            raise Fail(f"deploy({name!r}) registered no workflow under {name!r}",
                       "register the code under the name deploy() is given")
        ids = draw.child("run ids")
        order_id = f"{draw.choice('ABCDEFGH')}-{draw.randint(100, 9999)}"
        return sweep_of(latest(name), order_id, draw.amount(), what=what, waits=waits,
                        run_id=lambda case: ids.run_id("refund"))
    finally:
        _forget(name)


def _no_crash_changes_anything(s):
    for row in s.rows:
        if row["duplicates"] or row["lost"]:
            changes = {**row["duplicates"], **{k: -n for k, n in row["lost"].items()}}
            raise Fail(f"a new run killed {crash_label(row)}, then resumed: {changes} compared "
                       "with a run that was never killed", NEW_KEY)
        if not row["same_result"]:
            raise Fail(f"a new run killed {crash_label(row)}, then resumed, returned "
                       f"{row['result']!r}; a run never killed returned {s.clean['result']!r}")


def _expect_effects(s, want, outcome, when):
    got = {k: s.clean["effects"].get(k, 0) for k in want}
    result = s.clean["result"] or {}
    if got != want or result.get("outcome") != outcome:
        raise Fail(f"{when}, never killed, returned {s.clean['result']!r} and left {got} in the "
                   f"world; expected the outcome {outcome!r} and {want}",
                   CHECK_FIRST if got.get("fraud-checks") != 1 else SAME_KEYS)


@q1.test("a new run, approved, killed at any point and resumed: one fraud check, one approval "
         "email, one refund, one customer email",
         hint=NEW_KEY)
def _(deploy, draw):
    s = _sweep(deploy, draw, {"approval": True}, "a new run after the deploy")
    _expect_effects(s, {"refunds": 1, "emails": 2, "fraud-checks": 1}, "refunded",
                    "a new run approved at once")
    _no_crash_changes_anything(s)


@q1.test("a new run nobody approves, killed at any point and resumed: one fraud check, one "
         "approval email, one escalation, no refund",
         hint="without an answer in three days the new code escalates, as v1 does")
def _(deploy, draw):
    s = _sweep(deploy, draw, {"approval": None}, "a new run after the deploy, never approved")
    _expect_effects(s, {"refunds": 0, "emails": 2, "fraud-checks": 1}, "escalated",
                    "a new run nobody approved")
    _no_crash_changes_anything(s)


# q2 ------------------------------------------------------------------------------------------
def _gate_deploy(name):
    workflow(name, 1)(_gated)


def _old_branch(day):
    """The truth, from the histories: unfinished runs of the workflow that recorded 'ask'
    without the gate's marker went past the gate on the old branch."""
    out = []
    for record in day.records():
        if record.status == COMPLETED:
            continue
        entries = day.entries(record.run_id)
        asked = any(e.kind == STEP and e.name == "ask" for e in entries)
        if asked and not any(e.kind == PATCH for e in entries):
            out.append(record.run_id)
    return out


def _snapshot(day):
    return [(r.run_id, r.status, r.updated_at, r.version, len(day.entries(r.run_id)))
            for r in day.reader.list_runs()]


BRANCH = ("what matters is the branch each unfinished run's history holds at the gate, not its "
          "status, its version or the clock (lesson 12, section 5)")
DEADLINES = ("a deadline that has passed changes nothing until a process continues the run: "
             "until then its history still ends on the old branch")
NOT_REACHED = ("a run with nothing recorded at the gate's place takes the new branch when it "
               "continues; and only runs of the workflow `name` count")


def _probe(day, can_retire, moment, hint):
    """Ask can_retire at this moment, and compare with the truth the histories hold."""
    needs_callable(can_retire, "can_retire")
    by_run = {o.run_id: o for o in day.orders}
    old = _old_branch(day)
    before = _snapshot(day)
    try:
        answer = can_retire(day.engine(), day.name)
    except NotImplementedError:
        raise NotAttempted("can_retire still raises NotImplementedError") from None
    except Exception as exc:               # noqa: BLE001 - the learner's code
        raise Fail(f"{moment}, can_retire(engine, {day.name!r}) raised "
                   f"{type(exc).__name__}: {exc}") from None
    if _snapshot(day) != before:
        raise Fail(f"{moment}, can_retire changed the runs in the store",
                   "only look: no recover(), resume() or signal() in can_retire")
    if not isinstance(answer, bool):
        raise Fail(f"{moment}, can_retire returned {answer!r}, a {type(answer).__name__}; "
                   "return True or False",
                   "turn what you found into a bool, e.g. not a_list_of_runs")
    if answer and old:
        who = ", ".join(str(by_run[r]) for r in old[:3]) + (" and more" if len(old) > 3 else "")
        raise Fail(f"{moment}, can_retire said True, but {len(old)} unfinished run(s) went past "
                   f"the gate on the old branch: {who}. Without that branch they would diverge "
                   "when they continue.", hint)
    if not answer and not old:
        unfinished = [o for o in day.orders if day.record(o.run_id).status != COMPLETED]
        stories = sorted({o.story for o in unfinished})
        raise Fail(f"{moment}, can_retire said False, but no unfinished run of {day.name!r} is on "
                   f"the old branch (the {len(unfinished)} unfinished: "
                   f"{'; '.join(stories) or 'none'})", hint)


@q2.test("while old runs finish one by one (one of them killed mid-refund), with new runs "
         "waiting: True exactly when no unfinished run went past the gate on the old branch",
         hint=BRANCH)
def _(can_retire, draw):
    with _a_day(draw) as day:
        day.before_deploy(parked=(2, 4), approved=(0, 0), paid=(0, 1), killed=False)
        day.deploy(_gate_deploy)
        _probe(day, can_retire, "right after the deploy", BRANCH)
        for _ in range(draw.randint(1, 3)):
            day.later(10, 90)
            day.start(day.order(NEW))
        old = day.story(PARKED)
        draw.shuffle(old)
        for i, order in enumerate(old):
            day.later(30, 300)
            killed = i == len(old) - 1
            day.say_yes(order, crash="refund" if killed else None)
            died = " (its process died right after the refund was paid)" if killed else ""
            _probe(day, can_retire, f"after {i + 1} of {len(old)} old runs were approved{died}",
                   BRANCH)
        day.later(1, 10)
        day.recover()
        _probe(day, can_retire, "after every old run finished, new ones still waiting", BRANCH)
        for order in day.story(NEW):
            day.say_yes(order)
        _probe(day, can_retire, "after every run finished", BRANCH)


@q2.test("past every old run's deadline, before the scheduler has run: False; after recover() "
         "let them escalate: True",
         hint=DEADLINES)
def _(can_retire, draw):
    with _a_day(draw) as day:
        day.before_deploy(parked=(2, 4), approved=(0, 0), paid=(0, 1), killed=False)
        day.deploy(_gate_deploy)
        day.later(120, 600)
        for _ in range(draw.randint(1, 2)):
            day.start(day.order(NEW))
            day.later(10, 90)
        last = max(day.record(o.run_id).wake_at for o in day.story(PARKED))
        day.clock.advance(last - day.clock() + draw.randint(1, 60) * MINUTE)
        _probe(day, can_retire, "past every old run's deadline, before recover()", DEADLINES)
        day.recover()
        _probe(day, can_retire, "after recover() escalated the old runs (new ones still waiting)",
               DEADLINES)


@q2.test("old runs that never reached the gate, and runs of another workflow, do not need the "
         "old branch: True once the runs that went past it have finished",
         hint=NOT_REACHED)
def _(can_retire, draw):
    with _a_day(draw) as day:
        eu = workflow(day.name + "-eu", 1)(refund_v1)     # another workflow, same old code
        for _ in range(draw.randint(1, 2)):
            day.start(day.order("a run of another workflow", ours=False), wf=eu)
        day.before_deploy(parked=(1, 3), approved=(0, 0), paid=(0, 0), killed=False)
        day.start(day.order(AFTER_LOOKUP), crash=CrashAt("lookup", AFTER_CHECKPOINT))
        day.not_reached()
        day.deploy(_gate_deploy)
        _probe(day, can_retire, "right after the deploy", NOT_REACHED)
        for order in day.story(PARKED):
            day.later(30, 300)
            day.say_yes(order)
        _probe(day, can_retire, "after the old runs that had asked finished (two were killed "
                                "before asking; runs of another workflow still wait)", NOT_REACHED)
        day.later(1, 10)
        day.recover()
        _probe(day, can_retire, "after recover() continued the runs killed before asking",
               NOT_REACHED)


# q3 ------------------------------------------------------------------------------------------
ENTRY = """

def _grader_resend(store_path, now, name, ids, run_ids):
    from durable_lite.grading.exercises.ex12_versioning import fresh_process_resend
    fresh_process_resend(resend, store_path, now, name, ids, run_ids)
"""


def fresh_process_resend(resend, store_path, now, name, ids, run_ids):
    """In the new process: the fixed code is deployed (registered), then resend runs."""
    workflow(name, 1)(_sending(tell_customer))
    engine = Engine(SQLiteStore(store_path), FakeClock(now), ids=SeededIds(ids), seed=0,
                    worker="process-fresh")
    resend(engine, run_ids)


def _portable(resend):
    """resend's source for a new process, taken before anything has called it."""
    needs_callable(resend, "resend")
    try:
        return module_source(resend, extra=ENTRY, call_as={"resend": resend})
    except NotPortable as exc:
        raise Fail(str(exc)) from None


DEDUPED = ("the mailer sends once per key, and this run's email step already used its key: "
           "running that step again inside the same run sends nothing new")
REPEATED = ("a second call, in a new process, did it all again: what could it find, in the "
            "store, of what the first call made?")
STARTS_AT = ("a fork executes every step from the one it starts at: start at the first step "
             "that must happen again")
CARRY_ON = ("an earlier call made something for this customer and died before its corrected "
            "email went out: it is still in the store, unfinished, and nothing sees it through "
            "unless a later call does (a call that passes it by leaves the customer without one)")
# How the calls of the crash test die, one after the other, each in a new process: right
# before a corrected email goes out (what the call made is left unfinished, the email never
# sent), then right after one went out (sent, but not yet recorded as sent).
DIES_PART_WAY = (CrashAt("email", BEFORE_STEP), CrashAt("email", AFTER_EFFECT))


class Receipts:
    """Runs that completed with correct emails, then with the cents bug; then the fix."""

    def __init__(self, day):
        self.folder, self.day, draw = day.folder, day, day.draw
        self.good, self.bad = [], []
        for group, email, story in ((self.good, tell_customer, "told before the bug shipped"),
                                    (self.bad, tell_customer_in_cents, "told by the buggy step")):
            workflow(day.name, 1)(_sending(email))          # a deploy: the same steps, new email
            for _ in range(draw.randint(2, 3)):
                order = day.order(story)
                day.start(order)
                day.later(5, 50)
                day.say_yes(order)
                group.append(order)
                day.later(5, 50)
        day.start(day.order("escalated: never approved, no customer email"))
        day.clock.advance(3 * DAY + HOUR)
        day.recover()
        workflow(day.name, 1)(_sending(tell_customer))      # the fix is deployed
        day.later(60, 600)
        self.ledgers = Ledgers(day.world)

    def state(self):
        """What the world holds for each order: refunds, the customer's emails, approver asks."""
        asks = _asks(self.ledgers)
        out = {}
        for order in self.day.orders:
            email = lookup_order(self.day.world, order.order_id)["email"]
            out[order.order_id] = {
                "refunds": len(_refunds_of(self.ledgers, order.order_id)),
                "customer emails": [m["subject"] for m in self.ledgers.mail(email)],
                "approver asked": len(asks.get(order.order_id, []))}
        out["lead emails"] = len(self.ledgers.mail(LEAD))
        return out

    def resend(self, resend, crash=None):
        """resend, in this process (which dies at `crash`, if given)."""
        needs_callable(resend, "resend")
        try:
            resend(self.day.engine(crash), [o.run_id for o in self.bad])
        except NotImplementedError:
            raise NotAttempted("resend still raises NotImplementedError") from None
        except Crash:
            pass                               # the process died: the next call is a new one
        except Exception as exc:           # noqa: BLE001 - the learner's code
            raise Fail(f"resend(engine, run_ids) raised {type(exc).__name__}: {exc}") from None

    def resend_in_a_new_process(self, source):
        """resend again, in a fresh Python process: it knows only the code (and the constants,
        as they were before the first call) that `source` holds — no memory of that call."""
        write_module(self.folder, source)
        day = self.day
        run = run_fresh(self.folder, "_grader_resend", day.store_path, day.clock(), day.name,
                        day.ids.token(12), [o.run_id for o in self.bad])
        if run.finished:
            return
        if run.error and "NotImplementedError" in run.error:
            raise NotAttempted("resend still raises NotImplementedError")
        raise Fail(f"resend, called again in a new process, failed: "
                   f"{run.error or f'exit status {run.returncode}'}",
                   "the check copies resend, and the functions, imports and constants it uses, "
                   "into a new process: keep what it needs in them")

    def expect(self, before, after, when):
        """Each listed customer: one more email, the corrected one; nothing else changed."""
        listed = {o.order_id: o for o in self.bad}
        for order in self.day.orders:
            was, now = before[order.order_id], after[order.order_id]
            if now["refunds"] != was["refunds"]:
                raise Fail(f"{when}, order {order.order_id} was paid {now['refunds']} times "
                           f"(before: {was['refunds']})", STARTS_AT)
            if now["approver asked"] != was["approver asked"]:
                raise Fail(f"{when}, the approver was asked about order {order.order_id} again",
                           STARTS_AT)
            new = now["customer emails"][len(was["customer emails"]):]
            if order.order_id not in listed:
                if new:
                    raise Fail(f"{when}, the customer of {order}, which is not in run_ids, "
                               f"got {new!r}", "act on the runs in run_ids only")
                continue
            right = f"${order.amount} refunded for {order.order_id}"
            if new != [right]:
                left = [] if new else self.left_unfinished(order)
                hint = (REPEATED if len(new) > 1 else CARRY_ON if left else DEDUPED if not new
                        else "the email step of the run you make must execute on the code "
                             "deployed now")
                raise Fail(f"{when}, the customer of order {order.order_id} (told "
                           f"{was['customer emails'][-1]!r}) got {len(new)} more email(s)"
                           + (f": {new!r}" if new else "") + f"; expected one: {right!r}"
                           + "".join(f"; the store still holds run {r.run_id!r} for this order, "
                                     f"{r.status}" for r in left[:2]), hint)
        if after["lead emails"] != before["lead emails"]:
            more = after["lead emails"] - before["lead emails"]
            raise Fail(f"{when}, the lead got {more} more emails")

    def left_unfinished(self, order):
        """Runs for `order` that a call of resend made (not the day's own) and that have not
        completed: a process died in them, and nothing has seen them through since."""
        ours = {o.run_id for o in self.day.orders}
        return [r for r in self.day.reader.list_runs()
                if r.run_id not in ours and r.status != COMPLETED
                and order.order_id in json.loads(r.args_json)]


@q3.test("one corrected email to each customer of run_ids; nobody paid or asked again, "
         "nobody else mailed",
         hint=DEDUPED)
def _(resend, draw):
    with _a_day(draw) as day:
        receipts = Receipts(day)
        before = receipts.state()
        receipts.resend(resend)
        receipts.expect(before, receipts.state(), "after resend(engine, run_ids)")


@q3.test("resend called again, by a new process (a retry of the whole job): nothing more "
         "happens", hint=REPEATED)
def _(resend, draw):
    source = _portable(resend)
    with _a_day(draw) as day:
        receipts = Receipts(day)
        before = receipts.state()
        receipts.resend(resend)
        once = receipts.state()
        receipts.day.later(30, 120)
        receipts.resend_in_a_new_process(source)
        receipts.expect(before, once, "after the first call")
        receipts.expect(before, receipts.state(), "after a second call, in a new process")


@q3.test("the process dies in the middle of resend, once right before a corrected email went "
         "out, then (the next call) right after one went out; resend again in a new process: "
         "still one corrected email per customer",
         hint="calls died part-way, before and after a corrected email went out: each later "
              "call must see through what the earlier ones made, neither making it again nor "
              "passing it by")
def _(resend, draw):
    source = _portable(resend)
    with _a_day(draw) as day:
        receipts = Receipts(day)
        before = receipts.state()
        for crash in DIES_PART_WAY:
            receipts.resend(resend, crash=crash)
            receipts.day.later(30, 120)        # the dead process's lease runs out meanwhile
        receipts.resend_in_a_new_process(source)
        receipts.expect(before, receipts.state(),
                        "after two calls that died part-way and a third, in a new process")
