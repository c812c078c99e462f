"""engine.history(run_id): one row per position, with what a timeline needs across
crashes, retries, waits and resumes; engine.events(run_id) has the rest."""

from core_support import *  # noqa: F401,F403


def test_history_tells_the_story_of_a_lumpy_run(store_path, stores, clock):
    failures = {"search": 2}

    def search(topic):
        clock.advance(5)
        if failures["search"]:
            failures["search"] -= 1
            raise ConnectionError("search API timed out")
        return [f"{topic}-doc"]

    def summarise(docs):
        clock.advance(20)
        return {"text": f"summary of {len(docs)} doc(s)", "cost": 0.02}

    @dl.workflow("core-lumpy")
    def lumpy(ctx, topic):
        docs = ctx.step(dl.Step("search", retry=dl.Retry(max_attempts=3, initial=10, jitter=False)),
                        search, topic)
        summary = ctx.step(dl.Step("summarise", cost=lambda r: r["cost"]), summarise, docs)
        verdict = ctx.wait_for_signal("review", timeout=3600)
        ctx.step("publish", lambda: "published")
        return {"summary": summary["text"], "verdict": verdict}

    first = dl.Engine(stores(store_path), clock, worker="worker-1",
                      crash_at=dl.faults.CrashAt("summarise", "after_effect"))
    with pytest.raises(dl.Crash):
        first.start(lumpy, "agents", run_id="lumpy")     # crashes after summarising
    clock.advance(60)
    second = dl.Engine(stores(store_path), clock, worker="worker-2")
    assert second.resume("lumpy").status == "waiting"
    clock.advance(600)
    second.signal("lumpy", "review", "ship it")
    third = dl.Engine(stores(store_path), clock, worker="worker-3")
    assert third.resume("lumpy").status == "completed"

    rows = third.history("lumpy")
    by_step = {row["step"]: row for row in rows}
    assert [row["step"] for row in rows] == ["search", "summarise", "review", "review", "publish"]
    assert [row["kind"] for row in rows] == ["step", "step", "timer", "signal", "step"]
    assert [row["position"] for row in rows] == [0, 1, 2, 3, 4]
    assert all(row["status"] == "completed" for row in rows)

    search_row = by_step["search"]
    assert search_row["attempts"] == 3 and search_row["worker"] == "worker-1"
    assert search_row["errors"] == ["attempt 1: ConnectionError: search API timed out",
                                    "attempt 2: ConnectionError: search API timed out"]
    assert search_row["ended_at"] - search_row["started_at"] == 5 + 10 + 5 + 20 + 5   # tries + backoff

    summary_row = by_step["summarise"]                     # ran twice: the crash lost the first
    assert summary_row["worker"] == "worker-2" and summary_row["cost"] == 0.02
    assert summary_row["ended_at"] - summary_row["started_at"] == 20
    assert by_step["publish"]["worker"] == "worker-3"
    assert rows[3]["result"] == "ship it"

    kinds = [(e.kind, e.worker) for e in third.events("lumpy")]
    assert kinds[0] == ("started", "worker-1")
    assert ("attempt_failed", "worker-1") in kinds
    assert ("resumed", "worker-2") in kinds and ("waiting", "worker-2") in kinds
    assert ("signal", "worker-2") in kinds and ("resumed", "worker-3") in kinds
    assert kinds[-1] == ("completed", "worker-3")


def test_history_shows_failed_and_incomplete_steps(engine, clock):
    @dl.workflow("core-history-failures")
    def failing(ctx):
        try:
            ctx.step("optional", lambda: 1 / 0)
        except dl.StepFailed:
            pass
        ctx.step(dl.Step("required", retry=dl.Retry(max_attempts=2, initial=0)), lambda: {}["missing"])

    run = engine.start(failing, run_id="hf")
    assert run.status == "failed" and "KeyError" in run.error
    rows = engine.history("hf")
    assert [(r["step"], r["status"], r["attempts"]) for r in rows] == [
        ("optional", "failed", 1), ("required", "failed", 2)]
    assert rows[0]["error"] == "attempt 1: ZeroDivisionError: division by zero"

    # A resume retries the step whose failure ended the run: its attempts add up.
    assert engine.resume("hf").status == "failed"
    rows = engine.history("hf")
    assert [(r["step"], r["status"], r["attempts"]) for r in rows] == [
        ("optional", "failed", 1), ("required", "failed", 4)]


def test_a_crash_between_attempts_leaves_an_incomplete_row_until_the_step_succeeds(engine, clock):
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("reset by peer")
        if len(calls) == 2:
            raise dl.Crash("power cut during the retry")
        return "ok"

    @dl.workflow("core-history-incomplete")
    def wf(ctx):
        return ctx.step(dl.Step("flaky", retry=dl.Retry(max_attempts=3, initial=0)), flaky)

    with pytest.raises(dl.Crash):
        engine.start(wf, run_id="hi")
    (row,) = engine.history("hi")
    assert (row["step"], row["status"], row["attempts"]) == ("flaky", "incomplete", 1)
    assert row["error"] == "attempt 1: ConnectionError: reset by peer"
    assert engine.resume("hi").result == "ok"
    (row,) = engine.history("hi")
    assert (row["status"], row["attempts"], row["result"]) == ("completed", 2, "ok")


def test_history_of_an_unknown_run_names_it(engine):
    with pytest.raises(dl.UnknownRunError, match="'nobody'"):
        engine.history("nobody")
