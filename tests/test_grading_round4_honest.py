"""Honest notebooks are never flagged, and a run that fails says why.

Graded beside a running JupyterLab (`make lab`, as the README tells learners and
instructors to do), the grader shares the machine with kernels that start in the default
IPython folder of the same user: the first one ever creates
`~/.ipython/profile_default/startup/README`, every one writes its history. Files other
programs write like that must not score an honest notebook "tampered" (the guard keeps only
what would run in a kernel: startup scripts and config files, guard.py). What an answer
prints is kept only up to a cap, with a line saying what was cut, so a flood of output
cannot take the grader's memory. And a run that stops for a reason of the machine's or the
grader's (a kernel that never starts, an error in the grader) keeps that reason in the
score's note.
"""

import io
import json
import os
import subprocess
import sys
import threading
import tracemalloc

import nbformat
import pytest
import zmq
from jupyter_client import KernelManager

from durable_lite.grading import grader, isolation
from durable_lite.grading.grader import NotebookScore, grade_notebook

from grading_support import ROOT, learner, statuses

CHEAP = [ROOT / "solutions" / "01_naive_retry.ipynb", ROOT / "solutions" / "02_memoize.ipynb"]
WAIT = 180          # seconds: generous deadlines on a loaded machine, never a fixed sleep


@pytest.fixture
def your_home(tmp_path, monkeypatch):
    """A home the test controls, standing for that of the user who grades: the guard reads
    it from the environment (~, or $IPYTHONDIR, unset here so that ~ is the one), and the
    kernels of other programs get it too. The machine's real home is never touched."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("IPYTHONDIR", "JUPYTER_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


# Another program's kernels, started by a process of its own: children of the grader's
# process would be taken for the graded notebook's orphans and killed with it (isolation.py);
# JupyterLab's are not the grader's children.
OTHER_PROGRAM = """
import sys

from jupyter_client import KernelManager

managers = [KernelManager(kernel_name="python3") for _ in range(int(sys.argv[1]))]
for km in managers:                     # all starting at once, as a lab restoring its tabs
    km.start_kernel()
for km in managers:
    client = km.blocking_client()
    client.start_channels()
    client.wait_for_ready(timeout=180)
    reply = client.execute_interactive("import durable_lite.grading.checks", timeout=180)
    assert reply["content"]["status"] == "ok", reply["content"]
    client.stop_channels()
print("started", flush=True)
sys.stdin.read()                        # until the test is done with them
for km in managers:
    km.shutdown_kernel(now=True)
"""


class KernelsOfAnotherProgram:
    """Plain ipykernel kernels as JupyterLab starts them: the default IPython folder of
    `home`, no sandbox, each importing the course as a learner's notebook would."""

    def __init__(self, home, count=3):
        self.home, self.count = home, count
        self.process = None
        self.said = []
        self.started = threading.Event()

    def start(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("JUPYTER", "IPYTHON", "JPY_", isolation.MARKER))}
        self.process = subprocess.Popen(
            [sys.executable, "-c", OTHER_PROGRAM, str(self.count)],
            env=dict(env, HOME=str(self.home)), cwd=str(self.home),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self):
        self.said.append(self.process.stdout.readline())
        self.started.set()

    def wait_started(self):
        assert self.started.wait(WAIT), "the other program's kernels never started"
        assert self.said == ["started\n"], f"the other program failed ({self.process.poll()})"

    def stop(self):
        if self.process is None:
            return
        self.process.stdin.close()
        try:
            self.process.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def full_marks(notebook_json) -> bool:
    return (notebook_json["passed"] == notebook_json["total"] > 0
            and not notebook_json["tampered"] and notebook_json["note"] is None)


# 1. beside JupyterLab --------------------------------------------------------------------
def test_solutions_graded_while_kernels_start_in_your_ipython_folder_score_full_marks(
        your_home, monkeypatch):
    """The issue's case: a first-ever kernel of another program creates the startup README
    while a notebook is graded. The kernels start once the guard has recorded the home as
    it was, and the guard looks again only once they have started (so their files are
    written while the first notebook is graded, however the machine's load spreads them)."""
    others = KernelsOfAnotherProgram(your_home)
    make_guard, check = isolation.start_guard, grader.check_guard

    def guard_then_other_kernels(*args, **kwargs):
        made = make_guard(*args, **kwargs)
        others.start()
        return made

    def check_once_they_have_started(*args, **kwargs):
        others.wait_started()
        return check(*args, **kwargs)

    monkeypatch.setattr(isolation, "start_guard", guard_then_other_kernels)
    monkeypatch.setattr(grader, "check_guard", check_once_they_have_started)
    out = io.StringIO()
    try:
        grader.grade([str(p) for p in CHEAP], as_json=True, out=out)
    finally:
        others.stop()
    graded = json.loads(out.getvalue())["notebooks"]
    assert [full_marks(nb) for nb in graded] == [True, True], json.dumps(graded, indent=1)
    # the case did happen, and the other program's file was left where it wrote it
    assert (your_home / ".ipython" / "profile_default" / "startup" / "README").is_file()


def test_the_guard_keeps_what_would_run_in_your_kernels_and_nothing_else_there(your_home):
    """Another program's README, history or security file is not a change; a startup
    script or a config file is, whoever wrote it (no file says which process wrote it), and
    is put back."""
    profile = your_home / ".ipython" / "profile_default"
    (profile / "startup").mkdir(parents=True)
    (your_home / ".jupyter").mkdir()
    guard = isolation.start_guard(ROOT)
    inert = [profile / "startup" / "README", profile / "history.sqlite",
             profile / "security" / "kernel-1.json", your_home / ".jupyter" / "migrated"]
    for path in inert:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("written by another program\n")
    assert guard.changes() == []
    running = [profile / "startup" / "00-planted.py", profile / "startup" / "01-planted.ipy",
               profile / "ipython_kernel_config.py",
               your_home / ".jupyter" / "jupyter_server_config.json"]
    for path in running:
        path.write_text("# would run, or configure, the user's next kernel\n")
    changed = guard.changes()
    assert changed == sorted(os.path.realpath(p) for p in running)
    assert guard.restore(changed) == [] and not any(p.exists() for p in running)
    assert all(p.exists() for p in inert)


# 2. a flood of output ----------------------------------------------------------------------
FLOOD_MB = 40
FLOOD = f'''

import sys
for _ in range({FLOOD_MB * 4}):        # 250 KB at a time, each sent before the next
    sys.stdout.write("x" * 249_999 + "\\n")
    sys.stdout.flush()
print("y" * {FLOOD_MB // 2} * 2 ** 20, flush=True)   # and one the kernel sends as one message
print("the end of the flood")
'''


@pytest.fixture(scope="module")
def guard():
    """One guard for the notebooks graded below (its scans cost a second each), checked at
    the end: these notebooks change no shared file either."""
    made = isolation.start_guard(ROOT)
    yield made
    assert grader.check_guard(made) == []


def solution_with(name, marker, appended, folder):
    """Solution `name` with `appended` added to the end of the answer cell holding `marker`."""
    nb = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    [cell] = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    return learner(name, folder, start="solutions", cells={marker: cell.source + appended})


def test_an_answer_that_prints_a_flood_is_kept_cut_and_still_scores_full_marks(tmp_path, guard):
    """60 MB printed, 40 in pieces and 20 in one print: the grader keeps the first
    CELL_OUTPUT_LIMIT characters and the last TAIL_KEPT, does not read the piece larger than
    MESSAGE_READ, says so in the cell and in the score's notes, and never holds the flood:
    its memory, traced while it grades, stays well under the flood's size (jupyter_client
    alone holds thirteen times a message's size while it decodes one)."""
    path = solution_with("01_naive_retry", "def run_naive", FLOOD, tmp_path)
    tracemalloc.start()
    try:
        score = grade_notebook(path, guard=guard)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert score.passed == score.total and score.note is None, score.report()
    [cell] = [c for c in score.notebook.cells if "the end of the flood" in c.source]
    kept = "".join(o.get("text", "") for o in cell.outputs)
    assert len(kept) < isolation.CELL_OUTPUT_LIMIT + isolation.TAIL_KEPT + 500
    assert "characters of stdout cut by the grader" in kept
    assert kept.endswith("the end of the flood\n")
    assert "the grader did not keep 20,97" in kept        # 20 MB, and its JSON's quotes
    [note] = [n for n in score.notes if n.startswith("cell ")]
    assert "characters cut" in note and "too large to read" in note, note
    assert peak < FLOOD_MB * 2 ** 20 / 4, f"the grader's memory peaked at {peak / 2 ** 20:.0f} MB"


def test_of_a_message_too_large_to_read_the_start_of_its_text_is_kept():
    """A stream message larger than MESSAGE_READ is not decoded: the start of its text (as
    many characters of its JSON as the cell has room for) is read from its JSON, never
    cutting an escape, nor a pair of them, in two."""
    text = 'é \\ "quoted" \n 😀 \x07 ' * 60_000                 # escapes of every length
    frame = zmq.Frame(json.dumps({"name": "stderr", "text": text}).encode())
    for limit in range(1_000, 1_020):          # a cut at every place of the repeated pattern
        kept = isolation.KeptOutputs(limit=limit)
        kept.add_unread("stream", len(frame.bytes), frame)
        kept.close()
        [output] = kept.outputs                     # the start, then the line saying so
        head, said = output.text.split("\n[... the grader did not keep ")
        assert output.name == "stderr" and text.startswith(head)
        assert limit - 12 <= len(json.dumps(head)) - 2 <= limit     # in JSON: a pair short at most
        assert said.startswith(f"{len(frame.bytes):,} bytes")


def test_what_is_kept_of_a_cell_keeps_its_order_its_end_and_its_error():
    """KeptOutputs alone: text past the limit is cut, the end of each stream kept before the
    next display; a display that does not fit is counted, an error always kept, shortened."""
    kept = isolation.KeptOutputs(limit=100)
    kept.add("stream", {"name": "stdout", "text": "a" * 60})
    kept.add("stream", {"name": "stdout", "text": "b" * 30_000 + "the end\n"})
    kept.add("display_data", {"data": {"text/plain": "c" * 500}, "metadata": {}})
    kept.add("error", {"ename": "ValueError", "evalue": "v" * 10 ** 6,
                       "traceback": ["frame\n"] * 10 ** 5 + ["ValueError: vvv"]})
    kept.close()
    kinds = [o.output_type for o in kept.outputs]
    assert kinds == ["stream", "error", "stream"], kinds
    text = kept.outputs[0].text
    assert text.startswith("a" * 60 + "b" * 40) and text.endswith("b" * 100 + "the end\n")
    assert f"{30_008 - 40 - isolation.TAIL_KEPT:,} characters of stdout cut" in text
    error = kept.outputs[1]
    assert error.traceback[-1] == "ValueError: vvv" and len(error.evalue) < 2 * isolation.LINE_KEPT
    assert sum(map(len, error.traceback)) <= isolation.ERROR_KEPT
    assert "did not keep 1 display" in kept.outputs[2].text
    assert kept.cut == 30_008 - 40 - isolation.TAIL_KEPT and kept.dropped == 1


# 3. a run that stops keeps its reason ------------------------------------------------------
def test_a_kernel_that_never_starts_leaves_its_own_reason_in_the_note(guard, monkeypatch):
    """The kernel's log goes with the sandbox: what the kernel said as it failed (a port
    another process took, an import that failed) is kept in the score's note."""
    start = KernelManager.start_kernel

    def a_kernel_that_fails(self, **kwargs):
        self._kernel_spec.argv = [sys.executable, "-c", "import sys; sys.exit("
                                  "'zmq.error.ZMQError: Address already in use')"]
        start(self, **kwargs)

    monkeypatch.setattr(KernelManager, "start_kernel", a_kernel_that_fails)
    score = grade_notebook(CHEAP[0], guard=guard)
    said = score.to_json()["note"]
    assert "did not start" in said and "ZMQError: Address already in use" in said, said
    assert score.passed == 0 and {q["status"] for q in score.questions} == {"not checked"}
    assert "ZMQError: Address already in use" in score.report()


def test_an_error_of_the_grader_mid_run_is_a_note_not_a_crash(guard, monkeypatch):
    """An exception the run does not expect (here the machine out of file descriptors as a
    cell is sent) ends that notebook with the reason in its note, instead of leaving
    grade_notebook (and with it a whole batch or class report); the questions graded before
    it keep their scores."""
    execute = isolation.Kernel.execute

    def out_of_files_at_q2(self, code, *args, **kwargs):
        if "def refund_flow" in code:
            raise OSError(24, "Too many open files")
        return execute(self, code, *args, **kwargs)

    monkeypatch.setattr(isolation.Kernel, "execute", out_of_files_at_q2)
    score = grade_notebook(CHEAP[1], guard=guard)
    said = score.to_json()["note"]
    assert said.startswith("grading stopped: OSError: [Errno 24] Too many open files"), said
    assert statuses(score) == {"q1": "passed", "q2": "not checked"}, score.report()
    assert score.notebook is not None           # what ran is kept, outputs and all


def test_a_disturbed_run_is_said_in_the_json_and_the_report():
    """Signs that another notebook interfered were kept only on the score object."""
    score = NotebookScore("ana/01_naive_retry.ipynb", "01_naive_retry",
                          disturbed=["files appeared in this notebook's private config"])
    assert score.to_json()["disturbed"] == score.disturbed
    assert "disturbed: files appeared" in score.report()
