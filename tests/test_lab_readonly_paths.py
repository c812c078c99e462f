"""The lessons stay read-only however a request spells their path.

A real JupyterLab, started as `make lab` starts it (`launch.jupyter_command`,
`launch.course_environment`), serves a small course in a temporary folder: lesson 00 as the
course ships it, with a checkpoint of an older version beside it, and a learner's
`my_work/` holding a notebook of their own, a symlink to the lesson, one to the lessons
folder and a hard link to the lesson. Each request names the lesson, or the folder it is
in, in a spelling the server passes on to the file manager: `./notebooks/…`,
`my_work/../notebooks/…`, the same with the dots or slashes URL-encoded (`%2E%2E`, `%2F`,
doubled `%2F%2F`, a trailing `%2F`), and through the links. Doubled and trailing slashes
written plainly never reach it (the server's router turns them away itself); the last test
checks that they still change nothing. `http.client` sends every path byte for byte: a
browser or curl would tidy the dots away before the server saw them.

Every request must be refused (403, the course's reason) and nothing in the course folder
may change. The learner's own files, spelled the same odd ways, are still saved,
checkpointed, renamed and deleted.
"""

import hashlib
import http.client
import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("jupyter_server")

import process_support  # noqa: E402
from durable_lite.lab import launch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LESSON = "notebooks/00_welcome.ipynb"
START_DEADLINE = 180        # seconds: JupyterLab starts in 2-6 s here, slower on a busy laptop
REQUEST_DEADLINE = 60

# The lessons folder, spelled as a request's URL may spell it (decoded by the server).
FOLDERS = {
    "plain": "notebooks",
    "dot": "./notebooks",
    "dot-dot": "my_work/../notebooks",
    "%2E%2E": "my_work/%2E%2E/notebooks",
    "%2F": "my_work%2F..%2Fnotebooks",
    "%2F%2F": "my_work%2F%2F..%2F%2Fnotebooks",
    "trailing dot": "notebooks/.",
    "symlinked folder": "my_work/lessons",
}
# Lesson 00, spelled the same ways, and three more.
LESSONS = {**{name: f"{folder}/00_welcome.ipynb" for name, folder in FOLDERS.items()},
           "trailing %2F": "./notebooks/00_welcome.ipynb%2F",
           "symlinked file": "my_work/lesson.ipynb",
           "hard-linked file": "my_work/copy.ipynb"}
# The course folder itself, which holds the lessons.
COURSE = {"dot": ".", "dot-dot": "my_work/..", "%2E%2E": "my_work/%2E%2E",
          "%2F": "my_work%2F..", "lessons/..": "notebooks/.."}
# A new name in the lessons folder as a rename's JSON body gives it (not URL-decoded).
RENAMED_TO = {
    "plain": "notebooks/01_mine.ipynb",
    "dot": "./notebooks/01_mine.ipynb",
    "dot-dot": "my_work/../notebooks/01_mine.ipynb",
    "doubled slashes": "my_work//..//notebooks//01_mine.ipynb",
    "slashes around": "/./notebooks/01_mine.ipynb/",
    "symlinked folder": "my_work/lessons/01_mine.ipynb",
    "over the lesson": "my_work/../notebooks/00_welcome.ipynb",
    "over the symlink": "my_work/lesson.ipynb",
}


def edited_lesson() -> dict:
    lesson = json.loads((ROOT / LESSON).read_text(encoding="utf-8"))
    lesson["cells"].append({"cell_type": "markdown", "id": "learner-edit", "metadata": {},
                            "source": "the learner's edit"})
    return {"type": "notebook", "format": "json", "content": lesson}


def cases():
    for name, path in LESSONS.items():
        yield pytest.param("PUT", path, edited_lesson(), id=f"save {name}")
        yield pytest.param("DELETE", path, None, id=f"delete {name}")
        yield pytest.param("PATCH", path, {"path": "my_work/moved.ipynb"},
                           id=f"rename from {name}")
        yield pytest.param("POST", f"{path}/checkpoints", None, id=f"new checkpoint {name}")
        yield pytest.param("POST", f"{path}/checkpoints/checkpoint", None,
                           id=f"restore checkpoint {name}")
        yield pytest.param("DELETE", f"{path}/checkpoints/checkpoint", None,
                           id=f"delete checkpoint {name}")
    for name, path in RENAMED_TO.items():
        yield pytest.param("PATCH", "my_work/01_mine.ipynb", {"path": path}, id=f"rename to {name}")
    for name, folder in FOLDERS.items():
        yield pytest.param("PUT", f"{folder}/notes.txt", {"type": "file", "format": "text",
                                                          "content": "x"}, id=f"new file in {name}")
        yield pytest.param("POST", folder, {"type": "notebook"}, id=f"new notebook in {name}")
        yield pytest.param("POST", folder, {"copy_from": "my_work/01_mine.ipynb"},
                           id=f"copy into {name}")
        yield pytest.param("DELETE", folder, None, id=f"delete folder {name}")
        yield pytest.param("PATCH", folder, {"path": "my_work/moved"}, id=f"rename folder {name}")
    for name, path in COURSE.items():
        yield pytest.param("DELETE", path, None, id=f"delete course folder {name}")
    yield pytest.param("PATCH", "my_work/..", {"path": "my_work/moved"}, id="rename course folder")


def build(course: Path) -> None:
    """The course a test starts from (and is put back to after a request changed it)."""
    (course / "notebooks" / ".ipynb_checkpoints").mkdir(parents=True)
    (course / "my_work" / ".ipynb_checkpoints").mkdir(parents=True)
    shutil.copy(ROOT / LESSON, course / LESSON)
    older = json.loads((ROOT / LESSON).read_text(encoding="utf-8"))
    older["cells"] = older["cells"][:1]                 # a checkpoint unlike the lesson
    for checkpoint in ("notebooks/.ipynb_checkpoints/00_welcome-checkpoint.ipynb",
                       "my_work/.ipynb_checkpoints/lesson-checkpoint.ipynb",
                       "my_work/.ipynb_checkpoints/copy-checkpoint.ipynb"):
        (course / checkpoint).write_text(json.dumps(older), encoding="utf-8")
    shutil.copy(ROOT / LESSON, course / "my_work" / "01_mine.ipynb")
    (course / "my_work" / "lesson.ipynb").symlink_to(Path("..") / LESSON)
    (course / "my_work" / "lessons").symlink_to(Path("..") / "notebooks", target_is_directory=True)
    os.link(course / LESSON, course / "my_work" / "copy.ipynb")


def tree(folder: Path) -> dict:
    """Everything under `folder`, symlinks as links (not followed): {relative path: what}."""
    found = {}
    for parent, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(parent, name)
            where = path.relative_to(folder).as_posix()
            if path.is_symlink():
                found[where] = f"-> {os.readlink(path)}"
            elif path.is_dir():
                found[where] = "folder"
            else:
                found[where] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return found


class Lab:
    """The JupyterLab under test, the course it serves, and a way to talk to it."""

    def __init__(self, base: Path):
        self.base, self.course = base, base / "course"
        build(self.course)
        self.pristine = tree(self.course)
        self.lesson = (self.course / LESSON).read_bytes()
        self.token = secrets.token_hex(16)
        self.log = base / "jupyterlab.log"
        self.process = None
        self.port = None

    def environment(self) -> dict:
        env = dict(os.environ, JUPYTER_TOKEN=self.token)
        for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
            env[name] = str(self.base / name.lower())
        env.pop("JUPYTER_CONFIG_PATH", None)
        # A delete that got through sends the file to the trash, which would be the
        # user's own: this one is in the temporary folder, on the course's disk.
        env["XDG_DATA_HOME"] = str(self.base / "xdg")
        return launch.course_environment(env, self.base / "settings")

    def command(self) -> list:
        return launch.jupyter_command(self.course, self.port)

    def start(self) -> None:
        problem = None
        for _ in range(3):          # the free port can be taken between probe and bind
            self.port = launch.free_port()
            with open(self.log, "ab") as log:
                self.process = process_support.start(
                    self.command(), cwd=self.base, env=self.environment(),
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            problem = launch.wait_until_ready(self.process, self.port, self.token, LESSON,
                                              timeout=START_DEADLINE)
            if problem is None:
                return
            process_support.stop(self.process, grace=20)
        log = self.log.read_text(errors="replace")[-3000:]
        pytest.fail(f"JupyterLab did not start: {problem}. Its log ends:\n{log}", pytrace=False)

    def stop(self) -> None:
        if self.process is not None:
            process_support.stop(self.process, grace=20)

    def request(self, method: str, path: str, body=None):
        """(status, decoded body) of one request, its path sent exactly as written."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_DEADLINE)
        try:
            connection.request(method, f"/api/contents/{path}",
                               body=None if body is None else json.dumps(body),
                               headers={"Authorization": f"token {self.token}",
                                        "Content-Type": "application/json"})
            answer = connection.getresponse()
            return answer.status, answer.read().decode(errors="replace")
        finally:
            connection.close()

    def changes(self) -> list:
        now = tree(self.course)
        return sorted(path for path in set(now) | set(self.pristine)
                      if now.get(path) != self.pristine.get(path))

    def reset(self) -> None:
        """Put the course back as it was (a request got through, or a test changed it)."""
        if self.changes():
            shutil.rmtree(self.course, ignore_errors=True)
            build(self.course)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("readonly-paths")
    running = Lab(base)
    try:
        running.start()
        yield running
    finally:
        running.stop()
        left = process_support.wait_until_none_left(str(base), deadline=60)
        assert left == [], f"still running after the server was stopped: {left}"


@pytest.fixture
def lab(server):
    server.reset()
    yield server
    server.reset()


@pytest.mark.parametrize("method, path, body", list(cases()))
def test_no_spelling_of_a_lesson_path_lets_a_request_change_it(lab, method, path, body):
    status, answer = lab.request(method, path, body)
    changed = lab.changes()
    lesson = lab.course / LESSON
    assert lesson.exists() and lesson.read_bytes() == lab.lesson, (
        f"{method} /api/contents/{path} changed lesson 00 (answer {status}: {answer[:300]})")
    assert changed == [], f"{method} /api/contents/{path} changed {changed} (answer {status})"
    assert status == 403 and "read-only" in answer, f"{method} {path}: {status} {answer[:300]}"


@pytest.mark.parametrize("path", LESSONS.values(), ids=LESSONS.keys())
def test_jupyterlab_is_told_a_lesson_is_read_only_whatever_its_spelling(lab, path):
    """`writable: false` is what keeps JupyterLab from autosaving (and checkpointing) it."""
    status, answer = lab.request("GET", f"{path}?content=0")
    assert status == 200, answer[:300]
    assert json.loads(answer)["writable"] is False


def test_the_learners_own_files_are_saved_checkpointed_renamed_and_deleted(lab):
    mine = "./my_work/%2E/01_mine.ipynb"                # an odd spelling of my_work/01_mine.ipynb
    assert lab.request("PUT", mine, edited_lesson())[0] == 200
    assert "the learner's edit" in (lab.course / "my_work" / "01_mine.ipynb").read_text()
    assert lab.request("POST", f"{mine}/checkpoints")[0] == 201
    assert lab.request("POST", f"{mine}/checkpoints/checkpoint")[0] == 204
    assert lab.request("PATCH", mine, {"path": "my_work/../my_work/renamed.ipynb"})[0] == 200
    assert (lab.course / "my_work" / "renamed.ipynb").exists()
    assert lab.request("PUT", "my_work%2F%2Fnotes", {"type": "directory"})[0] == 201
    assert lab.request("DELETE", "my_work/./notes")[0] == 204
    assert lab.request("DELETE", "notebooks/../my_work/renamed.ipynb")[0] == 204
    assert not (lab.course / "my_work" / "renamed.ipynb").exists()
    assert (lab.course / LESSON).read_bytes() == lab.lesson


@pytest.mark.parametrize("method, path, body", [
    pytest.param(method, path, edited_lesson() if method == "PUT" else None, id=f"{method} {path}")
    for method, path in [("PUT", "notebooks//00_welcome.ipynb"),
                         ("PUT", "./notebooks/00_welcome.ipynb/"),
                         ("PUT", "my_work/..//notebooks/00_welcome.ipynb"),
                         ("DELETE", "./notebooks/00_welcome.ipynb/"),
                         ("DELETE", "my_work//../notebooks"),
                         ("POST", "./notebooks//00_welcome.ipynb/checkpoints")]])
def test_plain_doubled_and_trailing_slashes_never_reach_the_file_manager(lab, method, path, body):
    """Today the server answers these before the file manager sees them (404 for a doubled
    slash, 403 for a trailing one). Were it to pass them on, the rule must still hold."""
    status, answer = lab.request(method, path, body)
    assert 400 <= status < 500, f"{method} {path}: {status} {answer[:300]}"
    assert lab.changes() == []
