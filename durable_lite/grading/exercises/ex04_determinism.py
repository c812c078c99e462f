"""Exercise 04: find and fix the non-determinism in an orchestration (the clock, an id).

`dl.faults.sweep` crashes the learner's receipt workflow at every point and resumes it on a
fake clock with predictable ids; `EngineRuns` runs single cases whose clock starts at a
drawn time. A replay that diverges shows as its own status.

The properties a right answer has, each judged by the test that names it, and how the cases
vary it (tests/test_grading_properties_01_07.py has, for each, an answer wrong in that
property alone, and it fails):

q1 receipt(ctx, folder, order_id)  (drawn orders and run ids)
  - a crash at any point, then a resume: the result of an uninterrupted run (an id from
    uuid4(), a time from time.time() in the orchestration fail);
  - issued_at is the time the run recorded with ctx.now(), on a clock that starts at a
    drawn time and moves an hour before the resume (a literal time fails);
  - the customer is emailed the receipt the run returns, at every crash point;
  - two receipts for one order, issued in the same second by two processes (two engines,
    their clocks reading the same drawn time, their ids and seeds drawn apart): two ids
    (an id made from the order, or from the time — int(ctx.now()) — fails);
  - the given steps keep their names ('lookup', then 'email'), and the result its shape:
    exactly receipt ('rcpt-' and an id), issued_at and order (the order id). The exercise
    starts from code to fix, and that code keeps both, so both are judged inside tests the
    given code fails (the sweep's test, the issued_at test): every test fails it.
"""

from ...faults import AFTER_CHECKPOINT, BEFORE_STEP, CrashAt
from ..checks import Exercise, Fail
from ..harness import (EngineRuns, START, crash_label, diverged, needs_workflow, scratch,
                       sweep_of, unfinished)
from ..ledgers import Ledgers

EXERCISE = Exercise("04_determinism", "Replay determinism",
                    lesson="notebooks/04_replay_determinism.ipynb")


def _changed(result, expected) -> list:
    """The keys whose values differ between two result dicts."""
    if not isinstance(result, dict) or not isinstance(expected, dict):
        return []
    return sorted(k for k in set(result) | set(expected) if result.get(k) != expected.get(k))


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "a receipt that survives replay", answers=["receipt"])


def _subjects(folder):
    return [m["subject"] for m in Ledgers(folder).mail()]


def _swept(receipt, draw):
    """Every crash point of the receipt, each resumed at once on the same fake clock: a
    workflow that reads ctx.now() after a step returns the same time however it crashed,
    so only what is read anew on a replay (time.time(), uuid4()) can change the result.
    (The next test moves the clock an hour between the crash and the resume.) Every case
    has the same run id, so an id made from the run (one receipt per run) is the same too."""
    needs_workflow(receipt, "receipt")
    return sweep_of(receipt, draw.order_id(), what="receipt", observe=_subjects,
                    run_id=draw.run_id("receipt"))


GIVEN_STEPS = ["lookup", "email"]
RESULT_KEYS = {"receipt", "issued_at", "order"}


def _expect_shape(result, order_id, where):
    """The result keeps the given shape: exactly receipt ('rcpt-...'), issued_at, order."""
    if not isinstance(result, dict) or set(result) != RESULT_KEYS:
        keys = sorted(result) if isinstance(result, dict) else type(result).__name__
        raise Fail(f"{where}, the run returned {result!r} (keys {keys}); the given workflow "
                   f"returns a dict with exactly the keys {sorted(RESULT_KEYS)}",
                   "change only the two reads the question is about: the result keeps the "
                   "shape it was given")
    if result["order"] != order_id:
        raise Fail(f"{where}, the run for order {order_id!r} returned order {result['order']!r}")
    if not str(result["receipt"]).startswith("rcpt-"):
        raise Fail(f"{where}, the receipt id {result['receipt']!r} lost its 'rcpt-' prefix",
                   "keep the receipt id's prefix as it was given")


def _receipt_id(result):
    return result.get("receipt") if isinstance(result, dict) else None


@q1.test("a crash at any point of the given steps ('lookup', then 'email'), then a resume: "
         "the same receipt as an uninterrupted run",
         hint="read the time with ctx.now() and make the id with ctx.uuid(): both are recorded "
              "the first time and replayed after; time.time() and uuid.uuid4() are read anew "
              "on every replay")
def _(receipt, draw):
    s = _swept(receipt, draw)
    steps = [row["step"] for row in s.rows if row["kind"] == "step" and row["when"] == BEFORE_STEP]
    if [name for name in steps if name in GIVEN_STEPS] != GIVEN_STEPS:
        raise Fail(f"the run recorded the steps {steps}; the given workflow records "
                   f"{GIVEN_STEPS}, once each and in that order",
                   "change only the two reads the question is about: the steps keep the names "
                   "they were given")
    expected = s.clean["result"]
    for row in s.rows:
        where = f"crash {crash_label(row)}, then resume"
        if diverged(row["status"], row["error"]):
            raise Fail(f"{where}: the replay diverged ({row['error'].split('. ')[0]})",
                       "the replay made different calls than the first attempt: something in "
                       "the orchestration changed between the two (the clock, an id, randomness)")
        if row["status"] != "completed":
            unfinished(row["status"], row["error"], f"receipt ({where})")
        if row["same_result"]:
            continue
        hint = ""
        changed = _changed(row["result"], expected)
        if "receipt" in changed:
            hint = ("the receipt id came out differently on the replay: make it from "
                    "ctx.uuid(), which records the id once")
        elif changed == ["issued_at"]:
            hint = ("the time came out differently on the replay: read it with ctx.now(), "
                    "which records it once")
        raise Fail(f"{where}: the run returned {row['result']!r}; an uninterrupted run returned "
                   f"{expected!r}", hint)


@q1.test("in a result of the given shape (receipt 'rcpt-...', issued_at, order), issued_at "
         "is the time the run recorded with ctx.now(), on a clock that starts at a new time for "
         "every check",
         hint="read the time with ctx.now(); a time typed in, or read from time.time(), is not "
              "the run's clock")
def _(receipt, draw):
    needs_workflow(receipt, "receipt")
    start = START + draw.randint(1, 3000) * 86400 + draw.randint(0, 86399)
    for crash in (None, draw.choice(["lookup", "email"])):
        order_id = draw.order_id()
        with scratch("ex04") as folder:
            runs = EngineRuns(folder, start=start)
            run_id = draw.run_id("receipt")
            run = runs.run(receipt, folder, order_id, run_id=run_id,
                           crash=None if crash is None else CrashAt(crash, AFTER_CHECKPOINT))
            if run.status != "completed":
                unfinished(run.status, run.error, "receipt")
            recorded = [row["result"] for row in runs.engine().history(run_id)
                        if row["kind"] == "value" and row["step"] == "now"]
        where = "with no crash" if crash is None else f"after a crash after step {crash!r}"
        _expect_shape(run.result, order_id, where)
        issued = run.result["issued_at"]
        if issued not in recorded:
            raise Fail(f"{where}, on a clock that read {start:.0f} when the run began, the run "
                       f"returned issued_at {issued!r}; the time it recorded with ctx.now() is "
                       f"{recorded[0] if recorded else 'nothing: it never called ctx.now()'}")


@q1.test("the receipt in the customer's email is the receipt the run returns",
         hint="if the email was sent before the crash, the replay must rebuild the very same "
              "receipt id and time: ctx.uuid() and ctx.now() give the recorded ones back")
def _(receipt, draw):
    s = _swept(receipt, draw)
    for row in [None, *s.rows]:
        case = s.clean if row is None else row
        receipt_id, subjects = _receipt_id(case["result"]), case["observed"]
        stale = [subject for subject in subjects if str(receipt_id) not in subject]
        if not receipt_id or not subjects or stale:
            where = "with no crash" if row is None else f"crash {crash_label(row)}, then resume"
            raise Fail(f"{where}: the run returned receipt {receipt_id!r}, but the customer "
                       f"was emailed {subjects!r}")


@q1.test("two receipts for the same order, issued in the same second by two processes, each "
         "crashed and resumed: two different receipt ids, each the one its customer was emailed",
         hint="a receipt id must be unique per receipt — made from the order, or from the "
              "time, a second receipt can repeat the first's id — and the same on every replay")
def _(receipt, draw):
    needs_workflow(receipt, "receipt")
    order_id = draw.order_id()
    at = START + draw.randint(1, 3000) * 86400 + draw.randint(0, 86399)
    with scratch("ex04") as folder:
        results = []
        for source in draw.distinct(lambda: draw.token(8), 2):   # two processes, one second
            runs = EngineRuns(folder, seed=draw.randint(1, 2**31), start=at)
            sent = len(Ledgers(folder).mail())
            crash = CrashAt("email", AFTER_CHECKPOINT)     # the customer has the receipt
            run = runs.run(receipt, folder, order_id, run_id=draw.run_id("receipt"), ids=source,
                           crash=crash)
            if run.status != "completed":
                unfinished(run.status, run.error, "receipt")
            receipt_id = _receipt_id(run.result)
            subjects = [m["subject"] for m in Ledgers(folder).mail()[sent:]]
            if not receipt_id or not subjects or any(str(receipt_id) not in s for s in subjects):
                raise Fail(f"crash {crash_label(crash)}, then resume: the run returned receipt "
                           f"{receipt_id!r}, but the customer was emailed {subjects!r}")
            results.append(receipt_id)
    if results[0] == results[1]:
        raise Fail(f"two runs issuing receipts for order {order_id!r}, both begun when the clock "
                   f"read {at:.0f}, returned the same receipt {results[0]!r}: the customer could "
                   "not tell the two receipts apart")


