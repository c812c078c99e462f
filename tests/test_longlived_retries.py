"""Per-step retries: exponential backoff with jitter and a cap, errors that are not retried,
per-step timeouts. Backoff waits on the injected sleeper, so these tests take no time."""

import threading

from core_support import *  # noqa: F401,F403


class Flaky:
    """Fails its first `failures` calls with `error`, then returns "ok"."""

    def __init__(self, failures, error=ConnectionError):
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"call {self.calls} failed")
        return "ok"


def engine_with_sleeps(store, clock, **options):
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        clock.advance(seconds)

    return dl.Engine(store, clock, sleep=sleep, **options), sleeps


def one_step(name, spec, fn):
    @dl.workflow(name)
    def wf(ctx):
        return ctx.step(spec, fn)
    return wf


def test_backoff_grows_exponentially_up_to_its_cap_without_real_sleeping(engine, clock):
    worker, sleeps = engine_with_sleeps(engine.store, clock)
    flaky = Flaky(4)
    retry = dl.Retry(max_attempts=5, initial=10, multiplier=3, cap=60, jitter=False)
    run = worker.start(one_step("core-backoff", dl.Step("call", retry=retry), flaky), run_id="bo")
    assert run.status == "completed" and flaky.calls == 5
    assert sleeps == [10, 30, 60, 60]
    (row,) = worker.history("bo")
    assert row["attempts"] == 5 and row["status"] == "completed"
    assert row["errors"] == [f"attempt {n}: ConnectionError: call {n} failed" for n in range(1, 5)]


def test_full_jitter_stays_under_the_exponential_ceiling_and_is_seeded(store_path, stores, clock):
    retry = dl.Retry(max_attempts=6, initial=1, multiplier=2, cap=8, jitter=True)
    runs = []
    for n in range(2):
        worker, sleeps = engine_with_sleeps(stores(store_path), clock, seed=42)
        worker.start(one_step("core-jitter", dl.Step("call", retry=retry), Flaky(5)), run_id=f"j{n}")
        runs.append(sleeps)
    ceilings = [1, 2, 4, 8, 8]
    assert all(0 <= s <= c for s, c in zip(runs[0], ceilings)) and len(runs[0]) == 5
    assert runs[0] == runs[1]                      # the same seed, the same waits
    assert len(set(runs[0])) == 5                  # and they are not in lockstep


def test_errors_marked_no_retry_fail_at_once(engine, clock):
    worker, sleeps = engine_with_sleeps(engine.store, clock)
    flaky = Flaky(3, error=PermissionError)
    retry = dl.Retry(max_attempts=5, no_retry=(PermissionError,))
    run = worker.start(one_step("core-no-retry", dl.Step("call", retry=retry), flaky), run_id="nr")
    assert run.status == "failed" and flaky.calls == 1 and sleeps == []
    assert "PermissionError: call 1 failed" in run.error and "after 1 attempt" in run.error


def test_exhausting_the_retries_fails_the_run_with_the_last_error_recorded(engine, clock):
    worker, sleeps = engine_with_sleeps(engine.store, clock)
    flaky = Flaky(10)
    run = worker.start(one_step("core-exhaust", dl.Step("call", retry=dl.Retry(max_attempts=3, jitter=False)),
                                flaky), run_id="ex")
    assert run.status == "failed" and flaky.calls == 3 and sleeps == [1, 2]
    assert "'call'" in run.error and "'ex'" in run.error and "call 3 failed" in run.error
    (row,) = worker.history("ex")
    assert (row["status"], row["attempts"], row["error"]) == ("failed", 3, "attempt 3: ConnectionError: call 3 failed")
    failed = [e for e in worker.events("ex") if e.kind == "attempt_failed"]
    assert [e.detail for e in failed] == [f"attempt {n}: ConnectionError: call {n} failed" for n in (1, 2, 3)]


def test_a_step_that_exceeds_its_timeout_is_abandoned_and_retried(engine, clock):
    release = threading.Event()
    calls = []

    def sometimes_hangs():
        calls.append(1)
        if len(calls) == 1:
            release.wait(10)             # hangs until the test lets it go
            return "late"
        return "on time"

    spec = dl.Step("call", retry=dl.Retry(max_attempts=2, initial=0, jitter=False), timeout=0.05)
    try:
        run = engine.start(one_step("core-timeout", spec, sometimes_hangs), run_id="to")
    finally:
        release.set()
    assert run.status == "completed" and run.result == "on time" and len(calls) == 2
    (row,) = engine.history("to")
    assert "StepTimeout" in row["errors"][0] and "'to'" in row["errors"][0] and "0.05s" in row["errors"][0]


def test_a_backoff_longer_than_the_lease_does_not_lose_the_run(engine, clock):
    """On a fake clock a retry's wait jumps time past the lease; nobody took the run over,
    so the worker keeps it (it checks the store rather than giving up)."""
    worker, sleeps = engine_with_sleeps(engine.store, clock, lease_seconds=30)
    flaky = Flaky(3)

    @dl.workflow("core-long-backoff")
    def wf(ctx):
        first = ctx.step(dl.Step("call", retry=dl.Retry(max_attempts=4, initial=20, jitter=False)), flaky)
        return [first, ctx.step("next", lambda: "next")]

    run = worker.start(wf, run_id="lb")
    assert run.status == "completed" and run.result == ["ok", "next"] and sleeps == [20, 40, 60]


def test_retry_settings_are_validated():
    with pytest.raises(ValueError, match="max_attempts"):
        dl.Retry(max_attempts=0)
