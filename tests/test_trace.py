"""engine.trace(run_id): the span tree built from what the store records.

Runs with retries, a wait, a sleep, a failed step, a halted run, resumes before the first
checkpoint, a store without an event log, and crashes with a resume by another worker
(real SIGKILLs), each checked for the tree's shape, its times and what it says about tokens
and money.
"""

import pytest

import durable_lite as dl
from durable_lite.faults import CrashAt
from durable_lite.trace import (ATTEMPT, EXECUTION, RUN, SLEEP, STEP_SPAN, WAIT, build_trace,
                                format_duration)
from trace_support import RUN_ID, lumpy_run

DAY = 86400.0


class Flaky:
    """Fails its first `failures` calls, then answers (and takes `seconds` on the clock)."""

    def __init__(self, failures, clock=None, seconds=0.0):
        self.failures, self.clock, self.seconds, self.calls = failures, clock, seconds, 0

    def __call__(self, *args):
        self.calls += 1
        if self.clock is not None:
            self.clock.advance(self.seconds)
        if self.calls <= self.failures:
            raise ConnectionError(f"down (call {self.calls})")
        return {"call": self.calls}


tools = {}


@dl.workflow("trace-retry")
def retry_wf(ctx):
    ctx.step("prepare", lambda: "ok")
    retry = dl.Retry(max_attempts=5, initial=1.0, multiplier=2.0, jitter=False)
    return ctx.step(dl.Step("fetch", retry=retry), tools["fetch"])


@dl.workflow("trace-approval")
def approval_wf(ctx, timeout=3 * DAY):
    ctx.step("draft", lambda: "draft")
    answer = ctx.wait_for_signal("approval", timeout=timeout)
    ctx.step("send", lambda: "sent")
    return answer


@dl.workflow("trace-sleep")
def sleep_wf(ctx):
    ctx.step("before", lambda: 1)
    ctx.sleep(3600, name="cool-off")
    ctx.step("after", lambda: 2)


@dl.workflow("trace-model")
def model_wf(ctx, folder):
    world = dl.examples.world_at(folder)
    ctx.step("think", world.llm.complete, "what next?")                     # no cost declared
    ctx.step(dl.Step("write", cost=0.5), lambda: {"input_tokens": 120, "output_tokens": 30,
                                                  "model": "m-large", "provider": "acme"})
    ctx.step("count", lambda: {"tokens": True, "rows": 3})                   # a bool is no count
    ctx.step("plain", lambda: [1, 2, 3])


@dl.workflow("trace-three")
def three_wf(ctx):
    for name in ("a", "b", "c"):
        ctx.step(name, lambda n=name: n)
    return "done"


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    return dl.MemoryStore() if request.param == "memory" else dl.SQLiteStore(str(tmp_path / "r.db"))


@pytest.fixture
def clock():
    return dl.FakeClock()


def engine_for(store, clock, worker="worker-a", **options):
    return dl.Engine(store, clock, worker=worker, **options)


def one(spans):
    assert len(spans) == 1, spans
    return spans[0]


# retries ------------------------------------------------------------------------------
def test_a_retried_step_has_one_span_per_attempt_and_they_tile_the_step(store, clock):
    tools["fetch"] = Flaky(3, clock, seconds=0.5)
    run = engine_for(store, clock).start(retry_wf, run_id="r1")
    assert run.status == "completed"
    tree = engine_for(store, clock).trace("r1")

    assert tree.kind == RUN and tree.status == "completed" and not tree.open
    execution = one(tree.children)
    assert (execution.kind, execution.name, execution.worker, execution.status) == \
        (EXECUTION, "execution 1", "worker-a", "completed")
    prepare, fetch = execution.children
    assert prepare.children == []                    # one attempt that worked: no attempt spans
    assert fetch.attributes["attempts"] == 4 and fetch.status == "completed"
    attempts = fetch.children
    assert [a.kind for a in attempts] == [ATTEMPT] * 4
    assert [a.status for a in attempts] == ["failed", "failed", "failed", "ok"]
    assert [a.attributes["attempt"] for a in attempts] == [1, 2, 3, 4]
    assert attempts[0].attributes["error"] == "ConnectionError: down (call 1)"
    # each attempt runs from the end of the one before: backoff (1, 2, 4 s) + 0.5 s of work
    assert [round(a.duration, 6) for a in attempts] == [0.5, 1.5, 2.5, 4.5]
    assert attempts[0].start == fetch.start and attempts[-1].end == fetch.end
    assert all(a.end == b.start for a, b in zip(attempts, attempts[1:]))
    assert execution.start == tree.start and execution.end == tree.end == fetch.end


def test_the_text_tree_shows_time_attempts_and_errors(store, clock):
    tools["fetch"] = Flaky(1, clock, seconds=0.25)
    engine = engine_for(store, clock)
    engine.start(retry_wf, run_id="r2")
    text = engine.trace("r2").render()
    assert text.splitlines()[0] == "run r2 · trace-retry v1 · completed · 1.50 s"
    assert "├─ fetch · 2 attempts · completed · 1.50 s" in text.replace("└", "├")
    assert "attempt 1 · failed · 0.25 s · ConnectionError: down (call 1)" in text
    assert "attempt 1" not in engine.trace("r2").render(max_depth=2)


# waits and sleeps ---------------------------------------------------------------------
def test_a_wait_is_a_span_of_its_own_between_two_executions(store, clock):
    a = engine_for(store, clock, "worker-a")
    a.start(approval_wf, run_id="w1")
    clock.advance(5)

    waiting = a.trace("w1")                          # parked now: the wait is still open
    assert waiting.open and waiting.status == "waiting" and waiting.end == clock()
    execution, wait = waiting.children
    assert execution.status == "parked" and execution.attributes["began"] == "started"
    assert (wait.kind, wait.name, wait.status, wait.open) == (WAIT, "approval", "waiting", True)
    assert wait.start == execution.end and wait.end == clock()

    clock.advance(2 * DAY - 5)
    a.signal("w1", "approval", {"ok": True})
    signalled_at = clock()
    clock.advance(30)                                # the worker comes by half a minute later
    engine_for(store, clock, "worker-b").recover()
    tree = a.trace("w1")
    assert tree.status == "completed" and not tree.open
    first, wait, second = tree.children
    assert [s.kind for s in tree.children] == [EXECUTION, WAIT, EXECUTION]
    assert (wait.status, wait.open, wait.duration) == ("signal", False, 2 * DAY + 30)
    assert wait.attributes["signal_sent_at"] == signalled_at
    assert wait.attributes["payload"] == {"ok": True}
    assert wait.attributes["deadline"] == first.end + 3 * DAY
    assert (second.worker, second.attributes["began"], second.attributes["replayed"]) == \
        ("worker-b", "resumed", 2)                   # the draft and the wait's timer
    assert [s.name for s in second.children] == ["send"]
    assert wait.end == second.start


def test_a_wait_that_times_out_says_so(store, clock):
    engine = engine_for(store, clock)
    engine.start(approval_wf, run_id="w2", timeout=60)
    clock.advance(61)
    engine.recover()
    wait = one(engine.trace("w2").find(kind=WAIT))
    assert wait.status == "timeout" and wait.attributes["payload"] is None
    assert "signal_sent_at" not in wait.attributes


def test_a_durable_sleep_is_a_span_with_its_parked_time(store, clock):
    engine = engine_for(store, clock)
    engine.start(sleep_wf, run_id="s1")
    assert one(engine.trace("s1").find(kind=SLEEP)).status == "sleeping"
    clock.advance(3600)
    engine.recover()
    tree = engine.trace("s1")
    sleep = one(tree.find(kind=SLEEP))
    assert (sleep.name, sleep.status, sleep.duration) == ("cool-off", "woke", 3600)
    assert sleep.attributes["wake_at"] == sleep.end
    assert [s.kind for s in tree.children] == [EXECUTION, SLEEP, EXECUTION]
    assert [s.name for s in tree.find(kind=STEP_SPAN)] == ["before", "after"]


# failures and halts -------------------------------------------------------------------
def test_a_step_that_fails_for_good_and_then_succeeds_on_resume(store, clock):
    tools["fetch"] = Flaky(7, clock, seconds=1.0)     # more failures than five attempts
    engine = engine_for(store, clock)
    assert engine.start(retry_wf, run_id="f1").status == "failed"
    failed = engine.trace("f1")
    assert failed.status == "failed" and "error" in failed.attributes
    execution = one(failed.children)
    assert execution.status == "failed"
    fetch = execution.children[-1]
    assert fetch.status == "failed" and fetch.attributes["attempts"] == 5
    assert [a.status for a in fetch.children] == ["failed"] * 5
    assert fetch.attributes["error"] == "ConnectionError: down (call 5)"

    # The next resume gives the step its attempts again (a "retrying" execution).
    engine_for(store, clock, "worker-b").resume("f1")
    tree = engine.trace("f1")
    first, second = tree.children
    assert tree.status == "completed"
    assert (second.attributes["began"], second.worker, second.status) == \
        ("retrying", "worker-b", "completed")
    old, new = first.find(name="fetch"), second.find(name="fetch")
    assert one(old).status == "failed"               # the failure stays in its execution
    assert one(new).status == "completed" and one(new).attributes["attempts"] == 3


def test_a_halted_run_and_its_resume_with_a_bigger_budget(store, clock):
    engine = engine_for(store, clock)
    assert engine.start(three_wf, run_id="h1", budget=dl.Budget(max_steps=2)).status == "halted"
    halted = engine.trace("h1")
    assert (halted.status, halted.open) == ("halted", False)
    assert "max_steps=2" in halted.attributes["halt_reason"]
    execution = one(halted.children)
    assert execution.status == "halted"
    assert [s.name for s in execution.children] == ["a", "b"]

    engine.resume("h1", budget=dl.Budget(max_steps=5))
    tree = engine.trace("h1")
    assert [(x.status, [s.name for s in x.children]) for x in tree.children] == \
        [("halted", ["a", "b"]), ("completed", ["c"])]


# model calls and money ----------------------------------------------------------------
def test_model_calls_are_recognised_by_their_token_counts(store, clock, tmp_path):
    engine = engine_for(store, clock)
    engine.start(model_wf, str(tmp_path / "world"), run_id="m1")
    tree = engine.trace("m1")
    think, write, count, plain = tree.find(kind=STEP_SPAN)
    answer = dl.sim.World(str(tmp_path / "world")).llm
    assert think.is_model_call and think.tokens == answer.total_tokens()
    assert think.cost == pytest.approx(answer.total_cost())        # from the result: none declared
    assert "model" not in think.attributes
    assert write.is_model_call and write.tokens == 150 and write.cost == 0.5
    assert (write.attributes["input_tokens"], write.attributes["output_tokens"]) == (120, 30)
    assert (write.attributes["model"], write.attributes["provider"]) == ("m-large", "acme")
    assert not count.is_model_call and not plain.is_model_call
    assert tree.tokens == think.tokens + 150
    assert tree.cost == pytest.approx(think.cost + 0.5)


# crashes and other workers ------------------------------------------------------------
def test_a_resume_that_finds_no_checkpoint_is_an_execution_of_its_own(store, clock):
    """Worker-a is killed before its first checkpoint; worker-b resumes a run with nothing
    recorded. Its "resumed" event (0 entries) begins the second execution."""
    crashing = engine_for(store, clock, "worker-a", crash_at=CrashAt("a", "after_effect"))
    with pytest.raises(dl.Crash):
        crashing.start(three_wf, run_id="c1")
    clock.advance(60)                                # worker-a's lease runs out
    engine_for(store, clock, "worker-b").resume("c1")
    tree = engine_for(store, clock).trace("c1")
    first, second = tree.children
    assert (first.worker, first.status, first.children) == ("worker-a", "interrupted", [])
    assert first.duration == 0                        # it left only its "started" event
    assert (second.worker, second.attributes["began"], second.status) == \
        ("worker-b", "resumed", "completed")
    assert second.attributes["replayed"] == 0
    assert [s.name for s in second.children] == ["a", "b", "c"]
    assert second.start == first.end + 60             # at its "resumed" event


def test_a_worker_that_resumes_its_own_run_before_any_checkpoint_shows_two_executions(
        store, clock):
    """The same worker (a restarted process keeps its name) goes at the run twice, the first
    time killed before anything was recorded: two executions, not one."""
    crashing = engine_for(store, clock, "worker-a", crash_at=CrashAt("a", "after_effect"))
    with pytest.raises(dl.Crash):
        crashing.start(three_wf, run_id="c2")
    clock.advance(5)
    engine_for(store, clock, "worker-a").resume("c2")
    begun = [(e.kind, e.worker) for e in store.events("c2") if e.kind in ("started", "resumed")]
    assert begun == [("started", "worker-a"), ("resumed", "worker-a")]
    assert [e.detail for e in store.events("c2") if e.kind == "resumed"] == ["0 entries recorded"]
    tree = engine_for(store, clock).trace("c2")
    first, second = tree.children
    assert (first.worker, first.status, first.children) == ("worker-a", "interrupted", [])
    assert (second.worker, second.attributes["began"], second.status) == \
        ("worker-a", "resumed", "completed")
    assert [s.name for s in second.children] == ["a", "b", "c"]
    assert second.start == first.end + 5


@dl.workflow("trace-poison")
def poison_wf(ctx):
    ctx.step("ok", lambda: 1)
    ctx.step("boom", _exit)


def _exit():
    raise SystemExit("the step takes its worker down")


def test_a_run_declared_dead_ends_in_an_execution_of_its_own(store, clock):
    """Each go at the run dies in its step; the third worker takes it up, finds it poison
    and declares it dead without running it: that take-up is the run's last execution."""
    with pytest.raises(SystemExit):
        engine_for(store, clock, "worker-a", max_interruptions=2).start(poison_wf, run_id="p1")
    clock.advance(60)
    with pytest.raises(SystemExit):
        engine_for(store, clock, "worker-b", max_interruptions=2).resume("p1")
    clock.advance(60)
    assert engine_for(store, clock, "worker-c", max_interruptions=2).resume("p1").status == "dead"
    tree = build_trace(store, "p1")
    assert tree.status == "dead"
    executions = tree.find(kind=EXECUTION)
    assert [(x.worker, x.attributes["began"], x.status) for x in executions] == [
        ("worker-a", "started", "interrupted"), ("worker-b", "resumed", "interrupted"),
        ("worker-c", "taken up", "dead")]
    dead = executions[-1]
    assert (dead.start, dead.duration, dead.children) == (tree.start + 120, 0, [])
    assert [s.name for s in executions[0].children] == ["ok", "boom"]


def test_a_queued_run_begins_when_a_worker_starts_it(store, clock):
    queue = dl.Queue("trace-q")
    engine_for(store, clock, "front-desk").enqueue(queue, three_wf, run_id="q1")
    clock.advance(300)                                # waiting in the queue: nobody's go
    [run] = engine_for(store, clock, "worker-a").work(queue, rounds=1)
    assert run.status == "completed"
    tree = build_trace(store, "q1")
    execution = one(tree.children)
    assert (execution.worker, execution.attributes["began"]) == ("worker-a", "started")
    assert execution.start == tree.start + 300 and [s.name for s in execution.children] == ["a", "b", "c"]


def test_pinning_and_upgrades_are_no_workers_go_at_the_run(store, clock):
    @dl.workflow("trace-versions", version=1)
    def v1(ctx):
        ctx.step("draft", lambda: "draft")
        return ctx.wait_for_signal("approval", timeout=DAY)

    engine_for(store, clock, "worker-a").start(v1, run_id="v1")

    @dl.workflow("trace-versions", version=2)
    def v2(ctx):
        ctx.step("draft", lambda: "draft")
        return ctx.wait_for_signal("approval", timeout=DAY)

    clock.advance(10)
    assert engine_for(store, clock, "worker-b").start(v2, run_id="v1").note   # pinned to v1
    dl.migration("trace-versions", from_version=1, to_version=2)(lambda state: state)
    clock.advance(10)
    engine_for(store, clock, "ops").upgrade("v1")                             # now on v2
    engine_for(store, clock, "ops").signal("v1", "approval", "yes")
    assert engine_for(store, clock, "worker-c").resume("v1").result == "yes"
    kinds = {e.kind for e in store.events("v1")}
    assert {"pinned", "upgraded", "signal"} <= kinds
    tree = build_trace(store, "v1")
    assert [(x.worker, x.status) for x in tree.find(kind=EXECUTION)] == [
        ("worker-a", "parked"), ("worker-b", "parked"), ("worker-c", "completed")]


def test_a_store_without_an_event_log_still_gives_a_tree(clock):
    store = dl.MemoryStore()
    engine_for(store, clock).start(three_wf, run_id="e1")
    store.events = lambda run_id: []                 # as a store from before the event log
    tree = build_trace(store, "e1")
    execution = one(tree.children)
    assert (execution.worker, execution.attributes["began"]) == ("worker-a", "inferred")
    assert [s.name for s in execution.children] == ["a", "b", "c"]


def test_a_real_sigkill_and_a_resume_by_another_worker(tmp_path):
    """The refund workflow killed (SIGKILL) in a child process after its email was sent;
    a worker in this process resumes it. Real clocks, real process."""
    store_path, folder = str(tmp_path / "runs.db"), str(tmp_path / "world")
    killed = dl.faults.run_in_child(store_path, "durable_lite.examples", "refund", folder,
                                    "A-17", 40, run_id="refund-A-17",
                                    crash_at=CrashAt("email", "after_effect"))
    assert killed.killed
    rescuer = dl.Engine(dl.SQLiteStore(store_path), worker="rescuer")
    assert rescuer.resume("refund-A-17").status == "completed"
    tree = rescuer.trace("refund-A-17")
    first, second = tree.children
    assert first.status == "interrupted" and first.worker.split(":")[1].isdigit()
    assert [s.name for s in first.children] == ["lookup", "refund"]  # email left no checkpoint
    assert first.end == first.children[-1].end                       # its last record
    assert (second.worker, second.status, second.attributes["replayed"]) == \
        ("rescuer", "completed", 2)
    assert [s.name for s in second.children] == ["email", "close"]
    assert first.start <= first.end <= second.start <= second.end == tree.end


def test_the_lessons_lumpy_run(tmp_path):
    """Two days, three workers, one SIGKILL in a fresh process on the lesson's fake clock."""
    lumpy_ = lumpy_run(tmp_path / "world")
    tree = lumpy_.engine.trace(RUN_ID)
    assert [(s.kind, s.worker, s.status) for s in tree.children] == [
        (EXECUTION, "worker-a", "parked"), (WAIT, None, "signal"),
        (EXECUTION, "worker-b", "interrupted"), (EXECUTION, "worker-c", "completed")]
    a, wait, b, c = tree.children
    assert [s.name for s in a.children] == ["classify", "lookup_order", "draft_reply"]
    assert a.children[1].attributes["attempts"] == 5          # four CRM timeouts, then it answers
    assert wait.duration == 2 * DAY
    assert b.children == [] and b.duration == 0                # killed before any checkpoint
    assert [s.name for s in c.children] == ["refund", "send_reply", "close_ticket"]
    assert c.start - b.end == 60                               # the minute nobody worked
    # The money: the world's own ledger agrees with the tree.
    llm = lumpy_.world.llm
    assert tree.tokens == llm.total_tokens()
    assert tree.cost == pytest.approx(llm.total_cost())
    draft = one(tree.find(name="draft_reply"))
    assert draft.cost / tree.cost > 0.9
    assert draft.attributes["input_tokens"] + draft.attributes["output_tokens"] == draft.tokens
    # What the trace cannot see: worker-b's refund call. The provider's ledger can.
    assert lumpy_.world.payments.calls() == 2 and lumpy_.world.payments.count() == 1


def test_trace_names_an_unknown_run(clock):
    with pytest.raises(dl.UnknownRunError, match="no run 'nope'"):
        engine_for(dl.MemoryStore(), clock).trace("nope")


def test_format_duration_reads_well_at_every_scale():
    assert [format_duration(s) for s in (0, 0.25, 3, 16.26, 65, 3 * 3600 + 125, 2 * DAY + 61)] == \
        ["0 s", "0.25 s", "3 s", "16.3 s", "1 m 05 s", "3 h 02 m", "2 d 0 h 01 m"]
