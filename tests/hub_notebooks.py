"""Answers written into a learner's copy of exercise 01, as if they had typed them: the
hub's tests need one learner who passes a question and one who fails it.

Question 2 of exercise 01 (`predicted_refunds`) is the quickest check of the course: a
pure function, no crash injection. The right answer is the one in solutions/; the wrong
one says a naive run always refunds once, which is the mistake the question is about.
"""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = "01_naive_retry"
QUESTION = "q2"
WRONG = ('STEPS = ["lookup", "refund", "email", "close"]\n\n\n'
         'def predicted_refunds(step, when):\n'
         '    """How many refunds after one naive run that crashed once at (step, when)?"""\n'
         '    return 1\n')


def answer_cell(cells) -> int:
    """The index of the cell that defines predicted_refunds."""
    return next(i for i, c in enumerate(cells)
                if c["cell_type"] == "code" and "def predicted_refunds" in "".join(c["source"]))


def check_cell(cells) -> int:
    return next(i for i, c in enumerate(cells)
                if c["cell_type"] == "code" and f'check("{QUESTION}"' in "".join(c["source"]))


def write_answer(my_work: Path, right: bool) -> Path:
    """Put the right (from solutions/) or the wrong answer into the learner's notebook."""
    path = Path(my_work) / f"{EXERCISE}.ipynb"
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = notebook["cells"]
    if right:
        solution = json.loads((ROOT / "solutions" / f"{EXERCISE}.ipynb").read_text(encoding="utf-8"))
        source = "".join(solution["cells"][answer_cell(solution["cells"])]["source"])
    else:
        source = WRONG
    cells[answer_cell(cells)]["source"] = source
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    return path
