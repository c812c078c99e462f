"""A class report: grade a folder of learners' notebooks, each in its own sandbox, in parallel.

    python -m durable_lite.grading report class/ --out report/ [--jobs 2] [--seed N]

`class/` holds the notebooks, one folder per learner (`class/ana/01_naive_retry.ipynb`) or
flat (`class/ana-01_naive_retry.ipynb`). The report folder gets:

    scores.csv     one row per learner x question: score, total, status, tampered, seconds,
                   and what to look at (answers that refer to the grading machinery)
    summary.md     pass rate per question, most often failed first, each with the test it
                   most often failed on; then the notebooks that need a person's eye
    summary.png    the same pass rates as a bar chart
    notebooks/     every notebook as the grader ran it, outputs and feedback included

Notebooks are graded `jobs` at a time (default: one per CPU core). Each has its own time
limit, so a notebook that hangs or kills its kernel costs that notebook's time, never
another's score. After every notebook the shared files a notebook could change to reach
another (guard.Guard) are checked; if one changed, it is put back, and every notebook
that was running since the last clean check is graded again, alone, afterwards: the one
that changes them again is marked tampered, the others keep their clean scores.
"""

import csv
import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from .cases import fresh_seed
from .checks import CHECK_ERROR
from .grader import DEFAULT_TIMEOUT, NotebookScore, check_guard, grade_notebook, mark_tampered

COLUMNS = ["learner", "notebook", "exercise", "question", "title", "score", "total", "status",
           "tampered", "review", "seconds", "seed", "note"]


@dataclass
class Graded:
    learner: str
    path: Path
    shown: str = ""                  # the path as the report shows it: inside the class folder
    score: NotebookScore = None
    ended: float = 0.0
    regraded: bool = False


@dataclass
class ClassReport:
    graded: List[Graded]
    seed: int
    seconds: float
    jobs: int
    out: Path
    warnings: List[str] = field(default_factory=list)

    def rows(self) -> List[dict]:
        rows = []
        for g in self.graded:
            s = g.score
            if not s.questions:
                rows.append({"learner": g.learner, "notebook": g.shown, "exercise": s.exercise or "",
                             "question": "", "title": "", "score": 0, "total": 0,
                             "status": "not graded", "tampered": False, "review": "",
                             "seconds": round(s.seconds, 2), "seed": s.seed, "note": s.note or ""})
            for q in s.questions:
                note = q.get("note") or ""
                if q["status"] == "not checked" and s.note:     # say why, on the row itself
                    note = f"not checked: {s.note}"
                rows.append({"learner": g.learner, "notebook": g.shown, "exercise": s.exercise,
                             "question": q["question"], "title": q["title"], "score": q["passed"],
                             "total": q["total"], "status": q["status"], "tampered": q["tampered"],
                             "review": "; ".join(q.get("flags", [])),
                             "seconds": q.get("seconds", 0.0), "seed": s.seed, "note": note})
        return rows

    def questions(self) -> List[dict]:
        """Per question: how many graded, how many passed, the test most often failed."""
        table = {}
        for row in self.rows():
            if not row["question"]:
                continue
            key = (row["exercise"], row["question"])
            entry = table.setdefault(key, {"exercise": row["exercise"], "question": row["question"],
                                           "title": row["title"], "graded": 0, "passed": 0,
                                           "failing": Counter()})
            entry["graded"] += 1
            entry["passed"] += row["status"] == "passed"
        for g in self.graded:
            for q in g.score.questions:
                if q["status"] == "passed":
                    continue
                first = next((t["name"] for t in q.get("tests", []) if t.get("status") != "passed"),
                             None)
                reason = first if q["status"] == "failed" and first else f"({q['status']})"
                table[(g.score.exercise, q["question"])]["failing"][reason] += 1
        out = []
        for entry in table.values():
            entry["rate"] = entry["passed"] / entry["graded"] if entry["graded"] else 0.0
            common = entry.pop("failing").most_common(1)
            entry["most_failed"], entry["most_failed_count"] = common[0] if common else ("", 0)
            out.append(entry)
        return sorted(out, key=lambda e: (e["rate"], e["exercise"], e["question"]))

    def summary_line(self) -> str:
        scores = [g.score for g in self.graded]
        learners = len({g.learner for g in self.graded})
        passed, total = sum(s.passed for s in scores), sum(s.total for s in scores)
        tampered = sum(s.tampered for s in scores)
        stopped = sum(bool(s.note) for s in scores)
        return (f"graded {len(scores)} notebooks from {learners} learners in {self.seconds:.1f} s "
                f"({self.jobs} at a time): {passed}/{total} tests passed, {tampered} tampered, "
                f"{stopped} stopped early; cases seed {self.seed}; report in {self.out}")


def find_notebooks(folder) -> List[Graded]:
    """Every notebook under `folder` (checkpoints and hidden folders skipped), each with the
    learner it belongs to: its folder's name, or for a flat layout the file's name."""
    from . import EXERCISES
    folder = Path(folder)
    found = []
    for path in sorted(folder.rglob("*.ipynb")):
        parts = path.relative_to(folder).parts
        if any(p.startswith(".") or p == ".ipynb_checkpoints" for p in parts):
            continue
        if len(parts) > 1:
            learner = "/".join(parts[:-1])
        else:
            learner = path.stem
            for exercise_id in EXERCISES:
                learner = learner.replace(exercise_id, "")
            learner = learner.strip("-_ .") or path.stem
        found.append(Graded(learner, path, str(path.relative_to(folder))))
    return found


def report(submissions, out, jobs: Optional[int] = None, timeout: float = DEFAULT_TIMEOUT,
           seed: Optional[int] = None, progress: Optional[bool] = None, course_root=None) -> ClassReport:
    """Grade every notebook under `submissions`, write the report into `out`, return it."""
    from . import EXERCISES
    from .generate import default_root
    from .grader import grader_copy
    from .isolation import start_guard

    started = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed = fresh_seed() if seed is None else int(seed)
    jobs = max(1, jobs or os.cpu_count() or 1)
    course_root = course_root or default_root()
    graded = find_notebooks(submissions)
    for exercise_id in EXERCISES:            # the grader's copies, read before any kernel runs
        try:
            grader_copy(exercise_id, course_root)
        except FileNotFoundError:
            pass
    guard = start_guard(course_root)
    lock = threading.Lock()
    running, suspects, warnings = set(), set(), []
    state = {"last_clean": time.monotonic()}
    bar = _bar(len(graded), progress)

    def one(g: Graded):
        with lock:
            running.add(id(g))
        g.score = grade_notebook(g.path, timeout=timeout, seed=seed, course_root=course_root,
                                 guard=guard)
        g.ended = time.monotonic()
        with lock:
            running.discard(id(g))
            changed = guard.changes()
            if changed:
                warnings.append(f"while {g.shown} and others ran, shared files changed: "
                                f"{', '.join(check_guard(guard, out / 'tampered-files'))}")
                suspects.update(id(x) for x in graded if x.score is None or x.ended >= state["last_clean"]
                                or id(x) in running)
                suspects.add(id(g))
            if g.score.disturbed:
                suspects.add(id(g))
            state["last_clean"] = time.monotonic()
        return g

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(one, g) for g in graded]
        for future in as_completed(futures):
            g = future.result()
            _advance(bar, g)
    again = [g for g in graded if id(g) in suspects]
    for g in again:                  # alone this time, the guard checked after each
        if bar is not None:
            bar.set_postfix_str(f"again, alone: {g.path.name}")
        g.score = grade_notebook(g.path, timeout=timeout, seed=seed, course_root=course_root,
                                 guard=guard)
        g.regraded = True
        changed = check_guard(guard, out / "tampered-files")
        if changed:
            mark_tampered(g.score, changed)
        if g.score.disturbed:
            mark_tampered(g.score, g.score.disturbed)
    if bar is not None:
        bar.close()
    result = ClassReport(graded, seed, time.monotonic() - started, jobs, out, warnings)
    write(result)
    return result


def _bar(total, progress):
    if progress is False:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="grading", unit="notebook", dynamic_ncols=True)


def _advance(bar, g):
    if bar is None:
        return
    bar.set_postfix_str(f"{g.learner}: {g.path.name} {g.score.passed}/{g.score.total}")
    bar.update(1)


# writing ------------------------------------------------------------------------------
def write(r: ClassReport) -> None:
    with open(r.out / "scores.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(r.rows())
    (r.out / "summary.md").write_text(summary_markdown(r), encoding="utf-8")
    try:
        plot(r, r.out / "summary.png")
    except ImportError as exc:
        r.warnings.append(f"no chart: {exc}")
    _keep_notebooks(r)


def _label(entry) -> str:
    return f"{entry['exercise'][:2]} {entry['question']} · {entry['title']}"


def summary_markdown(r: ClassReport) -> str:
    lines = ["# Class report", "", r.summary_line(), "",
             "## Pass rate per question, most often failed first", "",
             "| question | passed | pass rate | most common failing test |", "|---|---|---|---|"]
    for e in r.questions():
        failing = f"{e['most_failed']} ({e['most_failed_count']})" if e["most_failed"] else "–"
        lines.append(f"| {_label(e)} | {e['passed']}/{e['graded']} | {e['rate']:.0%} | {failing} |")
    look = []
    for g in r.graded:
        s = g.score
        if s.tampered:
            why = next((q["note"] for q in s.questions if q["tampered"]), "")
            look.append(f"- **tampered**: {g.learner}, {g.path.name}: {why}")
        if s.note:
            look.append(f"- stopped early: {g.learner}, {g.path.name}: {s.note}")
        for q in s.questions:
            for reason in q.get("flags", []):
                look.append(f"- look at {g.learner}, {g.path.name}, {q['question']}: the answer {reason}")
            if q["status"] == CHECK_ERROR:
                look.append(f"- **the grader broke** on {g.learner}, {g.path.name}, "
                            f"{q['question']}: {q.get('note') or 'a check failed'} (a bug in the "
                            "grader, not the learner's answer)")
        for note in s.notes:
            look.append(f"- {g.learner}, {g.path.name}: {note}")
        if g.regraded:
            look.append(f"- graded again, alone: {g.learner}, {g.path.name} (shared files changed "
                        "while it ran beside others)")
    lines += ["", "## Notebooks to look at", ""] + (look or ["Nothing: no notebook was tampered "
                                                            "with, stopped early, or flagged, "
                                                            "and no check broke."])
    if r.warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in r.warnings]
    lines += ["", f"Every case came from seed {r.seed}: `python -m durable_lite.grading report "
                  f"... --seed {r.seed}` grades with the same cases again.", ""]
    return "\n".join(lines)


def plot(r: ClassReport, path) -> None:
    """Pass rate per question as horizontal bars, most often failed at the top, each with
    its count and the test it most often failed on."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    entries = r.questions()
    if not entries:
        fig, ax = plt.subplots(figsize=(8, 2))
        ax.text(0.5, 0.5, "no question was graded", ha="center", va="center")
        ax.axis("off")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return
    height = 1.3 + 0.62 * len(entries)
    fig, ax = plt.subplots(figsize=(10, height))
    ys = list(range(len(entries)))[::-1]            # the first entry (most failed) on top
    rates = [100 * e["rate"] for e in entries]
    colors = ["#c0392b" if x < 50 else "#e67e22" if x < 80 else "#1e7b34" for x in rates]
    bars = [y + 0.14 for y in ys]
    ax.barh(bars, [100] * len(ys), color="#eeeeee", height=0.42)      # the track: 100 %
    ax.barh(bars, rates, color=colors, height=0.42)
    ax.set_yticks(bars, [_shorten(_label(e), 48) for e in entries], fontsize=9)
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.6, len(entries) - 0.4)
    ax.set_xlabel("learners who passed the question (%)")
    for y, bar, e, rate in zip(ys, bars, entries, rates):
        inside = rate > 75
        ax.text(rate - 1 if inside else rate + 1, bar, f"{e['passed']}/{e['graded']} passed",
                va="center", ha="right" if inside else "left", fontsize=8.5, weight="bold",
                color="white" if inside else "#222222")
        if e["most_failed"]:
            reason = e["most_failed"]
            text = (f"most often: {reason.strip('()')}" if reason.startswith("(") else
                    f"most often failed: {_shorten(reason, 92)}")
            ax.text(0.5, y - 0.26, text, va="center", ha="left", fontsize=7.5, color="#555555")
    ax.set_title(f"Pass rate per question, most often failed first "
                 f"({len({g.learner for g in r.graded})} learners, {len(r.graded)} notebooks)",
                 fontsize=11)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _shorten(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def _keep_notebooks(r: ClassReport) -> None:
    import nbformat
    for g in r.graded:
        if g.score.notebook is None:
            continue
        target = r.out / "notebooks" / g.learner / g.path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(g.score.notebook, target)
