"""Where DBOS, Temporal and LangGraph differ from durable_lite: recorded, demonstrated,
never silently skipped.

The parity suite runs every scenario it can on every engine and demands equal ledgers.
Where an engine has no equivalent, or does the same job another way, the difference is
written down here, and a test shows both sides of it (`evidence` names that test). The
lessons print these tables; a test checks that every entry has its evidence and every
evidence test has its entry.

DIFFERENCES: DBOS Transact for Python 3.4 (docs.dbos.dev and the package source).
TEMPORAL: the Temporal Python SDK 1.35 and the Temporal CLI's dev server (below).
LANGGRAPH_DIFFERENCES: LangGraph's functional API, langgraph 1.2 (below).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Difference:
    key: str
    topic: str
    durable_lite: str
    dbos: str
    evidence: str          # "test_module.py::test_name" that shows both sides


DIFFERENCES = [
    Difference(
        "naive-retry", "Retrying a task from the top (figure 1)",
        "dl.naive.NaiveRunner reruns every step after a failure: 7 executions, 2 emails. "
        "It is the course's 'before' picture, not an engine mode.",
        "No mode without checkpoints: every @DBOS.workflow is durable, so figure 1 has no "
        "DBOS side.",
        "test_parity_differences.py::test_naive_retry_is_durable_lite_only"),
    Difference(
        "budgets", "Budgets kept in the run",
        "dl.Budget(max_steps, max_cost, deadline) is stored with the run and counts every "
        "step ever executed, across resumes; reaching it halts the run, a new budget resumes it.",
        "No step or cost budget. The nearest thing, SetWorkflowTimeout, cancels the workflow "
        "when time is up (status CANCELLED).",
        "test_parity_differences.py::test_budgets_halt_on_durable_lite_dbos_only_times_out"),
    Difference(
        "failed-run", "Starting a failed run again (figures 2 and 4)",
        "start() or resume() with the same run id executes the failed step again and carries "
        "on from there.",
        "The workflow keeps its ERROR: calling it again under the same id returns the recorded "
        "error and runs nothing. fork_workflow(id, start_step) continues it under a new id.",
        "test_parity_differences.py::test_a_failed_run_continues_on_durable_lite_and_is_forked_on_dbos"),
    Difference(
        "rewind", "Re-running from a step in the same run",
        "Both fork: engine.fork(run_id, from_step=...) and DBOS.fork_workflow(id, start_step) "
        "copy the checkpoints before the step into a new run with a new id. durable_lite can "
        "also rewind the run itself: engine.invalidate(run_id, step) forgets that step and "
        "what follows, keeping what it discards in the run's event log.",
        "No rewind in place: a finished workflow keeps its recorded outcome, and re-running a "
        "step always means a fork under a new id.",
        "test_parity_differences.py::test_both_fork_to_a_new_run_only_durable_lite_rewinds_in_place"),
    Difference(
        "recovery-owner", "Who finishes a dead worker's run",
        "Leases: any worker's engine.recover() takes over a run whose lease has expired.",
        "Executor ids: a PENDING workflow waits for its own executor to restart (launch "
        "recovers it) or for DBOS Conductor to hand it to another; a live executor with "
        "another id does not take it by itself.",
        "test_dbos_two_machines.py::test_a_killed_machine_is_recovered_by_its_own_restart_not_by_the_other"),
    Difference(
        "waiting", "A run waiting for a person",
        "Parks: start() returns a run with status 'waiting' and nothing stays in memory; any "
        "worker resumes it when the signal or the deadline comes.",
        "DBOS.recv blocks a thread of a live executor while the workflow stays PENDING; after "
        "a restart, recovery enters the wait again with its original deadline.",
        "test_parity_differences.py::test_a_waiting_run_parks_on_durable_lite_and_blocks_on_dbos"),
    Difference(
        "none-payload", "A signal with no payload",
        "engine.signal() refuses None, because a wait returns None when its deadline passed.",
        "DBOS.send() accepts None, and DBOS.recv() then returns None: an answer that reads "
        "exactly like a timeout.",
        "test_parity_differences.py::test_a_none_payload_is_refused_by_durable_lite_and_reads_as_a_timeout_on_dbos"),
    Difference(
        "clock", "Time",
        "An injectable clock: with FakeClock a two-day deadline passes instantly and the same "
        "way on every run.",
        "Wall-clock time: DBOS.sleep and recv timeouts really wait, so the parity suite gives "
        "DBOS half-second deadlines where durable_lite gets two days.",
        "test_parity_differences.py::test_durable_lite_waits_on_an_injected_clock_dbos_on_the_wall_clock"),
    Difference(
        "serialization", "What a step may return",
        "JSON only: a result JSON cannot hold stops the run with StepResultNotJSON, naming "
        "the step.",
        "Anything pickle can hold, by default (stored as base64 pickle); portable JSON is "
        "opt-in per workflow (serialization_type).",
        "test_parity_differences.py::test_a_result_json_cannot_hold_fails_on_durable_lite_and_is_pickled_by_dbos"),
    Difference(
        "versioning", "Changed code and runs in flight",
        "@dl.workflow(name, version=N): each run is pinned to the version it started with, "
        "and any worker that has that version registered can resume it; ctx.patched(name) "
        "gates a change inside one version, and engine.upgrade moves a run to a newer one "
        "through a registered @dl.migration.",
        "One application_version per process (by default a hash of the workflow code; pinned "
        "in this course). Only an executor on the same version recovers a PENDING workflow; "
        "DBOS.patch() gates a change inside a workflow.",
        "test_parity_differences.py::test_dbos_recovers_only_on_the_same_application_version"),
    Difference(
        "queue", "Queues and flow control",
        "dl.Queue(name, concurrency=..., per_key=..., rate=(n, seconds)), then "
        "engine.enqueue(queue, wf, ..., key=tenant) and engine.work(queue): limits across "
        "workers, per key (keys take turns) and per period, counted in the store. No "
        "per-worker limit: a worker takes one run at a time in each thread that works.",
        "DBOS.register_queue(name, worker_concurrency=..., global_concurrency=..., "
        "partition_concurrency=..., limiter=...) then DBOS.enqueue_workflow: limits per "
        "worker, across workers, per partition key and per period.",
        "test_parity_differences.py::"
        "test_both_engines_queue_with_limits_and_only_dbos_also_limits_each_worker"),
]

BY_KEY = {d.key: d for d in DIFFERENCES}


def table():
    """The registry as a DataFrame (topic, durable_lite, DBOS), for the lesson."""
    import pandas
    return pandas.DataFrame([{"topic": d.topic, "durable_lite": d.durable_lite, "DBOS": d.dbos}
                             for d in DIFFERENCES])


# Temporal ------------------------------------------------------------------------------------
# Checked against the Temporal Python SDK 1.35 (its docs and source) and a dev server of the
# Temporal CLI 1.9 (Server 1.32), run here. Evidence tests live in test_temporal_*.py; the
# crash table itself (lesson 01's refund killed at each crash point, keyed and not) agrees
# with durable_lite's case for case (test_parity_four_engines.py, test_temporal_parity.py),
# so it has no entry here.
@dataclass(frozen=True)
class TemporalDifference:
    key: str
    topic: str
    durable_lite: str
    temporal: str
    evidence: str          # "test_module.py::test_name" that shows both sides


TEMPORAL = [
    TemporalDifference(
        "default-retries", "A step that fails",
        "A step runs once: an error fails the run (status 'failed') unless the step has a "
        "dl.Retry. A mail server that sends, then times out, has sent one email.",
        "An activity is retried by default: no limit on attempts, backoff from the retry "
        "policy. The same mail server, unkeyed, sends one email per attempt (three for two "
        "timeouts) and the run completes; with a key the provider sees three requests and "
        "sends one email.",
        "test_temporal_differences.py::test_a_failing_step_fails_the_run_on_durable_lite_and_"
        "is_retried_on_temporal"),
    TemporalDifference(
        "run-id-reuse", "Starting a run id that has ended",
        "engine.start(run_id=...) of a completed run returns its recorded result and runs "
        "nothing: the run id is the idempotency of a whole run.",
        "A workflow id is unique among open runs only. Once a run has closed, the default "
        "reuse policy (ALLOW_DUPLICATE) starts a new run under the same id, which runs every "
        "activity again; REJECT_DUPLICATE (this course's default) refuses it.",
        "test_temporal_differences.py::test_a_finished_run_id_is_kept_by_durable_lite_and_"
        "reused_by_temporals_default"),
    TemporalDifference(
        "recovery-owner", "Who finishes a dead worker's run",
        "A worker that calls engine.recover() takes over a run whose lease has expired: "
        "workers scan the store.",
        "The server: when a worker stops answering, the activity's start-to-close timeout "
        "(or the workflow task's timeout) runs out and the server gives the retry to any "
        "worker polling the task queue. Nobody has to call anything.",
        "test_temporal_refund.py::test_a_worker_killed_inside_an_activity_is_replaced_by_"
        "another_on_the_task_queue"),
    TemporalDifference(
        "waiting", "A run waiting for a person",
        "Parks in the store with status 'waiting'; it moves on when some worker calls "
        "engine.recover() after the signal or the deadline: nothing wakes it by itself.",
        "The server keeps the wait (a timer and the signals, in the run's history) with no "
        "worker holding it; when the signal or the timer comes it schedules a task, and any "
        "worker on the task queue, even one started after all the others died, finishes it.",
        "test_temporal_differences.py::test_a_waiting_run_needs_no_worker_on_temporal"),
    TemporalDifference(
        "clock", "Time",
        "An injectable clock: with FakeClock a two-day deadline passes instantly.",
        "The server's clock: timers and wait_condition deadlines really wait (the "
        "time-skipping test server is a separate download, not available offline), so the "
        "parity suite gives Temporal half-second deadlines.",
        "test_temporal_differences.py::test_durable_lite_waits_on_an_injected_clock_temporal_"
        "on_the_servers"),
    TemporalDifference(
        "sandbox", "Code that is not deterministic",
        "Replays the workflow function on resume and asks you to keep it deterministic "
        "(ctx.now(), ctx.random()), but does not stop time.time() or open() in it.",
        "Runs workflow code in a sandbox that refuses the wall clock, random numbers, the "
        "environment and file I/O: the workflow task fails and is retried until the code "
        "is fixed, and the run stays open. workflow.now(), workflow.random(), "
        "workflow.uuid4() are the replay-safe versions; I/O belongs in activities.",
        "test_temporal_differences.py::test_temporals_sandbox_refuses_what_durable_lite_"
        "only_asks_you_to_avoid"),
    TemporalDifference(
        "killed-attempt", "What a history says about a killed step",
        "Writes nothing until a step's checkpoint: after a kill in the refund's window, "
        "engine.history shows one attempt of the refund, by the worker that finished it. "
        "An 'interrupted' event in engine.events, and the bank's two requests, are all that "
        "is left of the first.",
        "Records each attempt: the history shows the refund as attempt 2, on the worker that "
        "finished it, with the first attempt's failure (its start-to-close timeout).",
        "test_lesson_15_scenes.py::test_after_a_kill_temporals_history_counts_the_killed_"
        "attempt_and_durable_lites_does_not"),
]

TEMPORAL_BY_KEY = {d.key: d for d in TEMPORAL}


def temporal_table():
    """The Temporal registry as a DataFrame (topic, durable_lite, Temporal)."""
    import pandas
    return pandas.DataFrame([{"topic": d.topic, "durable_lite": d.durable_lite,
                              "Temporal": d.temporal} for d in TEMPORAL])


# LangGraph ---------------------------------------------------------------------------------
# The same registry for LangGraph's functional API (langgraph 1.2, checked against its docs
# and source; every entry shown from both sides in tests/test_langgraph_differences.py).
@dataclass(frozen=True)
class LangGraphDifference:
    key: str
    topic: str
    durable_lite: str
    langgraph: str
    evidence: str          # "test_module.py::test_name" that shows both sides


LANGGRAPH_DIFFERENCES = [
    LangGraphDifference(
        "background-save", "When a finished step is saved",
        "ctx.step commits the step's checkpoint before it returns: once the workflow has a "
        "step's result, no crash runs that step again.",
        "A finished task's result is saved on a background thread, under durability "
        "\"sync\" and \"async\" alike (\"sync\" waits only for the checkpoint at the end of a "
        "superstep, and an entrypoint's whole body is one). Killed just after a task "
        "returned, the process may take the result with it, and the resume runs the task "
        "again. The parity suite's crash points wait for the save (langgraph/faults.py).",
        "test_langgraph_differences.py::test_a_task_result_is_saved_in_the_background_so_a_kill_can_lose_it"),
    LangGraphDifference(
        "exit-mode", "Saving only when the run ends",
        "No such mode: every step is checkpointed as it finishes.",
        "durability=\"exit\" saves nothing until the run finishes, fails or reaches an "
        "interrupt. Killed mid-run, the thread has no checkpoint at all (invoke(None) raises "
        "EmptyInputError): the run starts over from its input and repeats every effect "
        "before the crash.",
        "test_langgraph_differences.py::test_under_exit_durability_a_killed_run_starts_over"),
    LangGraphDifference(
        "start-again", "Starting a finished run again",
        "engine.start() with the run id of a completed run returns its recorded result and "
        "runs nothing.",
        "invoke(input) on a finished thread is a new run on that thread: every task runs "
        "again. The thread id names checkpoints; it is not a dedupe key. (invoke(None) on "
        "a finished thread returns its last result.)",
        "test_langgraph_differences.py::test_a_finished_thread_started_again_runs_every_task_again"),
    LangGraphDifference(
        "nobody-resumes", "Who finishes a killed run",
        "engine.recover() on any worker takes over a run whose lease has expired.",
        "Nothing does by itself: the thread stays unfinished until something calls "
        "invoke(None) on it (langgraph_support.unfinished lists such threads).",
        "test_langgraph_differences.py::test_nothing_resumes_a_killed_thread_until_someone_invokes_it"),
    LangGraphDifference(
        "deadline", "A wait with a deadline",
        "ctx.wait_for_signal(name, timeout) parks the run with a wake time; once the "
        "deadline passes, engine.recover() resumes it and the wait returns None.",
        "interrupt() has no timeout. The port puts the due time into the interrupt, and a "
        "sweep you run yourself (refund_langgraph.wake_due) answers the overdue ones; until "
        "it runs, a thread past its deadline waits. A late answer is declined only because "
        "the workflow reads the clock again.",
        "test_langgraph_differences.py::test_an_interrupt_past_its_deadline_waits_until_a_sweep_answers_it"),
    LangGraphDifference(
        "sleep", "A durable sleep",
        "ctx.sleep(seconds) parks the run until its wake time; any worker resumes it then.",
        "No durable timer: the port's cooling-off hour is an interrupt with a due time, "
        "woken by the same sweep. (time.sleep in a task would hold a process for the hour, "
        "and start the hour over after a crash.)",
        "test_langgraph_differences.py::test_a_sleep_parks_on_durable_lite_and_is_an_interrupt_on_langgraph"),
    LangGraphDifference(
        "unnamed-answer", "Which wait an answer goes to",
        "Signals have names: an approval sent to a run that is sleeping is kept for a wait "
        "on \"approval\" and does not end the sleep.",
        "Command(resume=value) answers whatever interrupt the thread is at. A second "
        "approval, sent raw, ends the cooling-off period early (refund_langgraph.approve "
        "checks what the thread waits for first).",
        "test_langgraph_differences.py::test_a_resume_answers_whichever_interrupt_is_pending"),
    LangGraphDifference(
        "none-payload", "A signal with no payload",
        "engine.signal() refuses None, because a wait returns None when its deadline passed.",
        "Command(resume=None) fails inside langgraph 1.2 (UnboundLocalError), so the port's "
        "sweep answers with a dict.",
        "test_langgraph_differences.py::test_a_none_answer_is_refused_by_durable_lite_and_breaks_langgraph"),
    LangGraphDifference(
        "changed-code", "Code that changed before the resume",
        "Replay checks every recorded position: asking for another step where one was "
        "recorded stops the run with NonDeterminismError.",
        "A saved task result is found by the task's name and place in the body. Code that "
        "calls the tasks in another order finds none of them, and runs them all again, "
        "without a word.",
        "test_langgraph_differences.py::test_reordered_steps_stop_durable_lite_and_run_again_on_langgraph"),
    LangGraphDifference(
        "serialization", "What a step may return",
        "JSON only: a result JSON cannot hold (a set, an object) stops the run with "
        "StepResultNotJSON, naming the step; a tuple is a list on the first run and on "
        "every replay.",
        "msgpack with extensions: sets and datetimes are kept; a tuple reaches the first run "
        "as a tuple and comes back from the checkpoint as a list; any other object fails "
        "the run with a TypeError when it is saved.",
        "test_langgraph_differences.py::test_results_are_json_on_durable_lite_and_msgpack_on_langgraph"),
    LangGraphDifference(
        "history", "A run's history",
        "engine.history(run_id): one row per step, with its status, attempts, times and "
        "result.",
        "get_state_history(config): one snapshot per superstep, so two for a whole refund; "
        "the tasks' results are writes saved on a checkpoint, by task id, not rows.",
        "test_langgraph_differences.py::test_history_is_a_row_per_step_on_durable_lite_and_per_superstep_on_langgraph"),
]

LANGGRAPH_BY_KEY = {d.key: d for d in LANGGRAPH_DIFFERENCES}


def langgraph_table():
    """The LangGraph registry as a DataFrame (topic, durable_lite, LangGraph)."""
    import pandas
    return pandas.DataFrame([{"topic": d.topic, "durable_lite": d.durable_lite,
                              "LangGraph": d.langgraph} for d in LANGGRAPH_DIFFERENCES])
