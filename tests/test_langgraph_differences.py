"""Where LangGraph and durable_lite differ: each difference shown from both sides, and the
registry (differences.LANGGRAPH_DIFFERENCES) checked to be complete: every entry has its
evidence test here, and every test here has its entry.

Processes are real where a crash is the point (SIGKILL from inside a task, resumed by a
fresh process); the rest runs in this process on a SqliteSaver file.
"""

import os
import re

import pytest

import durable_lite as dl
from durable_lite import examples as ex
from durable_lite.engines.compare import differences, parity
from durable_lite.engines.langgraph import (durability as langgraph_durability,
                                            refund as refund_langgraph,
                                            support as langgraph_support,
                                            worker as langgraph_worker)
from durable_lite.engines.lite import refund as refund_durable_lite
from durable_lite.errors import NonDeterminismError
from durable_lite.faults import AFTER_EFFECT, CrashAt
from durable_lite.sim import World

from langgraph.errors import EmptyInputError
from langgraph.func import entrypoint, task
from langgraph.types import Command

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
DAY = 86400


def engine_at(workdir, clock=None):
    return dl.Engine(dl.SQLiteStore(os.path.join(workdir, "runs.db")), clock or dl.FakeClock(),
                     ids=dl.SequentialIds("run"))


@pytest.fixture
def saver(tmp_path):
    saver = langgraph_support.open_saver(tmp_path / "langgraph.sqlite")
    yield saver
    langgraph_support.close_saver(saver)


@pytest.fixture
def clock():
    """One FakeClock for both engines; the LangGraph port reads it through a task."""
    clock = dl.FakeClock()
    previous = refund_langgraph.set_clock(clock)
    yield clock
    refund_langgraph.set_clock(previous)


def inputs(folder, **options):
    return {"folder": folder, "order_id": "A-17", "amount": 40, **options}


# one test per difference ---------------------------------------------------------------------
@pytest.mark.crash
def test_a_task_result_is_saved_in_the_background_so_a_kill_can_lose_it(tmp_path):
    """Killed just before the email starts, after the refund returned: durable_lite had
    committed the refund, LangGraph (each background save slowed to 0.5 s, as on a busy
    disk, and no crash point waiting for it) had not, and pays the bank a second visit."""
    dl_world, dl_work = str(tmp_path / "dl" / "world"), str(tmp_path / "dl")
    os.makedirs(dl_work)
    on_durable_lite = parity.refund_killed_durable_lite("email", "before_step", dl_world, dl_work)
    assert on_durable_lite["replayed"] == ["lookup", "refund"]
    assert on_durable_lite["refund requests"] == 1

    lg_work = str(tmp_path / "lg")
    os.makedirs(lg_work)
    seen = langgraph_durability.killed_and_resumed(
        "email", "before_step", os.path.join(lg_work, "world"), lg_work, durability="sync",
        wait_for_saves=False, slow_saves=0.5)
    assert seen["killed"] and seen["how"] == "resumed" and seen["status"] == "completed"
    assert "refund" in seen["ran"] and seen["refund requests"] == 2
    assert seen["refunds paid"] == 1                  # the key caught it; an unkeyed refund pays twice


@pytest.mark.crash
def test_under_exit_durability_a_killed_run_starts_over(tmp_path):
    path = str(tmp_path / "langgraph.sqlite")
    world = str(tmp_path / "world")
    first = langgraph_worker.start_worker(path, "refund.refund", "refund-A-17",
                                          start=inputs(world), durability="exit",
                                          crash=CrashAt("close", AFTER_EFFECT))
    first.join()
    assert first.killed
    saver = langgraph_support.open_saver(path)
    wf = langgraph_support.bind(refund_langgraph.refund, saver)
    assert langgraph_support.status(wf, "refund-A-17") is None        # nothing was saved
    with pytest.raises(EmptyInputError):
        wf.invoke(None, langgraph_support.config("refund-A-17"), durability="exit")
    wf.invoke(inputs(world), langgraph_support.config("refund-A-17"), durability="exit")
    langgraph_support.close_saver(saver)
    ledger = parity.ledger(world)
    assert (ledger["refund requests"], ledger["emails"], ledger["tickets closed"]) == (2, 2, 2)
    assert ledger["refunds paid"] == 1                # keyed: the bank recognised the repeat

    on_durable_lite = parity.refund_killed_durable_lite("close", AFTER_EFFECT,
                                                        str(tmp_path / "dl-world"),
                                                        str(tmp_path))
    assert on_durable_lite["replayed"] == ["lookup", "refund", "email"]
    assert on_durable_lite["refund requests"] == 1 and on_durable_lite["emails"] == 1


def test_a_finished_thread_started_again_runs_every_task_again(tmp_path, saver):
    dl_world, lg_world = str(tmp_path / "dl"), str(tmp_path / "lg")
    engine = engine_at(str(tmp_path))
    for _ in range(2):
        run = engine.start(ex.refund, dl_world, "A-17", 40, run_id="refund-A-17")
    assert run.status == "completed" and parity.ledger(dl_world)["refund requests"] == 1
    assert parity.ledger(dl_world)["emails"] == 1

    wf = langgraph_support.bind(refund_langgraph.refund, saver)
    config = langgraph_support.config("refund-A-17")
    for _ in range(2):
        wf.invoke(inputs(lg_world), config, durability="sync")
    ledger = parity.ledger(lg_world)
    assert (ledger["refund requests"], ledger["emails"], ledger["tickets closed"]) == (2, 2, 2)
    assert ledger["refunds paid"] == 1                # the key derived from the thread id
    assert wf.invoke(None, config)["refund_id"] == "R-1"      # None: the last result, no run
    assert parity.ledger(lg_world)["refund requests"] == 2


@pytest.mark.crash
def test_nothing_resumes_a_killed_thread_until_someone_invokes_it(tmp_path):
    store = str(tmp_path / "runs.db")
    dl_world = str(tmp_path / "dl-world")
    child = dl.faults.run_in_child(store, "durable_lite.examples", "refund", dl_world, "A-17", 40,
                                   run_id="refund-A-17",
                                   crash_at=CrashAt("email", AFTER_EFFECT, kill=True))
    assert child.killed
    recovered = dl.Engine(dl.SQLiteStore(store)).recover()     # any worker, no run id given
    assert [(r.run_id, r.status) for r in recovered] == [("refund-A-17", "completed")]

    path = str(tmp_path / "langgraph.sqlite")
    lg_world = str(tmp_path / "lg-world")
    first = langgraph_worker.start_worker(path, "refund.refund", "refund-A-17",
                                          start=inputs(lg_world),
                                          crash=CrashAt("email", AFTER_EFFECT))
    first.join()
    assert first.killed
    before = parity.ledger(lg_world)
    saver = langgraph_support.open_saver(path)              # a fresh process's start-up
    wf = langgraph_support.bind(refund_langgraph.refund, saver)
    assert langgraph_support.status(wf, "refund-A-17") == "unfinished"
    assert langgraph_support.unfinished(wf) == ["refund-A-17"]
    assert parity.ledger(lg_world) == before                 # opening it ran nothing
    wf.invoke(None, langgraph_support.config("refund-A-17"))  # someone has to
    assert langgraph_support.status(wf, "refund-A-17") == "completed"
    assert langgraph_support.unfinished(wf) == []
    langgraph_support.close_saver(saver)


def test_an_interrupt_past_its_deadline_waits_until_a_sweep_answers_it(tmp_path, saver, clock):
    engine = engine_at(str(tmp_path), clock)
    dl_world, lg_world = str(tmp_path / "dl"), str(tmp_path / "lg")
    refund_durable_lite.start(engine, dl_world, "A-17", 250, "refund-A-17")
    wf = langgraph_support.bind(refund_langgraph.refund_with_approval, saver)
    refund_langgraph.start(wf, lg_world, "A-17", 250, "refund-A-17")
    late = {"waiting for": refund_langgraph.APPROVAL, "due": clock() + 2 * DAY}
    assert langgraph_support.waiting(wf) == {"refund-A-17": late}

    clock.advance(2 * DAY + 1)
    assert engine.get("refund-A-17").wake_at <= clock()      # the run knows its deadline
    refund_durable_lite.work(engine)
    assert engine.get("refund-A-17").result["refunded"] is False

    assert langgraph_support.status(wf, "refund-A-17") == "waiting"   # past it, still waiting
    assert refund_langgraph.wake_due(wf) == ["refund-A-17"]
    assert langgraph_support.result(wf, "refund-A-17")["refunded"] is False
    assert parity.ledger(lg_world) == parity.ledger(dl_world)

    # A click after the deadline but before any sweep: the workflow reads the clock again.
    refund_langgraph.start(wf, lg_world, "A-18", 250, "refund-A-18")
    clock.advance(2 * DAY + 1)
    refund_langgraph.approve(wf, "refund-A-18")
    assert langgraph_support.result(wf, "refund-A-18")["refunded"] is False
    assert World(lg_world).payments.count() == 0


def test_a_sleep_parks_on_durable_lite_and_is_an_interrupt_on_langgraph(tmp_path, saver, clock):
    engine = engine_at(str(tmp_path), clock)
    dl_world, lg_world = str(tmp_path / "dl"), str(tmp_path / "lg")
    refund_durable_lite.start(engine, dl_world, "A-17", 40, "refund-A-17")   # under the limit
    parked = engine.get("refund-A-17")
    assert parked.status == "sleeping" and parked.wake_at == clock() + 3600

    wf = langgraph_support.bind(refund_langgraph.refund_with_approval, saver)
    refund_langgraph.start(wf, lg_world, "A-17", 40, "refund-A-17")
    assert langgraph_support.waiting(wf) == {
        "refund-A-17": {"waiting for": refund_langgraph.COOLING_OFF, "due": clock() + 3600}}

    clock.advance(1800)                                      # half way: both keep waiting
    refund_durable_lite.work(engine)
    assert refund_langgraph.wake_due(wf) == []
    assert World(dl_world).tickets.closes() == World(lg_world).tickets.closes() == 0
    clock.advance(1800)
    refund_durable_lite.work(engine)
    assert refund_langgraph.wake_due(wf) == ["refund-A-17"]
    assert engine.get("refund-A-17").status == "completed"
    assert langgraph_support.status(wf, "refund-A-17") == "completed"
    assert World(dl_world).tickets.closes() == World(lg_world).tickets.closes() == 1


def test_a_resume_answers_whichever_interrupt_is_pending(tmp_path, saver, clock):
    engine = engine_at(str(tmp_path), clock)
    dl_world, lg_world = str(tmp_path / "dl"), str(tmp_path / "lg")
    refund_durable_lite.start(engine, dl_world, "A-17", 250, "refund-A-17")
    refund_durable_lite.approve(engine, "refund-A-17")
    refund_durable_lite.work(engine)                         # paid, told, now sleeping
    refund_durable_lite.approve(engine, "refund-A-17")       # a second click
    refund_durable_lite.work(engine)
    assert engine.get("refund-A-17").status == "sleeping"    # the hour still runs
    assert World(dl_world).tickets.closes() == 0

    wf = langgraph_support.bind(refund_langgraph.refund_with_approval, saver)
    refund_langgraph.start(wf, lg_world, "A-17", 250, "refund-A-17")
    refund_langgraph.approve(wf, "refund-A-17")              # paid, told, now cooling off
    with pytest.raises(ValueError, match="not waiting for an approval"):
        refund_langgraph.approve(wf, "refund-A-17")          # the port's guard
    wf.invoke(Command(resume={"approved": True, "by": "ana"}),  # the same click, sent raw
              langgraph_support.config("refund-A-17"))
    assert langgraph_support.status(wf, "refund-A-17") == "completed"
    assert World(lg_world).tickets.closes() == 1             # an hour early


def test_a_none_answer_is_refused_by_durable_lite_and_breaks_langgraph(tmp_path, saver, clock):
    engine = engine_at(str(tmp_path), clock)
    refund_durable_lite.start(engine, str(tmp_path / "dl"), "A-17", 250, "refund-A-17")
    with pytest.raises(ValueError, match="cannot be None"):
        engine.signal("refund-A-17", refund_durable_lite.APPROVAL, None)

    wf = langgraph_support.bind(refund_langgraph.refund_with_approval, saver)
    refund_langgraph.start(wf, str(tmp_path / "lg"), "A-17", 250, "refund-A-17")
    with pytest.raises(UnboundLocalError):
        wf.invoke(Command(resume=None), langgraph_support.config("refund-A-17"))
    assert langgraph_support.status(wf, "refund-A-17") == "waiting"


ORDER = {"reversed": False}


def _mail(folder, subject):
    return ex.notify(folder, "team@example.com", subject)


@dl.workflow("langgraph-differences-reorder")
def reordered_on_durable_lite(ctx, folder):
    first, second = ("b", "a") if ORDER["reversed"] else ("a", "b")
    ctx.step(first, _mail, folder, first)
    ctx.step(second, _mail, folder, second)
    ctx.step("drafting", ex.research_tool, folder, "drafting")    # fails on its first call


@task(name="a")
def _a(folder):
    return _mail(folder, "a")


@task(name="b")
def _b(folder):
    return _mail(folder, "b")


@task(name="drafting")
def _drafting(folder):
    return ex.research_tool(folder, "drafting")


@entrypoint()
def reordered_on_langgraph(folder):
    first, second = (_b, _a) if ORDER["reversed"] else (_a, _b)
    first(folder).result()
    second(folder).result()
    return _drafting(folder).result()


def test_reordered_steps_stop_durable_lite_and_run_again_on_langgraph(tmp_path, saver):
    dl_world, lg_world = str(tmp_path / "dl"), str(tmp_path / "lg")
    engine = engine_at(str(tmp_path))
    wf = langgraph_support.bind(reordered_on_langgraph, saver)
    config = langgraph_support.config("r")
    ORDER["reversed"] = False
    try:
        assert engine.start(reordered_on_durable_lite, dl_world, run_id="r").status == "failed"
        with pytest.raises(dl.sim.ToolError):
            wf.invoke(lg_world, config)                      # drafting fails its first call
        ORDER["reversed"] = True                             # the code changed meanwhile
        with pytest.raises(NonDeterminismError, match="recorded step 'a'"):
            engine.resume("r")
        assert wf.invoke(None, config)["tool"] == "drafting"     # no complaint
    finally:
        ORDER["reversed"] = False
    assert World(dl_world).mailer.count() == 2               # a and b, once each
    assert World(lg_world).mailer.count() == 4               # a and b, twice each


def test_results_are_json_on_durable_lite_and_msgpack_on_langgraph(tmp_path, saver):
    odd = {"set": {1, 2}, "tuple": (1, 2), "object": object()}

    @dl.workflow("langgraph-differences-values")
    def returns_on_durable_lite(ctx, kind):
        return ctx.step("value", lambda: odd[kind])

    @task
    def value(kind):
        return odd[kind]

    @entrypoint()
    def returns_on_langgraph(kind):
        return value(kind).result()

    engine = engine_at(str(tmp_path))
    wf = langgraph_support.bind(returns_on_langgraph, saver)
    for kind in ("set", "object"):
        run = engine.start(returns_on_durable_lite, kind, run_id=kind)
        assert run.status == "failed" and "StepResultNotJSON" in run.error, kind
    assert engine.start(returns_on_durable_lite, "tuple", run_id="tuple").result == [1, 2]
    assert wf.invoke("set", langgraph_support.config("set")) == {1, 2}
    assert langgraph_support.result(wf, "set") == {1, 2}            # kept as a set
    assert wf.invoke("tuple", langgraph_support.config("tuple")) == (1, 2)   # the first run
    assert langgraph_support.result(wf, "tuple") == [1, 2]          # read back: a list
    with pytest.raises(TypeError, match="not msgpack serializable"):
        wf.invoke("object", langgraph_support.config("object"))


def test_history_is_a_row_per_step_on_durable_lite_and_per_superstep_on_langgraph(tmp_path,
                                                                                    saver):
    engine = engine_at(str(tmp_path))
    engine.start(ex.refund, str(tmp_path / "dl"), "A-17", 40, run_id="refund-A-17")
    rows = engine.history("refund-A-17")
    assert [r["step"] for r in rows] == list(ex.REFUND_STEPS)
    assert all(r["status"] == "completed" and r["attempts"] == 1 for r in rows)

    wf = langgraph_support.bind(refund_langgraph.refund, saver)
    wf.invoke(inputs(str(tmp_path / "lg")), langgraph_support.config("refund-A-17"))
    history = langgraph_support.history(wf, "refund-A-17")
    assert [(h["source"], h["step"]) for h in history] == [("loop", 0), ("input", -1)]
    assert [h["saved task results"] for h in history] == [0, len(ex.REFUND_STEPS)]
    assert history[1]["next"] == ["refund"]                  # the entrypoint, not its tasks


# the registry ---------------------------------------------------------------------------------
def _tests_in(filename):
    with open(os.path.join(TESTS_DIR, filename), encoding="utf-8") as f:
        return set(re.findall(r"^def (test_\w+)", f.read(), re.M))


def test_every_langgraph_difference_has_evidence_and_every_difference_test_has_an_entry():
    named = set()
    for d in differences.LANGGRAPH_DIFFERENCES:
        filename, test = d.evidence.split("::")
        assert test in _tests_in(filename), f"{d.key}: no {d.evidence}"
        named.add((filename, test))
        assert d.topic and d.durable_lite and d.langgraph
    here = {("test_langgraph_differences.py", t)
            for t in _tests_in("test_langgraph_differences.py")
            if not t.startswith(("test_every_", "test_the_"))}
    assert here <= named, f"difference tests without an entry: {sorted(here - named)}"
    keys = [d.key for d in differences.LANGGRAPH_DIFFERENCES]
    assert len(set(keys)) == len(keys) and set(differences.LANGGRAPH_BY_KEY) == set(keys)


def test_the_langgraph_differences_table_lists_every_entry():
    table = differences.langgraph_table()
    assert list(table.columns) == ["topic", "durable_lite", "LangGraph"]
    assert len(table) == len(differences.LANGGRAPH_DIFFERENCES)


def test_the_langgraph_entries_that_lesson_14_also_has_share_its_key_and_topic():
    """So one table across engines can join the registries by key."""
    shared = set(differences.BY_KEY) & set(differences.LANGGRAPH_BY_KEY)
    assert shared == {"none-payload", "serialization"}
    for key in shared:
        assert differences.BY_KEY[key].topic == differences.LANGGRAPH_BY_KEY[key].topic
