"""How long a Temporal run waited, read from its history (killed_waiting._waited_after):
between the workflow task that began the wait and the one that ended it, so the seconds a
busy worker takes to pick tasks up are not counted as the workflow's own wait."""

import pytest

from durable_lite.engines.compare.killed_waiting import _signalled_after, _waited_after


def event(kind, time, activity=None):
    return {"type": kind, "time": time, "activity": activity, "failure": None}


def history(*rows):
    return [event(*row) for row in rows]


def test_a_timer_wait_is_its_timer_however_slowly_the_worker_picks_up_its_tasks():
    # notice done at 10.0; the worker takes 2 s to run the task that starts a 1.5 s timer,
    # and 2 s more to run the one that schedules the charge when the timer fires.
    events = history(("ActivityTaskCompleted", 10.0, "notice"),
                     ("WorkflowTaskScheduled", 10.0), ("WorkflowTaskStarted", 11.5),
                     ("WorkflowTaskCompleted", 12.0), ("TimerStarted", 12.0),
                     ("TimerFired", 13.5), ("WorkflowTaskScheduled", 13.5),
                     ("WorkflowTaskStarted", 15.0), ("WorkflowTaskCompleted", 15.5),
                     ("ActivityTaskScheduled", 15.5, "charge"))
    assert _waited_after(events, "notice") == 1.5      # not 5.5, the old activity-to-activity
    assert _signalled_after(events, "notice") is None


def test_a_reply_ends_the_wait_when_the_server_records_it():
    events = history(("ActivityTaskCompleted", 10.0, "notice"),
                     ("WorkflowTaskScheduled", 10.0), ("WorkflowTaskStarted", 10.4),
                     ("WorkflowTaskCompleted", 11.0), ("TimerStarted", 11.0),
                     ("WorkflowExecutionSignaled", 13.0), ("WorkflowTaskScheduled", 13.0),
                     ("WorkflowTaskStarted", 14.0), ("WorkflowTaskCompleted", 14.2),
                     ("ActivityTaskScheduled", 14.2, "cancel"))
    assert _waited_after(events, "notice") == _signalled_after(events, "notice") == 2.0


def test_a_run_that_never_waits_waited_nothing_and_one_without_a_next_step_has_no_wait():
    no_wait = history(("ActivityTaskCompleted", 10.0, "notice"),
                      ("WorkflowTaskScheduled", 10.0), ("WorkflowTaskStarted", 10.5),
                      ("WorkflowTaskCompleted", 11.0), ("ActivityTaskScheduled", 11.0, "charge"))
    assert _waited_after(no_wait, "notice") == 0.0
    assert _waited_after(no_wait[:-1], "notice") is None
    assert _waited_after(no_wait, None) is None and _waited_after(no_wait, "charge") is None


class Stopped(list):
    """The workers list of a caller that has stopped, as a check's once its time is up."""
    stopped = True


def test_a_caller_that_has_stopped_gets_no_new_worker_on_either_engine(tmp_path):
    """A check's threads may still be finishing runs after its time limit: they start no
    worker for it (once started, each would only be killed at once, and on a busy machine
    a stopped check's threads went on doing so for a minute)."""
    from durable_lite.engines.compare import killed_waiting
    from durable_lite.engines.temporal.worker import started

    before = started()
    with pytest.raises(RuntimeError, match="no more workers"):
        killed_waiting.on_temporal("127.0.0.1:1", "w", [], workflow_id="wf-1", signal="reply",
                                   workers=Stopped())
    with pytest.raises(RuntimeError, match="no more workers"):
        killed_waiting.on_langgraph(str(tmp_path / "lg.sqlite"), "m.entry", {}, thread_id="t",
                                    reply=None, workers=Stopped())
    assert started() == before
