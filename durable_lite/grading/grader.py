"""The grader: execute exercise notebooks headless and score every question.

    python -m durable_lite.grading exercises/01_naive_retry.ipynb [more ...] [--json]

Each notebook runs top to bottom in a fresh kernel, in its own folder, like "Restart and
run all" — except that a cell that raises does not stop the run (later questions still get
scored), and the whole notebook has a time limit: when it runs out the cell is
interrupted, the kernel is shut down and whatever was scored so far stands. A notebook
that kills its kernel, loops forever or never starts is scored, not crashed on.

Scores come out through a file: the grader names it in DURABLE_LITE_GRADING_RESULTS, and
every `check(...)` in the kernel appends its result there as one JSON line. A question
whose check cell never ran scores 0 with a note saying so.
"""

import json
import logging
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from . import EXERCISES, exercise
from .checks import RESULTS_ENV

NOT_CHECKED = "not checked"
DEFAULT_TIMEOUT = 120.0


@dataclass
class NotebookScore:
    path: str
    exercise: Optional[str]
    questions: List[dict] = field(default_factory=list)
    note: Optional[str] = None           # why the run stopped early, if it did
    seconds: float = 0.0
    notebook: object = field(default=None, repr=False)   # the executed notebook, with outputs

    @property
    def passed(self) -> int:
        return sum(q["passed"] for q in self.questions)

    @property
    def total(self) -> int:
        return sum(q["total"] for q in self.questions)

    @property
    def complete(self) -> int:
        return sum(q["status"] == "passed" for q in self.questions)

    def question(self, qid) -> dict:
        return next(q for q in self.questions if q["question"] == qid)

    def to_json(self) -> dict:
        return {"path": self.path, "exercise": self.exercise, "passed": self.passed,
                "total": self.total, "questions_complete": self.complete,
                "questions_total": len(self.questions), "note": self.note,
                "seconds": round(self.seconds, 2), "questions": self.questions}

    def report(self) -> str:
        name = self.exercise or "unknown exercise"
        lines = [f"{self.path}  ({name}, {self.seconds:.1f} s)"]
        if self.note:
            lines.append(f"  note: {self.note}")
        width = max([len(q["title"]) for q in self.questions] + [10])
        for q in self.questions:
            score = f"{q['passed']}/{q['total']}"
            lines.append(f"  {q['question']:<4}{q['title']:<{width}}  {score:>5}  {q['status']}")
            if q.get("note"):
                lines.append(f"      {q['note']}")
        total = f"{self.passed}/{self.total}"
        lines.append(f"  {'total':<{width + 4}}  {total:>5}  "
                     f"{self.complete}/{len(self.questions)} questions complete")
        return "\n".join(lines)


def exercise_id_of(nb, path: Path) -> Optional[str]:
    """From the notebook's metadata (set by the generator), else from its file name."""
    meta = nb.get("metadata", {}).get("durable_lite", {})
    if meta.get("exercise") in EXERCISES:
        return meta["exercise"]
    for exercise_id in EXERCISES:
        if path.stem.startswith(exercise_id):
            return exercise_id
    return None


def grade_notebook(path, timeout: float = DEFAULT_TIMEOUT, kernel_name: str = "python3") -> NotebookScore:
    """Execute one notebook and score it. Never raises for anything the notebook does."""
    import nbformat

    path = Path(path)
    started = time.monotonic()
    score = NotebookScore(str(path), None)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # missing file, not JSON, not a notebook: every question scores 0
        score.note = f"could not read the notebook: {type(exc).__name__}: {exc}"
        score.exercise = exercise_id_of({}, path)
        if score.exercise:
            score.questions = _score(score.exercise, {}, score.note)
        score.seconds = time.monotonic() - started
        return score
    score.exercise = exercise_id_of(nb, path)
    if score.exercise is None:
        score.note = ("this notebook is not one of the exercises "
                      f"({', '.join(EXERCISES)}); nothing to score")
        score.seconds = time.monotonic() - started
        return score
    with tempfile.TemporaryDirectory(prefix="durable-lite-grade-") as tmp:
        results = os.path.join(tmp, "results.jsonl")
        score.note = _execute(nb, path.resolve().parent, results, timeout, kernel_name,
                              os.path.join(tmp, "kernel.log"), scratch=tmp)
        score.questions = _score(score.exercise, _read_results(results, score.exercise), score.note)
    score.notebook = nb
    score.seconds = time.monotonic() - started
    return score


def _execute(nb, folder: Path, results: str, timeout: float, kernel_name: str,
             kernel_log: str, scratch: str) -> Optional[str]:
    """Run every cell; return a note if the run stopped early, else None.

    The kernel's own stderr goes to `kernel_log` (its start-up chatter is noise here); when
    the kernel dies, the log's last line says why. Its temporary files go to `scratch`, which
    is removed afterwards: a kernel that is shut down at once leaves nothing behind.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    deadline = time.monotonic() + timeout
    quiet = logging.getLogger("durable_lite.grading.kernel")   # timeouts are reported in the note
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    client = NotebookClient(
        nb, kernel_name=kernel_name, allow_errors=True, record_timing=False, log=quiet,
        interrupt_on_timeout=True, shutdown_kernel="immediate",
        startup_timeout=int(max(10, min(60, timeout))),
        error_on_timeout={"ename": "TimeoutError", "evalue": "the notebook's time limit ran out",
                          "traceback": []},
        resources={"metadata": {"path": str(folder)}})
    env = dict(os.environ, **{RESULTS_ENV: results, "TMPDIR": scratch})
    index = None
    try:
        with open(kernel_log, "wb") as log, client.setup_kernel(env=env, stderr=log):
            for index, cell in enumerate(nb.cells):
                allowed = math.ceil(deadline - time.monotonic())
                if allowed <= 0:
                    return f"stopped at cell {index}: the time limit of {timeout:.0f} s ran out"
                client.timeout = allowed      # the rest of the notebook's time, for this cell
                began = time.monotonic()
                client.execute_cell(cell, index)
                if time.monotonic() - began >= allowed:
                    # interrupted on timeout; a cell that ignores the interrupt keeps the
                    # kernel busy, so stop here rather than queue more cells behind it
                    return (f"stopped at cell {index}: the time limit of {timeout:.0f} s ran "
                            "out (a loop that never ends?)")
    except DeadKernelError:
        last = _last_line(kernel_log)
        return (f"the kernel died while running cell {index} (os._exit, a crash, or memory?)"
                + (f": {last}" if last else ""))
    except CellTimeoutError:
        return f"stopped at cell {index}: the time limit of {timeout:.0f} s ran out"
    except Exception as exc:  # kernel failed to start, or the client broke: score what we have
        where = "before the first cell" if index is None else f"at cell {index}"
        return f"execution stopped {where}: {type(exc).__name__}: {exc}"
    return None


def _last_line(path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip() and "WARNING" not in line]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def _read_results(path: str, exercise_id: str) -> dict:
    """{question id: latest result}; malformed lines (a killed write) are skipped."""
    latest = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and record.get("exercise") == exercise_id:
                    latest[record.get("question")] = record
    except FileNotFoundError:
        pass
    return latest


def _score(exercise_id: str, results: dict, note: Optional[str]) -> List[dict]:
    questions = []
    for q in exercise(exercise_id).questions.values():
        record = results.get(q.id)
        if record is None:
            why = "its check cell did not run" + (" (see the note above)" if note else "")
            questions.append({"question": q.id, "title": q.title, "status": NOT_CHECKED,
                              "passed": 0, "total": len(q.tests), "note": why, "tests": []})
            continue
        total = len(q.tests)
        passed = min(int(record.get("passed", 0)), total)
        status = record.get("status", "failed")
        tests = record.get("tests", [])
        failing = [t.get("name") for t in tests if t.get("status") == "failed"]
        questions.append({"question": q.id, "title": q.title, "status": status,
                          "passed": passed, "total": total,
                          "note": f"first failure: {failing[0]}" if failing else None,
                          "tests": tests})
    return questions


def grade(paths, timeout: float = DEFAULT_TIMEOUT, as_json: bool = False, out=None) -> int:
    """Grade notebooks one after another and print the scores. Returns an exit status:
    0 when every notebook could be read and run (whatever it scored), 1 when one could not."""
    import sys
    out = out or sys.stdout
    scores = [grade_notebook(p, timeout=timeout) for p in paths]
    if as_json:
        payload = {"notebooks": [s.to_json() for s in scores],
                   "passed": sum(s.passed for s in scores), "total": sum(s.total for s in scores)}
        print(json.dumps(payload, indent=2), file=out)
    else:
        for s in scores:
            print(s.report(), file=out)
        if len(scores) > 1:
            print(f"all notebooks: {sum(s.passed for s in scores)}/{sum(s.total for s in scores)} "
                  "tests passed", file=out)
    return 0 if all(s.exercise and s.notebook is not None for s in scores) else 1
