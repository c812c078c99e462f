"""One graded notebook, kept apart from every other: a private home, a private kernel, and
nothing left running when it is done.

Each notebook gets a sandbox: its own temporary HOME, IPYTHONDIR, Jupyter config, data and
runtime folders, TMPDIR and working folder, so an IPython startup file or a config file it
writes lands in its own sandbox and is gone with it. The kernel is started from a command
the grader builds (never from an installed kernelspec, which a notebook could rewrite),
with Jupyter's config files switched off, Python's user site-packages ignored, and
bytecode read only from the grader's own folder (bytecode.py), never from a
`__pycache__`.

Its processes are ended together: the kernel runs under a small parent (reaper.py) that is
a child subreaper, in a session of its own, and the grader is a subreaper too. A process
the notebook starts stays below one of them whatever it does to its session, group and
environment — even when it kills the kernel's parent. At the end, or when the time runs
out, the grader asks the parent to kill everything below it, then kills whatever is left:
the parent's tree and process group, every process that carries the sandbox's marker in
its environment, and the orphans re-parented to the grader since the kernel started.

What the kernel prints is kept only up to a cap (KeptOutputs, OutputBudget): an answer
that prints hundreds of MB leaves its first and last characters in the notebook, a line
saying how much was cut, and the grader's memory as it was.

What a sandbox does not do: it is not a container. Notebooks graded at the same moment run
as the same user, so one that goes looking for another's temporary folder while both run
could disturb it (grade with `--jobs 1` to rule that out). The shared files a notebook could
change to reach a later one are the guard's (guard.py). docs/grading.md says so.
"""

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..engines.processes import watchdog
from . import bytecode, reaper
from .guard import Guard

MARKER = "DURABLE_LITE_SANDBOX"


def start_guard(course_root=None) -> Guard:
    """A guard for a grading run, made after the kernels' bytecode folder is filled.

    The folder is filled first by a kernel that runs no notebook (what ipykernel, IPython
    and the checks import: a few seconds, once), so the guard records those caches as they
    are and checks only what later kernels add. Without it the first notebook's kernel
    compiles it all and the guard checks every cache it wrote: slower, as safe."""
    _warm_up()
    return Guard(course_root)


_warmed = []


def _warm_up() -> None:
    with bytecode.lock:
        if _warmed:
            return
        _warmed.append(True)
        sandbox = Sandbox("bytecode")
        try:
            kernel = Kernel(sandbox)
            try:
                kernel.execute("from durable_lite.grading import protocol\nprotocol.preload()",
                               timeout=300)
            finally:
                kernel.stop()
        except Exception:   # noqa: BLE001 - a kernel that would not start grades nothing either
            pass
        finally:
            sandbox.remove()


def _short_temp():
    """The temporary folder, or /tmp where that one's path is long and /tmp is usable."""
    here = tempfile.gettempdir()
    if len(here) > 40 and os.path.isdir("/tmp") and os.access("/tmp", os.W_OK):
        return "/tmp"
    return here


class Sandbox:
    """The private folders and environment of one notebook's kernel."""

    def __init__(self, label="notebook"):
        # A short path: the kernel's TMPDIR is inside it, and a Unix socket made there
        # (multiprocessing's fork server, before Python 3.12 on Linux and always on macOS)
        # must stay under 104-108 characters in all. "15_port_to_temporal_and_langgraph"
        # is "15" here, and a long temporary folder (macOS's /var/folders/...) gives way
        # to /tmp.
        short = label.split("_")[0]
        self.root = Path(tempfile.mkdtemp(prefix=f"dl-grade-{short}-", dir=_short_temp()))
        self.token = os.urandom(8).hex()
        self.home = self.root / "home"
        self.ipython = self.home / ".ipython"
        self.config = self.root / "jupyter" / "config"
        self.data = self.root / "jupyter" / "data"
        self.runtime = self.root / "jupyter" / "runtime"
        self.tmp = self.root / "tmp"
        self.work = self.root / "work"
        for folder in (self.home, self.ipython, self.config, self.data, self.runtime, self.tmp,
                       self.work):
            folder.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("JUPYTER", "IPYTHON", "JPY_", "PYTHONSTARTUP", MARKER,
                                    "DURABLE_LITE_PROGRESS"))}
        env.update({
            "HOME": str(self.home), "USERPROFILE": str(self.home),
            "IPYTHONDIR": str(self.ipython),
            "JUPYTER_CONFIG_DIR": str(self.config), "JUPYTER_DATA_DIR": str(self.data),
            "JUPYTER_RUNTIME_DIR": str(self.runtime), "JUPYTER_NO_CONFIG": "1",
            "JUPYTER_PLATFORM_DIRS": "1",
            "TMPDIR": str(self.tmp), "TEMP": str(self.tmp), "TMP": str(self.tmp),
            "PYTHONNOUSERSITE": "1",
            # The kernel and the processes it starts keep their bytecode in the grading
            # run's own folder (bytecode.py), never in a __pycache__, where anyone
            # could have planted a cache before grading began.
            "PYTHONPYCACHEPREFIX": bytecode.folder(),
            "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(self.tmp / "matplotlib"),
            MARKER: self.token,
        })
        env.pop("PYTHONDONTWRITEBYTECODE", None)     # they may write there: the guard checks
        return env

    def planted(self) -> list:
        """Files in the sandbox's config folders that neither IPython nor Jupyter write on
        their own: a startup script or config someone else's notebook put here."""
        found = []
        startup = self.ipython / "profile_default" / "startup"
        if startup.exists():
            found += [p for p in startup.iterdir() if p.name != "README"]
        profile = self.ipython / "profile_default"
        if profile.exists():
            found += [p for p in profile.glob("*config*.py")]
        found += [p for p in self.config.rglob("*") if p.is_file()]
        return sorted(str(p.relative_to(self.root)) for p in found)

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)


# the kernel ---------------------------------------------------------------------------
class DeadKernel(Exception):
    def __init__(self, message="", died=True):
        super().__init__(message)
        self.died = died              # False: alive, but it never answered


class CellTimeout(Exception):
    pass


class Kernel:
    """A kernel in a sandbox: execute code, collect its outputs, read the reply."""

    def __init__(self, sandbox: Sandbox, startup_timeout: float = 60.0):
        from jupyter_client import KernelManager
        from jupyter_client.kernelspec import KernelSpec

        self.sandbox = sandbox
        launcher = [sys.executable, "-m", "durable_lite.grading.kernel_launcher",
                    "-f", "{connection_file}"]
        if sys.platform.startswith("linux"):
            launcher = [sys.executable, "-m", "durable_lite.grading.reaper", "--", *launcher]
        self.km = KernelManager(connection_file=str(sandbox.runtime / "kernel.json"))
        self.km._kernel_spec = KernelSpec(argv=launcher, display_name="Python 3 (grading)",
                                          language="python", env={})
        self.pid = None
        self.started = None
        self.kc = None
        reaper.become_subreaper()      # an orphan whose reaper was killed comes to us
        # From the moment the reaper exists until it is in _REAPERS it looks like an orphan
        # of ours (another session, started lately): a notebook graded beside this one that
        # ends now must not sweep it up, so the two take turns (see survivors).
        with _REAPERS_LOCK:
            with open(sandbox.root / "kernel.log", "wb") as log:
                self.km.start_kernel(env=sandbox.env(), cwd=str(sandbox.work), stdout=log,
                                     stderr=log)
            self.pid = self.km.provisioner.process.pid if self.km.provisioner else None
            if self.pid is not None:
                _REAPERS.add(self.pid)
        if self.pid is not None:
            self.started = reaper.processes().get(self.pid, (0, 0, 0, None))[3]
        self.kc = self.km.blocking_client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=startup_timeout)
        except RuntimeError as exc:
            died = not self.alive()
            self.stop()
            raise DeadKernel(f"the kernel did not start: {exc}", died) from None

    @classmethod
    def start(cls, sandbox: Sandbox, startup_timeout: float = 60.0, attempts: int = 2):
        """A started kernel. One that dies before its first reply is started again (up to
        `attempts` in all): it has run nothing of the notebook yet, and a kernel can die
        there for reasons of the machine's, not the learner's (the ports it was given were
        picked free, and another process on a busy machine may bind one first)."""
        for attempt in range(1, attempts + 1):
            try:
                return cls(sandbox, startup_timeout)
            except DeadKernel as exc:
                if attempt == attempts or not exc.died:    # one that never answered: no
                    raise

    def alive(self) -> bool:
        return self.km.is_alive()

    def execute(self, code: str, timeout: float, user_expressions=None, outputs=None) -> dict:
        """Run `code`; keep its outputs (nbformat) in `outputs`, a KeptOutputs; return the
        shell reply's content. Raises CellTimeout, or DeadKernel when the kernel is gone."""
        msg_id = self.kc.execute(code, user_expressions=user_expressions or {},
                                 allow_stdin=False, stop_on_error=False)
        deadline = time.monotonic() + timeout
        try:
            self._outputs_until_idle(msg_id, deadline, outputs)
        finally:
            if outputs is not None:
                outputs.close()          # says what it cut, even of a cell that ran too long
        return self._reply(msg_id, deadline)

    def _outputs_until_idle(self, msg_id, deadline, kept) -> None:
        idle = False
        while not idle:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CellTimeout()
            try:
                msg = self._iopub_message(timeout=min(0.5, left))
            except Exception:                     # queue.Empty: nothing yet
                if not self.alive():
                    raise DeadKernel() from None
                continue
            if (msg.get("parent_header") or {}).get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and msg["content"].get("execution_state") == "idle":
                idle = True
            elif kind == "clear_output" and kept is not None:
                kept.clear()
            elif kind in KeptOutputs.KINDS and kept is not None:
                if msg["content"] is None:
                    kept.add_unread(kind, msg["size"], msg["content_frame"])
                else:
                    kept.add(kind, msg["content"])

    def _iopub_message(self, timeout: float) -> dict:
        """The next message on the kernel's output channel. One whose content is larger than
        MESSAGE_READ bytes is not decoded (jupyter_client's decoder holds up to thirteen
        times a message's size while it reads one, and the kernel sends what a cell printed
        in 0.2 s as one message: 17 MB for a loop of prints): its type and parent are read,
        its content is None, its size and its undecoded content_frame given. Nothing is
        lost by not checking its signature: no score comes from an output."""
        import json
        from queue import Empty
        socket = self.kc.iopub_channel.socket
        if not socket.poll(int(timeout * 1000)):
            raise Empty()
        _, frames = self.kc.session.feed_identities(socket.recv_multipart(copy=False), copy=False)
        # frames: signature, header, parent header, metadata, content, buffers...
        size = len(frames[4]) if len(frames) > 4 else 0
        if size <= MESSAGE_READ:
            return self.kc.session.deserialize(frames, copy=False)
        header = json.loads(frames[1].bytes)
        return {"msg_type": header.get("msg_type"), "header": header,
                "parent_header": json.loads(frames[2].bytes), "content": None, "size": size,
                "content_frame": frames[4]}

    def _reply(self, msg_id, deadline) -> dict:
        while True:
            left = deadline - time.monotonic()
            try:
                reply = self.kc.get_shell_msg(timeout=max(0.5, min(5.0, left)))
            except Exception:
                if not self.alive():
                    raise DeadKernel() from None
                if left <= 0:
                    raise CellTimeout() from None
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                return reply["content"]

    def interrupt(self, wait: float = 5.0) -> bool:
        """Interrupt the running cell; True if the kernel is idle again within `wait`."""
        try:
            self.km.interrupt_kernel()
        except Exception:
            return False
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                msg = self._iopub_message(timeout=0.5)   # a flood it stops is not read
            except Exception:
                if not self.alive():
                    return False
                continue
            if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                try:                                  # drain the interrupted cell's reply
                    self.kc.get_shell_msg(timeout=1)
                except Exception:
                    pass
                return True
        return False

    def stop(self):
        """End the kernel and every process it started, however it tried to get away."""
        try:
            if self.kc is not None:
                self.kc.stop_channels()
        except Exception:
            pass
        self._ask_the_reaper()
        kill_everything(self.pid, self.sandbox.token, self.started)
        _REAPERS.discard(self.pid)
        try:
            self.km.shutdown_kernel(now=True)
        except Exception:
            pass
        try:
            self.km.cleanup_resources()
        except Exception:
            pass

    def _ask_the_reaper(self, wait: float = 15.0):
        """SIGTERM the kernel's parent: it kills the kernel and everything below it, then
        exits. Waited for (generously: a loaded machine is slow), then swept regardless."""
        if self.pid is None or not watchdog.alive(self.pid):
            return
        try:
            os.kill(self.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while watchdog.alive(self.pid) and time.monotonic() < deadline:
            reaper.reap_children()
            time.sleep(0.02)


# what the grader keeps of a notebook's output -------------------------------------------
CELL_OUTPUT_LIMIT = 200_000          # characters of one cell's output kept, from its start
NOTEBOOK_OUTPUT_LIMIT = 2_000_000    # characters of a whole notebook's output kept
TAIL_KEPT = 10_000                   # and of each stream cut, its last characters
ERROR_KEPT = 20_000                  # characters of an error's traceback, always kept
LINE_KEPT = 2_000                    # characters of one line of it, and of its message
MESSAGE_READ = 1_000_000             # bytes of one output message read at most (see below)


class KeptOutputs:
    """One cell's outputs as the grader keeps them, in `outputs` (nbformat outputs): the
    first `limit` characters, then of each stream only its last TAIL_KEPT characters, after
    a line saying how many were cut; an error always, shortened to ERROR_KEPT.

    An answer can print hundreds of MB, and the grader keeps every notebook's outputs until
    it is done (a class report writes them all at the end), so what it keeps is bounded.
    The end of a stream is kept because that is where a check cell prints its report, after
    whatever the answer printed while the tests ran. A stream's text is cut before it
    becomes an output, and of a message too large to read only the start is read (the
    kernel sends what a cell printed in the last 0.2 s as one: Kernel._iopub_message), so
    a flood is never held whole."""

    KINDS = ("stream", "display_data", "execute_result", "error")

    def __init__(self, outputs=None, limit: int = CELL_OUTPUT_LIMIT):
        self.outputs = [] if outputs is None else outputs
        self.limit = limit
        self.cut = 0             # characters of stream text not kept
        self.dropped = 0         # displays and results that did not fit
        self.unread = 0          # bytes of outputs too large to read (Kernel._iopub_message)
        self._reset()

    def _reset(self):
        self.size = 0            # characters kept in `outputs`
        self.past = {}           # stream name -> characters that came past the limit
        self.tails = {}          # stream name -> the last TAIL_KEPT of those
        self.unsaid = 0          # bytes not read since the last line saying so

    def clear(self) -> None:
        self.outputs.clear()
        self._reset()
        self.cut = self.dropped = self.unread = 0

    def add(self, kind: str, content: dict) -> None:
        """Keep an output of the kernel's (an IOPub message's type and content)."""
        from nbformat.v4 import new_output
        if kind == "stream":
            self._add_text(content.get("name", "stdout"), content.get("text", ""))
            return
        self._close_cut()                   # what was kept of the text comes before it
        if kind == "error":
            self._keep(new_output("error", **_shortened_error(content)))
        elif _text_size(content.get("data")) <= self.limit - self.size:
            self._keep(new_output(kind, **{k: v for k, v in content.items()
                                           if k in ("data", "metadata", "execution_count")}))
        else:
            self.dropped += 1

    def add_unread(self, kind: str, size: int, content_frame=None) -> None:
        """An output too large to read (`size` bytes of JSON): of a stream, the start of its
        text is kept while the cell has room (_stream_head); the rest is counted."""
        room = max(0, self.limit - self.size)
        if kind == "stream" and room and not self.unsaid and content_frame is not None:
            name, head = _stream_head(content_frame, room)     # the start of a flood only
            self._add_text(name, head)
        self.unread += size
        self.unsaid += size

    @property
    def trimmed(self) -> bool:
        return bool(self.cut or self.dropped or self.unread)

    def close(self) -> None:
        """Say what was not kept, and add what was kept of the end of every stream cut."""
        self._close_cut()
        if self.dropped:
            self._keep_stream("stderr", f"[the grader did not keep {self.dropped} display(s) "
                                        f"of this cell: past the {self.limit:,} characters of "
                                        "output it keeps]\n")

    def summary(self) -> str:
        parts = [f"{self.cut:,} characters cut"] if self.cut else []
        parts += [f"{self.dropped} display(s) not kept"] if self.dropped else []
        parts += [f"{self.unread:,} bytes in messages too large to read"] if self.unread else []
        return (", ".join(parts) + f" (it kept {self.limit:,} characters of this cell's "
                f"output from its start and the last {TAIL_KEPT:,} of each stream)")

    def _add_text(self, name, text):
        room = max(0, self.limit - self.size)
        if room and self.unsaid:
            self._close_cut()                # the line about what was not read comes first
        if len(text) > room:
            rest = text[room:]
            self.past[name] = self.past.get(name, 0) + len(rest)
            self.tails[name] = (self.tails.get(name, "") + rest[-TAIL_KEPT:])[-TAIL_KEPT:]
            text = text[:room]
        if text:
            self._keep_stream(name, text)

    def _close_cut(self):
        """Say what was not read since the last output kept, then add what was kept of the
        end of each stream cut, after a line saying how much of it was cut."""
        if self.unsaid:
            self._keep_stream("stderr", f"\n[... the grader did not keep {self.unsaid:,} bytes "
                                        "of output here: sent in messages larger than the "
                                        f"{MESSAGE_READ:,} bytes it reads at once, of which it "
                                        "keeps at most the start ...]\n")
            self.unsaid = 0
        tails, past = self.tails, self.past
        self.tails, self.past = {}, {}
        for name, tail in tails.items():
            cut = past[name] - len(tail)
            self.cut += cut
            line = (f"\n[... {cut:,} characters of {name} cut by the grader, which keeps "
                    f"{self.limit:,} characters of this cell's output from its start and the "
                    f"last {TAIL_KEPT:,} of each stream ...]\n") if cut else ""
            self._keep_stream(name, line + tail)

    def _keep_stream(self, name, text):
        from nbformat.v4 import new_output
        last = self.outputs[-1] if self.outputs else None
        self.size += len(text)
        if last is not None and last.output_type == "stream" and last.name == name:
            last.text += text                 # consecutive prints, as a notebook shows them
        else:
            self.outputs.append(new_output("stream", name=name, text=text))

    def _keep(self, output):
        self.size += _text_size({k: v for k, v in output.items() if k != "output_type"})
        self.outputs.append(output)


class OutputBudget:
    """What the grader keeps of one notebook's output: a KeptOutputs for each cell, all of
    them within NOTEBOOK_OUTPUT_LIMIT, and a note for each cell it cut."""

    def __init__(self, limit: int = NOTEBOOK_OUTPUT_LIMIT):
        self.left = limit
        self.notes = []

    def cell(self, outputs) -> KeptOutputs:
        return KeptOutputs(outputs, min(CELL_OUTPUT_LIMIT, self.left))

    def spend(self, kept: KeptOutputs, where: str) -> None:
        self.left = max(0, self.left - kept.size)
        if kept.trimmed:
            self.notes.append(f"{where} printed more than the grader keeps: {kept.summary()}")


def _stream_head(content_frame, chars: int):
    """(stream name, the first `chars` or so characters of its text) of a stream message's
    content, decoded from the start of its JSON ({"name": ..., "text": "..."}) alone."""
    start = bytes(memoryview(content_frame.buffer)[:4 * chars + 64]).decode("utf-8", "ignore")
    text_at = start.find('"text"')
    quote = start.find('"', start.find(":", text_at) + 1) if text_at != -1 else -1
    if quote == -1:
        return "stdout", ""
    name = "stderr" if '"stderr"' in start[:text_at] else "stdout"
    return name, _decoded_start(start[quote + 1:quote + 1 + chars])


def _decoded_start(body: str) -> str:
    """The text a JSON string's body begins with, when the body was cut anywhere: cut again
    up to an escape's length (\\u00e9) earlier until it decodes, and a lone half of a
    surrogate pair dropped (the cut fell between \\ud83d and \\ude00)."""
    import json
    for cut in range(len(body), max(-1, len(body) - 13), -1):
        try:
            text = json.decoder.scanstring('"' + body[:cut] + '"', 1)[0]
        except ValueError:          # an escape cut in two
            continue
        return text[:-1] if text and "\ud800" <= text[-1] <= "\udbff" else text
    return ""


def _text_size(value) -> int:
    """Characters in an output's content: its strings, however nested."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(str(k)) + _text_size(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(_text_size(v) for v in value)
    return 0 if value is None else len(str(value))


def _shortened_error(content) -> dict:
    """An error's name, message and traceback, in at most about ERROR_KEPT characters: its
    message's start and the traceback's last lines (where the error was raised)."""
    lines, room = [], ERROR_KEPT
    for line in reversed([str(x) for x in content.get("traceback", [])]):
        line = _shortened(line)
        if len(line) > room:
            break
        lines.insert(0, line)
        room -= len(line)
    return {"ename": _shortened(str(content.get("ename", ""))),
            "evalue": _shortened(str(content.get("evalue", ""))), "traceback": lines}


def _shortened(text: str) -> str:
    return text if len(text) <= LINE_KEPT else text[:LINE_KEPT] + " [... cut by the grader]"


# ending every process -----------------------------------------------------------------
_REAPERS = set()        # the reapers of the kernels this process is running now
_REAPERS_LOCK = threading.Lock()     # held while a kernel's reaper is started and entered


def _marked(pid: int, token: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER}={token}".encode() in environ.split(b"\0")


def survivors(root_pid, token, since=None) -> set:
    """Processes that belong to a sandbox: the root's descendants and process group, any
    process carrying the sandbox's marker, and — the grader being a subreaper too — the
    orphans re-parented to the grader since `since` (the root's start time) after the root
    itself was killed: children of ours in another session that are not a running
    kernel's reaper. And everything below those."""
    with _REAPERS_LOCK:          # a reaper being started now is in _REAPERS when this reads
        table = reaper.processes()
        reapers = set(_REAPERS)
    me = os.getpid()
    found = set()
    if root_pid is not None:
        found.add(root_pid)
        found |= {pid for pid, row in table.items() if row[1] == root_pid}
    if since is not None and me in table:
        session = table[me][2]
        found |= {pid for pid, (ppid, _, sid, started) in table.items()
                  if ppid == me and sid != session and started >= since
                  and pid not in reapers}
    found |= {pid for pid in table if pid != me and _marked(pid, token)}
    found |= reaper.descendants(found, table)
    found.discard(me)
    return {pid for pid in found if pid in table}


def kill_everything(root_pid, token, since=None, deadline_seconds: float = 30.0):
    """SIGKILL a sandbox's processes until none is left (a fork in between is caught by the
    next round). Without /proc: the process group, which the kernel's parent leads."""
    deadline = time.monotonic() + deadline_seconds
    while True:
        if root_pid is not None:
            try:
                os.killpg(root_pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass
        for pid in survivors(root_pid, token, since):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        reaper.reap_children()
        if not survivors(root_pid, token, since) or time.monotonic() > deadline:
            return
        time.sleep(0.05)
