"""The lessons as a course: each fits a sitting, every link leads somewhere, no lesson is
promised before it exists, and no notebook is committed with dead widget views.

These read the committed files only; running the lessons is nbval's job.
"""

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

from durable_lite.lab.workspace import originals

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
COURSE = LESSONS + EXERCISES + SOLUTIONS
EVERY_NOTEBOOK = sorted((ROOT / "notebooks").glob("*.ipynb")) + EXERCISES + SOLUTIONS
LESSON_NUMBERS = {p.name[:2] for p in LESSONS}

MAX_WORDS, MAX_CELLS = 1800, 40         # a lesson a newcomer finishes in 20-30 minutes
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def read(path):
    return nbformat.read(path, as_version=4)


def markdown(path) -> str:
    return "\n".join(c.source for c in read(path).cells if c.cell_type == "markdown")


def prose_words(path) -> int:
    """Words of markdown prose: tokens with a letter or digit in them (so '-' and '|' do not count)."""
    return sum(1 for token in markdown(path).split() if re.search(r"[A-Za-z0-9]", token))


def links(path):
    """Relative link targets in the notebook's markdown (web links left out)."""
    targets = re.findall(r"\]\(([^)\s]+)\)", markdown(path))
    return [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def ids(paths):
    return [f"{p.parent.name}/{p.name}" for p in paths]


def refresh_tool():
    """tests/tools/refresh_notebooks.py, loaded as a module."""
    spec = importlib.util.spec_from_file_location("refresh_notebooks",
                                                  ROOT / "tests" / "tools" / "refresh_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# widget views ------------------------------------------------------------------------------
@pytest.mark.parametrize("path", EVERY_NOTEBOOK, ids=ids(EVERY_NOTEBOOK))
def test_no_committed_notebook_carries_widget_views(path):
    nb = read(path)
    assert "widgets" not in nb.metadata, "re-save it with tests/tools/refresh_notebooks.py"
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert WIDGET_VIEW not in output.get("data", {}), \
                f"a saved widget view in {path.name}: re-save it with tests/tools/refresh_notebooks.py"


def test_refresh_drops_widget_views_but_keeps_their_text():
    refresh = refresh_tool()
    cell = nbformat.v4.new_code_cell("dl.lab.CrashLab()")
    cell.outputs = [nbformat.v4.new_output("execute_result", execution_count=1, data={
        WIDGET_VIEW: {"model_id": "abc", "version_major": 2, "version_minor": 0},
        "text/plain": "CrashLab(mode='naive', crash='between email and close')"}),
        nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": "def"}})]
    nb = nbformat.v4.new_notebook(cells=[cell], metadata={"widgets": {"state": {}}})
    refresh.strip_widget_views(nb)
    assert "widgets" not in nb.metadata
    (kept,) = nb.cells[0].outputs
    assert kept.data == {"text/plain": "CrashLab(mode='naive', crash='between email and close')"}


# size --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", LESSONS, ids=ids(LESSONS))
def test_every_lesson_fits_a_sitting(path):
    words, cells = prose_words(path), len(read(path).cells)
    assert words <= MAX_WORDS, f"{path.name}: {words} words of prose (at most {MAX_WORDS})"
    assert cells <= MAX_CELLS, f"{path.name}: {cells} cells (at most {MAX_CELLS})"


# links -------------------------------------------------------------------------------------
# What a file in my_work/ is a copy of: `make lab` copies the exercises and the crash
# playground there (durable_lite.lab.workspace.originals).
COPIED = {source.name: source for source in originals(ROOT)}


def resolve(path, target):
    """Where a link leads. A link into my_work/ leads to the learner's copy, which `make lab`
    makes from a file of the course: that file must exist."""
    target = target.split("#")[0]
    resolved = (path.parent / target).resolve()
    if resolved.parent == (ROOT / "my_work").resolve():
        return COPIED.get(resolved.name, resolved)
    if path.parent.name == "exercises" and resolved.parent == path.parent.resolve():
        return ROOT / "exercises" / resolved.name      # a sibling exercise, in my_work too
    return resolved


@pytest.mark.parametrize("path", COURSE, ids=ids(COURSE))
def test_every_link_leads_to_a_file(path):
    broken = [t for t in links(path) if not resolve(path, t).exists()]
    assert not broken, f"{path.name} links to missing files: {broken}"


@pytest.mark.parametrize("path", COURSE, ids=ids(COURSE))
def test_no_notebook_mentions_a_lesson_that_does_not_exist(path):
    text = markdown(path)
    named = set(re.findall(r"\b[Ll]essons? (\d+)\b", text))
    named |= {m for m in re.findall(r"\b(\d\d) ·", text)}
    named |= set(re.findall(r"notebooks/(\d\d)_", text))
    missing = sorted(n for n in named if n.zfill(2) not in LESSON_NUMBERS)
    assert not missing, f"{path.name} mentions lesson(s) {missing}, which do not exist yet"


@pytest.mark.parametrize("path", LESSONS[1:], ids=ids(LESSONS[1:]))
def test_a_lesson_sends_learners_to_their_own_copy_of_its_exercise(path):
    number = path.name[:2]
    (exercise,) = [p for p in EXERCISES if p.name.startswith(number + "_")]
    assert f"../my_work/{exercise.name}" in links(path)
    assert not any(t.startswith("../exercises/") for t in links(path)), \
        "learners work in my_work/; exercises/ is regenerated"


@pytest.mark.parametrize("path", LESSONS[:-1], ids=ids(LESSONS[:-1]))
def test_a_lesson_links_the_next_one(path):
    following = LESSONS[LESSONS.index(path) + 1]
    assert following.name in links(path)


def test_lesson_00_lists_every_lesson_and_states_the_solutions_policy():
    welcome = LESSONS[0]
    targets = links(welcome)
    for lesson in LESSONS[1:]:
        assert lesson.name in targets
    text = markdown(welcome)
    assert "my_work/" in text and "solutions/" in text and "make lab" in text


def test_refresh_saves_a_cells_prints_as_one_output_however_they_were_chunked():
    refresh = refresh_tool()
    cell = nbformat.v4.new_code_cell("print(1); print(2)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="2\n"),
                    nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="3\n")]
    nb = nbformat.v4.new_notebook(cells=[cell])
    refresh.coalesce_streams(nb)
    assert [(o.name, o.text) for o in nb.cells[0].outputs] == [
        ("stdout", "1\n2\n"), ("stderr", "warning\n"), ("stdout", "3\n")]


@pytest.mark.parametrize("path", SOLUTIONS, ids=ids(SOLUTIONS))
def test_an_exercise_cites_lesson_sections_that_exist(path):
    """"*Lesson 05, section “3. When the memo goes stale”*": the quoted title must begin a
    heading of that lesson, so a renamed or renumbered section is caught here."""
    headings = {p.name[:2]: [line.lstrip("#").strip() for line in markdown(p).splitlines()
                             if line.startswith("#")] for p in LESSONS}
    cited = 0
    for cell in read(path).cells:
        if cell.cell_type != "markdown":
            continue
        # each "Lesson NN, section(s) ..." up to the next mention of a lesson
        for number, rest in re.findall(r"[Ll]esson (\d\d), sections? (.*?)(?=[Ll]esson \d\d|$)",
                                       cell.source, flags=re.S):
            for title in re.findall(r"“([^”]+)”", rest):
                cited += 1
                assert any(h.startswith(title) for h in headings[number]), \
                    f"{path.name} cites “{title}” in lesson {number}, which has no such section"
    assert cited, f"{path.name} cites no lesson section"


def test_the_readme_maps_every_lesson_with_its_reading_time():
    """The README's map links each lesson and gives its reading time at 200 words a minute."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for lesson in LESSONS:
        row = re.search(rf"^\| {lesson.name[:2]} \| \[[^\]]+\]\(notebooks/{re.escape(lesson.name)}\)"
                        rf".*?\| (\d+) min \|", readme, flags=re.M)
        assert row, f"README's lesson map has no row linking {lesson.name} with a reading time"
        expected = -(-prose_words(lesson) // 200)
        assert int(row.group(1)) == expected, \
            f"{lesson.name}: README says {row.group(1)} min, its {prose_words(lesson)} words take {expected}"
    for number in range(len(LESSONS), 15):                   # planned: listed, never linked
        assert re.search(rf"^\| {number:02d} \| [^\[|]+\|", readme, flags=re.M), \
            f"README should list planned lesson {number:02d} without a link"
