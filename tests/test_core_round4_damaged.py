"""A damaged store gets an error naming the file (and the run or step it met), never a bare
sqlite3 or json error, "no run" for a run the file holds, or a lost lease nobody took.

The damage is made the same way every time: a page of the file overwritten, an index entry
changed byte by byte, a checkpoint's text edited by hand. Also the paths a SQLiteStore
cannot keep runs in, and a run argument JSON cannot hold.
"""

import random
import sqlite3

from core_support import *  # noqa: F401,F403

from durable_lite.errors import StoreFileError

PAGE = 4096


@dl.workflow("round4-damaged")
def three(ctx, order):
    return [ctx.step(name, lambda n=name: f"{n}-{order}") for name in ("a", "b", "c")]


def store_of_runs(path):
    """Completed runs r1, r3, r5, r7 and r9, everything folded into the main file; its bytes."""
    store = dl.SQLiteStore(path)
    engine = dl.Engine(store, dl.FakeClock())
    for i in range(1, 10, 2):
        engine.start(three, f"A-{i}", run_id=f"r{i}")
    store.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with open(path, "rb") as f:
        return bytearray(f.read())


def root_page(path, name):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
    finally:
        db.close()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def engine_on(path):
    return dl.Engine(dl.SQLiteStore(path), dl.FakeClock(1000))


def names_the_file(err, path, *words):
    text = str(err.value)
    assert path in text and "damaged" in text, text
    for word in words:
        assert word in text, text


# pages overwritten with garbage --------------------------------------------------------------

@pytest.mark.parametrize("table", ["events", "runs", "entries"])
def test_a_table_page_overwritten_with_garbage_is_named_by_every_call_that_meets_it(tmp_path, table):
    path = str(tmp_path / "runs.db")
    data = store_of_runs(path)
    page = root_page(path, table) - 1
    data[page * PAGE:(page + 1) * PAGE] = random.Random(table).randbytes(PAGE)
    write(path, data)
    engine = engine_on(path)                   # the store opens: the damage is further in
    try:
        with pytest.raises(StoreFileError) as err:        # was: a bare sqlite3.DatabaseError
            engine.start(three, "B-1", run_id="new")
        names_the_file(err, path)
        with pytest.raises(StoreFileError) as err:
            engine.get("r5") if table != "events" else engine.events("r5")
        names_the_file(err, path)
    finally:
        engine.store.close()


def test_a_run_its_damaged_index_has_lost_is_not_reported_missing_nor_as_a_lost_lease(tmp_path):
    path = str(tmp_path / "runs.db")
    data = store_of_runs(path)
    page = root_page(path, "sqlite_autoindex_runs_1") - 1
    at = data.index(b"r5", page * PAGE, (page + 1) * PAGE)
    data[at + 1] = ord("4")          # the index now says r4 (still in order); the table, r5
    write(path, data)
    engine = engine_on(path)
    try:
        for call in (lambda: engine.get("r5"), lambda: engine.resume("r5"),
                     lambda: engine.history("r5"), lambda: engine.invalidate("r5", "b")):
            with pytest.raises(StoreFileError) as err:   # was: UnknownRunError "no run 'r5'"
                call()
            names_the_file(err, path, "'r5'", "index")
        # Starting it again writes a second r5 the index can find; its first checkpoint then
        # meets the first r5's: the file is damaged, not a lease lost to another worker.
        with pytest.raises(StoreFileError) as err:       # was: LeaseLostError
            engine.start(three, "A-5", run_id="r5")
        names_the_file(err, path, "'r5'")
        assert engine.get("r7").status == "completed"    # what the damage spared still reads
    finally:
        engine.store.close()


def test_a_checkpoint_or_result_that_is_not_json_names_the_step_the_run_and_the_file(tmp_path):
    path = str(tmp_path / "runs.db")
    store_of_runs(path)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("""UPDATE entries SET result = '"b-A-5' WHERE run_id = 'r5' AND name = 'b'""")
    db.execute("""UPDATE runs SET result = '["a-A-3", "b' WHERE run_id = 'r3'""")
    db.execute("""UPDATE entries SET result = 'x' || char(0) WHERE run_id = 'r7' AND name = 'a'""")
    db.close()
    engine = engine_on(path)
    try:
        engine.invalidate("r5", "c")                     # so the resume replays "b"
        with pytest.raises(StoreFileError) as err:       # was: json.JSONDecodeError
            engine.resume("r5")
        names_the_file(err, path, "'b'", "'r5'")
        with pytest.raises(StoreFileError) as err:
            engine.history("r7")
        names_the_file(err, path, "'a'", "'r7'")
        with pytest.raises(StoreFileError) as err:
            engine.get("r3")
        names_the_file(err, path, "'r3'")
        assert engine.store.get_run("r5").status == "running"   # left resumable, not failed
    finally:
        engine.store.close()


def test_a_store_that_fails_to_open_keeps_no_file_open_and_says_why(tmp_path):
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc to list open files")
    path = str(tmp_path / "runs.db")

    def open_files():
        return sorted(p for p in (os.path.realpath(f"/proc/self/fd/{fd}")
                                  for fd in os.listdir("/proc/self/fd")) if p.startswith(path))

    # Another process creating the store, mid-transaction: this one must wait to create it.
    # (A store already at the current schema opens beside a writer without waiting: below.)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    errors = []

    def fail_to_open():
        with pytest.raises(StoreFileError, match="locked") as err:
            dl.SQLiteStore(path, timeout=0)
        errors.append(err.value)              # kept, as a notebook keeps its last error
        assert "exist and are writable" not in str(err.value)

    try:
        # (SQLite holds on to a closed connection's descriptors while another connection
        # of this process has the file locked, and hands them to the next: count from there.)
        fail_to_open()
        after_one = open_files()
        for _ in range(3):
            fail_to_open()
        assert open_files() == after_one      # was: every failed open kept the file open
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_store_at_the_current_schema_opens_beside_a_writer_mid_transaction(tmp_path):
    """Opening reads the file's schema and writes nothing when it is current, so a reader
    (a dashboard, a check) opens while an engine's transaction holds the write lock, and
    reads what was committed."""
    path = str(tmp_path / "runs.db")
    store_of_runs(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        store = dl.SQLiteStore(path, timeout=0)
        try:
            assert store.get_run("r5").status == "completed"
        finally:
            store.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


# what a SQLiteStore cannot be given ----------------------------------------------------------

@pytest.mark.parametrize("path", ["", ":memory:"])
def test_a_path_that_is_not_a_file_is_refused_pointing_to_memorystore(path):
    with pytest.raises(StoreFileError, match="MemoryStore") as err:   # was: FileNotFoundError
        dl.SQLiteStore(path)
    assert repr(path) in str(err.value)


def test_a_set_as_a_run_argument_is_named_as_the_set_it_is(tmp_path):
    engine = dl.Engine(dl.MemoryStore(), dl.FakeClock())
    with pytest.raises(dl.StepResultNotJSON) as err:      # was: "... include a list"
        engine.start(three, {"A-1", "A-2"}, run_id="s")
    assert "argument 1, a set" in str(err.value) and "'s'" in str(err.value)
    assert "a list" not in str(err.value)
    with pytest.raises(dl.StepResultNotJSON) as err:
        engine.start(three, order={"id": "A-1", "tags": {"vip"}}, run_id="s")
    assert "keyword argument 'order'" in str(err.value) and "set ({'vip'}) at ['tags']" in str(err.value)
