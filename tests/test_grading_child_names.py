"""A fresh process that runs a learner's code runs the learner's workflow, even one named
like a workflow of the course's own examples ("refund", "research"): names are global in a
process, and the examples imported after the answer used to replace it there."""

import textwrap

from durable_lite.grading.child import run_fresh, write_module

ANSWER = textwrap.dedent('''
    import durable_lite as dl

    @dl.workflow("research", version=1)
    def research(ctx, topic):
        return f"mine: {topic}"

    def go(folder):
        engine = dl.Engine(dl.SQLiteStore(folder + "/runs.db"), dl.FakeClock())
        return engine.start("research", "durability", run_id="r1").result
''')


def test_a_learners_workflow_named_like_an_example_is_the_one_that_runs(tmp_path):
    write_module(tmp_path, ANSWER)
    run = run_fresh(tmp_path, "go", str(tmp_path))
    assert run.error is None, (run.error, run.stderr[-2000:])
    assert run.result == "mine: durability"
