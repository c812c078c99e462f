"""Fork-server children started and watched from many threads at once
(engines/processes/forked.py): each one's exit status is the one it really ended with.

On bare multiprocessing a thread's start() (which polls every child first) and another
thread's join() can both read a child's status from its one pipe, and the loser records
255 for a child SIGKILL ended: a worker killed at its crash point looks like one that
exited. The race is rare per child, so besides a run of many children from six threads,
a test shows the rule that closes it: a status read waits while a start is under way.
"""

import multiprocessing
import os
import signal
import sys
import threading
import time
import types

from durable_lite.engines.processes import forked

THREADS, CHILDREN = 6, 10


def _kill_myself():
    time.sleep(0.01)         # while it lives, other threads start children: the race's moment
    os.kill(os.getpid(), signal.SIGKILL)


def _exit_with(code):
    os._exit(code)


def _statuses(target, args=()):
    """[(exit status, alive after join)] of THREADS x CHILDREN children, each thread
    starting and joining its own one after another."""
    context = multiprocessing.get_context("forkserver")
    seen, errors = [], []

    def starts_and_joins():
        try:
            for _ in range(CHILDREN):
                child = forked.start(context.Process(target=target, args=args))
                assert child.join(120) is not None, "a child still ran after 120 s"
                seen.append((child.exitcode, child.is_alive()))
        except BaseException as exc:       # reported by the main thread, not lost
            errors.append(exc)

    threads = [threading.Thread(target=starts_and_joins) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return seen


def test_children_killed_by_sigkill_all_read_minus_nine_when_six_threads_start_and_join():
    seen = _statuses(_kill_myself)
    assert len(seen) == THREADS * CHILDREN
    assert sorted({status for status, _ in seen}) == [-signal.SIGKILL], \
        f"statuses read: {sorted(status for status, _ in seen)}"
    assert not any(alive for _, alive in seen)


def test_an_exit_status_is_read_as_the_child_gave_it():
    assert {status for status, _ in _statuses(_exit_with, (7,))} == {7}


def test_join_with_a_timeout_returns_none_while_the_child_runs():
    context = multiprocessing.get_context("forkserver")
    child = forked.start(context.Process(target=signal.pause))
    try:
        assert child.join(0.05) is None and child.is_alive() and child.exitcode is None
    finally:
        os.kill(child.pid, signal.SIGKILL)
    assert child.join(120) == -signal.SIGKILL and not child.is_alive()


_held = {"inside start": threading.Event(), "may finish": threading.Event()}


class _HeldStart(multiprocessing.get_context("forkserver").Process):
    """A process whose start() stops halfway until the test lets it go on."""

    def start(self):
        _held["inside start"].set()
        _held["may finish"].wait(120)
        super().start()


def test_a_status_read_waits_while_another_thread_is_starting_a_child():
    context = multiprocessing.get_context("forkserver")
    ended = forked.start(context.Process(target=_exit_with, args=(0,)))
    assert ended.join(120) == 0
    started = []
    starting = threading.Thread(target=lambda: started.append(
        forked.start(_HeldStart(target=_exit_with, args=(3,))).join(120)))
    starting.start()
    assert _held["inside start"].wait(120)
    read = []
    reader = threading.Thread(target=lambda: read.append(ended.exitcode))
    reader.start()
    reader.join(0.3)
    assert read == [], "a status was read while a start was under way"
    _held["may finish"].set()
    reader.join(120)
    starting.join(120)
    assert read == [0] and started == [3]


def _preloads_after(imports, asking, monkeypatch) -> list:
    """What the fork server would preload, asked for by forked.context(`asking`), in a
    Python that has imported the worker modules `imports` and no other."""
    for worker in forked.PRELOADS:
        if worker in imports:
            monkeypatch.setitem(sys.modules, worker, types.ModuleType(worker))
        else:
            monkeypatch.delitem(sys.modules, worker, raising=False)
    return forked.preloads(asking)


def test_the_fork_server_preloads_every_engine_this_process_uses(monkeypatch):
    dbos, langgraph, temporal = forked.PRELOADS
    temporal_preload = forked.PRELOADS[temporal]

    def preloads(imports, asking):
        return _preloads_after(imports, asking, monkeypatch)
    # only LangGraph here: DBOS and Temporal are not imported for nothing
    assert preloads([langgraph], langgraph) == [langgraph]
    # both imported: whichever engine starts the server first, both are imported in it,
    # so the other's workers do not import their engine one by one
    assert preloads([dbos, langgraph], langgraph) == [langgraph, dbos]
    assert preloads([dbos, langgraph], dbos) == [dbos, langgraph]
    # Temporal's workers need the SDK and the course's workflows: its preload module
    assert preloads([temporal, dbos], temporal_preload) == [temporal_preload, dbos]
    assert preloads([temporal, langgraph], langgraph) == [langgraph, temporal_preload]


def test_kill_is_quiet_when_the_child_is_gone_before_its_end_was_heard():
    """A fork server reaps its children as they end and tells the parent through a pipe,
    so a pid can be gone while the parent still counts the child as running (two grading
    checks met ProcessLookupError in a full test run, their worker's kill() signalling
    such a pid). kill() is quiet then."""
    child = forked.start(multiprocessing.get_context("forkserver").Process(target=_exit_with,
                                                                           args=(0,)))
    deadline = time.monotonic() + 120
    while os.path.exists(f"/proc/{child.pid}") and time.monotonic() < deadline:
        time.sleep(0.01)                     # gone, reaped by the fork server
    child._process.is_alive = lambda: True   # its end not heard yet
    child.kill()
    del child._process.is_alive
    assert child.join(120) == 0


def test_kill_ends_a_running_child_with_sigkill():
    child = forked.start(multiprocessing.get_context("forkserver").Process(target=signal.pause))
    child.kill()
    assert child.join(120) == -signal.SIGKILL


def _stuck_where_the_stack_shows(folder):
    forked.log_to(folder)
    print("a line printed before it got stuck", flush=True)   # the log is not empty when asked
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    while True:
        signal.pause()            # returns after each signal handled, the stacks' too


def test_a_worker_that_never_ends_writes_every_threads_stack_to_its_log_when_asked(tmp_path):
    """A hung worker's only clue: asked before it is killed, it writes where each thread
    stands into its log, which the engines' TimeoutError then carries."""
    context = multiprocessing.get_context("forkserver")
    child = forked.start(context.Process(target=_stuck_where_the_stack_shows,
                                         args=(str(tmp_path),)))
    try:
        deadline = time.monotonic() + 60
        while not forked.read_log(str(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.join(0.2) is None, "the worker ended on its own"
        child.write_stacks(str(tmp_path))
        log = forked.read_log(str(tmp_path))
        assert "_stuck_where_the_stack_shows" in log and log.count("(most recent call first)") == 2, log
        assert child.is_alive(), "asking for its stacks ended it"
    finally:
        child.kill()
    assert child.join(120) == -signal.SIGKILL
