"""The checks behind `check("q1", answer)`: run every test of a question, print each result.

A question is a list of small tests. Each test calls the learner's code (usually under
crash injection) and either returns quietly (passed) or raises `Fail` with what went wrong
and what to try. The runner never stops at the first failure, never shows a bare
traceback, and turns an untouched stub (`raise NotImplementedError`) into "not attempted
yet" instead of an error.

Every run of a check draws fresh cases (see cases.py): a test that names a `draw`
parameter gets a seeded generator, new for each `check(...)`, so an answer that returns
what one fixed case expects cannot pass. `check("q1", fn, seed=N)` repeats the cases of the
run that printed seed N.

Nothing a check prints or returns is a score. The grader runs these same tests itself,
after the learner's code, and takes their results from the kernel's reply to its own cell
(protocol.py).

In a Jupyter notebook the report is shown as HTML (passes green, failures red, long lines
wrapped to the cell's width); in a terminal, under pytest and under the grader it is the
same report as plain text.
"""

import contextlib
import html
import inspect
import io
import os
import random
import signal
import sys
import sysconfig
import tempfile
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional

from ..errors import NonDeterminismError
from . import progress
from .cases import Draw, derive_seed, fresh_seed

TEST_TIME_LIMIT = 60.0            # seconds per test, so one infinite loop costs one test
PLAIN_TEXT = False                # set by the grader: nobody watches, plain text it is

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted"
CHECK_ERROR = "check error"       # the test itself broke: a bug in the grader, not the answer


class Fail(Exception):
    """A test found a wrong answer. `hint` says what to try next."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


class NotAttempted(Exception):
    """The answer is still the stub (a NotImplementedError, a None left to fill in)."""


class TestTookTooLong(BaseException):
    """Raised inside the learner's code when a test runs past its time limit.

    A BaseException, so an `except Exception` in a retry loop cannot swallow it.
    """


# declaring questions ------------------------------------------------------------------------
@dataclass
class Test:
    name: str
    fn: Callable
    hint: str = ""

    @property
    def draws(self) -> bool:
        """Does the test take fresh cases (a `draw` parameter)?"""
        return "draw" in inspect.signature(self.fn).parameters


@dataclass
class Question:
    id: str
    title: str
    answers: tuple                       # names of what check() expects, in order
    tests: List[Test] = field(default_factory=list)

    def test(self, name: str, hint: str = ""):
        """Decorator: `@q1.test("no crash: one refund", hint="...")`.

        The test is called with the learner's answers, in the order `answers` names them,
        plus `draw=` (a seeded `cases.Draw`) if it has a parameter of that name. It passes
        by returning, fails by raising `Fail(message, hint)`. The name is shown to the
        learner and must not change between runs: draw values inside the test, not in it."""
        def register(fn):
            self.tests.append(Test(name, fn, hint))
            return fn
        return register

    @property
    def call(self) -> str:
        return f'check("{self.id}", {", ".join(self.answers)})'


@dataclass
class Exercise:
    id: str                              # the notebook's name, e.g. "02_memoize"
    title: str
    lesson: str                          # the lesson notebook it practises
    questions: Dict[str, Question] = field(default_factory=dict)
    # What the checks need from the machine (a real engine, a Python it supports):
    # fn() -> (ok, why not). None: nothing beyond the course itself.
    requires: Optional[Callable[[], tuple]] = None
    # Seconds one test may take, where a test of this exercise needs more than the usual
    # (the capstone's first test plays a whole scenario at every crash point). None: the usual.
    test_time_limit: Optional[float] = None

    def question(self, qid: str, title: str, answers) -> Question:
        q = Question(qid, title, tuple(answers))
        self.questions[qid] = q
        return q

    def available(self) -> tuple:
        """(True, "") if this exercise's checks can run on this machine, else (False, why):
        the grader then grades nothing and says why, and the tests skip, with that reason."""
        if self.requires is None:
            return True, ""
        ok, why = self.requires()
        return (True, "") if ok else (False, why or f"exercise {self.id} cannot run here")


# results ------------------------------------------------------------------------------------
@dataclass
class TestResult:
    name: str
    status: str                          # passed | failed | not attempted | check error
    message: str = ""
    hint: str = ""


@dataclass
class QuestionResult:
    exercise: str
    question: str
    title: str
    tests: List[TestResult]
    seed: Optional[int] = None           # the cases' seed: check(..., seed=N) repeats them

    @property
    def passed(self) -> int:
        return sum(t.status == PASSED for t in self.tests)

    @property
    def total(self) -> int:
        return len(self.tests)

    @property
    def status(self) -> str:
        if self.tests and all(t.status == NOT_ATTEMPTED for t in self.tests):
            return NOT_ATTEMPTED
        if any(t.status == CHECK_ERROR for t in self.tests):
            return CHECK_ERROR           # the score is not to be trusted until it is fixed
        return PASSED if self.passed == self.total else FAILED

    def to_json(self) -> dict:
        return {"exercise": self.exercise, "question": self.question, "title": self.title,
                "status": self.status, "passed": self.passed, "total": self.total,
                "seed": self.seed, "tests": [asdict(t) for t in self.tests]}

    @property
    def repeat_line(self) -> str:
        """How to see a failed run's cases again (shown only when something failed)."""
        if self.status not in (FAILED, CHECK_ERROR) or self.seed is None:
            return ""
        return f"(these cases: seed={self.seed}; add seed={self.seed} to the check to see them again)"

    @property
    def verdict(self) -> str:
        """"3/4 — some tests failed", after the question's title."""
        mark = {PASSED: "all tests passed ✓", FAILED: "some tests failed",
                CHECK_ERROR: CHECK_BROKE}[self.status]
        return f"{self.passed}/{self.total} — {mark}"

    def report(self) -> str:
        head = f"{self.question} · {self.title}: "
        if self.status == NOT_ATTEMPTED:
            first = self.tests[0]
            lines = [head + f"not attempted yet (0/{self.total} tests)",
                     f"  {first.message}"]
            if first.hint:
                lines.append(f"  hint: {first.hint}")
            return "\n".join(lines)
        lines = [head + self.verdict]
        for t in self.tests:
            if t.status == PASSED:
                lines.append(f"  ✓ {t.name}")
            else:
                lines.append(f"  {_MARKS.get(t.status, '✗')} {t.name}")
                if t.message:
                    lines.extend("      " + line for line in t.message.splitlines())
                if t.hint:
                    lines.append(f"      hint: {t.hint}")
        if self.repeat_line:
            lines.append("  " + self.repeat_line)
        return "\n".join(lines)

    def html(self) -> str:
        """The same report as `report()`, coloured, for a notebook. Every piece of text is
        escaped: names, messages and hints quote the learner's code and errors."""
        e = html.escape
        colour = _COLOURS[self.status]
        if self.status == NOT_ATTEMPTED:
            first = self.tests[0]
            verdict = f"not attempted yet (0/{self.total} tests)"
            body = _html_line(e(first.message), 1) + (
                _html_line(f"<i>hint:</i> {e(first.hint)}", 1, _HINT) if first.hint else "")
        else:
            verdict = self.verdict
            body = ""
            for t in self.tests:
                ok = t.status == PASSED
                mark = "✓" if ok else _MARKS.get(t.status, "✗")
                body += _html_line(f"{mark} {e(t.name)}", 1,
                                   _COLOURS[t.status if t.status in _COLOURS else FAILED])
                if not ok and t.message:
                    body += _html_line(e(t.message), 3)
                if not ok and t.hint:
                    body += _html_line(f"<i>hint:</i> {e(t.hint)}", 3, _HINT)
            if self.repeat_line:
                body += _html_line(e(self.repeat_line), 1, "#666666")
        head = (f"<div style='color:{colour}; font-weight:bold'>"
                f"{e(self.question)} · {e(self.title)}: {e(verdict)}</div>")
        return (f"<div class='durable-lite-check' style='{_BOX}; border-left:4px solid {colour}'>"
                f"{head}{body}</div>")


_COLOURS = {PASSED: "#1e7b34", FAILED: "#c0392b", NOT_ATTEMPTED: "#8a6d00", CHECK_ERROR: "#6c3483"}
_MARKS = {CHECK_ERROR: "!"}
CHECK_BROKE = "the check itself broke: not your answer's fault"
_HINT = "#1f5f8b"
# pre-wrap keeps the report's line breaks and indents, and wraps long lines at the cell's
# width instead of making the learner scroll sideways.
_BOX = ("font-family:var(--jp-code-font-family, monospace); font-size:0.92em; "
        "white-space:pre-wrap; overflow-wrap:anywhere; padding:4px 10px; line-height:1.45")


def _html_line(inner: str, indent: int, colour: str = "") -> str:
    style = f"margin-left:{indent}em" + (f"; color:{colour}" if colour else "")
    return f"<div style='{style}'>{inner}</div>"


# running ------------------------------------------------------------------------------------
def run_question(exercise: Exercise, qid: str, answers, seed: Optional[int] = None,
                 time_limit: Optional[float] = None) -> QuestionResult:
    """Run every test of question `qid` against `answers`; never raises for a wrong answer.

    seed: the cases' seed (None: a fresh one). Each test draws from its own generator,
    seeded from (seed, exercise, question, test name).
    time_limit: seconds per test (default TEST_TIME_LIMIT)."""
    question = exercise.questions[qid]
    seed = fresh_seed() if seed is None else int(seed)
    if len(answers) != len(question.answers):
        names = ", ".join(question.answers)
        message = (f"{question.call} expects {len(question.answers)} answer(s) ({names}); "
                   f"it was given {len(answers)}.")
        results = [TestResult(t.name, FAILED, message) for t in question.tests]
        return QuestionResult(exercise.id, qid, question.title, results, seed)
    limit = TEST_TIME_LIMIT if time_limit is None else time_limit
    results = [_run_test(test, answers, Draw(derive_seed(seed, exercise.id, qid, test.name)), limit)
               for test in question.tests]
    return QuestionResult(exercise.id, qid, question.title, results, seed)


def _run_test(test: Test, answers, draw: Draw, limit: float) -> TestResult:
    sink = io.StringIO()   # the learner's prints would bury the report; tests call code often
    extra = {"draw": draw} if test.draws else {}
    state = random.getstate()    # a check must not move the notebook's own random numbers
    try:
        with time_limit(limit), contextlib.redirect_stdout(sink), \
                contextlib.redirect_stderr(sink):
            test.fn(*answers, **extra)
    except Fail as fail:
        return TestResult(test.name, FAILED, sanitize(fail.message), sanitize(fail.hint or test.hint))
    except (NotAttempted, NotImplementedError) as exc:
        return TestResult(test.name, NOT_ATTEMPTED, _STUB_ADVICE, sanitize(str(exc)))
    except TestTookTooLong:
        return TestResult(test.name, FAILED,
                          f"this test took longer than {limit:.0f} s and was stopped",
                          "look for a loop that never ends (a retry loop without a limit?)")
    except KeyboardInterrupt:
        return TestResult(test.name, FAILED, "interrupted before it finished",
                          "run the check again; if it hangs, look for a loop that never ends")
    except BaseException as exc:  # noqa: BLE001 - report it, keep going
        if raised_by_learner(exc):
            return TestResult(test.name, FAILED, sanitize("your code raised " + describe(exc)),
                              sanitize(test.hint))
        return TestResult(test.name, CHECK_ERROR, sanitize(_check_broke(exc)), _TELL_INSTRUCTOR)
    finally:
        random.setstate(state)
    return TestResult(test.name, PASSED)


_TELL_INSTRUCTOR = ("this is a bug in the grader, not a problem with your answer: please tell "
                    "your instructor, with this message and the seed below. The other tests "
                    "still count")


def raised_by_learner(exc: BaseException) -> bool:
    """Did the learner's code raise `exc`, or did the check itself break?

    Python's traceback is the mark of who was running: an exception that came out of the
    learner's code (or of anything it called) has one of the learner's frames on it — a
    notebook cell, a module of theirs — and so does one the library raised while running
    their workflow. One raised by the check's own code, or by the library on the check's
    behalf, has frames of durable_lite, the standard library and installed packages only:
    that is a bug in the grader. Explicit causes (`raise ... from exc`) are followed, so a
    library error that wraps one of the learner's is theirs too. And a divergence is always
    the workflow's: the engine finds it after the workflow returned, with no frame of
    theirs left on the stack."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, NonDeterminismError):
            return True
        if any(not _is_library(frame.filename) for frame in traceback.extract_tb(exc.__traceback__)):
            return True
        exc = exc.__cause__
    return False


def _check_broke(exc: BaseException) -> str:
    """What the instructor needs: the error, and where in the grader it was raised."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.abspath(f.filename).startswith(_PACKAGE)]
    where = ""
    if frames:
        last = frames[-1]
        where = f" (in {os.path.relpath(last.filename, os.path.dirname(_PACKAGE))}, line {last.lineno})"
    return f"the check itself failed{where}: {text}"


_STUB_ADVICE = ("Replace the `raise NotImplementedError(...)` line (or the None) with your code, "
                "run that cell, then run this check again.")


def describe(exc: BaseException) -> str:
    """`ValueError: bad thing (at: the line of code that raised it)`, with no file paths."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    theirs = [f for f in frames if f.line and not _is_library(f.filename)]
    if theirs:
        text += f"\n(at: {theirs[-1].line.strip()})"
    return text


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARIES = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})


def _is_library(filename: str) -> bool:
    """Frames from durable_lite, the standard library or installed packages are not the
    learner's: the line worth quoting is the deepest one in their own code. Nor is code
    Python makes itself ("<frozen importlib._bootstrap>", "<string>" for a dataclass's
    generated methods); a notebook cell's code ("<ipython-input-...>", or a file in the
    kernel's temporary folder) is."""
    if filename.startswith("<frozen ") or filename == "<string>":
        return True
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE + os.sep) or path.startswith(_LIBRARIES)


def sanitize(text: str) -> str:
    """Remove temporary and home-directory paths from a message (outputs must not show them)."""
    if not text:
        return text
    for root, label in ((tempfile.gettempdir(), "<tmp>"), (os.path.expanduser("~"), "~")):
        if root and root not in ("/", "~"):
            text = text.replace(os.path.realpath(root), label).replace(root, label)
    return text


@contextlib.contextmanager
def time_limit(seconds: float, error=TestTookTooLong):
    """Raise `error` in this thread after `seconds` (Unix main thread only; elsewhere no
    limit). Limits nest: inside another one (a check's limit on one call, within the
    test's own), the outer deadline still holds, its own handler runs if it comes first,
    and its timer is put back afterwards, less the time spent inside."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return
    outer, _ = signal.getitimer(signal.ITIMER_REAL)
    outer_first = bool(outer) and outer <= seconds
    previous = signal.getsignal(signal.SIGALRM)

    def on_alarm(signum, frame):
        if outer_first and callable(previous):
            previous(signum, frame)
        raise error()

    started = time.monotonic()
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, outer if outer_first else seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-3))


# the callable a notebook uses ------------------------------------------------------------
class Checker:
    """`check = checker("02_memoize")`, then `check("q1", memo_step, open_memo)`."""

    def __init__(self, exercise: Exercise):
        self.exercise = exercise

    def __repr__(self):
        qs = ", ".join(f"{q.id} ({q.title})" for q in self.exercise.questions.values())
        return f"<checks for exercise {self.exercise.id}: {qs}>"

    def __call__(self, question: str, *answers, seed: Optional[int] = None) -> None:
        ex = self.exercise
        if question not in ex.questions:
            known = ", ".join(repr(q) for q in ex.questions)
            print(f"Exercise {ex.id} has no question {question!r}; its questions are {known}.")
            return None
        result = run_question(ex, question, answers, seed=seed, time_limit=ex.test_time_limit)
        show(result)
        if _notebook_is_watching():
            progress.record(result)      # a workshop server's class view reads it (progress.py)
        return None


def show(result: QuestionResult) -> None:
    """HTML in a notebook, plain text anywhere else (a terminal, pytest, the grader)."""
    if not _notebook_is_watching():
        print(result.report())
        return
    from IPython.display import display
    display({"text/plain": result.report(), "text/html": result.html()}, raw=True)


def _notebook_is_watching() -> bool:
    """A Jupyter kernel is running this code and a person will see its output. The grader
    also runs notebooks in a kernel, but nobody watches: it gets the plain report, which
    its saved notebook keeps as text."""
    if PLAIN_TEXT:
        return False
    ipython = sys.modules.get("IPython")       # never import IPython just to find out
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None
