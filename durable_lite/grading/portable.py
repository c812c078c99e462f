"""The learner's code for a fresh process: the notebook's own statements, run again.

A check that restarts a run needs the learner's code in a new process, and a restart is
only honest if that process builds everything the way a real one would: by running the
code again. So the module a fresh process imports is made of the top-level statements the
notebook's cells ran (the kernel's input history, `_ih`), never of values copied out of
the kernel: a salt drawn at import (`_SALT = uuid.uuid4().hex`), a cache (`_CACHE = {}`,
`@lru_cache`), a counter — each starts again from its own code, as after a real restart.

Only the statements the answers need are taken: for each name, the latest statement that
binds it (a `def`, a `class`, an assignment, an import, a block that assigns it), then the
names that statement uses, and so on (Python's own `symtable` says which names a function
reads from the module, so its local variables pull nothing in). Statements that change a
needed name in place (`CACHE[key] = value`, `COUNT += 1`) come along with it. A cell's
bare expressions (a call like `check(...)`, a value shown) are not run again: they show
things, they define nothing. A name no statement binds (something made with `globals()`,
say) cannot be rebuilt, which is exactly the point: a fresh process starts without it.
"""

import ast
import builtins
import importlib
import inspect
import io
import linecache
import os
import symtable
import sys
import sysconfig
import textwrap
import threading
import types


class NotPortable(Exception):
    """A function uses something that cannot be recreated in another process."""


def module_source(*roots, extra: str = "", call_as=None, given=()) -> str:
    """Python source that rebuilds `roots` (functions) and everything they use, by running
    again the notebook statements that made them.

    call_as: {name the check calls: function} for answers the learner may have defined under
    another name (`refund_key = my_key`): the module gets `refund_key = my_key` too.
    given: names the check sets in the fresh process itself (a drawn MAX_STEPS), never
    rebuilt from the notebook."""
    roots = [_unwrap(fn) for fn in roots]
    namespace = roots[0].__globals__ if roots else {}
    history = _History(namespace, given)
    taken, copied, aliases = set(), [], []
    for fn in roots:
        name = fn.__name__
        installed = _import_line(name, fn) if _from_installed_module(fn) else None
        if installed:       # the course's or a package's function: a fresh process imports it
            history.extra_imports.add(installed)
        elif history.rebuilds(name, fn):
            history.need(name, taken)
        else:       # not the function the notebook's name holds now: its own source
            copied.append(_own_source(fn))
            for used in sorted(_names_used(copied[-1])):
                history.need(used, taken, missing_ok=True)
    for name, fn in (call_as or {}).items():
        real = _unwrap(fn).__name__
        if real != name and history.rebuilds(name, _unwrap(fn)):
            history.need(name, taken)         # `refund_key = my_key`, as the notebook wrote it
        elif real != name:
            aliases.append(f"{name} = {real}")
    body = history.source(taken)
    parts = ["# Written by durable_lite.grading: the notebook's statements, run again.",
             body, *copied, *aliases, extra]
    return "\n".join(p for p in parts if p) + "\n"


def _unwrap(fn):
    fn = getattr(fn, "fn", fn)                # a @dl.workflow object wraps the function
    return inspect.unwrap(fn) if callable(fn) else fn


def _from_installed_module(fn) -> bool:
    """Defined in a module a fresh process imports too: the course's package, the standard
    library or site-packages (not a notebook, nor a script or test module beside it)."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    path = os.path.realpath(getattr(module, "__file__", None) or "")
    return bool(path) and path.startswith(_INSTALLED)


_INSTALLED = tuple(os.path.realpath(p) + os.sep for p in {
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),      # durable_lite/
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"]})


def _own_source(fn) -> str:
    free = getattr(getattr(fn, "__code__", None), "co_freevars", ())
    if free:        # made inside another function: its source alone cannot make it again
        raise NotPortable(
            f"{getattr(fn, '__name__', fn)!r} was made inside another function and uses its "
            f"{', '.join(f'`{name}`' for name in free)}: a fresh process can only make again a "
            "function defined at the top of a cell. Define it there with `def`.")
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise NotPortable(f"the source of {getattr(fn, '__name__', fn)!r} cannot be read "
                          f"({exc}); define it in a notebook cell with `def`") from None


class _Statement:
    def __init__(self, position, node, source):
        self.position, self.node, self.source = position, node, source
        self.binds, self.changes = _bound_names(node)
        self._now = self._later = None

    def names_used(self):
        """(names read when the statement runs, names read later by the functions it
        defines), as symtable sees them."""
        if self._now is None:
            self._now, self._later = _module_reads(self.source)
        return self._now, self._later


class _History:
    """The top-level statements of every cell the kernel ran, in the order it ran them."""

    def __init__(self, namespace, given=()):
        self.namespace = namespace
        self.given = frozenset(given)
        self.statements = []
        self.extra_imports = set()          # names the kernel has but no cell made: modules
        for cell in _cells(namespace):
            try:
                tree = parse(cell)
            except SyntaxError:
                continue                       # a cell that never ran defines nothing
            lines = _lines(cell)
            for node in tree.body:
                if isinstance(node, ast.Expr):
                    continue
                position = len(self.statements)
                self.statements.append(_Statement(position, node, _statement_source(lines, node)))

    def binding(self, name, before=None):
        end = len(self.statements) if before is None else before
        for statement in reversed(self.statements[:end]):
            if name in statement.binds:
                return statement
        return None

    def rebuilds(self, name, fn) -> bool:
        """The notebook's `name` is `fn` now, and some statement binds it."""
        current = self.namespace.get(name)
        return current is not None and _unwrap(current) is fn and self.binding(name) is not None

    def need(self, name, taken, before=None, missing_ok=False):
        if name in self.given:
            return
        statement = self.binding(name, before) or self.binding(name)
        if statement is None:
            self._without_statement(name, missing_ok)
            return
        for s in [statement] + [s for s in self.statements[statement.position + 1:]
                                if name in s.changes]:
            if s.position in taken:
                continue
            taken.add(s.position)
            now, later = s.names_used()
            for used in sorted(now - s.binds):
                self.need(used, taken, before=s.position, missing_ok=True)
            for used in sorted(later):
                self.need(used, taken, missing_ok=True)

    def _without_statement(self, name, missing_ok):
        if hasattr(builtins, name) or name not in self.namespace:
            if not missing_ok:
                raise NotPortable(f"no cell of this notebook defines `{name}`")
            return
        line = _import_line(name, self.namespace[name])
        if line is None:
            value = self.namespace[name]
            raise NotPortable(
                f"`{name}`, a {type(value).__name__}, was not made by any cell's code, so a "
                "fresh process cannot make it again. Create it in a cell (or inside the "
                "function that uses it), or pass it as an argument.")
        self.extra_imports.add(line)

    def source(self, taken) -> str:
        imports = sorted(self.extra_imports)
        return "\n".join(imports + [self.statements[i].source for i in sorted(taken)])


def _cells(namespace) -> list:
    """The source of every cell the kernel ran, in order: IPython's input history, which a
    kernel keeps in the notebook's namespace as `_ih`. Elsewhere (a script that runs cells
    itself), the cells the namespace's functions were compiled from, as linecache has them."""
    history = namespace.get("_ih")
    if isinstance(history, list) and all(isinstance(c, str) for c in history):
        return list(history)
    cells = []
    for value in list(namespace.values()):
        fn = _unwrap(value) if callable(value) else None
        if getattr(fn, "__globals__", None) is namespace:
            cell = "".join(linecache.getlines(fn.__code__.co_filename))
            if cell and cell not in cells:
                cells.append(cell)
    return cells


def _lines(cell) -> list:
    """The cell's lines as the parser numbers them (ends kept; only \\n, \\r and \\r\\n end a
    line), split once per cell: `ast.get_source_segment` splits the whole cell again for
    every statement, which made a long history quadratic."""
    return io.StringIO(cell, newline="").readlines()


def _statement_source(lines, node) -> str:
    """The statement's whole source, its decorators included (ast's positions of a
    decorated def start at `def`). Columns are UTF-8 byte offsets, as ast gives them."""
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        first = min(d.lineno for d in decorators) - 1
        return textwrap.dedent("".join(lines[first:node.end_lineno]))
    start, end = node.lineno - 1, node.end_lineno - 1
    if start == end:
        return lines[start].encode()[node.col_offset:node.end_col_offset].decode()
    head = lines[start].encode()[node.col_offset:].decode()
    tail = lines[end].encode()[:node.end_col_offset].decode()
    return textwrap.dedent("".join([head, *lines[start + 1:end], tail]))


def _bound_names(node):
    """(names the statement binds, names it changes in place) at the module's level."""
    binds, changes = set(), set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}, changes
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            binds.add(alias.asname or alias.name.split(".")[0])
        return binds, changes
    for child in _top_level_nodes(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
            binds.add(child.id)
        elif isinstance(child, (ast.Subscript, ast.Attribute)) and \
                isinstance(child.ctx, (ast.Store, ast.Del)):
            base = child
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if isinstance(base, ast.Name):
                changes.add(base.id)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.add(child.name)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            binds.update(a.asname or a.name.split(".")[0] for a in child.names)
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        changes.add(node.target.id)
    return binds, changes


def _top_level_nodes(node):
    """The nodes of a statement that run at the module's level (not inside a def or class)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and isinstance(
                current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(current))


def _module_reads(source):
    """(module names read when `source` runs, module names its functions read later)."""
    table = symtable.symtable(source, "<cell>", "exec")
    now = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    later, stack = set(), list(table.get_children())
    while stack:
        scope = stack.pop()
        stack.extend(scope.get_children())
        names = {s.get_name() for s in scope.get_symbols()       # `global n; n += 1` assigns
                 if s.is_global() and (s.is_referenced() or s.is_assigned())}
        if scope.get_type() == "class" and _runs_now(scope, table):
            now |= names
        else:
            later |= names
    return now, later


def _runs_now(scope, module_table) -> bool:
    """A class body at the module's level runs when the statement does."""
    return any(child is scope or child.get_id() == scope.get_id()
               for child in module_table.get_children())


def _names_used(source) -> set:
    now, later = _module_reads(source)
    return now | later


def _import_line(name, value):
    """An import that gives `name` in a fresh process, for a module or an object of an
    installed package (the grader's `check`, say), or None."""
    if isinstance(value, types.ModuleType):
        module = value.__name__
        if module == "__main__":
            return None
        return f"import {module}" if name == module else f"import {module} as {name}"
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if not module or not qualname or module in ("__main__", "builtins") or "." in qualname \
            or "<" in qualname:
        return None
    try:
        if getattr(importlib.import_module(module), qualname) is value:
            alias = "" if name == qualname else f" as {name}"
            return f"from {module} import {qualname}{alias}"
    except (ImportError, AttributeError):
        return None
    return None


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
