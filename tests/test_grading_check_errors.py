"""A check that breaks is the grader's bug, not the learner's: its result says so.

Who raised is read from the traceback: an exception with a frame of the learner's code on it
(a notebook cell, a module of theirs) came from their answer; one with frames of the
grader, the library and Python only is the check's own. The checks below are compiled as
if they lived in the grader's exercises folder, which is where real checks live.
"""

import os
from pathlib import Path

import pytest

import durable_lite as dl
from durable_lite.grading import checks
from durable_lite.grading.checks import CHECK_ERROR, FAILED, raised_by_learner, run_question
from durable_lite.grading.grader import NotebookScore, Outcome, _score
from durable_lite.grading.report import ClassReport, Graded, summary_markdown

GRADER_FILE = os.path.join(os.path.dirname(checks.__file__), "exercises", "ex_broken_example.py")

CHECKS = '''
import json

import durable_lite as dl
from durable_lite.grading.checks import Exercise

EXERCISE = Exercise("99_broken", "A grader with a bug", lesson="none")
q1 = EXERCISE.question("q1", "double it", answers=["double"])


@q1.test("the check's own bookkeeping breaks")
def _(double):
    double(2)
    return json.loads("{not json")              # the grader's bug


@q1.test("the answer raises")
def _(double):
    double(-1)


@q1.test("the answer passes")
def _(double):
    assert double(3) == 6


@q1.test("the answer's workflow diverges after it returned")
def _(double):
    store = dl.MemoryStore()
    crash = dl.faults.CrashAt("s1", "after_checkpoint")
    try:
        dl.Engine(store, dl.FakeClock(), crash_at=crash).start(double.workflow, run_id="r")
    except dl.Crash:
        pass
    double.plan["steps"] = 1                # the learner's code now stops after one step
    dl.Engine(store, dl.FakeClock()).resume("r")


@q1.test("the library wraps what the answer raised")
def _(double):
    try:
        double(-1)
    except ValueError as exc:
        raise RuntimeError("the sweep could not finish") from exc
'''


def grader_module():
    namespace = {"__name__": "durable_lite.grading.exercises.ex_broken_example"}
    exec(compile(CHECKS, GRADER_FILE, "exec"), namespace)
    return namespace["EXERCISE"]


PLAN = {}


@dl.workflow("test-check-errors-steps")
def steps(ctx):
    for i in range(PLAN["steps"]):
        ctx.step(f"s{i}", lambda: i)
    return "done"


def double(n):
    if n < 0:
        raise ValueError("negative numbers are not doubled")
    return 2 * n


double.workflow, double.plan = steps, PLAN


@pytest.fixture(autouse=True)
def two_steps():
    PLAN["steps"] = 2


def test_a_check_that_breaks_says_it_is_the_graders_bug_and_not_the_answers():
    result = run_question(grader_module(), "q1", (double,), seed=1)
    by_name = {t.name: t for t in result.tests}

    broken = by_name["the check's own bookkeeping breaks"]
    assert broken.status == CHECK_ERROR
    assert broken.message.startswith("the check itself failed (in durable_lite/grading/"
                                     "exercises/ex_broken_example.py, line 14): JSONDecodeError")
    assert "your code" not in broken.message and "tell your instructor" in broken.hint

    assert by_name["the answer raises"].status == FAILED
    assert by_name["the answer raises"].message.startswith(
        "your code raised ValueError: negative numbers are not doubled")
    assert by_name["the answer passes"].status == "passed"
    assert by_name["the answer's workflow diverges after it returned"].status == FAILED
    assert "your code raised NonDeterminismError" in \
        by_name["the answer's workflow diverges after it returned"].message
    assert by_name["the library wraps what the answer raised"].status == FAILED

    assert result.status == CHECK_ERROR and result.passed == 1
    text = result.report()
    assert "1/5 — the check itself broke: not your answer's fault" in text
    assert "  ! the check's own bookkeeping breaks" in text and "seed=1" in text
    assert "the check itself broke" in result.html()


def test_the_grader_and_the_class_report_point_at_the_broken_check(monkeypatch):
    exercise = grader_module()
    payload = run_question(exercise, "q1", (double,), seed=1).to_json()
    monkeypatch.setattr("durable_lite.grading.grader.exercise", lambda _: exercise)
    [question] = _score("99_broken", {"q1": Outcome(payload, None, 1.0)}, None, {})
    assert question["status"] == CHECK_ERROR and question["passed"] == 1
    assert question["note"].startswith("the check itself failed on \"the check's own "
                                       "bookkeeping breaks\": the check itself failed (in ")
    score = NotebookScore("ana/99_broken.ipynb", "99_broken", seed=1, questions=[question])
    assert "q1  double it" in score.report() and "check error" in score.report()
    report = ClassReport([Graded("ana", Path("ana/99_broken.ipynb"), score=score)], 1, 1.0, 1,
                         Path("report"))
    assert report.questions()[0]["most_failed"] == "(check error)"
    assert ("- **the grader broke** on ana, 99_broken.ipynb, q1: the check itself failed on"
            in summary_markdown(report))


@pytest.mark.parametrize("filename, learners", [
    ("/tmp/ipykernel_4242/2841750113.py", True),         # a notebook cell in Jupyter
    ("<ipython-input-3-5f1e2b>", True),                  # ... in older IPython
    ("<notebook cell>", True),
    (os.path.join(os.getcwd(), "my_work", "helpers.py"), True),
    (GRADER_FILE, False),
    (os.path.join(os.path.dirname(os.__file__), "json", "decoder.py"), False),
    ("<frozen importlib._bootstrap>", False),
    ("<string>", False),                                 # e.g. a dataclass's generated __init__
])
def test_who_raised_is_read_from_the_frames_on_the_traceback(filename, learners):
    code = compile("def boom():\n    raise KeyError('x')\n", filename, "exec")
    namespace = {}
    exec(code, namespace)
    with pytest.raises(KeyError) as caught:
        namespace["boom"]()
    frames_of_this_test = caught.value.__traceback__.tb_next      # skip this file's own frame
    exc = caught.value.with_traceback(frames_of_this_test)
    assert raised_by_learner(exc) is learners
