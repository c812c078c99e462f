"""The checks of each exercise, one module per exercise notebook.

`ex03_idempotency.py` holds the questions and tests of `solutions/03_idempotency.ipynb`
(and of the exercise generated from it). A module is found by its name alone — `exNN_` and
the notebook's name without its number — and imported only when a notebook asks for it,
so adding an exercise is adding a module and a solution notebook. Start from
`template.py` (not an exercise itself: its name does not match), and read
`durable_lite/grading/README.md` for the rules every question keeps.
"""

import os
import re


def discover() -> dict:
    """exercise id (the notebook's name, "02_memoize") -> module name ("ex02_memoize").

    Found by file name, without importing anything (not even pkgutil, which imports
    inspect and typing: every small process of the grader imports this package)."""
    names = sorted(name[:-3] for folder in __path__ for name in os.listdir(folder)
                   if name.endswith(".py"))
    return {name[2:]: name for name in names if re.fullmatch(r"ex\d\d_\w+", name)}
