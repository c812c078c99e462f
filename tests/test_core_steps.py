"""ctx.step: executed once per run, committed before the workflow goes on, replayed after.

Also: start with an existing run id, arguments stored with the run, recorded values
(now / uuid / random), idempotency keys, step options, and Jupyter habits (re-registering
a workflow).
"""

from core_support import *  # noqa: F401,F403
from core_support import Calls, step_entries

from durable_lite.errors import RunArgumentsMismatch, UnknownRunError
from durable_lite.keys import derive_key


def test_a_step_runs_once_and_its_result_is_committed_before_the_workflow_continues(engine):
    calls = Calls()
    seen_by_second_step = []

    def second(store, run_id):
        # By the time the workflow reaches the next step, the first is in the store.
        seen_by_second_step.append([e.label for e in step_entries(store, run_id)])
        return calls("second")

    @dl.workflow("core-two-steps")
    def two_steps(ctx):
        a = ctx.step("first", calls, "first", {"n": 1})
        b = ctx.step("second", second, engine.store, ctx.run_id)
        return [a, b]

    run = engine.start(two_steps, run_id="two")
    assert run.status == "completed" and run.result == [{"n": 1}, "second-done"]
    assert seen_by_second_step == [["first"]]
    assert run.executed == ["first", "second"] and run.replayed == []

    again = engine.start(two_steps, run_id="two")          # "attempt 2" of a finished run
    assert again.result == run.result
    assert (calls["first"], calls["second"]) == (1, 1)


def test_a_fresh_engine_replays_without_calling_the_step_functions(engine, fresh, clock):
    calls = Calls()
    crash = dl.faults.CrashAt("c", "before_step")

    @dl.workflow("core-abc")
    def abc(ctx):
        return [ctx.step(name, calls, name) for name in ("a", "b", "c")]

    with pytest.raises(dl.Crash):
        dl.Engine(engine.store, clock, crash_at=crash).start(abc, run_id="abc")
    assert engine.get("abc").status == "running"           # interrupted, resumable

    run = fresh().resume("abc")
    assert run.status == "completed" and run.result == ["a-done", "b-done", "c-done"]
    assert run.replayed == ["a", "b"] and run.executed == ["c"]
    assert calls.counts == {"a": 1, "b": 1, "c": 1}


def test_step_options_travel_in_dl_Step_and_never_take_the_functions_keyword_arguments(engine):
    received = {}

    def fn(name=None, retry=None, timeout=None, cost=None):
        received.update(name=name, retry=retry, timeout=timeout, cost=cost)
        return "ok"

    @dl.workflow("core-options")
    def options(ctx):
        ctx.step(dl.Step("call", retry=dl.Retry(max_attempts=2), timeout=5, cost=0.5), fn,
                 name="n", retry="r", timeout="t", cost="c")
        return "done"

    run = engine.start(options, run_id="opts")
    assert run.status == "completed"
    assert received == {"name": "n", "retry": "r", "timeout": "t", "cost": "c"}
    assert run.cost == 0.5


def test_start_with_an_existing_id_continues_a_failed_run_from_its_checkpoints(engine):
    calls = Calls()
    failures = {"b": 1}

    def flaky(name):
        if failures.get(name):
            failures[name] -= 1
            raise ConnectionError(f"{name} is down")
        return calls(name)

    @dl.workflow("core-flaky")
    def flaky_wf(ctx, order):
        return [ctx.step(n, flaky, n) for n in ("a", "b", "c")] + [order]

    first = engine.start(flaky_wf, "A-1", run_id="flaky")
    assert first.status == "failed" and "b is down" in first.error and "'flaky'" in first.error
    second = engine.start(flaky_wf, "A-1", run_id="flaky")
    assert second.status == "completed" and second.result == ["a-done", "b-done", "c-done", "A-1"]
    assert second.replayed == ["a"] and second.executed == ["b", "c"]
    assert calls.counts == {"a": 1, "b": 1, "c": 1}


def test_arguments_are_stored_with_the_run_so_resume_needs_only_its_id(engine, fresh, clock):
    @dl.workflow("core-args")
    def with_args(ctx, order_id, amount, note="none"):
        ctx.step("hold", lambda: "held")
        ctx.wait_for_signal("go", timeout=60)
        return {"order": order_id, "amount": amount, "note": note}

    assert engine.start(with_args, "A-9", 12.5, note="vip", run_id="args").status == "waiting"
    engine.signal("args", "go")
    run = fresh().resume("args")
    assert run.result == {"order": "A-9", "amount": 12.5, "note": "vip"}


def test_start_with_the_same_id_but_different_arguments_is_a_clear_error(engine):
    @dl.workflow("core-mismatch")
    def wf(ctx, order_id, amount=1, note=None):
        return ctx.step("noop", lambda: order_id)

    engine.start(wf, "A-1", amount=2, note="x", run_id="same-id")
    # the same keyword arguments in another order are the same run
    assert engine.start(wf, "A-1", note="x", amount=2, run_id="same-id").status == "completed"
    with pytest.raises(RunArgumentsMismatch) as err:
        engine.start(wf, "A-2", amount=2, note="x", run_id="same-id")
    assert "'same-id'" in str(err.value) and "A-2" in str(err.value)


def test_resume_of_an_unknown_run_names_the_run_and_the_store(engine):
    with pytest.raises(UnknownRunError) as err:
        engine.resume("nope")
    assert "'nope'" in str(err.value) and "runs.db" in str(err.value)


def test_now_uuid_and_random_are_recorded_once_and_replayed(engine, fresh, clock):
    @dl.workflow("core-values")
    def values(ctx):
        got = {"now": ctx.now(), "uuid": ctx.uuid(), "random": ctx.random()}
        ctx.wait_for_signal("go", timeout=600)
        return got

    engine.start(values, run_id="vals")
    first = {e.name: e.result_json for e in engine.store.load_entries("vals") if e.kind == "value"}
    clock.advance(100)
    engine.signal("vals", "go")
    other = fresh(seed=12345)                     # a different rng, clock time and id source
    run = other.resume("vals")
    assert run.status == "completed"
    assert run.result["now"] == 1_767_225_600.0
    assert run.result["uuid"] == "id-0001"
    assert str(run.result["random"]) == first["random"]


def test_idempotency_keys_depend_only_on_the_run_id_and_parts(engine, fresh):
    @dl.workflow("core-keys")
    def keys(ctx, order_id):
        ctx.step("pause", lambda: None)
        return [ctx.idempotency_key("refund", order_id), ctx.idempotency_key("email", order_id)]

    a = engine.start(keys, "A-1", run_id="keys-a").result
    replayed = fresh(seed=99).start(keys, "A-1", run_id="keys-a").result
    b = engine.start(keys, "A-1", run_id="keys-b").result
    assert a == replayed                           # identical on replay, in any engine
    assert a[0] != a[1]                            # different parts, different keys
    assert set(a).isdisjoint(b)                    # different runs, different keys
    assert a[0] == derive_key("keys-a", "refund", "A-1")    # nothing else goes into it


def test_repeated_names_get_deterministic_occurrence_numbers(engine, fresh, clock):
    @dl.workflow("core-loop")
    def loop(ctx):
        out = []
        for i in range(3):
            out.append(ctx.step("search", lambda i=i: i * 10))
            out.append(ctx.step("read", lambda i=i: i))
        return out

    crash = dl.faults.CrashAt("read", "after_checkpoint", occurrence=2)
    with pytest.raises(dl.Crash):
        dl.Engine(engine.store, clock, crash_at=crash).start(loop, run_id="loop")
    run = fresh().resume("loop")
    assert run.replayed == ["search", "read", "search#2", "read#2"]
    assert run.executed == ["search#3", "read#3"]
    assert run.result == [0, 0, 10, 1, 20, 2]
    assert [e.label for e in engine.store.load_entries("loop")] == [
        "search", "read", "search#2", "read#2", "search#3", "read#3"]


def test_rerunning_the_cell_that_defines_a_workflow_replaces_its_registration(engine):
    @dl.workflow("core-cell")
    def cell(ctx):
        return ctx.step("answer", lambda: "first definition")

    @dl.workflow("core-cell")           # the learner edits the cell and runs it again
    def cell(ctx):  # noqa: F811
        return ctx.step("answer", lambda: "second definition")

    assert engine.start("core-cell", run_id="cell").result == "second definition"
    assert dl.workflow.__module__ == "durable_lite.workflow"
    from durable_lite.workflow import registered
    assert registered()["core-cell"] == [1]


def test_forgetting_a_workflow_is_what_a_fresh_process_knows_of_it(engine):
    for version in (1, 2):
        @dl.workflow("core-forgotten", version=version)
        def forgotten(ctx):
            ctx.wait_for_signal("go", timeout=60)
            return "done"

    parked = engine.start("core-forgotten", run_id="forgotten")      # on version 2
    assert parked.status == "waiting"
    assert dl.workflow.forget("core-forgotten") == [1, 2]
    from durable_lite.workflow import forget, registered
    assert forget is dl.workflow.forget and "core-forgotten" not in registered()
    assert forget("core-forgotten") == []                             # nothing left to forget
    engine.signal("forgotten", "go")
    with pytest.raises(dl.WorkflowNotRegistered, match="'core-forgotten' version 2"):
        engine.resume("forgotten")
    assert engine.recover() == []              # a process without the code leaves the run be

    @dl.workflow("core-forgotten", version=2)  # the new process runs the defining cell
    def forgotten_again(ctx):
        ctx.wait_for_signal("go", timeout=60)
        return "done by the new process"

    assert engine.resume("forgotten").result == "done by the new process"


def test_a_step_name_must_be_a_non_empty_string(engine):
    @dl.workflow("core-bad-name")
    def bad(ctx):
        return ctx.step("", lambda: 1)

    run = engine.start(bad, run_id="bad-name")
    assert run.status == "failed" and "'bad-name'" in run.error and "non-empty" in run.error
