"""Rules for the whole suite: a lesson that runs a real engine is skipped, with its reason,
on a Python that cannot run one.

Lesson 14 runs DBOS on SQLite and on a PostgreSQL started from Python. Two of those can be
out of reach of a given Python: pgserver has no wheel for Python 3.13 yet, and DBOS on
SQLite needs SQLite 3.42 or newer on Python 3.12+ (a Python built against an older system
SQLite cannot use it). There nbval would fail on a missing package instead of checking the
lesson, so the lesson's cells are skipped and the summary says why, once. Which lessons
need an engine is read from the notebooks (they import `durable_lite.engines`), and whether
this Python can run them is asked of `durable_lite.engines` itself.
"""

import json
import re
from pathlib import Path

import pytest

SKIPPED = pytest.StashKey[str]()
ENGINE_LESSON = "it runs DBOS on SQLite and on Postgres"

# A code cell that uses the engines package: `from durable_lite.engines import ...`,
# `import durable_lite.engines`, or `dl.engines`.
USES_ENGINES = re.compile(r"\bdurable_lite\.engines\b|\bdl\.engines\b")


def engines_unavailable():
    """Why a lesson that runs DBOS on SQLite and on Postgres cannot run here, or None."""
    from durable_lite.engines import dbos_support, postgres
    try:
        dbos_support.require()
    except ImportError as exc:
        return str(exc)
    for usable, why in (dbos_support.sqlite_usable(), postgres.available()):
        if not usable:
            return why
    return None


def uses_engines(notebook: Path) -> bool:
    cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    return any(cell.get("cell_type") == "code"
               and USES_ENGINES.search("".join(cell.get("source", [])))
               for cell in cells)


def pytest_collection_modifyitems(config, items):
    needs = {}
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb" and path not in needs:
            needs[path] = uses_engines(path)
    if not any(needs.values()):
        return
    why = engines_unavailable()
    if why is None:
        return
    lessons = sorted(p.name for p, needed in needs.items() if needed)
    reason = f"{', '.join(lessons)} skipped ({ENGINE_LESSON}): {why}"
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if needs.get(Path(str(item.fspath))):
            item.add_marker(skip)
    config.stash[SKIPPED] = reason


def pytest_terminal_summary(terminalreporter, config):
    """Say why once, at the end, even without -rs. With several workers (make test) the
    skipping happens in the workers, so the reason is read off their skipped reports."""
    reasons = {config.stash[SKIPPED]} if SKIPPED in config.stash else set()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        if isinstance(longrepr, tuple) and ENGINE_LESSON in str(longrepr[2]):
            reasons.add(str(longrepr[2]).removeprefix("Skipped: "))
    for reason in sorted(reasons):
        terminalreporter.write_line(reason, yellow=True)
