"""Exercise 07: wait for an editor's approval with a deadline, escalate, then fall back.

Every test drives the learner's workflow the way production would: each action (start,
a decision, a scheduler tick) uses a fresh Engine on the same SQLite file — as a new
process would — and time moves only when the test moves its FakeClock. The test sends a
decision with `engine.signal`, or withholds it and lets the deadline pass, then calls
`engine.recover()` and counts the mail in the simulated world.

Every branch the task names is driven, each in its own test: the editor approves, the
editor rejects, nobody answers and the manager is asked, the manager approves, the manager
rejects, nobody answers at all. The post, the people and the moments they answer are drawn.
In every branch the model's ledger must show one draft, and a published post must carry
the text of that draft: a draft written outside a step is written again on every replay,
and what gets published is not what the editor was asked to review.
"""

import os

from ...clock import FakeClock, SequentialIds
from ...engine import Engine
from ...store import SQLiteStore
from ..checks import Exercise, Fail, NotAttempted
from ..harness import START, needs_workflow, scratch
from ..ledgers import Ledgers

EXERCISE = Exercise("07_approval_deadline", "A deadline and an escalation path",
                    lesson="notebooks/07_waiting_for_a_human.ipynb")

HOUR, DAY = 3600, 24 * 3600
EDITOR, MANAGER = "editor@example.com", "manager@example.com"
AUTHOR, READERS = "author@example.com", "readers@example.com"

q1 = EXERCISE.question("q1", "publish_post", answers=["publish_post"])


class Desk:
    """One post's run, driven through time by fresh engines on one store."""

    def __init__(self, folder, workflow, draw):
        needs_workflow(workflow, "publish_post")
        self.folder, self.workflow = folder, workflow
        self.world_folder = os.path.join(folder, "world")
        self.clock = FakeClock(START)
        self.ticks = 0
        self.post = f"P-{draw.randint(1, 999)}"
        self.run_id = f"post-{self.post}-{draw.token(4)}"
        self.editor, self.manager = draw.distinct(draw.person, 2)

    def engine(self):
        self.ticks += 1        # every action is a new process: nothing survives in memory
        return Engine(SQLiteStore(os.path.join(self.folder, "runs.db")), self.clock,
                      ids=SequentialIds("id"), seed=0, worker=f"process-{self.ticks}")

    def start(self):
        run = self.engine().start(self.workflow, self.world_folder, self.post, run_id=self.run_id)
        if run.error and "NotImplementedError" in run.error:
            raise NotAttempted("publish_post still raises NotImplementedError")
        if run.status == "failed":
            raise Fail(f"publish_post failed as soon as it started: {run.error}")
        return run

    def later(self, seconds):
        """Move the clock, then do what a scheduler does: recover() what is due."""
        self.clock.advance(seconds)
        engine = self.engine()
        engine.recover()
        return engine.get(self.run_id)

    def decide(self, approved, by):
        engine = self.engine()
        before = engine.get(self.run_id)
        if before.status != "waiting":
            ended = f"{before.status}: {before.error}" if before.error else \
                f"{before.status}, {before.result!r}"
            raise Fail(f"{by}'s decision could not be delivered: the run had already ended "
                       f"({ended}) instead of waiting for it", _error_hint(before))
        engine.signal(self.run_id, "approval", {"approved": approved, "by": by})
        engine.recover()
        return engine.get(self.run_id)

    def mail(self):
        mailer = Ledgers(self.world_folder)
        return {"editor": len(mailer.mail(EDITOR)), "manager": len(mailer.mail(MANAGER)),
                "author": len(mailer.mail(AUTHOR)), "published": len(mailer.mail(READERS))}

    def expect_one_draft(self, when):
        """One draft per post, and a published post carries that draft's text."""
        world = Ledgers(self.world_folder)
        calls = world.model_calls()
        if calls != 1:
            raise Fail(f"{when}, the model was called {calls} times; expected once (one "
                       "draft per post)" if calls else
                       f"{when}, the model was never called: no draft was written",
                       "write the draft in a step (ctx.step(\"draft\", write_draft, ...)): "
                       "outside a step it is written again on every replay, after every wait,"
                       " and the post published is not the draft the editor was asked to review")
        draft = world.model_answers()[0]
        for message in world.mail(READERS):
            if draft[:40] not in message["subject"]:
                raise Fail(f"{when}, the post went out as {message['subject']!r}, which is not "
                           f"the draft the model wrote before the editor was asked "
                           f"({draft[:40]!r}...)",
                           "publish the text of the draft step's result: draft[\"text\"]")

    def expect_waiting(self, run, deadline, mail, when):
        """The run waits for 'approval' until `deadline`, and the mail sent so far is `mail`."""
        _waiting(run, when, deadline)
        _mail(self, mail, when)

    def expect_ending(self, run, result, mail, when):
        """The run completed with `result`, the mail sent is `mail`, and one draft was written."""
        _expect(run, result, when)
        _mail(self, mail, when)
        self.expect_one_draft(when)


def _error_hint(run) -> str:
    """A hint for the commonest way a waiting workflow fails."""
    if run.status == "failed" and run.error and "NoneType" in run.error:
        return ("wait_for_signal returns None when its deadline passes: check "
                "`if decision is None:` before reading decision[...]")
    return ""


def _expect(run, result, when):
    if run.status != "completed":
        extra = f" (waiting for {run.waiting_for!r})" if run.status == "waiting" else \
            (f": {run.error}" if run.error else "")
        raise Fail(f"{when}, the run is {run.status}{extra}; expected it to complete with {result!r}",
                   _error_hint(run))
    if run.result != result:
        raise Fail(f"{when}, the run returned {run.result!r}; expected {result!r}")


def _mail(desk, want, when):
    got = desk.mail()
    if got != want:
        hint = ""
        if any(got[k] > want[k] for k in want):
            hint = ("an email sent outside a step is sent again each time the workflow replays "
                    "(after every wait): send each one with ctx.step(...)")
        raise Fail(f"{when}, the mail sent was {got}; expected {want}", hint)


def _after_start(at) -> str:
    seconds = at - START
    return f"{seconds / HOUR:g} h" if abs(seconds) >= HOUR else f"{seconds:g} s"


def _waiting(run, when, deadline):
    if run.status != "waiting" or run.waiting_for != "approval":
        detail = f"{run.status}" + (f" with {run.result!r}" if run.result is not None else "") + \
            (f": {run.error}" if run.error else "")
        raise Fail(f"{when}, the run is {detail}; expected it to be waiting for 'approval'",
                   _error_hint(run))
    if run.wake_at != deadline:
        raise Fail(f"{when}, the run waits until {_after_start(run.wake_at)} after it started; "
                   f"expected {_after_start(deadline)}",
                   "the timeout is in seconds, counted from when the wait begins: "
                   "ctx.wait_for_signal(\"approval\", timeout=1 * DAY) for each of the two waits")


@q1.test("start() returns at once: the draft is written, the editor is asked, the run waits "
         "for 'approval' for one day",
         hint="write the draft and ask the editor in steps, then "
              "ctx.wait_for_signal(\"approval\", timeout=1 * DAY)")
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
         hint='an approval {"approved": True, "by": ...} publishes and returns '
              '{"post": post_id, "outcome": "published", "by": decision["by"]}')
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
         hint='a rejection tells the author and returns {"post": ..., "outcome": "rejected", "by": ...}')
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
         hint="wait_for_signal returns None when its deadline passes: then notify the manager "
              "in a step and wait for 'approval' again, for one more day")
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
         hint='when the second wait also returns None, tell the author and return '
              '{"post": post_id, "outcome": "expired"}')
def _(publish_post, draw):
    with scratch("ex07") as folder:
        desk = Desk(folder, publish_post, draw)
        desk.start()
        desk.later(DAY)
        run = desk.later(DAY)
        when = "after two days without an answer"
        desk.expect_ending(run, {"post": desk.post, "outcome": "expired"},
                           {"editor": 1, "manager": 1, "author": 1, "published": 0}, when)
