"""A learner cannot forge a score, and one notebook cannot change another's.

Each test is an attack someone really tried on the grader — or the next thing they would
try — written into a learner's notebook and graded exactly as an instructor would. The
forged questions score 0 or are reported as tampered, later notebooks are unaffected, and
nothing the notebook started is still running when the grader returns.

Every attack sits in an answer cell (the grader runs those) of an otherwise untouched
exercise, so a correct grader gives 0 everywhere; the same code in a cell the learner added
is not run at all, which is tested too.
"""

import json
import os
import sys
import time
from pathlib import Path

import pytest

from durable_lite.grading import exercise
from durable_lite.grading.grader import grade_notebook

from grading_support import learner, statuses

ALL_PASSED = [{"exercise": "01_naive_retry", "question": q.id, "title": q.title, "status": "passed",
               "passed": len(q.tests), "total": len(q.tests), "seed": 0,
               "tests": [{"name": t.name, "status": "passed", "message": "", "hint": ""}
                         for t in q.tests]}
              for q in exercise("01_naive_retry").questions.values()]

STUB = '''
def run_naive(folder, crash_at=None):
    raise NotImplementedError("not written yet")
'''

# Writes what the old grader read: a results file, at the place it named and a few more.
WRITE_RESULTS = f'''
import json, os, tempfile
forged = {ALL_PASSED!r}
for path in [os.environ.get("DURABLE_LITE_GRADING_RESULTS"), "results.jsonl",
             os.path.join(tempfile.gettempdir(), "results.jsonl")]:
    if path:
        with open(path, "a") as f:
            f.writelines(json.dumps(r) + "\\n" for r in forged)
'''


def zero_everywhere(score):
    assert score.passed == 0, score.report()
    assert all(q["status"] != "passed" for q in score.questions), score.report()


def test_writing_the_results_file_scores_nothing(tmp_path):
    path = learner("01_naive_retry", tmp_path, cells={"def run_naive": WRITE_RESULTS + STUB})
    zero_everywhere(grade_notebook(path))


def test_replacing_the_check_function_scores_nothing_and_is_flagged(tmp_path):
    forge = STUB + '''
import durable_lite.grading.checks as checks_module
from durable_lite.grading.checks import QuestionResult, TestResult

def all_passed(exercise, qid, answers, seed=None, time_limit=None):
    q = exercise.questions[qid]
    return QuestionResult(exercise.id, qid, q.title, [TestResult(t.name, "passed") for t in q.tests], seed)

checks_module.run_question = all_passed
check = lambda question, *answers, **kw: print(question, "· all tests passed ✓")
'''
    score = grade_notebook(learner("01_naive_retry", tmp_path, cells={"def run_naive": forge}))
    zero_everywhere(score)
    assert score.tampered and statuses(score)["q1"] == "tampered", score.report()
    assert "run_question" in score.question("q1")["note"]
    assert any("grading package" in f for f in score.question("q1")["flags"])
    assert "look at q1" in score.report()


def test_replacing_the_results_signer_is_reported_as_tampered(tmp_path):
    forge = STUB + f'''
import json
import durable_lite.grading.protocol as protocol
protocol.signed = lambda nonce: json.dumps({{"payload": json.dumps({ALL_PASSED[1]!r}), "mac": "0" * 64}})
'''
    score = grade_notebook(learner("01_naive_retry", tmp_path, cells={"def run_naive": forge}))
    zero_everywhere(score)
    assert all(q["tampered"] for q in score.questions[1:]), score.report()


def test_writing_the_file_then_exiting_scores_nothing(tmp_path):
    attack = WRITE_RESULTS + STUB + "\nimport os\nos._exit(0)\n"
    score = grade_notebook(learner("01_naive_retry", tmp_path, cells={"def run_naive": attack}))
    zero_everywhere(score)
    assert "kernel died" in score.note
    assert set(statuses(score).values()) == {"not checked"}


def test_a_forged_score_printed_by_the_answer_is_not_read(tmp_path):
    attack = '''
def run_naive(folder, crash_at=None):
    import json
    print(json.dumps({"result": "q1 all passed", "passed": 4, "total": 4}))
    raise NotImplementedError("not written yet")
'''
    zero_everywhere(grade_notebook(learner("01_naive_retry", tmp_path,
                                           cells={"def run_naive": attack})))


def test_cells_added_or_changed_outside_the_answers_are_not_run_and_are_reported(tmp_path):
    path = learner("01_naive_retry", tmp_path,
                   cells={'check("q2"': 'print("q2 · predict the refunds: 3/3 — all tests passed ✓")'},
                   added=[WRITE_RESULTS, "raise SystemExit('added cells never run')"])
    score = grade_notebook(path)
    zero_everywhere(score)
    notes = " ".join(score.notes)
    assert "the check cell of q2 was changed" in notes and "2 code cell(s) added" in notes
    assert statuses(score)["q2"] == "not attempted"


# one notebook cannot reach another ----------------------------------------------------------
FORGING_STARTUP = '''
import durable_lite.grading.checks as c
from durable_lite.grading.checks import QuestionResult, TestResult
def _forged(exercise, qid, answers, seed=None, time_limit=None):
    q = exercise.questions[qid]
    return QuestionResult(exercise.id, qid, q.title, [TestResult(t.name, "passed") for t in q.tests], seed)
c.run_question = _forged
'''


def startup_attack(target_home_variable):
    """An answer cell that writes a forging IPython startup file into its own home, into
    the folder IPython reads, and into a home it was told about (as a learner might find
    the instructor's through the password database)."""
    return STUB + f'''
import os
homes = [os.path.expanduser("~"), os.environ.get("IPYTHONDIR", ""), os.environ.get({target_home_variable!r}, "")]
for home in homes:
    if home:
        base = home if home.endswith(".ipython") else os.path.join(home, ".ipython")
        folder = os.path.join(base, "profile_default", "startup")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "00-forge.py"), "w") as f:
            f.write({FORGING_STARTUP!r})
'''


def test_a_startup_file_written_by_one_notebook_does_not_reach_the_next(tmp_path, monkeypatch):
    instructor = tmp_path / "instructor-home"
    startup = instructor / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "mine.py").write_text("# the instructor's own\n")
    monkeypatch.setenv("HOME", str(instructor))          # the grader's (real) home, for this test
    monkeypatch.setenv("ATTACKED_HOME", str(instructor))
    attacker = learner("01_naive_retry", tmp_path / "mallory",
                       cells={"def run_naive": startup_attack("ATTACKED_HOME")})
    victim = learner("01_naive_retry", tmp_path / "victor")
    first = grade_notebook(attacker)
    zero_everywhere(first)
    assert first.tampered and "00-forge.py" in first.questions[0]["note"], first.report()
    assert sorted(p.name for p in startup.iterdir()) == ["mine.py"]     # put back
    second = grade_notebook(victim)
    zero_everywhere(second)                               # untouched: 0, not 11/11
    assert not second.tampered and second.note is None


@pytest.mark.alone
def test_a_file_dropped_into_the_package_or_site_packages_is_removed(tmp_path):
    import site
    import durable_lite
    planted = [Path(durable_lite.__file__).parent / "grading" / "exercises" / "ex99_forged.py",
               Path(site.getsitepackages()[0]) / "durable_lite_forged.pth"]
    attack = STUB + f'''
for path, text in [({str(planted[0])!r}, "EXERCISE = None\\n"), ({str(planted[1])!r}, "import os\\n")]:
    with open(path, "w") as f:
        f.write(text)
'''
    try:
        score = grade_notebook(learner("01_naive_retry", tmp_path, cells={"def run_naive": attack}))
        assert not any(p.exists() for p in planted)
        zero_everywhere(score)
        assert score.tampered and "ex99_forged.py" in score.questions[0]["note"]
    finally:
        for p in planted:
            if p.exists():
                p.unlink()


def _running(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
def test_a_process_the_notebook_leaves_running_is_killed(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("LINGER_PIDS", str(pids))
    # A daemon that tries every way out: a new session, a double fork, an empty environment,
    # a name of its own; it forges results files as long as it lives.
    daemon = ('import os, sys, time, json\n'
              'if os.fork():\n'
              '    os._exit(0)\n'
              'os.setsid()\n'
              'os.chdir(os.path.dirname(sys.argv[1]))\n'
              'open(sys.argv[1] + ".new", "w").write(f"{os.getpid()}\\n")\n'
              'os.rename(sys.argv[1] + ".new", sys.argv[1])\n'     # whole, or not there
              'while True:\n'
              '    try:\n'
              '        open("results.jsonl", "a").write(json.dumps({"passed": 4}) + "\\n")\n'
              '    except OSError:\n'
              '        pass\n'
              '    time.sleep(0.05)\n')
    attack = STUB + f'''
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", {daemon!r}, os.environ["LINGER_PIDS"]],
                 start_new_session=True, env={{}}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 25          # within the cell's 30 s: the daemon is running
while not os.path.exists(os.environ["LINGER_PIDS"]) and time.monotonic() < deadline:
    time.sleep(0.05)
'''
    score = grade_notebook(learner("01_naive_retry", tmp_path / "mallory",
                                   cells={"def run_naive": attack}))
    zero_everywhere(score)
    (pid,) = [int(line) for line in pids.read_text().split()]
    deadline = time.monotonic() + 5
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid), "the notebook's daemon outlived the grader"
    zero_everywhere(grade_notebook(learner("01_naive_retry", tmp_path / "victor")))


def test_the_executed_notebook_shows_the_graders_feedback_not_the_secret(tmp_path):
    score = grade_notebook(learner("01_naive_retry", tmp_path, start="solutions"), seed=42)
    checks = [c for c in score.notebook.cells if c.cell_type == "code" and c.source.startswith("check(")]
    text = json.dumps([c.outputs for c in checks])
    assert "all tests passed" in text and "secret" not in text and "__dl_grading__" not in text
    assert all(c.source.startswith("check(") for c in checks)    # the cell as the learner knows it
    assert "cases seed 42" in score.report()
    assert os.path.exists(score.path)


# an escaped process: a new session, an empty environment, an exited kernel ------------
def _wait_gone(pid, seconds=30.0):
    deadline = time.monotonic() + seconds
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _running(pid)


# A process in a session of its own, with an empty environment (no marker to be found by),
# that records its pid and lives on; then the kernel exits, or first kills its own parent.
ESCAPE = '''
import os, subprocess, sys, time
# The pid is written whole or not at all (renamed into place): the kernel exits as soon as
# the file is there, and the grader may kill the daemon a moment later.
DAEMON = ("import os, sys, time\\nopen(sys.argv[1] + '.new', 'w').write(str(os.getpid()))\\n"
          "os.rename(sys.argv[1] + '.new', sys.argv[1])\\nwhile True: time.sleep(0.2)\\n")
subprocess.Popen([sys.executable, "-c", DAEMON, {pids!r}], start_new_session=True, env={{}},
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 25
while not os.path.exists({pids!r}) and time.monotonic() < deadline:
    time.sleep(0.05)
{before_exit}
os._exit(0)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
@pytest.mark.parametrize("before_exit", ["", "os.kill(os.getppid(), 9)"],
                         ids=["exits", "kills-its-parent-then-exits"])
def test_a_process_that_escapes_its_session_and_environment_is_gone_when_grading_returns(
        tmp_path, before_exit):
    pids = tmp_path / "daemon.pid"
    attack = STUB + ESCAPE.format(pids=str(pids), before_exit=before_exit)
    score = grade_notebook(learner("01_naive_retry", tmp_path / "mallory",
                                   cells={"def run_naive": attack}))
    zero_everywhere(score)
    pid = int(pids.read_text())
    try:
        assert _wait_gone(pid), "the escaped process outlived the grader"
    finally:
        if _running(pid):
            os.kill(pid, 9)


# a planted bytecode cache, and what the guard cannot put back -------------------------
CHECKS_CACHE = (Path(__file__).resolve().parent.parent / "durable_lite" / "grading" / "__pycache__"
                / f"checks.{sys.implementation.cache_tag}.pyc")

# The bytecode of the real checks.py with one more definition at its end: a `_run_test`
# that passes every test. Stamped with the source's mtime and size, so Python takes it as
# the cache of the unchanged source. `target` is where to write it.
PLANT_CACHE = '''
import importlib.util, marshal, os, sys
def plant(target):
    src = importlib.util.find_spec("durable_lite.gra" + "ding.checks").origin
    text = open(src, encoding="utf-8").read() + (
        "\\ndef _run_test(test, answers, draw, limit):\\n"
        "    return TestResult(test.name, PASSED)\\n")
    st = os.stat(src)
    head = (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
            + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
            + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as f:
        f.write(head + marshal.dumps(compile(text, src, "exec")))
'''


@pytest.fixture
def checks_cache():
    """The real cache of checks.py, as it was: put back however the test ends."""
    before = CHECKS_CACHE.read_bytes() if CHECKS_CACHE.exists() else None
    yield CHECKS_CACHE
    if before is None:
        CHECKS_CACHE.unlink(missing_ok=True)
    else:
        CHECKS_CACHE.write_bytes(before)


@pytest.mark.alone
def test_a_planted_bytecode_cache_is_put_back_and_reaches_no_later_notebook(tmp_path, checks_cache):
    before = checks_cache.read_bytes() if checks_cache.exists() else None
    # Written by a process the answer starts, which nothing inside the kernel can watch.
    attack = STUB + f'''
import subprocess, sys
subprocess.run([sys.executable, "-c", {PLANT_CACHE!r} + "plant(" + repr({str(checks_cache)!r}) + ")"],
               check=True)
'''
    first = grade_notebook(learner("01_naive_retry", tmp_path / "mallory",
                                   cells={"def run_naive": attack}))
    zero_everywhere(first)
    assert first.tampered and checks_cache.name in first.questions[0]["note"], first.report()
    now = checks_cache.read_bytes() if checks_cache.exists() else None
    assert now is None or now == before, "the planted cache is still there"
    second = grade_notebook(learner("01_naive_retry", tmp_path / "victor"))
    zero_everywhere(second)                               # untouched: 0, not 11/11
    assert not second.tampered, second.report()


@pytest.mark.alone
def test_a_cache_planted_before_grading_began_is_not_read_by_the_kernel(tmp_path, checks_cache):
    namespace = {}
    exec(PLANT_CACHE, namespace)
    namespace["plant"](str(checks_cache))                  # as an unsupervised run could leave it
    score = grade_notebook(learner("01_naive_retry", tmp_path))
    zero_everywhere(score)


@pytest.mark.alone
def test_a_file_that_cannot_be_put_back_stops_the_batch(tmp_path):
    """A changed module the guard does not keep a copy of (anything in site-packages beyond
    its top-level files) is found, and no later notebook is graded against it."""
    import site
    from durable_lite.grading.grader import check_guard
    from durable_lite.grading.guard import Guard
    package = Path(site.getsitepackages()[0]) / "durable_lite_attack_target"
    package.mkdir()
    (package / "__init__.py").write_text("HONEST = True\n")
    attack = STUB + f'''
import subprocess, sys
subprocess.run([sys.executable, "-c", "open(" + repr({str(package / "__init__.py")!r}) + ", 'w').write('HONEST = False')"],
               check=True)
'''
    attacker = learner("01_naive_retry", tmp_path / "mallory", cells={"def run_naive": attack})
    victim = learner("01_naive_retry", tmp_path / "victor", start="solutions")
    try:
        guard = Guard(Path(__file__).resolve().parent.parent)
        first = grade_notebook(attacker, guard=guard)
        changed = check_guard(guard)
        assert any("durable_lite_attack_target" in c and "could not be put back" in c
                   for c in changed), changed
        second = grade_notebook(victim, guard=guard)
        assert second.passed == 0 and "not graded" in second.note and "reinstall" in second.note
        zero_everywhere(first)
    finally:
        import shutil
        shutil.rmtree(package, ignore_errors=True)


# a forged signature, and the next things an adversary tries ---------------------------
# The secret the old grader wrote into its own cell, read back from IPython's input history
# (the grader's cell is stored there before it runs) by a dict that re-signs every result it
# is given as all-passed, in the old format or the new; the words the report looks for are
# split.
FORGE_SIGNATURE = STUB + '''
import hashlib, hmac, importlib, json, re
signer = importlib.import_module("durable_lite.gra" + "ding.proto" + "col")

class Resigned(dict):
    def __setitem__(self, key, value):
        found = re.findall(r"[0-9a-f]{32}", In[-1])
        secret = found[0] if found else ""
        text = value[0] if isinstance(value, tuple) else json.loads(value)["payload"]
        payload = json.loads(text)
        for test in payload["tests"]:
            test.update(status="passed", message="", hint="")
        payload.update(status="passed", passed=payload["total"], tampered=[], flags=[])
        text = json.dumps(payload, sort_keys=True, default=str)
        if isinstance(value, tuple):
            mac = hmac.new(secret.encode(), f"{key}\\n{text}\\n".encode(), hashlib.sha256)
            forged = (text, "", mac.hexdigest())
        else:
            mac = hmac.new(secret.encode(), text.encode(), hashlib.sha256)
            forged = json.dumps({"payload": text, "mac": mac.hexdigest()})
        dict.__setitem__(self, key, forged)

signer._SIGNED = Resigned()
'''


def test_a_signature_forged_from_the_input_history_scores_nothing_and_is_loud(tmp_path):
    score = grade_notebook(learner("01_naive_retry", tmp_path, cells={"def run_naive": FORGE_SIGNATURE}))
    zero_everywhere(score)
    assert all(q["tampered"] for q in score.questions), score.report()


# What no answer needs and an attack on the grader's key or code does, each refused by the
# grader's watch (an audit hook in the kernel) and reported, whatever the answer calls it.
WATCHED = STUB + '''
import gc, importlib, os, sys
tried = []
def attempt(name, action):
    try:
        action()
        tried.append(name + ": done")
    except Exception as exc:
        tried.append(f"{name}: {type(exc).__name__}")

package = os.path.dirname(importlib.import_module("durable_lite").__file__)
attempt("write", lambda: open(os.path.join(package, "planted.py"), "w").write("x = 1\\n"))
attempt("sign", lambda: getattr(sys, "au" + "dit")("durable_lite.sign", "{}", "0" * 32, []))
attempt("gc", lambda: getattr(gc, "get_" + "referrers")(sys))
attempt("trace", lambda: getattr(sys, "set" + "trace")(lambda *a: None))
attempt("hook", lambda: getattr(sys, "addaudit" + "hook")(lambda *a: None))
checks_module = importlib.import_module("durable_lite.gra" + "ding.checks")
attempt("code", lambda: setattr(checks_module.run_question, "__code__", (lambda *a, **k: None).__code__))
attempt("claim", lambda: compile("x = 1", checks_module.__file__, "exec"))
attempt("memory", lambda: open("/proc/self/mem", "rb"))
import ctypes
attempt("ctypes", lambda: ctypes.string_at(id(tried), 8))
import inspect, signal, subprocess
inspect.stack()                                               # flagged, not refused
signal.signal(signal.SIGUSR1, lambda number, frame: None)     # gets whatever frame it interrupts
subprocess.run([sys.executable, "-c", "pass"])                # outside the watch
print(tried)
'''


def test_what_the_watch_refuses_is_reported_and_scores_nothing(tmp_path):
    planted = Path(__file__).resolve().parent.parent / "durable_lite" / "planted.py"
    try:
        score = grade_notebook(learner("01_naive_retry", tmp_path, cells={"def run_naive": WATCHED}))
        assert not planted.exists()
    finally:
        planted.unlink(missing_ok=True)
    zero_everywhere(score)
    assert score.tampered and score.question("q1")["status"] == "tampered", score.report()
    note = score.question("q1")["note"]
    for refused in ("wrote to", "asked the grader to sign", "listed the interpreter's objects",
                    "set a trace function", "changed the grader's function",
                    "added an audit hook", "compiled code under the name of",
                    "read a process's memory", "used ctypes"):
        assert refused in note, (refused, note)
    output = json.dumps([c.outputs for c in score.notebook.cells if c.cell_type == "code"])
    for name in ("write", "gc", "trace", "code", "claim", "memory", "ctypes"):   # raised where tried
        assert f"{name}: Refused" in output, (name, output)
    flags = " ".join(score.question("q1")["flags"])
    for flagged in ("set a handler for SIGUSR1", "started another process", "call stack"):
        assert flagged in flags, (flagged, flags)


# Reaching up the call stack for what the test expects, by a name no word list knows.
READ_THE_TESTS_FRAMES = '''
import sys
peek = getattr(sys, "_get" + "frame")

def run_naive(folder, crash_at=None):
    frame, seen = peek(), []
    while frame is not None:
        seen.append(sorted(frame.f_locals))
        frame = frame.f_back
    raise NotImplementedError(f"saw {len(seen)} frames")
'''


def test_reaching_into_the_graders_frames_is_flagged_whatever_it_is_called(tmp_path):
    score = grade_notebook(learner("01_naive_retry", tmp_path,
                                   cells={"def run_naive": READ_THE_TESTS_FRAMES}))
    zero_everywhere(score)
    flags = " ".join(score.question("q1")["flags"])
    assert "call stack" in flags and "while it was graded" in flags, score.report()
    assert "look at q1" in score.report()


# The next things an adversary tries against the watch itself.
FORGE_THE_SERIALIZER = '''
import json, importlib
real_dumps = json.dumps

def all_passed(payload, **options):
    if isinstance(payload, dict) and "tests" in payload:
        payload = dict(payload, status="passed", passed=payload["total"],
                       tests=[dict(t, status="passed", message="", hint="") for t in payload["tests"]])
    return real_dumps(payload, **options)

def run_naive(folder, crash_at=None):
    json.dumps = all_passed           # while the tests run, for the result they will write
    raise NotImplementedError("not written yet")
'''


def test_a_serializer_replaced_while_the_tests_run_forges_nothing(tmp_path):
    score = grade_notebook(learner("01_naive_retry", tmp_path,
                                   cells={"def run_naive": FORGE_THE_SERIALIZER}))
    zero_everywhere(score)
    assert score.question("q1")["status"] == "tampered", score.report()
    assert "json.dumps" in score.question("q1")["note"], score.report()


# Names put into the watch's own module, hoping the hooks look them up: they do not.
SPY_ON_THE_WATCH = STUB + '''
import importlib, os
watch = importlib.import_module("durable_lite.gra" + "ding.watch")
calls = []
def spy(*args, **kwargs):
    calls.append(args)
    raise RuntimeError("spied")
for name in ("len", "type", "id", "str", "isinstance", "getattr"):
    setattr(watch, name, spy)
class FakeOs:
    def __getattr__(self, name):
        calls.append(name)
        return getattr(os, name)
watch.os = FakeOs()
'''
REPORT_THE_SPY = '''
print("spy calls:", len(calls))
STEPS = ["lookup", "refund", "email", "close"]
def predicted_refunds(step, when):
    raise NotImplementedError
'''


def test_names_planted_in_the_watchs_module_are_never_called_and_are_seen(tmp_path):
    score = grade_notebook(learner("01_naive_retry", tmp_path,
                                   cells={"def run_naive": SPY_ON_THE_WATCH,
                                          "def predicted_refunds": REPORT_THE_SPY}))
    zero_everywhere(score)
    output = json.dumps([c.outputs for c in score.notebook.cells if c.cell_type == "code"])
    assert "spy calls: 0" in output, output
    assert score.question("q1")["status"] == "tampered", score.report()
    assert "durable_lite.grading.watch" in score.question("q1")["note"], score.report()
