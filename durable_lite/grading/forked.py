"""New processes for a check that starts hundreds of them: forked from a process that has
only imported the course's package.

A check that plays a scenario at every crash point (exercise 16) starts a new worker
process for each phase of each case: a few hundred. A new interpreter spends most of its
0.15-0.3 s importing durable_lite before it runs a line of the answer. `Forks` starts one
interpreter that imports the package (and nothing of the answer) and then, for each
worker, forks a child of it. The child is a new process like any other: it imports the
answer's module afresh (the parent never did), runs it, and is SIGKILLed at its crash point
for real. Nothing of an earlier worker reaches a later one: each is forked from the same
untouched parent, not from the worker before it.

The parent answers one request a line on its stdin, and ends when its stdin closes: when
the check that started it ends, or dies. A child that runs past its time is SIGKILLed.
"""

import json
import os
import subprocess
import sys
import threading

from .child import ChildRun, _PACKAGE_PARENT, _added_to_sys_path

_PARENT = r'''
import json, os, signal, sys, time
sys.dont_write_bytecode = True
import durable_lite, durable_lite.grading.checks as checks
for name in sys.argv[1:]:
    __import__(name)
for line in sys.stdin:
    request = json.loads(line)
    folder, result_file = request["folder"], os.path.join(request["folder"], ".forked-result")
    if os.path.exists(result_file):
        os.unlink(result_file)
    pid = os.fork()
    if pid == 0:                                   # the worker: a new process
        code = 3
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.chdir(folder)
            sys.path.insert(0, folder)
            import importlib
            module = importlib.import_module("learner_code")
            result = getattr(module, request["call"])(*request["args"])
            out = {"result": result}
            code = 0
        except BaseException as exc:
            out = {"error": checks.sanitize(checks.describe(exc))}
        try:
            with open(result_file, "w", encoding="utf-8") as f:
                json.dump(out, f, default=repr)
        finally:
            os._exit(code)
    deadline = time.monotonic() + request["timeout"]
    status = None
    while status is None:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            status = None
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                status = "timeout"
                break
            time.sleep(0.002)
    if status != "timeout":
        status = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    sys.stdout.write(json.dumps({"status": status}) + "\n")
    sys.stdout.flush()
'''


class Forks:
    """One forking parent; `run(folder, call, *args)` is `child.run_fresh` made cheaper.
    Use one per thread (a request and its answer take turns on one pipe)."""

    def __init__(self, preload=()):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_PACKAGE_PARENT, *_added_to_sys_path(), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self.proc = subprocess.Popen([sys.executable, "-c", _PARENT, *preload],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        self.lock = threading.Lock()

    def run(self, folder, call, *args, timeout=60.0) -> ChildRun:
        request = {"folder": os.fspath(folder), "call": call, "args": list(args),
                   "timeout": timeout}
        with self.lock:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            return ChildRun(returncode=-1, error="the forking parent process ended")
        status = json.loads(line)["status"]
        if status == "timeout":
            return ChildRun(returncode=-1,
                            error=f"the fresh process did not finish within {timeout:.0f} s")
        run = ChildRun(status)
        try:
            with open(os.path.join(folder, ".forked-result"), encoding="utf-8") as f:
                out = json.load(f)
        except (OSError, ValueError):
            out = {}
        run.result, run.error = out.get("result"), out.get("error")
        if status not in (0, -9) and run.error is None:
            run.error = f"exit status {status}"
        return run

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
