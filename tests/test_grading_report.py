"""`python -m durable_lite.grading report`: a class graded in parallel, each notebook in its
own sandbox, into a CSV, a summary and a chart — and one notebook that hangs, crashes its
kernel or tampers costs only itself."""

import csv
import site
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from durable_lite.grading import exercise
from durable_lite.grading.report import COLUMNS, find_notebooks, report

from grading_support import ROOT, check_outputs, learner

HANGS = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
         "while True:\n    time.sleep(0.1)")
FORGES = '''
import durable_lite.grading.checks as checks_module
checks_module.run_question = lambda *a, **k: None
def run_naive(folder, crash_at=None):
    raise NotImplementedError
'''


def rows_of(out):
    with open(out / "scores.csv", newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def test_a_class_report_with_a_hanging_a_crashing_and_a_forging_notebook(tmp_path):
    klass = tmp_path / "class"
    learner("01_naive_retry", klass / "ana", start="solutions")
    learner("01_naive_retry", klass / "ben")                                     # untouched
    learner("01_naive_retry", klass / "cy", start="solutions",
            cells={"def retry_from_top": HANGS})                                 # hangs in q3
    learner("01_naive_retry", klass / "dee", start="solutions",
            cells={"def predicted_refunds": "import os\nos._exit(1)"})           # kills its kernel
    learner("01_naive_retry", klass / "eve", cells={"def run_naive": FORGES})    # forges
    out = tmp_path / "report"
    # As an instructor runs it: the command, its progress bar on stderr, a summary last.
    ran = subprocess.run([sys.executable, "-m", "durable_lite.grading", "report", str(klass),
                          "--out", str(out), "--jobs", "2", "--timeout", "20", "--seed", "99"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr
    assert "grading" in ran.stderr
    last = ran.stdout.strip().splitlines()[-1]

    by = {(r["learner"], r["question"]): r for r in rows_of(out)}
    assert len(by) == 5 * 3
    assert [by[("ana", q)]["status"] for q in ("q1", "q2", "q3")] == ["passed"] * 3
    assert [by[("ben", q)]["score"] for q in ("q1", "q2", "q3")] == ["0", "0", "0"]
    assert [by[("cy", q)]["status"] for q in ("q1", "q2", "q3")] == ["passed", "passed", "not checked"]
    assert [by[("dee", q)]["status"] for q in ("q1", "q2", "q3")] == ["passed", "not checked", "not checked"]
    assert by[("eve", "q1")]["tampered"] == "True" and by[("eve", "q1")]["score"] == "0"
    assert "grading package" in by[("eve", "q1")]["review"]
    assert all(r["seed"] == "99" for r in by.values())
    assert "kernel died" in by[("dee", "q2")]["note"]

    summary = (out / "summary.md").read_text()
    table = [line for line in summary.splitlines() if line.startswith("| 01 ")]
    assert [line.split(" · ")[0] for line in table] == ["| 01 q3", "| 01 q2", "| 01 q1"]  # most failed first
    assert "| 01 q3 · a naive retry loop | 1/5 | 20% |" in summary
    assert "**tampered**: eve" in summary and "stopped early: cy" in summary
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "notebooks" / "ana" / "01_naive_retry.ipynb").exists()
    assert last.startswith("graded 5 notebooks from 5 learners") and "(2 at a time)" in last, last
    assert "1 tampered, 2 stopped early; cases seed 99" in last


@pytest.mark.alone
def test_a_notebook_that_changes_shared_files_beside_others_is_found_and_the_others_regraded(tmp_path):
    planted = Path(site.getsitepackages()[0]) / "durable_lite_report_forged.pth"
    # Written by a process the answer starts: the kernel's own watch would refuse the write
    # (test_grading_attacks), so this is the guard's to find.
    attack = f'''
def run_naive(folder, crash_at=None):
    raise NotImplementedError
import subprocess, sys
subprocess.run([sys.executable, "-c", "open(" + repr({str(planted)!r}) + ", 'w').write('import os')"],
               check=True)
'''
    klass = tmp_path / "class"
    learner("01_naive_retry", klass / "mallory", cells={"def run_naive": attack})
    learner("01_naive_retry", klass / "victor", start="solutions")
    try:
        result = report(klass, tmp_path / "report", jobs=2, timeout=60, seed=5, progress=False)
        assert not planted.exists()
        scores = {g.learner: g.score for g in result.graded}
        assert scores["mallory"].tampered and scores["mallory"].passed == 0
        assert not scores["victor"].tampered and scores["victor"].passed == sum(
            len(q.tests) for q in exercise("01_naive_retry").questions.values())
        assert any("durable_lite_report_forged.pth" in w for w in result.warnings)
    finally:
        if planted.exists():
            planted.unlink()


def test_learners_are_named_by_folder_or_by_file(tmp_path):
    learner("02_memoize", tmp_path / "nested" / "ana")
    learner("02_memoize", tmp_path, filename="bob-02_memoize.ipynb")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    learner("02_memoize", tmp_path / ".ipynb_checkpoints")
    found = {g.learner: g.shown for g in find_notebooks(tmp_path)}
    assert found == {"nested/ana": "nested/ana/02_memoize.ipynb", "bob": "bob-02_memoize.ipynb"}


# Exercises whose own tests grade such a notebook (an untouched question beside a wrong
# answer) and check of it what this class checks: not graded here a second time.
GRADED_ALONE = {"15_port_to_temporal_and_langgraph":
                "test_grading_15.py::test_a_notebook_with_q1_untouched_and_a_late_reply_taken_for_an_answer"}


def test_a_class_of_typical_wrong_answers_fails_each_where_it_names_its_mistake(tmp_path):
    """One plausible wrong answer per exercise (grading_support.WRONG), graded as a class:
    the question whose answer it replaces fails, and no check breaks on it. Each is handed
    in on the untouched exercise, its other questions not attempted (no check runs for
    them): test_grading_every_notebook.py grades every solution in full, and the class need
    not again. The untouched questions are also what an untouched exercise shows: each
    check cell names its question and says "not attempted yet", and none raises (so
    test_grading_every_notebook.py grades untouched only the exercises of one question)."""
    from durable_lite.grading import exercise

    from grading_support import WRONG

    names = sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb"))
    assert sorted(WRONG) == names                          # every exercise has one
    klass, expected = tmp_path / "class", {}
    for name in names:
        marker, source = WRONG[name]
        if not exercise(name).available()[0]:
            continue                                        # e.g. no DBOS on this Python
        if name in GRADED_ALONE:
            continue
        answer = marker.split()[1].split("(")[0]            # "def refund_card" -> refund_card
        # the answer's cell in the untouched exercise: its stub, or a port's `name = None`
        code = [c.source for c in nbformat.read(ROOT / "exercises" / f"{name}.ipynb",
                                                as_version=4).cells if c.cell_type == "code"]
        where = marker if any(marker in c for c in code) else f"{answer} = None"
        learner(name, klass / f"wrong-{name[:2]}", cells={where: source})
        [question] = [q.id for q in exercise(name).questions.values() if answer in q.answers]
        expected[(f"wrong-{name[:2]}", question)] = name
    result = report(klass, tmp_path / "report", jobs=2, seed=7, progress=False)

    rows = rows_of(tmp_path / "report")
    by = {(r["learner"], r["question"]): r for r in rows}
    for key, name in expected.items():
        assert by[key]["status"] == "failed", (name, by[key], [
            (g.score.note, g.score.report()) for g in result.graded if g.learner == key[0]])
    others = {r["status"] for key, r in by.items() if key not in expected}
    assert others == {"not attempted"}, others
    assert "check error" not in {r["status"] for r in rows}
    assert all(not g.score.note and not g.score.tampered for g in result.graded)
    for graded in result.graded:
        text, errors = check_outputs(graded.score)
        assert not errors and "Traceback" not in text, (graded.learner, errors)
        untouched = [q for q in graded.score.questions if q["status"] == "not attempted"]
        assert untouched or len(graded.score.questions) == 1, graded.learner
        for q in graded.score.questions:
            assert q["tests"] and all(t["message"] for t in q["tests"] if t["status"] != "passed"), q
            assert f"{q['question']} · {q['title']}" in text, (graded.learner, q["question"])
        assert text.count("not attempted yet") == len(untouched), graded.learner
