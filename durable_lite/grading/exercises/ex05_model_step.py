"""Exercise 05: make a model call a step (and a coin flip a recorded draw), then refresh a
stale memo on purpose.

Every q1 test that crashes a run resumes it the way a restart does: the learner's triage is
copied into a fresh Python process (portable.module_source, which runs the notebook's
statements again), each run starts in a child forked from it for that run alone and is
killed by a real SIGKILL at its crash point, and then the fresh process, which never ran
any of them, resumes every run. Nothing the killed process kept in memory (a variable, a
module-level dict, an lru_cache) reaches the resume; only the run's history does. The
model's bills are counted between the kill and the resume, so a second bill is traced to
the process that resumed.

q1 is judged on every branch the task describes, every time: tickets are drawn until one
makes the model's answer name a refund (the "refunds" desk) and one does not ("helpdesk"),
and coins are seeded near both ends of each quarter of [0, 1), the two coins of a quarter on
different desks, so whichever quarter an answer audits, each desk is met audited and not.
The replay tests seed Python's random module differently for the resume, on the other side
of the answer's own audit rule (found by one uncrashed run per quarter), so an unrecorded coin
changes the branch on every run.

q2 refreshes a statement run whose first step comes before the stale one, so forgetting the
whole run is told apart from forgetting the stale step and what followed it. The store also
holds two runs that are none of the refresh's business, one interrupted and one due to wake.

The properties a right answer has, each judged by the test that names it, and how the cases
vary it (tests/test_grading_properties_01_07.py and tests/test_grading_round4_02_05.py have,
for each, an answer wrong in that property alone, and it fails):

q1 triage(ctx, folder, ticket)  (drawn tickets, seeded coins; both desks, audit and not)
  - on every branch, killed after the desk's forward and resumed in another process, the
    model is billed once and the run follows the model's recorded answer and the recorded
    coin; the mailer shows exactly those forwards (a fixed desk, or a triage that never
    audits, fails);
  - one ticket in four is audited: the coins audited are exactly the two drawn in one
    quarter of [0, 1) (below 0.25 as the given code, or `>= 0.75`, or a middle quarter).
    Each quarter has a coin within 0.01 of each of its ends, so an audit at another rate
    (< 0.2, < 0.24, < 0.3, < 0.5, > 0.25) fails on every run: a threshold 0.01 or more away
    from a quarter's end always has a coin between it and that end. An audit set that is
    not one quarter (two eighths, say) fails too: the question says which sets it accepts;
  - the model is billed once per run, killed before each step (and after the last) and
    resumed in another process: an answer kept in the killed process's memory (a
    module-level dict, an lru_cache, a global flag) dies with it, and the process that
    resumes pays again. A kill between a step's effect and its checkpoint leaves the history
    of a kill just before that step; for the model step it also costs a second answer, which
    no answer can help (its own window), so no test counts it;
  - killed at any point and resumed elsewhere: the replay never diverges;
  - killed at any point and resumed elsewhere: the result of an uninterrupted run
    (random.random() for the coin fails: the resume is seeded so that its draw lands on the
    other side of the answer's own rule);
  - the forwarding steps keep their names: the desk's own, and 'audit' (judged on every
    branch, inside the branch test, which the given code fails too: the exercise starts from
    code to fix, so every test must fail it; the model's step may be named freely).
  A coin drawn with random.random() inside a step is recorded too, but the question asks for
  ctx.random(): only the engine's generator can be seeded alike for an uninterrupted run and
  for a resumed one, so only it can be compared with the uninterrupted result.
q2 refresh_lookup(engine, run_id)  (drawn customer and addresses)
  - the same run, resumed, reads the new address and completes;
  - only the stale step and the steps after it run again, once each (forgetting the
    whole run fails);
  - a second move and a second refresh: the run follows again;
  - the other runs in the store, another customer's statement whose worker died and a
    reminder whose wake time has passed, are left as they were (engine.recover(), which
    resumes every run that is due, fails).
"""

import dataclasses
import json
import os
import random
import signal
import sys
from dataclasses import dataclass
from typing import Optional

from ...errors import Crash
from ...faults import AFTER_CHECKPOINT, BEFORE_STEP, CrashAt
from ...run import Run
from ...workflow import workflow
from ..checks import Exercise, Fail, NotAttempted, describe
from ..child import run_fresh, write_module
from ..harness import (START, EngineRuns, crash_label, diverged, needs_callable, needs_workflow,
                       scratch, step_names, unfinished)
from ..ledgers import Ledgers, replay_model
from ..plain import plain
from ..portable import NotPortable, module_source

EXERCISE = Exercise("05_model_step", "The model call is a step",
                    lesson="notebooks/05_the_model_call_is_a_step.ipynb")

# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "a model call and a coin flip", answers=["triage"])

FORWARDS = ("refunds", "helpdesk", "audit")     # the steps whose names the task fixes
QUARTERS = 4           # one ticket in four is audited: the coins of one quarter of [0, 1)
EDGE = 0.01            # the branch test's coins lie within this of their quarter's ends
RESTART_AFTER = 3600.0                          # the resume comes an hour later (fake clock)
PROMPT = "Classify this support ticket: {}"       # what the given classify() asks the model
ASKS = ("Where is my parcel {}?", "I was charged twice for order {}.",
        "Can I still change the address on {}?", "The blender from {} arrived broken.",
        "Please cancel {} before it ships.", "Why was {} delivered to my neighbour?")


class Case:
    """One ticket and one coin. `seed` seeds the engine's ctx.random(), whose first draw is
    `coin`, and Python's random module in the process that starts the run; `resume_seed`
    seeds Python's random module in the process that resumes it."""

    def __init__(self, ticket, desk, seed, run_id):
        self.ticket, self.desk, self.seed, self.run_id = ticket, desk, seed, run_id
        self.resume_seed = seed
        self.coin = random.Random(seed).random()

    @property
    def quarter(self) -> int:
        return min(int(self.coin * QUARTERS), QUARTERS - 1)

    def __repr__(self):
        return f"ticket {self.ticket!r}"


def _desk_for(answer: str) -> str:
    return "refunds" if "refund" in answer else "helpdesk"


def _seed_between(draw, low: float, high: float) -> int:
    """A seed whose first random() lies in [low, high)."""
    while True:
        seed = draw.randint(1, 2**31)
        if low <= random.Random(seed).random() < high:
            return seed


def _tickets(draw) -> dict:
    """{desk: ticket}: tickets drawn until the model's first answer sends one to each desk."""
    tickets = {}
    while len(tickets) < 2:
        ticket = draw.choice(ASKS).format(draw.order_id())
        answer, = replay_model([PROMPT.format(ticket)])
        tickets.setdefault(_desk_for(answer), ticket)
    return tickets


def branch_cases(draw) -> list:
    """Eight cases, in drawn order: in each quarter of [0, 1) a coin within EDGE of its lower
    end and one within EDGE of its upper end, on different desks. Whichever quarter an answer
    audits, each desk comes up audited and not audited; an answer that audits at another rate
    meets a coin on the wrong side of its threshold."""
    tickets = _tickets(draw)
    run_ids = iter(draw.distinct(lambda: draw.run_id("triage"), 2 * QUARTERS))
    out = []
    for quarter in range(QUARTERS):
        low, high = quarter / QUARTERS, (quarter + 1) / QUARTERS
        ends = ((low, low + EDGE), (high - EDGE, high))
        for (a, b), desk in zip(ends, draw.sample(sorted(tickets), 2)):
            out.append(Case(tickets[desk], desk, _seed_between(draw, a, b), next(run_ids)))
    draw.shuffle(out)
    return out


def quarter_cases(draw) -> list:
    """Four cases, a coin well inside each quarter of [0, 1), desks drawn: one uncrashed run
    of each tells which coins the answer's own rule audits."""
    tickets = _tickets(draw)
    run_ids = draw.distinct(lambda: draw.run_id("triage"), QUARTERS)
    out = []
    for quarter, run_id in zip(range(QUARTERS), run_ids):
        desk = draw.choice(sorted(tickets))
        seed = _seed_between(draw, (quarter + 0.2) / QUARTERS, (quarter + 0.8) / QUARTERS)
        out.append(Case(tickets[desk], desk, seed, run_id))
    return out


# the uninterrupted run, in this process -------------------------------------------------------
@dataclass
class Reference:
    """An uninterrupted run of a case: what every crashed and resumed run should end like."""
    result: object
    steps: list
    billed: int

    @property
    def audited(self) -> bool:
        return isinstance(self.result, dict) and self.result.get("audited") is True


def _reference(triage, case) -> Reference:
    """Run `case` once, uncrashed, here: no process dies, so the kernel may run it."""
    needs_workflow(triage, "triage")
    state = random.getstate()
    try:
        random.seed(case.seed)                  # the same coin for random.random() as ctx.random()
        with scratch("ex05") as folder:
            runs, world = EngineRuns(folder, seed=case.seed), os.path.join(folder, "world")
            run = runs.run(triage, world, case.ticket, run_id=case.run_id)
            if run.status != "completed":
                unfinished(run.status, run.error, f"triage ({case}, with no crash)")
            return Reference(run.result, step_names(runs.engine(), case.run_id),
                             Ledgers(world).model_calls())
    finally:
        random.setstate(state)


def _sweep_cases(triage, draw) -> list:
    """[(case, its uninterrupted run)]: an audited case and one that is not, by the answer's
    own rule (a probe coin from each quarter, run once). Each case's resume seeds Python's
    random module with a coin that rule judges the other way, so a coin drawn with
    random.random() outside a step changes the branch on the resume."""
    probes = [(case, _reference(triage, case)) for case in quarter_cases(draw)]
    return audited_and_not(probes, lambda reference: reference.audited)


def audited_and_not(probes, audits) -> list:
    """From [(case, reference)], the first case `audits(reference)` says was audited and the
    first it says was not (each, if there is one), the resume seed of each set to the seed
    of a case judged the other way."""
    audited = [p for p in probes if audits(p[1])]
    passed = [p for p in probes if not audits(p[1])]
    chosen = []
    for mine, others in ((audited, passed), (passed, audited)):
        if mine:
            case, reference = mine[0]
            case.resume_seed = (others or mine)[-1][0].seed
            chosen.append((case, reference))
    return chosen


# killed in a child of a fresh process, resumed by that process ----------------------------------
# The module written for the fresh process holds the learner's triage (under that name) and
# this entry point, which calls the functions below there.
_ENTRY_POINT = """

def check_killed_then_resumed(jobs):
    from durable_lite.grading.exercises.ex05_model_step import killed_then_resumed
    return killed_then_resumed(triage, jobs)
"""
_CHILD_SECONDS = 10        # a forked start still running by then is stopped (SIGALRM)
_PROCESS_SECONDS = 30      # the fresh process, all its runs together


def _world(job) -> str:
    return os.path.join(job["folder"], "world")


def _ending_path(job) -> str:
    return os.path.join(job["folder"], "started.json")


def _job_engine(job, crash=None, worker="worker-1", later=False):
    """The engine one process has for one job's run: its own store, seeded with the case."""
    start = START + (RESTART_AFTER if later else 0.0)
    return EngineRuns(job["folder"], seed=job["seed"], start=start).engine(crash, worker)


def killed_then_resumed(wf, jobs) -> list:
    """(In the fresh process.) Start each job's run in a child forked for it alone, killed
    at the job's crash point; then resume every run here, in a process that never ran any
    of them. Returns, per job, {"started": ..., "billed_first": model calls the killed
    child paid for, "resumed": ...}."""
    started = start_and_die(wf, jobs)
    billed_first = [Ledgers(_world(job)).model_calls() for job in jobs]
    resumed = resume_each(jobs)
    return [{"started": s, "billed_first": b, "resumed": r}
            for s, b, r in zip(started, billed_first, resumed)]


def start_and_die(wf, jobs) -> list:
    """Start each job's run in a child forked for it alone, which a real SIGKILL ends at the
    job's crash point: no `finally`, no flush. This process does not run the workflow
    itself, so every child starts with the memory of a process that has just imported it.
    Returns, per job, {"killed", "status", "error"} (status None if the child was killed)."""
    out = []
    for job in jobs:
        sys.stdout.flush()
        sys.stderr.flush()        # so a child cannot write this process's buffered output again
        pid = os.fork()
        if pid == 0:
            _start_then_exit(wf, job)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        out.append({"killed": killed, **_ending(job)})
    return out


def _start_then_exit(wf, job):
    """A forked child's whole life: start the job's run and, unless the kill came, write how
    it ended. os._exit: the parent's exit handlers and buffers are not the child's to run."""
    try:
        signal.alarm(_CHILD_SECONDS)     # an answer that never returns must not outlive the check
        random.seed(job["seed"])
        crash = CrashAt(*job["crash"], kill=True) if job["crash"] else None
        run = _job_engine(job, crash).start(wf, _world(job), job["ticket"], run_id=job["run_id"])
        ended = {"status": run.status, "error": run.error}
    except BaseException as exc:     # the learner's code raised: the check reports it
        ended = {"status": "raised", "error": describe(exc)}
    try:
        with open(_ending_path(job), "w", encoding="utf-8") as f:
            json.dump(ended, f)
    finally:
        os._exit(0)


def _ending(job) -> dict:
    try:
        with open(_ending_path(job), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"status": None, "error": None}


def resume_each(jobs) -> list:
    """Resume every job's run, with Python's random module seeded by the job's resume seed.
    Returns, per job, {"status", "error", "result", "steps"}."""
    out = []
    for job in jobs:
        random.seed(job["resume_seed"])
        try:
            engine = _job_engine(job, worker="worker-2", later=True)
            run = engine.resume(job["run_id"])
            out.append({"status": run.status, "error": run.error, "result": run.result,
                        "steps": step_names(engine, job["run_id"])})
        except Exception as exc:       # NonDeterminismError, or the learner's own error
            out.append({"status": "raised", "error": describe(exc), "result": None, "steps": []})
    return out


@dataclass
class Resumed:
    """One case's run, started in a process of its own and killed at `crash`, then resumed
    in another: what the run ended as, and what the world recorded."""
    case: Case
    crash: CrashAt
    killed: bool
    billed_first: int         # model calls the process that was killed paid for
    billed: int               # model calls in all, after the resume
    answers: list             # the model's answers, oldest first
    mail: list                # the recipients of the forwards, in order
    status: Optional[str]
    error: Optional[str]
    result: object
    steps: list

    @property
    def where(self) -> str:
        if self.killed:
            return f"{self.case}, killed {crash_label(self.crash)}, then resumed in another process"
        return (f"{self.case}, started in a fresh process (it never came to the kill "
                f"{crash_label(self.crash)}), then resumed in another process")


def _import_path() -> dict:
    """The fresh processes import what this kernel can import (a module beside the notebook,
    say): its own import path, after the copied code and the package."""
    folders = [os.path.abspath(entry or os.curdir) for entry in sys.path]
    return {"PYTHONPATH": os.pathsep.join(f for f in folders if os.path.isdir(f))}


def _portable(triage) -> str:
    try:
        return module_source(triage, extra=_ENTRY_POINT, call_as={"triage": triage})
    except NotPortable as exc:
        raise Fail(str(exc), "the check runs triage in new processes, as a restart would: keep "
                             "what it needs in functions and imports of the notebook") from None


def _in_fresh_process(folder, jobs) -> list:
    run = run_fresh(folder, "check_killed_then_resumed", jobs, env=_import_path(),
                    timeout=_PROCESS_SECONDS)
    if run.finished:
        return run.result
    if run.error and "NotImplementedError" in run.error:
        raise NotAttempted("triage, in a fresh process: your code still raises NotImplementedError")
    detail = run.error or f"exit status {run.returncode}"
    raise Fail(f"triage, in a fresh process, failed: {detail}",
               "the check copies triage, and the functions and imports it uses, into a new "
               "process; run the cell that defines it, and keep what it needs in those functions")


def _killed_and_resumed(triage, plan) -> list:
    """plan: [(case, crash)]. Each run starts in a child of a fresh process and is killed
    at its crash; the fresh process then resumes them all. Returns a Resumed per case, in
    plan order."""
    needs_workflow(triage, "triage")
    source = _portable(triage)
    with scratch("ex05") as folder:
        write_module(folder, source)
        jobs = [{"folder": os.path.join(folder, f"run-{n}"), "ticket": case.ticket,
                 "run_id": case.run_id, "seed": case.seed, "resume_seed": case.resume_seed,
                 "crash": [crash.step, crash.when]} for n, (case, crash) in enumerate(plan)]
        for job in jobs:
            os.makedirs(job["folder"])
        out = []
        for (case, crash), job, seen in zip(plan, jobs, _in_fresh_process(folder, jobs)):
            start, end = seen["started"], seen["resumed"]
            if start["error"] and "NotImplementedError" in start["error"]:
                raise NotAttempted("triage (or a function it calls) still raises "
                                   "NotImplementedError")
            ledgers = Ledgers(_world(job))
            out.append(Resumed(case, crash, start["killed"], seen["billed_first"],
                               ledgers.model_calls(), ledgers.model_answers(),
                               [m["to"] for m in ledgers.mail()],
                               end["status"], end["error"], end["result"], end["steps"]))
        return out


# what a resumed run is judged by ---------------------------------------------------------------
_ASKED_AGAIN = ("the process that resumed the run asked the model again: the first answer was "
                "not in the run's history, and nothing else of the killed process (a variable, "
                "a dict, a cache) survives a restart")


def _billed_once(outcome):
    """The model billed once for the run, however the kill fell."""
    if outcome.billed == 0:
        raise Fail(f"{outcome.where}: the model was never called",
                   "ask the model (classify) once per run, and use its answer")
    if outcome.billed == 1:
        return
    later = outcome.billed - outcome.billed_first
    hint = _ASKED_AGAIN if outcome.billed_first and later else \
        "one execution of the workflow asked the model more than once"
    raise Fail(f"{outcome.where}: the model was billed {outcome.billed} times for one run "
               f"({outcome.billed_first} by the process that was killed, {later} by the one "
               "that resumed the run); expected once",
               hint)


def _ended(outcome):
    """The resume ended without an error of the answer's own (that is told first: a run
    that raised says nothing about bills or branches)."""
    if outcome.status != "completed" and not diverged(outcome.status, outcome.error):
        unfinished(outcome.status, outcome.error, f"triage ({outcome.where})")


def _completed(outcome):
    """The resume completed the run, without diverging from its history."""
    if diverged(outcome.status, outcome.error):
        hint = ("the replay must take the same branches: base them on recorded values only "
                "(a step's result, ctx.random())")
        if outcome.billed > max(outcome.billed_first, 1):
            hint = _ASKED_AGAIN + "; its new answer took the replay another way"
        raise Fail(f"{outcome.where}: the replay diverged ({(outcome.error or '').split('. ')[0]})",
                   hint)
    if outcome.status != "completed":
        unfinished(outcome.status, outcome.error, f"triage ({outcome.where})")


def _follows_the_record(outcome):
    """The run's result and its forwards follow the model's recorded answer and the coin."""
    where, result = outcome.where, outcome.result
    if not isinstance(result, dict) or not {"desk", "audited", "answer"} <= set(result):
        raise Fail(f"{where}: the run returned {result!r}; expected "
                   "{'desk': ..., 'audited': ..., 'answer': ...}")
    answer = outcome.answers[0]
    if result["answer"] != answer:
        raise Fail(f"{where}: the run returned the answer {result['answer']!r}, but the model "
                   f"answered {answer!r}", "return the text of the model's recorded answer")
    desk = _desk_for(answer)
    if result["desk"] != desk or outcome.mail.count(f"{desk}@example.com") != 1:
        raise Fail(f"{where}: the model answered {answer!r}, which "
                   f"{'names' if desk == 'refunds' else 'does not name'} a refund, so the "
                   f"ticket belongs to {desk!r}; the run returned desk {result['desk']!r} and "
                   f"forwarded to {outcome.mail}",
                   "choose the desk from the model's answer: 'refunds' if 'refund' is in its "
                   "text, else 'helpdesk', and forward there")
    audits = outcome.mail.count("audit@example.com")
    if not isinstance(result["audited"], bool) or audits != int(result["audited"]):
        raise Fail(f"{where}: the run returned audited {result['audited']!r} and sent {audits} "
                   "ticket(s) to audit@example.com",
                   "return whether the run audited the ticket (True or False), and send it to "
                   "audit@example.com, in a step named 'audit', exactly when it did")


def _forwards_named(outcome):
    """The forwarding steps keep the names the task fixes: the desk's own, and 'audit'."""
    audited = outcome.result["audited"]
    forwards = [name for name in outcome.steps if name in FORWARDS]
    want = [outcome.result["desk"], "audit"] if audited else [outcome.result["desk"]]
    if forwards != want:
        raise Fail(f"{outcome.where} ({'audited' if audited else 'not audited'}): the run "
                   f"recorded the steps {outcome.steps}; the ticket's forwards should be "
                   f"recorded as {want}",
                   "the task keeps the names of the steps that forward the ticket: the step "
                   "that sends it to a desk is named after that desk, the audit's step is "
                   "'audit'; only a new step may be named as you like")


def _audits_one_quarter(outcomes):
    """One ticket in four: the coins audited are exactly the two drawn in one quarter."""
    audited = {o.case: o.result["audited"] is True for o in outcomes}
    quarters = {case.quarter for case, yes in audited.items() if yes}
    if len(quarters) == 1 and all(yes == (case.quarter in quarters)
                                  for case, yes in audited.items()):
        return
    seen = ", ".join(f"{case.coin:.3f} ({'audited' if yes else 'not audited'})"
                     for case, yes in sorted(audited.items(), key=lambda item: item[0].coin))
    raise Fail(f"the runs' first ctx.random() came out {seen}. Auditing one ticket in four "
               "means auditing every coin in one quarter of [0, 1) and no other; these coins "
               f"lie two in each quarter, within {EDGE} of its ends",
               "audit when the coin drawn with ctx.random() falls in one quarter of [0, 1) "
               "(the given code's quarter is the one below 0.25), and only then")


@q1.test("every branch: a ticket for each desk, audited and not, each killed after its forward "
         "and resumed in another process — the run follows the model's recorded answer and the "
         "recorded coin, audits one ticket in four, and forwards accordingly, in the steps the "
         "task names (the desk's own, 'audit')",
         hint="the desk comes from the model's recorded answer, the audit from a coin drawn "
              "with ctx.random() (one ticket in four); return both, and the answer's text")
def _(triage, draw):
    cases = branch_cases(draw)          # each killed after its forward, before the coin
    outcomes = _killed_and_resumed(triage, [(case, CrashAt(case.desk, AFTER_CHECKPOINT))
                                            for case in cases])
    for outcome in outcomes:
        _ended(outcome)
        _billed_once(outcome)
        _completed(outcome)
        _follows_the_record(outcome)
        _forwards_named(outcome)
    _audits_one_quarter(outcomes)


def kill_points(steps) -> list:
    """A kill for each history a run can be left with: just before each step (the steps
    before it recorded) and after the last one was recorded. A kill right after a step's
    effect leaves the history of a kill just before it, the effect done once more (for the
    model step, a second answer no replay can help: its own window, which no test counts)."""
    return [CrashAt(step, BEFORE_STEP) for step in steps] + \
        [CrashAt(step, AFTER_CHECKPOINT) for step in steps[-1:]]


def _swept(triage, chosen) -> list:
    """[(Resumed, the case's uninterrupted run)]: each chosen case killed at each of its
    kill points, each resumed in another process."""
    plan = [(case, crash) for case, reference in chosen for crash in kill_points(reference.steps)]
    references = {id(case): reference for case, reference in chosen}
    return [(outcome, references[id(outcome.case)])
            for outcome in _killed_and_resumed(triage, plan)]


@q1.test("the model is called once per run, not again on every replay",
         hint="call the model inside a step: a recorded answer costs nothing on replay, in "
              "whichever process the replay happens")
def _(triage, draw):
    case, reference = _sweep_cases(triage, draw)[0]     # audited, if the answer ever audits
    if reference.billed != 1:
        raise Fail(f"{case}, no crash: the model was called {reference.billed} times; "
                   "expected once")
    for outcome, _ in _swept(triage, [(case, reference)]):
        _ended(outcome)
        _billed_once(outcome)


@q1.test("a crash at any point, then a resume: the replay never diverges",
         hint="the replay must take the same branches: base them on recorded values only "
              "(a step's result, ctx.random())")
def _(triage, draw):
    for outcome, _ in _swept(triage, _sweep_cases(triage, draw)):
        _completed(outcome)


@q1.test("a crash at any point (outside the model step's own window), then a resume: the same "
         "result as an uninterrupted run",
         hint="everything the result holds must come from recorded values: the model's answer "
              "from its step, the coin flip from ctx.random() (the check seeds the engine), "
              "never random.random()")
def _(triage, draw):
    for outcome, reference in _swept(triage, _sweep_cases(triage, draw)):
        _completed(outcome)
        if outcome.result != reference.result:
            _differs(outcome, reference.result)


def _differs(outcome, expected):
    """A Fail that says which parts of the result changed, and what that points to."""
    got = outcome.result
    changed = sorted(k for k in (set(got or {}) | set(expected or {}))
                     if (got or {}).get(k) != (expected or {}).get(k))
    hint = ""
    if changed == ["audited"]:
        hint = ("only the coin flip changed on the replay: draw it with ctx.random(), which "
                "records the number, not random.random()")
    elif "answer" in changed:
        hint = _ASKED_AGAIN if outcome.billed > outcome.billed_first else \
            ("the model's answer changed on the replay: call classify inside a step, so the "
             "replay returns the recorded answer")
    raise Fail(f"{outcome.where}: the run returned {got!r}; an uninterrupted run returned "
               f"{expected!r}", hint)


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
    os.makedirs(folder, exist_ok=True)
    with open(_address_book(folder), "w", encoding="utf-8") as f:
        json.dump({customer: address}, f)


REMIND_AFTER = 600.0       # the bystander reminder sleeps ten minutes
LATER = 3600.0             # the refresh comes an hour after the other runs were left


def send_reminder(folder, to):
    return Ledgers(folder).world.mailer.send(to, "Your statement is ready")


@workflow("ex05-check-reminder", version=1)
def reminder(ctx, folder, to):
    ctx.sleep(REMIND_AFTER, name="until-ready")
    ctx.step("remind", send_reminder, folder, to)
    return {"reminded": to}


class Bystanders:
    """Runs in the same store that are none of the refresh's business, in a world of their
    own: another customer's statement whose worker died after its first step, and a reminder
    asleep until a time that has passed. Both are due: engine.recover() would resume them."""

    def __init__(self, runs, folder, draw):
        self.folder = os.path.join(folder, "bystanders")
        customer = draw.person()
        self.interrupted, self.asleep = draw.distinct(lambda: draw.run_id("bystander"), 2)
        _move(self.folder, customer, draw.email())
        try:
            runs.engine(CrashAt("lookup", BEFORE_STEP)).start(
                statement, self.folder, customer, run_id=self.interrupted)
        except Crash:
            pass                          # the worker died; the run waits to be resumed
        runs.engine().start(reminder, self.folder, draw.email(), run_id=self.asleep)
        self.left = self.state(runs.engine(worker="worker-observer"))

    def state(self, engine) -> dict:
        """{run id: (status, steps recorded)}, and the mail their world has sent."""
        runs = {run_id: (engine.get(run_id).status, step_names(engine, run_id))
                for run_id in (self.interrupted, self.asleep)}
        return {**runs, "mail": [m["to"] for m in Ledgers(self.folder).mail()]}

    def disturbed(self, engine) -> list:
        """What the refresh did to them, in words (nothing, if they are as they were left)."""
        now, out = self.state(engine), []
        for run_id, what in ((self.interrupted, "another customer's statement, interrupted"),
                             (self.asleep, "a reminder asleep past its wake time")):
            if now[run_id] != self.left[run_id]:
                (status, steps), (was, had) = now[run_id], self.left[run_id]
                out.append(f"{what} (run {run_id!r}, {was} with the steps {had}) is now "
                           f"{status} with the steps {steps}")
        if now["mail"] != self.left["mail"]:
            out.append(f"their world sent mail to {now['mail'][len(self.left['mail']):]}")
        return out


def _refresh(refresh_lookup, draw, moves=1):
    """Run the statement, leave two other runs due in the store, then move the customer and
    refresh, `moves` times. Returns (run id, addresses, [(address, run, steps recorded,
    statements opened, mail sent)], what the refreshes did to the other runs)."""
    needs_callable(refresh_lookup, "refresh_lookup")
    customer = draw.person()
    addresses = draw.distinct(draw.email, moves + 1)
    run_id = draw.run_id(f"statement-{customer}")
    with scratch("ex05") as folder:
        _move(folder, customer, addresses[0])
        runs = EngineRuns(folder)
        runs.run(statement, folder, customer, run_id=run_id)
        bystanders = Bystanders(runs, folder, draw)
        runs.clock.advance(LATER)         # their worker's lease has run out, the wake time passed
        out = []
        for address in addresses[1:]:
            _move(folder, customer, address)
            engine = runs.engine(worker="worker-refresh")
            run = refresh_lookup(engine, run_id)
            if run is None:
                raise Fail("refresh_lookup returned None",
                           "return the Run that resuming the run gives back")
            if type(run) is not Run:
                raise Fail(f"refresh_lookup returned a {type(run).__name__}; return the Run "
                           "that resuming the run gives back")
            run = _as_stored(engine, run)
            ledgers = Ledgers(folder)
            out.append((address, run, step_names(engine, run_id),
                        ledgers.counts().get("statements", 0), [m["to"] for m in ledgers.mail()]))
        return run_id, addresses, out, bystanders.disturbed(runs.engine(worker="worker-observer"))


def _as_stored(engine, run) -> Run:
    """The run refresh_lookup returned, as the store has it: its status and result read
    from the store, not from the object the answer handed back; which steps this call ran
    (not stored) crosses as plain data."""
    run_id = plain(run.run_id, "the returned run's run_id")
    executed = plain(list(run.executed), "the returned run's executed steps")
    try:
        stored = engine.get(run_id)
    except KeyError:
        return Run(run_id, "", 0, "not in the store", executed=executed)
    return dataclasses.replace(stored, executed=executed)


@q2.test("the same run, resumed, reads the new address and completes",
         hint="engine.invalidate forgets a step's memo (and every entry after it); resuming "
              "the run then runs them again")
def _(refresh_lookup, draw):
    run_id, _, [(address, run, _, _, _)], _ = _refresh(refresh_lookup, draw)
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
    _, addresses, [(_, run, steps, opened, sent)], _ = _refresh(refresh_lookup, draw)
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
    _, addresses, results, _ = _refresh(refresh_lookup, draw, moves=2)
    address, run, _, _, sent = results[-1]
    if run.result != {"sent_to": address}:
        raise Fail(f"after the second move the run returned {run.result!r}; expected "
                   f"{{'sent_to': {address!r}}}")
    if sent != addresses:
        raise Fail(f"statements were sent to {sent}; expected {addresses}, one per address")


@q2.test("the other runs in the store (one interrupted, one asleep past its wake time) are "
         "left as they were",
         hint="the refresh concerns one run: a call that resumes every run that is due also "
              "takes up runs that were none of its business")
def _(refresh_lookup, draw):
    run_id, _, _, disturbed = _refresh(refresh_lookup, draw)
    if disturbed:
        raise Fail(f"refreshing run {run_id!r} also touched other runs in the store: "
                   + "; ".join(disturbed))
