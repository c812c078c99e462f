"""Exercise 16's right answers keep full marks: the grader's whole sweep of the solution's
answer kills it at more than 60 points of every kind (the solution notebook, graded by that
sweep, keeps every property at each of them: test_grading_every_notebook.py); right answers
written differently keep every property where a kill can tell them apart (right after an
effect, before its checkpoint), each such point played; a first self-check, without a
crash, takes seconds. (The wrong answers: test_grading_16.py;
self-check and grade agree: test_grading_16_agree.py. These files are apart so that
`make test` runs them side by side.)
"""

import os
import sqlite3
import time

import pytest

from durable_lite.grading.exercises import ex16_capstone as ex16

from capstone_answers import RIGHT, RIGHT_VARIANTS, run_cells, variant

AFTER_EFFECT = lambda step, when: when == "after_effect"         # noqa: E731


def test_the_sweep_of_the_solution_has_crash_points_of_every_kind():
    g = ex16.sweep(run_cells(RIGHT), seed=1, crash=False)      # the clean play: its points
    assert len(g.points) > 60
    assert {when for _, when in g.points} == {"before_step", "after_effect", "after_checkpoint"}
    assert not any(g.broken(p) for p in ex16.PROPERTIES), g.table()


@pytest.mark.parametrize("name", sorted(RIGHT_VARIANTS))
def test_right_answers_written_differently_keep_every_property(name):
    g = ex16.sweep(run_cells(variant(name), name=name.replace(" ", "-")), seed=2,
                   points=AFTER_EFFECT)
    assert len(g.cases) == sum(AFTER_EFFECT(*point) for point in g.points) > 10   # each played
    assert not any(g.broken(p) for p in ex16.PROPERTIES), g.table()


def test_a_draft_retried_with_the_default_backoff_keeps_the_approval_deadline(capsys):
    """A newcomer's right answer (`dl.Retry(max_attempts=3, jitter=False)` on the draft) once
    failed its self-check of "approval deadline": its backoff had moved the killed worker's
    clock a second past the phase's start, so the worker restarted 31 s after the phase began
    still found the run leased, and the run asked for its approval a phase late."""
    answers = run_cells(variant("the draft retried with the default backoff"), name="backoff")
    ex16.self_check("approval deadline", *answers, seed=2)
    printed = capsys.readouterr().out
    assert "✓ approval deadline (lesson 07) held at every one of" in printed, printed


def test_a_killed_worker_s_run_is_taken_up_again_in_the_same_phase_whatever_its_clock_read():
    """Killed in phase 2 after a draft's backoff of 45 s (more than the lease) had moved its
    clock on, the worker is started again after its lease has lapsed: the run it held goes
    on in phase 2, not 25 hours later."""
    from durable_lite.grading.cases import Draw
    from durable_lite.grading.harness import START, scratch
    answers = run_cells(variant("the draft retried after a long backoff"), name="long-backoff")
    sources, requests = ex16.sources_of(answers), ex16.requests_for(Draw(2))
    with scratch("ex16-restart") as root:
        clean = ex16.play(os.path.join(root, "clean"), sources, requests,
                          snapshots=os.path.join(root, "snapshots"))
        starts, points = clean["phase_starts"], clean["points"]
        kills = [i for i in range(starts[1] + 1, starts[2] + 1)
                 if points[i - 1] == ("plan", "before_step")]
        assert len(kills) >= 2, points         # tenant A's second request and B3
        for kill in kills:
            folder = os.path.join(root, f"case-{kill}")
            ex16.play(folder, sources, requests, kill_at=kill,
                      start=(1, clean["states"][1]))
            db = sqlite3.connect(os.path.join(folder, "runs.db"))
            try:
                taken_up = [at for at, in db.execute(
                    "SELECT at FROM events WHERE kind = 'interrupted'")]
            finally:
                db.close()
            next_phase = START + 2 * 3600          # phase 2 began an hour after START
            assert taken_up and max(taken_up) < next_phase, \
                (points[kill - 1], [(at - START) / 3600 for at in taken_up])


def test_a_first_self_check_without_a_crash_takes_seconds(capsys):
    started = time.monotonic()
    ex16.self_check("compensation", *run_cells(RIGHT), seed=3, crash=False)
    printed = capsys.readouterr().out
    # one play: said so, not "held at every one of 0 crash points"
    assert "✓ compensation (lesson 09) held with no crash (one play;" in printed, printed
    assert "crash points played; ✗ broke, · held)" in printed and "every one of 0" not in printed, printed
    assert time.monotonic() - started < 30
