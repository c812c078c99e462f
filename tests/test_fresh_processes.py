"""The fresh processes of the checks (durable_lite/fresh.py): forked from Pythons that imported
only the course's package, each a new process that runs the answer's code again; a restart
in the same folder comes from another interpreter; nothing of theirs outlives the process
that asked for them, and nothing of theirs is left in the answer's folder."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from durable_lite.grading.child import run_fresh, write_module

DEADLINE = 120          # seconds: generous, a learner's laptop is busy

ANSWER = textwrap.dedent("""
    import os, time
    SEED_TAG = hash("seed")                 # str's hash seed, drawn when an interpreter starts
    CALLS = []                              # a process's memory

    def who(folder):
        CALLS.append(1)
        return {"pid": os.getpid(), "parent": os.getppid(), "tag": SEED_TAG,
                "calls": len(CALLS), "cwd": os.getcwd()}

    def shout(folder, megabytes):
        line = "x" * 1023 + "\\n"
        for _ in range(megabytes * 1024):
            print(line, end="")
        return "said"

    def sleep(folder, flag):
        open(flag, "w").close()
        time.sleep(600)
""")


def _alive(pid) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _until(condition, what):
    end = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < end, f"waited {DEADLINE} s for {what}"
        time.sleep(0.05)


def test_each_call_is_a_new_process_and_a_restart_comes_from_another_interpreter(tmp_path):
    write_module(tmp_path, ANSWER)
    runs = [run_fresh(tmp_path, "who", str(tmp_path)) for _ in range(4)]
    seen = [r.result for r in runs]
    assert all(r.finished for r in runs), [r.error for r in runs]
    assert len({s["pid"] for s in seen}) == 4                    # a new process each time
    assert all(s["calls"] == 1 for s in seen)                    # nothing remembered
    assert all(os.path.samefile(s["cwd"], tmp_path) for s in seen)
    # one folder's processes alternate between parents: no two in a row share a hash seed
    assert all(a["parent"] != b["parent"] and a["tag"] != b["tag"] for a, b in zip(seen, seen[1:]))
    assert set(os.listdir(tmp_path)) <= {"learner_code.py", "steps.log"}   # nothing of ours


def test_a_child_past_its_time_limit_is_killed_and_said_so(tmp_path):
    write_module(tmp_path, ANSWER)
    flag = tmp_path / "started"
    began = time.monotonic()
    run = run_fresh(tmp_path, "sleep", str(tmp_path), str(flag), timeout=2)
    assert flag.exists() and time.monotonic() - began < 60
    assert run.returncode == -1 and "did not finish within 2 s" in run.error


CONTROLLER = textwrap.dedent("""
    import json, sys, threading
    from durable_lite.grading.child import run_fresh, write_module
    folder, flag = sys.argv[1], sys.argv[2]
    write_module(folder, sys.argv[3])
    threading.Thread(target=run_fresh, args=(folder, "sleep", folder, flag),
                     kwargs={"timeout": 600}, daemon=True).start()
    import os, time
    while not os.path.exists(flag):
        time.sleep(0.02)
    print(json.dumps({"ready": True}), flush=True)
    time.sleep(600)
""")


def test_a_sigkilled_process_takes_its_parents_and_their_children_along(tmp_path):
    """The process that asked is SIGKILLed while a child of a parent it started runs (for
    600 s): the parent sees its requests' pipe end and goes, and the child with it."""
    flag = tmp_path / "started"
    controller = subprocess.Popen([sys.executable, "-c", CONTROLLER, str(tmp_path), str(flag), ANSWER],
                                  stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(controller.stdout.readline()) == {"ready": True}
        below = _descendants(controller.pid)
        assert len(below) >= 2, below                  # a parent, and the child sleeping
        controller.send_signal(signal.SIGKILL)
        controller.wait(DEADLINE)
        _until(lambda: not any(_alive(p) for p in below), f"{below} to end")
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()


def _descendants(pid) -> list:
    parents = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        children = [c for c, parent in parents.items() if parent == p]
        found += children
        frontier += children
    return found


def test_a_check_interrupted_mid_request_leaves_the_next_one_answered_right(tmp_path):
    """Ctrl-C in a kernel while a child runs: the check stops; its parent, which would
    answer that request late, to the next one, is not used again."""
    import threading
    import pytest
    write_module(tmp_path, ANSWER)
    flag = tmp_path / "started"

    def interrupt_once_started():
        _until(flag.exists, "the child to start")
        os.kill(os.getpid(), signal.SIGINT)          # what Ctrl-C sends

    # Python's own handler, as in a kernel (a test runner's worker may ignore SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_once_started, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_fresh(tmp_path, "sleep", str(tmp_path), str(flag), timeout=600)
    finally:
        signal.signal(signal.SIGINT, previous)
    began = time.monotonic()
    again = run_fresh(tmp_path, "who", str(tmp_path))
    assert again.finished and again.result["calls"] == 1, again.error
    assert time.monotonic() - began < 60


def test_an_answer_that_prints_a_flood_costs_only_the_last_part_of_it(tmp_path):
    """An answer that prints 64 MB: what comes back is the end of it (where the result is),
    at most fresh.OUTPUT_LIMIT bytes, and the result is read."""
    from durable_lite import fresh
    write_module(tmp_path, ANSWER)
    run = run_fresh(tmp_path, "shout", str(tmp_path), 64, timeout=120)
    assert run.finished and run.result == "said", run.error
    status, out, err = fresh.run("durable_lite.grading.child:_main",
                                 {"dir": str(tmp_path), "call": "shout", "args": [str(tmp_path), 64],
                                  "wrap": [], "kill": None, "log": str(tmp_path / "steps.log")},
                                 key=str(tmp_path), folder=tmp_path, env=dict(os.environ),
                                 path=[str(tmp_path)], preload=())
    assert status == 0 and len(out) <= fresh.OUTPUT_LIMIT < 64 * 2**20
    assert out.endswith('RESULT "said"\n') and out.startswith("x")
