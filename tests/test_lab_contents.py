"""The course's file manager for JupyterLab: the lessons are read-only, everything else is
not. (The browser suite, tests/browser/test_saving.py, checks what JupyterLab makes of it.)"""

import asyncio
import json

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
                                    "rename into", "restore a checkpoint"])
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
    }
    with pytest.raises(HTTPError) as refused:
        run(attempts[action]())
    assert refused.value.status_code == 403
    assert "my_work/" in refused.value.log_message and "read-only" in refused.value.log_message
    assert (course / lesson).read_bytes() == before
    assert not (course / "notebooks" / "notes.txt").exists()


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
    import os
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
