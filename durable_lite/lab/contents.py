"""The lessons open read-only: run them, change them, try things; nothing saves over them.

`make lab` starts JupyterLab with `CourseContentsManager`, which serves every file as usual
except those under `notebooks/`: there each file says it is not writable, and the server
refuses to save, rename, delete or checkpoint one. JupyterLab shows such a notebook with a
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

The rule judges what a request would change, however the request spells its path. The
server hands the file manager the path from the URL decoded but not tidied, and all these
name lesson 00: `./notebooks/00_welcome.ipynb`, `my_work/../notebooks/00_welcome.ipynb`
(also sent as `my_work/%2E%2E/…`, or with its slashes as `%2F`, doubled or trailing), and
`my_work/lesson.ipynb` once a learner makes it a symlink (or a hard link) to the lesson.
So the patterns are matched against

- the path on disk that the file manager itself makes of the request's (`.`, `..` and
  empty parts resolved), named from the root;
- where that really is once symlinks are followed: the file itself for a write, which
  goes through a symlink, and the entry in its real folder for a delete or a move, which
  do not;

and that real place is also compared with where the places the patterns name really are
(for a lessons folder that is itself a symlink to somewhere else), and with the files
there (a hard link to a lesson is the lesson's own file under another name).

Deleting or moving a folder takes what is in it along, so a folder that holds a lesson is
not deleted or moved either: `DELETE /api/contents/my_work/..` names the course folder,
and used to send the whole course to the trash.
"""

import fnmatch
import glob
import os
import posixpath
import stat

try:        # this module exists to be loaded by JupyterLab's server, so it needs one
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
    from tornado.web import HTTPError
    from traitlets import List, Unicode
except ImportError as missing:
    raise ImportError("durable_lite.lab.contents is JupyterLab's file manager for the course and "
                      "needs JupyterLab: pip install 'durable-lite[lab]'") from missing

from .copies import Copies  # noqa: E402  (after the JupyterLab check above)

READ_ONLY = ["notebooks", "notebooks/*"]

WHY = ("{path} is part of the course, and JupyterLab keeps the course's notebooks/ folder "
       "read-only so that git pull can always update it: save your own copy in my_work/ "
       "instead (File → Save Notebook As…, then a name starting with my_work/)")


class CourseContentsManager(AsyncLargeFileManager):
    """JupyterLab's usual file manager, with the course's lessons read-only."""

    read_only = List(Unicode(), default_value=READ_ONLY, config=True,
                     help="Glob patterns of paths (relative to the root) that are read-only.")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.copies = Copies()

    def is_read_only(self, path: str) -> bool:
        """Is what `path` names read-only, or inside something that is, however the path
        is spelled?"""
        # found on disk as the file manager itself finds it, so `..` means the same to both
        target = self._get_os_path(path.strip("/"))
        root = os.path.abspath(self.root_dir)
        real = [os.path.realpath(target), _real_entry(target)]
        named = [(target, root)] + [(where, os.path.realpath(root)) for where in real]
        if any(self._matches(os.path.relpath(where, top)) for where, top in named
               if _within(where, top)):
            return True
        places = self._read_only_places()
        if any(_within(where, place) for where in real for place in places):
            return True
        return _hard_link_to_one_in(real[0], places)

    def holds_read_only(self, path: str) -> bool:
        """Does the folder `path` names hold something read-only? Deleting or moving it
        would take the lessons along."""
        entry = _real_entry(self._get_os_path(path.strip("/")))
        return any(_within(place, entry) for place in self._read_only_places())

    def _matches(self, relative: str) -> bool:
        """Does a pattern match `relative` (a path from the root) or a folder above it?"""
        relative = relative.replace(os.sep, "/")
        while relative not in ("", "."):
            if any(fnmatch.fnmatchcase(relative, pattern) for pattern in self.read_only):
                return True
            relative = posixpath.dirname(relative)
        return False

    def _read_only_places(self) -> list:
        """Where the places the patterns name really are. One inside another (a lesson in
        notebooks/) goes with it and is not resolved again: this runs for every file of
        every folder JupyterLab lists."""
        root = os.path.abspath(self.root_dir)
        found = {os.path.normpath(name) for pattern in self.read_only
                 for name in glob.glob(pattern, root_dir=root)}
        return [os.path.realpath(os.path.join(root, name)) for name in found
                if not any(folder in found for folder in _folders_above(name))]

    def _refuse(self, path: str, removing: bool = False):
        """403 if the operation would change something read-only. `removing`: it deletes
        or moves `path`, and with it whatever is inside."""
        if self.is_read_only(path) or (removing and self.holds_read_only(path)):
            raise HTTPError(403, WHY.format(path=path.strip("/") or "."))

    # what JupyterLab reads: a lesson is not writable, so it never tries to save one
    def is_writable(self, path):
        return not self.is_read_only(path) and super().is_writable(path)

    # what the server refuses, whoever asks
    async def save(self, model, path=""):
        self._refuse(path)
        existed = await self.file_exists(path)
        saved = await super().save(model, path)
        self.copies.saw(self, model, path, existed)      # a lesson's copy keeps its kernel
        return saved

    async def delete_file(self, path):
        self._refuse(path, removing=True)
        return await super().delete_file(path)

    async def rename_file(self, old_path, new_path):
        self._refuse(old_path, removing=True)
        self._refuse(new_path)
        return await super().rename_file(old_path, new_path)

    # A checkpoint is a copy kept in .ipynb_checkpoints/ beside the file: making or
    # deleting one writes in the lessons folder, restoring one writes over the lesson.
    async def create_checkpoint(self, path):
        self._refuse(path)
        return await super().create_checkpoint(path)

    async def restore_checkpoint(self, checkpoint_id, path):
        self._refuse(path)
        return await super().restore_checkpoint(checkpoint_id, path)

    async def delete_checkpoint(self, checkpoint_id, path):
        self._refuse(path)
        return await super().delete_checkpoint(checkpoint_id, path)


def _real_entry(os_path: str) -> str:
    """`os_path` in its real folder: a symlink there stays the link, not its target."""
    folder, name = os.path.split(os_path)
    return os.path.join(os.path.realpath(folder), name)


def _hard_link_to_one_in(path: str, places: list) -> bool:
    """Is the file at `path` a hard link to a file in one of `places`? Then it is that
    file under another name, and a save writes into it. (A file with one name only is
    the usual case, and costs one stat.)"""
    try:
        this = os.stat(path)
    except OSError:
        return False
    if this.st_nlink < 2 or not stat.S_ISREG(this.st_mode):
        return False
    for place in places:
        files = ([place] if os.path.isfile(place) else
                 (os.path.join(folder, name)
                  for folder, _, names in os.walk(place) for name in names))
        for file in files:
            try:
                other = os.stat(file)
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (this.st_dev, this.st_ino):
                return True
    return False


def _folders_above(name: str):
    """"a/b/c" -> "a/b", "a" (relative names, with the system's separator)."""
    while os.path.dirname(name) not in ("", name):
        name = os.path.dirname(name)
        yield name


def _within(path: str, folder: str) -> bool:
    """Is `path` the folder `folder` or inside it? (Both absolute.)"""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
