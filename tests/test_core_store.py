"""The store file: refused untouched when it is not ours or too new; migrated when older.

Also what MemoryStore is for: everything is gone with the process.
"""

import hashlib
import sqlite3

from core_support import *  # noqa: F401,F403

from durable_lite.errors import StoreFileError
from durable_lite.store.schema import MIGRATIONS, SCHEMA_1, SCHEMA_VERSION


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def files_in(folder):
    return sorted(os.listdir(folder))


def assert_refused_untouched(path, *words):
    before, listing = digest(path), files_in(os.path.dirname(path))
    with pytest.raises(StoreFileError) as err:
        dl.SQLiteStore(path)
    assert os.path.basename(path) in str(err.value)
    for word in words:
        assert word in str(err.value)
    assert digest(path) == before                          # byte for byte
    assert files_in(os.path.dirname(path)) == listing     # no -wal / -shm left behind
    return err.value


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 20)
    assert_refused_untouched(str(path), "not a SQLite database")


def test_a_sqlite_database_of_another_application_is_refused_untouched(tmp_path):
    path = str(tmp_path / "app.db")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO customers (name) VALUES ('Ana')")
    db.commit()
    db.close()
    assert_refused_untouched(path, "customers", "untouched")


def test_a_store_from_a_newer_schema_is_refused_untouched(tmp_path, stores):
    path = str(tmp_path / "future.db")
    store = stores(path)
    store.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE durable_lite_meta SET value = ? WHERE key = 'schema_version'",
               (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    assert_refused_untouched(path, f"schema {SCHEMA_VERSION + 1}", "newer")


def test_a_new_or_empty_file_becomes_a_store_with_the_current_schema(tmp_path, stores):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for path in (str(tmp_path / "new.db"), str(empty)):
        store = stores(path)
        assert store.schema_version() == SCHEMA_VERSION
    with pytest.raises(ValueError, match="durability"):
        dl.SQLiteStore(str(tmp_path / "x.db"), durability="sometimes")


def test_a_file_written_by_schema_1_is_migrated_with_its_data_intact(tmp_path, stores, clock):
    path = str(tmp_path / "old.db")
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1)                    # exactly what schema 1 created
    db.execute("INSERT INTO runs VALUES ('old-1', 'core-migrated', 1, '[\"A-1\"]', '{}', "
               "'running', 1767225600.0, 1767225600.0, NULL, NULL, NULL, NULL, NULL, NULL)")
    db.execute("INSERT INTO entries VALUES ('old-1', 0, 'step', 'lookup', 1, '{\"order\": \"A-1\"}', "
               "1, 1767225600.0, 1767225601.0, 'old-worker', 0.0)")
    db.execute("INSERT INTO signals (run_id, name, payload, sent_at) "
               "VALUES ('old-1', 'approve', '{\"by\": \"ana\"}', 1767225602.0)")
    db.commit()
    db.close()

    store = stores(path)
    assert store.schema_version() == SCHEMA_VERSION
    record = store.get_run("old-1")
    assert (record.workflow, record.args_json, record.status) == ("core-migrated", '["A-1"]', "running")
    assert record.lease_owner is None                          # new column, empty
    assert (record.spent_steps, record.spent_cost) == (0, 0.0)  # schema 3's columns, zero
    (entry,) = store.load_entries("old-1")
    assert (entry.label, entry.result_json, entry.worker) == ("lookup", '{"order": "A-1"}', "old-worker")
    assert store.events("old-1") == []                         # new table, empty

    calls = []

    @dl.workflow("core-migrated")
    def migrated(ctx, order_id):
        order = ctx.step("lookup", lambda: calls.append("lookup"))
        approval = ctx.wait_for_signal("approve", timeout=3600)
        return [order, approval, order_id]

    run = dl.Engine(store, clock).resume("old-1")
    assert run.status == "completed" and calls == []
    assert run.result == [{"order": "A-1"}, {"by": "ana"}, "A-1"]
    reopened = stores(path)                                    # opening again changes nothing
    assert reopened.schema_version() == SCHEMA_VERSION and reopened.get_run("old-1").status == "completed"


def test_a_memory_store_forgets_everything_with_its_process(clock):
    calls = []

    @dl.workflow("core-memory")
    def wf(ctx):
        ctx.step("a", lambda: calls.append("a"))
        ctx.step("b", lambda: calls.append("b"))

    store = dl.MemoryStore()
    with pytest.raises(dl.Crash):
        dl.Engine(store, clock, crash_at=dl.faults.CrashAt("b", "before_step")).start(wf, run_id="m")
    assert dl.Engine(store, clock).resume("m").status == "completed"     # same process: fine
    assert calls == ["a", "b"]
    with pytest.raises(dl.UnknownRunError):
        dl.Engine(dl.MemoryStore(), clock).resume("m")                  # a "new process": gone


def test_both_durability_levels_store_and_reopen(tmp_path, stores, clock):
    @dl.workflow("core-durability")
    def wf(ctx):
        return ctx.step("x", lambda: 42)

    for level in ("process", "power"):
        path = str(tmp_path / f"{level}.db")
        dl.Engine(stores(path, durability=level), clock).start(wf, run_id="d")
        assert dl.Engine(stores(path), clock).get("d").result == 42


def test_a_file_written_by_schema_2_is_migrated_and_keeps_its_leases_and_events(tmp_path, stores):
    path = str(tmp_path / "v2.db")
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1 + MIGRATIONS[2])     # exactly what schema 2 created
    db.execute("INSERT INTO runs VALUES ('v2-1', 'core-v2', 1, '[]', '{}', 'running', 1.0, 2.0, "
               "NULL, NULL, NULL, NULL, NULL, NULL, 'old-worker', 99.0)")
    db.execute("INSERT INTO events (run_id, at, kind) VALUES ('v2-1', 1.0, 'started')")
    db.commit()
    db.close()
    assert int(sqlite3.connect(path).execute(
        "SELECT value FROM durable_lite_meta WHERE key='schema_version'").fetchone()[0]) == 2

    store = stores(path)
    assert store.schema_version() == SCHEMA_VERSION == 3
    record = store.get_run("v2-1")
    assert (record.lease_owner, record.lease_expires) == ("old-worker", 99.0)
    assert (record.spent_steps, record.spent_cost) == (0, 0.0)
    assert [e.kind for e in store.events("v2-1")] == ["started"]
