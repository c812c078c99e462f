"""Property: crash anywhere, as often as you like, resume each time with a fresh engine —
the run ends with the same result and the world sees the same effects as a run that never
crashed.

"Anywhere" is every step instance at every crash point, except that a crash between a
step's effect and its checkpoint is only allowed where the effect is guarded by a key: an
unkeyed effect (a model call) in that window runs again, by design, and that is exactly
what keys are for (see test_crash_refund.py for the window itself).
"""

import shutil
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core_support import *  # noqa: F401,F403

from durable_lite import examples as ex
from durable_lite.faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP, CrashAt


def pay(folder, task, amount, key):
    return ex.world_at(folder).payments.refund(task, amount, idempotency_key=key)


def notify(folder, task, key):
    return ex.world_at(folder).mailer.send("team@example.com", f"{task} paid", idempotency_key=key)


def plan(folder, goal):
    return ex.world_at(folder).llm.plan(goal, n_tasks=3)


@dl.workflow("core-prop-agent")
def agent(ctx, folder, goal):
    """A small agent: a model plans tasks, each is paid and announced, with keys."""
    started = ctx.now()
    tasks = ctx.step("plan", plan, folder, goal)["tasks"]
    paid = []
    for task in tasks:
        receipt = ctx.step(f"pay:{task}", pay, folder, task, 5, ctx.idempotency_key("pay", task))
        ctx.step("notify", notify, folder, task, ctx.idempotency_key("notify", task))
        paid.append(receipt["refund_id"])
    return {"started": started, "tasks": tasks, "paid": paid, "ref": ctx.uuid()}


def refund_run(engine, folder):
    return engine.start(ex.refund, folder, "A-17", 40, run_id="prop", key_notices=True)


def agent_run(engine, folder):
    return engine.start(agent, folder, "ship the report", run_id="prop")


UNKEYED = {"lookup", "plan"}          # steps whose effect is not guarded by a key


def world_summary(folder):
    world = ex.world_at(folder)
    return {"refunds": world.payments.refunds(), "mail": world.mailer.sent(),
            "closes": world.tickets.closes(), "llm": world.llm.calls()}


class Scenario:
    """Runs a workflow in a throwaway folder; forgets the folder's world afterwards."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dl-prop-")
        self.folder = os.path.join(self.dir, "world")
        self.store = dl.SQLiteStore(os.path.join(self.dir, "runs.db"))
        self.clock = dl.FakeClock()

    def engine(self, crashes=None):
        return dl.Engine(self.store, self.clock, ids=dl.SequentialIds("u"), crash_at=crashes)

    def close(self):
        self.store.close()
        for key in [k for k in ex._worlds if k[0] == self.folder]:
            ex._worlds.pop(key).close()
        shutil.rmtree(self.dir, ignore_errors=True)


def reference(start):
    scenario = Scenario()
    try:
        run = start(scenario.engine(), scenario.folder)
        labels = [(e.name, e.occurrence) for e in scenario.store.load_entries("prop") if e.kind == "step"]
        return run.result, world_summary(scenario.folder), labels
    finally:
        scenario.close()


REFERENCES = {"refund": reference(refund_run), "agent": reference(agent_run)}
STARTS = {"refund": refund_run, "agent": agent_run}


@st.composite
def crash_plans(draw, workflow):
    _, _, steps = REFERENCES[workflow]
    crashes = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        name, occurrence = draw(st.sampled_from(steps))
        points = [BEFORE_STEP, AFTER_CHECKPOINT] + ([] if name in UNKEYED else [AFTER_EFFECT])
        crashes.append(CrashAt(name, draw(st.sampled_from(points)), occurrence=occurrence))
    return crashes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), workflow=st.sampled_from(sorted(STARTS)))
def test_crashing_anywhere_and_resuming_matches_a_run_that_never_crashed(data, workflow):
    crashes = data.draw(crash_plans(workflow))
    expected_result, expected_world, _ = REFERENCES[workflow]
    scenario = Scenario()
    try:
        pending, executions = list(crashes), 0
        while True:
            executions += 1
            engine = scenario.engine(pending)         # a fresh engine: a fresh process
            try:
                run = STARTS[workflow](engine, scenario.folder)
                break
            except dl.Crash:
                pending = engine.crash_at             # the crashes that have not fired yet
                scenario.clock.advance(60)            # the restart takes a while
            assert executions <= len(crashes) + 1
        assert run.status == "completed"
        assert run.result == expected_result
        assert world_summary(scenario.folder) == expected_world
    finally:
        scenario.close()
