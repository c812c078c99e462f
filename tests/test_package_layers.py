"""The package's layers, read from its source: imports flow one way, and features use the
engine's seam, never its insides.

    store            where runs live (knows nothing above it)
    engine, context  the step runner and what a workflow receives; lease.py keeps leases
    features         queue, versioning, saga, trace, sweep, ...: above the engine

Every import is counted, those inside functions too (the engine reaches the queue and
versioning modules only inside the methods that hand over to them): a loop of imports is
a loop, whenever it runs.
"""

import ast
import functools
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "durable_lite")
FEATURES = ("queue", "versioning", "saga", "trace", "sweep", "otel", "lumpy", "storm",
            "booking", "costs", "naive", "faults", "child", "capstone")


def modules():
    """{dotted name: path} of every module in the package."""
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path[:-3], ROOT).replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


MODULES = modules()


def imported_by(module):
    """The package's modules that `module` imports, anywhere in its source."""
    path = MODULES[module]
    package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            # `from . import jsonvalue` imports the module, not (for this graph) the package
            subs = {f"{base}.{a.name}" for a in node.names} & set(MODULES)
            out.update(subs or ({base} & set(MODULES)))
    out.discard(module)
    return out


@functools.lru_cache(maxsize=None)
def graph() -> dict:
    """{module: the package's modules it imports}, read when a test first asks (not when the
    file is collected: every worker of a parallel run collects it, one runs it)."""
    return {m: imported_by(m) for m in MODULES}


def find_cycle():
    """One loop of imports, as a list of modules, or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph()[m]):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state:
                loop = visit(n)
                if loop:
                    return loop
        state[m] = "done"
        stack.pop()
        return None

    for m in sorted(graph()):
        if m not in state:
            loop = visit(m)
            if loop:
                return loop
    return None


def test_the_package_has_no_loop_of_imports():
    loop = find_cycle()
    assert loop is None, "import loop: " + " -> ".join(loop)


def test_the_store_knows_nothing_above_it():
    for module, targets in graph().items():
        if module.startswith("durable_lite.store"):
            above = {t for t in targets if not t.startswith("durable_lite.store")
                     and t not in ("durable_lite.errors", "durable_lite.jsonvalue")}
            assert not above, f"{module} imports {sorted(above)}"


@pytest.mark.parametrize("feature", ["queue", "versioning", "saga", "trace"])
def test_a_feature_stands_above_the_engine_and_the_core_below_it(feature):
    """The features a lesson opens beside the engine are handed the engine (or a store);
    they never import it, and the core (engine, context, lease) imports no feature at the
    top of a module, only inside the method that hands over to it."""
    assert "durable_lite.engine" not in graph()[f"durable_lite.{feature}"]
    for core in ("engine", "context", "lease"):
        with open(MODULES[f"durable_lite.{core}"], encoding="utf-8") as f:
            tree = ast.parse(f.read())
        top = {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
        assert feature not in top, f"{core}.py imports {feature} at the top"


def underscore_uses_of_the_engine(path):
    """(line, text) of every `engine._name`, `self._engine._name`, `self.engine._name`...:
    an attribute with a leading underscore read from something named engine."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            base = node.value
            name = base.id if isinstance(base, ast.Name) else \
                base.attr if isinstance(base, ast.Attribute) else None
            if name in ("engine", "_engine", "eng"):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_nothing_outside_the_engine_reaches_into_it_or_its_leases():
    for module, path in MODULES.items():
        if module == "durable_lite.engine":
            continue
        assert underscore_uses_of_the_engine(path) == [], module
    # The leases a worker holds are kept by lease.Leases alone; the engine owns one per
    # process and hands it to each Context it makes.
    for module, path in MODULES.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        made = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Leases"]
        assert not made or module == "durable_lite.engine", (module, made)


def test_the_check_above_finds_what_it_looks_for(tmp_path):
    """The checks can fail: a module that reaches into the engine is found."""
    sample = tmp_path / "sample.py"
    sample.write_text("def f(engine, ctx):\n    engine._drive('r', True)\n"
                      "    return ctx._engine._keep_lease('r')\n")
    assert [text for _, text in underscore_uses_of_the_engine(sample)] == [
        "engine._drive", "ctx._engine._keep_lease"]
