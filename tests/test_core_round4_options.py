"""Numeric options are checked when they are given, as max_interruptions is: a lease of no
time, or a store that waits for ever, is refused with the option named, before any run
could be executed twice or a worker hang.
"""

import math

from core_support import *  # noqa: F401,F403

BAD_SECONDS = [0, 0.0, -1, -0.5, math.inf, math.nan, True, "30", None, [30]]


@pytest.mark.parametrize("lease", BAD_SECONDS, ids=repr)
def test_an_engine_refuses_a_lease_that_is_not_a_positive_finite_number_of_seconds(lease):
    with pytest.raises(ValueError, match="lease_seconds") as err:
        dl.Engine(dl.MemoryStore(), dl.FakeClock(), lease_seconds=lease)
    assert repr(lease) in str(err.value)


@pytest.mark.parametrize("lease", [0.6, 30, 1e-3])
def test_a_positive_lease_is_taken(lease):
    assert dl.Engine(dl.MemoryStore(), dl.FakeClock(), lease_seconds=lease).lease_seconds == lease


@pytest.mark.parametrize("timeout", [-1, -0.001, math.inf, math.nan, True, "30", None],
                         ids=repr)
def test_a_sqlite_store_refuses_a_timeout_that_is_not_a_finite_number_of_seconds(tmp_path, timeout):
    path = str(tmp_path / "runs.db")
    with pytest.raises(ValueError, match="timeout") as err:
        dl.SQLiteStore(path, timeout=timeout)
    assert repr(timeout) in str(err.value)
    assert not os.path.exists(path)              # refused before the file is made


@pytest.mark.parametrize("timeout", [0, 0.5, 30])
def test_a_sqlite_store_takes_a_timeout_of_zero_or_more(tmp_path, stores, timeout):
    assert stores(str(tmp_path / "runs.db"), timeout=timeout).path.endswith("runs.db")
