"""Fixtures and small helpers shared by the core tests (test_core_*, test_crash_*,
test_longlived_*). Test modules import them with `from core_support import *`.

Everything runs on a FakeClock and SequentialIds unless a test needs real time, and every
test gets its own store file and world folder under pytest's tmp_path.
"""

import os
import sys

import pytest

import durable_lite as dl
from durable_lite.store.records import STEP

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def clock():
    return dl.FakeClock()


@pytest.fixture
def folder(tmp_path):
    """A world folder: the simulated bank, mailer and desk keep their ledgers here."""
    return str(tmp_path / "world")


@pytest.fixture
def store_path(tmp_path):
    return str(tmp_path / "runs.db")


@pytest.fixture
def stores():
    """Open SQLite stores through `stores(path)`; all are closed after the test."""
    opened = []

    def open_store(path, **options):
        store = dl.SQLiteStore(path, **options)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


@pytest.fixture
def engine(store_path, stores, clock):
    return dl.Engine(stores(store_path), clock, ids=dl.SequentialIds("id"), seed=7)


@pytest.fixture
def fresh(store_path, stores, clock):
    """A fresh Engine on a fresh store object for the same file: nothing in memory."""
    def make(**options):
        return dl.Engine(stores(store_path), clock, ids=dl.SequentialIds("fresh"), **options)
    return make


@pytest.fixture(params=["memory", "sqlite"])
def any_store(request, store_path, stores):
    """Each test that uses it runs twice: the two stores must behave the same."""
    return dl.MemoryStore() if request.param == "memory" else stores(store_path)


@pytest.fixture
def eng(any_store, clock):
    """An engine on `any_store`."""
    return dl.Engine(any_store, clock, ids=dl.SequentialIds("id"), seed=3)


def again(engine, **options):
    """A second engine on the same store: another worker, or the same code after a restart."""
    return dl.Engine(engine.store, engine.clock, ids=dl.SequentialIds("again"), **options)


class Calls:
    """Counts calls to step functions by name (a stand-in for an outside effect)."""

    def __init__(self):
        self.counts = {}

    def __call__(self, name, value=None):
        self.counts[name] = self.counts.get(name, 0) + 1
        return value if value is not None else f"{name}-done"

    def __getitem__(self, name):
        return self.counts.get(name, 0)

    @property
    def total(self):
        return sum(self.counts.values())


def step_entries(store, run_id, name=None):
    return [e for e in store.load_entries(run_id)
            if e.kind == STEP and (name is None or e.name == name)]


def count_writes(store):
    """Make this store object count the checkpoints it commits, in `store.writes`."""
    record_entry = store.record_entry
    store.writes = []

    def counted(run_id, entry):
        record_entry(run_id, entry)
        store.writes.append((run_id, entry.label))

    store.record_entry = counted
    return store


def python_path():
    """What a child process needs on sys.path to import this package and these helpers."""
    return [TESTS_DIR, os.path.dirname(TESTS_DIR)]


__all__ = ["clock", "folder", "store_path", "stores", "engine", "fresh", "any_store", "eng", "again",
           "Calls", "step_entries", "count_writes", "python_path", "TESTS_DIR", "dl", "pytest", "sys", "os"]


def open_and_say(path) -> str:
    """Open and close a store at `path`: "opened", or "<error type>: <message>"."""
    try:
        dl.SQLiteStore(path).close()
        return "opened"
    except Exception as exc:                      # noqa: BLE001 - reported to the test
        return f"{type(exc).__name__}: {exc}"


def open_as_nobody(path, answer) -> None:
    """In a child process run as root: become the user `nobody`, then open_and_say(path)
    into the pipe `answer` (test_core_store.open_as_another_user)."""
    os.setgid(65534)
    os.setuid(65534)
    answer.send(open_and_say(path))
