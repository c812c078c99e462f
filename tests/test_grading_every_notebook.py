"""Every solution scores full marks and an untouched exercise scores zero, graded exactly
as an instructor grades them. A file of its own: at about four minutes of grading it is
the suite's longest stretch, and beside the rest of test_grading.py it kept one worker busy
after the others had finished.
"""

import pytest

from durable_lite.grading import exercise
from durable_lite.grading.grader import grade_notebook

from grading_support import ROOT, check_outputs, needs_exercise, report_with_failures, statuses

NAMES = sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb"))
# Questions whose exercise starts from code to fix, not from stubs: untouched, they are failed.
STARTS_FROM_CODE = {"04_determinism": {"q1"}, "05_model_step": {"q1"}}


# solutions and untouched exercises ------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_every_solution_scores_full_marks(name):
    needs_exercise(name)
    score = grade_notebook(ROOT / "solutions" / f"{name}.ipynb")
    assert score.note is None and score.notes == [] and not score.tampered, score.report()
    assert score.total == sum(len(q.tests) for q in exercise(name).questions.values())
    assert score.passed == score.total, report_with_failures(score)
    assert set(statuses(score).values()) == {"passed"}
    assert all(q["flags"] == [] for q in score.questions)


# Untouched questions of the other exercises are graded by test_grading_report.py's class of
# typical wrong answers: each of its notebooks is an untouched exercise with one answer
# changed, and every other question must show there what it shows here.
ONE_QUESTION = [name for name in NAMES if len(exercise(name).questions) == 1]


@pytest.mark.parametrize("name", ONE_QUESTION)
def test_every_untouched_exercise_scores_zero_with_a_message_per_question(name):
    needs_exercise(name)
    score = grade_notebook(ROOT / "exercises" / f"{name}.ipynb")
    assert score.note is None and score.notes == [] and not score.tampered, score.report()
    assert score.passed == 0 and score.total > 0, score.report()
    text, errors = check_outputs(score)
    assert not errors, f"check cells raised: {errors}"
    assert "Traceback" not in text
    for q in score.questions:
        assert q["status"] in ("not attempted", "failed"), score.report()
        assert q["tests"], f"{q['question']} was never checked"
        assert all(t["message"] for t in q["tests"]), q
        assert f"{q['question']} · {q['title']}" in text
    stubs = [q for q in score.questions if q["question"] not in STARTS_FROM_CODE.get(name, ())]
    assert all(q["status"] == "not attempted" for q in stubs), score.report()
    assert text.count("not attempted yet") == len(stubs)
