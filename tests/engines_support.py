"""Fixtures for the tests that run DBOS beside durable_lite (test_dbos_*, test_parity_*).

Test modules import them with `from engines_support import *`. DBOS, the Postgres wheel and
(on Python 3.12+) a SQLite new enough for DBOS are required: the engines extra is part of
the test install on every Python, so a test that finds one missing fails, naming it, and
never skips. A PostgreSQL server is started once for the whole session by the first test
that asks for `postgres_url`, in a temporary data directory, and stopped when the session
ends, also after failures.
"""

import os

import pytest

from durable_lite.engines.dbos import postgres, support as dbos_support
from durable_lite.engines.temporal import server as temporal_server

_shared = {"server": None, "users": 0}
_temporal = {"server": None, "users": 0}


@pytest.fixture(scope="session")
def postgres_url():
    """The URL of a real PostgreSQL server shared by every test of the session."""
    ok, why = postgres.available()
    if not ok:
        pytest.fail(why, pytrace=False)
    if _shared["server"] is None:
        _shared["server"] = postgres.TempPostgres("tests").start()
    _shared["users"] += 1
    try:
        yield _shared["server"].url
    finally:
        _shared["users"] -= 1
        if _shared["users"] == 0:
            _shared["server"].stop()
            _shared["server"] = None


@pytest.fixture(scope="session")
def temporal_address():
    """The address of a real Temporal dev server shared by every test of the session (each
    test uses task queues and workflow ids of its own). Stopped when the session ends."""
    ok, why = temporal_server.available()
    if not ok:
        pytest.fail(why, pytrace=False)
    if _temporal["server"] is None:
        _temporal["server"] = temporal_server.TempTemporal("tests").start()
    _temporal["users"] += 1
    try:
        yield _temporal["server"].address
    finally:
        _temporal["users"] -= 1
        if _temporal["users"] == 0:
            _temporal["server"].stop()
            _temporal["server"] = None


@pytest.fixture
def world(tmp_path):
    """A fresh simulated world folder."""
    return str(tmp_path / "world")


@pytest.fixture
def workdir(tmp_path):
    path = tmp_path / "work"
    path.mkdir()
    return str(path)


@pytest.fixture
def sqlite_url(tmp_path):
    """A DBOS system database of its own for this test (SQLite)."""
    usable, why = dbos_support.sqlite_usable()
    if not usable:
        pytest.fail(why, pytrace=False)
    return dbos_support.sqlite_url(tmp_path / "dbos.sqlite")


@pytest.fixture(autouse=True)
def no_dbos_left_behind():
    """Each test leaves no DBOS instance running in this process, whatever happened."""
    yield
    dbos_support.shutdown()


def pair(tmp_path, name):
    """(world folder, work folder) for one engine's side of a scenario."""
    work = tmp_path / name
    work.mkdir()
    return str(work / "world"), str(work)


__all__ = ["postgres_url", "temporal_address", "world", "workdir", "sqlite_url", "no_dbos_left_behind", "pair",
           "os", "pytest"]
