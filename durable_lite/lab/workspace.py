"""Where files live while you learn: scratch folders for lessons, and `my_work/` for you.

A lesson's scratch folder is a real temporary folder whose path never appears in output.

`my_work/` is the learner's own folder beside the course (git ignores it). `make lab`
creates it and copies into it every exercise notebook, and the crash playground (where you
write workflows of your own), that is not there yet: new exercises arrive after a `git
pull`, and a file already there is never replaced, since it may hold hours of someone's
work. Nothing else in the course writes to it. To start an exercise over, delete your
copy; the next `make lab` brings a fresh one. The lessons themselves stay in `notebooks/`,
which JupyterLab serves read-only (`contents.py`).
"""

import os
import shutil
import tempfile
from pathlib import Path
from typing import List

MY_WORK = "my_work"

# What `make lab` copies into my_work/: (folder of the course, glob of its files).
YOURS = (("exercises", "*.ipynb"), ("notebooks", "crash_playground.ipynb"))


class ScratchFolder(str):
    """A temporary folder (a str path) that prints as a short, stable name.

    It goes when the kernel goes, however it goes: an exit handler alone would leave it
    behind a kernel that is killed (JupyterLab's shutdown that gives up waiting, SIGKILL),
    so the watchdog that ends the course's servers deletes it too, with any process still
    working in it."""

    def __new__(cls, label="lesson"):
        from ..engines.processes import watchdog
        path = tempfile.mkdtemp(prefix=f"durable-lite-{label}-")
        obj = super().__new__(cls, path)
        obj.label = label
        watchdog.watch(path, ending="KILL")
        return obj

    def __repr__(self):
        return f"<scratch folder {self.label!r}>"

    def file(self, name) -> str:
        """A path inside the folder, e.g. `folder.file("runs.db")`."""
        import os
        return os.path.join(self, name)


def scratch_folder(label="lesson") -> ScratchFolder:
    return ScratchFolder(label)


MEMORY_FILE_SYSTEMS = {"tmpfs", "ramfs"}


def file_system(path, mount_table="/proc/self/mounts") -> str:
    """The type of file system `path` is on ("ext4", "tmpfs", ...), as Linux's mount table
    says; "" where there is no such table to read (macOS, Windows)."""
    path = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open(mount_table, encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")     # a space, as the table writes it
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        return ""
    return kind


def in_memory(path) -> bool:
    """Whether `path` is on a file system held in memory, where fsync waits for nothing."""
    return file_system(path) in MEMORY_FILE_SYSTEMS


def disk_folder() -> str:
    """Where to make a temporary folder that must be on a disk (one that times fsync): the
    temporary folder if it is on a disk, else the current folder (a notebook's own: the
    course's folder is on a disk), which the caller cleans up after itself."""
    here = tempfile.gettempdir()
    return os.getcwd() if in_memory(here) and not in_memory(os.getcwd()) else here


def originals(root=".") -> List[Path]:
    """The course's files that learners work on in copies of their own (see YOURS)."""
    root = Path(root)
    return [source for folder, pattern in YOURS for source in sorted((root / folder).glob(pattern))]


def copy_missing_work(root=".", my_work=MY_WORK) -> List[Path]:
    """Copy each of `originals()` that `my_work` lacks into it; return the copies made.

    Creates the folder if needed. Never overwrites: a copy is written under a temporary
    name and then linked into place, which fails if the name is taken, so even two
    launches at once cannot clobber a learner's file or leave half of one behind.
    """
    root = Path(root)
    target = root / my_work
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for source in originals(root):
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
