"""The shared files one notebook could change to reach a later one, checked and put back.

A graded notebook's code can write anywhere its user can. What it must not be able to do is
change what a *later* notebook's kernel, or the grader itself, runs. That is everything
Python imports: the course's package, the standard library, site-packages, the `.pth` and
`sitecustomize` files Python runs as it starts — and their bytecode caches, which Python
loads instead of the source whenever a cache's header matches the source's mtime and size.
A cache compiled from the real `checks.py` plus a `_run_test` that always passes, stamped
with the source's mtime and size, is loaded as if it were `checks.py`.

`Guard` records all of it when grading begins and, after each notebook, tells what changed:

- *kept* files (the package's sources, `.pth`, `sitecustomize`, the top-level modules of
  site-packages, Jupyter and IPython config, the course's exercises and solutions, the
  venv's `pyvenv.cfg`) are kept whole, compared by content and written back;
- every other file below an import root — about 24,000 in this course's environment — is
  compared by size, mtime, ctime and inode. The ctime is the witness: `os.utime` can set a
  file's mtime back, but every write moves its ctime to now.

A bytecode cache that changed is judged by what it holds: if it unmarshals to exactly the
code its source compiles to, Python (the grader's own process, say) wrote it and it stays;
anything else is removed — a cache is always safe to remove, Python rebuilds it from the
source. A new file is removed. A changed file that was not kept cannot be put back: the
guard is then *spoiled*, and the grader grades no later notebook with it (reinstall).

Kernels do not read these caches at all: they keep theirs in a folder made for the
grading run (bytecode.py), so a cache planted before grading began cannot reach them.
That folder is guarded too.

Your own IPython and Jupyter folders (`~/.ipython`, `~/.jupyter`, or where $IPYTHONDIR
and $JUPYTER_CONFIG_DIR say) are another matter. A graded kernel never reads them (it has
a HOME and an IPYTHONDIR of its own), but your next kernel does, so the guard keeps what
there would run in it or configure it: the startup scripts (`*.py`, `*.ipy`, all IPython
runs from a startup folder) and the config files. Nothing else there is watched, because
other programs write there while grading runs beside JupyterLab: the first kernel a
learner ever starts creates the startup folder's README, every kernel its history. No
file records which process wrote it, so the guard cannot tell a startup script another
program wrote from one the graded notebook wrote; it tells them apart by what they are:
no program writes a startup script or a config file on its own, and a README runs nowhere.
"""

import os
import re
import site
import sys
import sysconfig
from pathlib import Path

from . import bytecode

KIND_TREE, KIND_STARTUP, KIND_CONFIG, KIND_FILE = "tree", "startup", "config", "file"
KIND_SCRIPTS = "scripts"
# What IPython runs from a profile's startup folder (IPython/core/shellapp.py globs these).
STARTUP_SCRIPTS = (".py", ".ipy")
CODE_SUFFIXES = (".py", ".pyc", ".so", ".pyd", ".pth")
# Files no Python process runs or reads while grading: type stubs, documentation, C and
# Fortran sources, fonts and images; and installed packages' own test suites, which nothing
# imports. Leaving them out saves about half of the files to look at after each notebook.
INERT_SUFFIXES = (".pyi", ".rst", ".md", ".h", ".c", ".cpp", ".f90", ".mat", ".woff",
                  ".woff2", ".ttf", ".afm", ".png", ".svg", ".jpg", ".gif", ".ico", ".css",
                  ".html", ".map", ".decTest")
INERT_FOLDERS = ("tests", "test")
# Python writes a cache atomically: to "<name>.pyc.<number>", then renamed to "<name>.pyc".
# Another process compiling a module while a notebook runs (the grader, a kernel beside it)
# leaves such a file for an instant; no Python ever loads one, so it is not watched.
CACHE_IN_FLIGHT = re.compile(r"\.pyc\.\d+$")
# What every guard of this process last read of each folder it walked (see `scan`): a folder
# whose own signature has not moved is not listed again, so a guard made for the next
# notebook reads its 12,000-odd folders' entries from here instead of from the disk.
_LISTINGS = {}


class Guard:
    """The files that could carry one notebook's code into a later notebook's kernel or into
    the grader, as they were when grading began."""

    def __init__(self, course_root=None):
        self.roots = _kept_roots(course_root)
        self.saved = {p: _read(p) for p in self._kept()}
        self.bytecode = bytecode.folder()
        self.import_roots = _import_roots()
        self.listings = _LISTINGS
        self.stats = scan(self.import_roots + [("whole", self.bytecode)], self.listings)
        self.spoiled = []          # changed files it could not put back

    def _kept(self) -> set:
        return set().union(*[_files(kind, root) for kind, root in self.roots])

    def changes(self) -> list:
        """[path] of guarded files changed, added or removed since the guard was made. A
        bytecode cache rewritten with exactly its source's code is not a change: the new
        version becomes the one to compare with."""
        kept = self._kept() | set(self.saved)
        changed = {p for p in kept if self.saved.get(p) != _read(p)}
        now = scan(self.import_roots + [("whole", self.bytecode)], self.listings)
        if now == self.stats:                # the usual case, compared in one go
            return sorted(changed)
        for path in set(now) | set(self.stats):
            if self.stats.get(path) == now.get(path) or path in changed:
                continue
            if now.get(path) is not None and bytecode.is_cache(path):
                if bytecode.genuine_cache(path):
                    self.stats[path] = now[path]
                    continue
                if bytecode.source_of_cache(path) not in self.stats:
                    _remove(path)          # the cache of a notebook's own module: not shared
                    continue
            changed.add(path)
        return sorted(changed)

    def restorable(self, path) -> bool:
        return path in self.saved or path not in self.stats or bytecode.is_cache(path)

    def restore(self, paths) -> list:
        """Put the changed files back; return (and remember) those it could not."""
        failed = []
        for path in paths:
            if not self.restorable(path):
                failed.append(path)
                continue
            before = self.saved.get(path)
            try:
                if before is None:
                    if os.path.lexists(path):
                        os.remove(path)
                else:
                    Path(path).parent.mkdir(parents=True, exist_ok=True)
                    Path(path).write_bytes(before)
            except OSError:
                failed.append(path)
                continue
            if path in self.stats:            # the new state is the one to compare with
                self.stats[path] = _stat(path)
                if self.stats[path] is None:
                    del self.stats[path]
        self.spoiled += [p for p in failed if p not in self.spoiled]
        return failed


# what to watch ----------------------------------------------------------------------------
def _site_dirs() -> set:
    """Where the standard library and installed packages live: watched whole."""
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    dirs |= set(site.getsitepackages()) | {site.getusersitepackages()}
    dirs |= {p for p in sys.path if p and os.path.basename(p) == "lib-dynload"}
    return {os.path.realpath(d) for d in dirs if os.path.isdir(d)}


def _import_roots() -> list:
    """(kind, folder): "whole" folders are watched file by file; "path" folders (other
    entries of sys.path, such as the folder the grader was started from) only where Python
    can import from them: their top-level modules and caches, and their packages."""
    import durable_lite
    whole = _site_dirs() | {os.path.realpath(os.path.dirname(durable_lite.__file__))}
    outermost = [d for d in sorted(whole)
                 if not any(d.startswith(other + os.sep) for other in whole)]
    roots = [("whole", d) for d in outermost]
    on_path = {os.path.realpath(entry or os.getcwd()) for entry in sys.path}
    for entry in sys.path:
        folder = os.path.realpath(entry or os.getcwd())
        if os.path.isdir(folder) and folder not in whole:
            roots.append(("path", folder))
    # A virtual environment's interpreter does not import from the site-packages of the
    # Python it was made from (pyvenv.cfg: include-system-site-packages = false), although
    # that folder sits inside the standard library's: tens of thousands of files no kernel
    # can reach, left out of every scan.
    for root in outermost:
        for name in ("site-packages", "dist-packages"):
            folder = os.path.join(root, name)
            if os.path.isdir(folder) and folder not in on_path:
                roots.append(("unreachable", folder))
    return roots


def scan(roots, listings=None) -> dict:
    """{path: signature} of every file Python could import from below `roots`, plus the
    interpreter itself.

    listings: {folder: (its signature, its entries)} from the last scan (and, for each
    folder walked, what to look at in it: _plan), updated. A folder
    whose own mtime and ctime have not moved has had no entry added, removed or renamed, so
    its entries are not read again; every file is still looked at (a file rewritten in
    place changes only its own times)."""
    listings = {} if listings is None else listings
    out = {}
    for path in {sys.executable, os.path.realpath(sys.executable)}:
        out[path] = _stat(path)
    unreachable = {root for kind, root in roots if kind == "unreachable"}
    for kind, root in roots:
        if kind == "whole":
            _walk(root, out, listings, unreachable)
            continue
        if kind == "unreachable":
            continue
        for name, is_dir in _entries(root, listings):
            path = os.path.join(root, name)
            if is_dir:
                if name == "__pycache__" or os.path.exists(os.path.join(path, "__init__.py")):
                    _walk(path, out, listings)
            elif name.split(".")[0].isidentifier() and name.endswith(CODE_SUFFIXES):
                out[path] = _stat(path)
    return out


def _entries(folder, listings) -> list:
    """[(name, is a folder)] of a folder: as last read, if the folder has not changed."""
    signature = _stat(folder)
    known = listings.get(folder)
    if known is not None and known[0] == signature:
        return known[1]
    try:
        with os.scandir(folder) as found:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in found]
    except OSError:
        listings.pop(folder, None)
        return []
    listings[folder] = (signature, entries)
    return entries


def _walk(folder, out, listings, unreachable=frozenset()) -> None:
    files, folders = _plan(folder, listings, unreachable)
    lstat = os.lstat
    for path in files:             # the bulk of a scan: ~20,000 files, no call but lstat
        try:
            st = lstat(path)
        except OSError:
            out[path] = None
            continue
        out[path] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    for path in folders:
        _walk(path, out, listings, unreachable)


def _plan(folder, listings, unreachable):
    """([file to look at], [folder to walk]) below `folder`, worked out again only when the
    folder's own signature has moved (an entry added, removed or renamed)."""
    entries = _entries(folder, listings)
    known = listings.get((folder, "plan"))
    if known is not None and known[0] is entries and known[1] == unreachable:
        return known[2]
    files, folders = [], []
    for name, is_dir in entries:
        path = folder + os.sep + name
        if is_dir:
            if name not in INERT_FOLDERS and path not in unreachable:
                folders.append(path)
        elif not name.endswith(INERT_SUFFIXES) and not CACHE_IN_FLIGHT.search(name):
            files.append(path)
    listings[(folder, "plan")] = (entries, unreachable, (files, folders))
    return files, folders


def _stat(path):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _remove(path) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _read(path):
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def _kept_roots(course_root):
    """(kind, path) pairs: "tree" keeps every file below (caches aside: they are judged by
    what they hold), "startup" what Python runs when it starts from a folder on its path,
    "scripts" what IPython runs from a startup folder, "config" only a profile's config
    files, "file" the one file."""
    import durable_lite
    roots = [(KIND_TREE, _real(Path(durable_lite.__file__).parent))]
    for folder in {*site.getsitepackages(), site.getusersitepackages(), *sys.path}:
        if folder and os.path.isdir(folder):
            roots.append((KIND_STARTUP, _real(folder)))
    for etc in {Path(sys.prefix) / "etc", Path(sys.base_prefix) / "etc",
                Path("/usr/local/etc"), Path("/etc")}:
        roots += [(KIND_TREE, _real(etc / "jupyter")), (KIND_TREE, _real(etc / "ipython"))]
    for folder in _your_folders(".ipython", "IPYTHONDIR"):
        profile = folder / "profile_default"
        roots += [(KIND_SCRIPTS, _real(profile / "startup")),     # not the README beside them
                  (KIND_CONFIG, _real(profile))]
    jupyter = _your_folders(".jupyter", "JUPYTER_CONFIG_DIR")
    roots += [(KIND_CONFIG, _real(folder)) for folder in jupyter]
    roots += [(KIND_FILE, _real(Path(sys.prefix) / "pyvenv.cfg"))]   # where the venv's Python looks
    if course_root is not None:
        roots += [(KIND_TREE, _real(Path(course_root) / "exercises")),
                  (KIND_TREE, _real(Path(course_root) / "solutions"))]
    return roots


def _your_folders(name, variable) -> set:
    """The IPython (or Jupyter) folders of the user grading, which their own kernels read:
    the one in their home, and the one the environment names instead, if it does."""
    folders = {Path(os.path.expanduser("~")) / name}
    if os.environ.get(variable):
        folders.add(Path(os.environ[variable]))
    return folders


def _real(path) -> Path:
    return Path(os.path.realpath(path))


def _files(kind, root: Path) -> set:
    if kind == KIND_FILE:
        return {str(root)} if root.is_file() else set()
    if not root.is_dir():
        return set()
    if kind == KIND_STARTUP:
        # What Python runs as it starts: `.pth` files, sitecustomize, and in a site folder
        # its top-level modules (a `.pth` line such as `import __editable___finder`).
        site_folder = str(root) in _site_dirs()
        return {str(p) for p in root.iterdir()
                if p.suffix == ".pth" or p.stem in ("sitecustomize", "usercustomize")
                or (site_folder and p.suffix == ".py" and p.is_file())}
    if kind == KIND_SCRIPTS:
        return {str(p) for p in root.iterdir() if p.suffix in STARTUP_SCRIPTS and p.is_file()}
    if kind == KIND_CONFIG:    # a profile's own config files, not its history or workspaces
        return {str(p) for p in root.iterdir()
                if p.is_file() and "config" in p.name and p.suffix in (".py", ".json")}
    out = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        out |= {os.path.join(folder, f) for f in files if not f.endswith((".pyc", ".pyo"))}
    return out
