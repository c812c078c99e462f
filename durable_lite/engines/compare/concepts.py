"""The port concept by concept, and the map from durable_lite to six other engines.

Both are data, so the lesson renders them and tests check them:

- PORT: each row names a concept and the line that expresses it in
  lite/refund.py and in dbos/refund.py. A test checks that every line really is
  in its module, so the table cannot drift from the code.
- MAP: what durable_lite calls step, sleep, wait-for-signal, idempotency, versioning,
  queues/flow control and fork, and the name for the same thing in DBOS, Temporal,
  Inngest, Restate, LangGraph and AWS Lambda durable functions. Every cell was checked
  against that engine's documentation (or, for durable_lite and DBOS, its source); a cell
  we could not confirm says so instead of guessing. Checked 2026-11-30. A cell whose
  source starts with "run here" was confirmed by running it on this machine instead (the
  test named there does; lesson 15 shows it).
- ENGINE_PORT: the refund on durable_lite, DBOS, Temporal and LangGraph, concept by
  concept, each cell a line of that engine's port, with what does not change.
"""

from dataclasses import dataclass
from typing import Optional

CONCEPTS = ("step", "sleep", "wait for a signal", "idempotency", "versioning",
            "queues / flow control", "fork")
ENGINES = ("durable_lite", "DBOS", "Temporal", "Inngest", "Restate", "LangGraph",
           "AWS Lambda durable functions")
UNCONFIRMED = "not confirmed in the docs"


@dataclass(frozen=True)
class Cell:
    name: str
    source: Optional[str]      # where it was checked; None: not confirmed

    @property
    def confirmed(self) -> bool:
        return self.source is not None


def _no(hint=""):
    return Cell(UNCONFIRMED + (f" ({hint})" if hint else ""), None)


_DL = "durable_lite source"
_DBOS = "https://docs.dbos.dev/python/reference (checked against dbos 3.4 source)"

MAP = {
    "durable_lite": {
        "step": Cell("ctx.step(name, fn, *args)", _DL),
        "sleep": Cell("ctx.sleep(seconds)", _DL),
        "wait for a signal": Cell("ctx.wait_for_signal(name, timeout) / engine.signal()", _DL),
        "idempotency": Cell("run_id; ctx.idempotency_key(*parts)", _DL),
        "versioning": Cell("@dl.workflow(name, version=N); ctx.patched(name); "
                           "engine.upgrade with @dl.migration", _DL),
        "queues / flow control": Cell("dl.Queue(concurrency, per_key, rate); engine.enqueue, "
                                      "engine.work", _DL),
        "fork": Cell("engine.fork(run_id, from_step=...) (new run); engine.invalidate "
                     "(same run)", _DL),
    },
    "DBOS": {
        "step": Cell("@DBOS.step()", _DBOS),
        "sleep": Cell("DBOS.sleep(seconds)", _DBOS),
        "wait for a signal": Cell("DBOS.recv(topic, timeout_seconds) / DBOS.send()", _DBOS),
        "idempotency": Cell("workflow id: SetWorkflowID(id)",
                            "https://docs.dbos.dev/python/tutorials/idempotency-tutorial"),
        "versioning": Cell("application_version; DBOS.patch()",
                           "https://docs.dbos.dev/python/tutorials/upgrading-workflows"),
        "queues / flow control": Cell(
            "DBOS.register_queue(worker_concurrency, global_concurrency, limiter)",
            "https://docs.dbos.dev/python/reference/queues"),
        "fork": Cell("DBOS.fork_workflow(id, start_step) (new id)", _DBOS),
    },
    "Temporal": {
        "step": Cell("Activity: workflow.execute_activity()",
                     "https://docs.temporal.io/develop/python/activities/execution"),
        "sleep": Cell("durable Timer: asyncio.sleep() in a workflow",
                      "https://docs.temporal.io/develop/python/workflows/timers"),
        "wait for a signal": Cell("@workflow.signal + workflow.wait_condition()",
                                  "github.com/temporalio/samples-python hello/hello_signal.py"),
        "idempotency": Cell("Workflow Id: one open execution per id",
                            "https://docs.temporal.io/workflow-execution/workflowid-runid"),
        "versioning": Cell("workflow.patched() / Worker Versioning",
                           "https://docs.temporal.io/develop/python/workflows/versioning"),
        "queues / flow control": Cell(
            "Task Queues; max_concurrent_activities, max_task_queue_activities_per_second",
            "https://docs.temporal.io/guides/rate-limit-downstream-apis"),
        "fork": Cell("temporal workflow reset (to an event)",
                     "https://docs.temporal.io/cli/command-reference/workflow"),
    },
    "Inngest": {
        "step": Cell("step.run(id, fn)", "https://www.inngest.com/docs/learn/inngest-steps"),
        "sleep": Cell("step.sleep(id, duration)",
                      "https://www.inngest.com/docs/durable-execution/primitives/step-sleep"),
        "wait for a signal": Cell("step.wait_for_event(id, event=..., timeout=...)",
                                  "https://www.inngest.com/docs/reference/python/steps/wait-for-event"),
        "idempotency": Cell("event id (24 h); function idempotency expression",
                            "https://www.inngest.com/docs/guides/handling-idempotency"),
        "versioning": Cell("none needed: results are memoized by step id",
                           "https://www.inngest.com/docs/durable-execution/guides-and-advanced/versioning"),
        "queues / flow control": Cell("concurrency, throttle, rate limit, debounce, priority",
                                      "https://www.inngest.com/docs/guides/concurrency"),
        "fork": Cell("Rerun from step (a new run)",
                     "https://www.inngest.com/docs/platform/manage/rerun-function-runs"),
    },
    "Restate": {
        "step": Cell("ctx.run() / ctx.run_typed()", "https://docs.restate.dev/foundations/actions"),
        "sleep": Cell("ctx.sleep(timedelta)",
                      "github.com/restatedev/examples python/templates/python/app/greeter.py"),
        "wait for a signal": Cell("ctx.awakeable(); durable promises in workflows",
                                  "https://docs.restate.dev/develop/python/external-events"),
        "idempotency": Cell("idempotency-key header on an invocation",
                            "https://docs.restate.dev/concepts/invocations"),
        "versioning": Cell("immutable deployments: a run stays on its deployment",
                           "https://docs.restate.dev/operate/versioning"),
        "queues / flow control": Cell("Virtual Object: one writer per key at a time",
                                      "https://docs.restate.dev/concepts/services"),
        "fork": _no(),
    },
    "LangGraph": {
        "step": Cell("a graph node, or @task (functional API)",
                     "https://docs.langchain.com/oss/python/langgraph/durable-execution"),
        "sleep": Cell("none: an interrupt with a due time, woken by a sweep you run "
                      "(lesson 15)",
                      "run here: tests/test_langgraph_differences.py::"
                      "test_a_sleep_parks_on_durable_lite_and_is_an_interrupt_on_langgraph"),
        "wait for a signal": Cell("interrupt() + Command(resume=...)",
                                  "https://docs.langchain.com/oss/python/langgraph/interrupts"),
        "idempotency": Cell("thread_id (which checkpoint to resume), not a dedupe key",
                            "https://docs.langchain.com/oss/python/langgraph/interrupts"),
        "versioning": Cell("none: a saved task result is found by name and place; "
                           "reordered code runs the tasks again, silently",
                           "run here: tests/test_langgraph_differences.py::"
                           "test_reordered_steps_stop_durable_lite_and_run_again_on_langgraph"),
        "queues / flow control": Cell(
            "none in the library; LangGraph Platform queues runs on a thread "
            "(multitask_strategy=\"enqueue\")",
            "https://reference.langchain.com/python/langgraph-sdk/schema/MultitaskStrategy"),
        "fork": Cell("update_state() on a past checkpoint (time travel)",
                     "https://docs.langchain.com/oss/python/langgraph/use-time-travel"),
    },
    "AWS Lambda durable functions": {
        "step": Cell("context.step()",
                     "https://docs.aws.amazon.com/lambda/latest/dg/durable-execution-sdk.html"),
        "sleep": Cell("context.wait()",
                      "https://docs.aws.amazon.com/durable-functions/sdk-reference/operations/wait/"),
        "wait for a signal": Cell("callbacks: waitForCallback() (JS and Java SDKs)",
                                  "https://aws.github.io/aws-durable-execution-sdk-java/javadoc/"),
        "idempotency": Cell("execution name",
                            "https://docs.aws.amazon.com/lambda/latest/dg/durable-execution-idempotency.html"),
        "versioning": _no(),
        "queues / flow control": _no(),
        "fork": _no(),
    },
}


# The engines by how they run your code, as lesson 14 reads the map: two at a time, a table
# each, so that every name fits a laptop's screen beside the concept it names.
FAMILIES = {
    "libraries over a database you run": ("durable_lite", "DBOS"),
    "servers that keep the history and drive your code": ("Temporal", "Restate"),
    "platforms that call your code once per step": ("Inngest", "AWS Lambda durable functions"),
    "a graph's state saved between nodes": ("LangGraph",),
}


def concept_map(sources: bool = False, engines=ENGINES):
    """The map as a DataFrame: one row per concept, one column per engine (all of them, or
    those named in `engines`, in that order)."""
    import pandas
    unknown = [e for e in engines if e not in MAP]
    if unknown:
        raise ValueError(f"no engine {unknown[0]!r} in the concept map; it has {list(ENGINES)}")
    rows = {c: {e: (MAP[e][c].source or "—") if sources else MAP[e][c].name for e in engines}
            for c in CONCEPTS}
    return pandas.DataFrame.from_dict(rows, orient="index")[list(engines)]


def concept_maps():
    """The map one family of engines at a time (FAMILIES): {family: DataFrame}."""
    return {family: concept_map(engines=engines) for family, engines in FAMILIES.items()}


def unconfirmed():
    """[(engine, concept)] for the cells the docs did not confirm."""
    return [(e, c) for e in ENGINES for c in CONCEPTS if not MAP[e][c].confirmed]


# the port ------------------------------------------------------------------------------------
PORT = [
    ("register a workflow", '@workflow("refund-with-approval", version=1)',
     '@DBOS.workflow(name="refund_with_approval")'),
    ("a step", 'ctx.step("lookup", ex.lookup_order, folder, order_id)',
     '@step("lookup")  ...  lookup(folder, order_id)'),
    ("an idempotency key", 'ctx.idempotency_key("refund", order_id)',
     'idempotency_key("refund", order_id)'),
    ("wait for the approval", "ctx.wait_for_signal(APPROVAL, timeout=approval_timeout)",
     "DBOS.recv(APPROVAL, timeout_seconds=approval_timeout)"),
    ("send the approval", 'engine.signal(run_id, APPROVAL, {"approved": True, "by": by})',
     'DBOS.send(run_id, {"approved": True, "by": by}, APPROVAL)'),
    ("durable sleep", "ctx.sleep(cooling_off)", "DBOS.sleep(cooling_off)"),
    ("start under a run id",
     "engine.start(refund_with_approval, folder, order_id, amount, run_id=run_id, **options)",
     "with SetWorkflowID(run_id):"),
]


def port_table():
    """The port as a DataFrame: one row per concept, the durable_lite line and the DBOS
    line. (Single spaces around "...": pandas 2 writes a double space into HTML as &nbsp;,
    pandas 3 does not, and the lesson must print the same table on both.)"""
    import pandas
    rows = [[text.replace("  ...  ", " ... ") for text in row] for row in PORT]
    return pandas.DataFrame(rows, columns=["concept", "durable_lite", "DBOS"]).set_index("concept")


# the port to LangGraph -------------------------------------------------------------------------
# The same idea for LangGraph's functional API: each row names a concept, the durable_lite
# line and the LangGraph line that express it (each checked by a test to be in its module,
# a module of this package named relative to durable_lite), and what changes on the way and
# what does not. Checked against langgraph 1.2, and run here (tests/test_langgraph_*.py).
@dataclass(frozen=True)
class PortRow:
    concept: str
    durable_lite: str
    langgraph: str
    changes: str
    durable_lite_in: str = "engines.lite.refund"
    langgraph_in: str = "engines.langgraph.refund"


LANGGRAPH_PORT = [
    PortRow("register a workflow", '@workflow("refund-with-approval", version=1)',
            "@entrypoint()",
            "An entrypoint takes one input (a dict of the arguments) and no ctx; its "
            "checkpointer is bound to it (langgraph_support.bind), and it has no version."),
    PortRow("run id", "engine.start(refund_with_approval, folder, order_id, amount, run_id=run_id",
            "workflow.invoke(inputs, langgraph_support.config(run_id), durability=durability)",
            "The run id becomes the thread id in the config. Starting a finished thread again "
            "runs every task again: the id names checkpoints, it deduplicates nothing."),
    PortRow("a step", 'ctx.step("lookup", ex.lookup_order, folder, order_id)',
            '@step("lookup"  ...  lookup(folder, order_id).result()',
            "A step becomes a decorated function (@task; here step() adds the crash points) "
            "whose call returns a future. Its result is saved on a background thread."),
    PortRow("an idempotency key", 'ctx.idempotency_key("refund", order_id)',
            'idempotency_key("refund", order_id)  ...  '
            'derive_key(get_config()["configurable"]["thread_id"], *parts)',
            "Nothing: the same key function, fed with the thread id, sends a provider the "
            "same keys for the same run id."),
    PortRow("retries", 'Step("lookup_order", retry=Retry(max_attempts=8',
            "retry_policy=RetryPolicy(max_attempts=3",
            "Neither retries unless told. RetryPolicy's default filter skips some errors "
            "(ValueError, TypeError, OSError, ...); dl.Retry retries any but its no_retry.",
            durable_lite_in="lumpy"),
    PortRow("code outside a step", "if amount > limit:", 'if amount > inputs.get("limit", 100):',
            "Nothing: the body runs again from the top on every resume and finished steps "
            "come from the checkpoint, so code outside them must decide the same way again."),
    PortRow("wait for the approval",
            "ctx.wait_for_signal(APPROVAL, timeout=approval_timeout)",
            'interrupt({"waiting for": APPROVAL, "due": deadline})',
            "An interrupt has no name and no timeout: the deadline becomes data in it, and "
            "the workflow reads the clock again to decline a late answer."),
    PortRow("send the approval", "engine.signal(run_id, APPROVAL, {",
            'Command(resume={"approved": True, "by": by})',
            "The answer goes to whatever interrupt the thread is at, so approve() checks "
            "first; it also runs the thread on, in the caller's process."),
    PortRow("the deadline passes", "return engine.recover()",
            'Command(resume={"woken at": now})',
            "No timer wakes a thread: wake_due is a sweep you schedule yourself."),
    PortRow("durable sleep", "ctx.sleep(cooling_off)",
            'interrupt({"waiting for": COOLING_OFF, "due": wake_at})',
            "No durable sleep: an interrupt with a due time, woken by the same sweep."),
    PortRow("read the clock", "def now(self) -> float:", 'return _clock["now"]()',
            "A clock read becomes a task of its own (read_clock), so a resume replays the "
            "reading, as ctx.now() does.", durable_lite_in="context"),
    PortRow("resume after a crash", "def resume(self, run_id: str, budget=None):",
            "workflow.invoke(None, config, durability=durability)",
            "Nothing resumes a thread by itself: something must call invoke(None). Under "
            "durability=\"exit\" there is nothing to resume, and the run starts over.",
            durable_lite_in="engine", langgraph_in="engines.langgraph.worker"),
    PortRow("history", "def history(self, run_id: str) -> list:",
            "workflow.get_state_history(config(thread_id))",
            "One row per superstep, not per step: a whole refund is two checkpoints, its "
            "tasks' results are writes saved on the first.",
            durable_lite_in="engine", langgraph_in="engines.langgraph.support"),
]


def langgraph_port_table():
    """The LangGraph port as a DataFrame: concept, durable_lite, LangGraph, what changes."""
    import pandas
    rows = [[r.concept, r.durable_lite, r.langgraph.replace("  ...  ", " ... "), r.changes]
            for r in LANGGRAPH_PORT]
    return pandas.DataFrame(rows, columns=["concept", "durable_lite", "LangGraph",
                                           "what changes"])


# LangGraph's column of the concept map, as run here rather than read in its docs: what each
# cell becomes once lesson 15 runs it, and the test that runs it.
LANGGRAPH_RUN_HERE = {
    "step": Cell("@task (functional API): a future; its result saved in the background",
                 "tests/test_langgraph_parity.py"),
    "sleep": Cell("none: an interrupt with a due time, woken by a sweep you run",
                  "tests/test_langgraph_differences.py::"
                  "test_a_sleep_parks_on_durable_lite_and_is_an_interrupt_on_langgraph"),
    "wait for a signal": Cell("interrupt() + Command(resume=...), no timeout",
                              "tests/test_langgraph_differences.py::"
                              "test_an_interrupt_past_its_deadline_waits_until_a_sweep_answers_it"),
    "idempotency": Cell("thread_id (which checkpoints to continue), not a dedupe key",
                        "tests/test_langgraph_differences.py::"
                        "test_a_finished_thread_started_again_runs_every_task_again"),
    "versioning": Cell("none: reordered code runs the saved tasks again, silently",
                       "tests/test_langgraph_differences.py::"
                       "test_reordered_steps_stop_durable_lite_and_run_again_on_langgraph"),
}


# the same refund on four engines: what changes and what does not --------------------------------
# Lesson 15's table. Each row names a concept; each engine's cell is a line that expresses it
# in that engine's port (a test checks every line is in its module, named relative to
# durable_lite); "what does not change" is the rule the parity suite and the crash table
# (crash_table.py) hold every engine to.
@dataclass(frozen=True)
class EngineRow:
    concept: str
    lines: tuple              # ((engine, line, module), ...) in ENGINE_COLUMNS order
    stays: str


ENGINE_COLUMNS = ("durable_lite", "DBOS", "Temporal", "LangGraph")
_PORTS = {"durable_lite": "engines.lite.refund", "DBOS": "engines.dbos.refund",
          "Temporal": "engines.temporal.refund", "LangGraph": "engines.langgraph.refund"}


def _row(concept, stays, **lines):
    """lines: engine=line, or engine=(line, module) for a line outside the engine's port."""
    cells = []
    for engine in ENGINE_COLUMNS:
        value = lines[engine.lower()]
        line, module = value if isinstance(value, tuple) else (value, _PORTS[engine])
        cells.append((engine, line, module))
    return EngineRow(concept, tuple(cells), stays)


ENGINE_PORT = [
    _row("a workflow", "The body decides, the engine records: on a resume the body runs "
         "again from the top and finished steps come back from the record.",
         durable_lite='@workflow("refund-with-approval", version=1)',
         dbos='@DBOS.workflow(name="refund_with_approval")',
         temporal='@workflow.defn(name="refund_with_approval")',
         langgraph="@entrypoint()"),
    _row("a step", "An effect lives in a step. Recorded once it returns; run again if the "
         "kill came before that.",
         durable_lite='ctx.step("lookup", ex.lookup_order, folder, order_id)',
         dbos='@step("lookup")', temporal='@activity("lookup")', langgraph='@step("lookup"'),
    _row("the run id", "One id names the run, and it is where the keys come from.",
         durable_lite="run_id=run_id", dbos="with SetWorkflowID(run_id):",
         temporal=("id=workflow_id, task_queue=task_queue", "engines.temporal.worker"),
         langgraph="langgraph_support.config(run_id)"),
    _row("an idempotency key", "The same key function, fed the run id: the bank sees the "
         "same keys from every engine, and pays once.",
         durable_lite='ctx.idempotency_key("refund", order_id)',
         dbos="derive_key(DBOS.workflow_id, *parts)",
         temporal="derive_key(workflow.info().workflow_id, *parts)",
         langgraph='derive_key(get_config()["configurable"]["thread_id"], *parts)'),
    _row("wait for the approval", "The answer is recorded with the run: a resume does not "
         "ask again, and an answer sent early is kept.",
         durable_lite="ctx.wait_for_signal(APPROVAL, timeout=approval_timeout)",
         dbos="DBOS.recv(APPROVAL, timeout_seconds=approval_timeout)",
         temporal="await workflow.wait_condition(lambda: self.decision is not None,",
         langgraph='interrupt({"waiting for": APPROVAL, "due": deadline})'),
    _row("durable sleep", "The wake time is recorded: a resume does not start the hour over.",
         durable_lite="ctx.sleep(cooling_off)", dbos="DBOS.sleep(cooling_off)",
         temporal='await workflow.sleep(cooling_off, summary="cooling off")',
         langgraph='interrupt({"waiting for": COOLING_OFF, "due": wake_at})'),
    _row("after a kill", "The killed step runs again; the steps before it are replayed, "
         "not run.",
         durable_lite="return engine.recover()",
         dbos=("dbos.DBOS.launch()", "engines.dbos.support"),
         temporal=("STEP_TIMEOUT = timedelta(seconds=5)", "engines.temporal.faults"),
         langgraph=("workflow.invoke(None, config, durability=durability)",
                    "engines.langgraph.worker")),
    _row("the run's history", "One record per step, in order, read back on every resume.",
         durable_lite=("def history(self, run_id: str) -> list:", "engine"),
         dbos=("c.list_workflow_steps(workflow_id)", "engines.dbos.support"),
         temporal=("client.get_workflow_handle(workflow_id).fetch_history()",
                   "engines.temporal.support"),
         langgraph=("workflow.get_state_history(config(thread_id))",
                    "engines.langgraph.support")),
]


def engine_port_table():
    """The four-engine port as a DataFrame: concept, a column per engine, what stays."""
    import pandas
    rows = [[r.concept, *(line for _, line, _ in r.lines), r.stays] for r in ENGINE_PORT]
    return pandas.DataFrame(rows, columns=["concept", *ENGINE_COLUMNS, "what does not change"])


# the concept map, as run here ------------------------------------------------------------------
RUN_HERE = "run here"


def ran_here() -> list:
    """[(engine, concept, the test that runs it)] for the cells of MAP confirmed by running
    them here (lessons 14 and 15) rather than only read in the engine's docs."""
    return [(e, c, MAP[e][c].source[len(RUN_HERE) + 2:]) for e in ENGINES for c in CONCEPTS
            if (MAP[e][c].source or "").startswith(RUN_HERE + ": ")]
