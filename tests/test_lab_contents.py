"""The course's file manager for JupyterLab: the lessons are read-only, everything else is
not. (The browser suite, tests/browser/test_saving.py, checks what JupyterLab makes of it.)"""

import asyncio
import json
import os

import pytest

pytest.importorskip("jupyter_server")

from tornado.web import HTTPError  # noqa: E402

from durable_lite.lab.contents import CourseContentsManager  # noqa: E402


@pytest.fixture
def course(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "my_work").mkdir()
    lesson = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "notebooks" / "00_welcome.ipynb").write_text(json.dumps(lesson))
    (tmp_path / "my_work" / "01_mine.ipynb").write_text(json.dumps(lesson))
    return tmp_path


def run(coroutine):
    return asyncio.run(coroutine)


def test_lessons_say_they_are_not_writable_and_the_learners_files_say_they_are(course):
    manager = CourseContentsManager(root_dir=str(course))
    assert run(manager.get("notebooks/00_welcome.ipynb", content=False))["writable"] is False
    assert run(manager.get("notebooks", content=False))["writable"] is False
    assert run(manager.get("my_work/01_mine.ipynb", content=False))["writable"] is True
    assert manager.is_read_only("notebooks/deeper/x.py") and not manager.is_read_only("notebooksX/y")


@pytest.mark.parametrize("action", ["save", "save a new file", "delete", "rename away",
                                    "rename into", "restore a checkpoint", "make a checkpoint",
                                    "delete a checkpoint"])
def test_the_server_refuses_to_change_a_lesson_whoever_asks(course, action):
    manager = CourseContentsManager(root_dir=str(course))
    lesson = "notebooks/00_welcome.ipynb"
    before = (course / lesson).read_bytes()
    model = run(manager.get(lesson))
    attempts = {
        "save": lambda: manager.save(model, lesson),
        "save a new file": lambda: manager.save({"type": "file", "format": "text", "content": "x"},
                                                "notebooks/notes.txt"),
        "delete": lambda: manager.delete(lesson),
        "rename away": lambda: manager.rename(lesson, "my_work/moved.ipynb"),
        "rename into": lambda: manager.rename("my_work/01_mine.ipynb", "notebooks/01_mine.ipynb"),
        "restore a checkpoint": lambda: manager.restore_checkpoint("checkpoint", lesson),
        "make a checkpoint": lambda: manager.create_checkpoint(lesson),
        "delete a checkpoint": lambda: manager.delete_checkpoint("checkpoint", lesson),
    }
    with pytest.raises(HTTPError) as refused:
        run(attempts[action]())
    assert refused.value.status_code == 403
    assert "my_work/" in refused.value.log_message and "read-only" in refused.value.log_message
    assert (course / lesson).read_bytes() == before
    assert not (course / "notebooks" / "notes.txt").exists()


def test_a_lesson_is_read_only_however_its_path_is_spelled(course):
    """The server passes paths on decoded but not tidied (tests/test_lab_readonly_paths.py
    sends these to a real one); the rule judges the file they lead to."""
    (course / "my_work" / "lesson.ipynb").symlink_to("../notebooks/00_welcome.ipynb")
    (course / "my_work" / "lessons").symlink_to("../notebooks", target_is_directory=True)
    os.link(course / "notebooks" / "00_welcome.ipynb", course / "my_work" / "hard.ipynb")
    manager = CourseContentsManager(root_dir=str(course))
    for spelling in ["./notebooks/00_welcome.ipynb", "my_work/../notebooks/00_welcome.ipynb",
                     "my_work//..//notebooks//00_welcome.ipynb/", "/./notebooks/",
                     "my_work/lesson.ipynb", "my_work/lessons/00_welcome.ipynb",
                     "my_work/lessons", "my_work/../notebooks/not_yet.txt", "my_work/hard.ipynb"]:
        assert manager.is_read_only(spelling), spelling
    for spelling in ["notebooks/../my_work/01_mine.ipynb", "./my_work", "notebooks/..", "."]:
        assert not manager.is_read_only(spelling), spelling
    assert run(manager.get("my_work/lesson.ipynb", content=False))["writable"] is False


def test_a_lessons_folder_that_is_a_symlink_is_read_only_through_any_other_link(tmp_path):
    lessons = tmp_path / "elsewhere" / "lessons"
    lessons.mkdir(parents=True)
    (lessons / "00_welcome.ipynb").write_text("{}")
    course = tmp_path / "course"
    (course / "my_work").mkdir(parents=True)
    (course / "notebooks").symlink_to(lessons, target_is_directory=True)
    (course / "my_work" / "lesson.ipynb").symlink_to(lessons / "00_welcome.ipynb")
    manager = CourseContentsManager(root_dir=str(course))
    assert manager.is_read_only("my_work/lesson.ipynb")
    assert not manager.is_read_only("my_work/other.ipynb")


@pytest.mark.parametrize("spelling", [".", "my_work/..", "my_work/../my_work/.."])
def test_the_folder_that_holds_the_lessons_cannot_be_deleted_or_moved(course, spelling):
    """Deleting the course folder would take the lessons along (the server's own check
    refuses only the empty path)."""
    # delete_to_trash=False: a delete that got through would otherwise fill the user's trash
    manager = CourseContentsManager(root_dir=str(course), delete_to_trash=False)
    for attempt in (lambda: manager.delete(spelling),
                    lambda: manager.rename(spelling, "my_work/moved")):
        with pytest.raises(HTTPError) as refused:
            run(attempt())
        assert refused.value.status_code == 403
    assert (course / "notebooks" / "00_welcome.ipynb").exists()
    (course / "my_work" / "old").mkdir()
    run(manager.rename("my_work/../my_work/old", "my_work/new"))     # folders of their own: yes
    run(manager.delete("./my_work/new"))
    assert not (course / "my_work" / "new").exists()


def test_the_learners_files_save_as_usual(course):
    manager = CourseContentsManager(root_dir=str(course))
    mine = run(manager.get("my_work/01_mine.ipynb"))
    mine["content"]["metadata"]["edited"] = True
    run(manager.save(mine, "my_work/01_mine.ipynb"))
    assert json.loads((course / "my_work" / "01_mine.ipynb").read_text())["metadata"]["edited"]
    copy = run(manager.get("notebooks/00_welcome.ipynb"))
    run(manager.save(copy, "my_work/00_welcome.ipynb"))          # File → Save Notebook As…
    assert (course / "my_work" / "00_welcome.ipynb").exists()


def test_the_rule_is_configurable_for_a_server_that_serves_copies(course):
    manager = CourseContentsManager(root_dir=str(course), read_only=["copy-*/notebooks"])
    assert manager.is_read_only("copy-3/notebooks/00_welcome.ipynb")
    assert not manager.is_read_only("notebooks/00_welcome.ipynb")


def test_make_labs_jupyterlab_has_the_course_rule_and_no_news_pop_up(tmp_path):
    from durable_lite.lab import launch
    options = launch.jupyter_command(tmp_path, 8888)
    assert "--ServerApp.contents_manager_class=durable_lite.lab.contents.CourseContentsManager" in options
    assert "--LabApp.news_url=None" in options
    env = launch.course_environment({"JUPYTER_CONFIG_PATH": "/elsewhere"}, tmp_path / "settings")
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [str(tmp_path / "settings"), "/elsewhere"]
    written = json.loads((tmp_path / "settings" / "labconfig" / "default_setting_overrides.json").read_text())
    assert written["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    page = json.loads((tmp_path / "settings" / "labconfig" / "page_config.json").read_text())
    assert page["buildCheck"] is False and page["buildAvailable"] is False   # no node per page
