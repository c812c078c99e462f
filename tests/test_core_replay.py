"""Replay checks identity; results must be JSON; failures are recorded like results.

Also the documented recipe for naming a step an agent invents at run time.
"""

import json

from core_support import *  # noqa: F401,F403
from core_support import Calls

import durable_lite.context
from durable_lite.errors import NonDeterminismError, StepResultNotJSON


def crash_then(engine, clock, wf, run_id, crash, *args):
    with pytest.raises(dl.Crash):
        dl.Engine(engine.store, clock, crash_at=crash).start(wf, *args, run_id=run_id)


def test_a_different_name_at_a_recorded_position_is_detected_and_both_are_named(engine, clock):
    version = {"name": "search"}

    @dl.workflow("core-diverge")
    def diverge(ctx):
        ctx.step(version["name"], lambda: 1)
        ctx.step("write", lambda: 2)

    crash_then(engine, clock, diverge, "div", dl.faults.CrashAt("write", "before_step"))
    version["name"] = "lookup"                 # the code changed under a running run
    with pytest.raises(NonDeterminismError) as err:
        engine.resume("div")
    message = str(err.value)
    assert "'div'" in message and "'search'" in message and "'lookup'" in message
    assert "position 0" in message
    # the history was left as it was
    assert [e.label for e in engine.store.load_entries("div")] == ["search"]


def test_reading_the_clock_in_the_orchestration_is_caught_on_replay(engine, clock):
    @dl.workflow("core-clock-branch")
    def branch(ctx):
        # Wrong on purpose: a branch on the live clock instead of ctx.now().
        if clock() < 1_767_225_700:
            ctx.step("early", lambda: "early")
        else:
            ctx.step("late", lambda: "late")
        ctx.step("finish", lambda: "done")

    crash_then(engine, clock, branch, "branch", dl.faults.CrashAt("finish", "before_step"))
    clock.advance(3600)
    with pytest.raises(NonDeterminismError, match="'early'.*'late'"):
        engine.resume("branch")


def test_a_workflow_that_stops_short_of_its_history_is_detected(engine, clock):
    steps = {"n": 3}

    @dl.workflow("core-shorter")
    def shorter(ctx):
        for i in range(steps["n"]):
            ctx.step("s", lambda: i)
        ctx.wait_for_signal("go", timeout=60)

    assert engine.start(shorter, run_id="short").status == "waiting"
    steps["n"] = 1
    with pytest.raises(NonDeterminismError, match="'short'"):
        engine.resume("short")


def test_catching_a_non_determinism_error_in_the_workflow_does_not_let_it_carry_on(engine, clock):
    name = {"value": "a"}
    calls = Calls()

    @dl.workflow("core-swallow")
    def swallow(ctx):
        try:
            ctx.step(name["value"], calls, "first")
        except Exception:
            pass                                      # a too-broad except in user code
        ctx.step("second", calls, "second")

    crash_then(engine, clock, swallow, "swallow", dl.faults.CrashAt("second", "before_step"))
    name["value"] = "b"
    with pytest.raises(NonDeterminismError):
        engine.resume("swallow")
    assert calls["second"] == 0 and calls["first"] == 1
    assert [e.label for e in engine.store.load_entries("swallow")] == ["a"]


def test_a_step_returning_non_json_fails_naming_the_step_and_the_type(engine):
    calls = Calls()

    @dl.workflow("core-not-json")
    def not_json(ctx):
        ctx.step("fine", calls, "fine")
        return ctx.step("tags", lambda: {"a", "b"})          # a set is not JSON

    run = engine.start(not_json, run_id="nj")
    assert run.status == "failed"
    assert "StepResultNotJSON" in run.error and "'tags'" in run.error and "set" in run.error
    assert "'nj'" in run.error
    # the step ran, so its failure is recorded in place of a result (test_core_recording.py)
    assert [(e.label, e.kind) for e in engine.store.load_entries("nj")] == [("fine", "step"),
                                                                         ("tags", "error")]


def test_a_non_json_result_caught_by_the_workflow_is_a_recorded_step_failure(engine):
    calls = Calls()

    @dl.workflow("core-not-json-caught")
    def caught(ctx):
        try:
            ctx.step("obj", lambda: object())
        except dl.StepFailed:
            pass
        ctx.step("after", calls, "after")                # at position 1: "obj" holds position 0
        return "done"

    run = engine.start(caught, run_id="njc")
    assert run.status == "completed" and calls["after"] == 1
    assert [(e.label, e.kind) for e in engine.store.load_entries("njc")] == [("obj", "error"),
                                                                          ("after", "step")]
    assert "object" in engine.history("njc")[0]["error"]


def test_results_come_back_as_json_would_give_them_even_the_first_time(engine):
    @dl.workflow("core-json-shape")
    def shape(ctx):
        return ctx.step("tuple", lambda: {"pair": (1, 2), 3: "three"})

    assert engine.start(shape, run_id="shape").result == {"pair": [1, 2], "3": "three"}


def test_non_json_arguments_and_signal_payloads_are_refused_with_their_run_named(engine):
    @dl.workflow("core-args-json")
    def wf(ctx, x):
        return ctx.wait_for_signal("go", timeout=10)

    with pytest.raises(StepResultNotJSON, match="arguments of run 'bad-args'.*set"):
        engine.start(wf, {1, 2}, run_id="bad-args")
    assert engine.store.get_run("bad-args") is None
    engine.start(wf, 1, run_id="ok-args")
    with pytest.raises(StepResultNotJSON, match="signal 'go' to run 'ok-args'"):
        engine.signal("ok-args", "go", object())


def test_a_failed_step_is_recorded_so_replay_takes_the_same_fallback(engine, fresh, clock):
    calls = Calls()
    primary_up = {"value": False}

    def primary():
        calls("primary")
        if not primary_up["value"]:
            raise TimeoutError("primary model is down")
        return "primary answer"

    @dl.workflow("core-fallback")
    def fallback(ctx):
        try:
            answer = ctx.step("primary", primary)
        except dl.StepFailed as failed:
            assert failed.step == "primary" and "primary model is down" in failed.error
            answer = ctx.step("fallback", calls, "fallback", "fallback answer")
        ctx.step("deliver", calls, "deliver", answer)
        return answer

    crash_then(engine, clock, fallback, "fb", dl.faults.CrashAt("deliver", "before_step"))
    primary_up["value"] = True                   # would now succeed if it were re-executed
    run = fresh().resume("fb")
    assert run.result == "fallback answer"
    assert run.replayed == ["primary", "fallback"] and run.executed == ["deliver"]
    assert calls.counts == {"primary": 1, "fallback": 1, "deliver": 1}
    kinds = [(e.label, e.kind) for e in engine.store.load_entries("fb")]
    assert kinds == [("primary", "error"), ("fallback", "step"), ("deliver", "step")]


def test_resuming_a_failed_run_retries_the_step_that_failed_it(engine):
    up = {"value": False}

    def call():
        if not up["value"]:
            raise ConnectionError("down")
        return "up"

    @dl.workflow("core-retry-on-resume")
    def wf(ctx):
        return ctx.step("call", call)

    run = engine.start(wf, run_id="rr")
    assert run.status == "failed" and "ConnectionError: down" in run.error
    assert engine.resume("rr").status == "failed"   # still down: fails again, cleanly
    up["value"] = True
    run = engine.resume("rr")
    assert run.status == "completed" and run.result == "up" and run.executed == ["call"]
    assert [e.kind for e in engine.store.load_entries("rr")] == ["step"]


# naming steps the agent invents at run time ---------------------------------------------
def test_the_docstring_explains_how_to_name_a_step_an_agent_invents():
    doc = durable_lite.context.__doc__
    assert 'f"tool:{' in doc and "recorded" in doc and "#2" in doc


def test_tool_steps_named_from_the_recorded_model_output_replay_exactly(engine, fresh, clock, folder):
    world = dl.sim.World(folder, seed=3)

    def choose(history):
        # A fake model: its choice depends on a fresh generation each call.
        answer = world.llm.complete(f"next tool after {len(history)} results")
        return {"tool": ["search", "read", "search"][answer["generation"] % 3], "gen": answer["generation"]}

    @dl.workflow("core-agent")
    def agent(ctx, question):
        results = []
        for _ in range(4):
            decision = ctx.step("choose", choose, results)
            results.append(ctx.step(f"tool:{decision['tool']}", world.tools.call,
                                    decision["tool"], question))
        return [r["tool"] for r in results]

    crash_then(engine, clock, agent, "agent", dl.faults.CrashAt("choose", "before_step", occurrence=4),
               "why?")
    run = fresh().resume("agent")
    assert run.status == "completed"
    labels = [e.label for e in engine.store.load_entries("agent")]
    tools = [label for label in labels if label.startswith("tool:")]
    assert len(tools) == 4 and any("#" in t for t in tools)          # a tool used twice
    assert run.replayed == labels[:6]
    assert world.llm.calls() == 4                                    # no model call replayed


def test_naming_a_step_from_an_unrecorded_model_call_fails_loudly_on_replay(engine, fresh, clock, folder):
    world = dl.sim.World(folder, seed=3)

    @dl.workflow("core-agent-wrong")
    def agent(ctx):
        # Wrong on purpose: the model call is not a step, so replay asks the model again.
        tool = ["search", "read"][world.llm.complete("pick a tool")["generation"] % 2]
        ctx.step(f"tool:{tool}", lambda: tool)
        ctx.step("report", lambda: "done")

    crash_then(engine, clock, agent, "wrong", dl.faults.CrashAt("report", "before_step"))
    with pytest.raises(NonDeterminismError, match="tool:read.*tool:search|tool:search.*tool:read"):
        fresh().resume("wrong")


def test_history_entries_are_plain_json_text(engine):
    @dl.workflow("core-json-text")
    def wf(ctx):
        return ctx.step("x", lambda: {"ok": True})

    engine.start(wf, run_id="jt")
    (entry,) = engine.store.load_entries("jt")
    assert json.loads(entry.result_json) == {"ok": True}


def test_a_diverged_run_is_logged_and_recover_still_resumes_the_others(engine, clock):
    name = {"first": "search"}

    @dl.workflow("core-diverge-recover")
    def flow(ctx, tag):
        ctx.step(name["first"] if tag == "bad" else "search", lambda: 1)
        ctx.step("write", lambda: 2)
        return tag

    crash_then(engine, clock, flow, "a-bad", dl.faults.CrashAt("write", "before_step"), "bad")
    crash_then(engine, clock, flow, "b-good", dl.faults.CrashAt("write", "before_step"), "good")
    name["first"] = "lookup"          # only the "bad" run now disagrees with its history

    recovered = {run.run_id: run.status for run in engine.recover()}

    assert recovered == {"a-bad": "diverged", "b-good": "completed"}
    assert engine.get("a-bad").status == "diverged"         # left for fixed code to resume
    assert engine.recover() == []
    diverged = [e for e in engine.events("a-bad") if e.kind == "diverged"]
    assert len(diverged) == 1 and "'lookup'" in diverged[0].detail
    name["first"] = "search"          # the fix is deployed
    assert engine.resume("a-bad").status == "completed"
