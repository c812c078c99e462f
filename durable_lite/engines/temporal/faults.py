"""The course's three crash points, around a Temporal activity.

durable_lite's engine checks its crash points itself; Temporal knows nothing of them. A
workflow ported to Temporal calls its activities through `step(name, *args)` from here
instead of `workflow.execute_activity(name, ...)`, and declares them with `activity(name)`
instead of `@activity.defn(name=...)`. The same Temporal calls, with three checks around:

    before_step       in the workflow, just before it schedules the activity
    after_effect      inside the activity, after its side effect, before it returns: the
                      server has not heard of the result (the crash window of lesson 03)
    after_checkpoint  in the workflow, just after the activity's result came back: the
                      server recorded ActivityTaskCompleted before handing it over

`arm(CrashAt(...))` sets the crashes for this worker process (each fires once). The checks
in the workflow run only while it executes for the first time, never while a worker
replays its history (a replay re-runs the code, but what it passes is already history).
A real Temporal application has no such hooks; they exist so every engine can be broken
at the very same points and their ledgers compared.

Every activity call gets the course's timeouts and retry policy (see STEP_TIMEOUT):
Temporal retries a failed or timed-out activity by default, forever, with backoff.
"""

import functools
from datetime import timedelta

from temporalio import activity as _activity
from temporalio import workflow
from temporalio.common import RetryPolicy

from ...faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP, CrashPlan

# A worker killed inside an activity sends no word; the server learns of it only when the
# attempt's start-to-close timeout runs out, then retries it (after RETRY's first interval)
# on any worker of the task queue. A few seconds keeps a lesson's recovery short, yet is far
# longer than any of the course's activities takes on a busy laptop: an attempt that
# outlived it would be retried while it still ran, and an unkeyed effect would happen
# twice with no crash at all. A real payment call would get longer, or heartbeats.
STEP_TIMEOUT = timedelta(seconds=5)
RETRY = RetryPolicy(initial_interval=timedelta(seconds=0.5), backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=10))      # no maximum_attempts: forever

_plan = CrashPlan()


def arm(*crashes) -> None:
    """Crash this process at these points (faults.CrashAt; kill=True sends SIGKILL)."""
    global _plan
    _plan = CrashPlan(list(crashes))


def disarm() -> None:
    arm()


def pending() -> int:
    return len(_plan.pending)


def _check(name, when):
    # Each step name appears once per workflow in the course's examples: occurrence 1.
    _plan.check(name, 1, when)


def activity(name: str):
    """`@activity.defn(name=name)` with the after_effect crash point inside the function."""
    def decorate(fn):
        @functools.wraps(fn)
        def inside(*args, **kwargs):
            result = fn(*args, **kwargs)
            _check(name, AFTER_EFFECT)
            return result
        return _activity.defn(name=name)(inside)
    return decorate


async def step(name: str, *args, retry_policy: RetryPolicy = RETRY,
               start_to_close_timeout: timedelta = STEP_TIMEOUT):
    """`await workflow.execute_activity(name, args=...)` with before_step and
    after_checkpoint around it (checked only when the workflow is not replaying)."""
    if not workflow.unsafe.is_replaying():
        with workflow.unsafe.sandbox_unrestricted():
            _check(name, BEFORE_STEP)
    result = await workflow.execute_activity(name, args=list(args),
                                             start_to_close_timeout=start_to_close_timeout,
                                             retry_policy=retry_policy)
    if not workflow.unsafe.is_replaying():
        with workflow.unsafe.sandbox_unrestricted():
            _check(name, AFTER_CHECKPOINT)
    return result
