"""The benchmark script runs end to end on tiny inputs and reports what it promises.

Only the shape of the report is checked, never a timing: speed depends on the machine.
DBOS is skipped with --no-dbos, so this needs nothing beyond the test extra. The script
SIGKILLs real child processes (to measure replay after a crash), hence the crash marker.
The committed reference run is read (not re-measured): it must hold every rung of the
ladder, so lesson 13 can plot it.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "step_overhead.py"
REFERENCE = ROOT / "benchmarks" / "reference_run.json"

WRITE_KEYS = {"plain", "write", "fsync", "sqlite_normal", "sqlite_full", "dl_memory",
              "dl_process", "dl_power"}
DBOS_KEYS = {"dbos_sqlite", "dbos_postgres"}
REPLAY_KEYS = {"sqlite_open", "dl_open", "sqlite_select", "sqlite_select_json", "dl_load",
               "dl_resume"}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "3", "5", "--repeats", "1",
         "--import-repeats", "1", "--trace-steps", "7", "--no-dbos", "--json", str(out / "result.json"),
         "--plot", str(out / "plot.png")],     # no --workdir: its own folder, on a disk
        capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads((out / "result.json").read_text()), out, proc.stderr


def test_json_has_every_system_for_every_n_with_positive_numbers(report):
    _, result, _, _ = report
    writes, replays = result["step_overhead"], result["replay"]
    assert {(r["key"], r["n"]) for r in writes} == {(k, n) for k in WRITE_KEYS for n in (3, 5)}
    assert {(r["key"], r["n"]) for r in replays} == {(k, n) for k in REPLAY_KEYS for n in (3, 5)}
    for r in writes:
        assert r["repeats"] == 1 and len(r["per_step_us"]) == 1
        assert r["median_us"] > 0 and r["min_us"] <= r["median_us"] <= r["max_us"]
        assert r["ratio"] > 0
    for r in replays:
        assert r["median_ms"] > 0 and r["ratio"] > 0
    assert result["import_durable_lite"]["median_ms"] > 0
    assert {(r["key"], r["n"]) for r in result["tracing"]} == {("history", 7), ("trace", 7)}
    assert all(r["median_ms"] > 0 for r in result["tracing"])


def test_dbos_is_reported_as_skipped_and_targets_are_evaluated(report):
    _, result, _, _ = report
    assert not any(r["key"].startswith("dbos") for r in result["step_overhead"] + result["replay"])
    assert "--no-dbos" in result["skipped"]["DBOS"]
    assert set(result["unavailable"]) == DBOS_KEYS
    names = [t["target"] for t in result["targets"]]
    assert any("bare sqlite3 per step" in n for n in names)
    assert any("replay load" in n for n in names)
    assert any("import durable_lite" in n for n in names)
    assert any("resume (replay)" in n for n in names)
    assert any(n.startswith("trace <= 5x history") for n in names)
    assert all(isinstance(t["met"], bool) for t in result["targets"])


def test_the_load_average_and_the_file_system_are_recorded(report):
    stdout, result, _, _ = report
    meta = result["meta"]
    assert len(meta["load_average"]) == 2 and meta["load_average_max"] >= 0
    # measured on a disk even where the temporary folder is in memory (this run's is, on
    # Linux); "" only where there is no mount table to read
    assert meta["file_system"] not in ("tmpfs", "ramfs")
    assert "held in memory" not in stdout


def test_a_run_on_a_file_system_in_memory_is_flagged_in_its_report():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import report as bench_report
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    result = json.loads(REFERENCE.read_text())
    assert "held in memory" not in bench_report.report(result)
    result["meta"]["file_system"] = "tmpfs"
    assert "held in memory: every fsync was free" in bench_report.report(result)


def test_table_is_printed_with_a_row_for_what_did_not_run(report):
    stdout, _, _, _ = report
    for text in ("Writing:", "Replay after a real crash", "write() of the checkpoint row",
                 "write() + fdatasync", "bare sqlite3 INSERT+COMMIT", "durable_lite SQLiteStore",
                 "durable_lite load_entries", "import durable_lite", "Targets",
                 "Reading a long run back", "engine.trace of the run",
                 "DBOS: skipped", "DBOS Transact, Postgres"):
        assert text in stdout
    postgres_rows = [line for line in stdout.splitlines() if line.startswith("DBOS Transact, Postgres")]
    assert len(postgres_rows) == 2 and all(" skipped " in line for line in postgres_rows)


def test_progress_is_shown_row_by_row_on_stderr(report):
    _, _, _, stderr = report
    lines = stderr.splitlines()
    assert any("writing, N=3: round 1/1 done" in line for line in lines)
    measured = [line for line in lines if "us/step" in line]
    assert len(measured) == 2 * len(WRITE_KEYS)              # every row, for both N
    assert any("replay, N=5" in line for line in lines)


def test_plot_is_saved_when_matplotlib_is_there(report):
    _, result, out, _ = report
    pytest.importorskip("matplotlib")
    assert (out / "plot.png").stat().st_size > 0


def test_the_reference_run_holds_every_rung_and_says_how_busy_the_machine_was():
    result = json.loads(REFERENCE.read_text())
    n = max(result["meta"]["steps"])
    measured = {r["key"] for r in result["step_overhead"] if r["n"] == n}
    assert WRITE_KEYS <= measured
    for key in DBOS_KEYS:                     # measured, or a reason why it could not be
        assert key in measured or result["unavailable"].get(key)
    assert len(result["meta"]["load_average"]) == 2 and "load_average_max" in result["meta"]


def test_show_prints_the_reference_run_without_measuring(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--show", str(REFERENCE), "--no-plot"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "Writing:" in proc.stdout and "DBOS Transact, Postgres" in proc.stdout
    assert proc.stderr == ""
