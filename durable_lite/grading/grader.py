"""The grader: run a learner's exercise notebook, kept apart from everything else, and score
every question with the grader's own tests.

    python -m durable_lite.grading my_work/01_naive_retry.ipynb [more ...] [--json] [--seed N]

For one notebook:

1. Its cells are laid over the grader's own copy of the exercise (assemble.py): the
   learner's answer cells, the grader's version of every other cell. What the learner
   changed outside the answers, or added, is reported and not run.
2. A kernel starts in a sandbox of its own (isolation.py): a private home, IPython and
   Jupyter folders, temporary folder and working copy, under a parent that keeps every
   process it starts within reach.
3. The grader's first request, before any of the learner's cells, installs its watch
   (watch.py), which records the grading code as loaded and hands back the key results
   are signed with.
4. The cells run top to bottom, like "Restart and run all", except that a cell that raises
   does not stop the run, an answer cell gets 30 s, and demonstrations are skipped. Where
   the exercise has a check cell, the grader runs a cell of its own instead: its tests for
   that question, on cases drawn from this run's seed, after the learner's code above it.
   The result comes back in the kernel's reply to that cell, signed by the watch with that
   key (protocol.py), with what the watch saw the notebook do; nothing the notebook
   printed or wrote is read.
5. At the end, or when the notebook's time runs out, every process of the sandbox is
   killed and the sandbox removed. Everything Python imports, and the other shared files a
   notebook could have changed to reach a later one, are checked and put back (guard.py).

A notebook that kills its kernel, loops forever or never starts is scored, not crashed on:
questions graded before that keep their scores, and the note says why the run stopped
(with the kernel's last words, which go with its sandbox), as it does when the grader
itself fails. What a notebook prints is kept up to a cap (isolation.KeptOutputs); the
notes say which cells were cut. The run's seed is printed; passing it back
(`--seed`) repeats every case.
"""

import json
import secrets
import shutil
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import List, Optional

from . import EXERCISES, exercise, watch
from .cases import derive_seed, fresh_seed
from .checks import CHECK_ERROR

NOT_CHECKED, TAMPERED = "not checked", "tampered"
DEFAULT_TIMEOUT = 180.0          # seconds for a whole notebook
CELL_TIME_LIMIT = 30.0           # seconds for one answer or given cell
TEST_TIME_LIMIT = 20.0           # seconds for one test of a question
PLAYGROUND = "crash_playground"  # make lab copies it into my_work/ beside the exercises


@dataclass
class NotebookScore:
    path: str
    exercise: Optional[str]
    seed: Optional[int] = None
    questions: List[dict] = field(default_factory=list)
    note: Optional[str] = None                  # why the run stopped early, if it did
    notes: List[str] = field(default_factory=list)   # what the grader set aside
    disturbed: List[str] = field(default_factory=list)   # signs another notebook interfered
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

    @property
    def tampered(self) -> bool:
        return any(q["tampered"] for q in self.questions)

    def question(self, qid) -> dict:
        return next(q for q in self.questions if q["question"] == qid)

    def to_json(self) -> dict:
        return {"path": self.path, "exercise": self.exercise, "seed": self.seed,
                "passed": self.passed, "total": self.total, "questions_complete": self.complete,
                "questions_total": len(self.questions), "tampered": self.tampered,
                "note": self.note, "notes": self.notes, "disturbed": self.disturbed,
                "seconds": round(self.seconds, 2),
                "questions": self.questions}

    def report(self) -> str:
        if self.exercise is None and not self.questions:     # the playground, or a stray file
            return f"{self.path}  ({self.note})"
        name = self.exercise or "unknown exercise"
        seed = f", cases seed {self.seed}" if self.seed is not None else ""
        lines = [f"{self.path}  ({name}, {self.seconds:.1f} s{seed})"]
        if self.note:
            lines.append(f"  note: {self.note}")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  disturbed: {d}" for d in self.disturbed]
        width = max([len(q["title"]) for q in self.questions] + [10])
        for q in self.questions:
            score = f"{q['passed']}/{q['total']}"
            lines.append(f"  {q['question']:<4}{q['title']:<{width}}  {score:>5}  {q['status']}")
            if q.get("note"):
                lines.append(f"      {q['note']}")
        total = f"{self.passed}/{self.total}"
        lines.append(f"  {'total':<{width + 4}}  {total:>5}  "
                     f"{self.complete}/{len(self.questions)} questions complete")
        for q in self.questions:
            for reason in q.get("flags", []):
                lines.append(f"  look at {q['question']}: its answer {reason}")
        return "\n".join(lines)


def exercise_id_of(nb, path: Path) -> Optional[str]:
    """From the notebook's metadata (set by the generator), else from its file name."""
    meta = nb.get("metadata", {}).get("durable_lite", {}) if isinstance(nb, dict) else {}
    if isinstance(meta, dict) and meta.get("exercise") in EXERCISES:
        return meta["exercise"]
    for exercise_id in EXERCISES:
        if path.stem.startswith(exercise_id):
            return exercise_id
    return None


@lru_cache(maxsize=None)
def _grader_copy_text(exercise_id: str, course_root: str) -> str:
    from .generate import exercise_notebook, render
    root = Path(course_root)
    solution = root / "solutions" / f"{exercise_id}.ipynb"
    if solution.exists():                     # the source of truth, always current
        return render(solution)
    import nbformat
    generated = root / "exercises" / f"{exercise_id}.ipynb"
    nb = nbformat.read(generated, as_version=4)
    return nbformat.writes(exercise_notebook(nb, generated.name))


def grader_copy(exercise_id: str, course_root=None):
    """The grader's own copy of an exercise, read once per process (before any notebook's
    kernel could change the files it comes from)."""
    import nbformat
    from .generate import default_root
    return nbformat.reads(_grader_copy_text(exercise_id, str(course_root or default_root())),
                          as_version=4)


def grade_notebook(path, timeout: float = DEFAULT_TIMEOUT, seed: Optional[int] = None,
                   course_root=None, guard=None,
                   cell_timeout: float = CELL_TIME_LIMIT) -> NotebookScore:
    """Grade one notebook in a sandbox of its own. Never raises for anything the notebook does.

    seed:  the cases' seed (default: a fresh one, printed in the report).
    guard: a guard.Guard shared by many notebooks (report.py, grade); the caller checks it
           after each one. By default this call makes its own, checks it afterwards and puts
           back what the notebook changed. A guard that could not put a file back grades
           nothing more: the notebook is not graded, and the note says why.
    cell_timeout: seconds for one answer or given cell, before it is interrupted."""
    import nbformat
    from .assemble import assemble
    from .isolation import start_guard

    path = Path(path)
    started = time.monotonic()
    score = NotebookScore(str(path), None, seed=fresh_seed() if seed is None else int(seed))
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # missing file, not JSON, not a notebook: every question scores 0
        score.note = f"could not read the notebook: {type(exc).__name__}: {exc}"
        score.exercise = exercise_id_of({}, path)
        if score.exercise:
            score.questions = _score(score.exercise, {}, score.note, {})
        score.seconds = time.monotonic() - started
        return score
    score.exercise = exercise_id_of(nb, path)
    if score.exercise is None:
        score.note = ("the crash playground is yours to experiment in: nothing to grade"
                      if path.stem.startswith(PLAYGROUND) else
                      f"not one of the exercises ({', '.join(EXERCISES)}): nothing to grade")
        score.seconds = time.monotonic() - started
        return score
    ex = exercise(score.exercise)
    ok, why = ex.available()
    if not ok:                # no question can be graded here: say why, score none of them
        score.note = f"this exercise cannot be graded on this machine: {why}"
        score.questions = _score(score.exercise, {}, score.note, {})
        score.seconds = time.monotonic() - started
        return score
    if guard is not None and guard.spoiled:
        score.note = ("not graded: a notebook graded before it changed files the grader could "
                      f"not put back ({', '.join(guard.spoiled[:3])}); reinstall the course's "
                      "environment and grade again")
        score.questions = _score(score.exercise, {}, score.note, {})
        score.seconds = time.monotonic() - started
        return score
    own_guard = guard is None
    if own_guard:
        guard = start_guard(_root(course_root))
    results, flags = {}, {}
    try:
        assembled = assemble(grader_copy(score.exercise, course_root), nb, ex)
        score.notes += assembled.notes
        flags = assembled.flags
        score.notebook = assembled.notebook          # filled with outputs as its cells run
        _run_in_sandbox(path, assembled, ex, score, results, started, timeout, cell_timeout)
    except Exception as exc:  # noqa: BLE001 - the grader's or the machine's failure: say which
        score.note = (f"grading stopped: {type(exc).__name__}: {exc} (a failure of the grader "
                      "or of the machine, not a score of the answers)")
    score.questions = _score(score.exercise, results, score.note, flags)
    if own_guard:
        changed = check_guard(guard)
        if changed:
            mark_tampered(score, changed)
    score.seconds = time.monotonic() - started
    return score


def _run_in_sandbox(path, assembled, ex, score, results, started, timeout, cell_timeout):
    """Run the assembled notebook in a sandbox of its own: fill `results`, and the score's
    note (why the run stopped early), notes (cells whose output was cut) and disturbed."""
    from .isolation import OutputBudget, Sandbox
    sandbox = Sandbox(score.exercise)
    budget = OutputBudget()
    try:
        shutil.copy(path, sandbox.work / path.name)          # the working copy
        score.note = _run(assembled, sandbox, ex, score.seed, timeout, results, started,
                          cell_timeout, budget)
        score.notes += budget.notes
        planted = sandbox.planted()
        if planted:
            score.disturbed.append("files appeared in this notebook's private config while it "
                                   f"ran: {', '.join(planted)}")
    finally:
        sandbox.remove()


def _root(course_root) -> str:
    from .generate import default_root
    return str(course_root or default_root())


def check_guard(guard, keep_in=None) -> List[str]:
    """Shared files changed since the guard was made, each put back where it can be. With
    `keep_in`, the changed versions are first copied there for the instructor to read."""
    changed = guard.changes()
    if not changed:
        return []
    if keep_in is not None:
        keep_in = Path(keep_in)
        keep_in.mkdir(parents=True, exist_ok=True)
        for p in changed:
            try:
                shutil.copy(p, keep_in / f"{abs(hash(p)):x}-{Path(p).name}")
            except OSError:
                pass
    failed = guard.restore(changed)
    described = [p + (" (could not be put back: reinstall)" if p in failed else "") for p in changed]
    if keep_in is not None:
        described.append(f"(the changed versions are kept in {keep_in})")
    return described


def mark_tampered(score: NotebookScore, changed: List[str]) -> None:
    """Every question scores 0: a notebook that changed shared files may have changed its
    own grading too."""
    why = "changed files outside its sandbox: " + ", ".join(changed)
    for q in score.questions:
        q.update(status=TAMPERED, passed=0, tampered=True, note=why)


@dataclass
class Outcome:
    """What came back from one grading cell."""
    payload: Optional[dict]          # the signed result, or None
    problem: Optional[str]           # why there is none
    seconds: float
    forged: bool = False             # a reply came, but no authentic result
    seen: List[str] = field(default_factory=list)   # what the watch saw: "level: what"


def _run(assembled, sandbox, ex, seed, timeout, results, started, cell_timeout,
         budget) -> Optional[str]:
    """Run the cells; fill `results` {qid: Outcome}, keeping their outputs within `budget`
    (isolation.OutputBudget); return a note if the run stopped early, else None."""
    from .isolation import CellTimeout, DeadKernel, Kernel
    from .protocol import begin_request, grading_request, key_of, verify

    deadline = started + timeout + (ex.test_time_limit or 0)   # a slow exercise's extra time
    kernel = None
    index = None
    try:
        try:
            kernel = Kernel.start(sandbox, startup_timeout=max(10.0, min(60.0, timeout / 2)))
        except Exception as exc:
            return (f"execution stopped before the first cell: {type(exc).__name__}: {exc}"
                    + _kernel_said(sandbox))
        code, expressions = begin_request(ex.id)
        try:
            reply = kernel.execute(code, timeout=max(5.0, deadline - time.monotonic()),
                                   user_expressions=expressions)
        except CellTimeout:
            return ("the grader's first cell did not finish in the notebook's time: no question "
                    "was graded")
        except DeadKernel:
            return ("the kernel died in the grader's first cell: no question was graded"
                    + _kernel_said(sandbox))
        key, why = key_of(reply)
        if key is None:
            return f"the grader's first cell failed ({why}): no question was graded"
        for cell in assembled.cells:
            index = cell.index
            left = deadline - time.monotonic()
            if left <= 0:
                return f"stopped at cell {index + 1}: the time limit of {timeout:.0f} s ran out"
            if cell.kind == "demo":
                continue
            cell.cell.outputs = []
            kept = budget.cell(cell.cell.outputs)
            if cell.kind in ("given", "answer"):
                limit = min(left, cell_timeout)
                try:
                    kernel.execute(cell.source, limit, outputs=kept)
                except CellTimeout:
                    if not kernel.interrupt():
                        return (f"stopped at cell {index + 1}: it ran past {limit:.0f} s and "
                                "ignored the interrupt (a loop that never ends?)")
                    cell.cell.outputs.append(_stream(f"(stopped by the grader after {limit:.0f} s)"))
                finally:
                    budget.spend(kept, f"cell {index + 1}")
                continue
            question = ex.questions[cell.question]
            nonce = secrets.token_hex(16)              # names this cell's result, and no other
            qseed = derive_seed(seed, ex.id, question.id)
            per_test = ex.test_time_limit or TEST_TIME_LIMIT
            code, expressions = grading_request(ex.id, question.id, question.answers, qseed,
                                                nonce, per_test)
            limit = min(left, len(question.tests) * per_test + 15)
            began = time.monotonic()
            try:
                reply = kernel.execute(code, limit, expressions, outputs=kept)
            except CellTimeout:
                results[question.id] = Outcome(None, f"its tests ran past {limit:.0f} s", limit)
                if not kernel.interrupt():
                    return f"stopped at cell {index + 1}: {question.id}'s tests never finished"
                continue
            finally:
                budget.spend(kept, f"cell {index + 1} ({question.id}'s check)")
            payload, seen, problem = verify(reply, key, ex.id, question.id, qseed, nonce)
            forged = payload is None and reply.get("status") == "ok"
            if payload is None and not forged:
                problem = f"the grading cell failed: {reply.get('ename')}: {reply.get('evalue')}"
            results[question.id] = Outcome(payload, problem, time.monotonic() - began, forged, seen)
    except DeadKernel:
        where = f"cell {index + 1}" if index is not None else "the first cell"
        return (f"the kernel died while running {where} (os._exit, a crash, or memory?)"
                + _kernel_said(sandbox))
    finally:
        if kernel is not None:
            kernel.stop()
    return None


def _stream(text):
    from nbformat.v4 import new_output
    return new_output("stream", name="stderr", text=text + "\n")


def _kernel_said(sandbox) -> str:
    """The last thing the kernel's process wrote (why it did not start, or died), kept in
    the note: its log goes with the sandbox."""
    last = _last_line(sandbox.root / "kernel.log")
    return f": {last}" if last else ""


def _last_line(path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip() and "WARNING" not in line]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def _score(exercise_id: str, results: dict, note: Optional[str], flags: dict) -> List[dict]:
    questions = []
    for q in exercise(exercise_id).questions.values():
        total = len(q.tests)
        base = {"question": q.id, "title": q.title, "total": total, "tampered": False,
                "flags": flags.get(q.id, []), "seconds": 0.0, "tests": []}
        if q.id not in results:
            why = "its check cell did not run" + (" (see the note above)" if note else "")
            questions.append({**base, "status": NOT_CHECKED, "passed": 0, "note": why})
            continue
        outcome = results[q.id]
        payload = outcome.payload
        base["seconds"] = round(outcome.seconds, 2)
        if payload is None:
            status = TAMPERED if outcome.forged else NOT_CHECKED
            questions.append({**base, "status": status, "passed": 0, "tampered": outcome.forged,
                              "note": outcome.problem})
            continue
        seen = [line.partition(": ") for line in outcome.seen]
        tampered = [what for level, _, what in seen if level == watch.TAMPERED]
        base["flags"] = base["flags"] + [f"while it was graded, {what}" for level, _, what in seen
                                         if level == watch.FLAGGED] + [
            f"while it was graded, {what}" for what in payload.get("flags", [])]
        if tampered:
            questions.append({**base, "status": TAMPERED, "passed": 0, "tampered": True,
                              "note": "not graded: while it was graded, " + "; ".join(tampered),
                              "tests": payload.get("tests", [])})
            continue
        tests = payload.get("tests", [])
        passed = sum(t.get("status") == "passed" for t in tests)
        failing = [t.get("name") for t in tests if t.get("status") != "passed"]
        broken = [t for t in tests if t.get("status") == CHECK_ERROR]
        status = payload.get("status", "failed")
        note = None
        if broken:        # the grader's own bug: say so, and where, for whoever fixes it
            note = f"the check itself failed on {broken[0].get('name')!r}: {broken[0].get('message')}"
        elif failing and status != "not attempted":
            note = f"first failure: {failing[0]}"
        questions.append({**base, "status": status, "passed": min(passed, total),
                          "note": note, "tests": tests})
    return questions


def grade(paths, timeout: float = DEFAULT_TIMEOUT, as_json: bool = False, out=None,
          seed: Optional[int] = None) -> int:
    """Grade notebooks one after another and print the scores. Returns an exit status:
    0 when every notebook could be read and run (whatever it scored), 1 when one could not."""
    import sys
    out = out or sys.stdout
    seed = fresh_seed() if seed is None else seed
    from .isolation import start_guard
    guard = start_guard(_root(None))               # one for the batch: made before any notebook runs
    scores = []
    for path in paths:
        score = grade_notebook(path, timeout=timeout, seed=seed, guard=guard)
        changed = check_guard(guard)
        if changed:
            mark_tampered(score, changed)
        scores.append(score)
    if as_json:
        payload = {"seed": seed, "notebooks": [s.to_json() for s in scores],
                   "passed": sum(s.passed for s in scores), "total": sum(s.total for s in scores)}
        print(json.dumps(payload, indent=2), file=out)
    else:
        for s in scores:
            print(s.report(), file=out)
        print(f"cases seed {seed}: repeat these exact cases with --seed {seed}", file=out)
    unreadable = [s for s in scores if s.note and s.note.startswith("could not read")]
    return 1 if unreadable else 0
