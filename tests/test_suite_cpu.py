"""The suite's CPU meter (tests/tools/suite_cpu.py) charges a test with what its processes
spent, a child's children included, and says what each file cost."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from by_path import TESTS, load

TOOL = TESTS / "tools" / "suite_cpu.py"
suite_cpu = load(TOOL)

# The meter, registered as tests/conftest.py registers it: when the variable asks for it.
CONFTEST = f'''
import importlib.util
spec = importlib.util.spec_from_file_location("suite_cpu", {str(TOOL)!r})
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)

def pytest_configure(config):
    tool.register_if_asked(config)
'''

# The first test's child starts a grandchild that burns 0.6 s of CPU and waits for it, then
# waits itself: while the child lives, only its cutime holds what the grandchild cost. The
# second test ends the child, which moves that cost into the worker's own account: charged
# once, to the first test, not again to the second.
TESTS = '''
import subprocess, sys, time
from pathlib import Path

BURN = "import time; all(iter(lambda: time.process_time() < 0.6, False))"
CHILD = (f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BURN!r}], check=True);"
         " sys.stdin.read()")
started = []

def waited_for_cpu(pid):
    fields = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()
    return int(fields[13]) + int(fields[14])

def test_burns_in_a_grandchild():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE)
    started.append(child)
    deadline = time.monotonic() + 120
    while not waited_for_cpu(child.pid):
        assert time.monotonic() < deadline, "the grandchild never ended"
        time.sleep(0.05)

def test_ends_the_child():
    child = started[0]
    child.stdin.close()
    assert child.wait(120) == 0
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the meter reads /proc")
def test_a_grandchilds_cpu_is_charged_once_to_the_test_that_started_it(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")        # this folder is the whole run
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_burn.py").write_text(TESTS)
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "test_burn.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
                                               PYTEST_ADDOPTS="",
                                               DURABLE_LITE_SUITE_CPU="cpu.jsonl"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = (tmp_path / "cpu.jsonl").read_text().splitlines()
    cpu = {json.loads(line)["id"]: json.loads(line)["cpu"] for line in lines}
    assert cpu["test_burn.py::test_burns_in_a_grandchild"] >= 0.55, cpu
    assert cpu["test_burn.py::test_ends_the_child"] < 0.3, cpu


def test_the_summary_adds_up_each_file():
    rows = [{"id": "tests/a.py::x", "cpu": 3.0, "wall": 5.0},
            {"id": "tests/a.py::y", "cpu": 1.0, "wall": 1.0},
            {"id": "tests/b.py::z", "cpu": 4.0, "wall": 0.5}]
    text = suite_cpu.summary(rows)
    assert text.startswith("3 tests, 8 CPU-s (on two cores, about 4 s of the suite)")
    files = [line.split() for line in text.splitlines() if line.endswith(".py")]
    assert [(f[-1], f[0], f[1], f[2]) for f in files] == [("tests/a.py", "4.0", "50.0%", "6.0"),
                                                          ("tests/b.py", "4.0", "50.0%", "0.5")]
