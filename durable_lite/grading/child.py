"""Run a learner's function in a fresh Python process, and SIGKILL it around a step.

The parent (a check, in the notebook's kernel) writes the learner's code to a module with
`portable.module_source`, then calls `run_fresh(...)`. The child, a new process forked from
a Python that has imported only the course's package (durable_lite/fresh.py: a restart in
the same folder comes from another such Python, with its own hash seed), imports that module,
wraps the named step functions so each call is logged ("start lookup", "end lookup") and
so it can kill itself just before or just after one of them — the moments a deploy or an
out-of-memory kill would pick — then calls the function and reports its JSON result.

The log is appended with O_APPEND writes, which reach the file before SIGKILL can stop
them, so it counts executions across every process that worked on a run.
"""

import json
import os
import signal
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

import durable_lite

MODULE = "learner_code"
# What the Python the fresh processes are forked from imports ahead: this module (the
# child's entry), the course's examples (imported before the answer, see _main), the checks
# (which describe a failure) and what the checks' own runs import. Each child would import
# whatever is missing here again, and the package imports little of itself until used: left
# to the children, that was 20-30 ms of CPU each, of a child's 30.
PRELOAD = ("durable_lite.grading.child", "durable_lite.examples", "durable_lite.grading.checks",
           "durable_lite.grading.harness", "durable_lite.grading.ledgers",
           "durable_lite.grading.portable", "durable_lite.grading.wall_clock",
           "durable_lite.run", "durable_lite.policy", "durable_lite.faults",
           "durable_lite.store.template")
_PACKAGE_PARENT = str(Path(durable_lite.__file__).resolve().parent.parent)


@dataclass
class ChildRun:
    returncode: int
    result: Any = None
    error: Optional[str] = None          # "Type: message (at: line)" if the function raised
    stderr: str = ""
    log: List[str] = field(default_factory=list)

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    @property
    def finished(self) -> bool:
        return self.returncode == 0


def write_module(folder, source: str) -> None:
    Path(folder, f"{MODULE}.py").write_text(source, encoding="utf-8")


def run_fresh(folder, call: str, *args, wrap=(), kill=None, log=None, timeout: float = 30.0,
              env=None, preload=()) -> ChildRun:
    """Call `learner_code.<call>(*args)` in a new process whose cwd is `folder`.

    wrap: names of step functions to log (and possibly kill around).
    kill: (name, "before" | "after") — SIGKILL the child there.
    log:  the file to append "start NAME" / "end NAME" lines to (shared across runs).
    env:  more environment variables for it (PYTHONPATH adds to its import path, as for a
          new interpreter). preload: more modules its parent imports ahead (fresh.py).
    """
    from .. import fresh
    log = os.fspath(log or Path(folder, "steps.log"))
    spec = {"dir": os.fspath(folder), "call": call, "args": list(args), "wrap": list(wrap),
            "kill": list(kill) if kill else None, "log": log}
    child_env = dict(os.environ, **(env or {}))
    path = [_PACKAGE_PARENT, *_added_to_sys_path(),
            *[p for p in child_env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    child_env["PYTHONPATH"] = os.pathsep.join([os.fspath(folder), *path])   # for its own children
    status, out, err = fresh.run(f"{__name__}:_main", spec, key=os.fspath(folder), folder=folder,
                                 env=child_env, path=path, timeout=timeout,
                                 preload=PRELOAD + tuple(preload))
    if status == "timeout":
        return ChildRun(returncode=-1, error=f"the fresh process did not finish within {timeout:.0f} s",
                        log=read_log(log))
    run = ChildRun(status, stderr=err, log=read_log(log))
    for line in out.splitlines():
        if line.startswith("RESULT "):
            run.result = json.loads(line[len("RESULT "):])
        elif line.startswith("ERROR "):
            run.error = json.loads(line[len("ERROR "):])
    if status not in (0, -signal.SIGKILL) and run.error is None:
        run.error = (err.strip().splitlines() or [f"exit status {status}"])[-1]
    return run


def _added_to_sys_path() -> List[str]:
    """The folders this process imports from beyond Python's own (the notebook's folder, a
    module beside it): a restart of the notebook's code finds the same modules."""
    own = tuple(os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    return [os.path.abspath(p) for p in sys.path
            if p and os.path.isdir(p) and not os.path.realpath(p).startswith(own)]


def read_log(path) -> List[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


# the child's side ---------------------------------------------------------------------------
def _append(path, line):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _wrapper(name, real, log, kill):
    def step_function(*args, **kwargs):
        _append(log, f"start {name}")
        if kill == [name, "before"]:
            _die()
        result = real(*args, **kwargs)
        _append(log, f"end {name}")
        if kill == [name, "after"]:
            _die()
        return result
    step_function.__name__ = getattr(real, "__name__", name)
    return step_function


def _main(spec):
    """(In the fresh process.) Import the answer's module, wrap the steps, call, report."""
    import importlib

    try:
        # The course's examples first: workflow names are global, and a learner's workflow
        # named like one of them ("refund", "research") must be the one that runs here, as
        # in the notebook, not silently replaced by the example imported after it.
        examples = importlib.import_module("durable_lite.examples")
        module = importlib.import_module(MODULE)
        for name in spec["wrap"]:
            real = getattr(module, name, None) or getattr(examples, name)
            wrapped = _wrapper(name, real, spec["log"], spec["kill"])
            if hasattr(module, name):
                setattr(module, name, wrapped)
            if hasattr(examples, name):
                setattr(examples, name, wrapped)
        result = getattr(module, spec["call"])(*spec["args"])
    except BaseException as exc:  # report any failure of the learner's code to the parent
        from . import checks     # only now: most children never fail, and it takes a while
        print("ERROR " + json.dumps(checks.sanitize(checks.describe(exc))))
        traceback.print_exc()
        sys.exit(3)
    print("RESULT " + json.dumps(result, default=repr))

