"""A Temporal worker in a fresh process: a "machine" a lesson or a test can SIGKILL.

    machine_a = start_worker(server.address, "machine-a",
                             start=[("refund", "refund-A-17", [folder, "A-17", 40], {})],
                             hold=CrashAt("refund", "after_effect"))
    machine_a.wait_until_held()   # the money has moved; the server has not heard of it
    machine_a.kill()              # SIGKILL: no cleanup, no goodbye
    start_worker(server.address, "machine-b", wait_for=["refund-A-17"]).result()

Each worker is a real Python process, forked from multiprocessing's fork server (which has
imported the SDK and the course's workflows once: preload.py), that connects to the server at `address`, polls one task queue for workflow and
activity tasks, may start workflows (by their registered names), and waits for the
workflows it was asked about to end, then writes what it saw as JSON (a killed process
reports nothing, so the controller reads the server's history as well). Any worker on the
task queue may take any task: unlike DBOS's executors, a second machine does pick up a dead
one's run, once the server has given up on the dead one (see WORKFLOW_TASK_TIMEOUT and
faults.STEP_TIMEOUT).

It can crash itself at a crash point (`crash`, SIGKILL from inside) or stop at one and
wait to be killed from outside (`hold`). Its output goes to a log file, never to a
notebook. It ends with os._exit: the SDK's native threads sometimes abort an interpreter
that shuts down normally after a worker ran.

A worker ends with the process that started it, however that one ends, and its folder goes
with it (processes/forked.py and watchdog.py: the worker watches a pipe from the process
that asked for it, and the watchdog SIGKILLs it and deletes the folder).
"""

import asyncio
import functools
import importlib
import json
import os
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from ...faults import CrashAt
from ..processes import forked, watchdog

TASK_QUEUE = "durable-lite-course"
# How long the server waits for a workflow task it handed to a worker before it gives the
# task to another (Temporal's default is 10 s). A worker killed in the middle of one costs
# this much; a slow first task (the sandbox imports the workflow module) must fit in it.
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=4)
# After a worker handled a run, the server first offers that run's next task to the same
# worker (its "sticky" queue, where the run is cached). If that worker died, the server
# gives up on it after this long and uses the task queue (SDK default: 10 s).
STICKY_TIMEOUT = timedelta(seconds=1)
MODULES = ("refund", "pitfalls")      # registered on every worker
HURRY = "hurry"            # the file Worker.hurry writes: report now, ended or not
# A worker's name for the system (Linux: /proc/PID/comm, `ps -o comm`). Forked from the fork
# server, its command line is the server's, so this is how a worker is recognised.
PROCESS_NAME = "dl-tworker"
# {pid: its start time} of the workers this process started (each names itself a moment
# later). The start time tells a worker from a later process given the same pid: pids are
# reused within minutes where many processes start (32,768 of them, then from 300 again).
_started = {}


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

    def __init__(self, process, folder, name):
        self.process, self.folder, self.name = process, folder, name

    def _file(self, name):
        return os.path.join(self.folder, name)

    def _wait_for(self, name, timeout):
        deadline = time.monotonic() + timeout
        while not os.path.exists(self._file(name)):
            if not self.process.is_alive():
                raise RuntimeError(f"worker {self.name!r} exited ({self.process.exitcode}) "
                                   f"before {name}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.name!r}: no {name} within {timeout}s:\n"
                                   f"{self.log()}")
            time.sleep(0.02)

    def wait_until_ready(self, timeout=60.0):
        """Block until the worker polls its task queue (and started what it was given)."""
        self._wait_for("ready", timeout)
        return self

    def wait_until_held(self, timeout=60.0):
        """Block until the worker stopped at its `hold` point, waiting to be killed."""
        self._wait_for("held", timeout)
        return self

    def hurry(self):
        """Ask the worker to report now on the runs it waits for, ended or not (the caller
        has waited long enough, counted from a moment only the caller knows)."""
        _touch(self._file(HURRY))

    def kill(self):
        """SIGKILL the worker, as a crashed machine: no cleanup runs."""
        self.process.kill()          # no error if it has already ended
        self.process.join(30)
        return self

    def join(self, timeout=120.0, kill=True):
        """Wait for the worker to exit; past `timeout`, a TimeoutError (killed first, unless
        `kill` is False)."""
        code = self.process.join(timeout)
        if code is None:
            if kill:
                self.process.write_stacks(self.folder)
                self.kill()
            raise TimeoutError(f"worker {self.name!r} did not finish within {timeout}s"
                               f"{' (killed)' if kill else ''}:\n{self.log()}")
        return code

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

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
            raise RuntimeError(f"worker {self.name!r} ended ({code}) without a report:\n"
                               f"{self.log()}")
        return report

    def log(self) -> str:
        return forked.read_log(self.folder)


def start_worker(address, name, *, task_queue=TASK_QUEUE, start=(), wait_for=(), crash=None,
                 hold=None, linger=0.0, timeout=60.0, imports=(), python_path=(),
                 env=None, course_modules=True) -> Worker:
    """Start a Temporal worker process (see the module docstring).

    start:    [(workflow name, workflow id, args, options)]; options may hold
              "task_timeout" (seconds) and "id_reuse" ("allow", "reject": the default)
    wait_for: more workflow ids to wait for (runs this worker takes over)
    crash:    a faults.CrashAt: SIGKILL itself there.  hold: the same point, but wait there
    linger:   seconds to keep polling after everything ended (an idle second machine)
    imports:  more modules whose workflows (@workflow.defn classes) and activities
              (@activity.defn functions) this worker registers; python_path: folders to
              put on its sys.path first (e.g. where a learner's port is)
    timeout:  seconds to wait for each workflow before reporting it unfinished
    env:      more environment variables for the process (e.g. a check's moved wall clock)
    course_modules: False registers only `imports`, not the course's MODULES (each
              workflow class costs the worker a sandbox check when it starts)
    """
    folder = tempfile.mkdtemp(prefix=f"dl-tworker-{name}-")
    guard = watchdog.watch(folder, ending="KILL")      # it and its folder end with us
    spec = {"address": address, "name": name, "task_queue": task_queue, "folder": folder,
            "start": [list(s) for s in start], "wait_for": list(wait_for),
            "crash": None if crash is None else [crash.step, crash.when],
            "hold": None if hold is None else [hold.step, hold.when],
            "linger": linger, "timeout": timeout, "imports": list(imports),
            "modules": list(MODULES) if course_modules else [],
            "python_path": [os.fspath(p) for p in python_path]}
    with open(os.path.join(folder, "spec.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f)
    # The environment it would have had as a new program: this process's now, plus `env`
    # (the fork server's is the one it had when it started).
    environment = {**os.environ, **(env or {})}
    process = _context().Process(target=_forked, args=(folder, environment),
                                 name=f"temporal-{name}")
    worker = Worker(forked.start(process, guard), folder, name)
    _started[worker.process.pid] = watchdog.started(worker.process.pid)
    return worker


def started() -> dict:
    """{pid: start time} of the workers this process has started (running or not)."""
    return dict(_started)


@functools.lru_cache(maxsize=None)
def _context():
    return forked.context(f"{__package__}.preload")     # the SDK imported once, in the server


# the worker's side -------------------------------------------------------------------------
def _main(folder) -> None:
    with open(os.path.join(folder, "spec.json"), encoding="utf-8") as f:
        spec = json.load(f)
    sys.path[:0] = spec["python_path"]
    from . import faults as temporal_faults
    if spec["crash"]:
        temporal_faults.arm(CrashAt(*spec["crash"], kill=True))
    if spec["hold"]:
        os.environ["DL_WORKER_HELD"] = os.path.join(folder, "held")
        temporal_faults.arm(HoldAt(*spec["hold"]))
    report = asyncio.run(_serve(spec))
    _write_json(os.path.join(folder, "report.json"), report)


async def _serve(spec) -> dict:
    from temporalio.worker import Worker as TemporalWorker

    from .support import connect
    modules = spec.get("modules", list(MODULES)) + spec["imports"]
    workflows, activities = registered(modules)
    client = await connect(spec["address"], identity=spec["name"])
    with ThreadPoolExecutor(max_workers=8) as pool:
        worker = TemporalWorker(client, task_queue=spec["task_queue"], workflows=workflows,
                                activities=activities, activity_executor=pool,
                                build_id=build_id(modules),
                                sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT)
        async with worker:
            ids = []
            for workflow, workflow_id, args, options in spec["start"]:
                await start(client, workflow, workflow_id, args, spec["task_queue"], **options)
                ids.append(workflow_id)
            _touch(os.path.join(spec["folder"], "ready"))
            ids += [w for w in spec["wait_for"] if w not in ids]
            deadline = time.monotonic() + spec["timeout"]
            hurry = os.path.join(spec["folder"], HURRY)
            report = {w: await outcome(client, w, deadline, hurry) for w in ids}
            await asyncio.sleep(spec["linger"])
    return report


async def start(client, workflow, workflow_id, args, task_queue, task_timeout=None,
                id_reuse="reject"):
    """Start `workflow` (its registered name) as `workflow_id`. The workflow id is the
    idempotency of a run: if a run with this id is open, or has ended and id_reuse is
    "reject", nothing new starts and the existing run's handle is returned."""
    from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
    from temporalio.exceptions import WorkflowAlreadyStartedError
    reuse = {"reject": WorkflowIDReusePolicy.REJECT_DUPLICATE,
             "allow": WorkflowIDReusePolicy.ALLOW_DUPLICATE}[id_reuse]
    try:
        return await client.start_workflow(
            workflow, args=list(args), id=workflow_id, task_queue=task_queue,
            id_reuse_policy=reuse, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            task_timeout=timedelta(seconds=task_timeout) if task_timeout
            else WORKFLOW_TASK_TIMEOUT)
    except WorkflowAlreadyStartedError:            # it ended already, and reuse is refused
        return client.get_workflow_handle(workflow_id)


async def outcome(client, workflow_id, deadline=None, hurry=None) -> dict:
    """Wait (until `deadline`, a time.monotonic() value, or until a file `hurry` exists)
    for a run to end; describe it."""
    from temporalio.client import WorkflowFailureError
    from temporalio.service import RPCError, RPCStatusCode

    def enough() -> bool:
        return (deadline is not None and time.monotonic() > deadline) or \
            (hurry is not None and os.path.exists(hurry))

    handle = client.get_workflow_handle(workflow_id)
    found = {"status": None, "result": None, "error": None}
    while True:                    # another worker may not have started it yet
        try:
            await handle.describe()
            break
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            if enough():
                return found
            await asyncio.sleep(0.1)
    result = asyncio.ensure_future(handle.result())
    settled = False
    try:
        while not result.done() and not enough():
            await asyncio.wait([result], timeout=0.25)
        if result.done():
            settled = True
            found["result"] = result.result()
    except WorkflowFailureError as exc:
        cause = exc.cause
        found["error"] = f"{type(cause).__name__}: {cause}"
    finally:
        result.cancel()
    described = await handle.describe()
    found["status"] = described.status.name if described.status is not None else None
    if found["status"] in ("COMPLETED", "FAILED") and not settled:
        # It ended between the last look and this one (the wait ran out meanwhile, on a
        # busy machine): its outcome is there now, so report it, not "completed with None".
        try:
            found["result"] = await asyncio.wait_for(handle.result(), timeout=30)
        except WorkflowFailureError as exc:
            found["error"] = f"{type(exc.cause).__name__}: {exc.cause}"
    return found


def build_id(modules) -> str:
    """The worker's build id: a hash of the SDK's version and the source of the modules it
    registers. Left unset, the SDK hashes the bytecode of every module loaded (some 600
    here), which costs each worker more than its connection to the server."""
    import hashlib

    import temporalio
    digest = hashlib.sha256(f"temporalio {temporalio.__version__}".encode())
    for name in modules:
        path = getattr(_module(name), "__file__", None)
        if path:
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()[:32]


def registered(modules):
    """(workflow classes, activity functions) defined in these modules (short names are
    modules of this package, else any importable module)."""
    workflows, activities = [], []
    for name in modules:
        module = _module(name)
        for value in vars(module).values():
            if isinstance(value, type) and hasattr(value, "__temporal_workflow_definition"):
                if value not in workflows:
                    workflows.append(value)
            elif callable(value) and hasattr(value, "__temporal_activity_definition"):
                if value not in activities:
                    activities.append(value)
    return workflows, activities


def _module(name):
    package = __package__
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.{name}":
            raise
        return importlib.import_module(name)


def _touch(path):
    with open(path, "w"):
        pass


def _write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, default=str)
    os.replace(tmp, path)        # the controller never reads half a report


def _forked(folder, environment) -> None:
    """A worker's life in a child of the fork server: end with the process that asked for
    it, write everything to the log, take that process's environment, then _run."""
    watchdog.exit_with_parent()
    _name_this_process(PROCESS_NAME)
    forked.log_to(folder)            # what it prints, and its stacks if asked
    os.environ.clear()
    os.environ.update(environment)
    _run(folder)


def _name_this_process(name) -> None:
    if sys.platform.startswith("linux"):
        import ctypes
        ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)       # 15 = PR_SET_NAME


def _run(folder) -> None:
    """The process's whole life: serve, report, and end with os._exit (see the docstring)."""
    try:
        _main(folder)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    else:
        code = 0
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

