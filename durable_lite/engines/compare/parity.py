"""The same scenarios on durable_lite, DBOS and Temporal, as outcomes that can be compared.

micrograd checks itself against PyTorch; durable_lite checks itself against DBOS and
Temporal. Every scenario here has a runner per engine, `<scenario>_durable_lite(...)`,
`<scenario>_dbos(...)` and, for the first two, `<scenario>_temporal(...)`, that return
plain dicts with the same keys, read from the same places: the run's final status and
result, what its resume replayed, and the simulated world's ledgers (a fresh world folder
per run). Where two dicts differ, an engine broke a promise, or the difference is real and
belongs in differences.py.

    refund_killed      lesson 01's refund, SIGKILLed at a crash point, resumed by a
                       fresh process (DBOS: a worker with the same executor id; Temporal:
                       another worker on the task queue), keyed or not
    approval           the refund over its limit: the approval arrives, or the deadline
                       passes first
    fifty_attempts     figure 5: 50 delivery attempts across fresh runners -> 1 delivery
    failed_then_resumed, fresh_process, changed_nonce
                       figures 2, 4 and 3 of the source review's research workflow

The DBOS runners take a system-database URL (SQLite or Postgres). They launch DBOS in this
process when they need it and destroy it before returning. The Temporal runners take a
server's address (TempTemporal, temporal/server.py) and run every workflow in worker
processes, each case on a task queue of its own, so many cases can share one server.
"""

import os
import time

from ... import examples as ex
from ...clock import FakeClock, SequentialIds
from ...engine import Engine
from ...errors import Crash
from ...faults import CrashAt, run_in_child
from ...store import SQLiteStore
from ...store.records import STEP
from ...workflow import workflow
from ..lite import refund as refund_durable_lite
from .ledger import ledger  # noqa: F401 - parity.ledger(folder), the numbers to compare

TOPIC = "durable execution"
ORDER, AMOUNT, BIG_AMOUNT = "A-17", 40, 250


def _engine(workdir, clock=None, **options):
    return Engine(SQLiteStore(os.path.join(workdir, "runs.db")), clock or FakeClock(),
                  ids=SequentialIds("run"), **options)


def _dbos():
    from dbos import DBOS, SetWorkflowID
    from ..dbos import (faults as dbos_faults, refund as refund_dbos, research as research_dbos,
                        support as dbos_support)
    return DBOS, SetWorkflowID, dbos_faults, dbos_support, refund_dbos, research_dbos


# lesson 01's refund, killed for real ---------------------------------------------------------
def _refund_options(keyed) -> dict:
    """keyed: every effect carries an idempotency key (the cure of lesson 03); not keyed:
    none does (the refund of lesson 01 before the cure). Keyed passes key_notices alone,
    as before, so a port with no use_key option still takes it."""
    return {"key_notices": True} if keyed else {"use_key": False, "key_notices": False}


def refund_killed_durable_lite(step, when, folder, workdir, order=ORDER, amount=AMOUNT,
                               keyed=True) -> dict:
    store = os.path.join(workdir, "runs.db")
    killed = run_in_child(store, "durable_lite.examples", "refund", folder, order, amount,
                          run_id=f"refund-{order}", crash_at=CrashAt(step, when, kill=True),
                          **_refund_options(keyed))
    resumed = run_in_child(store, "durable_lite.examples", "refund", run_id=f"refund-{order}",
                           resume=True).run
    return {"killed": killed.killed, "status": resumed["status"], "result": resumed["result"],
            "replayed": resumed["replayed"], **ledger(folder)}


def refund_killed_dbos(step, when, folder, url, order=ORDER, amount=AMOUNT,
                       workflow="refund.refund", imports=(), python_path=(),
                       keyed=True) -> dict:
    """`workflow` may be any port of lesson 01's refund whose steps come from
    dbos/faults.py's step (a learner's, say: give its module in `imports`/`python_path`)."""
    from ..dbos.support import recorded_steps, status_word
    from ..dbos.worker import start_worker
    # One system database serves many cases: each gets its own workflow and executor id.
    case = f"{order}-{step}-{when}" + ("" if keyed else "-unkeyed")
    workflow_id, executor = f"refund-{case}", f"sweep-{case}"
    where = {"imports": imports, "python_path": python_path}
    killed = start_worker(url, executor, crash=CrashAt(step, when), **where,
                          start=[(workflow, workflow_id, [folder, order, amount],
                                  _refund_options(keyed))])
    killed.join()
    checkpointed = recorded_steps(url, workflow_id)      # what the restart will replay
    report = start_worker(url, executor, wait_for=[workflow_id], **where
                          ).result()[workflow_id]
    return {"killed": killed.killed, "status": status_word(report["status"]),
            "result": report["result"], "replayed": checkpointed, **ledger(folder)}


def refund_killed_temporal(step, when, folder, address, order=ORDER, amount=AMOUNT,
                           keyed=True, workflow="refund", imports=(), python_path=()) -> dict:
    """The refund on Temporal: worker "machine-a" starts it and is SIGKILLed at the crash
    point; "machine-b", another process on the same task queue, finishes it once the
    server gives up on the first (temporal/worker.py says after how long). `replayed` is
    what the server had recorded as completed when machine-a died. `workflow` may be any
    port registered under another name whose activities come from temporal/faults.py."""
    from ..temporal import support as temporal_support
    from ..temporal.worker import start_worker
    case = f"{order}-{step}-{when}" + ("" if keyed else "-unkeyed")
    workflow_id = f"refund-{case}-{os.urandom(3).hex()}"     # a shared server, many cases
    where = {"task_queue": f"q-{workflow_id}", "imports": imports, "python_path": python_path}
    machine_a = start_worker(address, "machine-a", crash=CrashAt(step, when), **where,
                             start=[(workflow, workflow_id,
                                     [folder, order, amount, keyed, False, keyed], {})])
    machine_a.join()
    recorded = temporal_support.completed_steps(address, workflow_id)
    machine_b = start_worker(address, "machine-b", wait_for=[workflow_id], **where)
    try:
        report = machine_b.result()[workflow_id]
    finally:
        machine_b.kill()
    return {"killed": machine_a.killed, "status": temporal_support.status_word(report["status"]),
            "result": report["result"], "replayed": recorded, **ledger(folder)}


# a wait with a deadline -------------------------------------------------------------------
def approval_durable_lite(approve: bool, folder, workdir) -> dict:
    """durable_lite on a fake clock: two days pass in no time."""
    clock = FakeClock()
    engine = _engine(workdir, clock)
    run_id = f"refund-{ORDER}"
    first = refund_durable_lite.start(engine, folder, ORDER, BIG_AMOUNT, run_id)
    if approve:
        refund_durable_lite.approve(engine, run_id)
    else:
        clock.advance(2 * 86400 + 1)                         # past the deadline
    for _ in range(3):                                       # the wait, then the cooling off
        refund_durable_lite.work(engine)
        if engine.get(run_id).status == "completed":
            break
        clock.advance(3600)
    final = engine.get(run_id)
    return {"asked for approval": first.status == "waiting", "status": final.status,
            "result": final.result, **ledger(folder)}


def approval_dbos(approve: bool, folder, url, timeout=0.5) -> dict:
    """DBOS on the wall clock: the deadline is `timeout` real seconds."""
    DBOS, _, _, dbos_support, refund_dbos, _ = _dbos()
    workflow_id = f"refund-{ORDER}-approval-{approve}"
    with dbos_support.running(url):
        handle = refund_dbos.start(folder, ORDER, BIG_AMOUNT, workflow_id,
                                   approval_timeout=timeout, cooling_off=0.05)
        if approve:
            refund_dbos.approve(workflow_id)     # may arrive before the wait: it is kept
        result = handle.get_result(polling_interval_sec=0.05)
        status = DBOS.get_workflow_status(workflow_id).status
        steps = [s["function_name"] for s in DBOS.list_workflow_steps(workflow_id)]
    return {"asked for approval": "DBOS.recv" in steps,
            "status": dbos_support.status_word(status), "result": result, **ledger(folder)}


def approval_temporal(approve: bool, folder, address, timeout=0.5) -> dict:
    """Temporal on the wall clock too (its dev server has no time skipping): the deadline is
    `timeout` real seconds. The approval is a signal, sent once the run exists."""
    from ..temporal import refund as refund_temporal, support as temporal_support
    from ..temporal.worker import start_worker
    workflow_id = f"refund-{ORDER}-approval-{approve}-{os.urandom(3).hex()}"
    worker = start_worker(address, "approvals", task_queue=f"q-{workflow_id}", start=[
        ("refund_with_approval", workflow_id, [folder, ORDER, BIG_AMOUNT, 100, timeout, 0.05],
         {})])
    try:
        if approve:          # once the run waits, as durable_lite's is answered once parked
            temporal_support.wait_for_timer(address, workflow_id, "approval deadline")
            temporal_support.signal(address, workflow_id, refund_temporal.APPROVAL,
                                    {"approved": True, "by": "ana"})
        report = worker.result()[workflow_id]
    finally:
        worker.kill()
    timers = [r for r in temporal_support.history(address, workflow_id) if r["kind"] == "timer"]
    return {"asked for approval": any(t["step"] == "approval deadline" for t in timers),
            "status": temporal_support.status_word(report["status"]),
            "result": report["result"], **ledger(folder)}


# figure 5: fifty attempts, one delivery ----------------------------------------------------
@workflow("parity-deliver")
def deliver(ctx, folder, report):
    return ctx.step("deliver", ex.research_tool, folder, "deliver", report)


def fifty_attempts_durable_lite(folder, workdir) -> dict:
    path = os.path.join(workdir, "runs.db")
    attempts = 0
    run = None
    for n in range(10):                                      # ten fresh runners
        store = SQLiteStore(path)
        crash = CrashAt("deliver", "after_checkpoint") if n == 0 else None
        engine = Engine(store, FakeClock(), crash_at=crash)
        for _ in range(5):
            attempts += 1
            try:
                run = engine.start(deliver, folder, "the report", run_id="delivery-1")
            except Crash:
                continue                                     # that attempt's worker died
        store.close()
    store = SQLiteStore(path)
    recorded = [e for e in store.load_entries("delivery-1") if e.kind == STEP]
    store.close()
    return {"attempts": attempts, "status": run.status, "result": run.result,
            "deliver checkpoints": len(recorded), **ledger(folder)}


def fifty_attempts_dbos(folder, url) -> dict:
    DBOS, SetWorkflowID, dbos_faults, dbos_support, _, research_dbos = _dbos()
    attempts = 0
    result = None
    dbos_faults.arm(CrashAt("deliver", "after_checkpoint"))
    try:
        for n in range(10):                                  # ten fresh runners
            dbos_support.launch(url)
            for _ in range(5):
                attempts += 1
                try:
                    with SetWorkflowID("delivery-1"):
                        result = research_dbos.deliver(folder, "the report")
                except Crash:
                    # The runner died mid-workflow; a process that died this way restarts,
                    # and DBOS's launch recovers what it left PENDING.
                    dbos_support.launch(url)
        status = DBOS.get_workflow_status("delivery-1").status
        steps = [s["function_name"] for s in DBOS.list_workflow_steps("delivery-1")]
    finally:
        dbos_faults.disarm()
        dbos_support.shutdown()
    return {"attempts": attempts, "status": dbos_support.status_word(status), "result": result,
            "deliver checkpoints": steps.count("deliver"), **ledger(folder)}


# figures 2, 4, 3: the research workflow ------------------------------------------------------
def failed_then_resumed_durable_lite(folder, workdir) -> dict:
    """Figure 2: drafting fails on its first call; the second start resumes from there."""
    engine = _engine(workdir)
    first = engine.start(ex.research, folder, TOPIC, run_id="research-2")
    second = engine.start(ex.research, folder, TOPIC, run_id="research-2")
    return {"first run": first.status, "status": second.status, "replayed": second.replayed,
            **ledger(folder)}


def failed_then_resumed_dbos(folder, url) -> dict:
    """Figure 2 on DBOS: a failed workflow keeps its error; fork_workflow continues it."""
    DBOS, SetWorkflowID, _, dbos_support, _, research_dbos = _dbos()
    from ..dbos.worker import outcome, step_id
    with dbos_support.running(url):
        first = _failed_research(DBOS, SetWorkflowID, research_dbos, folder, "research-2")
        with SetWorkflowID("research-2-fork"):
            DBOS.fork_workflow("research-2", step_id("research-2", "drafting"))
        forked = outcome("research-2-fork", time.monotonic() + 60)
    return {"first run": first, "status": dbos_support.status_word(forked["status"]),
            "replayed": _before(forked["steps"], "drafting"), **ledger(folder)}


def fresh_process_durable_lite(folder, workdir) -> dict:
    """Figure 4: the run fails in one process and a fresh process finishes it."""
    engine = _engine(workdir)
    first = engine.start(ex.research, folder, TOPIC, run_id="research-4")
    child = run_in_child(engine.store.path, "durable_lite.examples", "research",
                         run_id="research-4", resume=True)
    return {"first run": first.status, "status": child.run["status"],
            "replayed": child.run["replayed"], **ledger(folder)}


def fresh_process_dbos(folder, url) -> dict:
    DBOS, SetWorkflowID, _, dbos_support, _, research_dbos = _dbos()
    from ..dbos.worker import start_worker
    with dbos_support.running(url):
        first = _failed_research(DBOS, SetWorkflowID, research_dbos, folder, "research-4")
    # This process's DBOS is gone, so only the fresh worker can pick the fork up.
    report = start_worker(url, "fresh", fork=[("research-4", "drafting", "research-4-fork")]
                          ).result()["research-4-fork"]
    return {"first run": first, "status": dbos_support.status_word(report["status"]),
            "replayed": _before(report["steps"], "drafting"), **ledger(folder)}


NONCE = {"value": 1}


@workflow("parity-research-nonce")
def research_with_nonce(ctx, folder, topic):
    """The research workflow, its drafting nonce read from code (a cell a learner edits)."""
    docs = ctx.step("retrieval", ex.research_tool, folder, "retrieval", topic)
    facts = ctx.step("extraction", ex.extract_and_notify, folder, docs, "team@example.com")
    report = ctx.step("drafting", ex.draft, folder, facts, NONCE["value"])
    ctx.step("deliver", ex.research_tool, folder, "deliver", report["text"])
    return {"topic": topic, "draft": report["text"]}


def changed_nonce_durable_lite(folder, workdir) -> dict:
    """Figure 3: the draft is checkpointed, the code changes its nonce to 999, and the
    resumed run still delivers generation 1's draft."""
    NONCE["value"] = 1
    engine = _engine(workdir)
    engine.start(research_with_nonce, folder, TOPIC, run_id="research-3")      # fails
    crashing = Engine(engine.store, engine.clock, crash_at=CrashAt("deliver", "before_step"))
    try:
        crashing.resume("research-3")
    except Crash:
        pass
    NONCE["value"] = 999
    try:
        run = _engine(workdir).resume("research-3")
    finally:
        NONCE["value"] = 1
    return {"status": run.status, "draft": run.result["draft"][:14], **ledger(folder)}


def changed_nonce_dbos(folder, url) -> dict:
    DBOS, SetWorkflowID, dbos_faults, dbos_support, _, research_dbos = _dbos()
    from ..dbos.worker import outcome, step_id
    research_dbos.NONCE["value"] = 1
    try:
        with dbos_support.running(url):
            _failed_research(DBOS, SetWorkflowID, research_dbos, folder, "research-3")
            dbos_faults.arm(CrashAt("deliver", "before_step"))
            with SetWorkflowID("research-3-fork"):
                DBOS.fork_workflow("research-3", step_id("research-3", "drafting"))
            deadline = time.monotonic() + 60
            while dbos_faults.pending() and time.monotonic() < deadline:
                time.sleep(0.02)                        # the fork runs, then crashes
        research_dbos.NONCE["value"] = 999              # the code changed meanwhile
        with dbos_support.running(url):                 # a restart recovers the fork
            forked = outcome("research-3-fork", time.monotonic() + 60)
    finally:
        dbos_faults.disarm()
        research_dbos.NONCE["value"] = 1
    return {"status": dbos_support.status_word(forked["status"]),
            "draft": (forked["result"] or {}).get("draft", "")[:14], **ledger(folder)}


def _failed_research(DBOS, SetWorkflowID, research_dbos, folder, workflow_id):
    try:
        with SetWorkflowID(workflow_id):
            research_dbos.research(folder, TOPIC)
    except Exception:                                   # drafting's first call fails
        pass
    return _word(DBOS.get_workflow_status(workflow_id).status)


def _word(status):
    from ..dbos.support import status_word
    return status_word(status)


def _before(steps, name):
    return steps[:steps.index(name)] if name in steps else list(steps)


# a few scenarios, side by side, for the lesson ---------------------------------------------------
_SHOWN = ("status", "refunds paid", "refund requests", "emails", "tickets closed", "tool calls",
          "deliveries", "replayed")


def summary(outcome: dict) -> str:
    """The numbers of an outcome that matter, in one line: "completed · refunds paid 1 · ..."."""
    parts = [str(outcome["status"])]
    for key in _SHOWN[1:]:
        value = outcome.get(key)
        if value:
            parts.append(f"{key} {'+'.join(value) if isinstance(value, list) else value}")
    return " · ".join(parts)


def quick(folder, url, kill_url=None):
    """Run a few scenarios on both engines (a few seconds) and return a DataFrame:
    scenario, durable_lite, DBOS, agree. `folder` is a scratch folder; `url` a DBOS system
    database for in-process runs, `kill_url` one for worker processes (default: `url`)."""
    import pandas

    from ..dbos.support import off_the_loop

    def place(name):
        path = os.path.join(folder, name)
        os.makedirs(path, exist_ok=True)
        return os.path.join(path, "world"), path

    cases = [
        ("killed inside the refund step, resumed by a fresh process",
         lambda f, w: refund_killed_durable_lite("refund", "after_effect", f, w),
         lambda f: refund_killed_dbos("refund", "after_effect", f, kill_url or url)),
        ("approval arrives before the deadline",
         lambda f, w: approval_durable_lite(True, f, w),
         lambda f: approval_dbos(True, f, url, timeout=0.3)),
        ("nobody answers: the deadline passes",
         lambda f, w: approval_durable_lite(False, f, w),
         lambda f: approval_dbos(False, f, url, timeout=0.3)),
    ]
    rows = []
    for n, (name, on_durable_lite, on_dbos) in enumerate(cases):
        dl_outcome = on_durable_lite(*place(f"case{n}-durable_lite"))
        dbos_outcome = off_the_loop(on_dbos)(place(f"case{n}-dbos")[0])
        rows.append({"scenario": name, "durable_lite": summary(dl_outcome),
                     "DBOS": summary(dbos_outcome), "agree": dl_outcome == dbos_outcome})
    return pandas.DataFrame(rows)


# LangGraph: the same scenarios on its functional API ---------------------------------------
# The refund runs in a worker process on a SqliteSaver file in `workdir`, killed at a crash
# point (langgraph/faults.py) and resumed by a fresh worker: invoke(None) on the thread, or,
# when the thread has no checkpoint at all (durability="exit"), the same input again.
def refund_killed_langgraph(step, when, folder, workdir, order=ORDER, amount=AMOUNT,
                            keyed=True, durability="sync") -> dict:
    """keyed: every effect carries an idempotency key (as refund_killed_durable_lite's
    refund, with key_notices); False: none does, not even the refund."""
    from ..langgraph.durability import killed_and_resumed
    seen = killed_and_resumed(step, when, folder, workdir, keyed, durability, order, amount)
    return {key: value for key, value in seen.items() if key not in ("how", "ran")}


def approval_langgraph(approve: bool, folder, workdir) -> dict:
    """LangGraph on a fake clock too: its port reads time through a task, and the deadline
    is passed by running the sweep (wake_due, langgraph/refund.py) two days later."""
    from ..langgraph import refund as refund_langgraph, support as langgraph_support
    saver = langgraph_support.open_saver(os.path.join(workdir, "langgraph.sqlite"))
    clock = FakeClock()
    previous = refund_langgraph.set_clock(clock)
    try:
        wf = langgraph_support.bind(refund_langgraph.refund_with_approval, saver)
        run_id = f"refund-{ORDER}"
        refund_langgraph.start(wf, folder, ORDER, BIG_AMOUNT, run_id)
        asked = langgraph_support.waiting(wf).get(run_id, {}).get("waiting for")
        if approve:
            refund_langgraph.approve(wf, run_id)
        else:
            clock.advance(2 * 86400 + 1)                     # past the deadline
        for _ in range(3):                                   # the wait, then the cooling off
            refund_langgraph.wake_due(wf)
            if langgraph_support.status(wf, run_id) == "completed":
                break
            clock.advance(3600)
        status = langgraph_support.status(wf, run_id)
        result = langgraph_support.result(wf, run_id)
    finally:
        refund_langgraph.set_clock(previous)
        langgraph_support.close_saver(saver)
    return {"asked for approval": asked == refund_langgraph.APPROVAL, "status": status,
            "result": result, **ledger(folder)}
