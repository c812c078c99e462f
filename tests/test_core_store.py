"""The store file: refused untouched when it is not ours or too new; migrated when older.

Also what MemoryStore is for: everything is gone with the process.
"""

import errno
import hashlib
import shutil
import multiprocessing
import sqlite3
import subprocess
import sys
import tempfile

from core_support import *  # noqa: F401,F403
from core_support import open_and_say, open_as_nobody

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


@pytest.mark.parametrize("whose", ["another application's", "a newer durable_lite's"])
def test_a_database_open_elsewhere_beside_its_log_is_refused_untouched(tmp_path, whose):
    """With a log (-wal) beside the file, the store's own connection reads it before writing
    anything (no probe first): what it finds there, the log included, is refused as the
    probe refuses it, and the file, its log and the folder are left as they were."""
    path = str(tmp_path / "app.db")
    if whose == "another application's":
        sql, words = "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)", ("customers",)
    else:
        dl.SQLiteStore(path).close()
        sql = f"UPDATE durable_lite_meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'"
        words = (f"schema {SCHEMA_VERSION + 1}", "newer")
    elsewhere = sqlite3.connect(path, isolation_level=None)   # the other program, still open
    try:
        elsewhere.execute("PRAGMA journal_mode = WAL")
        elsewhere.execute(sql)                                # committed into the log only
        assert os.path.getsize(path + "-wal") > 0
        log = digest(path + "-wal")
        assert_refused_untouched(path, *words)
        assert digest(path + "-wal") == log
    finally:
        elsewhere.close()


def test_a_store_reopened_beside_its_log_opens_one_connection(tmp_path, monkeypatch):
    """Nearly every open finds the store's log beside it (a sweep's or a grader's store
    reopened by each "new process"): one connection then does it all."""
    path = str(tmp_path / "runs.db")
    first = dl.SQLiteStore(path)
    first.list_runs()                              # in use: its log is beside the file
    assert os.path.exists(path + "-wal")
    opened, connect = [], sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: opened.append(a) or connect(*a, **k))
    try:
        dl.SQLiteStore(path).close()
    finally:
        first.close()
    assert len(opened) == 1, opened


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


def only_the_stores_files(folder):
    """The folder holds runs.db and what SQLite keeps beside it (-wal, -shm), nothing else."""
    return set(files_in(folder)) - {"runs.db-wal", "runs.db-shm"} == {"runs.db"}


def schema_of(path):
    """What a store file holds besides runs: its tables, indexes and meta rows, and its mode."""
    db = sqlite3.connect(path)
    try:
        return (sorted(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")),
                sorted(db.execute("SELECT key, value FROM durable_lite_meta")),
                db.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        db.close()


@pytest.mark.parametrize("durability", ["process", "power"])
def test_a_new_store_made_in_one_step_is_the_store_the_migrations_make(tmp_path, stores, durability,
                                                                       monkeypatch):
    """A new file is a copy of an empty store (store/template.py): built in memory, or
    before Python 3.11 in the first store's own file. Made statement by statement in place
    instead (on a filesystem without hard links), it is the same store; each way, the folder
    holds only the store's own files, and only that last way runs the migrations."""
    from durable_lite.store import template
    assert template.EMPTY_STORE is not None or not hasattr(sqlite3.Connection, "serialize")
    migrations = []
    migrate = dl.SQLiteStore._migrate
    monkeypatch.setattr(dl.SQLiteStore, "_migrate",
                        lambda store: migrations.append(store.path) or migrate(store))

    def new_store(way):
        path = str(tmp_path / way / "runs.db")
        os.makedirs(os.path.dirname(path))
        stores(path, durability=durability)
        assert only_the_stores_files(os.path.dirname(path)), way
        return path

    copied = new_store("copied")
    monkeypatch.setattr(template, "EMPTY_STORE", None)     # as on a Python before 3.11
    built = new_store("built-in-its-file")
    assert template.EMPTY_STORE is not None                # ... kept for the next new store
    assert migrations == []

    def no_hard_links(source, target):
        raise OSError(errno.EPERM, "this filesystem has no hard links")
    monkeypatch.setattr(template.os, "link", no_hard_links)
    migrated = new_store("migrated")
    assert migrations == [migrated]
    assert schema_of(copied) == schema_of(built) == schema_of(migrated)
    assert schema_of(copied)[2] == "wal"


OPEN_AND_RECORD = """
import os, sys, time
import durable_lite as dl
from durable_lite.store.records import RunRecord
path, run_id, go = sys.argv[1:]
while not os.path.exists(go):
    time.sleep(0.001)
store = dl.SQLiteStore(path)
store.create_run(RunRecord(run_id, "w", 1, "[]", "{}", "running", 0.0, 0.0))
store.close()
"""


def test_stores_opened_at_once_on_a_new_path_all_use_the_one_file(tmp_path):
    """Eight processes open the same new store at the same moment: one file is made, none
    is replaced under another, each records its run there, and no copy is left lying."""
    path, go = str(tmp_path / "runs.db"), str(tmp_path.parent / f"{tmp_path.name}-go")
    workers = [subprocess.Popen([sys.executable, "-c", OPEN_AND_RECORD, path, f"r{i}", go])
               for i in range(8)]
    try:
        open(go, "w").close()
        for worker in workers:
            assert worker.wait(120) == 0
    finally:
        for worker in workers:
            worker.kill()
        os.remove(go)
    store = dl.SQLiteStore(path)
    try:
        assert sorted(r.run_id for r in store.list_runs()) == [f"r{i}" for i in range(8)]
    finally:
        store.close()
    assert only_the_stores_files(str(tmp_path))


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
    assert store.schema_version() == SCHEMA_VERSION
    record = store.get_run("v2-1")
    assert (record.lease_owner, record.lease_expires) == ("old-worker", 99.0)
    assert (record.spent_steps, record.spent_cost) == (0, 0.0)
    assert [e.kind for e in store.events("v2-1")] == ["started"]


def test_a_file_written_by_schema_3_is_migrated_and_its_runs_start_with_no_interruptions(tmp_path, stores, clock):
    path = str(tmp_path / "v3.db")
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1 + MIGRATIONS[2] + MIGRATIONS[3])     # exactly what schema 3 created
    db.execute("INSERT INTO runs VALUES ('v3-1', 'core-v3', 1, '[]', '{}', 'running', 1.0, 2.0, "
               "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 2, 0.25)")
    db.execute("INSERT INTO entries VALUES ('v3-1', 0, 'step', 'a', 1, '1', 1, 1.0, 1.0, 'w', 0.5)")
    db.commit()
    db.close()
    assert int(sqlite3.connect(path).execute(
        "SELECT value FROM durable_lite_meta WHERE key='schema_version'").fetchone()[0]) == 3

    store = stores(path)
    assert store.schema_version() == SCHEMA_VERSION == 5
    record = store.get_run("v3-1")
    assert (record.spent_steps, record.spent_cost) == (2, 0.25)     # schema 3's data kept
    assert (record.interruptions, record.taken_up_at) == (0, None)   # schema 4 columns

    @dl.workflow("core-v3")
    def v3(ctx):
        return [ctx.step("a", lambda: 0), ctx.step("b", lambda: 2)]

    run = dl.Engine(store, clock).resume("v3-1")
    assert run.status == "completed" and run.result == [1, 2] and run.steps == 4
    assert run.cost == 0.75


# a damaged or unreachable store file: refused with the file named and what to do -----------

def write_store(path, *statements):
    """A durable_lite store file, then statements run on it by hand (as a damaged file)."""
    dl.SQLiteStore(path).close()
    db = sqlite3.connect(path)
    for sql in statements:
        db.execute(sql)
    db.commit()
    db.close()


@pytest.mark.parametrize("sql, words", [
    ("DELETE FROM durable_lite_meta WHERE key = 'schema_version'", ("schema_version", "missing")),
    ("UPDATE durable_lite_meta SET value = 'three' WHERE key = 'schema_version'", ("'three'", "number")),
    ("UPDATE durable_lite_meta SET value = '-1' WHERE key = 'schema_version'", ("'-1'", "number")),
], ids=["missing", "text", "negative"])
def test_a_store_whose_schema_version_is_missing_or_not_a_number_is_refused_untouched(tmp_path, sql, words):
    path = str(tmp_path / "damaged.db")
    write_store(path, sql)
    error = assert_refused_untouched(path, *words)
    assert "backup" in str(error)


def test_a_store_in_a_folder_that_does_not_exist_is_refused_naming_the_folder(tmp_path):
    path = str(tmp_path / "no-such-folder" / "runs.db")
    with pytest.raises(StoreFileError) as err:
        dl.SQLiteStore(path)
    message = str(err.value)
    assert path in message and "does not exist" in message and "makedirs" in message
    assert not os.path.exists(os.path.dirname(path))


@pytest.fixture
def shared_folder():
    """A folder another user can reach (pytest's own tmp folders are private to root)."""
    folder = tempfile.mkdtemp(prefix="dl-readonly-")
    os.chmod(folder, 0o777)
    yield folder
    os.chmod(folder, 0o777)
    shutil.rmtree(folder)


def open_as_another_user(path):
    """Open a store at `path` without root's right to write anywhere; return what happened:
    "opened" or "<error type>: <message>".

    Run as root (a container), the store is opened in a child that has become the user
    `nobody`. The child forks from multiprocessing's fork server, a process with one
    thread: a fork of this one, which has several, could deadlock on a lock another thread
    held. (A fresh `python` started as nobody cannot work: the interpreter may live where
    nobody can reach, such as pyenv's under /root.) Run as anyone else, it is opened here."""
    if os.geteuid() != 0:
        return open_and_say(path)
    ctx = multiprocessing.get_context("forkserver")
    answer, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=open_as_nobody, args=(path, send))
    child.start()
    send.close()
    try:
        return answer.recv() if answer.poll(120) else "no answer from the child"
    except EOFError:
        return f"the child ended with status {child.exitcode} and no answer"
    finally:
        child.join(30)
        answer.close()


def test_a_read_only_store_file_is_refused_untouched_naming_the_file(shared_folder):
    path = os.path.join(shared_folder, "runs.db")
    write_store(path)
    os.chmod(path, 0o444)
    before, listing = digest(path), files_in(shared_folder)
    answer = open_as_another_user(path)
    assert answer.startswith("StoreFileError") and path in answer, answer
    assert "read-only" in answer and "chmod" in answer
    assert digest(path) == before and files_in(shared_folder) == listing


def test_a_store_in_a_read_only_folder_is_refused_naming_the_folder(shared_folder):
    existing = os.path.join(shared_folder, "runs.db")
    write_store(existing)
    os.chmod(existing, 0o666)
    before = digest(existing)
    os.chmod(shared_folder, 0o555)
    for path in (existing, os.path.join(shared_folder, "new.db")):
        answer = open_as_another_user(path)
        assert answer.startswith("StoreFileError") and shared_folder in answer, answer
        assert "read-only" in answer and "-wal" in answer
    assert digest(existing) == before and files_in(shared_folder) == ["runs.db"]


# a store file deleted or replaced under an engine ------------------------------------------

@dl.workflow("core-file-gone")
def file_gone(ctx):
    ctx.step("a", lambda: 1)
    return ctx.wait_for_signal("go", timeout=60)


def remove_store_file(path):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_an_engine_whose_store_file_is_deleted_or_replaced_stops_naming_the_file(store_path, stores, clock, how):
    engine = dl.Engine(stores(store_path), clock)
    assert engine.start(file_gone, run_id="a").status == "waiting"
    remove_store_file(store_path)
    if how == "replaced":
        stores(store_path)                    # someone opened a new, empty store at the path
    calls = {"start": lambda: engine.start(file_gone, run_id="b"),
             "resume": lambda: engine.resume("a"),
             "recover": engine.recover,
             "signal": lambda: engine.signal("a", "go", 1)}
    for name, call in calls.items():
        with pytest.raises(StoreFileError) as err:
            call()
        message = str(err.value)
        assert store_path in message and how in message, (name, message)
    assert os.path.exists(store_path) == (how == "replaced")
    if how == "replaced":
        assert dl.SQLiteStore(store_path).list_runs() == []      # nothing went into it either


def test_a_batch_commits_its_writes_together_or_not_at_all(any_store, clock):
    from durable_lite.store.records import Event, RunRecord
    with pytest.raises(RuntimeError):
        with any_store.batch():
            any_store.create_run(RunRecord("b", "wf", 1, "[]", "{}", "running", clock(), clock()))
            any_store.add_event(Event("b", clock(), "started"))
            raise RuntimeError("the process stops here")
    if any_store.name == "sqlite":              # memory keeps nothing across a crash anyway
        assert any_store.get_run("b") is None and any_store.events("b") == []
    with any_store.batch():
        with any_store.batch():                 # an inner batch joins the outer one
            any_store.create_run(RunRecord("c", "wf", 1, "[]", "{}", "running", clock(), clock()))
        any_store.add_event(Event("c", clock(), "started"))
    assert any_store.get_run("c").status == "running" and len(any_store.events("c")) == 1


# damaged files: refused naming the file, never a bare sqlite3 error ---------------------

def _store_with_entries(path):
    store = dl.SQLiteStore(path)
    engine = dl.Engine(store, dl.FakeClock())

    @dl.workflow("damaged-file")
    def fifty(ctx):
        for _ in range(50):
            ctx.step("s", lambda: "x" * 100)

    engine.start(fifty, run_id="r")
    store.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")      # everything into the main file
    db.close()
    with open(path, "rb") as f:
        return bytearray(f.read())


def _damage(path, data, find, offset, value):
    at = data.index(find) + offset
    data[at] = value
    with open(path, "wb") as f:
        f.write(data)


def test_a_folder_given_as_the_store_path_is_refused_naming_it(tmp_path):
    with pytest.raises(StoreFileError, match="folder") as err:
        dl.SQLiteStore(str(tmp_path))
    assert str(tmp_path) in str(err.value)


def test_a_store_whose_table_list_holds_bytes_that_are_not_text_is_refused_naming_it(tmp_path):
    path = str(tmp_path / "runs.db")
    data = _store_with_entries(path)
    _damage(path, data, b"tableentriesentries", len(b"table"), 0xFF)
    with pytest.raises(StoreFileError, match="damaged") as err:
        dl.SQLiteStore(path)
    assert path in str(err.value)


@pytest.mark.parametrize("find, offset, value, what", [
    (b'"xxxxxxxx', 3, 0xFF, "text that is not UTF-8"),
    (b'"xxxxxxxx', None, 0x00, "a page whose header is destroyed"),
])
def test_a_store_with_a_damaged_page_is_refused_at_the_first_read_naming_the_file(
        tmp_path, find, offset, value, what):
    path = str(tmp_path / "runs.db")
    data = _store_with_entries(path)
    if offset is None:                                   # the first byte of that row's page
        page = data.index(find) // 4096
        data[page * 4096] = value
        with open(path, "wb") as f:
            f.write(data)
    else:
        _damage(path, data, find, offset, value)
    store = dl.SQLiteStore(path)
    try:
        with pytest.raises(StoreFileError, match="damaged") as err:
            store.load_entries("r")
        assert path in str(err.value), what
    finally:
        store.close()
