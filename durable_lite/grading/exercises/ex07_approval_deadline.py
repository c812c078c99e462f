"""Exercise 07: wait for an editor's approval with a deadline, escalate, then fall back.

Every test drives the learner's workflow the way production would: each action (start,
a decision, a scheduler tick) uses a fresh Engine on the same SQLite file, and time moves
only when the test moves its FakeClock. The test sends a decision with `engine.signal`, or
withholds it and lets the deadline pass, then calls `engine.recover()` and counts the mail
in the simulated world. The branch tests run those engines in this process, where the
answer's memory survives from one action to the next; one test hands every action after
start() to a new Python process (`child.run_fresh` on `portable.module_source`, which runs
the answer's cells again from the top), as after a real restart, where nothing kept in
memory does.

Feedback is derived from what the test saw, not from the first rule that could explain it:
the desk keeps a timeline of the mail and model ledgers after every step the engine
executed or replayed, and just before each step's function ran, so an extra email or an
extra draft is traced to the step that recorded it, to the workflow's own code just before
a step, or to a replay in which no step ran.

The properties a right answer has, each judged by the test that names it, and how the cases
vary it (tests/test_grading_properties_01_07.py and tests/test_grading_round4_04_07.py have,
for each, an answer wrong in that property alone, and it fails). The post, the people and
the hour they answer are drawn.

q1 publish_post(ctx, folder, post_id)
  - start() returns at once: one draft, the editor asked, the run waiting for 'approval'
    until exactly one day later;
  - every branch, each in its own test: the editor approves, the editor rejects, nobody
    answers for a day (the manager is asked at the deadline, not a second before, and the
    run waits one more day), the manager approves, the manager rejects, nobody answers at
    all (the safe default: 'expired', the author told);
  - on every branch the mail is exactly the task's (an email sent outside a step is sent
    again by every replay, an extra step sends too much);
  - one draft per post, and the post published is that draft's text (a draft written
    outside a step, or written again inside the publish step, fails);
  - after a restart between every two actions (the run started here, then the editor's
    day running out and the manager's approval each handled by a new Python process):
    still the task's mail, one draft, and that draft published (a draft kept in a dict or
    an lru_cache, an email held back on replays by a count kept in memory, fails);
  - on every path the steps carry the task's names (draft, ask-editor, escalate,
    tell-author, publish), in the path's order.
"""

import os
from dataclasses import dataclass

from ...clock import FakeClock, SequentialIds
from ...engine import Engine
from ...faults import BEFORE_STEP, CrashPlan
from ...store import SQLiteStore
from ..checks import Exercise, Fail, NotAttempted
from ..child import run_fresh, write_module
from ..harness import START, needs_workflow, scratch, step_names
from ..ledgers import Ledgers
from ..portable import NotPortable, module_source

EXERCISE = Exercise("07_approval_deadline", "A deadline and an escalation path",
                    lesson="notebooks/07_waiting_for_a_human.ipynb")

HOUR, DAY = 3600, 24 * 3600
EDITOR, MANAGER = "editor@example.com", "manager@example.com"
AUTHOR, READERS = "author@example.com", "readers@example.com"
ADDRESSES = {"editor": EDITOR, "manager": MANAGER, "author": AUTHOR, "published": READERS}
# The step the task names for each kind of mail, and every step name the task gives.
SENDER = {"editor": "ask-editor", "manager": "escalate", "author": "tell-author",
          "published": "publish"}
TASK_STEPS = ("draft", "ask-editor", "escalate", "tell-author", "publish")

q1 = EXERCISE.question("q1", "publish_post", answers=["publish_post"])


@dataclass
class Seen:
    """What the world held at one moment of an action: at its beginning, just before each
    step's function ran, after each step the engine executed or replayed (its on_step
    hook), and at its end."""
    action: str                 # "at start()", "when the editor's decision arrived", ...
    event: tuple                # ("begin",), ("before", label), ("step", label, "executed" |
                                # "replayed"), ("end",)
    mail: int                   # messages in the mailer's ledger so far
    model: int                  # model calls so far


class _BeforeSteps:
    """The `seen` of a CrashPlan that crashes nothing: the engine tells it every crash point
    a run passes, and the one just before a step's function runs (or a wait begins) is
    noted. Mail that appears after it came from the step's function; mail that appears
    before it, from the workflow's own code."""

    def __init__(self, note):
        self.note = note

    def append(self, point):
        step, occurrence, when = point
        if when == BEFORE_STEP:
            self.note("before", step if occurrence == 1 else f"{step}#{occurrence}")


def act(workflow, world, store, run_id, post, action, at, worker, decision=None) -> list:
    """One action on a post's run, as one process does it: "start" the run, "recover" what
    is due, or "decide" (deliver the decision, then recover) — with an Engine of its own on
    the run's store, its clock reading `at`. Returns the action's timeline, a [event, mail,
    model calls] for each moment a Seen describes. The desk calls it in this process, or
    in a new Python process through `check_act` (the same code, so both timelines read
    alike)."""
    timeline = []

    def note(*event):
        world_now = Ledgers(world)
        timeline.append([list(event), len(world_now.mail()), world_now.model_calls()])

    engine = Engine(SQLiteStore(store), FakeClock(at), ids=SequentialIds("id"), seed=0,
                    worker=worker, crash_at=CrashPlan(seen=_BeforeSteps(note)))
    engine.on_step = lambda label, how: note("step", label, how)
    note("begin")
    if action == "start":
        engine.start(workflow, world, post, run_id=run_id)
    elif action == "decide":
        engine.signal(run_id, "approval", decision)
        engine.recover()
    else:
        engine.recover()
    note("end")
    return timeline


# The entry point of a new process: the learner's cells, run again, then this.
_ACT_IN_A_NEW_PROCESS = """

def check_act(*args):
    from durable_lite.grading.exercises.ex07_approval_deadline import act as _act
    return _act(publish_post, *args)
"""

RESTARTED = ("each action of this test after start() ran in a new Python process, as after "
             "a restart: nothing your code kept in memory between two actions (a dict, an "
             "lru_cache, a counter) was still there")


class Desk:
    """One post's run, driven through time by fresh engines on one store — in this process,
    or (fresh=True) every action after start() in a new Python process: this process
    starts the run, as the first worker would, and is never asked again.

    It also keeps a timeline of what the world held at every moment of every action, so
    feedback can say where an extra email or an extra model call came from — a step's
    function, the workflow's own code just before a step, or the orchestration while no
    step ran at all (a replay) — instead of guessing the cause."""

    def __init__(self, folder, workflow, draw, fresh=False):
        needs_workflow(workflow, "publish_post")
        self.folder, self.workflow, self.fresh = folder, workflow, fresh
        self.world_folder = os.path.join(folder, "world")
        self.store = os.path.join(folder, "runs.db")
        self.clock = FakeClock(START)
        self.ticks = 0
        self.post = f"P-{draw.randint(1, 999)}"
        self.run_id = f"post-{self.post}-{draw.token(4)}"
        self.editor, self.manager = draw.distinct(draw.person, 2)
        self.seen = []
        if fresh:
            try:
                source = module_source(workflow, extra=_ACT_IN_A_NEW_PROCESS,
                                       call_as={"publish_post": workflow})
            except NotPortable as exc:
                raise Fail(str(exc)) from None
            write_module(folder, source)

    # driving the run ----------------------------------------------------------------------
    def _act(self, words, action, decision=None):
        """Do one action as a new engine (a new process) would; return the run after it."""
        self.ticks += 1        # every action is a new engine: nothing survives in it
        elsewhere = self.fresh and action != "start"
        if elsewhere:
            words += " (in a new Python process)"
        args = (self.world_folder, self.store, self.run_id, self.post, action, self.clock(),
                f"process-{self.ticks}", decision)
        if elsewhere:
            timeline = self._in_a_new_process(words, args)
        else:
            timeline = act(self.workflow, *args)
        self.seen += [Seen(words, tuple(event), mail, model) for event, mail, model in timeline]
        return self._reader().get(self.run_id)

    def _in_a_new_process(self, words, args):
        run = run_fresh(self.folder, "check_act", *args)
        if not run.finished:
            if run.error and "NotImplementedError" in run.error:
                raise NotAttempted("publish_post still raises NotImplementedError")
            raise Fail(f"{words}, your workflow could not be run: "
                       f"{run.error or f'exit status {run.returncode}'}",
                       "the check runs your notebook's cells again in a new process, as a "
                       "restart would: keep the answer's cell runnable from the top")
        return run.result

    def start(self):
        run = self._act("at start()", "start")
        if run.error and "NotImplementedError" in run.error:
            raise NotAttempted("publish_post still raises NotImplementedError")
        if run.status == "failed":
            raise Fail(f"publish_post failed as soon as it started: {run.error}")
        return run

    def later(self, seconds):
        """Move the clock, then do what a scheduler does: recover() what is due."""
        self.clock.advance(seconds)
        return self._act(f"when the clock reached {_after_start(self.clock())} and the run "
                         "was recovered", "recover")

    def decide(self, approved, by):
        before = self._reader().get(self.run_id)
        if before.status != "waiting":
            ended = f"{before.status}: {before.error}" if before.error else \
                f"{before.status}, {before.result!r}"
            raise Fail(f"{by}'s decision could not be delivered: the run had already ended "
                       f"({ended}) instead of waiting for it", _error_hint(before))
        return self._act(f"when {by}'s {'approval' if approved else 'rejection'} arrived",
                         "decide", {"approved": approved, "by": by})

    def _restarted(self, hint):
        """A hint about an extra email or draft, and, where each action was a new process,
        what those processes did not have."""
        return f"{hint}. {RESTARTED[0].upper()}{RESTARTED[1:]}" if self.fresh else hint

    # what the world and the run recorded ----------------------------------------------------
    def mail(self):
        mailer = Ledgers(self.world_folder)
        return {kind: len(mailer.mail(to)) for kind, to in ADDRESSES.items()}

    def _reader(self):
        return Engine(SQLiteStore(self.store), self.clock, ids=SequentialIds("id"), seed=0,
                      worker="reader")

    def steps(self):
        return step_names(self._reader(), self.run_id)

    def origin(self, ledger, index):
        """Where entry `index` (from 0) of the mail or model ledger came from, in words, and
        whether it came from outside any step: (words, outside). The entry appeared between
        two moments of the timeline: between the moment a step's function began and that
        step's checkpoint, it came from the step's function; just before a step (or a wait)
        began, from the workflow's own code; at any other moment no step was running (the
        workflow replayed)."""
        for i, seen in enumerate(self.seen):
            if getattr(seen, ledger) > index:
                break
        else:
            return "at a moment the check did not see", False
        kind, label = seen.event[0], (seen.event[1] if len(seen.event) > 1 else None)
        if kind == "step" and seen.event[2] == "executed":
            if i and self.seen[i - 1].event == ("before", label):
                return f"from step {label!r}, {seen.action}", False
            return f"while step {label!r} ran, or just before it, {seen.action}", False
        if kind == "before":
            return (f"{seen.action}, while no step was running (in the workflow's own code, "
                    f"just before it reached {label!r})", True)
        return f"{seen.action}, while no step was running (the workflow replayed)", True

    # judgements ------------------------------------------------------------------------------
    def expect_one_draft(self, when):
        """One draft per post, and a published post carries that draft's text."""
        world = Ledgers(self.world_folder)
        calls = world.model_calls()
        if calls == 0:
            raise Fail(f"{when}, the model was never called: no draft was written",
                       "the task's first point: the model writes the draft (write_draft), in "
                       "the step the task names")
        if calls > 1:
            raise self._extra_drafts(when, calls)
        draft = world.model_answers()[0]
        for message in world.mail(READERS):
            if draft[:40] not in message["subject"]:
                raise Fail(f"{when}, the post went out as {message['subject']!r}, which is not "
                           f"the draft the model wrote before the editor was asked "
                           f"({draft[:40]!r}...)",
                           self._restarted("publish the text of the draft the run recorded "
                                           "before asking the editor"))

    def _extra_drafts(self, when, calls):
        origins = [self.origin("model", i) for i in range(1, calls)]
        said = "; ".join(f"call {i} came {words}" for i, (words, _) in enumerate(origins, start=2))
        message = (f"{when}, the model was called {calls} times; expected once (one draft per "
                   f"post): {said}")
        drafted = "draft" in self.steps()
        if any(outside for _, outside in origins):
            return Fail(message, self._restarted(
                "a draft written outside a step is written again on every replay (after every "
                "wait), and the post published is not the one the editor was asked to review: "
                + ("the 'draft' step records one, so publish the text it returned and ask the "
                   "model nowhere else" if drafted else "write it in a step")))
        if drafted:
            return Fail(message + ", after the 'draft' step had recorded the first draft",
                        self._restarted(
                            "the draft recorded by the 'draft' step is the one the editor was "
                            "asked to review: publish that text, and write no second draft in "
                            "any step"))
        return Fail(message, self._restarted("the task's first point: one step, named 'draft', "
                                             "writes the draft"))

    def expect_waiting(self, run, deadline, mail, when):
        """The run waits for 'approval' (until `deadline`, unless it is None), and the mail
        sent so far is `mail`."""
        _waiting(run, when, deadline)
        self.expect_mail(mail, when)

    def expect_ending(self, run, result, mail, when):
        """The run completed with `result`, the mail sent is `mail`, and one draft was written."""
        _expect(run, result, when)
        self.expect_mail(mail, when)
        self.expect_one_draft(when)

    def expect_mail(self, want, when):
        got = self.mail()
        if got == want:
            return
        message, hint = f"{when}, the mail sent was {got}; expected {want}", ""
        extra = [kind for kind in want if got[kind] > want[kind]]
        missing = [kind for kind in want if got[kind] < want[kind]]
        if extra:
            kind = extra[0]
            sent = Ledgers(self.world_folder).mail()
            ours = [i for i, m in enumerate(sent) if m["to"] == ADDRESSES[kind]]
            index = ours[want[kind]]                       # the first one too many
            words, outside = self.origin("mail", index)
            message += f". The extra mail to the {_whom(kind)} went out {words}"
            if outside:
                hint = ("an email sent outside a step is sent again each time the workflow "
                        "replays (after every wait): send each one from a step")
            else:
                hint = (f"that mail came from a step, so a replay does not repeat it, but this "
                        f"path should not send it: here the task sends the {_whom(kind)} "
                        f"{want[kind]} mail(s). Follow this path through the task's points 2 "
                        "to 5 and see which of your steps run on it")
            hint = self._restarted(hint)
        elif missing:
            kind = missing[0]
            steps = self.steps()
            if SENDER[kind] in steps:
                message += (f". Step {SENDER[kind]!r} is recorded, but no mail reached the "
                            f"{_whom(kind)}")
                hint = f"look at whom step {SENDER[kind]!r} writes to"
            else:
                message += f". The run recorded the steps {steps}"
                hint = (f"on this path the task mails the {_whom(kind)}, in a step named "
                        f"{SENDER[kind]!r}")
        raise Fail(message, hint)

    def expect_steps(self, want, when):
        """The task's step names, in the order this path takes them (other steps allowed)."""
        steps = self.steps()
        named = [name for name in steps if name in TASK_STEPS]
        if named != want:
            raise Fail(f"{when}, the run recorded the steps {steps}; on this path the task's "
                       f"steps are {want}, in that order")


def _whom(kind) -> str:
    return "readers (the post)" if kind == "published" else kind


def _error_hint(run) -> str:
    """A hint for the commonest way a waiting workflow fails."""
    if run.status == "failed" and run.error and "NoneType" in run.error:
        return ("wait_for_signal returns None when its deadline passes: check for None "
                "before reading the decision")
    return ""


def _expect(run, result, when):
    if run.status != "completed":
        extra = f" (waiting for {run.waiting_for!r})" if run.status == "waiting" else \
            (f": {run.error}" if run.error else "")
        raise Fail(f"{when}, the run is {run.status}{extra}; expected it to complete with {result!r}",
                   _error_hint(run))
    if run.result != result:
        raise Fail(f"{when}, the run returned {run.result!r}; expected {result!r}")


def _after_start(at) -> str:
    seconds = at - START
    return f"{seconds / HOUR:g} h" if abs(seconds) >= HOUR else f"{seconds:g} s"


def _waiting(run, when, deadline):
    if run.status != "waiting" or run.waiting_for != "approval":
        detail = f"{run.status}" + (f" with {run.result!r}" if run.result is not None else "") + \
            (f": {run.error}" if run.error else "")
        raise Fail(f"{when}, the run is {detail}; expected it to be waiting for 'approval'",
                   _error_hint(run))
    if deadline is not None and run.wake_at != deadline:
        raise Fail(f"{when}, the run waits until {_after_start(run.wake_at)} after it started; "
                   f"expected {_after_start(deadline)}",
                   "the timeout is in seconds, counted from when the wait begins: one day "
                   "(DAY) for each of the two waits")


@q1.test("start() returns at once: the draft is written, the editor is asked, the run waits "
         "for 'approval' for one day",
         hint="points 1 and 2 of the task: two steps, then a wait for the signal 'approval' "
              "whose timeout is one day")
def _(publish_post, draw):
    with scratch("ex07") as folder:
        desk = Desk(folder, publish_post, draw)
        run = desk.start()
        desk.expect_waiting(run, START + DAY,
                            {"editor": 1, "manager": 0, "author": 0, "published": 0},
                            "right after start()")
        desk.expect_one_draft("right after start()")


@q1.test("the editor approves within the day: the draft the editor was asked about is "
         "published once, by the editor",
         hint="an approval publishes, and the result names who approved (point 5 of the task)")
def _(publish_post, draw):
    with scratch("ex07") as folder:
        desk = Desk(folder, publish_post, draw)
        desk.start()
        hours = draw.randint(1, 23)
        desk.clock.advance(hours * HOUR)
        run = desk.decide(True, desk.editor)
        when = f"after the editor approved {hours} hours in"
        desk.expect_ending(run, {"post": desk.post, "outcome": "published", "by": desk.editor},
                           {"editor": 1, "manager": 0, "author": 0, "published": 1}, when)


@q1.test("the editor rejects: nothing is published and the author is told",
         hint="a rejection tells the author, publishes nothing, and the result names who "
              "rejected (point 5 of the task)")
def _(publish_post, draw):
    with scratch("ex07") as folder:
        desk = Desk(folder, publish_post, draw)
        desk.start()
        desk.clock.advance(draw.randint(1, 23) * HOUR)
        run = desk.decide(False, desk.editor)
        when = "after the editor rejected"
        desk.expect_ending(run, {"post": desk.post, "outcome": "rejected", "by": desk.editor},
                           {"editor": 1, "manager": 0, "author": 1, "published": 0}, when)


@q1.test("no answer for a day: the manager is asked and the run waits one more day "
         "(and not a second before the deadline)",
         hint="wait_for_signal returns None when its deadline passes: then the manager is "
              "told and the run waits for 'approval' again, for one more day (point 3)")
def _(publish_post, draw):
    with scratch("ex07") as folder:
        desk = Desk(folder, publish_post, draw)
        desk.start()
        run = desk.later(DAY - 1)
        desk.expect_waiting(run, START + DAY,
                            {"editor": 1, "manager": 0, "author": 0, "published": 0},
                            "one second before the deadline")
        run = desk.later(1)
        desk.expect_waiting(run, START + 2 * DAY,
                            {"editor": 1, "manager": 1, "author": 0, "published": 0},
                            "when the editor's day ran out")
        desk.expect_one_draft("when the editor's day ran out")


@q1.test("after the escalation the manager's answer counts: approved, the post is published by the manager",
         hint="the second wait's decision is handled like the first one")
def _(publish_post, draw):
    with scratch("ex07") as folder:
        desk = Desk(folder, publish_post, draw)
        desk.start()
        desk.later(DAY)
        desk.clock.advance(draw.randint(1, 23) * HOUR)
        run = desk.decide(True, desk.manager)
        when = "after the manager approved on the second day"
        desk.expect_ending(run, {"post": desk.post, "outcome": "published", "by": desk.manager},
                           {"editor": 1, "manager": 1, "author": 0, "published": 1}, when)


@q1.test("after the escalation the manager rejects: nothing is published and the author is told",
         hint="the second wait's decision goes through the same approve-or-reject code as the "
              "editor's: a rejection publishes nothing")
def _(publish_post, draw):
    with scratch("ex07") as folder:
        desk = Desk(folder, publish_post, draw)
        desk.start()
        desk.later(DAY)
        desk.clock.advance(draw.randint(1, 23) * HOUR)
        run = desk.decide(False, desk.manager)
        when = "after the manager rejected on the second day"
        desk.expect_ending(run, {"post": desk.post, "outcome": "rejected", "by": desk.manager},
                           {"editor": 1, "manager": 1, "author": 1, "published": 0}, when)


@q1.test("nobody answers for two days: a safe default — nothing published, the author told, "
         "outcome 'expired'",
         hint="when the second wait also ends without a decision, the safe default of point 4 "
              "applies")
def _(publish_post, draw):
    with scratch("ex07") as folder:
        desk = Desk(folder, publish_post, draw)
        desk.start()
        desk.later(DAY)
        run = desk.later(DAY)
        when = "after two days without an answer"
        desk.expect_ending(run, {"post": desk.post, "outcome": "expired"},
                           {"editor": 1, "manager": 1, "author": 1, "published": 0}, when)


# path -> (how long nobody answers, in days; who then decides, or None; approved?; the
# task's steps that path takes, in order)
PATHS = {
    "the editor approves": (0, "editor", True, ["draft", "ask-editor", "publish"]),
    "the editor rejects": (0, "editor", False, ["draft", "ask-editor", "tell-author"]),
    "the manager approves": (1, "manager", True, ["draft", "ask-editor", "escalate", "publish"]),
    "the manager rejects": (1, "manager", False, ["draft", "ask-editor", "escalate", "tell-author"]),
    "nobody answers": (2, None, None, ["draft", "ask-editor", "escalate", "tell-author"]),
}


@q1.test("on every path the steps are recorded under the names the task gives",
         hint="keep the task's step names (draft, ask-editor, escalate, tell-author, publish): "
              "they name the run's history, and a later version of the workflow must find them "
              "there to resume the runs that are still waiting")
def _(publish_post, draw):
    for path, (days, who, approved, want) in PATHS.items():
        with scratch("ex07") as folder:
            desk = Desk(folder, publish_post, draw)
            desk.start()
            for _ in range(days):
                desk.later(DAY)
            if who is not None:
                desk.clock.advance(draw.randint(1, 23) * HOUR)
                desk.decide(approved, desk.editor if who == "editor" else desk.manager)
            desk.expect_steps(want, f"when {path}")


@q1.test("restarted between every two actions (the run started here; the editor's day "
         "running out, then the manager's approval, each handled by a new Python process): "
         "still the task's mail, one draft, and that draft published",
         hint="a restart keeps the run's history and nothing else: whatever your code kept in "
              "memory between two actions (a dict, an lru_cache, a counter) is gone in the next "
              "process, and the workflow replays from the top there")
def _(publish_post, draw):
    with scratch("ex07") as folder:
        desk = Desk(folder, publish_post, draw, fresh=True)
        desk.start()
        run = desk.later(DAY)        # (how long each wait lasts is the branch tests' to judge)
        desk.expect_waiting(run, None, {"editor": 1, "manager": 1, "author": 0, "published": 0},
                            "when the editor's day ran out, in a new process")
        desk.clock.advance(draw.randint(1, 23) * HOUR)
        run = desk.decide(True, desk.manager)
        desk.expect_ending(run, {"post": desk.post, "outcome": "published", "by": desk.manager},
                           {"editor": 1, "manager": 1, "author": 0, "published": 1},
                           "after the manager approved, in another new process")
