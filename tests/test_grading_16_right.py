"""Exercise 16's right answers keep full marks: the solution's answer keeps every property at
every crash point of the grader's whole sweep; right answers written differently keep every
property where a kill can tell them apart (right after an effect, before its checkpoint); a
self-check of one property takes seconds. (The wrong answers: test_grading_16.py. This file
is apart so that `make test` runs the two side by side.)
"""

import time

import pytest

from durable_lite.grading.exercises import ex16_capstone as ex16

from capstone_answers import RIGHT, replace, run_cells

AFTER_EFFECT = lambda step, when: when == "after_effect"         # noqa: E731


@pytest.fixture(scope="module")
def solution_graded():
    return ex16.sweep(run_cells(RIGHT), seed=1)


def test_the_solution_keeps_every_property_at_every_crash_point(solution_graded):
    g = solution_graded
    assert len(g.cases) == len(g.points) > 60
    assert not any(g.broken(p) for p in ex16.PROPERTIES), g.table()
    assert {when for _, when in g.points} == {"before_step", "after_effect", "after_checkpoint"}


RIGHT_VARIANTS = {
    # keys made another way, the budget in a helper, the queue's tenant limit with a concurrency
    "other keys and names": [
        ('idempotency_key=ctx.idempotency_key("email", rid)',
         'idempotency_key=ctx.idempotency_key("report-mail", request["tenant"], rid)'),
        ('dl.Queue("research", per_key=1)', 'dl.Queue("research", concurrency=4, per_key=1)'),
        ('run_id=f"research-{request[\'id\']}"', 'run_id="agent/" + request["id"]'),
    ],
    # the wait answered by a falsy check written out, the sources from the plan's recorded calls
    "written out": [
        ('''        if not answer:
            return''', '''        if answer is None or answer is False:
            return'''),
        ('sources = facts["sources"] if with_sources else None',
         'sources = None\n        if with_sources:\n            sources = list(facts["sources"])'),
    ],
}


@pytest.mark.parametrize("variant", sorted(RIGHT_VARIANTS))
def test_right_answers_written_differently_keep_every_property(variant):
    cells = RIGHT
    for old, new in RIGHT_VARIANTS[variant]:
        cells = replace(cells, old, new)
    g = ex16.sweep(run_cells(cells, name=variant.replace(" ", "-")), seed=2, points=AFTER_EFFECT)
    assert not any(g.broken(p) for p in ex16.PROPERTIES), g.table()


def test_a_self_check_of_one_property_takes_seconds():
    started = time.monotonic()
    g = ex16.sweep(run_cells(RIGHT), seed=3, only="compensation")
    assert not g.broken("compensation") and g.cases
    assert time.monotonic() - started < 60
