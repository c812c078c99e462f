"""durable_lite beside real engines: DBOS Transact, run for real, offline (lesson 14).

Nothing here is imported by `import durable_lite`, and DBOS and pgserver load only when a
module below that needs them is imported. Install them with `pip install
'durable-lite[engines]'`.

    postgres             a throwaway PostgreSQL server started from Python (pgserver)
    dbos_support         DBOS on SQLite or Postgres, launched quietly, destroyed cleanly
    dbos_faults          the course's three crash points around a DBOS step
    refund_durable_lite  the refund with an approval and a cooling-off sleep, on durable_lite
    refund_dbos          the same refund on DBOS, line for line
    research_dbos        the source review's research workflow on DBOS (the five figures)
    dbos_worker          a DBOS worker in a fresh process: a "machine" you can SIGKILL
    two_machines         two workers on one Postgres, one killed mid-refund
    parity               the same scenarios on both engines, as comparable outcomes
    differences          what DBOS does differently, recorded rather than skipped
    concepts             the port concept by concept, and the map to six engines
"""
