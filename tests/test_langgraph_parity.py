"""The crash table on LangGraph: lesson 01's refund killed by a real SIGKILL at every step and
crash point, keyed and not (the effects' windows and checkpoints in the four-engine table,
the rest here), resumed by a fresh process, beside durable_lite under the very same crash. Both must leave the same ledger (refunds paid, refund requests, emails, tickets
closed) and agree on what the resume replayed; under durability="sync" there is no known
difference at these points (the crash points wait for LangGraph's background saves: the
race they close is its own entry in differences.py, shown in test_langgraph_differences.py).

Two things the brief of this port expected to differ turn out the same, and are asserted
as such: a task killed inside its window runs again on resume (durable_lite runs an
unfinished step again too), and code outside a task runs again on every resume (durable_lite
replays its workflow body from the top too).
"""

import os

import pytest

from durable_lite import examples as ex
from durable_lite.engines.compare import killed, parity
from durable_lite.engines.langgraph import refund as refund_langgraph, support as langgraph_support
from durable_lite.faults import AFTER_EFFECT, BEFORE_STEP, CRASH_POINTS, CrashAt
from durable_lite.sim import World

pytestmark = pytest.mark.crash

# Each effect killed inside its window and right after its checkpoint, keyed and not, is a
# cell of the four-engine table (test_parity_four_engines.py, in all three durability
# modes); here the points that table leaves out: every step just before it starts, and the
# lookup (no effect) at every point.
CASES = [(step, when, keyed) for keyed in (True, False) for step in ex.REFUND_STEPS
         for when in CRASH_POINTS if when == BEFORE_STEP or step == "lookup"]
EFFECTS = {"refund": "refunds paid", "email": "emails", "close": "tickets closed"}


def ids(case):
    step, when, keyed = case
    return f"{step}-{when}-{'keyed' if keyed else 'bare'}"


def place(tmp_path, name):
    work = tmp_path / name
    work.mkdir()
    return str(work / "world"), str(work)


def durable_lite_side(step, when, keyed, tmp_path):
    """durable_lite under the same crash (parity.refund_killed_durable_lite is always keyed)."""
    if keyed:
        return parity.refund_killed_durable_lite(step, when, *place(tmp_path, "durable_lite"))
    world, work = place(tmp_path, "durable_lite")
    seen = killed.on_durable_lite("durable_lite.examples", "refund",
                                  [world, parity.ORDER, parity.AMOUNT],
                                  run_id=f"refund-{parity.ORDER}", workdir=work,
                                  kwargs={"use_key": False}, crash=CrashAt(step, when))
    return {k: seen[k] for k in ("killed", "status", "result", "replayed")} | parity.ledger(world)


def expected_ledger(step, when, keyed):
    """Lesson 03's rule: only the effect whose window the kill fell in happens twice, and
    a key turns the second request into the first one's receipt."""
    repeated = {EFFECTS.get(step)} if when == AFTER_EFFECT else set()
    counts = {name: 1 + (name in repeated and not keyed) for name in EFFECTS.values()}
    counts["refund requests"] = 1 + ("refunds paid" in repeated)
    return counts


@pytest.mark.parametrize("case", CASES, ids=[ids(c) for c in CASES])
def test_killed_at_the_same_point_langgraph_and_durable_lite_leave_the_same_ledger(tmp_path,
                                                                                   case):
    step, when, keyed = case
    langgraph = parity.refund_killed_langgraph(step, when, *place(tmp_path, "langgraph"),
                                               keyed=keyed)
    assert langgraph == durable_lite_side(step, when, keyed, tmp_path)
    assert langgraph["killed"] and langgraph["status"] == "completed"
    paid_twice = not keyed and (step, when) == ("refund", AFTER_EFFECT)
    receipt = "R-2" if paid_twice else "R-1"        # the resume's own refund, unkeyed
    assert langgraph["result"] == {"order": "A-17", "refund_id": receipt, "amount": 40}
    assert {k: langgraph[k] for k in expected_ledger(step, when, keyed)} == \
        expected_ledger(step, when, keyed)


def test_the_parity_runner_returns_the_keys_of_the_other_engines_runners(tmp_path):
    langgraph = parity.refund_killed_langgraph("email", "after_effect",
                                               *place(tmp_path, "langgraph"))
    durable_lite = parity.refund_killed_durable_lite("email", "after_effect",
                                                     *place(tmp_path, "durable_lite"))
    assert list(langgraph) == list(durable_lite)
    assert langgraph["replayed"] == ["lookup", "refund"]


def test_a_task_killed_in_its_window_runs_again_on_both_engines(tmp_path):
    """Not a difference: both re-run the unfinished step (the window of lesson 03)."""
    for step in ("refund", "email", "close"):
        case = tmp_path / step
        case.mkdir()
        langgraph = parity.refund_killed_langgraph(step, AFTER_EFFECT, *place(case, "langgraph"),
                                                   keyed=False)
        durable_lite = durable_lite_side(step, AFTER_EFFECT, False, case)
        assert step not in langgraph["replayed"] and step not in durable_lite["replayed"]
        assert langgraph[EFFECTS[step]] == durable_lite[EFFECTS[step]] == 2


# code outside a step ---------------------------------------------------------------------------
def _note(folder, text):
    World(folder).ledger("notes").record(detail=text)


def test_code_outside_a_step_runs_again_on_every_resume_on_both_engines(tmp_path):
    """Both engines run the workflow body again from the top and serve finished steps
    from their checkpoints: an effect written outside a step happens once per resume."""
    import durable_lite as dl
    from langgraph.func import entrypoint, task

    @dl.workflow("outside-a-step-test")
    def with_durable_lite(ctx, folder):
        _note(folder, "outside")                         # not a step: runs on every replay
        ctx.step("inside", _note, folder, "inside")
        return ctx.wait_for_signal("go", timeout=3600)

    @task
    def inside(folder):
        _note(folder, "inside")

    @entrypoint()
    def with_langgraph(folder):
        _note(folder, "outside")                         # not a task: runs on every resume
        inside(folder).result()
        from langgraph.types import interrupt
        return interrupt("go")

    dl_world, lg_world = str(tmp_path / "dl"), str(tmp_path / "lg")
    engine = dl.Engine(dl.SQLiteStore(str(tmp_path / "runs.db")), dl.FakeClock())
    engine.start(with_durable_lite, dl_world, run_id="r")
    engine.signal("r", "go", "now")
    assert engine.resume("r").status == "completed"

    saver = langgraph_support.open_saver(tmp_path / "lg.sqlite")
    wf = langgraph_support.bind(with_langgraph, saver)
    wf.invoke(lg_world, langgraph_support.config("r"))
    from langgraph.types import Command
    wf.invoke(Command(resume="now"), langgraph_support.config("r"))
    assert langgraph_support.status(wf, "r") == "completed"
    langgraph_support.close_saver(saver)

    for folder in (dl_world, lg_world):
        notes = [r["detail"] for r in World(folder).ledger("notes").records()]
        assert sorted(notes) == ["inside", "outside", "outside"], folder


def test_the_port_sends_the_provider_the_same_keys_as_durable_lite(tmp_path):
    """Keys come from durable_lite's key function fed with the thread id: the same run id
    gives the same keys on both engines, so a provider sees one refund across them."""
    import durable_lite as dl
    world = str(tmp_path / "world")
    engine = dl.Engine(dl.SQLiteStore(str(tmp_path / "runs.db")), dl.FakeClock())
    engine.start(ex.refund, world, "A-17", 40, key_notices=True, run_id="refund-A-17")
    saver = langgraph_support.open_saver(os.path.join(tmp_path, "lg.sqlite"))
    wf = langgraph_support.bind(refund_langgraph.refund, saver)
    out = refund_langgraph.start(wf, world, "A-17", 40, "refund-A-17", key_notices=True)
    langgraph_support.close_saver(saver)
    assert out["refund_id"] == "R-1"                     # the first refund's receipt
    ledger = parity.ledger(world)
    assert (ledger["refunds paid"], ledger["emails"], ledger["tickets closed"]) == (1, 1, 1)
    assert ledger["refund requests"] == 2
