"""DBOS Transact, launched quietly and offline, on SQLite or on Postgres.

DBOS keeps one global instance per process: `DBOS(config=...)` then `DBOS.launch()`.
To switch databases (SQLite first, then Postgres) the instance must be destroyed in
between, which `launch()` here does for you. Five settings matter for a course:

- application_version is pinned. DBOS recovers a workflow only on a process running the
  same application version, and by default derives the version from a hash of your
  workflow code, so editing a notebook cell would strand every pending workflow.
- log_level is ERROR. DBOS logs at INFO by default (its executor id, a link to its hosted
  console, queue listeners); in a notebook that is noise that changes between runs.
- the notification poll is 50 ms instead of 1 s, so recv, destroy and tests are quick.
- DBOS's internal queue is polled every 0.2 s instead of every second. A launching
  process recovers its executor's pending workflows by putting them on that queue, so
  with the default a restarted worker sits idle for up to a second before it carries on.
  Not faster: each poll is a query. At 50 ms an idle DBOS process spent about 60 ms of
  CPU a second on them (24 ms at 0.2 s), and the tests run hundreds of DBOS workers.
  DBOS 3.4 has no public setting for it; `_poll_recovery_quickly` sets it where DBOS
  keeps it and, should a later DBOS keep it elsewhere, leaves the default in place.
- on SQLite, the SQLite library. DBOS needs SQLite 3.42+ on Python 3.12+ (see DBOS_SQLITE),
  which a Python built against an older system SQLite lacks; there DBOS, and every client
  made here, are handed sqlean.py's sqlite3 module (SQLite 3.50) through SQLAlchemy's
  `module=` engine option, which DBOS's `db_engine_kwargs` setting passes on. The course's
  own stores keep using the standard sqlite3: only DBOS's file is opened by the other.

    from durable_lite.engines.dbos import support as dbos_support
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


# DBOS 3.4 writes `unixepoch('subsec')` (SQLite 3.42+) into its SQLite schema and queries
# when it runs on Python 3.12 or newer, and `strftime('%s','now')` (any SQLite) below 3.12:
# it picks by the Python's version, assuming a 3.12+ Python brings a SQLite of 2023 or
# later. A Python built against an older system SQLite (3.40 on Debian 12, say) then cannot
# insert a row, and the first thing a learner sees is "no such table: main.operation_outputs".
DBOS_SQLITE = (3, 42)


def _dbos_needs_new_sqlite() -> bool:
    return sys.version_info >= (3, 12)


@functools.lru_cache(maxsize=None)
def sqlite_module():
    """The DB-API module DBOS should use for SQLite here: the standard sqlite3 when it is
    new enough for DBOS on this Python, else sqlean.py's (the engines extra installs it on
    3.12+: a sqlite3 with SQLite 3.50 inside), else None."""
    import sqlite3
    if not _dbos_needs_new_sqlite() or sqlite3.sqlite_version_info >= DBOS_SQLITE:
        return sqlite3
    try:
        import sqlean.dbapi2 as newer
    except ImportError:
        return None
    return newer if newer.sqlite_version_info >= DBOS_SQLITE else None


def sqlite_usable():
    """(True, "") if DBOS can keep its system database in SQLite here, else (False, why).

    True wherever the engines extra is installed: see sqlite_module()."""
    if sqlite_module() is not None:
        return True, ""
    import sqlite3
    return False, (f"DBOS on SQLite needs SQLite {'.'.join(map(str, DBOS_SQLITE))}+ on Python "
                   f"3.12+; this Python has SQLite {sqlite3.sqlite_version} and the sqlean.py "
                   f"package that brings a newer one is not installed: {EXTRA}")


def sqlite_version() -> str:
    """The version of the SQLite library DBOS uses here, e.g. "3.50.4"."""
    module = sqlite_module()
    return None if module is None else module.sqlite_version


def sqlite_url(path) -> str:
    """A system-database URL for a SQLite file (created on first launch)."""
    return "sqlite:///" + os.path.abspath(os.fspath(path))


def config(url: str, *, executor_id: str = "local", name: str = APP_NAME,
           app_version: str = APP_VERSION) -> dict:
    """The DBOSConfig this course uses (see the module docstring for why each setting)."""
    settings = {"name": name, "system_database_url": url, "executor_id": executor_id,
                "application_version": app_version, "log_level": "ERROR",
                "notification_listener_polling_interval_sec": 0.05}
    if url.startswith("sqlite"):
        module = _sqlite_for_dbos()
        if module is not None:
            # SQLAlchemy's create_engine(url, module=...) takes the DB-API module to use.
            settings["db_engine_kwargs"] = {"module": module}
    return settings


def _sqlite_for_dbos():
    """The module to hand DBOS when it is not the standard sqlite3 (None: nothing to hand;
    an error if DBOS cannot use SQLite here at all)."""
    import sqlite3
    usable, why = sqlite_usable()
    if not usable:
        raise RuntimeError(why)
    module = sqlite_module()
    return None if module is sqlite3 else module


def launch(url: str, **options):
    """Destroy any DBOS instance in this process, then configure and launch a new one.

    Returns the `DBOS` class. At launch DBOS recovers every PENDING workflow of this
    executor id and application version (that is how a restarted process resumes).
    """
    dbos = require()
    settings = config(url, **options)             # refuses a SQLite DBOS cannot use
    shutdown()
    _console_log_to_current_stderr()
    instance = dbos.DBOS(config=settings)
    _poll_recovery_quickly(instance)
    dbos.DBOS.launch()
    logging.getLogger("dbos").setLevel(logging.ERROR)
    return dbos.DBOS


RECOVERY_POLL_SECONDS = 0.2


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
    """A DBOSClient: reads and steers workflows from outside any DBOS application. On
    SQLite it uses the same SQLite library as DBOS itself (see sqlite_module)."""
    dbos = require()
    module = _sqlite_for_dbos() if url.startswith("sqlite") else None
    if module is None:
        return dbos.DBOSClient(system_database_url=url)
    import sqlalchemy
    # DBOS's own SQLite engines wait up to 30 s for a lock (PRAGMA busy_timeout); so does
    # this one, or a read that meets a worker's write (its schema, say) would fail in 5 s.
    engine = sqlalchemy.create_engine(url, module=module, connect_args={"timeout": 30})
    made = dbos.DBOSClient(system_database_engine=engine)
    destroy = made.destroy

    def destroy_and_dispose():
        # A client given an engine does not dispose of it: close its connections too.
        try:
            destroy()
        finally:
            engine.dispose()
    made.destroy = destroy_and_dispose
    return made


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
