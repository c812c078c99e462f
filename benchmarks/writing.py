"""Writing: the per-step cost of a workflow of N trivial steps, for every row of the ladder.

The rows lesson 13 calls the ladder come from durable_lite/lab/ladder.py (the lesson times
the same functions); this adds durable_lite on MemoryStore (the engine's bookkeeping with
no storage at all) and DBOS, on SQLite and on Postgres. All rows take turns, round by
round, in a rotating order, so drift on a shared machine spreads over all of them alike.
"""

import os

import durable_lite as dl
from durable_lite.lab import ladder

from support import fmt, summary

# key -> (system, mode, baseline key for the ratio column), in the order the report prints.
# A row is compared with bare sqlite3 making the same promise: NORMAL for the rows that
# survive a process kill (or promise nothing), FULL for those that survive power loss.
WRITE_ROWS = {
    "plain": ("plain function call", "-", "sqlite_normal"),
    "write": ("write() of the checkpoint row", "log file, no fsync", "sqlite_normal"),
    "fsync": ("write() + fdatasync", "log file, synced", "sqlite_full"),
    "sqlite_normal": ("bare sqlite3 INSERT+COMMIT", "WAL, NORMAL", "sqlite_normal"),
    "sqlite_full": ("bare sqlite3 INSERT+COMMIT", "WAL, FULL", "sqlite_full"),
    "dl_memory": ("durable_lite MemoryStore", "none (memory)", "sqlite_normal"),
    "dl_process": ("durable_lite SQLiteStore", "process (WAL, NORMAL)", "sqlite_normal"),
    "dl_power": ("durable_lite SQLiteStore", "power (WAL, FULL)", "sqlite_full"),
    "dbos_sqlite": ("DBOS Transact, SQLite", "SQLite defaults (rollback journal, FULL)",
                    "sqlite_full"),
    "dbos_postgres": ("DBOS Transact, Postgres", "Postgres defaults (fsync per commit)",
                      "sqlite_full"),
}
DBOS_ROWS = ("dbos_sqlite", "dbos_postgres")


class WriteSystems:
    """Every row, set up once per N: the ladder's local rungs, a MemoryStore engine, and
    DBOS (launched on demand, one database at a time, by `dbos`, a Backends or None)."""

    def __init__(self, folder, n, dbos=None):
        self.ladder = ladder.LadderSystems(folder, label=f"n{n}")
        self.memory = dl.Engine(dl.MemoryStore())
        self.dbos = dbos
        self.n = n

    def keys(self):
        dbos = self.dbos.urls if self.dbos is not None else {}
        return [k for k in WRITE_ROWS if k not in DBOS_ROWS or k in dbos]

    def prepare(self, key):
        """Untimed, before a timed run: put DBOS on the right database; make room in the
        write() rows' log files."""
        if key in DBOS_ROWS:
            self.dbos.use(key)
        else:
            self.ladder.prepare(key, self.n)

    def run(self, key, n):
        if key in DBOS_ROWS:
            self.dbos.run(key, n)
        elif key == "dl_memory":
            run = self.memory.start(ladder.ladder_steps, n)
            assert run.status == dl.COMPLETED and run.steps == n, run
        else:
            self.ladder.run(key, n)

    def close(self):
        self.ladder.close()


def measure_writes(folder, n, repeats, dbos, progress):
    systems = WriteSystems(folder, n, dbos)
    keys = systems.keys()

    def after_round(r, seconds):
        progress.say(f"writing, N={n}: round {r + 1}/{repeats} done")

    progress.say(f"writing, N={n}: {len(keys)} rows, {repeats} rounds")
    try:
        seconds = ladder.round_robin(systems.run, keys, n, repeats, before=systems.prepare,
                                     after_round=after_round)
    finally:
        systems.close()
    records = [write_record(key, n, seconds[key]) for key in keys]
    for r in records:                              # the table, row by row, as it is known
        progress.say(f"  {r['system']:<30} {r['mode']:<42} N={n:<5} "
                     f"{fmt(r['median_us']):>8} us/step")
    return records


def write_record(key, n, seconds):
    system, mode, baseline = WRITE_ROWS[key]
    per_step = [s / n * 1e6 for s in seconds]
    return {"key": key, "system": system, "mode": mode, "n": n, "repeats": len(seconds),
            "baseline": baseline, "total_ms": [s * 1e3 for s in seconds],
            "per_step_us": per_step, **{f"{k}_us": v for k, v in summary(per_step).items()}}


def sqlite_settings(path):
    """The journal mode a database file is in, and the synchronous level a connection that
    sets none (as DBOS's connections do) gets."""
    import sqlite3
    probe = sqlite3.connect(path)
    try:
        journal = probe.execute("PRAGMA journal_mode").fetchone()[0]
        synchronous = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
            probe.execute("PRAGMA synchronous").fetchone()[0]]
    finally:
        probe.close()
    return {"journal_mode": journal, "synchronous": synchronous}


def dbos_sqlite_path(folder):
    return os.path.join(folder, "dbos-writes.sqlite")
