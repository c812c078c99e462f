"""The kernels' bytecode: a folder of its own for each grading run, and how to tell a
genuine cache from a planted one.

Python loads a `.pyc` instead of its source whenever the cache's header matches the
source's mtime and size, so a cache compiled from other code but stamped to match is
loaded as if it were the source. The kernels a grader starts therefore keep their caches
in a folder made for the grading run (their PYTHONPYCACHEPREFIX), never in a
`__pycache__`, where anyone could have planted one before grading began. The guard
(guard.py) watches this folder like the rest, and keeps a cache that appears in it only
if it holds exactly what its source compiles to: Python writes nothing else.
"""

import atexit
import importlib.util
import marshal
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

_state = {"folder": None}
lock = threading.RLock()


def folder() -> str:
    """The grading run's bytecode folder, made on first use and removed when the grader
    exits."""
    with lock:
        if _state["folder"] is None:
            _state["folder"] = os.path.realpath(
                tempfile.mkdtemp(prefix="durable-lite-grade-bytecode-"))
            atexit.register(shutil.rmtree, _state["folder"], True)
        return _state["folder"]


def source_of_cache(path):
    """The source file a cache belongs to, or None if `path` is not a cache of ours: in a
    __pycache__ beside its source, or at the source's own path inside the kernels'
    bytecode folder."""
    if not path.endswith(".pyc"):
        return None
    parent, name = os.path.split(path)
    stem = name.partition(".")[0] + ".py"
    seed = _state["folder"]
    if seed and path.startswith(seed + os.sep):
        return os.path.join(parent[len(seed):] or os.sep, stem)
    if os.path.basename(parent) == "__pycache__":
        return os.path.join(os.path.dirname(parent), stem)
    return None


def is_cache(path) -> bool:
    return source_of_cache(path) is not None


def genuine_cache(path) -> bool:
    """Whether a cache holds exactly the code its source compiles to (the header aside:
    Python loads it only if that matches its source too)."""
    source = source_of_cache(path)
    tag, _, opt = os.path.basename(path)[:-len(".pyc")].partition(".")[2].partition(".opt-")
    if source is None or tag != sys.implementation.cache_tag:
        return False
    try:
        data = Path(path).read_bytes()
        text = Path(source).read_bytes()
    except OSError:
        return False
    if data[:4] != importlib.util.MAGIC_NUMBER or len(data) < 16:
        return False
    try:
        cached = marshal.loads(data[16:])       # data only: nothing in it runs
        compiled = compile(text, source, "exec", dont_inherit=True,
                           optimize=int(opt) if opt.isdigit() else 0)
    except (ValueError, EOFError, TypeError, SyntaxError):
        return False
    return cached == compiled
