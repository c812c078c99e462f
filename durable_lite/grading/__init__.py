"""Graded exercises: feedback inside the notebook, and a grader an instructor can trust.

In an exercise notebook:

    from durable_lite.grading import checker
    check = checker("02_memoize")
    ...
    check("q1", memo_step, open_memo)      # runs every test of q1, on fresh cases, and
                                           # prints each result

From a shell:

    python -m durable_lite.grading generate                     # solutions/ -> exercises/
    python -m durable_lite.grading my_work/02_memoize.ipynb     # grade notebooks, one table each
    python -m durable_lite.grading report class/ --out report/  # a class: CSV, summary, chart

The machinery, one idea per module:

    checks.py     questions, tests and their results; `check(...)` in a notebook
    progress.py   each check a learner runs, noted for a workshop server's class view
    cases.py      fresh cases: the seeded `draw` a test receives
    ledgers.py    judge an answer by what the simulated world recorded
    harness.py    what exercise checks share: scratch folders, crash-and-resume, the sweep
    child.py, portable.py   run a learner's function in a fresh Python process
    wall_clock.py           ... one whose wall clock reads later (a resume the next day)
    generate.py   write exercises/ from solutions/ (answer regions become stubs)
    assemble.py   the notebook the grader runs: its own cells, the learner's answers
    protocol.py   the grader's cells inside the kernel, and the signed results they return
    watch.py      the audit hook in the kernel: keeps the key, refuses and reports attacks
    isolation.py, reaper.py   a private home, config and processes per notebook
    guard.py      what Python imports, checked and put back after every notebook
    grader.py     grade one notebook; report.py: grade a class

The checks of each exercise live apart, in `exercises/` (ex01_naive_retry.py, ...), found by
name and loaded only when a notebook asks for them. README.md in this folder is the guide
for writing a new one.
"""

import importlib

from .exercises import discover

EXERCISES = discover()

# The checks' machinery is imported when first used, not with the package: the grader's
# small processes (a fresh answer process, the reaper, a kernel's launcher) import modules
# of this package by the thousand in a class's grading, and most never need it.
_FROM_CHECKS = ("Checker", "Exercise", "Fail", "NotAttempted", "QuestionResult", "run_question")


def __getattr__(name):
    if name in _FROM_CHECKS:
        from . import checks
        return getattr(checks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

_current = None


def exercise(exercise_id: str):
    """The questions and tests of one exercise (a checks.Exercise)."""
    if exercise_id not in EXERCISES:
        known = ", ".join(sorted(EXERCISES))
        raise KeyError(f"no exercise {exercise_id!r}; the exercises are {known}")
    module = importlib.import_module(f".exercises.{EXERCISES[exercise_id]}", __name__)
    return module.EXERCISE


def checker(exercise_id: str):
    """The `check` function for one exercise notebook (a checks.Checker)."""
    from .checks import Checker
    global _current
    _current = Checker(exercise(exercise_id))
    return _current


def check(question: str, *answers, seed=None) -> None:
    """Check an answer of the exercise most recently opened with `checker(...)`."""
    if _current is None:
        print('Run `check = checker("NN_name")` (the first code cell of the exercise) first.')
        return None
    return _current(question, *answers, seed=seed)


__all__ = ["EXERCISES", "Checker", "Exercise", "Fail", "NotAttempted", "QuestionResult", "check",
           "checker", "exercise", "run_question"]
