"""Graded exercises: feedback inside the notebook, and a grader for instructors.

In an exercise notebook:

    from durable_lite.grading import checker
    check = checker("02_memoize")
    ...
    check("q1", memo_step, open_memo)      # runs every test of q1 and prints each result

From a shell:

    python -m durable_lite.grading generate                 # solutions/ -> exercises/
    python -m durable_lite.grading exercises/02_memoize.ipynb [more.ipynb ...] [--json]

Each exercise's tests live in their own module (ex01_naive_retry.py, ...), found by name and
loaded only when a notebook asks for them.
"""

import importlib
import pkgutil
import re

from .checks import Checker, Exercise, Fail, NotAttempted, QuestionResult, run_question


def _discover():
    """exercise id (the notebook's name, "02_memoize") -> module with its tests ("ex02_memoize").

    Found by file name, without importing anything: adding `exNN_name.py` (defining
    EXERCISE) and `solutions/NN_name.ipynb` is all a new exercise needs.
    """
    return {m.name[2:]: m.name for m in pkgutil.iter_modules(__path__)
            if re.fullmatch(r"ex\d\d_\w+", m.name)}


EXERCISES = _discover()

_current = None


def exercise(exercise_id: str) -> Exercise:
    """The questions and tests of one exercise."""
    if exercise_id not in EXERCISES:
        known = ", ".join(sorted(EXERCISES))
        raise KeyError(f"no exercise {exercise_id!r}; the exercises are {known}")
    module = importlib.import_module(f".{EXERCISES[exercise_id]}", __name__)
    return module.EXERCISE


def checker(exercise_id: str) -> Checker:
    """The `check` function for one exercise notebook."""
    global _current
    _current = Checker(exercise(exercise_id))
    return _current


def check(question: str, *answers) -> None:
    """Check an answer of the exercise most recently opened with `checker(...)`."""
    if _current is None:
        print('Run `check = checker("NN_name")` (the first code cell of the exercise) first.')
        return None
    return _current(question, *answers)


__all__ = ["EXERCISES", "Checker", "Exercise", "Fail", "NotAttempted", "QuestionResult", "check",
           "checker", "exercise", "run_question"]
