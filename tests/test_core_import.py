"""`import durable_lite` stays light: no widgets, plotting, dataframes or process tools
until a lesson asks for them. (How long it takes is reported by the benchmark.)"""

import json
import subprocess
import sys

HEAVY = ("ipywidgets", "matplotlib", "pandas", "numpy", "IPython", "subprocess",
         "multiprocessing", "asyncio", "concurrent", "hypothesis", "yaml")

PROBE = """
import json, sys
before = set(sys.modules)
import durable_lite as dl
engine = dl.Engine(dl.MemoryStore())        # using the core loads nothing heavy either

@dl.workflow("probe")
def probe(ctx):
    return ctx.step("x", lambda: 1)

engine.start(probe, run_id="p")
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_importing_and_using_the_core_loads_no_heavy_modules():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY]
    assert heavy == [], heavy
    assert "durable_lite.lab" not in loaded and "durable_lite.sim" not in loaded


def test_the_lazy_submodules_load_on_first_use():
    probe = ("import sys, durable_lite as dl\n"
             "assert 'durable_lite.sim' not in sys.modules\n"
             "dl.sim.World\n"
             "assert 'durable_lite.sim' in sys.modules\n"
             "assert 'subprocess' not in sys.modules\n"
             "dl.faults.CrashAt('x')\n")
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_import_alone_leaves_the_slow_standard_modules_for_first_use():
    """What made `import durable_lite` slow (measured with -X importtime): dataclasses (and
    the inspect module it loads), typing, hashlib (OpenSSL), socket, random, and faults.
    Each now loads when something needs it: Run/Step/Retry/Budget, a key, an Engine."""
    probe = ("import json, sys\n"
             "before = set(sys.modules)\n"
             "import durable_lite\n"
             "print(json.dumps(sorted(set(sys.modules) - before)))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    slow = {"dataclasses", "inspect", "typing", "hashlib", "socket", "random", "secrets",
            "durable_lite.faults", "durable_lite.policy", "durable_lite.run"}
    assert loaded & slow == set(), sorted(loaded & slow)


def test_the_crash_points_context_names_are_the_ones_faults_defines():
    """context.py names the crash points itself, so that it need not import faults."""
    from durable_lite import context, faults
    assert (context.BEFORE_STEP, context.AFTER_EFFECT, context.AFTER_CHECKPOINT) == faults.CRASH_POINTS


def test_every_lazy_module_is_reached_as_an_attribute_without_its_own_import():
    """A lesson writes `dl.otel.export(...)` or `dl.trace.build_trace(...)` with nothing but
    `import durable_lite as dl`; none of those modules loads before it is asked for."""
    probe = ("import json, sys\n"
             "import durable_lite as dl\n"
             "lazy = sorted(dl._LAZY)\n"
             "early = [m for m in lazy if 'durable_lite.' + m in sys.modules]\n"
             "missing = [m for m in lazy if not hasattr(dl, m)]\n"
             "assert callable(dl.otel.export) and callable(dl.trace.build_trace)\n"
             "assert set(lazy) <= set(dir(dl))\n"
             "print(json.dumps([lazy, early, missing]))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    lazy, early, missing = json.loads(out.stdout)
    assert {"trace", "otel", "lumpy", "sweep", "engines", "lab", "sim"} <= set(lazy)
    assert early == [] and missing == []
