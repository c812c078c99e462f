"""A DBOS worker in a fresh process: a "machine" a lesson or a test can SIGKILL.

    machine_a = start_worker(url, "machine-a",
                             start=[("refund.refund", "refund-A-17", [folder, "A-17", 40], {})],
                             hold=CrashAt("refund", "after_effect"))
    machine_a.wait_until_held()   # the money has moved; DBOS has not recorded it
    machine_a.kill()              # SIGKILL: no cleanup, no goodbye
    start_worker(url, "machine-a", wait_for=["refund-A-17"]).result()   # restart, recover

Each worker is a real process with its own DBOS executor id, on a system database given
by URL (SQLite or Postgres). It can start workflows, fork one from a named step, wait for
workflows it did not start (recovered ones), stay alive a while (an idle second machine),
crash itself at a crash point (`crash`, SIGKILL from inside), or stop at one and wait to
be killed from outside (`hold`). It reports what it saw as JSON in a file, because a
killed process reports nothing.

Processes come from a fork server that has imported DBOS once, so a worker starts in a
fraction of a second instead of paying DBOS's import each time. Workers send their own
output to a log file, never to the notebook. As with any multiprocessing code, a script
that starts workers must do so under `if __name__ == "__main__":` (notebooks and pytest
need nothing).

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
from dataclasses import dataclass

from dbos import DBOS, SetWorkflowID

from ...faults import CrashAt
from ..processes import forked, watchdog
from . import faults as dbos_faults, support as dbos_support
# registered before any launch
from . import refund as refund_dbos, research as research_dbos  # noqa: F401

PACKAGE = __name__.rsplit(".", 1)[0]
FINISHED = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}
HURRY = "hurry"            # the file Worker.hurry writes: report now, finished or not


@dataclass(frozen=True)
class HoldAt(CrashAt):
    """Like CrashAt, but instead of dying the worker announces it is there and waits to be
    killed from outside (a lesson's "the machine dies now")."""

    def fire(self):
        _touch(os.environ["DL_WORKER_HELD"])
        time.sleep(3600)
        os._exit(3)               # nobody came: never carry on as if nothing happened


# the controller's side ---------------------------------------------------------------------
class Worker:
    """A running worker process and the files it reports through."""

    def __init__(self, process, folder, executor_id):
        self.process, self.folder, self.executor_id = process, folder, executor_id

    def _file(self, name):
        return os.path.join(self.folder, name)

    def _wait_for(self, name, timeout):
        deadline = time.monotonic() + timeout
        while not os.path.exists(self._file(name)):
            if not self.process.is_alive():
                raise RuntimeError(f"worker {self.executor_id!r} exited ({self.process.exitcode}) "
                                   f"before {name}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.executor_id!r}: no {name} within {timeout}s")
            time.sleep(0.02)

    def wait_until_ready(self, timeout=60.0):
        """Block until the worker has launched DBOS (and recovered its pending workflows)."""
        self._wait_for("ready", timeout)
        return self

    def wait_until_held(self, timeout=60.0):
        """Block until the worker stopped at its `hold` point, waiting to be killed."""
        self._wait_for("held", timeout)
        return self

    def hurry(self):
        """Ask the worker to report now on the workflows it waits for, finished or not (the
        caller has waited long enough, counted from a moment only the caller knows)."""
        _touch(self._file(HURRY))

    def kill(self):
        """SIGKILL the worker, as a crashed machine: no cleanup runs."""
        self.process.kill()
        self.process.join(30)
        return self

    def join(self, timeout=120.0):
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.write_stacks(self.folder)
            self.kill()
            raise TimeoutError(f"worker {self.executor_id!r} did not finish within {timeout}s "
                               f"(killed):\n{self.log()}")
        return self.process.exitcode

    @property
    def killed(self) -> bool:
        return self.process.exitcode == -signal.SIGKILL

    def report(self):
        """What the worker saw, {workflow id: outcome}, or None if it did not live to say."""
        path = self._file("report.json")
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def result(self, timeout=120.0):
        """Wait for the worker to finish and return its report (an error if it had none)."""
        code = self.join(timeout)
        report = self.report()
        if report is None:
            raise RuntimeError(f"worker {self.executor_id!r} ended ({code}) without a "
                               f"report:\n{self.log()}")
        return report

    def log(self) -> str:
        return forked.read_log(self.folder)


def start_worker(url, executor_id, *, start=(), fork=(), wait_for=(), crash=None, hold=None,
                 settings=None, linger=0.0, queue=False, timeout=60.0, imports=(),
                 python_path=()) -> Worker:
    """Start a DBOS worker process (see the module docstring).

    start:    [(workflow, workflow id, args, kwargs)], workflow as "module.function": a
              module of this package ("refund.refund") or any importable one
    imports:  more modules to import before launch, so their workflows are registered
    python_path: folders to put on the worker's sys.path (e.g. where a learner's port is)
    fork:     [(workflow id, step name, new workflow id)]: fork_workflow from that step
    wait_for: workflow ids to wait for as well (e.g. ones this worker recovers)
    crash:    a faults.CrashAt: SIGKILL itself there.  hold: the same point, but wait there
    settings: {"research.NONCE": {"value": 999}} module attributes to set first
    linger:   seconds to stay up after everything finished (an idle second machine)
    queue:    register the refunds queue after launch
    timeout:  seconds to wait for each workflow before reporting it unfinished
    """
    folder = tempfile.mkdtemp(prefix=f"dl-worker-{executor_id}-")
    guard = watchdog.watch(folder, ending="KILL")      # it and its folder end with us
    spec = {"url": url, "executor_id": executor_id, "folder": folder,
            "start": [list(s) for s in start], "fork": [list(f) for f in fork],
            "wait_for": list(wait_for), "settings": dict(settings or {}),
            "crash": None if crash is None else [crash.step, crash.when],
            "hold": None if hold is None else [hold.step, hold.when],
            "linger": linger, "queue": queue, "timeout": timeout, "imports": list(imports),
            "python_path": [os.fspath(p) for p in python_path]}
    process = _context().Process(target=_main, args=(spec,), name=f"dbos-{executor_id}")
    return Worker(forked.start(process, guard), folder, executor_id)


def warm_up():
    """Start the fork server now (it imports DBOS once, in the background), so the first
    worker does not wait for it. Optional: start_worker does it when needed."""
    _context()
    from multiprocessing import forkserver
    forkserver.ensure_running()


@functools.lru_cache(maxsize=None)
def _context():
    return forked.context(__name__)            # DBOS imported once, in the fork server


# the worker's side -------------------------------------------------------------------------
def _main(spec):
    watchdog.exit_with_parent()   # ends the moment the process that started it ends
    folder = spec["folder"]
    forked.log_to(folder)            # what it prints, and its stacks if asked
    sys.path[:0] = spec["python_path"]
    for module in spec["imports"]:
        _module(module)
    for dotted, value in spec["settings"].items():
        module, attr = dotted.rsplit(".", 1)
        setattr(_module(module), attr, value)
    if spec["crash"]:
        dbos_faults.arm(CrashAt(*spec["crash"], kill=True))
    if spec["hold"]:
        os.environ["DL_WORKER_HELD"] = os.path.join(folder, "held")
        dbos_faults.arm(HoldAt(*spec["hold"]))
    dbos_support.launch(spec["url"], executor_id=spec["executor_id"])
    if spec["queue"]:
        refund_dbos.register_queue()
    _touch(os.path.join(folder, "ready"))
    ids = []
    for workflow, workflow_id, args, kwargs in spec["start"]:
        with SetWorkflowID(workflow_id):
            DBOS.start_workflow(_resolve(workflow), *args, **kwargs)
        ids.append(workflow_id)
    for workflow_id, step_name, new_id in spec["fork"]:
        with SetWorkflowID(new_id):
            DBOS.fork_workflow(workflow_id, step_id(workflow_id, step_name))
        ids.append(new_id)
    ids += [w for w in spec["wait_for"] if w not in ids]
    deadline = time.monotonic() + spec["timeout"]
    hurry = os.path.join(folder, HURRY)
    report = {workflow_id: outcome(workflow_id, deadline, hurry) for workflow_id in ids}
    time.sleep(spec["linger"])
    _write_json(os.path.join(folder, "report.json"), report)
    dbos_support.shutdown()


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


def step_id(workflow_id, step_name) -> int:
    """DBOS's number for the recorded step called `step_name` (fork_workflow needs it)."""
    for s in DBOS.list_workflow_steps(workflow_id):
        if s["function_name"] == step_name:
            return s["function_id"]
    raise KeyError(f"workflow {workflow_id!r} has no recorded step {step_name!r}")


def outcome(workflow_id, deadline=None, hurry=None) -> dict:
    """Wait (until `deadline`, a time.monotonic() value, or until a file `hurry` exists)
    for a workflow to finish; describe it."""
    pause = 0.05                    # each look is a query: less often as the wait goes on
    while True:
        status = DBOS.get_workflow_status(workflow_id)
        if status is not None and status.status in FINISHED:
            break
        if deadline is not None and time.monotonic() > deadline:
            break
        if hurry is not None and os.path.exists(hurry):
            break
        time.sleep(pause)
        pause = min(1.5 * pause, 0.2)
    steps = DBOS.list_workflow_steps(workflow_id)
    found = {"status": None if status is None else status.status, "result": None, "error": None,
             "executor": None if status is None else status.executor_id,
             "steps": [s["function_name"] for s in steps],
             # [name, started, completed] in epoch seconds, as DBOS recorded them
             "times": [[s["function_name"], *_times(s)] for s in steps]}
    if found["status"] == "SUCCESS":
        found["result"] = DBOS.retrieve_workflow(workflow_id).get_result()
    elif found["status"] == "ERROR":
        found["error"] = f"{type(status.error).__name__}: {status.error}"
    return found


def _times(step):
    return [None if step.get(k) is None else step[k] / 1000
            for k in ("started_at_epoch_ms", "completed_at_epoch_ms")]


def _touch(path):
    with open(path, "w"):
        pass


def _write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, default=str)
    os.replace(tmp, path)        # the controller never reads half a report
