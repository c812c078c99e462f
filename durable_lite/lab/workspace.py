"""Where files live while you learn: scratch folders for lessons, and `my_work/` for you.

A lesson's scratch folder is a real temporary folder whose path never appears in output.

`my_work/` is the learner's own folder beside the course (git ignores it). `make lab`
creates it and copies every exercise notebook into it that is not there yet, so new
exercises arrive after a `git pull`, and a file already there is never replaced: it may hold
hours of someone's work. Nothing else in the course writes to it. To start an exercise
over, delete your copy; the next `make lab` brings a fresh one.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import List

MY_WORK = "my_work"


class ScratchFolder(str):
    """A temporary folder (a str path) that prints as a short, stable name."""

    def __new__(cls, label="lesson"):
        path = tempfile.mkdtemp(prefix=f"durable-lite-{label}-")
        obj = super().__new__(cls, path)
        obj.label = label
        atexit.register(shutil.rmtree, path, True)
        return obj

    def __repr__(self):
        return f"<scratch folder {self.label!r}>"

    def file(self, name) -> str:
        """A path inside the folder, e.g. `folder.file("runs.db")`."""
        import os
        return os.path.join(self, name)


def scratch_folder(label="lesson") -> ScratchFolder:
    return ScratchFolder(label)


def copy_missing_exercises(root=".", my_work=MY_WORK) -> List[Path]:
    """Copy each `exercises/*.ipynb` that `my_work` lacks into it; return the copies made.

    Creates the folder if needed. Never overwrites: a copy is written under a temporary
    name and then linked into place, which fails if the name is taken, so even two
    launches at once cannot clobber a learner's file or leave half of one behind.
    """
    root = Path(root)
    target = root / my_work
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for source in sorted((root / "exercises").glob("*.ipynb")):
        destination = target / source.name
        if destination.exists():
            continue
        if _copy_if_absent(source, destination):
            copied.append(destination)
    return copied


def _copy_if_absent(source: Path, destination: Path) -> bool:
    fd, partial = tempfile.mkstemp(prefix=f".{destination.name}.", dir=destination.parent)
    os.close(fd)
    try:
        shutil.copyfile(source, partial)
        try:
            os.link(partial, destination)               # atomic, and refuses to overwrite
        except FileExistsError:
            return False
        except OSError:                                 # a file system without hard links
            try:
                with open(destination, "xb") as out, open(partial, "rb") as data:
                    shutil.copyfileobj(data, out)
            except FileExistsError:
                return False
        return True
    finally:
        os.unlink(partial)
