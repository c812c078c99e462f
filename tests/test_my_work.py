"""my_work/: the learner's own folder. `make lab` fills it with copies of the exercises (and
the crash playground) it lacks; nothing else writes there: not `make exercises`, not the
test suite, not `git pull`.

A learner's edits are the one thing in this project that cannot be regenerated, so these
tests edit a copy and prove it survives everything else byte for byte. They work on a copy
of the course in a temporary folder, never on a real my_work/.
"""

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import process_support
from durable_lite.lab.workspace import MY_WORK, copy_missing_work, originals

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = sorted(p.name for p in (ROOT / "exercises").glob("*.ipynb"))
WORK = {p.name: p.relative_to(ROOT) for p in originals(ROOT)}     # what make lab copies
NESTED_SUITE_DEADLINE = 1200    # seconds: two test files, one of them starts JupyterLab
SKIP = shutil.ignore_patterns(".venv", ".git", MY_WORK, "__pycache__", ".pytest_cache",
                              "*.egg-info", ".hypothesis", "results", "*.db")


def own_options_only() -> dict:
    """This environment without PYTEST_ADDOPTS: the pytest started here reads only the options
    it is given (a -v put there for the outer suite would change what the inner one prints)."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}


def digest(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def edit(path: Path, code: str) -> None:
    """What a learner does: fill in an answer, save (here with a non-default indent too)."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(code))
    path.write_text(nbformat.writes(nb, indent=2), encoding="utf-8")


def command(target: str) -> list:
    """The last command `make TARGET` runs, with this interpreter if .venv is not there."""
    lines = subprocess.run(["make", "-s", "-n", "--no-print-directory", target], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.strip().splitlines()
    argv = shlex.split(lines[-1])
    if argv[0].endswith("python"):
        argv[0] = str(ROOT / argv[0]) if (ROOT / argv[0]).exists() else sys.executable
    return argv


@pytest.fixture
def course(tmp_path):
    """A copy of the course (no .venv, no git, no my_work) to run make's commands in."""
    copy = tmp_path / "course"
    shutil.copytree(ROOT, copy, ignore=SKIP)
    return copy


def test_first_launch_copies_every_exercise_later_ones_only_what_is_missing(course):
    copied = copy_missing_work(course)
    assert sorted(p.name for p in copied) == sorted(WORK)
    assert set(EXERCISES) | {"crash_playground.ipynb"} == set(WORK)
    mine = course / MY_WORK
    assert digest(mine) == {n: hashlib.sha256((course / source).read_bytes()).hexdigest()
                            for n, source in WORK.items()}          # exact copies
    edit(mine / EXERCISES[0], "answer = 42  # mine")
    (mine / EXERCISES[1]).unlink()                                  # "start this one over"
    (mine / "notes.txt").write_text("my notes\n")
    before = {k: v for k, v in digest(mine).items() if k != EXERCISES[1]}

    shutil.copy(course / "exercises" / EXERCISES[2], course / "exercises" / "99_new_one.ipynb")
    edit(course / "exercises" / EXERCISES[0], "# the exercise changed upstream")
    again = copy_missing_work(course)                               # the next make lab
    assert [p.name for p in again] == sorted([EXERCISES[1], "99_new_one.ipynb"])
    after = digest(mine)
    assert {k: after[k] for k in before} == before                  # nothing overwritten
    assert "answer = 42  # mine" in (mine / EXERCISES[0]).read_text()
    assert copy_missing_work(course) == []
    assert not [p for p in mine.iterdir() if p.name.startswith(".")]   # no partial copies left


def test_an_edit_survives_make_exercises_make_lab_and_the_suite(course, tmp_path):
    copy_missing_work(course)
    mine = course / MY_WORK
    edit(mine / EXERCISES[0], "answer = 'the learner typed this'")
    before = digest(mine)

    # make the generator really rewrite exercises/: a solution changed upstream
    solution = course / "solutions" / EXERCISES[0]
    nb = nbformat.read(solution, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("A new closing note."))
    nbformat.write(nb, solution)
    generated = subprocess.run(command("exercises"), cwd=course, capture_output=True, text=True)
    assert generated.returncode == 0, generated.stderr
    assert f"wrote {course / 'exercises' / EXERCISES[0]}" in generated.stdout
    assert "A new closing note." in (course / "exercises" / EXERCISES[0]).read_text()

    copy_missing_work(course)                                       # make lab, again
    # the tests that write into the course folder: the generator's and make lab's, run in
    # the copy, in a process group of their own so that nothing they start can outlive them
    nested = process_support.start(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly", "-n", "0",
         f"--basetemp={tmp_path / 'nested'}", "tests/test_exercises_generated.py",
         "tests/test_project.py::test_make_lab_prints_a_link_that_opens_lesson_00"],
        cwd=course, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=own_options_only())
    try:
        output, _ = nested.communicate(timeout=NESTED_SUITE_DEADLINE)
    except subprocess.TimeoutExpired:
        process_support.stop(nested, grace=30)
        output, _ = nested.communicate()
        pytest.fail(f"waited {NESTED_SUITE_DEADLINE} s for the generator's and make lab's tests "
                    f"to finish in a copy of the course; they printed:\n{output[-3000:]}",
                    pytrace=False)
    finally:
        process_support.stop(nested, grace=30)
        left = process_support.wait_until_none_left(str(tmp_path), deadline=60)
    assert nested.returncode == 0, output[-5000:]
    assert left == [], f"still running after the nested suite ended: {left}"
    assert digest(mine) == before, "a learner's file changed"


def test_the_test_suite_never_collects_my_work(tmp_path):
    """The project's pytest settings, on a small course: lessons are collected, a learner's
    notebooks (and even a test file of theirs) are not. `make test` runs pytest on its
    testpaths, which leave my_work/ out; norecursedirs keeps it out of `pytest .` too."""
    try:
        import tomllib
    except ImportError:                                             # Python 3.10
        import tomli as tomllib
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert MY_WORK not in settings["testpaths"] and MY_WORK in settings["norecursedirs"]
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "nbval_sanitize.cfg", tmp_path / "tests")
    (tmp_path / "tests" / "test_fine.py").write_text("def test_fine():\n    pass\n")
    (tmp_path / "notebooks").mkdir()
    lesson = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    nbformat.write(lesson, tmp_path / "notebooks" / "00_welcome.ipynb")
    (tmp_path / MY_WORK).mkdir()
    nbformat.write(lesson, tmp_path / MY_WORK / EXERCISES[0])
    (tmp_path / MY_WORK / "test_mine.py").write_text("def test_mine():\n    assert False\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "."],
                         cwd=tmp_path, capture_output=True, text=True, env=own_options_only())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "notebooks/00_welcome.ipynb" in out.stdout and "test_fine" in out.stdout
    assert f"{MY_WORK}/" not in out.stdout, out.stdout


def test_my_work_is_ignored_by_git():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    probe = subprocess.run(["git", "check-ignore", "-q", f"{MY_WORK}/{EXERCISES[0]}"], cwd=ROOT)
    assert probe.returncode == 0, "git would track my_work/: a pull could then conflict with it"
    tracked = subprocess.run(["git", "ls-files", MY_WORK], cwd=ROOT, capture_output=True, text=True)
    assert tracked.stdout == ""


def test_make_grade_grades_my_work(course, tmp_path):
    argv = command("grade")
    assert argv[1:3] == ["-m", "durable_lite.grading"] and argv[3:] == [f"{MY_WORK}/*.ipynb"]
    if not (ROOT / ".venv").exists():
        pytest.skip("needs the .venv that make creates")
    empty = subprocess.run(["make", "-s", "--no-print-directory", "-o", ".venv/.installed-test",
                            "grade", f"MY_WORK={tmp_path / 'nothing'}"], cwd=ROOT,
                           capture_output=True, text=True)
    assert empty.returncode != 0 and "run make lab first" in empty.stdout
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(ROOT / "solutions" / EXERCISES[0], mine / EXERCISES[0])   # a learner who got it all
    graded = subprocess.run(["make", "-s", "--no-print-directory", "-o", ".venv/.installed-test",
                             "grade", f"MY_WORK={mine}"], cwd=ROOT, capture_output=True, text=True)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert str(mine / EXERCISES[0]) in graded.stdout
    total = next(line for line in graded.stdout.splitlines() if line.strip().startswith("total"))
    passed, out_of = total.split()[1].split("/")
    assert passed == out_of and int(out_of) > 0
