"""Lesson 15's Temporal scenes, each a method a notebook cell calls.

    tour = Tour(server.address, folder)     # one worker process, polling a task queue
    tour.retries(fail_times=2)              # a mail server that sends, then times out
    tour.approvals()                        # a signal before the deadline, and none
    tour.started_twice()                    # one workflow id, two starts, one run
    tour.sandbox(path)                      # what the determinism sandbox refuses
    tour.stop()                             # the worker is killed (also when the kernel dies)

The tour's worker (worker.py, a real process) runs the workflows of refund.py and
pitfalls.py; this process is only a client that starts runs, sends signals and reads the
server's event history. Every scene plays afresh (its own workflow ids and a new world
folder under `folder`), so a cell can be run again, or changed and run again, and tell the
same story. What a scene returns comes from the server's history and the world's ledgers,
never from a worker's word.

`killed_on_durable_lite(folder)` is the other side of lesson 15's first picture: lesson
01's refund killed inside its window on durable_lite, for engine.history beside the
server's history of the same kill (machines.py).
"""

import os
import time

from ...faults import AFTER_EFFECT, CrashAt
from ...workflow import workflow
from ..compare.ledger import ledger
from .pitfalls import ATTEMPTS, REFUSED, send_then_fail

CUSTOMER = "customer17@example.com"
INBOX = "inbox"          # the client identity the approvals are sent with


@workflow("lesson-15-notify")
def notify(ctx, folder, to, fail_times):
    """pitfalls.Notify's email as a durable_lite step: no dl.Retry, one attempt."""
    return ctx.step("notify", send_then_fail, folder, to, "Your refund is on its way",
                    fail_times)


class Tour:
    """A worker process on a task queue of its own, and the scenes that use it."""

    def __init__(self, address, folder, worker: str = "worker-1"):
        """Starts the worker process and returns at once; the first scene waits until it
        polls (so a lesson's other cells run while it starts)."""
        from .worker import start_worker
        self.address, self.folder = address, os.fspath(folder)
        self.task_queue = f"tour-{os.urandom(3).hex()}"
        self.worker = start_worker(address, worker, task_queue=self.task_queue, linger=3600)

    def stop(self) -> None:
        self.worker.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        return f"<Tour {'running' if self.worker.alive else 'stopped'}>"

    # the client's side -------------------------------------------------------------------
    def _fresh(self, name):
        """A new folder under `folder`, and a suffix for workflow ids, both unused so far."""
        play = os.urandom(3).hex()
        here = os.path.join(self.folder, f"{name}-{play}")
        os.makedirs(here)
        return here, play

    def start(self, workflow_name, workflow_id, args) -> None:
        """Start a run on the tour's task queue (a run already open, or ended, under that
        id is kept: worker.start)."""
        from . import support as temporal_support
        self.worker.wait_until_ready()
        temporal_support.call(_start, self.address, workflow_name, workflow_id, list(args),
                              self.task_queue)

    def result(self, workflow_id, timeout: float = 60.0):
        from . import support as temporal_support
        return temporal_support.result(self.address, workflow_id, timeout)

    # the scenes --------------------------------------------------------------------------
    def retries(self, fail_times: int = 2) -> list:
        """One email through a mail server that sends, then reports a timeout, on its
        first `fail_times` calls: as a durable_lite step (no retry unless asked), and as a
        Temporal activity without a key and with one. A row each: status, attempts, the
        mail server's calls, and the emails in the customer's inbox."""
        import durable_lite as dl
        from . import support as temporal_support
        here, play = self._fresh("retries")
        world = os.path.join(here, "durable_lite")
        engine = dl.Engine(dl.SQLiteStore(os.path.join(here, "runs.db")), dl.FakeClock())
        try:
            run = engine.start(notify, world, CUSTOMER, fail_times, run_id="notify")
            rows = [{"engine": "durable_lite", "key": "none", "status": run.status,
                     "attempts": engine.history("notify")[0]["attempts"], **_mail(world)}]
        finally:
            engine.store.close()
        runs = {keyed: (f"notify-{'keyed' if keyed else 'unkeyed'}-{play}",
                        os.path.join(here, f"temporal-{keyed}")) for keyed in (False, True)}
        for keyed, (workflow_id, world) in runs.items():
            self.start("notify", workflow_id, [world, CUSTOMER, fail_times, keyed])
        for keyed, (workflow_id, world) in runs.items():
            self.result(workflow_id)
            [row] = temporal_support.history(self.address, workflow_id)
            rows.append({"engine": "Temporal", "key": "the workflow id" if keyed else "none",
                         "status": temporal_support.status(self.address, workflow_id),
                         "attempts": row["attempts"], **_mail(world)})
        return rows

    def approvals(self, approval_timeout: float = 2.0, cooling_off: float = 0.5) -> dict:
        """Two refunds of 250 over the limit of 100: A-101 gets its approval (a signal,
        sent once the run waits for it), nobody answers A-102 before its deadline
        (`approval_timeout` real seconds). {order: {"result", "history"}}."""
        from . import refund as refund_temporal, support as temporal_support
        here, play = self._fresh("approvals")
        ids = {order: f"refund-{order}-{play}" for order in ("A-101", "A-102")}
        for order, workflow_id in ids.items():
            self.start("refund_with_approval", workflow_id,
                       [here, order, 250, 100, approval_timeout, cooling_off])
        temporal_support.wait_for_timer(self.address, ids["A-101"], "approval deadline")
        temporal_support.call(_signal, self.address, ids["A-101"], refund_temporal.APPROVAL,
                              {"approved": True, "by": "ana"})
        return {order: {"result": self.result(workflow_id),
                        "history": temporal_support.history(self.address, workflow_id)}
                for order, workflow_id in ids.items()}

    def started_twice(self) -> dict:
        """The refund (its email and close unkeyed) started twice under one workflow id,
        as a retried request or a rerun cell would. {"same result", "runs" (how many
        times the server started the workflow), "refunds paid", "emails"}."""
        from . import support as temporal_support
        here, play = self._fresh("twice")
        workflow_id, world = f"refund-A-17-{play}", os.path.join(here, "world")
        results = []
        for _ in range(2):
            self.start("refund", workflow_id, [world, "A-17", 40, True, False, False])
            results.append(self.result(workflow_id))
        runs = [e["type"] for e in temporal_support.events(self.address, workflow_id)
                ].count("WorkflowExecutionStarted")
        seen = ledger(world)
        return {"same result": results[0] == results[1], "runs": runs,
                "refunds paid": seen["refunds paid"], "emails": seen["emails"]}

    def sandbox(self, path, timeout: float = 30.0) -> list:
        """Start each workflow of pitfalls.REFUSED (each does one thing the
        sandbox refuses; `path` is a file one of them opens) and its replay-safe
        counterpart, wait until each has completed or had its first workflow task
        refused, and say what happened: a row each (workflow, its code, status, what the
        sandbox said it cannot access: the refusal's first words, "Cannot access", are the
        column's name). The refused runs are then terminated: left open,
        the server would retry their tasks for ever."""
        from . import support as temporal_support
        _, play = self._fresh("sandbox")
        runs = [(name, code, [os.fspath(path)] if name == "reads_a_file" else [])
                for name, code, _ in REFUSED] + [("deterministic", "workflow.now(), ...", [])]
        for name, _, args in runs:
            self.start(name, f"{name}-{play}", args)
        rows, deadline = [], time.monotonic() + timeout
        for name, code, _ in runs:
            workflow_id = f"{name}-{play}"
            while True:
                status = temporal_support.status(self.address, workflow_id)
                failed = [e["about"] for e in temporal_support.events(self.address, workflow_id)
                          if e["type"] == "WorkflowTaskFailed"]
                if status != "running" or failed or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            # "Cannot access time.time.__call__ from inside a workflow...": the name of what
            # was called, the rest said by the column's name
            refusal = failed[0].split(" from inside")[0] if failed else ""
            refused = refusal.removeprefix("Cannot access ").removesuffix(".__call__")
            rows.append({"workflow": name, "its code": code, "status": status,
                         "the sandbox: cannot access": refused})
            if status == "running":
                temporal_support.call(_terminate, self.address, workflow_id)
        return rows


def history_table(rows):
    """History rows (support.history) as a DataFrame with the columns that read
    well in a lesson. A timer has no worker: the server keeps it."""
    import pandas
    rows = [{**r, "worker": "(the server)" if r["kind"] == "timer" else r["worker"]}
            for r in rows]
    return pandas.DataFrame(rows)[["position", "step", "kind", "status", "attempts", "worker"]]


async def _start(address, workflow_name, workflow_id, args, task_queue):
    from .support import connect
    from .worker import start
    await start(await connect(address), workflow_name, workflow_id, args, task_queue)


async def _signal(address, workflow_id, name, payload):
    from .support import connect
    client = await connect(address, identity=INBOX)
    await client.get_workflow_handle(workflow_id).signal(name, payload)


async def _terminate(address, workflow_id):
    from .support import connect
    client = await connect(address)
    await client.get_workflow_handle(workflow_id).terminate("the lesson has seen the refusal")


def _mail(world) -> dict:
    from ...sim import World
    w = World(world)
    try:
        return {"mail server calls": w.ledger(ATTEMPTS).count(), "emails": w.mailer.count()}
    finally:
        w.close()


# durable_lite under the same kill -----------------------------------------------------------
def killed_on_durable_lite(folder, order="A-17", amount=40) -> dict:
    """Lesson 01's refund on durable_lite, killed by SIGKILL inside the refund step's window
    in a process called "machine-a", then taken over by "machine-b" once machine A's lease
    has run out (both on a fake clock, a minute apart). Its engine.history rows, the kinds
    of its events (an "interrupted" event marks the killed execution), and the ledger."""
    import durable_lite as dl
    from ...child import run_in_child
    from ...clock import FakeClock
    here = os.path.join(os.fspath(folder), f"durable_lite-{os.urandom(3).hex()}")
    os.makedirs(here)
    store, world, run_id = (os.path.join(here, "runs.db"), os.path.join(here, "world"),
                            f"refund-{order}")
    start = FakeClock().t
    run_in_child(store, "durable_lite.examples", "refund", world, order, amount, run_id=run_id,
                 crash_at=CrashAt("refund", AFTER_EFFECT, kill=True), key_notices=True,
                 engine_options={"worker": "machine-a", "clock": start})
    run_in_child(store, "durable_lite.examples", "refund", run_id=run_id, resume=True,
                 engine_options={"worker": "machine-b", "clock": start + 60})
    engine = dl.Engine(dl.SQLiteStore(store))
    try:
        return {"history": engine.history(run_id),
                "events": [e.kind for e in engine.events(run_id)], **ledger(world)}
    finally:
        engine.store.close()


# nothing left behind ----------------------------------------------------------------------------
def left_running() -> list:
    """The Temporal servers and Temporal worker processes that this process started (its
    children, theirs, and so on) and that still run: [(pid, "server" or "worker")]. A
    lesson's last cell prints it, so a lesson that leaves one behind fails its own check.
    A worker is forked from multiprocessing's fork server, so it carries the server's
    command line; it is known by its name (worker.PROCESS_NAME), or, in the moment before it
    takes that name, as one this process started. A killed one its parent has not reaped
    yet (a zombie) no longer runs."""
    from ..processes import watchdog
    from .worker import PROCESS_NAME, started
    ours = started()
    parents, args, names = _processes()
    mine, found = {os.getpid()}, []
    for pid in sorted(parents, key=lambda p: _depth(p, parents)):
        if parents[pid] in mine:
            mine.add(pid)
    for pid in sorted(mine - {os.getpid()}):
        if not watchdog.alive(pid):
            continue
        if "server start-dev" in args[pid]:
            found.append((pid, "server"))
        elif names.get(pid) == PROCESS_NAME or (
                ours.get(pid) is not None and ours[pid] == watchdog.started(pid)):
            found.append((pid, "worker"))
    return found


def _processes():
    """({pid: parent}, {pid: command line}, {pid: name}) of every process (Linux: /proc;
    elsewhere `ps`, which gives the names as well)."""
    import subprocess
    parents, args, names = {}, {}, {}
    if os.path.isdir("/proc/self"):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    command = f.read()
            except OSError:
                continue                  # it ended meanwhile
            pid = int(entry)
            head, _, tail = stat.rpartition(b")")
            names[pid] = head.split(b"(", 1)[1].decode(errors="replace")
            parents[pid] = int(tail.split()[1])
            args[pid] = command.replace(b"\0", b" ").decode(errors="replace").strip()
        return parents, args, names
    # -ww: whole command lines, whatever COLUMNS says (ps cuts them to the terminal's width)
    for field, into in (("comm", names), ("args", args)):
        listed = subprocess.run(["ps", "-A", "-ww", "-o", f"pid=,ppid=,{field}="],
                                capture_output=True, text=True, check=True).stdout
        for line in listed.splitlines():
            fields = line.split(None, 2)
            if len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit():
                parents[int(fields[0])] = int(fields[1])
                into[int(fields[0])] = fields[2] if len(fields) > 2 else ""
    return parents, args, names


def _depth(pid, parents) -> int:
    depth = 0
    while pid in parents and depth < 64:
        pid, depth = parents[pid], depth + 1
    return depth
