"""Scratch folders for lessons: real files on disk, whose paths never appear in output."""

import atexit
import shutil
import tempfile


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
