"""`make hub`, the workshop server, run for real on 127.0.0.1 (Linux).

One hub for the module: two learners sign in with the class code and get their own copy of
the course; the lessons are read-only, their my_work/ is theirs, and neither reaches the
other's server or the instructor's class view. The instructor's grade button grades
everyone's work with the trusted grader, into the files `make report` writes. Then the hub
is stopped (nothing it started is left) and started again on the same folder: the codes,
the learners and their work are still there. Last, its launcher is SIGKILLed, and still
nothing outlives it.

Every learner's server runs as this user (--one-user, see tests/hub_support.py): the tests
run as root on CI, and must not leave system users and home folders behind. The browser
half (two learners, one passing and one failing, seen in the class view) is
tests/browser/test_hub_in_browser.py. The class view's model and the check's record are
tested here without a hub.
"""

import asyncio
import csv
import json
import os
import re
import signal
import sys

import pytest

from durable_lite.grading import progress
from durable_lite.grading.checks import QuestionResult
from durable_lite.grading.checks import TestResult as Outcome
from durable_lite.hub.classview import FAILING, NOT_ATTEMPTED, PASSED, ClassView
from durable_lite.hub.state import HubState
from durable_lite.lab.workspace import originals
from hub_notebooks import EXERCISE, QUESTION, write_answer
from hub_support import ROOT, Kernel, Learner, running_hub, wait_for

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="make hub is for Linux")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with running_hub(tmp_path_factory.mktemp("hub")) as running:
        yield running


@pytest.fixture(scope="module")
def learners(hub):
    signed_in = {name: Learner(hub, name) for name in ("ana", "bob")}
    for learner in signed_in.values():
        assert learner.sign_in().endswith(f"/hub/spawn-pending/{learner.name}")
    for learner in signed_in.values():
        learner.spawn_seconds = learner.wait_for_server()
    return signed_in


@linux
def test_each_learner_gets_their_own_copy_of_the_course(hub, learners):
    state = HubState(ROOT, hub.hub_folder)
    assert state.learners() == ["ana", "bob"]
    wanted = sorted(p.name for p in originals(ROOT))
    for name, learner in learners.items():
        assert sorted(p.name for p in state.my_work(name).glob("*.ipynb")) == wanted
        assert (state.learner(name) / "notebooks").resolve() == ROOT / "notebooks"
        # the lessons are read-only; their own folder is theirs
        code, why = learner.api("PUT", "contents/notebooks/00_welcome.ipynb",
                                {"type": "file", "format": "text", "content": "mine"})
        assert code == 403 and "read-only" in why
        code, _ = learner.api("PUT", "contents/my_work/notes.txt",
                              {"type": "file", "format": "text", "content": name})
        assert code in (200, 201)
        assert (state.my_work(name) / "notes.txt").read_text() == name
    # a learner reaches neither another's server nor the class view
    assert learners["ana"].reaches("/user/bob/api/status") == 403
    assert learners["ana"].reaches("/services/class/") == 403


@linux
def test_the_instructor_lands_in_the_class_view_and_grades_everyone(hub, learners):
    state = HubState(ROOT, hub.hub_folder)
    write_answer(state.my_work("ana"), right=True)
    write_answer(state.my_work("bob"), right=False)
    instructor = Learner(hub, "instructor", hub.instructor_code)
    assert instructor.sign_in().endswith("/services/class/")
    assert Learner(hub, "instructor", hub.class_code).sign_in() == "refused"

    page = instructor.get("/services/class/")
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page).group(1)
    instructor.opener.open(f"{hub.base}/services/class/grade",
                           data=f"_xsrf={xsrf}".encode(), timeout=60)
    view = wait_for(lambda: _finished(instructor.get("/services/class/view")),
                    "the class to be graded")
    assert "exit code 0" in view
    report = hub.grading_folder / "report"
    rows = list(csv.DictReader((report / "scores.csv").open(encoding="utf-8")))
    status = {(r["learner"], r["question"]): r["status"] for r in rows if r["exercise"] == EXERCISE}
    assert status[("ana", QUESTION)] == "passed"
    assert status[("bob", QUESTION)] == "failed"
    # only the notebooks a learner changed were graded, and the summary is make report's
    assert {r["notebook"] for r in rows} == {f"ana/{EXERCISE}.ipynb", f"bob/{EXERCISE}.ipynb"}
    assert (report / "summary.md").exists() and (report / "summary.png").exists()


def _finished(view: str):
    return view if "finished (exit code" in view else None


@linux
def test_a_restart_keeps_the_class_and_nothing_outlives_the_hub(hub, learners):
    state = HubState(ROOT, hub.hub_folder)
    code, instructor_code = hub.class_code, hub.instructor_code
    hub.stop()                                          # as Ctrl-C or make ending would
    assert not hub.left()
    hub.start()
    assert (hub.class_code, hub.instructor_code) == (code, instructor_code)
    ana = Learner(hub, "ana")
    ana.sign_in()
    ana.wait_for_server()
    assert f"{EXERCISE}.ipynb" in json.dumps(ana.api("GET", "contents/my_work")[1])
    assert "return 1" not in (state.my_work("ana") / f"{EXERCISE}.ipynb").read_text()
    assert (state.my_work("bob") / "notes.txt").read_text() == "bob"
    # a kernel that made a scratch folder, as every lesson does, deletes it as the hub stops
    folder = asyncio.run(_scratch_folder_in_a_kernel(ana))
    assert os.path.isdir(folder)
    hub.note_processes()
    hub.stop(signal.SIGKILL)            # the launcher killed outright: its hub gets SIGTERM
    assert not hub.left()               # (hub/run/ stays behind; the next start replaces it)
    assert not os.path.exists(folder), "a learner's kernel was killed, not shut down"


async def _scratch_folder_in_a_kernel(learner) -> str:
    kernel = await Kernel(learner, "notebooks/00_welcome.ipynb").start()
    # the kernel runs in notebooks/, a link to the course's: its own my_work/ is named by
    # the variable its server sets
    await kernel.run("import os, durable_lite as dl\nfolder = dl.lab.scratch_folder('hub-test')\n"
                     "mine = os.path.dirname(os.environ['DURABLE_LITE_PROGRESS'])\n"
                     "open(os.path.join(mine, '.scratch'), 'w').write(folder)")
    assert not kernel.errors, kernel.errors
    return (HubState(ROOT, learner.hub.hub_folder).my_work(learner.name) / ".scratch").read_text()


# without a hub -------------------------------------------------------------------------------
def _result(question, statuses):
    return QuestionResult("02_memoize", question, "t",
                          [Outcome(f"test {i}", s) for i, s in enumerate(statuses)])


def test_a_check_is_recorded_only_where_the_hub_asks(tmp_path, monkeypatch):
    path = tmp_path / "my_work" / ".progress.jsonl"
    monkeypatch.delenv(progress.VARIABLE, raising=False)
    progress.record(_result("q1", ["passed"]))
    assert not path.exists()
    monkeypatch.setenv(progress.VARIABLE, str(path))
    progress.record(_result("q1", ["passed", "failed", "failed"]))
    (line,) = progress.read(path)
    assert (line["status"], line["passed"], line["total"], line["failing"]) == \
        ("failed", 1, 3, "test 1")


def test_the_class_view_shows_each_learners_last_check(tmp_path, monkeypatch):
    state = HubState(tmp_path, tmp_path / "hub").make()
    for name, checks in {"ana": [("q1", ["failed"]), ("q1", ["passed"])],
                         "bob": [("q1", ["failed"]), ("q2", ["not attempted"])],
                         "cy": []}.items():
        state.my_work(name).mkdir(parents=True)
        monkeypatch.setenv(progress.VARIABLE, str(state.progress(name)))
        for question, statuses in checks:
            progress.record(_result(question, statuses))
    (tmp_path / "hub" / "users" / "instructor").mkdir()          # no learner: no row
    view = ClassView(state)
    assert view.learners == ["ana", "bob", "cy"]
    assert view.questions == [("02_memoize", "q1"), ("02_memoize", "q2")]
    assert view.cell("ana", ("02_memoize", "q1")).state == PASSED
    assert view.cell("bob", ("02_memoize", "q1")).state == FAILING
    assert view.cell("bob", ("02_memoize", "q2")).state == NOT_ATTEMPTED
    assert view.cell("cy", ("02_memoize", "q1")).state == NOT_ATTEMPTED
    (worst,) = view.most_failed()
    assert (worst["question"], worst["failing"], worst["passed"], worst["test"]) == \
        ("q1", 1, 1, "test 0")
    assert 'data-learner="bob"' in view.html() and "most-failed" in view.html()


def test_a_lessons_copy_finds_its_lesson_through_the_learners_link(tmp_path):
    """Under make hub a learner's notebooks/ is a link to the course's: Save As of a lesson
    still hands the copy the lesson's kernel (lab/copies.py), so the lesson is named as the
    learner's server serves it, not where it lies on the disk."""
    from durable_lite.lab.contents import CourseContentsManager

    lessons = tmp_path / "course" / "notebooks"
    lessons.mkdir(parents=True)
    (lessons / "00_welcome.ipynb").write_text(json.dumps(
        {"cells": [{"id": "first-cell", "cell_type": "markdown", "source": "", "metadata": {}}],
         "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    learner = tmp_path / "hub" / "users" / "ana"
    learner.mkdir(parents=True)
    (learner / "notebooks").symlink_to(lessons, target_is_directory=True)
    manager = CourseContentsManager(root_dir=str(learner))
    assert manager.copies._lessons(manager) == {"first-cell": "notebooks/00_welcome.ipynb"}
