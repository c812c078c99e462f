"""Copy a learner's functions out of the notebook into a module a fresh process can import.

A check that kills a real process needs the learner's code in that process. Functions
defined in notebook cells cannot be imported, so we write them into a module file: their
source (inspect.getsource works for cells), plus whatever global names they use —
modules become `import` lines, objects from installed packages become `from … import`
lines, other notebook functions are copied the same way, and plain constants are
written out. Anything else (an open connection, a set of seen keys…) cannot cross a
process boundary, which is exactly the point: the fresh process starts without it.
"""

import ast
import builtins
import importlib
import inspect
import linecache
import textwrap
import threading
import types


class NotPortable(Exception):
    """A function uses something that cannot be recreated in another process."""


def module_source(*roots, extra: str = "", call_as=None) -> str:
    """Python source defining `roots` (functions) and everything they use by global name.

    call_as: {name the check calls: function} for answers the learner may have defined under
    another name (`refund_key = my_key`): the module gets `refund_key = my_key` too."""
    imports, constants, bodies = [], [], []
    seen_names, seen_fns = set(), set()
    queue = list(roots)
    while queue:
        fn = queue.pop(0)
        fn = getattr(fn, "fn", fn)               # a @dl.workflow object wraps the function
        if id(fn) in seen_fns:
            continue
        seen_fns.add(id(fn))
        try:
            bodies.append(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError) as exc:
            raise NotPortable(f"the source of {getattr(fn, '__name__', fn)!r} cannot be read "
                              f"({exc}); define it in a notebook cell with `def`") from None
        names = _global_names(fn.__code__) | _decorator_names(fn)
        for name in sorted(names):
            if name in seen_names or name not in fn.__globals__:
                continue
            seen_names.add(name)
            value = fn.__globals__[name]
            line = _import_line(name, value)
            if line is not None:
                imports.append(line)
            elif _is_local_function(value, fn.__globals__):
                queue.append(value)
            elif _is_constant(value):
                constants.append(f"{name} = {value!r}")
            elif hasattr(builtins, name):
                continue
            else:
                raise NotPortable(
                    f"{fn.__name__} uses `{name}`, a {type(value).__name__} that lives only in "
                    "this notebook's memory, so a fresh process cannot have it. Pass it as an "
                    "argument, or create it inside the function.")
    aliases = []
    for name, fn in (call_as or {}).items():
        real = getattr(getattr(fn, "fn", fn), "__name__", name)
        if real != name:
            aliases.append(f"{name} = {real}")
    parts = ["# Written by durable_lite.grading: the learner's code, for a fresh process.",
             *sorted(set(imports)), "", *constants, "", *reversed(bodies), *aliases, extra]
    return "\n".join(parts) + "\n"


def _global_names(code: types.CodeType) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _decorator_names(fn) -> set:
    """Names used on the decorator lines above `def` (not part of the function's code)."""
    try:
        lines = inspect.getsource(fn).splitlines()
    except (OSError, TypeError):
        return set()
    names = set()
    for line in lines:
        stripped = line.strip()
        if stripped.startswith(("def ", "async def ")):
            break
        if stripped.startswith("@"):
            names.add(stripped[1:].split(".")[0].split("(")[0].strip())
    return names


def _import_line(name, value):
    if isinstance(value, types.ModuleType):
        module = value.__name__
        if module == "__main__":
            return None
        if "." in module:
            return f"import {module} as {name}" if name != module else f"import {module}"
        return f"import {module}" if name == module else f"import {module} as {name}"
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if not module or not qualname or module in ("__main__", "builtins") or "<" in qualname:
        return None
    if "." in qualname:
        return None
    try:
        if getattr(importlib.import_module(module), qualname) is value:
            alias = "" if name == qualname else f" as {name}"
            return f"from {module} import {qualname}{alias}"
    except (ImportError, AttributeError):
        return None
    return None


def _is_local_function(value, globals_) -> bool:
    fn = getattr(value, "fn", value)
    return inspect.isfunction(fn) and fn.__globals__ is globals_


def _is_constant(value) -> bool:
    """Plain data that `repr` writes out faithfully."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (tuple, list, frozenset, set)):
        return all(_is_constant(v) for v in value)
    if isinstance(value, dict):
        return all(_is_constant(k) and _is_constant(v) for k, v in value.items())
    return False


# a whole answer cell, for the ports of exercises 14 and 15 -----------------------------------
def cell_source(fn):
    """The whole cell (or file) `fn` was defined in, as Python compiled it, or None if it
    cannot be read. A port is more than one function (its steps, a class, helpers): the
    check saves the whole answer cell as a module rather than copying names one by one."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    lines = linecache.getlines(code.co_filename) if code is not None else []
    return "".join(lines) or None


_PARSING = threading.Lock()


def parse(source: str) -> ast.Module:
    """ast.parse, safe beside other threads. Before Python 3.13, turning a parse into ast
    objects counts its depth in one place per interpreter, and another thread parsing at
    the same moment (the traceback module does, to place its carets) can upset the count:
    "SystemError: AST constructor recursion depth mismatch" (met once by the exercise-15
    checks, which run side by side on threads). Ours take turns, and the one that meets
    another's parse tries again: nothing was half done."""
    for attempt in (1, 2, 3):
        try:
            with _PARSING:
                return ast.parse(source)
        except SystemError as error:
            if "recursion depth mismatch" not in str(error) or attempt == 3:
                raise


def defines(source: str, name: str) -> bool:
    """Whether module `source` binds `name` at its top level (a def, a class, an
    assignment). Source that does not parse counts as defining it: importing it reports
    the syntax error, with its line."""
    try:
        tree = parse(source)
    except SyntaxError:
        return True
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
    return False
