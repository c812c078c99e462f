"""Exercise 04: find and fix the non-determinism in an orchestration (the clock, an id).

Every run here uses a fake clock and predictable ids, so a correct workflow gives the same
result whether it ran straight through or crashed and resumed. A workflow that still reads
time.time() or uuid4() in its orchestration cannot: that difference is what the tests look for.
"""

import os

from .. import examples
from ..errors import NonDeterminismError
from ..faults import every_crash_point
from .checks import Exercise, Fail, NotAttempted
from .harness import START, EngineRuns, crash_label, needs_workflow, scratch

EXERCISE = Exercise("04_determinism", "Replay determinism",
                    lesson="notebooks/04_replay_determinism.ipynb")


def _world(folder):
    return examples.world_at(os.path.join(folder, "world"))


def _finish(run, what):
    if run.status == "completed":
        return run.result
    if run.error and "NotImplementedError" in run.error:
        raise NotAttempted(f"{what} still raises NotImplementedError")
    raise Fail(f"{what} ended {run.status}: {run.error}")


def _changed(result, expected) -> list:
    """The keys whose values differ between two result dicts."""
    if not isinstance(result, dict) or not isinstance(expected, dict):
        return []
    return sorted(k for k in set(result) | set(expected) if result.get(k) != expected.get(k))


def _diverged(exc, crash):
    first = str(exc).split(". ")[0]
    return Fail(f"crash {crash_label(crash)}, then resume: NonDeterminismError — {first}",
                "the replay made different calls than the first attempt: something in the "
                "orchestration changed between the two (the clock, an id, randomness)")


# q1 -----------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "a receipt that survives replay", answers=["receipt"])

RECEIPT_STEPS = ["lookup", "email"]


def _receipt(receipt, crash=None, clock_reads=None):
    """(result, emails sent) for one run, crashed once at `crash` and resumed.

    `clock_reads`, if given, is a list that receives the times the run recorded with ctx.now().
    """
    needs_workflow(receipt, "receipt")
    with scratch("ex04") as folder:
        runs = EngineRuns(folder, ids_prefix="id")
        try:
            run = runs.run(receipt, os.path.join(folder, "world"), "A-17", run_id="receipt-A-17",
                           crash=crash)
        except NonDeterminismError as exc:
            raise _diverged(exc, crash) from None
        result = _finish(run, "receipt")
        if clock_reads is not None:
            clock_reads.extend(row["result"] for row in runs.engine().history("receipt-A-17")
                               if row["kind"] == "value" and row["step"] == "now")
        return result, [m["subject"] for m in _world(folder).mailer.sent()]


def _without_time(result):
    return {k: v for k, v in result.items() if k != "issued_at"} if isinstance(result, dict) else result


@q1.test("a crash at any point, then a resume: the same receipt as an uninterrupted run",
         hint="read the time with ctx.now() and make the id with ctx.uuid(): both are recorded "
              "the first time and replayed after; time.time() and uuid.uuid4() are read anew "
              "on every replay")
def _(receipt):
    expected, _ = _receipt(receipt)
    if not isinstance(expected, dict) or expected.get("issued_at") != START:
        raise Fail(f"an uninterrupted run returned {expected!r}; its issued_at should be the "
                   f"engine's clock ({START}), which the check sets to a fixed time")
    for crash in every_crash_point(RECEIPT_STEPS):
        recorded = []
        result, _ = _receipt(receipt, crash, clock_reads=recorded)
        where = f"crash {crash_label(crash)}, then resume"
        if _without_time(result) != _without_time(expected):
            hint = ""
            if _changed(result, expected) == ["issued_at", "receipt"] or \
                    _changed(result, expected) == ["receipt"]:
                hint = ("the receipt id came out differently on the replay: make it from "
                        "ctx.uuid(), which records the id once")
            raise Fail(f"{where}: the run returned {result!r}; an uninterrupted run returned "
                       f"{expected!r}", hint)
        # The time may be the resume's if the crash came before the clock was first read;
        # either way it must be the time the run recorded, so every later replay agrees.
        if not isinstance(result, dict) or result.get("issued_at") not in recorded:
            raise Fail(f"{where}: the run returned issued_at {result.get('issued_at')!r}, but "
                       f"the time it recorded with ctx.now() is {recorded or 'nothing'}",
                       "read the time with ctx.now(): time.time() is read anew on every replay")


@q1.test("the receipt in the customer's email is the receipt the run returns",
         hint="if the email was sent before the crash, the replay must rebuild the very same "
              "receipt id and time: ctx.uuid() and ctx.now() give the recorded ones back")
def _(receipt):
    for crash in [None, *every_crash_point(RECEIPT_STEPS)]:
        result, subjects = _receipt(receipt, crash)
        receipt_id = result.get("receipt") if isinstance(result, dict) else None
        stale = [s for s in subjects if str(receipt_id) not in s]
        if not receipt_id or stale:
            where = "with no crash" if crash is None else f"crash {crash_label(crash)}, then resume"
            raise Fail(f"{where}: the run returned receipt {receipt_id!r}, but the customer "
                       f"was emailed {subjects!r}")
