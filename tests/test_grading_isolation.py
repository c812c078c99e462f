"""Two notebooks graded at once by one grader (`report --jobs 2`): the end of one does not
take the other's kernel with it.

When a notebook ends, the grader kills what is left of it, including the orphans that came
to the grader since its kernel started: children of the grader in another session that are
not a running kernel's reaper. A kernel being started beside it has such a reaper before the
grader has noted it as one; a sweep at that moment used to kill it, and the other notebook
was scored "kernel did not start" (or its questions "not checked").
"""

import sys
import tempfile
import threading

import pytest
from jupyter_client import KernelManager

from durable_lite.grading import isolation


def test_a_sweep_at_the_moment_another_kernel_starts_leaves_that_kernel_alone(monkeypatch):
    start, swept = KernelManager.start_kernel, threading.Event()

    def start_then_sweep(self, **kwargs):
        """The kernel's reaper now exists; another notebook ends and sweeps (since=0: every
        orphan started at any time would be taken for its own)."""
        start(self, **kwargs)

        def sweep():
            isolation.kill_everything(None, "another notebook's token", since=0,
                                      deadline_seconds=5)
            swept.set()
        threading.Thread(target=sweep, daemon=True).start()
        swept.wait(0.5)          # without the turn-taking, the sweep is done well within this

    monkeypatch.setattr(KernelManager, "start_kernel", start_then_sweep)
    sandbox = isolation.Sandbox("sweep")
    kernel = None
    try:
        kernel = isolation.Kernel(sandbox, startup_timeout=120)
        assert swept.wait(120), "the other notebook's sweep never finished"
        reply = kernel.execute("print(6 * 7)", timeout=120)
        assert reply["status"] == "ok" and kernel.alive()
    finally:
        if kernel is not None:
            kernel.stop()
        sandbox.remove()


def test_a_kernel_that_dies_before_its_first_reply_is_started_once_more(monkeypatch):
    """A kernel can die before it answers for reasons of the machine's (a port it was given
    taken by another process first): nothing of the notebook has run, so it is started
    again, and a second death is reported."""
    start, launched = KernelManager.start_kernel, []

    def first_one_dies(self, **kwargs):
        launched.append(self)
        if len(launched) == 1:
            self._kernel_spec.argv = [sys.executable, "-c", "raise SystemExit(3)"]
        start(self, **kwargs)

    monkeypatch.setattr(KernelManager, "start_kernel", first_one_dies)
    sandbox = isolation.Sandbox("retry")
    kernel = None
    try:
        kernel = isolation.Kernel.start(sandbox, startup_timeout=120)
        assert len(launched) == 2
        assert kernel.execute("print(6 * 7)", timeout=120)["status"] == "ok"
    finally:
        if kernel is not None:
            kernel.stop()
        sandbox.remove()


def test_a_kernel_that_dies_every_time_or_never_answers_is_reported(monkeypatch):
    start, launched = KernelManager.start_kernel, []

    def launch(self, **kwargs):
        launched.append(self)
        code = "raise SystemExit(3)" if mode == "dies" else "import time; time.sleep(60)"
        self._kernel_spec.argv = [sys.executable, "-c", code]
        start(self, **kwargs)

    monkeypatch.setattr(KernelManager, "start_kernel", launch)
    for mode, starts, died in (("dies", 2, True), ("silent", 1, False)):
        launched.clear()
        sandbox = isolation.Sandbox("retry")
        try:
            with pytest.raises(isolation.DeadKernel, match="the kernel did not start") as caught:
                isolation.Kernel.start(sandbox, startup_timeout=3)
            assert len(launched) == starts and caught.value.died is died, mode
            assert not launched[-1].is_alive(), "the kernel that failed was left running"
        finally:
            sandbox.remove()


def test_a_grading_kernel_runs_without_a_debugger_and_with_the_notebook_folder_on_its_path():
    """kernel_launcher.py: ipykernel's launcher minus debugpy (a graded notebook is never
    debugged), and otherwise the same kernel: the notebook's own folder is importable."""
    sandbox = isolation.Sandbox("launcher")
    (sandbox.work / "beside_the_notebook.py").write_text("ANSWER = 42\n")
    kernel = None
    try:
        kernel = isolation.Kernel.start(sandbox, startup_timeout=120)
        kept = isolation.KeptOutputs()
        reply = kernel.execute(
            "import sys\nfrom ipykernel import debugger\nimport beside_the_notebook\n"
            "print(sys.modules.get('debugpy', 'absent'), debugger._is_debugpy_available,\n"
            "      '_pydevd_bundle' in sys.modules, beside_the_notebook.ANSWER)",
            timeout=120, outputs=kept)
        assert reply["status"] == "ok", kept.outputs
        assert [o["text"] for o in kept.outputs] == ["None False False 42\n"]
    finally:
        if kernel is not None:
            kernel.stop()
        sandbox.remove()


def test_a_sandbox_leaves_room_for_a_unix_socket_in_its_temporary_folder(tmp_path, monkeypatch):
    """multiprocessing's fork server listens on a Unix socket in TMPDIR (before Python 3.12
    on Linux, always on macOS): at most 104 characters on macOS, 108 on Linux."""
    socket = "/pymp-abcdefgh/listener-abcdefgh"
    long_temp = tmp_path / ("x" * 60)                # as long as macOS's /var/folders/...
    long_temp.mkdir()
    for temp in (None, str(long_temp)):
        monkeypatch.setattr(tempfile, "tempdir", temp)
        sandbox = isolation.Sandbox("15_port_to_temporal_and_langgraph")
        try:
            assert len(str(sandbox.tmp) + socket) < 104, sandbox.tmp
            assert sandbox.root.name.startswith("dl-grade-15-")
        finally:
            sandbox.remove()
