"""The SQLite schema, its version, and how to move an older file forward.

A store file records which schema wrote it (table `durable_lite_meta`). Opening a file
from an older schema migrates it in one transaction; a file from a newer schema, or one
that is not a durable_lite database at all, is refused untouched.
"""

APP = "durable_lite"
SCHEMA_VERSION = 5

# Schema 1: runs, checkpoints and signals. Kept verbatim so the migration can be tested
# on a file that schema 1 really wrote.
SCHEMA_1 = """
CREATE TABLE durable_lite_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    run_id      TEXT PRIMARY KEY,
    workflow    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    args        TEXT NOT NULL,
    kwargs      TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    result      TEXT,
    error       TEXT,
    budget      TEXT,
    halt_reason TEXT,
    waiting_for TEXT,
    wake_at     REAL
);
CREATE TABLE entries (
    run_id      TEXT NOT NULL,
    position    INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    name        TEXT NOT NULL,
    occurrence  INTEGER NOT NULL,
    result      TEXT,
    attempts    INTEGER NOT NULL,
    started_at  REAL,
    ended_at    REAL,
    worker      TEXT,
    cost        REAL NOT NULL,
    PRIMARY KEY (run_id, position)
) WITHOUT ROWID;
CREATE TABLE signals (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL,
    name        TEXT NOT NULL,
    payload     TEXT,
    sent_at     REAL NOT NULL,
    consumed    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_status ON runs (status);
CREATE INDEX signals_pending ON signals (run_id, name, consumed);
INSERT INTO durable_lite_meta VALUES ('app', 'durable_lite'), ('schema_version', '1');
"""

# Schema 2 adds leases (so two workers never run one run) and an event log (failed
# attempts, parks and resumes, for history and tracing).
MIGRATIONS = {
    2: """
ALTER TABLE runs ADD COLUMN lease_owner TEXT;
ALTER TABLE runs ADD COLUMN lease_expires REAL;
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL,
    at          REAL NOT NULL,
    kind        TEXT NOT NULL,
    position    INTEGER,
    name        TEXT,
    worker      TEXT,
    detail      TEXT
);
CREATE INDEX events_by_run ON events (run_id, seq);
UPDATE durable_lite_meta SET value = '2' WHERE key = 'schema_version';
""",
    # Schema 3 remembers what discarded checkpoints had used (engine.invalidate), so a
    # budget still counts work that was done and later thrown away.
    3: """
ALTER TABLE runs ADD COLUMN spent_steps INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN spent_cost REAL NOT NULL DEFAULT 0;
UPDATE durable_lite_meta SET value = '3' WHERE key = 'schema_version';
""",
    # Schema 4 counts the executions of a run that were interrupted (killed, or stopped by
    # SystemExit and the like) at one position, so a poison run can be set aside as dead
    # instead of killing every worker that recovers it (see engine.py).
    4: """
ALTER TABLE runs ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN taken_up_at INTEGER;
UPDATE durable_lite_meta SET value = '4' WHERE key = 'schema_version';
""",
    # Schema 5 adds durable queues (queue.py): each queue's limits, and one row per queued
    # run — waiting, started (holding one of the queue's slots) or done — so every worker
    # on the store counts the same slots and starts, and a crash loses no queued run.
    # `turn` numbers the queue's starts; a key's latest turn is how the round-robin over
    # keys knows whose turn is next.
    5: """
CREATE TABLE queues (
    name        TEXT PRIMARY KEY,
    limits      TEXT NOT NULL,
    turns       INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE queued_runs (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    queue       TEXT NOT NULL,
    key         TEXT,
    run_id      TEXT NOT NULL UNIQUE,
    enqueued_at REAL NOT NULL,
    state       TEXT NOT NULL,
    started_at  REAL,
    turn        INTEGER,
    worker      TEXT
);
CREATE INDEX queued_runs_waiting ON queued_runs (queue, state, key, seq);
CREATE INDEX queued_runs_starts ON queued_runs (queue, started_at);
CREATE INDEX queued_runs_turns ON queued_runs (queue, key, turn);
UPDATE durable_lite_meta SET value = '5' WHERE key = 'schema_version';
""",
}


def upgrade(db, version: int) -> None:
    """Run on `db` the statements that take a file at schema `version` (0: a file with no
    tables yet) to SCHEMA_VERSION. The caller holds the transaction they belong to."""
    scripts = [SCHEMA_1] if version == 0 else []
    scripts += [MIGRATIONS[target] for target in range(max(version, 1) + 1, SCHEMA_VERSION + 1)]
    for script in scripts:
        for statement in script.split(";"):
            if statement.strip():
                db.execute(statement)
