"""The source review's five figures, reproduced on durable_lite.

The research workflow: retrieval -> extraction (emails the team) -> drafting (fails on its
first call) -> deliver.
  1. naive retry from the top: 7 step executions, the email sent twice
  2. durable execution: 5 step executions, the email sent once
  3. replay with a changed nonce keeps generation 1's draft, not generation 999's
  4. a fresh process (a real child process) replays the saved steps and sends nothing again
  5. 50 delivery attempts across 10 fresh Engine objects: 1 delivery, 1 checkpoint write
"""

from core_support import *  # noqa: F401,F403
from core_support import count_writes, step_entries

from durable_lite import examples as ex

TOPIC = "durable execution"


def test_figure_1_naive_retry_executes_7_steps_and_sends_the_email_twice(folder):
    outcome = dl.naive.NaiveRunner(max_attempts=3).run(ex.research, folder, TOPIC)
    world = ex.research_world(folder)
    assert outcome.status == "completed" and outcome.attempts == 2
    assert outcome.executions == [(1, "retrieval"), (1, "extraction"), (1, "drafting"),
                                  (2, "retrieval"), (2, "extraction"), (2, "drafting"),
                                  (2, "deliver")]
    assert outcome.step_executions == 7
    assert world.tools.calls() == 7
    assert world.mailer.count() == 2


def test_figure_2_durable_execution_executes_5_steps_and_sends_the_email_once(engine, folder):
    first = engine.start(ex.research, folder, TOPIC, run_id="research-1")
    assert first.status == "failed" and "drafting" in first.error
    assert first.executed == ["retrieval", "extraction", "drafting"]     # drafting failed

    second = engine.start(ex.research, folder, TOPIC, run_id="research-1")
    assert second.status == "completed"
    assert second.replayed == ["retrieval", "extraction"]
    assert second.executed == ["drafting", "deliver"]
    assert len(first.executed) + len(second.executed) == 5
    world = ex.research_world(folder)
    assert world.tools.calls() == 5              # retrieval, extraction, drafting x2, deliver
    assert world.mailer.count() == 1


NONCE = {"value": 1}


@dl.workflow("core-research-nonce")
def research_with_nonce(ctx, folder, topic):
    """The research workflow, except that the drafting nonce comes from the code, so a test
    can change it between executions (as a learner edits a cell)."""
    docs = ctx.step("retrieval", ex.research_tool, folder, "retrieval", topic)
    facts = ctx.step("extraction", ex.extract_and_notify, folder, docs, "team@example.com")
    report = ctx.step("drafting", ex.draft, folder, facts, NONCE["value"])
    ctx.step("deliver", ex.research_tool, folder, "deliver", report["text"])
    return report["text"]


def test_figure_3_replay_with_a_changed_nonce_keeps_generation_1(engine, fresh, clock, folder):
    NONCE["value"] = 1
    assert engine.start(research_with_nonce, folder, TOPIC, run_id="nonce").status == "failed"
    crashing = dl.Engine(engine.store, clock, crash_at=dl.faults.CrashAt("deliver", "before_step"))
    with pytest.raises(dl.Crash):
        crashing.resume("nonce")                 # the draft is checkpointed, delivery is not
    NONCE["value"] = 999                         # re-executing drafting would now say 999
    run = fresh().resume("nonce")
    assert run.status == "completed"
    assert "drafting" in run.replayed and run.executed == ["deliver"]
    assert run.result.startswith("[generation 1]")
    assert "999" not in run.result
    assert ex.research_world(folder).llm.calls() == 1


def test_figure_4_a_fresh_process_replays_the_saved_steps_without_resending(engine, store_path, folder):
    assert engine.start(ex.research, folder, TOPIC, run_id="research-4").status == "failed"
    assert ex.research_world(folder).mailer.count() == 1

    child = dl.faults.run_in_child(store_path, "durable_lite.examples", "research",
                                   run_id="research-4", resume=True)
    assert child.returncode == 0 and child.run["status"] == "completed"
    assert child.run["replayed"] == ["retrieval", "extraction"]
    assert child.run["executed"] == ["drafting", "deliver"]
    assert ex.research_world(folder).mailer.count() == 1          # still once
    assert engine.get("research-4").status == "completed"


@dl.workflow("core-deliver")
def deliver(ctx, folder, report):
    return ctx.step("deliver", ex.research_tool, folder, "deliver", report)


def test_figure_5_fifty_attempts_across_ten_fresh_engines_deliver_once(store_path, stores, clock, folder):
    writes = []
    attempts = 0
    for n in range(10):
        store = count_writes(stores(store_path))            # nothing carried over in memory
        crash = dl.faults.CrashAt("deliver", "after_checkpoint") if n == 0 else None
        engine = dl.Engine(store, clock, crash_at=crash)
        for _ in range(5):
            attempts += 1
            try:
                run = engine.start(deliver, folder, "the report", run_id="delivery-1")
            except dl.Crash:
                continue                                     # the worker died; try again
            assert run.status == "completed"
        writes += store.writes
    assert attempts == 50
    assert ex.research_world(folder).tools.calls("deliver") == 1
    assert [label for _, label in writes if label == "deliver"] == ["deliver"]
    assert len(step_entries(stores(store_path), "delivery-1", "deliver")) == 1


def test_figure_5_contrast_an_in_memory_dedupe_set_dies_with_each_runner(folder):
    """The wrong answer the review warns about: a set of delivered keys kept in memory."""
    world = ex.research_world(folder)

    class Runner:
        def __init__(self):
            self.delivered = set()

        def deliver(self, key, report):
            if key not in self.delivered:
                world.tools.call("deliver", report)
                self.delivered.add(key)

    for _ in range(10):
        runner = Runner()                                    # a restart: a fresh object
        for _ in range(5):
            runner.deliver("delivery-1", "the report")
    assert world.tools.calls("deliver") == 10
