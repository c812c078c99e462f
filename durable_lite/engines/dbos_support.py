"""DBOS Transact, launched quietly and offline, on SQLite or on Postgres.

DBOS keeps one global instance per process: `DBOS(config=...)` then `DBOS.launch()`.
To switch databases (SQLite first, then Postgres) the instance must be destroyed in
between, which `launch()` here does for you. Four settings matter for a course:

- application_version is pinned. DBOS recovers a workflow only on a process running the
  same application version, and by default derives the version from a hash of your
  workflow code, so editing a notebook cell would strand every pending workflow.
- log_level is ERROR. DBOS logs at INFO by default (its executor id, a link to its hosted
  console, queue listeners); in a notebook that is noise that changes between runs.
- the notification poll is 50 ms instead of 1 s, so recv, destroy and tests are quick.
- DBOS's internal queue is polled every 50 ms instead of every second. A launching
  process recovers its executor's pending workflows by putting them on that queue, so
  with the default a restarted worker sits idle for up to a second before it carries on.
  DBOS 3.4 has no public setting for it; `_poll_recovery_quickly` sets it where DBOS
  keeps it and, should a later DBOS keep it elsewhere, leaves the default in place.

    from durable_lite.engines import dbos_support
    DBOS = dbos_support.launch(dbos_support.sqlite_url(folder.file("dbos.sqlite")))
    ...
    dbos_support.shutdown()
"""

import asyncio
import contextlib
import functools
import logging
import os
import sys
import threading

EXTRA = "pip install 'durable-lite[engines]'"
APP_NAME = "durable-lite-course"
APP_VERSION = "course-1"

# DBOS status -> the word durable_lite uses for the same state of a run
STATUS_WORDS = {"SUCCESS": "completed", "ERROR": "failed", "PENDING": "running",
                "ENQUEUED": "queued", "CANCELLED": "cancelled",
                "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed", "DELAYED": "queued"}


def require():
    """The `dbos` module, or an ImportError that says which extra to install."""
    try:
        import dbos
    except ImportError as exc:
        raise ImportError(f"this needs DBOS Transact: {EXTRA}") from exc
    return dbos


def sqlite_usable():
    """(True, "") if DBOS can keep its system database in SQLite here, else (False, why).

    DBOS 3.4 writes `unixepoch('subsec')` into its SQLite schema on Python 3.12 and newer,
    assuming those Pythons bring SQLite 3.42 or newer; a Python built against an older
    system SQLite cannot insert a row. (Postgres is unaffected.)
    """
    import sqlite3
    import sys as _sys
    if _sys.version_info >= (3, 12) and sqlite3.sqlite_version_info < (3, 42):
        return False, (f"DBOS on SQLite needs SQLite 3.42+ on Python 3.12+; this Python has "
                       f"SQLite {sqlite3.sqlite_version}")
    return True, ""


def sqlite_url(path) -> str:
    """A system-database URL for a SQLite file (created on first launch)."""
    return "sqlite:///" + os.path.abspath(os.fspath(path))


def config(url: str, *, executor_id: str = "local", name: str = APP_NAME,
           app_version: str = APP_VERSION) -> dict:
    """The DBOSConfig this course uses (see the module docstring for why each setting)."""
    return {"name": name, "system_database_url": url, "executor_id": executor_id,
            "application_version": app_version, "log_level": "ERROR",
            "notification_listener_polling_interval_sec": 0.05}


def launch(url: str, **options):
    """Destroy any DBOS instance in this process, then configure and launch a new one.

    Returns the `DBOS` class. At launch DBOS recovers every PENDING workflow of this
    executor id and application version (that is how a restarted process resumes).
    """
    dbos = require()
    if url.startswith("sqlite"):
        usable, why = sqlite_usable()
        if not usable:
            raise RuntimeError(why)
    shutdown()
    _console_log_to_current_stderr()
    instance = dbos.DBOS(config=config(url, **options))
    _poll_recovery_quickly(instance)
    dbos.DBOS.launch()
    logging.getLogger("dbos").setLevel(logging.ERROR)
    return dbos.DBOS


RECOVERY_POLL_SECONDS = 0.05


def _poll_recovery_quickly(instance) -> bool:
    """Poll DBOS's internal queue (where launch puts the workflows it recovers) every
    RECOVERY_POLL_SECONDS. Returns False, changing nothing, if this DBOS keeps it elsewhere."""
    try:
        queue = instance._registry.get_internal_queue()
        if not isinstance(queue._polling_interval_sec, (int, float)):
            return False
        queue._polling_interval_sec = RECOVERY_POLL_SECONDS
    except AttributeError:
        return False
    return True


def _console_log_to_current_stderr():
    """DBOS creates its console log handler once per process, bound to the sys.stderr of
    that moment. Under pytest's capture or in a notebook that stream may since have been
    replaced and closed; DBOS flushes the handler at every launch, so point it at today's."""
    for handler in logging.getLogger("dbos").handlers:
        if handler.name == "__dbos_console_log_handler__":
            with handler.lock:
                handler.stream = sys.stderr


def shutdown() -> None:
    """Destroy this process's DBOS instance, if any. Registered workflows stay registered."""
    try:
        from dbos import DBOS
    except ImportError:
        return
    DBOS.destroy()


@contextlib.contextmanager
def running(url: str, **options):
    """`with running(url) as DBOS:` launch for the block, destroy after it (also on error)."""
    try:
        yield launch(url, **options)
    finally:
        shutdown()


def client(url: str):
    """A DBOSClient: reads and steers workflows from outside any DBOS application."""
    return require().DBOSClient(system_database_url=url)


def recorded_steps(url_or_client, workflow_id: str) -> list:
    """Names of the steps DBOS has checkpointed for a workflow, in order."""
    owned = isinstance(url_or_client, str)
    c = client(url_or_client) if owned else url_or_client
    try:
        return [s["function_name"] for s in c.list_workflow_steps(workflow_id)]
    finally:
        if owned:
            c.destroy()


def off_the_loop(fn):
    """Decorator: run `fn` in a helper thread when this thread is running an asyncio loop.

    Jupyter runs every cell inside an event loop, and DBOS refuses its blocking calls there
    (send, get_result, start_workflow, ...) and asks for their `_async` forms. A helper
    thread has no loop, so the same plain code works in a notebook and in a script.
    """
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return fn(*args, **kwargs)
        box = {}

        def target():
            try:
                box["value"] = fn(*args, **kwargs)
            except BaseException as exc:      # handed back to the caller's thread below
                box["error"] = exc

        helper = threading.Thread(target=target, name=f"off-the-loop:{fn.__name__}")
        helper.start()
        helper.join()
        if "error" in box:
            raise box["error"]
        return box["value"]
    return call


def status_word(dbos_status: str) -> str:
    """DBOS's status name in durable_lite's words ("SUCCESS" -> "completed")."""
    return STATUS_WORDS.get(dbos_status, dbos_status.lower())
