"""Exercise 16, the capstone: the research agent of lesson 16, graded under every crash.

The learner writes four things (the brief in the lesson says what each must do):
`research` (the workflow, version 1), `research_v2` (the same workflow's version 2, which
posts the report with its sources), `submit(engine, folder, request, workflow)` (enqueue
one request) and `serve(engine)` (a worker: run what the queue allows until nothing can go
on without a person).

How it is graded: one scenario, played by worker processes
-----------------------------------------------------------
Five requests for two tenants share one store and one world, drawn fresh on every run
(tenants, topics, owners, prices, the number of tool calls, budgets, request ids):

  phase 1 (only version 1 deployed): submit B5 (tenant B, a plan longer than its step
          budget), A1 (tenant A, a source over the approval threshold) and A2 (tenant A,
          another dear source); serve. A1 parks on its approval; A2 waits behind it.
  an hour later a person says yes to A1 (`engine.signal(run, "approval", True)`);
          version 2 is deployed.
  phase 2: submit B3 (tenant B, the same topic as A1, a dear source nobody will approve)
          and B4 (tenant B, a cheap source, an archived project: the tracker refuses the
          post for good), on version 2; serve. A1 finishes (on version 1); A2 asks and
          parks; B3 asks and parks.
  an hour later the person says no to A2 (`engine.signal(run, "approval", False)`).
  phase 3: serve. A2 reports without the source (on version 1).
  25 hours later, phase 4: the deploy's script runs again (a restarted pod): it submits B3
          and B4 again, which must find their runs, and serves. B3's deadline fires, it
          reports without the source; then B4 pays for its source, is refused by the
          tracker, and is paid back.

So every run of the check has an approval answered yes (A1), one answered no (A2) and one
nobody answers before its deadline (B3).

Every phase is a new Python process that runs the answer's cells again
(`portable.module_source`; phase 1's module holds no `research_v2`: it is not deployed
yet). The processes are forked from Pythons that have imported only the course's package
(`child.run_fresh`, durable_lite/fresh.py), so each imports the answer afresh and none inherits another's
memory; a worker started again after a kill comes from another of them (a new hash seed).
First the scenario is played without a crash, noting every crash point the worker
processes pass, in order. Then, for each of those points, the scenario is played again in
a fresh store and world, and the worker process is SIGKILLed at that point; the phase is
started again in a new process (as a restarted pod runs its script again) until it
finishes. Everything is judged from the world's ledgers and the store, never from what
the answer returns.

Time is a FakeClock in each worker, which moves on as the worker runs (a step's retry waits
out its backoff on it). So the grader reads the time from the store: a phase starts its
hours after the last moment the store recorded, and a killed phase starts again 31 s after
it, once the dead worker's lease (30 s from the last moment its clock read) has lapsed,
however far the answer's backoffs had moved that clock past the phase's start.

The rubric: each property, the lesson that taught it, and the request that reaches it
------------------------------------------------------------------------------------
- exactly once (02, 03): each email (extraction done, the report), each post and each
  payment and refund happens exactly once per request, whatever process dies where; the
  run of a request is the same run when its submit is run again (B3, B4 in phase 4), and
  two requests with the same topic (A1, B3) are two requests.
- model billed once (05): one plan and one successful draft billed per request, though the
  plan's call ids are invented at run time and the draft fails on its first try. A kill
  right after a step's effect, before its checkpoint, may bill one call twice: that window
  (lesson 03) no engine closes for a provider that takes no key, so it is forgiven once.
- recorded non-determinism (04): the report id emailed is the report id posted.
- budget (08): B5 halts by its step budget, with no more tool calls than the budget
  allows, in however many processes; every run's recorded dollars are its model bills.
- approval deadline (07): A1 asks once and pays once (yes); A2 asks once and is never
  charged, not even to be paid back (no); B3 asks once, its deadline fires once (one
  "expired" notice) and it is never charged (silence).
- per-tenant limit (11): no two requests of one tenant are under way at once (A2 starts
  after A1 has finished, though A1 was parked for an hour; B4 after B3).
- compensation (09): B4 ends compensated, its source paid back once, no report sent.
- versioning (12): A1 and A2, started before the deploy, finish on version 1 (their posts
  carry no sources); B3 runs on version 2 (its post carries them).

Feedback: a table of crash points (rows: step · moment) × properties, ✗ where the property
broke after that crash, with the case's seed. A self-check of one property
(`self_check(prop, ..., seed=N)`) plays the same scenario and the same crash points as the
grade with seed N, judged by the same code, so the two cannot disagree; it stops at the
first case that breaks its property (a right answer takes as long as the grade).
"""

import json
import os
import shutil
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

from ... import capstone
from ...clock import FakeClock, SequentialIds
from ...engine import Engine
from ...faults import CrashPlan
from ...store import SQLiteStore
from ..checks import Exercise, Fail, NotAttempted
from ..child import run_fresh, write_module
from ..harness import START, scratch
from ..portable import NotPortable, module_source

EXERCISE = Exercise("16_capstone", "The research agent, durable under every crash",
                    lesson="notebooks/16_capstone_a_durable_research_agent.ipynb",
                    test_time_limit=150.0)

ANSWERS = ("research", "research_v2", "submit", "serve")
PROPERTIES = {
    "exactly once": "02, 03", "model billed once": "05", "recorded non-determinism": "04",
    "budget": "08", "approval deadline": "07", "per-tenant limit": "11",
    "compensation": "09", "versioning": "12",
}
# Each property's column in the table of crash points: a whole word, not a cut one.
COLUMN = {"exactly once": "once", "model billed once": "billed", "recorded non-determinism":
          "recorded", "budget": "budget", "approval deadline": "deadline",
          "per-tenant limit": "per-tenant", "compensation": "compensate", "versioning": "version"}
LEASE = 30.0                      # the engine's lease: a killed worker's run is free after it
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "vandelay", "wonka", "stark")
TOPICS = ("vector databases", "queue brokers", "feature stores", "OCR services",
          "log pipelines", "speech-to-text APIs", "time-series stores", "rerankers")


# the cases ------------------------------------------------------------------------------------
def requests_for(draw) -> dict:
    """The five requests of one scenario, drawn: {role: request}."""
    a, b = draw.sample(TENANTS, 2)
    shared, other, third = draw.sample(TOPICS, 3)
    ids = draw.distinct(lambda: f"req-{draw.token(5)}", 5)

    def request(i, tenant, topic, price, calls, project="open", steps=40):
        return {"id": ids[i], "tenant": tenant, "topic": topic,
                "owner": f"{draw.person()}@{tenant}.example",
                "source_price": price, "calls": calls, "project": project,
                "budget": {"steps": steps, "dollars": round(draw.uniform(2, 5), 2),
                           "hours": draw.randint(48, 96)}}

    over = lambda: round(draw.uniform(capstone.APPROVAL_OVER + 1, 40), 2)     # noqa: E731
    under = lambda: round(draw.uniform(0.5, capstone.APPROVAL_OVER - 0.5), 2)  # noqa: E731
    calls = draw.randint(6, 9)
    return {
        "A1": request(0, a, shared, over(), draw.randint(1, 2)),
        "A2": request(1, a, other, over(), draw.randint(1, 2)),     # the approver says no
        "B3": request(2, b, shared, over(), draw.randint(1, 2)),
        "B4": request(3, b, third, under(), 1, project="archived"),
        # a plan of `calls` tool calls; the budget allows the plan and only some of them
        "B5": request(4, b, other, 0, calls, steps=draw.randint(3, calls - 1)),
    }


def phases():
    """The scenario's phases: (name, version 2 deployed?, [(role, version)] to submit,
    [(role, signal payload)] sent before, hours passed before)."""
    return [
        ("phase 1", False, [("B5", 1), ("A1", 1), ("A2", 1)], [], 0),
        ("phase 2", True, [("B3", 2), ("B4", 2)], [("A1", True)], 1),
        ("phase 3", True, [], [("A2", False)], 1),
        ("phase 4", True, [("B3", 2), ("B4", 2)], [], 25),
    ]


# the worker process ---------------------------------------------------------------------------
_WORKER = """

def capstone_worker(spec):
    from durable_lite.grading.exercises.ex16_capstone import worker as _worker
    return _worker(globals(), spec)
"""


class _Counted(CrashPlan):
    """Notes every crash point passed, across every process of a case (one file, O_APPEND),
    and SIGKILLs this process at the `kill_at`-th."""

    def __init__(self, path, kill_at):
        super().__init__()
        self.path, self.kill_at = path, kill_at
        try:
            with open(path, encoding="utf-8") as f:
                self.passed = sum(1 for _ in f)
        except FileNotFoundError:
            self.passed = 0

    def check(self, step, occurrence, when):
        self.passed += 1
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{step}\t{when}\n".encode())
        finally:
            os.close(fd)
        if self.passed == self.kill_at:
            import signal
            os.kill(os.getpid(), signal.SIGKILL)

    def __bool__(self):
        return True


def worker(namespace, spec) -> dict:
    """One worker process: a fresh engine on the shared store, the answer's submit for each
    request of the phase, then the answer's serve."""
    engine = Engine(SQLiteStore(os.path.join(spec["folder"], "runs.db")), FakeClock(spec["now"]),
                    ids=SequentialIds(spec["worker"]), seed=0, worker=spec["worker"],
                    lease_seconds=LEASE)
    engine.crash_at = _Counted(spec["points"], spec["kill_at"])
    world = "world"     # relative to the worker's folder: a case can start from a copy of another's
    runs = {}
    for request, version in spec["submit"]:
        wf = namespace["research" if version == 1 else "research_v2"]
        run = namespace["submit"](engine, world, request, wf)
        runs[request["id"]] = getattr(run, "run_id", None)
    namespace["serve"](engine)
    return {"runs": runs}


def sources_of(answers):
    """(phase 1's module: version 1 only, every later phase's module) from the answer's cells."""
    research, research_v2, submit, serve = answers
    for name, value in zip(ANSWERS, answers):
        if value is None:
            raise NotAttempted(f"{name} is still None")
        if not callable(value) and not hasattr(value, "fn"):
            raise Fail(f"{name} should be a function (or a workflow), not {type(value).__name__}")
    try:
        before = module_source(research, submit, serve, extra=_WORKER,
                               call_as={"research": research, "submit": submit, "serve": serve})
        after = module_source(research, research_v2, submit, serve, extra=_WORKER,
                              call_as=dict(zip(ANSWERS, answers)))
    except NotPortable as exc:
        raise Fail(str(exc)) from None
    return before, after


# playing a case ---------------------------------------------------------------------------------
def play(folder, sources, requests, kill_at=None, timeout=60, start=None, snapshots=None):
    """Play the scenario in `folder`; SIGKILL the worker at crash point `kill_at` (the n-th
    passed, counted over every process) and start the phase again, in a new process.

    start: (phase number, the state the clean run had then) to begin there instead of from
    the top: every phase before the kill is the clean run's, point for point, so a case
    starts from a copy of the clean run's folder at the start of the phase it kills in.
    snapshots: a folder to keep such copies in (the clean run).
    Returns {"points": [(step, when)], "runs": {request id: run id}, "killed": bool,
    "phase_starts": [number of points passed when each phase began], "clock": the time when
    the last worker stopped}."""
    os.makedirs(folder, exist_ok=True)
    points = os.path.join(folder, "points.log")
    now, runs, killed, n, first = START, {}, False, 0, 0
    starts, states = [], []
    if start is not None:
        first, state = start
        _copy_state(state["folder"], folder)
        now, runs, n = state["now"], dict(state["runs"]), state["n"]
    for index, (name, deployed, submit, signals, hours) in enumerate(phases()):
        if index < first:
            continue
        if snapshots is not None:
            snap = os.path.join(snapshots, f"phase-{index}")
            _copy_state(folder, snap)
            states.append({"folder": snap, "now": now, "runs": dict(runs), "n": n})
            starts.append(_count(points))
        now = max(now, _store_clock(folder)) + hours * 3600
        for role, payload in signals:
            run_id = runs.get(requests[role]["id"])
            if run_id:
                _signal(folder, run_id, payload, now)
        write_module(folder, sources[1] if deployed else sources[0])
        spec = {"folder": folder, "points": points, "kill_at": kill_at,
                "submit": [(requests[role], version) for role, version in submit]}
        for attempt in range(4):
            n += 1
            args = dict(spec, now=now, worker=f"w{n}")
            child = run_fresh(folder, "capstone_worker", args, timeout=timeout,
                              preload=(__name__,))
            if child.killed:
                killed = True
                # The phase starts again once the dead worker's lease has lapsed: LEASE
                # seconds after the last moment its clock read, not after the phase began.
                now = max(now, _store_clock(folder)) + LEASE + 1
                continue
            if child.error and "NotImplementedError" in child.error:
                raise NotAttempted("the answer still raises NotImplementedError")
            if not child.finished:
                raise Fail(f"{name}: a worker process running your cells ended with "
                           f"{child.error or f'exit status {child.returncode}'}",
                           "each worker is a new Python process that runs your notebook's cells "
                           "again, then calls submit for the phase's requests and serve")
            runs.update({k: v for k, v in child.result["runs"].items() if v})
            break
        else:
            raise Fail(f"{name}: the worker was killed four times in a row")
    seen = []
    if os.path.exists(points):          # no step, no crash point
        with open(points, encoding="utf-8") as f:
            seen = [tuple(line.rstrip("\n").split("\t")) for line in f if line.strip()]
    return {"points": seen, "runs": runs, "killed": killed, "phase_starts": starts,
            "states": states, "clock": max(now, _store_clock(folder))}


def _count(path):
    try:
        with open(path, encoding="utf-8") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def _store_clock(folder) -> float:
    """The latest moment the store recorded (0 before there is a store): what the clock of
    the last worker that wrote to it read then. A worker's FakeClock moves on while it runs
    (a step's retry waits out its backoff on it; a lone worker jumps to the next lease's
    lapse), so that moment may be well past its phase's start, and a lease it took or
    renewed then runs LEASE seconds from it. A restarted worker whose clock read less would
    find the run still leased, and leave it to the next phase."""
    path = os.path.join(folder, "runs.db")
    if not os.path.exists(path):
        return 0.0
    db = sqlite3.connect(path)
    try:
        times = db.execute(
            "SELECT (SELECT max(at) FROM events), (SELECT max(updated_at) FROM runs), "
            "(SELECT max(ended_at) FROM entries), (SELECT max(lease_expires) FROM runs)"
        ).fetchone()
    finally:
        db.close()
    *seen, lease = times
    return max([t for t in seen if t is not None] + [lease - LEASE if lease else 0.0])


def _copy_state(source, target):
    """The store, the world and the points passed, as they are between two phases (every
    worker process has exited: nothing is half written)."""
    if os.path.exists(target):
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("learner_code.py", "steps.log",
                                                                  "__pycache__"))


def _signal(folder, run_id, payload, now):
    store = SQLiteStore(os.path.join(folder, "runs.db"))
    try:
        record = store.get_run(run_id)
        if record is not None and record.status in ("queued", "running", "waiting", "sleeping"):
            Engine(store, FakeClock(now), worker="the-approver").signal(run_id, "approval", payload)
    finally:
        store.close()


# reading the world ----------------------------------------------------------------------------
def observe(folder, requests, runs, clock=None) -> dict:
    """Everything the properties are judged on, read from the files by the check's own code
    (and the time the scenario ended, for the feedback: `clock`, or the store's last)."""
    records = []
    path = os.path.join(folder, "world", "ledgers.db")
    if os.path.exists(path):
        db = sqlite3.connect(path)
        try:
            records = [(i, ledger, key, json.loads(detail)) for i, ledger, key, detail in
                       db.execute("SELECT id, ledger, idempotency_key, detail FROM records "
                                  "ORDER BY id")]
        finally:
            db.close()
    store = sqlite3.connect(os.path.join(folder, "runs.db"))
    try:
        rows = store.execute("SELECT * FROM runs").fetchall()
        names = [d[0] for d in store.execute("SELECT * FROM runs").description]
        steps = {}
        for run_id, kind, cost in store.execute("SELECT run_id, kind, cost FROM entries"):
            steps.setdefault(run_id, []).append((kind, cost))
        # deadlines the runs fixed (name, when, set at), and what the grader's person said
        timers = store.execute("SELECT run_id, name, result, started_at FROM entries "
                               "WHERE kind = 'timer' ORDER BY run_id, position").fetchall()
        signals = store.execute("SELECT run_id, name, payload, sent_at FROM signals "
                                "ORDER BY id").fetchall()
    finally:
        store.close()
    all_runs = [dict(zip(names, row)) for row in rows]
    return {"records": records, "runs": all_runs, "ran": runs, "entries": steps,
            "timers": timers, "signals": signals,
            "clock": _store_clock(folder) if clock is None else clock}


def _by_request(obs, ledger, rid, **match):
    return [d for _, name, _, d in obs["records"] if name == ledger and d.get("request") == rid
            and all(d.get(k) == v for k, v in match.items())]


def judge(obs, requests, window=False) -> dict:
    """{property: the first thing that broke it, or None}. window: the process was killed
    right after a step's effect, before its checkpoint: that one step runs again on the
    resume, as in any engine, so one model call billed twice is forgiven (lesson 03's window;
    a model provider takes no idempotency key)."""
    obs = dict(obs, window=window)
    out = {}
    for prop in PROPERTIES:
        try:
            JUDGES[prop](obs, requests)
            out[prop] = None
        except Fail as fail:
            out[prop] = fail.message
    return out


def _run_of(obs, rid):
    """The store's record of the one run made for request `rid`."""
    run_id = obs["ran"].get(rid)
    runs = [r for r in obs["runs"] if r["run_id"] == run_id]
    if not runs:
        raise Fail(f"no run in the store for request {rid} (submit returned {run_id!r})")
    return runs[0]


def _expect(obs, ledger, rid, n, what, **match):
    got = len(_by_request(obs, ledger, rid, **match))
    if got != n:
        raise Fail(f"request {rid}: {got} {what}, expected {n}")


def _exactly_once(obs, requests):
    runs_per_request = {}
    for r in obs["runs"]:
        args = r.get("args") or ""
        for role, req in requests.items():
            if json.dumps(req["id"]) in args:
                runs_per_request.setdefault(req["id"], []).append(r["run_id"])
    for role, req in requests.items():
        if len(runs_per_request.get(req["id"], [])) > 1:
            raise Fail(f"request {req['id']} has {len(runs_per_request[req['id']])} runs in the "
                       "store after its submit ran again")
    expect = {"A1": (1, 1, 1, 0), "A2": (1, 0, 1, 0), "B3": (1, 0, 1, 0), "B4": (0, 1, 0, 1)}
    for role, (posts, charges, reports, refunds) in expect.items():
        rid = requests[role]["id"]
        _expect(obs, "mail", rid, 1, "'extraction finished' emails", kind="extracted")
        _expect(obs, "mail", rid, reports, "report emails", kind="report")
        _expect(obs, "tracker", rid, posts, "posts to the tracker")
        _expect(obs, "charges", rid, charges, "payments for the source")
        _expect(obs, "source_refunds", rid, refunds, "refunds of the source")


def _model_once(obs, requests):
    extra = 0
    for role in ("A1", "A2", "B3", "B4"):
        rid = requests[role]["id"]
        for kind in ("plan", "draft"):
            got = len(_by_request(obs, "model", rid, kind=kind))
            if got == 2 and obs["window"] and not extra:
                extra = 1                     # the call the killed process made, made again
                continue
            if got != 1:
                raise Fail(f"request {rid}: the model billed {got} {kind}s, expected 1"
                           + (" (one more is forgiven once: the process was killed after a "
                              "step's effect, before its checkpoint)" if obs["window"] else ""))


def _same_report(obs, requests):
    for role in ("A1", "A2", "B3"):
        rid = requests[role]["id"]
        mailed = {d["report_id"] for d in _by_request(obs, "mail", rid, kind="report")}
        posted = {d["report_id"] for d in _by_request(obs, "tracker", rid)}
        if mailed != posted:
            raise Fail(f"request {rid}: the report emailed was {sorted(mailed)}, the report "
                       f"posted {sorted(posted)}")


def _budget(obs, requests):
    req = requests["B5"]
    run = _run_of(obs, req["id"])
    fetches = len({d["call"] for d in _by_request(obs, "fetches", req["id"])})
    allowed = req["budget"]["steps"]
    if run["status"] != "halted" or "max_steps" not in (run.get("halt_reason") or ""):
        raise Fail(f"request {req['id']} (a plan of {req['calls']} tool calls, a budget of "
                   f"{allowed} steps) ended {run['status']} "
                   f"({run.get('halt_reason') or run.get('error')}) "
                   f"after {fetches} tool calls")
    if fetches + 1 > allowed:
        raise Fail(f"request {req['id']}: {fetches} tool calls and its plan with a budget of "
                   f"{allowed} steps")
    for role in ("A1", "A2"):
        rid = requests[role]["id"]
        billed = round(sum(d["cost"] for d in _by_request(obs, "model", rid)), 6)
        entries = obs["entries"].get(_run_of(obs, rid)["run_id"], [])
        recorded = round(sum(c or 0 for _, c in entries), 6)
        bills = [d["cost"] for d in _by_request(obs, "model", rid)]
        if abs(billed - recorded) > 1e-6 and not (
                obs["window"] and any(abs(billed - b - recorded) < 1e-6 for b in bills)):
            raise Fail(f"request {rid}: its model calls were billed ${billed}; its run "
                       f"recorded ${recorded}")


def _approval(obs, requests):
    """Each asks its approver once. A1's says yes: one payment. A2's says no, and B3's never
    answers: never charged, not even to be paid back. Only B3's silence is told (one
    'nobody answered' notice). A failure says what the check saw: the request, what the
    ledgers hold, when the person answered, the deadline its run fixed, and the clock."""
    for role, answer in (("A1", True), ("A2", False), ("B3", None)):
        req = requests[role]
        rid = req["id"]
        held = [len(_by_request(obs, ledger, rid))
                for ledger in ("approvals", "expired", "charges")]
        want = [1, int(answer is None), int(answer is True)]
        if held == want:
            continue
        run_id = obs["ran"].get(rid)
        sent = [(json.loads(payload), at) for r, _, payload, at in obs["signals"] if r == run_id]
        if answer is None:
            who = "nobody answers its approver"
        elif sent:
            who = "its approver says " + ", then ".join(
                f"{'yes' if payload else 'no'} at {_hours(at)}" for payload, at in sent)
        else:
            who = "its approver's answer was never sent"
        notices = "'nobody answered' notice"
        raise Fail(f"request {rid} (a ${req['source_price']} source; {who}): the world's "
                   f"ledgers hold {_n(held[0], 'question')} to the approver, "
                   f"{_n(held[1], notices)} and {_n(held[2], 'payment')} for the source; "
                   f"expected {want[0]}, {want[1]} and {want[2]}. {_timeline(obs, run_id)}")


def _n(count, thing) -> str:
    return f"{count} {thing}{'' if count == 1 else 's'}"


def _hours(t) -> str:
    """A moment of the scenario, in hours since it began."""
    return f"{(t - START) / 3600:.1f} h"


def _span(seconds) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 360 else f"{seconds:.0f} s"


def _timeline(obs, run_id) -> str:
    """Where the run stood, the deadlines it fixed, and what the clock read."""
    runs = [r for r in obs["runs"] if r["run_id"] == run_id]
    said = f"Its run is {runs[0]['status']}" if runs else "It has no run in the store"
    for _, name, at, set_at in (t for t in obs["timers"] if t[0] == run_id):
        said += (f"; its deadline {name!r} was fixed at {_hours(set_at)}, "
                 f"{_span(json.loads(at) - set_at)} ahead")
    return (f"{said}; the clock read {_hours(obs['clock'])} when the last worker stopped "
            "(hours since the scenario began).")


def _per_tenant(obs, requests):
    spans = {}
    for i, _, _, d in obs["records"]:
        rid = d.get("request")
        if rid:
            lo, hi = spans.get(rid, (i, i))
            spans[rid] = (min(lo, i), max(hi, i))
    for first, second in (("A1", "A2"), ("B3", "B4")):
        r1, r2 = requests[first]["id"], requests[second]["id"]
        if r1 in spans and r2 in spans and spans[r2][0] < spans[r1][1]:
            raise Fail(f"tenant {requests[first]['tenant']}: request {r2} was under way "
                       f"before request {r1} had finished")


def _compensation(obs, requests):
    rid = requests["B4"]["id"]
    run = _run_of(obs, rid)
    if run["status"] != "compensated":
        raise Fail(f"request {rid} (the tracker refuses its post for good) ended {run['status']}")
    _expect(obs, "charges", rid, 1, "payments for the source")
    _expect(obs, "source_refunds", rid, 1, "refunds of the source")
    _expect(obs, "mail", rid, 0, "report emails", kind="report")


def _versioning(obs, requests):
    for role, version in (("A1", 1), ("A2", 1), ("B3", 2)):
        rid = requests[role]["id"]
        run = _run_of(obs, rid)
        posts = _by_request(obs, "tracker", rid)
        if run["version"] != version:
            when = "before" if version == 1 else "after"
            raise Fail(f"request {rid}, submitted {when} version 2 "
                       f"was deployed, ran on version {run['version']}")
        if posts and bool(posts[0].get("sources")) != (version == 2):
            raise Fail(f"request {rid} (version {version}) posted its report "
                       f"{'without' if version == 2 else 'with'} sources")


JUDGES = {"exactly once": _exactly_once, "model billed once": _model_once,
          "recorded non-determinism": _same_report, "budget": _budget,
          "approval deadline": _approval, "per-tenant limit": _per_tenant,
          "compensation": _compensation, "versioning": _versioning}


# the sweep ------------------------------------------------------------------------------------
class Graded:
    """One sweep's outcome: the points, and {point index: {property: failure or None}}."""

    def __init__(self, seed, points, clean, cases, seconds):
        self.seed, self.points, self.clean = seed, points, clean
        self.cases, self.seconds = cases, seconds

    def broken(self, prop):
        """(point label or "no crash", message) of the first case that broke `prop`, or None."""
        if self.clean.get(prop):
            return "no crash", self.clean[prop]
        for index, outcome in sorted(self.cases.items()):
            if outcome.get(prop):
                return _label(self.points[index - 1]), outcome[prop]
        return None

    def table(self, props=None) -> str:
        """Crash points × properties (`props`, or every one), ✗ where the property broke
        (rows grouped by step kind)."""
        props = [p for p in PROPERTIES if p in (props or self.clean)]
        rows = {"no crash": {p for p in props if self.clean.get(p)}}
        for index, outcome in sorted(self.cases.items()):
            label = _label(self.points[index - 1])
            rows.setdefault(label, set()).update(p for p in props if outcome.get(p))
        short = [COLUMN[p] for p in props]
        width, column = max(len(r) for r in rows), max(len(s) for s in short)
        lines = [" " * width + "  " + " ".join(f"{s:>{column}}" for s in short)]
        for label, bad in rows.items():
            marks = " ".join(f"{'✗' if p in bad else '·':>{column}}" for p in props)
            lines.append(f"{label:<{width}}  {marks}")
        played = len(self.cases)
        lines.append((f"(seed {self.seed}: {played} crash points" if played == len(self.points)
                      else f"(seed {self.seed}: {played} of {len(self.points)} crash points played")
                     + "; ✗ broke, · held)")
        return "\n".join(lines)


def _label(point):
    step, when = point
    name = step.split("#")[0]
    name = "fetch:<call id>" if name.startswith("fetch") else name
    return f"{name} · {when.replace('_', ' ')}"


def sweep(answers, seed, jobs=2, crash=True, stop_on=None, points=None) -> Graded:
    """Play the scenario without a crash, then once per crash point it passed, two at a time.

    stop_on: a property's name: play no case after the first that breaks it (a self-check;
    the tests' way to show a wrong answer fails). Every case before that one is played too,
    so the first case that broke it is the whole sweep's.
    points: fn(step, when) -> bool, the crash points to play (all of them by default): a
    property broken at one of them is broken in the whole sweep, which plays the same cases."""
    from ..cases import Draw
    started = time.monotonic()
    sources = sources_of(answers)
    requests = requests_for(Draw(seed))
    with scratch("ex16") as root:
        clean = play(os.path.join(root, "clean"), sources, requests,
                     snapshots=os.path.join(root, "snapshots"))
        clean_judged = judge(observe(os.path.join(root, "clean"), requests, clean["runs"],
                                     clean["clock"]), requests)
        choose, points, starts = points, clean["points"], clean["phase_starts"]
        chosen = [i for i in range(1, len(points) + 1) if choose is None or choose(*points[i - 1])]
        stop = [bool(stop_on and clean_judged.get(stop_on))]

        def case(index):
            if stop[0]:
                return index, None
            first = max(i for i, passed in enumerate(starts) if passed < index)
            folder = os.path.join(root, f"case-{index:03d}")
            try:
                outcome = play(folder, sources, requests, kill_at=index,
                               start=(first, clean["states"][first]))
                window = points[index - 1][1] == "after_effect"
                judged = judge(observe(folder, requests, outcome["runs"], outcome["clock"]),
                               requests, window)
            except Fail as fail:
                judged = {p: fail.message for p in clean_judged}
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            if stop_on and judged.get(stop_on):
                stop[0] = True
            return index, judged

        cases = {}
        if crash:
            pool = ThreadPoolExecutor(max_workers=jobs)
            try:
                cases = {i: j for i, j in pool.map(case, chosen) if j is not None}
            finally:           # a test past its time limit stops here: play no more cases
                stop[0] = True
                pool.shutdown(wait=True, cancel_futures=True)
    return Graded(seed, points, clean_judged, cases, time.monotonic() - started)


def lessons_of(prop) -> str:
    """"lesson 05" or "lessons 02, 03": where a property was taught."""
    taught = PROPERTIES[prop]
    return f"lesson{'s' if ',' in taught else ''} {taught}"


# the question ---------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "the research agent under every crash", answers=ANSWERS)
_SWEEPS = {}          # one sweep per answer and run of the check, shared by its tests


FIRST = next(iter(PROPERTIES))


def _graded(answers, draw, prop):
    """The first property's test sweeps; the others of the same check read its outcome."""
    key = tuple(id(a) for a in answers)
    graded = _SWEEPS.get(key)
    if graded is None or prop == FIRST:
        graded = sweep(answers, draw.randrange(2 ** 31))
        _SWEEPS.clear()
        _SWEEPS[key] = graded
    return graded


def failure(graded, prop):
    """(when, what) of the first case of a sweep that broke `prop`, or None if it held: how
    the grade's test of `prop` and `self_check(prop, ...)` both read a sweep."""
    broken = graded.broken(prop)
    if broken is None:
        return None
    where, message = broken
    return ("with no crash" if where == "no crash" else f"after a crash at {where}"), message


def _property_test(prop):
    def test(research, research_v2, submit, serve, draw):
        graded = _graded((research, research_v2, submit, serve), draw, prop)
        failed = failure(graded, prop)
        if failed:
            when, message = failed
            raise Fail(f"{when}: {message}\n{graded.table()}",
                       f"{lessons_of(prop)} taught it; self_check(\"{prop}\", ..., seed={graded.seed}) "
                       "plays these cases again for this property")
    return test


for _prop in PROPERTIES:
    q1.test(f"{_prop} ({lessons_of(_prop)}), at every crash point")(_property_test(_prop))


# the self-check ---------------------------------------------------------------------------------
def self_check(prop, research, research_v2, submit, serve, seed=None, crash=True):
    """The grade of one property, from the notebook: the grader's own sweep (the scenario,
    every crash point it passes, the same judges), stopped at the first case that breaks
    `prop`. With the seed a failed check names, it plays the grade's cases and gives its
    verdict. Prints the property's column of the table and says whether it held.
    crash=False plays the scenario once, without a crash (a first try, in a few seconds)."""
    from ..cases import fresh_seed
    if prop not in PROPERTIES:
        print(f"No property {prop!r}; the rubric's are: {', '.join(PROPERTIES)}")
        return None
    seed = fresh_seed() if seed is None else seed
    try:
        graded = sweep((research, research_v2, submit, serve), seed, crash=crash, stop_on=prop)
    except (Fail, NotAttempted) as exc:
        print(f"{prop}: could not play the scenario: {getattr(exc, 'message', exc)}")
        return None
    failed = failure(graded, prop)
    print(graded.table([prop]))
    if failed:
        when, message = failed
        print(f"\n✗ {prop} ({lessons_of(prop)}) broke {when}: {message}\n"
              f"  (seed={graded.seed} repeats these cases)")
    elif not graded.cases:
        print(f"\n✓ {prop} ({lessons_of(prop)}) held with no crash (one play; without "
              "crash=False the self-check plays every crash point)")
    else:
        print(f"\n✓ {prop} ({lessons_of(prop)}) held at every one of "
              f"{len(graded.cases)} crash points")
    return None
