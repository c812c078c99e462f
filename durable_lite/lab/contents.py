"""The lessons open read-only: run them, change them, try things; nothing saves over them.

`make lab` starts JupyterLab with `CourseContentsManager`, which serves every file as usual
except those under `notebooks/`: there each file says it is not writable, and the server
refuses to save, rename, delete or restore one. JupyterLab shows such a notebook with a
"read-only" mark in its toolbar and never autosaves it; Ctrl-S says "read-only, use Save
as…". So:

- a lesson opens as the course ships it every time, its outputs those of a fresh run;
- `git pull` can always update the lessons, because nothing a learner did changed them
  (JupyterLab's autosave used to write a run's widget views and execution counts into the
  committed files, and a saved widget view reopens as "Loading widget..." once its kernel
  has gone);
- a learner's own files live in `my_work/` (exercises, the crash playground, and any copy
  of a lesson made with *File → Save Notebook As…*), where everything is saved as usual.

The rule is a list of glob patterns over paths relative to the server's root
(`CourseContentsManager.read_only`, default `["notebooks", "notebooks/*"]`); a test can
point it elsewhere. A path is read-only when it, or a folder above it, matches.
"""

import fnmatch
import posixpath

try:        # this module exists to be loaded by JupyterLab's server, so it needs one
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
    from tornado.web import HTTPError
    from traitlets import List, Unicode
except ImportError as missing:
    raise ImportError("durable_lite.lab.contents is JupyterLab's file manager for the course and "
                      "needs JupyterLab: pip install 'durable-lite[lab]'") from missing

READ_ONLY = ["notebooks", "notebooks/*"]

WHY = ("{path} is part of the course, and JupyterLab keeps the course's notebooks/ folder "
       "read-only so that git pull can always update it: save your own copy in my_work/ "
       "instead (File → Save Notebook As…, then a name starting with my_work/)")


class CourseContentsManager(AsyncLargeFileManager):
    """JupyterLab's usual file manager, with the course's lessons read-only."""

    read_only = List(Unicode(), default_value=READ_ONLY, config=True,
                     help="Glob patterns of paths (relative to the root) that are read-only.")

    def is_read_only(self, path: str) -> bool:
        path = path.strip("/")
        while path:
            if any(fnmatch.fnmatchcase(path, pattern) for pattern in self.read_only):
                return True
            path = posixpath.dirname(path)
        return False

    def _refuse(self, path: str):
        if self.is_read_only(path):
            raise HTTPError(403, WHY.format(path=path.strip("/")))

    # what JupyterLab reads: a lesson is not writable, so it never tries to save one
    def is_writable(self, path):
        return not self.is_read_only(path) and super().is_writable(path)

    # what the server refuses, whoever asks
    async def save(self, model, path=""):
        self._refuse(path)
        return await super().save(model, path)

    async def delete_file(self, path):
        self._refuse(path)
        return await super().delete_file(path)

    async def rename_file(self, old_path, new_path):
        self._refuse(old_path)
        self._refuse(new_path)
        return await super().rename_file(old_path, new_path)

    async def restore_checkpoint(self, checkpoint_id, path):
        self._refuse(path)
        return await super().restore_checkpoint(checkpoint_id, path)
