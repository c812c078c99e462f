"""When what a step did cannot be recorded, and when ctx is called from the wrong place.

- A step whose function ran (its effect happened) but whose result cannot be recorded —
  JSON cannot hold it, or its cost is not a number — is recorded as a failed step, so a
  resume meets the same failure instead of performing the effect again.
- A checkpoint the store fails to write stops the execution, even when the workflow
  catches the error: carrying on would record the next step one position too far.
- ctx belongs to the workflow function: called inside a step's function, or from another
  thread, it is refused before anything is recorded.
On both stores unless the scenario needs SQLite itself.
"""

import sqlite3
import threading

from core_support import *  # noqa: F401,F403
from core_support import Calls

from durable_lite.errors import ContextCallError, StoreWriteError

# a result that cannot be recorded ---------------------------------------------------------

CALLS = Calls()


@pytest.fixture(autouse=True)
def reset_calls():
    CALLS.counts.clear()


def pay_and_return_a_set():
    CALLS("pay")                          # the effect: money moved
    return {"receipt-1", "receipt-2"}     # ...and a value JSON cannot hold


@dl.workflow("recording-set")
def returns_set(ctx):
    ctx.step("lookup", CALLS, "lookup")
    ctx.step("pay", pay_and_return_a_set)
    return ctx.step("email", CALLS, "email")


def test_a_step_whose_result_json_cannot_hold_is_recorded_as_failed_and_not_repeated(eng):
    run = eng.start(returns_set, run_id="set")
    assert run.status == "failed"
    assert "step 'pay' of run 'set'" in run.error and "set" in run.error
    assert [(e.label, e.kind) for e in eng.store.load_entries("set")] == [("lookup", "step"),
                                                                       ("pay", "error")]
    for _ in range(3):                                  # every resume, in any engine
        resumed = again(eng).resume("set")
        assert resumed.status == "failed" and resumed.error == run.error
    assert eng.recover() == []
    assert CALLS.counts == {"lookup": 1, "pay": 1}     # paid once, never again
    (row,) = [h for h in eng.history("set") if h["step"] == "pay"]
    assert row["status"] == "failed" and "cannot be stored as JSON" in row["error"]


def test_the_recorded_failure_is_a_step_failure_the_workflow_can_handle_live_and_on_replay(eng):
    @dl.workflow("recording-set-caught")
    def wf(ctx):
        try:
            ctx.step("pay", pay_and_return_a_set)
            outcome = "paid"
        except dl.StepFailed as failed:
            outcome = f"unrecorded after {failed.attempts} attempt(s)"
        return [outcome, ctx.step("email", CALLS, "email")]

    live = eng.start(wf, run_id="caught")
    replay = again(eng).start(wf, run_id="caught")
    assert live.status == replay.status == "completed"
    assert live.result == replay.result == ["unrecorded after 1 attempt(s)", "email-done"]
    assert replay.executed == [] and CALLS.counts == {"pay": 1, "email": 1}


def test_invalidating_the_failed_step_runs_it_again_once_the_code_is_fixed(eng):
    eng.start(returns_set, run_id="fix")

    @dl.workflow("recording-set")                      # the fixed code, same name and version
    def fixed(ctx):
        ctx.step("lookup", CALLS, "lookup")
        ctx.step("pay", lambda: sorted(pay_and_return_a_set()))
        return ctx.step("email", CALLS, "email")

    try:
        assert eng.invalidate("fix", "pay") == ["pay"]
        run = again(eng).resume("fix")
        assert run.status == "completed" and run.executed == ["pay", "email"]
        assert CALLS.counts == {"lookup": 1, "pay": 2, "email": 1}
    finally:
        dl.workflow("recording-set")(returns_set.fn)   # leave the module's version in place


@pytest.mark.parametrize("cost", [lambda r: r["usd"], lambda r: float("nan"), lambda r: -1.0],
                         ids=["raises", "nan", "negative"])
def test_a_step_whose_cost_cannot_be_counted_is_recorded_as_failed_and_not_repeated(eng, cost):
    @dl.workflow("recording-bad-cost")
    def wf(ctx):
        return ctx.step(dl.Step("llm", cost=cost), CALLS, "llm", {"text": "hi"})

    run = eng.start(wf, run_id="cost")
    assert run.status == "failed" and "step 'llm' of run 'cost'" in run.error and "cost" in run.error
    assert again(eng).resume("cost").status == "failed"
    assert CALLS["llm"] == 1 and eng.get("cost").cost == 0


# a checkpoint the store cannot write ----------------------------------------------------------

class FailingWrites:
    """Wraps a store: every record_entry for the step named `label` raises OSError."""

    def __init__(self, inner, label):
        self.inner, self.label, self.failing = inner, label, True

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def record_entry(self, run_id, entry):
        if self.failing and entry.label == self.label:
            raise OSError("disk full")
        return self.inner.record_entry(run_id, entry)


@dl.workflow("recording-swallowed")
def swallows_errors(ctx):
    try:
        ctx.step("pay", CALLS, "pay")
    except Exception:
        pass                                  # the workflow's own catch-all
    try:
        ctx.step("email", CALLS, "email")
    except Exception:
        pass
    return ctx.step("close", CALLS, "close")


def test_a_failed_checkpoint_write_stops_the_execution_even_if_the_workflow_catches_it(any_store, clock):
    store = FailingWrites(any_store, "pay")
    engine = dl.Engine(store, clock)
    with pytest.raises(StoreWriteError) as err:
        engine.start(swallows_errors, run_id="gap")
    message = str(err.value)
    assert "'gap'" in message and "'pay'" in message and "position 0" in message
    assert "disk full" in message and "resume" in message
    assert CALLS.counts == {"pay": 1}                 # nothing after the failed checkpoint
    assert any_store.load_entries("gap") == []        # no gap: position 0 is still free
    assert any_store.get_run("gap").status == "running"

    store.failing = False                             # the disk has room again
    run = dl.Engine(store, clock).resume("gap")
    assert run.status == "completed" and run.result == "close-done"
    assert [e.position for e in any_store.load_entries("gap")] == [0, 1, 2]
    # pay ran twice: its effect happened before the failed checkpoint (the window keys close)
    assert CALLS.counts == {"pay": 2, "email": 1, "close": 1}


def test_a_checkpoint_refused_because_the_database_stays_locked_stops_the_execution(store_path, stores, clock):
    store = stores(store_path, timeout=0.05)
    blocker = sqlite3.connect(store_path, isolation_level=None, timeout=5)

    def pay():
        if CALLS("pay") == "pay-done" and CALLS["pay"] == 1:
            blocker.execute("BEGIN IMMEDIATE")       # another process takes the write lock
        return "paid"

    @dl.workflow("recording-locked")
    def wf(ctx):
        try:
            ctx.step("pay", pay)
        except Exception:
            pass
        return ctx.step("email", CALLS, "email")

    engine = dl.Engine(store, clock)
    with pytest.raises(StoreWriteError) as err:
        engine.start(wf, run_id="locked")
    assert "'locked'" in str(err.value) and "runs.db" in str(err.value) and "locked" in str(err.value)
    assert CALLS["email"] == 0
    blocker.execute("ROLLBACK")                       # ...and lets go of it
    blocker.close()
    assert store.load_entries("locked") == []
    run = engine.resume("locked")
    assert run.status == "completed" and [e.label for e in store.load_entries("locked")] == ["pay", "email"]


# ctx is for the workflow function only ---------------------------------------------------------

def test_ctx_step_inside_a_step_is_refused_clearly_on_both_stores(eng):
    def outer(ctx):
        return ctx.step("inner", CALLS, "inner")

    @dl.workflow("recording-nested")
    def wf(ctx):
        return ctx.step("outer", outer, ctx)

    run = eng.start(wf, run_id="nest")
    assert run.status == "failed"
    assert "ctx.step called inside step 'outer' of run 'nest'" in run.error
    assert CALLS["inner"] == 0
    assert [(e.label, e.kind) for e in eng.store.load_entries("nest")] == [("outer", "error")]


@pytest.mark.parametrize("call", ["now", "uuid", "random", "wait_for_signal", "sleep"])
def test_every_recording_ctx_call_inside_a_step_is_refused(eng, call):
    def outer(ctx):
        if call == "wait_for_signal":
            return ctx.wait_for_signal("go", timeout=10)
        if call == "sleep":
            return ctx.sleep(10)
        return getattr(ctx, call)()

    @dl.workflow("recording-nested-value")
    def wf(ctx):
        return ctx.step("outer", outer, ctx)

    run = eng.start(wf, run_id="nest-value")
    assert run.status == "failed" and f"ctx.{call} called inside step 'outer'" in run.error
    assert [e.kind for e in eng.store.load_entries("nest-value")] == ["error"]


def test_ctx_called_from_another_thread_is_refused(eng):
    errors = []

    @dl.workflow("recording-thread")
    def wf(ctx):
        def helper():
            try:
                ctx.step("from-thread", CALLS, "from-thread")
            except ContextCallError as exc:
                errors.append(str(exc))
        thread = threading.Thread(target=helper)
        thread.start()
        thread.join()
        return ctx.step("after", CALLS, "after")

    run = eng.start(wf, run_id="threaded")
    assert run.status == "completed" and CALLS.counts == {"after": 1}
    assert len(errors) == 1 and "another thread" in errors[0] and "'threaded'" in errors[0]
    assert [e.label for e in eng.store.load_entries("threaded")] == ["after"]
