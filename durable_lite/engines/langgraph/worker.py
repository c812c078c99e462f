"""A LangGraph run in a fresh process: one a lesson or a test can SIGKILL inside a task.

    first = start_worker(path, "refund.refund", "refund-A-17",
                         start={"folder": world, "order_id": "A-17", "amount": 40},
                         crash=CrashAt("refund", "after_effect"))
    first.join()                 # killed by SIGKILL right after the bank paid
    again = start_worker(path, "refund.refund", "refund-A-17", resume=True)
    again.result()               # {"status": "completed", "replayed": ["lookup"], ...}

Each worker is a real process with its own SqliteSaver on the checkpoint file `path`. It
runs one call on one thread: `start` (invoke with the input), `resume` (invoke(None):
continue from the checkpoint; when the thread has no checkpoint at all, as after a kill
under durability="exit", it starts over from `restart_with` if given), or `answer`
(invoke(Command(resume=value))). It can crash itself at a crash point (`crash`, SIGKILL
from inside, see faults.py), and it reports what it saw as JSON in a file,
because a killed process reports nothing.

Processes come from a fork server that has imported LangGraph once, so a worker starts in
a fraction of a second instead of paying the import each time. Workers send their output
to a log file. A script that starts workers must do so under `if __name__ == "__main__":`.

A worker ends the moment the process that started it ends, however it ends (it watches a
pipe from that process), and its folder goes then too: at a normal exit by this process's
hand, after a kill by its watchdog's (processes/watchdog.py).
"""

import functools
import importlib
import json
import os
import signal
import sys
import tempfile
import time
import traceback

from ...faults import CrashAt
from ..processes import forked, watchdog
from . import faults as langgraph_faults, support as langgraph_support
from . import refund as refund_langgraph  # noqa: F401  (imported once, in the fork server)

PACKAGE = __name__.rsplit(".", 1)[0]


class Worker:
    """A running worker process and the folder it reports through."""

    def __init__(self, process, folder, thread_id):
        self.process, self.folder, self.thread_id = process, folder, thread_id

    def join(self, timeout=120.0):
        """Wait for the worker to end; a worker still running after `timeout` is killed."""
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.write_stacks(self.folder)
            self.kill()
            raise TimeoutError(f"worker on thread {self.thread_id!r} did not finish within "
                               f"{timeout}s (killed):\n{self.log()}")
        return self.process.exitcode

    def kill(self):
        self.process.kill()
        self.process.join(30)
        return self

    @property
    def killed(self) -> bool:
        return self.process.exitcode == -signal.SIGKILL

    def report(self):
        """What the worker saw, or None if it did not live to say."""
        path = os.path.join(self.folder, "report.json")
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def result(self, timeout=120.0) -> dict:
        """Wait for the worker and return its report (an error naming why if it has none)."""
        code = self.join(timeout)
        report = self.report()
        if report is None:
            how = "was killed by SIGKILL" if self.killed else f"exited with status {code}"
            raise RuntimeError(f"worker on thread {self.thread_id!r} {how} without a "
                               f"report:\n{self.log()}")
        return report

    def log(self) -> str:
        return forked.read_log(self.folder)


def start_worker(path, workflow, thread_id, *, start=None, resume=False, answer=None,
                 restart_with=None, durability="sync", crash=None, wait_for_saves=True,
                 slow_saves=0.0, imports=(), python_path=(), env=None) -> Worker:
    """Start a worker process (see the module docstring).

    path:        the SqliteSaver file
    workflow:    "module.entrypoint": a module of this package ("refund.refund")
                 or any importable one (give `imports`/`python_path` for a learner's port)
    start:       the entrypoint's input: invoke it on the thread
    resume:      invoke(None) on the thread; restart_with: the input to start over with
                 when the thread has no checkpoint
    answer:      invoke(Command(resume=answer)) on the thread
    durability:  "exit", "async" or "sync"
    crash:       a faults.CrashAt: SIGKILL itself there
    wait_for_saves: False: crash without first waiting for LangGraph's background saves
                 (see faults.py), which makes the crash race them
    slow_saves:  seconds each background save of a task result takes (a slow disk)
    env:         more environment variables, set in the process before it imports anything
                 of `imports` (e.g. a check's moved wall clock)
    """
    actions = [start is not None, bool(resume), answer is not None]
    if sum(actions) != 1:
        raise ValueError("a worker does one thing: give exactly one of start, resume, answer")
    if durability not in langgraph_support.DURABILITY_MODES:
        raise ValueError(f"durability {durability!r} is not one of "
                         f"{langgraph_support.DURABILITY_MODES}")
    folder = tempfile.mkdtemp(prefix="dl-langgraph-worker-")
    guard = watchdog.watch(folder, ending="KILL")      # it and its folder end with us
    spec = {"path": os.fspath(path), "workflow": workflow, "thread_id": thread_id,
            "start": start, "resume": bool(resume), "answer": answer,
            "restart_with": restart_with, "durability": durability,
            "crash": None if crash is None else [crash.step, crash.when],
            "wait_for_saves": wait_for_saves, "slow_saves": slow_saves, "folder": folder, "imports": list(imports),
            "python_path": [os.fspath(p) for p in python_path], "env": dict(env or {})}
    process = _context().Process(target=_main, args=(spec,), name=f"langgraph-{thread_id}")
    return Worker(forked.start(process, guard), folder, thread_id)


def warm_up():
    """Start the fork server now (it imports LangGraph once), so the first worker does not
    wait for it. Optional: start_worker does it when needed."""
    _context()
    from multiprocessing import forkserver
    forkserver.ensure_running()


@functools.lru_cache(maxsize=None)
def _context():
    return forked.context(__name__)            # LangGraph imported once, in the fork server


# the worker's side -------------------------------------------------------------------------
def _main(spec):
    watchdog.exit_with_parent()   # ends the moment the process that started it ends
    forked.log_to(spec["folder"])            # what it prints, and its stacks if asked
    os.environ.update(spec.get("env") or {})
    sys.path[:0] = spec["python_path"]
    for module in spec["imports"]:
        _module(module)
    saver = _saver(spec["path"], spec["slow_saves"])
    workflow = langgraph_support.bind(_resolve(spec["workflow"]), saver)
    if spec["crash"]:
        # Under "exit" nothing is saved mid-run, so there is nothing to wait for.
        waits = spec["wait_for_saves"] and spec["durability"] != "exit"
        langgraph_faults.arm(CrashAt(*spec["crash"], kill=True),
                             saver_path=spec["path"] if waits else None)
    report = {"thread_id": spec["thread_id"], "how": None, "output": None, "error": None}
    began = time.perf_counter()
    try:
        report["how"], report["output"] = _run(workflow, spec)
    except Exception as exc:
        traceback.print_exc()
        report["error"] = f"{type(exc).__name__}: {exc}"
    report.update(seconds=time.perf_counter() - began, ran=langgraph_faults.ran(),
                  replayed=langgraph_faults.replayed(),
                  status=langgraph_support.status(workflow, spec["thread_id"]),
                  result=langgraph_support.result(workflow, spec["thread_id"]),
                  waiting_for=langgraph_support.waiting(workflow).get(spec["thread_id"]))
    _write_json(os.path.join(spec["folder"], "report.json"), report)
    langgraph_support.close_saver(saver)


def _run(workflow, spec):
    """(how the call went in: "started", "resumed", "started over", "answered"; output)."""
    from langgraph.types import Command
    config = langgraph_support.config(spec["thread_id"])
    durability = spec["durability"]
    if spec["start"] is not None:
        return "started", workflow.invoke(spec["start"], config, durability=durability)
    if spec["answer"] is not None:
        langgraph_faults.answered(spec["answer"])    # a crash after it waits for its save
        return "answered", workflow.invoke(Command(resume=spec["answer"]), config,
                                           durability=durability)
    if langgraph_support.has_checkpoint(workflow, spec["thread_id"]):
        return "resumed", workflow.invoke(None, config, durability=durability)
    if spec["restart_with"] is None:
        raise LookupError(f"thread {spec['thread_id']!r} has no checkpoint to resume")
    return "started over", workflow.invoke(spec["restart_with"], config, durability=durability)


def _saver(path, slow_saves):
    saver = langgraph_support.open_saver(path)
    if slow_saves:
        put_writes = saver.put_writes

        def slowly(*args, **kwargs):          # runs on LangGraph's background thread
            time.sleep(slow_saves)
            return put_writes(*args, **kwargs)
        saver.put_writes = slowly
    return saver


def _module(name):
    """A module of this package by its short name, else any importable module."""
    try:
        return importlib.import_module(f"{PACKAGE}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{PACKAGE}.{name}":
            raise
        return importlib.import_module(name)


def _resolve(dotted):
    module, attr = dotted.rsplit(".", 1)
    return getattr(_module(module), attr)


def _write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, default=repr)
    os.replace(tmp, path)        # the controller never reads half a report
