"""A second store on the same file, in the same process, must not unlock the first.

POSIX locks belong to a process, not to a file descriptor: closing any descriptor of a file
drops every lock the process holds on it, SQLite's included. SQLiteStore once read the
file's first 16 bytes with a plain open() while opening, so opening a second store (a
reader beside an engine: a dashboard, a check) silently dropped the first store's locks.
Another process writing the same file then saw no reader, folded the log into the file,
and deleted the -wal and -shm files under the first store's feet; every connection this
process opened afterwards read a log that no longer existed: "database disk image is
malformed" on a healthy file. Found by exercise 08's grader, whose workers are processes.
"""

import os
import subprocess
import sys

from core_support import *  # noqa: F401,F403


@dl.workflow("round4-second-store")
def steps(ctx, n):
    return [ctx.step(f"s{i}", lambda i=i: i) for i in range(n)]


ANOTHER_PROCESS = """
import sys
import durable_lite as dl
from test_core_round4_second_store import steps
store = dl.SQLiteStore(sys.argv[1])
engine = dl.Engine(store, dl.FakeClock())
for i in range(40):
    engine.start(steps, 20, run_id=f"other-{i}")
store.close()
"""


def write_elsewhere(path):
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", ANOTHER_PROCESS, str(path)], check=True, env=env,
                   timeout=120)


def test_opening_a_second_store_keeps_the_first_ones_locks(tmp_path):
    path = tmp_path / "runs.db"
    first = dl.SQLiteStore(path)
    engine = dl.Engine(first, dl.FakeClock())
    engine.start(steps, 3, run_id="mine")
    second = dl.SQLiteStore(path)            # a reader beside the engine, in this process
    second.close()
    write_elsewhere(path)
    # The first store still holds its lock, so the other process left the log in place.
    assert (tmp_path / "runs.db-wal").exists()
    third = dl.SQLiteStore(path)             # was: StoreFileError "... is damaged ..."
    try:
        reader = dl.Engine(third, dl.FakeClock())
        assert reader.get("other-39").status == "completed"
        assert reader.get("mine").result == [0, 1, 2]
    finally:
        third.close()
    assert engine.get("other-0").result == list(range(20))
    first.close()


def test_a_file_sqlite_cannot_read_is_still_named_for_what_it_is(tmp_path):
    """The header is read only once SQLite has failed: a text file is 'not a SQLite
    database', a SQLite file with a broken page is 'damaged'."""
    text = tmp_path / "notes.db"
    text.write_text("my notes, not a database\n" * 200)
    with pytest.raises(dl.StoreFileError, match="is not a SQLite database"):
        dl.SQLiteStore(text)
    assert text.read_text().startswith("my notes")
