"""Exercise 16's self-check and its grade cannot disagree: `self_check(prop, ..., seed=N)`
plays the grade's own sweep with seed N (the seed a failed check names), stopped at the first
case that breaks `prop`, and its verdict and first failure are that property's in the grade.
The grade here is the check itself (`check("q1", ...)`'s code path).

Where a property holds, the stop never comes and the self-check is the grade's sweep
itself: the solution notebook, graded by it, scores full marks in
test_grading_every_notebook.py, and test_grading_16_right.py self-checks a right answer (a retried draft) that once failed there. What can
tell the two apart is a stop, so the pairs here are broken ones: one broken with no crash,
one only after a crash. Each costs a whole sweep (the grade's), so there are two.
"""

import pytest

from durable_lite.grading import checks
from durable_lite.grading.cases import Draw, derive_seed
from durable_lite.grading.exercises import ex16_capstone as ex16

from capstone_answers import RIGHT, replace, run_cells

CHECK_SEED = 16

ANSWERS = {
    "a queue with no per-tenant limit":
        replace(RIGHT, 'dl.Queue("research", per_key=1)', 'dl.Queue("research")'),
    "the report email has no key": replace(
        RIGHT, '''ctx.step("email", email_report, folder, request, report_id,
             idempotency_key=ctx.idempotency_key("email", rid))''',
        '''ctx.step("email", email_report, folder, request, report_id)'''),
}
# (answer, property): broken with no crash, broken only after a crash
PAIRS = [
    ("a queue with no per-tenant limit", "per-tenant limit"),
    ("the report email has no key", "exactly once"),
]
_GRADES = {}


def answers_of(name):
    return run_cells(ANSWERS[name], name=name.replace(" ", "-"))


def grade(name):
    """{property: TestResult} of the check on answer `name`, and the seed of its sweep."""
    if name not in _GRADES:
        result = checks.run_question(ex16.EXERCISE, "q1", answers_of(name), seed=CHECK_SEED,
                                     time_limit=ex16.EXERCISE.test_time_limit)
        by_prop = dict(zip(ex16.PROPERTIES, result.tests))
        # the first property's test sweeps, with the first number its cases draw
        first = ex16.q1.tests[0].name
        seed = Draw(derive_seed(CHECK_SEED, ex16.EXERCISE.id, "q1", first)).randrange(2 ** 31)
        _GRADES[name] = by_prop, seed
    return _GRADES[name]


@pytest.mark.parametrize("name,prop", PAIRS)
def test_self_check_gives_the_grade_s_verdict_on_the_property(name, prop, capsys):
    by_prop, seed = grade(name)
    graded = by_prop[prop]
    assert graded.status in (checks.PASSED, checks.FAILED), graded
    if graded.status == checks.FAILED:
        assert f"seed={seed})" in graded.hint, graded.hint     # the seed the check names
    capsys.readouterr()
    ex16.self_check(prop, *answers_of(name), seed=seed)
    printed = capsys.readouterr().out
    held = f"✓ {prop} ({ex16.lessons_of(prop)}) held" in printed
    broke = f"✗ {prop} ({ex16.lessons_of(prop)}) broke " in printed
    assert held != broke, printed
    assert held == (graded.status == checks.PASSED), (graded, printed)
    if broke:           # the same first failure: the same case, the same words
        said = checks.sanitize(printed.split(" broke ", 1)[1].split("\n  (seed=")[0])
        assert said == graded.message.split("\n")[0], (said, graded.message)


def test_the_pairs_cover_a_property_broken_with_and_without_a_crash():
    verdicts = {pair: grade(pair[0])[0][pair[1]] for pair in PAIRS}
    assert all(t.status == checks.FAILED for t in verdicts.values()), verdicts
    broken = [t.message for t in verdicts.values()]
    assert any(m.startswith("with no crash") for m in broken) \
        and any(m.startswith("after a crash") for m in broken), verdicts
