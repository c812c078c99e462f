"""The course's three crash points, around a DBOS step.

durable_lite's engine checks its crash points itself. DBOS knows nothing of them, so a
workflow ported to DBOS declares its steps with `step(name)` from here instead of
`DBOS.step(name=name)`. It is the same DBOS step with three checks around it:

    before_step       in the workflow, just before DBOS sees the call
    after_effect      inside the step function, after its side effect, before DBOS has
                      recorded its output (the crash window of lesson 03)
    after_checkpoint  in the workflow, just after the step returned: DBOS records a step's
                      output before handing it back, so the checkpoint is written

`arm(CrashAt(...))` sets the crashes for this process (each fires once). A real DBOS
application has no such hooks; they exist so both engines can be broken at the very same
points and their ledgers compared.
"""

import functools

from dbos import DBOS

from ...faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP, CrashPlan

_plan = CrashPlan()


def arm(*crashes) -> None:
    """Crash this process at these points (faults.CrashAt; kill=True sends SIGKILL)."""
    global _plan
    _plan = CrashPlan(list(crashes))


def disarm() -> None:
    arm()


def pending() -> int:
    """How many armed crashes have not fired yet."""
    return len(_plan.pending)


def _check(name, when):
    # Each step name appears once per workflow in the course's examples: occurrence 1.
    _plan.check(name, 1, when)


def step(name: str, **options):
    """`DBOS.step(name=name, **options)` with the three crash points around the function."""
    def decorate(fn):
        @functools.wraps(fn)
        def inside(*args, **kwargs):
            result = fn(*args, **kwargs)
            _check(name, AFTER_EFFECT)
            return result

        recorded = DBOS.step(name=name, **options)(inside)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            _check(name, BEFORE_STEP)
            result = recorded(*args, **kwargs)
            _check(name, AFTER_CHECKPOINT)
            return result

        return call
    return decorate
