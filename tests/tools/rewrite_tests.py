"""The test modules as pytest runs them (their asserts rewritten), compiled once, ahead.

    python tests/tools/rewrite_tests.py

Pytest rewrites every test module's asserts when it imports it, and keeps the result beside
the module (`__pycache__/<name>.<python>-pytest-<version>.pyc`) unless
PYTHONDONTWRITEBYTECODE is set. `make test` runs four workers that each import every test
module while they collect: in a fresh clone, or wherever that variable is set, each of
them rewrote all of them again, about 5 s of CPU apiece. `make bytecode` runs this first,
two processes at a time; what is up to date is left alone.

The caches are pytest's own (its rewriter, its file format): checked against a hash of
their source whenever pytest loads one, so a stale cache is rewritten, never run.
"""

import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from _pytest.assertion import rewrite

TESTS = Path(__file__).resolve().parents[1]


class _Quiet:
    """What pytest's writer reports to: nothing, here (a cache it cannot write is skipped,
    and pytest rewrites that module itself)."""

    def trace(self, *message):
        pass


def test_modules():
    """The modules pytest rewrites when it collects: test files and conftest.py files."""
    return sorted(path for path in TESTS.rglob("*.py")
                  if path.name.startswith("test_") or path.name == "conftest.py")


def cache_of(module: Path) -> Path:
    return rewrite.get_cache_dir(module) / (module.name[:-3] + rewrite.PYC_TAIL)


def write_cache(module: Path) -> bool:
    """Rewrite the module and write pytest's cache of it, unless that is up to date."""
    pyc = cache_of(module)
    if rewrite._read_pyc(module, pyc) is not None:
        return False
    source_hash, code = rewrite._rewrite_test(module, None)
    pyc.parent.mkdir(exist_ok=True)
    return rewrite._write_pyc(_Quiet(), code, source_hash, pyc)


def main() -> int:
    modules = test_modules()
    stale = [m for m in modules if rewrite._read_pyc(m, cache_of(m)) is None]
    if len(stale) < 8:
        written = [write_cache(m) for m in stale]
    else:
        with ProcessPoolExecutor(max_workers=2) as pool:
            written = list(pool.map(write_cache, stale, chunksize=4))
    if sum(written) < len(stale):
        print(f"rewrite_tests: {len(stale) - sum(written)} cache(s) not written "
              "(pytest will rewrite those modules itself)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
