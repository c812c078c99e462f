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

def exercise(exercise_id: str):
    """The questions and tests of one exercise (a checks.Exercise)."""
    if exercise_id not in EXERCISES:
        known = ", ".join(sorted(EXERCISES))
        raise KeyError(f"no exercise {exercise_id!r}; the exercises are {known}")
    module = importlib.import_module(f".exercises.{EXERCISES[exercise_id]}", __name__)
    return module.EXERCISE


def checker(exercise_id: str):
    """The `check` function for one exercise notebook (a checks.Checker)."""
    from .checks import Checker             # the machinery only when a notebook asks
    return Checker(exercise(exercise_id))


__all__ = ["EXERCISES", "checker", "exercise"]
