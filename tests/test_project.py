"""The project's set-up files agree with each other: every dependency is pinned in
constraints.txt (which `make lab` and `make test` install with), the conda environment lists
them and uses the same pins, CI runs the README's test command, and `make lab` prints a
link that opens lesson 00."""

import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import process_support
from by_path import load
from durable_lite.lab.launch import READY_TIMEOUT
from durable_lite.lab.workspace import originals

try:
    import tomllib                     # Python 3.11+
except ImportError:                    # Python 3.10: pytest brings tomli there
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUPPORTED = ("3.10", "3.11", "3.12", "3.13")


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def pyproject():
    return tomllib.loads(read("pyproject.toml"))


def direct_dependencies(*extras):
    """{name: Requirement} of pyproject's extras (all of them if none named). The project's
    references to itself (test = durable-lite[lab], durable-lite[engines], ...) stand for
    those extras' dependencies."""
    project = pyproject()["project"]
    chosen = list(extras or project["optional-dependencies"])
    out, seen = {}, set()
    while chosen:
        extra = chosen.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        for text in project["optional-dependencies"][extra]:
            req = Requirement(text)
            if canonicalize_name(req.name) == canonicalize_name(project["name"]):
                chosen.extend(req.extras)
            else:
                out[canonicalize_name(req.name)] = req
    return out


def wanted_on(req, python_version):
    """Does pip install `req` on this Python? (sqlean.py: only from 3.12, by its marker)"""
    return req.marker is None or req.marker.evaluate({"python_version": python_version})


def constraints():
    """{name: [(version, Marker or None)]} from constraints.txt."""
    pins = {}
    for line in read("constraints.txt").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"constraints.txt: {line!r} is not an exact pin"
        pins.setdefault(canonicalize_name(req.name), []).append((spec.version, req.marker))
    return pins


def pin_for(pins, python_version):
    """The one version pinned for this Python (None if none applies)."""
    chosen = [v for v, marker in pins
              if marker is None or marker.evaluate({"python_version": python_version})]
    assert len(chosen) <= 1, f"more than one pin applies on Python {python_version}: {chosen}"
    return chosen[0] if chosen else None


def environment_yml():
    """(conda dependencies, pip lines) of the simple environment.yml we keep."""
    conda, pip, section = [], [], None
    for line in read("environment.yml").splitlines():
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped:
            continue
        if not line.startswith(" "):
            section = stripped.rstrip(":")
            continue
        if section != "dependencies":
            continue
        item = stripped.strip()
        if item == "- pip:":
            continue                                      # its items are indented deeper
        if item.startswith("- "):
            indent = len(line) - len(line.lstrip())
            (pip if indent > 4 else conda).append(item[2:].strip())
    return conda, pip


# pins -----------------------------------------------------------------------------------------
def test_every_direct_dependency_is_pinned_for_every_supported_python():
    pins = constraints()
    for name, req in direct_dependencies().items():
        assert name in pins, f"{name} (pyproject.toml) is not pinned in constraints.txt: run make lock"
        for python in SUPPORTED:
            if not wanted_on(req, python):
                continue                                  # its marker leaves this Python out
            version = pin_for(pins[name], python)
            assert version is not None, f"{name} has no pin for Python {python}: run make lock"
            assert req.specifier.contains(version, prereleases=True), (
                f"constraints.txt pins {name}=={version}, outside pyproject's {req.specifier}")


def test_reading_a_notebook_builds_no_iri_parser():
    """nbformat validates with jsonschema; from 4.24 on, jsonschema's format checks import
    rfc3987-syntax, which builds a parser at import (1.1-1.6 s of CPU, in every grader,
    JupyterLab and pytest process). pyproject.toml holds jsonschema below that."""
    probe = "import sys, nbformat, jsonschema; print('rfc3987_syntax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False", "importing nbformat loaded rfc3987_syntax"


def test_python_310_gets_the_older_releases_it_can_install():
    """pandas 3 and numpy 2.3+ need Python 3.11: the lock must give 3.10 other pins."""
    pins = constraints()
    assert int(pin_for(pins["pandas"], "3.10").split(".")[0]) < 3
    assert int(pin_for(pins["pandas"], "3.11").split(".")[0]) >= 3
    major, minor = map(int, pin_for(pins["numpy"], "3.10").split(".")[:2])
    assert (major, minor) < (2, 3)


def test_this_environment_was_installed_with_the_pins():
    """make test installs with -c constraints.txt: what runs the suite is what is pinned."""
    from importlib.metadata import PackageNotFoundError, version

    python = "%d.%d" % sys.version_info[:2]
    pins, checked = constraints(), 0
    for name, req in direct_dependencies("lab", "test").items():
        if not wanted_on(req, python):
            continue
        pinned = pin_for(pins[name], python)
        try:
            installed = version(name)
        except PackageNotFoundError:
            continue
        assert installed == pinned, f"{name} {installed} is installed; constraints.txt pins {pinned}"
        checked += 1
    assert checked >= 5


def test_the_makefile_installs_with_the_pins_and_can_refresh_them():
    makefile = read("Makefile")
    assert re.search(r"^\$\(STAMP\): pyproject\.toml constraints\.txt$", makefile, re.M)
    install = re.search(r"^INSTALL\s*:=(.*)$", makefile, re.M).group(1)
    assert "pip install" in install and "-c constraints.txt" in install
    assert "$(INSTALL) -e '.[test]'" in makefile
    assert re.search(r"^lock:", makefile, re.M) and "tests/tools/lock.py" in makefile
    assert "make lock" in read("constraints.txt")[:600]


def test_the_test_modules_rewritten_ahead_are_what_pytest_loads_until_their_source_changes(tmp_path):
    """`make bytecode` writes pytest's caches of the test modules (tests/tools/rewrite_tests.py):
    pytest must load them as its own, and must not load one whose module has changed."""
    from _pytest.assertion import rewrite
    tool = load("tools/rewrite_tests.py")
    assert os.path.join(ROOT, "tests", "test_project.py") in map(str, tool.test_modules())
    module = tmp_path / "test_sample.py"
    module.write_text("def test_sum():\n    total = 1 + 1\n    assert total == 3\n")
    assert tool.write_cache(module) is True and tool.write_cache(module) is False  # then up to date
    loaded = rewrite._read_pyc(module, tool.cache_of(module))
    assert loaded is not None and loaded.co_consts == rewrite._rewrite_test(module, None)[1].co_consts
    namespace = {}
    exec(loaded, namespace)
    with pytest.raises(AssertionError, match="assert 2 == 3"):      # its asserts rewritten
        namespace["test_sum"]()
    module.write_text(module.read_text().replace("3", "2"))
    assert rewrite._read_pyc(module, tool.cache_of(module)) is None      # stale: not loaded


def test_the_lock_merges_per_python_answers_into_markers():
    lock = load("tools/lock.py")
    resolved = {"3.10": {"numpy": ("numpy", "2.2.6"), "tomli": ("tomli", "2.5.0"), "six": ("six", "1.17.0")},
                "3.11": {"numpy": ("numpy", "2.4.6"), "six": ("six", "1.17.0")},
                "3.12": {"numpy": ("numpy", "2.4.6"), "six": ("six", "1.17.0")},
                "3.13": {"numpy": ("numpy", "2.5.0"), "six": ("six", "1.17.0")}}
    assert lock.merge(resolved) == [
        'numpy==2.2.6 ; python_version < "3.11"',
        'numpy==2.4.6 ; python_version >= "3.11" and python_version < "3.13"',
        'numpy==2.5.0 ; python_version >= "3.13"',
        "six==1.17.0",
        'tomli==2.5.0 ; python_version < "3.11"']
    text = read("pyproject.toml")
    assert lock.extras(text) == list(pyproject()["project"]["optional-dependencies"])
    assert lock.minimum_python(text) == (3, 10)


def test_environment_yml_lists_every_dependency_and_uses_the_pins():
    conda, pip = environment_yml()
    assert "-c constraints.txt" in pip                    # the same versions as make test
    assert "-e .[test]" in pip                            # the package itself, editable
    listed = {canonicalize_name(Requirement(p).name) for p in pip if not p.startswith("-")}
    wanted = set(direct_dependencies("lab", "test"))
    assert listed == wanted, f"environment.yml lists {sorted(listed)}; pyproject has {sorted(wanted)}"
    assert not [p for p in pip if not p.startswith("-") and Requirement(p).specifier], (
        "versions come from constraints.txt; environment.yml names packages only")
    python = Requirement(conda[0].replace("=", "==", 1) if "==" not in conda[0] else conda[0])
    assert python.name == "python"
    (spec,) = python.specifier
    assert spec.version in SUPPORTED, "conda's Python must be one the lock resolved"


# the two commands -------------------------------------------------------------------------------
def test_ci_runs_the_readmes_test_command():
    ci = read(".ci", "run")
    assert re.search(r"^make test$", ci, re.M)
    assert os.access(os.path.join(ROOT, ".ci", "run"), os.X_OK)


def test_the_readme_shows_the_two_commands_and_the_makefile_has_them():
    readme = read("README.md")
    assert re.search(r"^make lab\b", readme, re.M) and re.search(r"^make test\b", readme, re.M)
    makefile = read("Makefile")
    assert re.search(r"^lab:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "pip install" in makefile and "[test]" in makefile


# the README and the documents it links -----------------------------------------------------
# Issue "What a learner sees, round 2": a newcomer met a 31,000-character manual. The README
# keeps what a learner needs first; the workshop plan, grading, the package and maintenance
# live in docs/, each checked where it now stands (the plan by tests/test_lessons.py).
README_LIMIT = 10_000
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def documents():
    """README.md and every page in docs/, as paths relative to the repository."""
    docs = sorted(n for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))
    return ["README.md"] + [f"docs/{n}" for n in docs]


def prose(name):
    """A document without its fenced code blocks (a `# comment` there is no heading)."""
    return FENCE.sub("", read(name))


def anchors(name):
    """The fragments GitHub gives the headings of a markdown file."""
    seen, out = {}, set()
    for title in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", prose(name), re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def relative_links(name):
    """[(target file relative to the repository, fragment or None)] of a document's links,
    web links left out."""
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(name)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(name), path)) if path else name
        out.append((where, fragment or None))
    return out


def test_the_readme_stays_short():
    size = len(read("README.md"))
    assert size < README_LIMIT, (
        f"README.md has {size} characters: keep it to what a learner needs first, and put the "
        f"rest in a page under docs/ that it links")


@pytest.mark.parametrize("name", documents())
def test_every_relative_link_in_the_readme_and_docs_leads_somewhere(name):
    """Each link leads to a file of the repository; a #fragment into a markdown file names one
    of its headings."""
    broken = []
    for where, fragment in relative_links(name):
        if where.startswith("..") or not os.path.exists(os.path.join(ROOT, where)):
            broken.append(f"{where} (no such file)")
        elif fragment and where.endswith(".md") and fragment not in anchors(where):
            broken.append(f"{where}#{fragment} (no such heading)")
    assert not broken, f"{name} links to: {broken}"


def test_the_link_check_catches_a_missing_file_and_a_missing_heading():
    assert "which-python" in anchors("README.md")
    assert "your-work-lives-in-my_work" in anchors("README.md")
    assert "how-grading-works-and-what-it-cant-stop" in anchors("docs/grading.md")
    assert "no-such-heading" not in anchors("README.md")
    assert ("docs/workshop.md", "where-the-figures-come-from") in relative_links("README.md")
    assert ("README.md", "which-python") in relative_links("docs/setup.md")


def test_the_readme_links_every_page_in_docs():
    linked = {where for where, _ in relative_links("README.md")}
    orphans = [name for name in documents()[1:] if name not in linked]
    assert not orphans, f"no link from README.md to {orphans}"


def test_every_make_command_the_readme_and_docs_name_is_a_target():
    targets = set(re.findall(r"^([a-z][\w-]*):", read("Makefile"), re.M))
    named = {(name, command) for name in documents()
             for command in re.findall(r"(?:`|^)make ([a-z][\w-]*)", read(name), re.M)}
    assert {command for _, command in named} >= {"lab", "test", "grade", "report"}
    missing = sorted((name, command) for name, command in named if command not in targets)
    assert not missing, f"named but not in the Makefile: {missing}"


def test_the_core_package_has_no_dependencies():
    assert pyproject()["project"]["dependencies"] == []


def test_a_built_wheel_holds_every_module_of_every_subpackage(tmp_path):
    """What a non-editable install gets: the wheel setuptools builds from pyproject.toml
    must hold durable_lite and all its subpackages (store, lab, engines, grading, ...),
    every module in them, its data (the crash table lesson 15 reads), and nothing else of
    the repository (tests, notebooks)."""
    source = tmp_path / "source"                          # a copy: the build writes build/
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), source / name)
    shutil.copytree(os.path.join(ROOT, "durable_lite"), source / "durable_lite",
                    ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "dist"
    out.mkdir()
    build = ("import sys\n"
             "from setuptools import build_meta\n"
             "print(build_meta.build_wheel(sys.argv[1]))\n")
    done = subprocess.run([sys.executable, "-c", build, str(out)], cwd=source,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    wheel = out / done.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as zipped:
        inside = {n for n in zipped.namelist() if ".dist-info/" not in n}
    wanted = {p.relative_to(source).as_posix() for p in (source / "durable_lite").rglob("*.py")}
    packages = {os.path.dirname(p) for p in wanted if p.endswith("/__init__.py")}
    assert {"durable_lite/store", "durable_lite/lab", "durable_lite/engines",
            "durable_lite/grading"} <= packages
    wanted.add("durable_lite/engines/compare/crash_table.json")     # pyproject's package-data
    assert wanted - inside == set(), "missing from the wheel"
    assert inside - wanted == set(), "in the wheel but not part of the package"


def make_dry_run(target):
    """The commands `make TARGET` would run here, one per line."""
    return subprocess.run(["make", "-s", "-n", "--no-print-directory", target], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip().splitlines()


# How long `make lab` may take to print its URL: JupyterLab's own deadline in the launcher
# (generous: a first start on a busy laptop builds caches), plus time for the launcher
# itself to start and to report; a busy machine is slow, not broken.
URL_DEADLINE = READY_TIMEOUT + 60


class Launcher:
    """`make lab`'s last command, started the way a test can always clean up after: in a
    process group of its own (process_support), its output read line by line."""

    def __init__(self, argv, tmp_path):
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        for name in ("JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR"):
            env[name] = str(tmp_path / name.lower())
        self.log = tmp_path / "lab.log"
        self.argv = [*argv, "--log", str(self.log), "--no-browser"]
        self.process = process_support.start(self.argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True)
        self.lines, self.printed, self.errors = queue.Queue(), [], []
        threading.Thread(target=self._read, args=(self.process.stdout, self.lines), daemon=True).start()
        threading.Thread(target=lambda: self.errors.extend(self.process.stderr), daemon=True).start()

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.put(line)
        lines.put(None)

    def url(self, deadline: float = URL_DEADLINE) -> str:
        """Wait (up to `deadline` seconds) for the URL, the line make lab ends with."""
        end = time.monotonic() + deadline
        while not (self.printed and self.printed[-1].startswith("http")):
            try:
                line = self.lines.get(timeout=max(0.1, end - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"waited {deadline:.0f} s for make lab to print lesson 00's URL. "
                            f"{self.report()}", pytrace=False)
            if line is None:
                pytest.fail(f"make lab exited with code {self.process.wait()} before printing "
                            f"lesson 00's URL. {self.report()}", pytrace=False)
            self.printed.append(line.rstrip("\n"))
        return self.printed[-1]

    def report(self) -> str:
        try:
            log = self.log.read_text(errors="replace")[-2000:]
        except OSError:
            log = "(none)"
        return (f"It printed: {self.printed}; on stderr: {''.join(self.errors)[-2000:]!r}; "
                f"JupyterLab's log ends: {log}")

    def rest(self) -> list:
        """What it printed after the URL, once it has exited."""
        rest = []
        while (line := self.lines.get(timeout=30)) is not None:
            rest.append(line)
        return rest


def test_make_lab_prints_a_link_that_opens_lesson_00(tmp_path):
    """`make lab` is one of the README's two commands: its JupyterLab must really start, and
    the last line it prints must open lesson 00 (token included) once the server is ready.
    Ctrl-C stops it, and nothing it started is left running (however the test ends)."""
    argv = shlex.split(make_dry_run("lab")[-1])
    assert argv[1:3] == ["-m", "durable_lite.lab.launch"]
    if not os.path.exists(os.path.join(ROOT, argv[0])):
        argv[0] = sys.executable                          # e.g. the conda route: no .venv
    my_work = tmp_path / "my_work"                        # not the learner's own folder
    launcher = Launcher([*argv, "--my-work", str(my_work)], tmp_path)
    try:
        url = launcher.url()
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/lab/tree/notebooks/00_welcome\.ipynb"
                             r"\?token=([0-9a-f]{32,})", url)
        assert match, url
        port, token = match.groups()
        with urllib.request.urlopen(url, timeout=30) as answer:       # ready when printed
            assert answer.status == 200
            assert "/lab/tree/notebooks/00_welcome.ipynb" in answer.geturl()   # not a login page
            assert "JupyterLab" in answer.read().decode("utf-8", "replace")
        api = f"http://127.0.0.1:{port}/api/contents/notebooks/00_welcome.ipynb?content=0"
        with urllib.request.urlopen(f"{api}&token={token}", timeout=30) as answer:
            assert answer.status == 200
            assert json.load(answer)["writable"] is False          # the lessons are read-only
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(api, timeout=30)                    # no token, no course
        assert refused.value.code == 403
        assert sorted(p.name for p in my_work.iterdir()) == sorted(p.name for p in originals(ROOT))
        assert token not in " ".join(launcher.argv)       # not on a command line others can read
    finally:
        process_support.stop(launcher.process)            # Ctrl-C, then the whole group
        left = process_support.wait_until_none_left(str(tmp_path), deadline=60)
    assert left == [], f"still running after make lab was stopped: {left}"
    assert launcher.rest() == [], "the URL must stay the last line printed"
    assert launcher.process.returncode == 0, launcher.report()
    with pytest.raises(OSError):                          # the server stopped with it
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=5)


def test_a_command_a_test_starts_stops_at_ctrl_c_even_when_the_test_run_ignores_it():
    """A test run started in the background ignores SIGINT, and its children inherit that:
    the Ctrl-C that `stop` sends would do nothing, and each stop would wait out its grace.
    process_support.start gives the command Ctrl-C back, as a terminal would."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)      # as in `make test &`
    try:
        child = process_support.start(
            [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"],
            stdout=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert child.stdout.readline() == "ready\n"
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=60) != 0, "Ctrl-C did not stop it"
    finally:
        process_support.stop(child, grace=5)


@pytest.mark.skipif(not process_support.LINUX, reason="only Linux can tell a process to die "
                    "with its parent (PR_SET_PDEATHSIG)")
def test_jupyterlab_does_not_outlive_a_killed_make_lab(tmp_path):
    """The worst way for make lab to end: SIGKILL, with no chance to stop its server.
    JupyterLab must go by itself, not be left serving the course unseen."""
    launcher = Launcher([sys.executable, "-m", "durable_lite.lab.launch",
                         "--my-work", str(tmp_path / "my_work")], tmp_path)
    try:
        launcher.url()
        launcher.process.kill()
        launcher.process.wait(timeout=60)
        left = process_support.wait_until_none_left(str(tmp_path), deadline=60)
        assert left == [], f"still running 60 s after make lab was killed: {left}"
    finally:
        process_support.stop(launcher.process)


def test_the_lessons_that_run_real_engines_are_found_and_fail_only_where_they_cannot_run():
    """tests/conftest.py: lessons 14 and 15 (DBOS on SQLite and on Postgres; Temporal and
    LangGraph) are found by what their cells import; where an engine cannot run they fail
    before their first cell with the reason durable_lite.engines gives (never a skip); no
    other lesson is affected."""
    rules = load("conftest.py", "suite_rules")
    lessons = sorted(Path(ROOT, "notebooks").glob("*.ipynb"))
    flagged = {p.name for p in lessons if rules.uses_engines(p)}
    assert "14_graduating_to_a_real_engine.ipynb" in flagged
    assert {p.name for p in lessons if p.name[:2] in ("14", "15")} <= flagged
    assert not {p.name for p in lessons if p.name[:2] <= "08"} & flagged
    from durable_lite.engines.dbos import postgres, support as dbos_support
    from durable_lite.engines.temporal import server as temporal_server
    why = rules.engines_unavailable()
    checks = [dbos_support.sqlite_usable(), postgres.available(), temporal_server.available()]
    assert (why is None) == all(ok for ok, _ in checks)
    if why is not None:
        assert all(reason in why for ok, reason in checks if not ok)


def test_the_suite_keeps_its_temporary_files_in_memory_where_linux_has_room():
    """conftest.py moves TMPDIR to /dev/shm for the run where Linux has 4 GB free there
    (DURABLE_LITE_TEST_TMPDIR=keep leaves it alone)."""
    import tempfile
    here = tempfile.gettempdir()
    moved = here.startswith("/dev/shm/dlt-")
    if os.environ.get("DURABLE_LITE_TEST_TMPDIR") == "keep" or not sys.platform.startswith("linux"):
        assert not moved
        return
    if not os.path.isdir("/dev/shm"):
        assert not moved
        return
    assert moved or shutil.disk_usage("/dev/shm").free < 4 * 2 ** 30, here
    if moved:
        assert os.environ["TMPDIR"] == here and os.path.isdir(here)
        # where a failure's screenshot goes, to outlive the run (tests/browser/conftest.py)
        first = os.environ["DURABLE_LITE_TEST_FIRST_TMPDIR"]
        assert os.path.isdir(first) and not first.startswith("/dev/shm/dlt-"), first
        assert re.fullmatch(rf"/dev/shm/dlt-{os.getppid() if 'PYTEST_XDIST_WORKER' in os.environ else os.getpid()}-\w+", here), here


def test_a_run_removes_the_temporary_folders_that_runs_now_gone_left_in_memory(tmp_path):
    """A killed run's TMPDIR in /dev/shm holds memory until someone removes it: the next
    run removes each folder whose run (the pid in its name) has ended, and only those."""
    suite_conftest = load("conftest.py", "suite_conftest")
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    names = {"gone": f"dlt-{ended.pid}-abc123", "mine": f"dlt-{os.getpid()}-def456",
             "init's": "dlt-1-ghi789", "unnamed": "dlt-jkl012", "a file": f"dlt-{ended.pid}-x"}
    for what, name in names.items():
        if what == "a file":
            (tmp_path / name).write_text("not a folder")
        else:
            (tmp_path / name / "inside").mkdir(parents=True)
    suite_conftest._remove_abandoned(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted(n for w, n in names.items() if w != "gone")


def test_a_kernel_that_dies_at_start_under_nbval_says_how(monkeypatch, tmp_path):
    """conftest wraps nbval's kernel start: a kernel that dies before its first reply is
    reported with its exit status, this process's SIGCHLD handling and its threads."""
    from nbval import kernel as nbval_kernel
    (tmp_path / "ipykernel_launcher.py").write_text("raise SystemExit(3)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))        # the kernel's launcher exits at once
    with pytest.raises(RuntimeError) as died:
        nbval_kernel.start_new_kernel(startup_timeout=60, kernel_name="python3")
    message = str(died.value)
    assert "Kernel died before replying" in message and "its exit status 3" in message
    assert "SIGCHLD here SIG_DFL" in message and "MainThread" in message
