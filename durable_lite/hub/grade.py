"""Grade the whole class with the trusted grader: what the class view's button runs.

    python -m durable_lite.hub.grade [--course DIR] [--hub-folder DIR] [--into DIR]

It does what the workshop page tells an instructor to do by hand with laptops: copy each
learner's notebooks from their my_work/ into class/NAME/, then run `make report`'s grader
on class/ into report/ (scores.csv, summary.md, summary.png, the graded notebooks), both
in the course folder (or --into). The scores are the grader's own: it runs each notebook
afresh, in a sandbox, with its own copy of the checks, so nothing a learner's notebook
printed or wrote counts.

Only the notebooks a learner has worked on are copied: those whose code differs from the
exercise as the course ships it. An untouched copy scores nothing for certain, and
grading it would cost a kernel's run: sixteen of them for every learner in the class.
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from .state import HubState

CLASS, REPORT = "class", "report"


def code_of(path: Path):
    """A notebook's code cells, as text; None if it cannot be read."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells") or []
    except (OSError, ValueError):
        return None
    return ["".join(c.get("source") or "") for c in cells
            if isinstance(c, dict) and c.get("cell_type") == "code"]


def worked_on(notebook: Path, course: Path) -> bool:
    """Has the learner changed the code of this notebook, or is it one of their own?"""
    shipped = [course / "exercises" / notebook.name, course / "notebooks" / notebook.name]
    original = next((p for p in shipped if p.exists()), None)
    return original is None or code_of(notebook) != code_of(original)


def collect(state: HubState, into: Path) -> int:
    """Copy every learner's worked-on my_work/*.ipynb into `into`/NAME/ (replacing what an
    earlier run copied there); return how many notebooks."""
    count = 0
    for name in state.learners():
        target = into / name
        shutil.rmtree(target, ignore_errors=True)
        for notebook in sorted(state.my_work(name).glob("*.ipynb")):
            if worked_on(notebook, state.course):
                target.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(notebook, target / notebook.name)
                count += 1
    return count


def command(into: Path) -> list:
    """`make report`, as the course's Makefile runs it."""
    return [sys.executable, "-m", "durable_lite.grading", "report", str(into / CLASS),
            "--out", str(into / REPORT), "--no-progress"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m durable_lite.hub.grade",
                                     description="Grade every learner's my_work/ on this hub.")
    parser.add_argument("--course", default=".", help="the course folder (default: here)")
    parser.add_argument("--hub-folder", default=None, help="the hub's folder (default: hub/)")
    parser.add_argument("--into", default=None,
                        help="where class/ and report/ go (default: the course folder)")
    args = parser.parse_args(argv)
    state = HubState(args.course, args.hub_folder)
    into = Path(args.into).resolve() if args.into else state.course
    count = collect(state, into / CLASS)
    print(f"copied {count} worked-on notebooks of {len(state.learners())} learners into "
          f"{CLASS}/", flush=True)
    if count == 0:
        print("nothing to grade yet: no learner has changed an exercise")
        return 0
    return subprocess.run(command(into), cwd=state.course).returncode


if __name__ == "__main__":
    sys.exit(main())
