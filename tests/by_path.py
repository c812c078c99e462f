"""A script loaded as a module from its file.

The tools in tests/tools/ and tests/conftest.py are scripts, not modules on sys.path; a
test (or the conftest) that needs one loads it from its path, and sys.path stays as the
tests see it.
"""

import importlib.util
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def load(path, name=None):
    """The module the file at `path` defines (relative paths are under tests/), run once
    more on each call: a fresh module, never the one pytest already loaded."""
    path = TESTS / path
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
