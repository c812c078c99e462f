"""Any workflow, SIGKILLed at a crash point and restarted, on durable_lite and on DBOS.

parity.py does this for lesson 01's refund. These two functions do it for any workflow
that can be imported (a durable_lite workflow by its registered name; a DBOS port whose
steps come from dbos/faults.py's step, given as "module.function"), so a check can run a
learner's port beside its original under the very same crash:

    on_durable_lite("pkg.mod", "ex14-cancel-subscription", [world, "K-1", 12],
                    run_id="cancel-1", workdir=work, crash=CrashAt("refund", "after_effect"))
    on_dbos("learner_port.cancel_subscription", [world2, "K-1", 12], workflow_id="cancel-1",
            url=url, crash=CrashAt("refund", "after_effect"),
            imports=["learner_port"], python_path=[folder])

Both return the same keys, read from the same kind of places:

    killed    the first process died by SIGKILL at the crash point (False: it never got there)
    status    the run's final status, in durable_lite's words ("completed", "failed", ...)
    result    its result (JSON), or None
    replayed  the steps already recorded when the fresh process took over (what it replays)
    steps     the steps recorded when the run ended, in order (on DBOS: not its DBOS.recv,
              DBOS.sleep, ... calls)
    error     why the run, or a process, failed ("Type: message"), or None

`crash=None` runs once, with no crash. Nothing here reads the simulated world: comparing
ledgers is the caller's business.
"""

import os

from ...faults import CrashAt


def on_durable_lite(module: str, workflow: str, args, *, run_id: str, workdir, kwargs=None,
                    crash=None, python_path=(), timeout: float = 60.0) -> dict:
    """Run `workflow` (its registered name, from `module`) in a child process killed at
    `crash`, then resume it in a fresh one; the store is `workdir`/runs.db."""
    from ...child import run_in_child
    store = os.path.join(os.fspath(workdir), "runs.db")
    kwargs = dict(kwargs or {})
    crash_at = None if crash is None else CrashAt(crash.step, crash.when, kill=True)
    first = run_in_child(store, module, workflow, *args, run_id=run_id, crash_at=crash_at,
                         python_path=python_path, timeout=timeout, **kwargs)
    if not first.killed:
        run = first.run or {}
        return {"killed": False, "status": run.get("status"), "result": run.get("result"),
                "replayed": run.get("replayed") or [], "error": run.get("error"),
                "steps": _recorded(store, run_id)}
    resumed = run_in_child(store, module, workflow, run_id=run_id, resume=True,
                           python_path=python_path, timeout=timeout).run
    return {"killed": True, "status": resumed["status"], "result": resumed["result"],
            "replayed": resumed["replayed"], "error": resumed.get("error"),
            "steps": _recorded(store, run_id)}


def _recorded(store_path, run_id) -> list:
    """The names of the steps the store holds for the run, in order."""
    from ...store import SQLiteStore
    from ...store.records import STEP
    store = SQLiteStore(store_path)
    try:
        return [e.label for e in store.load_entries(run_id) if e.kind == STEP]
    finally:
        store.close()


def on_dbos(workflow: str, args, *, workflow_id: str, url: str, kwargs=None, crash=None,
            imports=(), python_path=(), executor=None, timeout: float = 30.0) -> dict:
    """Start `workflow` in a DBOS worker process killed at `crash`, then start a worker
    with the same executor id, which recovers it at launch (see dbos/worker.py).

    Each call should have its own workflow id and executor id: many calls may share one
    system database. `timeout`: seconds a worker waits for the workflow to finish."""
    from ..dbos.support import recorded_steps
    from ..dbos.worker import start_worker
    executor = executor or f"killed-{workflow_id}"
    where = {"imports": list(imports), "python_path": list(python_path), "timeout": timeout}
    first = start_worker(url, executor, crash=crash, **where,
                         start=[(workflow, workflow_id, list(args), dict(kwargs or {}))])
    report, ending = _finish(first, timeout + 30)
    if report is not None:                    # it ran to the end: the crash point never came
        return _outcome(report[workflow_id], killed=False)
    if ending != "killed at its crash point":
        return _broken(first, f"the worker could not run the workflow ({ending})")
    replayed = recorded_steps(url, workflow_id)           # what the restart will replay
    second = start_worker(url, executor, wait_for=[workflow_id], **where)
    report, ending = _finish(second, timeout + 30)
    if report is None:
        return {**_broken(second, f"the restarted worker failed ({ending})"), "killed": True,
                "replayed": replayed}
    return {**_outcome(report[workflow_id], killed=True), "replayed": replayed}


def reported(worker, timeout: float, hurry_after=None):
    """The worker's report once it has written one, or None if it died (or hung past
    `timeout`) without one. Either way the worker is gone afterwards. With `hurry_after`,
    the worker is asked to report `hurry_after` seconds from now, its workflows finished or
    not: patience counted from the caller's moment (an answer sent, say), not the worker's.

    A worker writes its report when its workflows finished or its own timeout ran out, and
    then shuts DBOS down, which waits for workflows still running (one blocked in a two-day
    DBOS.recv, say): nothing is left to learn from it then, so it is killed."""
    return _finish(worker, timeout, hurry_after)[0]


def _finish(worker, timeout: float, hurry_after=None):
    """(report or None, how the worker ended: "reported", "killed at its crash point",
    "exited with status N" or "hung"); the worker is stopped in every case, also when the
    caller is interrupted while it waits."""
    import signal
    import time
    try:
        began = time.monotonic()
        while worker.report() is None and worker.process.is_alive():
            waited = time.monotonic() - began
            if waited > timeout:
                return None, "hung"
            if hurry_after is not None and waited > hurry_after:
                worker.hurry()
                hurry_after = None
            time.sleep(0.02)
        report = worker.report()
        if report is not None:
            return report, "reported"
        worker.process.join(5)
        code = worker.process.exitcode
        return None, ("killed at its crash point" if code == -signal.SIGKILL
                      else f"exited with status {code}")
    finally:
        worker.kill()


def _outcome(found: dict, killed: bool) -> dict:
    from ..dbos.support import status_word
    status = found["status"]
    return {"killed": killed, "status": None if status is None else status_word(status),
            "result": found["result"], "replayed": [], "error": found["error"],
            "steps": [s for s in found["steps"] if not s.startswith("DBOS.")]}


def _broken(worker, what) -> dict:
    return {"killed": False, "status": None, "result": None, "replayed": [], "steps": [],
            "error": f"{what}: {last_error(worker.log())}"}


def engine_retries(log: str) -> list:
    """The lines of a worker's log where DBOS says it will try its database again (a lock
    it could not get, a connection lost): each waits a second or more, doubling."""
    return [line.strip() for line in (log or "").splitlines() if "Retrying in" in line]


def last_error(log: str) -> str:
    """The line of a worker's log that says what went wrong (a traceback's last line)."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Interrupt", "Exit")) and " " not in head:
            return line
    return lines[-1] if lines else "(it wrote nothing to its log)"
