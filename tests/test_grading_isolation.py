"""Two notebooks graded at once by one grader (`report --jobs 2`): the end of one does not
take the other's kernel with it.

When a notebook ends, the grader kills what is left of it, including the orphans that came
to the grader since its kernel started: children of the grader in another session that are
not a running kernel's reaper. A kernel being started beside it has such a reaper before the
grader has noted it as one; a sweep at that moment used to kill it, and the other notebook
was scored "kernel did not start" (or its questions "not checked").
"""

import threading

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
