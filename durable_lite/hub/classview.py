"""Where the class is: per learner and question, not attempted / failing / passed.

Read from the lines each learner's checks leave in their my_work/ (grading/progress.py):
a question's state is the last check the learner ran on it. A question nobody in a row
ran shows as not attempted. Below the grid, the questions the class fails most, each
with the test it most often fails on: what to explain at the next break.

This is what learners' notebooks reported, not a score: a learner can write anything into
their own file. The grade button (grade.py) gives the scores, with the trusted grader.
"""

import html
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Tuple

from ..grading import progress
from .state import HubState

PASSED, FAILING, NOT_ATTEMPTED = "passed", "failing", "not attempted"
Question = Tuple[str, str]          # (exercise, question): ("02_memoize", "q1")


@dataclass
class Cell:
    state: str                      # passed | failing | not attempted
    failing: str = ""               # the first test that failed, if failing
    passed: int = 0
    total: int = 0
    time: float = 0.0


def cell_of(line: dict) -> Cell:
    status = line.get("status")
    state = (PASSED if status == "passed" else NOT_ATTEMPTED if status == "not attempted"
             else FAILING)          # failed, or a check error: not passing either way
    return Cell(state, line.get("failing", "") if state == FAILING else "",
                int(line.get("passed", 0)), int(line.get("total", 0)), float(line.get("time", 0)))


class ClassView:
    """The grid of one hub's learners, read afresh each time it is made."""

    def __init__(self, state: HubState):
        self.learners: List[str] = state.learners()
        self.cells: Dict[str, Dict[Question, Cell]] = {}
        for name in self.learners:
            latest = {}
            for line in progress.read(state.progress(name)):
                latest[(line["exercise"], line["question"])] = cell_of(line)
            self.cells[name] = latest
        self.questions: List[Question] = sorted({q for row in self.cells.values() for q in row},
                                                key=_question_order)

    def cell(self, name: str, question: Question) -> Cell:
        return self.cells.get(name, {}).get(question) or Cell(NOT_ATTEMPTED)

    def most_failed(self) -> List[dict]:
        """Questions with a failing learner, the most failing first, each with its most
        common failing test."""
        out = []
        for q in self.questions:
            failing = [self.cell(n, q) for n in self.learners if self.cell(n, q).state == FAILING]
            if not failing:
                continue
            test, count = Counter(c.failing for c in failing).most_common(1)[0]
            passed = sum(self.cell(n, q).state == PASSED for n in self.learners)
            out.append({"exercise": q[0], "question": q[1], "failing": len(failing),
                        "passed": passed, "test": test, "test_count": count})
        return sorted(out, key=lambda e: (-e["failing"], _question_order((e["exercise"],
                                                                          e["question"]))))

    def html(self) -> str:
        """The grid and the most-failed list, as an HTML fragment."""
        if not self.learners:
            return "<p>No learner has signed in yet.</p>"
        heads = "".join(f"<th>{html.escape(e)}<br>{html.escape(q)}</th>" for e, q in self.questions)
        rows = []
        for name in self.learners:
            tds = []
            for q in self.questions:
                c = self.cell(name, q)
                title = f"{c.passed}/{c.total}" + (f": fails {c.failing}" if c.failing else "")
                tds.append(f'<td class="{c.state.replace(" ", "-")}" title="{html.escape(title)}">'
                           f"{html.escape(c.state)}</td>")
            rows.append(f'<tr data-learner="{html.escape(name)}"><th>{html.escape(name)}</th>'
                        f"{''.join(tds)}</tr>")
        grid = (f'<table id="grid"><tr><th>learner</th>{heads}</tr>{"".join(rows)}</table>'
                if self.questions else "<p>No learner has run a check yet.</p>")
        failed = self.most_failed()
        items = "".join(
            f"<li><b>{html.escape(e['exercise'])} {html.escape(e['question'])}</b>: "
            f"{e['failing']} failing, {e['passed']} passed; most often fails "
            f"<i>{html.escape(e['test'] or '?')}</i> ({e['test_count']})</li>" for e in failed)
        worst = f'<ol id="most-failed">{items}</ol>' if failed else "<p>Nobody is failing a question.</p>"
        return (f"<p>{len(self.learners)} learners.</p>{grid}"
                f"<h2>Most failed questions</h2>{worst}")


def _question_order(q: Question):
    exercise, question = q
    number = question[1:]
    return (exercise, int(number) if number.isdigit() else 0, question)
