"""LangGraph beside durable_lite: a checkpointer in a file, a thread as a run, its state in words.

LangGraph (PyPI `langgraph` + `langgraph-checkpoint-sqlite`, the `engines` extra) is a
library like durable_lite: its functional API turns a function into a workflow
(`@entrypoint`) whose `@task` calls are saved by a checkpointer. Here the checkpointer is
a `SqliteSaver` on a file, so a fresh process can pick a thread up where a killed one left
it. Checked against langgraph 1.2 and langgraph-checkpoint-sqlite 3.1 (their docs and
source).

    saver = open_saver(path)                      # one SQLite file of checkpoints
    wf = bind(refund.refund, saver)               # the workflow, saving into it
    wf.invoke(inputs, config("refund-A-17"), durability="sync")
    status(wf, "refund-A-17")                     # "completed", "waiting", "unfinished", ...

A thread id plays durable_lite's run id: it names which checkpoints a call continues.
Nothing in LangGraph resumes a thread by itself; `unfinished` and `waiting` list the
threads something must call `invoke` on again.
"""

import os
import sqlite3

EXTRA = "pip install 'durable-lite[engines]' (langgraph, langgraph-checkpoint-sqlite)"
DURABILITY_MODES = ("exit", "async", "sync")     # least to most durable, as LangGraph lists them
RETURN = "__return__"                            # the channel a finished task's result is saved on
RESUME = "__resume__"                            # ... and an interrupt's answer (Command(resume=...))


def require():
    """Import LangGraph's functional API, or say which extra is missing."""
    try:
        import langgraph.func  # noqa: F401
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"LangGraph is not installed ({exc}); {EXTRA}") from None


def open_saver(path):
    """A SqliteSaver on the file `path` (created if missing). Its connection may be used
    from LangGraph's worker threads, which save task results in the background, and it
    waits up to 30 s for another process's write to finish (a busy laptop)."""
    require()
    from langgraph.checkpoint.sqlite import SqliteSaver
    conn = sqlite3.connect(os.fspath(path), check_same_thread=False, timeout=30)
    saver = SqliteSaver(conn)
    saver.setup()
    return saver


def close_saver(saver) -> None:
    saver.conn.close()


def bind(workflow, saver):
    """The workflow (an @entrypoint) saving into `saver`. The ports declare their
    entrypoints without a checkpointer, so one module serves any file."""
    return workflow.copy({"checkpointer": saver})


def config(thread_id: str) -> dict:
    """The config that names a thread: every call with it continues the same checkpoints."""
    return {"configurable": {"thread_id": thread_id}}


def has_checkpoint(workflow, thread_id) -> bool:
    return workflow.get_state(config(thread_id)).created_at is not None


def status(workflow, thread_id):
    """The thread in durable_lite's words: None (nothing saved), "waiting" (at an
    interrupt), "failed" (a task or the body raised), "unfinished" (stopped mid-run, a
    crash: it needs an invoke(None)), or "completed"."""
    state = workflow.get_state(config(thread_id))
    if state.created_at is None:
        return None
    if state.interrupts:
        return "waiting"
    if any(task.error for task in state.tasks):
        return "failed"
    return "unfinished" if state.next else "completed"


def result(workflow, thread_id):
    """The value the entrypoint returned (None until the thread completed)."""
    if status(workflow, thread_id) != "completed":
        return None
    return workflow.get_state(config(thread_id)).values


def threads(saver) -> list:
    """Every thread id the saver holds checkpoints for, in the order first seen."""
    seen = []
    for item in saver.list(None):
        thread_id = item.config["configurable"]["thread_id"]
        if thread_id not in seen:
            seen.append(thread_id)
    return seen


def waiting(workflow) -> dict:
    """{thread id: the value of its pending interrupt} for every thread at an interrupt."""
    found = {}
    for thread_id in threads(workflow.checkpointer):
        state = workflow.get_state(config(thread_id))
        if state.interrupts:
            found[thread_id] = state.interrupts[0].value
    return found


def unfinished(workflow) -> list:
    """Threads a crash left mid-run: something must call invoke(None) on each."""
    return [t for t in threads(workflow.checkpointer) if status(workflow, t) == "unfinished"]


def saved_results(saver, thread_id) -> list:
    """The results of the thread's finished tasks that the saver holds now (a task's result
    is saved as a "write" on the checkpoint its superstep started from, by task id)."""
    values = []
    for item in saver.list(config(thread_id)):
        values += [value for _, channel, value in item.pending_writes or () if channel == RETURN]
    return values


def saved_answers(saver, thread_id) -> list:
    """The answers to the thread's interrupts that the saver holds now. A Command(resume=...)
    is saved as soon as the run starts, as a write of no task in particular (one that a
    fresh process resuming the thread reads), and again with the interrupted task's writes
    when the superstep ends (the list of answers that task has had)."""
    values = []
    for item in saver.list(config(thread_id)):
        for task, channel, value in item.pending_writes or ():
            if channel == RESUME:
                anonymous = not set(task) - {"0", "-"}
                values += [value] if anonymous or not isinstance(value, list) else value
    return values


def history(workflow, thread_id) -> list:
    """The thread's checkpoints, newest first, as rows: LangGraph's get_state_history.

    One row per superstep. An entrypoint's body is one superstep, so a finished refund has
    two rows (its input, its end); its tasks are not rows but saved writes on the first,
    listed by id, not by name ("saved task results")."""
    rows = []
    for snapshot in workflow.get_state_history(config(thread_id)):
        writes = workflow.checkpointer.get_tuple(snapshot.config).pending_writes or ()
        rows.append({"step": snapshot.metadata.get("step"),
                     "source": snapshot.metadata.get("source"),
                     "next": list(snapshot.next),
                     "interrupts": [i.value for i in snapshot.interrupts],
                     "saved task results": sum(1 for _, c, _ in writes if c == RETURN),
                     "checkpoint": snapshot.config["configurable"]["checkpoint_id"]})
    return rows
