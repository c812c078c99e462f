"""Exercise 05: make a model call a step (and a coin flip a recorded draw), then refresh a
stale memo on purpose.

q1 is judged on every branch the task describes, every time: tickets are drawn until one
makes the model's answer name a refund (the "refunds" desk) and one does not ("helpdesk"),
and coins are seeded so that each desk is met once audited and once not. `dl.faults.sweep`
counts the model calls at every crash point. The replay tests keep a loop of their own: an
unrecorded coin only shows when Python's generator is seeded differently for the resume,
which the sweep (rightly) never does.

q2 refreshes a statement run whose first step comes before the stale one, so forgetting the
whole run is told apart from forgetting the stale step and what followed it.

The properties a right answer has, each judged by the test that names it, and how the cases
vary it (tests/test_grading_properties_01_07.py has, for each, an answer wrong in that
property alone, and it fails):

q1 triage(ctx, folder, ticket)  (drawn tickets, seeded coins; both desks, audit and not)
  - on every branch, crashed and resumed, the run follows the model's recorded answer and
    the recorded coin, and the mailer shows exactly those forwards (a fixed desk, or a
    triage that never audits, fails);
  - the boundary of the audit: coins land within 0.05 of 0.25, below it for the audited
    cases and above it for the others, so an audit at another rate (< 0.2, < 0.3, < 0.5)
    fails;
  - the model is called once per run, at every crash point (outside the model step's own
    window, where a second call cannot be helped);
  - a crash at any point never makes the replay diverge;
  - a crash at any point, then a resume: the uncrashed run's result (random.random() for
    the coin fails: the resume is seeded so that its draw lands on the other side);
  - the forwarding steps keep their names: the desk's own, and 'audit' (judged on every
    branch, inside the branch test, which the given code fails too: the exercise starts from
    code to fix, so every test must fail it; the model's step may be named freely).
q2 refresh_lookup(engine, run_id)  (drawn customer and addresses)
  - the same run, resumed, reads the new address and completes;
  - only the stale step and the steps after it run again, once each (forgetting the
    whole run fails);
  - a second move and a second refresh: the run follows again.
"""

import json
import os
import random

from ...faults import AFTER_CHECKPOINT, AFTER_EFFECT, CrashAt, every_crash_point
from ...run import Run
from ...workflow import workflow
from ..checks import Exercise, Fail
from ..harness import (EngineRuns, crash_label, diverged, needs_callable, needs_workflow,
                       scratch, step_names, sweep_of, unfinished)
from ..ledgers import Ledgers, replay_model

EXERCISE = Exercise("05_model_step", "The model call is a step",
                    lesson="notebooks/05_the_model_call_is_a_step.ipynb")

# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "a model call and a coin flip", answers=["triage"])

FORWARDS = ("refunds", "helpdesk", "audit")     # the steps whose names the task fixes
AUDIT_RATE = 0.25
NEAR = 0.05            # every coin lands within this of the rate, on the side its branch needs
PROMPT = "Classify this support ticket: {}"       # what the given classify() asks the model
ASKS = ("Where is my parcel {}?", "I was charged twice for order {}.",
        "Can I still change the address on {}?", "The blender from {} arrived broken.",
        "Please cancel {} before it ships.", "Why was {} delivered to my neighbour?")


class Case:
    """One ticket and one coin: which desk the model's answer points to, whether the run
    audits. `seed` seeds both coins a learner may use — the engine's ctx.random() and
    Python's random module (inside a step) — whose first draws are the same number."""

    def __init__(self, ticket, desk, audited, seed, resume_seed):
        self.ticket, self.desk, self.audited = ticket, desk, audited
        self.seed, self.resume_seed = seed, resume_seed
        self.coin = random.Random(seed).random()

    def __repr__(self):
        return f"ticket {self.ticket!r}"


def _coin_seed(draw, audit: bool, near: float = 1.0) -> int:
    """A seed whose first random() is below AUDIT_RATE (audit) or not, and within `near` of
    it: a coin just below and one just above the rate tell 0.25 from another threshold."""
    while True:
        seed = draw.randint(1, 2**31)
        coin = random.Random(seed).random()
        if (coin < AUDIT_RATE) == audit and abs(coin - AUDIT_RATE) < near:
            return seed


def cases(draw) -> list:
    """Four cases, one per branch: (refunds, helpdesk) x (audit, no audit), in drawn order.
    Each coin lands just below the audit rate (audit) or just above it (no audit), so an
    answer that audits at another rate meets a coin on the wrong side of its threshold."""
    tickets = {}
    while len(tickets) < 2:
        ticket = draw.choice(ASKS).format(draw.order_id())
        answer, = replay_model([PROMPT.format(ticket)])
        tickets.setdefault("refunds" if "refund" in answer else "helpdesk", ticket)
    out = [Case(tickets[desk], desk, audit, _coin_seed(draw, audit, near=NEAR),
                _coin_seed(draw, not audit))
           for desk in ("refunds", "helpdesk") for audit in (True, False)]
    draw.shuffle(out)
    return out


class CoinRuns(EngineRuns):
    """Runs of one case. The engine is seeded with the case's seed, and so is Python's
    global random generator before each execution — with the resume's seed before the
    resume, whose first draw lands on the other side of AUDIT_RATE. A coin drawn with
    random.random() in the orchestration, unrecorded, so comes out differently on every
    replay. The notebook's random state is put back afterwards."""

    def __init__(self, folder, case):
        super().__init__(folder, seed=case.seed)
        self.case = case

    def engine(self, crash=None, worker="worker-1", ids=None):
        random.seed(self.case.seed if worker == "worker-1" else self.case.resume_seed)
        return super().engine(crash, worker, ids)


def _triage(triage, case, crash=None, diverging_ok=False):
    """(run, world ledgers, step names) for one run of `case`, crashed once and resumed.
    diverging_ok: a replay that diverges is returned, not failed (the model test judges
    the model's calls alone)."""
    needs_workflow(triage, "triage")
    state = random.getstate()
    try:
        with scratch("ex05") as folder:
            runs = CoinRuns(folder, case)
            run_id = "triage-" + case.ticket.split()[-1].strip("?.")
            world = os.path.join(folder, "world")
            try:
                run = runs.run(triage, world, case.ticket, run_id=run_id, crash=crash)
                status, error = run.status, run.error
            except Exception as exc:        # today's engine raises NonDeterminismError
                run, status, error = None, "diverged", f"{type(exc).__name__}: {exc}"
                if not diverged(status, error):
                    raise
            if diverged(status, error) and not diverging_ok:
                where = "" if crash is None else f"crash {crash_label(crash)}, then resume: "
                raise Fail(f"{where}the replay diverged ({error.split('. ')[0]})",
                           "the replay must take the same branches: base them on recorded "
                           "values only (a step's result, ctx.random())")
            if status != "completed" and not diverged(status, error):
                unfinished(status, error, "triage")
            ledgers = Ledgers(world)
            facts = {"model": ledgers.model_calls(), "answers": ledgers.model_answers(),
                     "mail": [m["to"] for m in ledgers.mail()]}
            steps = step_names(runs.engine(), run_id) if run is not None else []
            return run, facts, steps
    finally:
        random.setstate(state)


def _follows_the_record(run, facts, case, where):
    """The run's result and its forwards follow the model's recorded answer and the coin."""
    result = run.result
    if not isinstance(result, dict) or not {"desk", "audited", "answer"} <= set(result):
        raise Fail(f"{where}: the run returned {result!r}; expected "
                   "{'desk': ..., 'audited': ..., 'answer': ...}")
    if facts["model"] != 1:
        raise Fail(f"{where}: the model was called {facts['model']} times; expected once")
    answer = facts["answers"][0]
    if result["answer"] != answer:
        raise Fail(f"{where}: the run returned the answer {result['answer']!r}, but the model "
                   f"answered {answer!r}", "return the text of the model's recorded answer")
    desk = "refunds" if "refund" in answer else "helpdesk"
    if result["desk"] != desk or facts["mail"].count(f"{desk}@example.com") != 1:
        raise Fail(f"{where}: the model answered {answer!r}, which "
                   f"{'names' if desk == 'refunds' else 'does not name'} a refund, so the "
                   f"ticket belongs to {desk!r}; the run returned desk {result['desk']!r} and "
                   f"forwarded to {facts['mail']}",
                   "choose the desk from the model's answer: 'refunds' if 'refund' is in its "
                   "text, else 'helpdesk', and forward there")
    audits = facts["mail"].count("audit@example.com")
    if result["audited"] is not case.audited or audits != int(case.audited):
        verdict = f"below {AUDIT_RATE}: audit" if case.audited else f"not below {AUDIT_RATE}: no audit"
        raise Fail(f"{where}: the run's first ctx.random() came out {case.coin:.3f} ({verdict}); the run "
                   f"returned audited {result['audited']!r} and sent {audits} ticket(s) to "
                   "audit@example.com",
                   f"draw the coin with ctx.random() (the check seeds it) and audit when it is "
                   f"below {AUDIT_RATE}, in a step named 'audit'")


@q1.test("every branch: a ticket for each desk, audited and not, each crashed once and "
         "resumed — the run follows the model's recorded answer and the recorded coin, and "
         "forwards accordingly, in the steps the task names (the desk's own, 'audit')",
         hint="the desk comes from the model's recorded answer, the audit from a coin drawn "
              "with ctx.random() (one ticket in four); return both, and the answer's text")
def _(triage, draw):
    for case in cases(draw):
        crash = CrashAt(case.desk, AFTER_CHECKPOINT)      # after the forward, before the coin
        run, facts, steps = _triage(triage, case, crash)
        where = f"{case}, crash {crash_label(crash)}, then resume"
        _follows_the_record(run, facts, case, where)
        _forwards_named(steps, run.result["desk"], case, where)


def _forwards_named(steps, desk, case, where):
    """The forwarding steps keep the names the task fixes: the desk's own, and 'audit'."""
    forwards = [name for name in steps if name in FORWARDS]
    want = [desk, "audit"] if case.audited else [desk]
    if forwards != want:
        raise Fail(f"{where} ({'audited' if case.audited else 'not audited'}): the run recorded "
                   f"the steps {steps}; the ticket's forwards should be recorded as {want}",
                   "the task keeps the names of the steps that forward the ticket: the step "
                   "that sends it to a desk is named after that desk, the audit's step is "
                   "'audit'; only a new step may be named as you like")


def _in_window(row):
    """A crash between a step's effect and its checkpoint runs that step again. For the model
    step (whatever its name) that is a second, different answer, and no replay can help."""
    return row["step"] not in FORWARDS and row["when"] == AFTER_EFFECT


@q1.test("the model is called once per run, not again on every replay",
         hint="call the model inside a step: a recorded answer costs nothing on replay")
def _(triage, draw):
    needs_workflow(triage, "triage")
    case = draw.choice(cases(draw))
    ids = draw.child("run ids")
    s = sweep_of(triage, case.ticket, what="triage", restart_after=3600,
                 run_id=lambda point: ids.run_id("triage"))
    calls = s.clean["effects"].get("llm_calls", 0)
    if calls != 1:
        raise Fail(f"{case}, no crash: the model was called {calls} times; expected once")
    for row in s.rows:
        calls = row["effects"].get("llm_calls", 0)
        allowed = 2 if _in_window(row) else 1
        if calls > allowed:
            raise Fail(f"crash {crash_label(row)}, then resume: the model was called {calls} "
                       f"times; expected {allowed}")


def _crash_cases(triage, draw):
    """An audited case and one that is not, each with its crash points."""
    chosen = []
    for audit in (True, False):
        case = next(c for c in cases(draw) if c.audited is audit)
        _, _, steps = _triage(triage, case)
        chosen.append((case, every_crash_point(steps)))
    return chosen


@q1.test("a crash at any point, then a resume: the replay never diverges",
         hint="the replay must take the same branches: base them on recorded values only "
              "(a step's result, ctx.random())")
def _(triage, draw):
    for case, crashes in _crash_cases(triage, draw):
        for crash in crashes:
            _triage(triage, case, crash)


@q1.test("a crash at any point (outside the model step's own window), then a resume: the same "
         "result as an uninterrupted run",
         hint="everything the result holds must come from recorded values: the model's answer "
              "from its step, the coin flip from ctx.random() (the check seeds the engine), "
              "never random.random()")
def _(triage, draw):
    for case, crashes in _crash_cases(triage, draw):
        expected = _triage(triage, case)[0].result
        for crash in crashes:
            if crash.step not in FORWARDS and crash.when == AFTER_EFFECT:
                continue
            run, _, _ = _triage(triage, case, crash)
            if run.result != expected:
                changed = sorted(k for k in (set(run.result or {}) | set(expected or {}))
                                 if (run.result or {}).get(k) != (expected or {}).get(k))
                hint = ""
                if changed == ["audited"]:
                    hint = ("only the coin flip changed on the replay: draw it with ctx.random(), "
                            "which records the number, not random.random()")
                elif "answer" in changed:
                    hint = ("the model's answer changed on the replay: call classify inside a "
                            "step, so the replay returns the recorded answer")
                raise Fail(f"{case}, crash {crash_label(crash)}, then resume: the run returned "
                           f"{run.result!r}; an uninterrupted run returned {expected!r}", hint)


# q2 -----------------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "refresh a stale memo", answers=["refresh_lookup"])


def _address_book(folder):
    return os.path.join(folder, "addresses.json")


def open_statement(folder, customer):
    """The statement's first step: it records that a statement period was opened."""
    return Ledgers(folder).world.ledger("statements").record(detail={"customer": customer})


def read_address(folder, customer):
    with open(_address_book(folder), encoding="utf-8") as f:
        return json.load(f)[customer]


def send_statement(folder, to):
    return Ledgers(folder).world.mailer.send(to, "Your monthly statement")


@workflow("ex05-check-statement", version=2)
def statement(ctx, folder, customer):
    ctx.step("open", open_statement, folder, customer)
    address = ctx.step("lookup", read_address, folder, customer)
    ctx.step("email", send_statement, folder, address)
    return {"sent_to": address}


def _move(folder, customer, address):
    with open(_address_book(folder), "w", encoding="utf-8") as f:
        json.dump({customer: address}, f)


def _refresh(refresh_lookup, draw, moves=1):
    """Run the statement, then move the customer and refresh, `moves` times.
    Returns (run id, [(address, run, steps recorded, statements opened, mail sent)])."""
    needs_callable(refresh_lookup, "refresh_lookup")
    customer = draw.person()
    addresses = draw.distinct(draw.email, moves + 1)
    run_id = draw.run_id(f"statement-{customer}")
    with scratch("ex05") as folder:
        _move(folder, customer, addresses[0])
        runs = EngineRuns(folder)
        runs.run(statement, folder, customer, run_id=run_id)
        out = []
        for address in addresses[1:]:
            _move(folder, customer, address)
            engine = runs.engine(worker="worker-refresh")
            run = refresh_lookup(engine, run_id)
            if run is None:
                raise Fail("refresh_lookup returned None",
                           "return the Run that resuming the run gives back")
            if not isinstance(run, Run):
                raise Fail(f"refresh_lookup returned a {type(run).__name__}; return the Run "
                           "that resuming the run gives back")
            ledgers = Ledgers(folder)
            out.append((address, run, step_names(engine, run_id),
                        ledgers.counts().get("statements", 0), [m["to"] for m in ledgers.mail()]))
        return run_id, addresses, out


@q2.test("the same run, resumed, reads the new address and completes",
         hint="engine.invalidate forgets a step's memo (and every entry after it); resuming "
              "the run then runs them again")
def _(refresh_lookup, draw):
    run_id, _, [(address, run, _, _, _)] = _refresh(refresh_lookup, draw)
    if run.run_id != run_id:
        raise Fail(f"the returned run is {run.run_id!r}; refresh the existing run "
                   f"{run_id!r}, do not start a new one")
    if run.status != "completed" or run.result != {"sent_to": address}:
        hint = ""
        if run.status == "running" and not run.executed:
            hint = ("invalidate only forgets; nothing has run again yet. Resume the run and "
                    "return the Run that gives back")
        raise Fail(f"the run is {run.status} with result {run.result!r}; expected completed "
                   f"with {{'sent_to': {address!r}}}", hint)


@q2.test("only the stale step and the steps after it run again, once each",
         hint="invalidate 'lookup' itself: the steps after it depended on its old answer, the "
              "step before it did not")
def _(refresh_lookup, draw):
    _, addresses, [(_, run, steps, opened, sent)] = _refresh(refresh_lookup, draw)
    if list(run.executed) != ["lookup", "email"]:
        raise Fail(f"the refresh executed {list(run.executed)}; expected ['lookup', 'email']"
                   + (": 'open' came before the stale step and did not depend on it"
                      if "open" in run.executed else ""))
    if steps != ["open", "lookup", "email"]:
        raise Fail(f"the run's history now records the steps {steps}; expected each once")
    if opened != 1:
        raise Fail(f"the statement period was opened {opened} times; expected once")
    if sent != addresses:
        raise Fail(f"statements were sent to {sent}; expected the old address, then the new one")


@q2.test("a second move, a second refresh: the run follows again",
         hint="the refresh must work on a run that was refreshed before")
def _(refresh_lookup, draw):
    _, addresses, results = _refresh(refresh_lookup, draw, moves=2)
    address, run, _, _, sent = results[-1]
    if run.result != {"sent_to": address}:
        raise Fail(f"after the second move the run returned {run.result!r}; expected "
                   f"{{'sent_to': {address!r}}}")
    if sent != addresses:
        raise Fail(f"statements were sent to {sent}; expected {addresses}, one per address")
