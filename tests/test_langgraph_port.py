"""Lesson 01's refund and lesson 07's approval with a deadline, ported to LangGraph's
functional API (durable_lite/engines/langgraph/refund.py), and the port table that says
what changes: every line it quotes is in its module, and every claim it makes is run here.
LangGraph stays an optional extra: `import durable_lite` never loads it.
"""

import importlib
import os
import subprocess
import sys

import pytest

import durable_lite as dl
from durable_lite import examples as ex
from durable_lite.engines.compare import concepts, parity
from durable_lite.engines.langgraph import (refund as refund_langgraph,
                                            support as langgraph_support,
                                            worker as langgraph_worker)
from durable_lite.faults import AFTER_EFFECT, CrashAt
from durable_lite.sim import ToolError, World

from langgraph.func import entrypoint, task
from langgraph.types import RetryPolicy

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def saver(tmp_path):
    saver = langgraph_support.open_saver(tmp_path / "langgraph.sqlite")
    yield saver
    langgraph_support.close_saver(saver)


# the port runs ---------------------------------------------------------------------------------
def test_the_refund_runs_on_langgraph_with_one_of_each_effect(tmp_path, saver):
    world = str(tmp_path / "world")
    wf = langgraph_support.bind(refund_langgraph.refund, saver)
    assert langgraph_support.status(wf, "refund-A-17") is None
    out = refund_langgraph.start(wf, world, "A-17", 40, "refund-A-17", key_notices=True)
    assert out == {"order": "A-17", "refund_id": "R-1", "amount": 40}
    assert langgraph_support.status(wf, "refund-A-17") == "completed"
    assert langgraph_support.result(wf, "refund-A-17") == out
    assert langgraph_support.threads(saver) == ["refund-A-17"]
    ledger = parity.ledger(world)
    assert (ledger["refunds paid"], ledger["emails"], ledger["tickets closed"]) == (1, 1, 1)


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "deadline passed"])
def test_the_approval_ends_as_on_durable_lite(tmp_path, approve):
    here, there = tmp_path / "durable_lite", tmp_path / "langgraph"
    here.mkdir()
    there.mkdir()
    on_durable_lite = parity.approval_durable_lite(approve, str(here / "world"), str(here))
    on_langgraph = parity.approval_langgraph(approve, str(there / "world"), str(there))
    assert on_langgraph == on_durable_lite
    assert on_langgraph["asked for approval"] and on_langgraph["status"] == "completed"
    assert on_langgraph["refunds paid"] == (1 if approve else 0)
    assert on_langgraph["emails"] == 1


def test_a_small_refund_asks_nobody_and_a_failing_task_fails_the_thread(tmp_path, saver):
    clock = dl.FakeClock()
    previous = refund_langgraph.set_clock(clock)
    try:
        wf = langgraph_support.bind(refund_langgraph.refund_with_approval, saver)
        refund_langgraph.start(wf, str(tmp_path / "w"), "A-17", 40, "small")
        assert langgraph_support.waiting(wf)["small"]["waiting for"] == refund_langgraph.COOLING_OFF
    finally:
        refund_langgraph.set_clock(previous)

    @task
    def broken():
        raise ToolError("the provider is down")

    @entrypoint()
    def fails(_):
        return broken().result()

    failing = langgraph_support.bind(fails, saver)
    with pytest.raises(ToolError):
        failing.invoke({}, langgraph_support.config("broken"))
    assert langgraph_support.status(failing, "broken") == "failed"


@pytest.mark.crash
def test_killed_inside_the_refund_task_a_fresh_process_finishes_the_thread(tmp_path):
    """The lesson's story: SIGKILL after the bank paid, before LangGraph had the result;
    a fresh process calls invoke(None) and the key makes the second request harmless."""
    path, world = str(tmp_path / "langgraph.sqlite"), str(tmp_path / "world")
    inputs = {"folder": world, "order_id": "A-17", "amount": 40}
    first = langgraph_worker.start_worker(path, "refund.refund", "refund-A-17",
                                          start=inputs, crash=CrashAt("refund", AFTER_EFFECT))
    first.join()
    assert first.killed and first.report() is None
    assert World(world).payments.count() == 1
    again = langgraph_worker.start_worker(path, "refund.refund", "refund-A-17",
                                          resume=True).result()
    assert (again["how"], again["status"], again["error"]) == ("resumed", "completed", None)
    assert again["replayed"] == ["lookup"] and again["ran"] == ["refund", "email", "close"]
    assert again["result"]["refund_id"] == "R-1"
    ledger = parity.ledger(world)
    assert (ledger["refunds paid"], ledger["refund requests"]) == (1, 2)


@pytest.mark.crash
def test_killed_after_the_approval_the_answer_is_not_lost(tmp_path):
    """The approval arrives; the process it runs in is killed inside the refund task. A
    fresh process resumes the thread, which does not ask again and pays once."""
    path, world = str(tmp_path / "langgraph.sqlite"), str(tmp_path / "world")
    inputs = {"folder": world, "order_id": "A-17", "amount": 250}
    asked = langgraph_worker.start_worker(path, "refund.refund_with_approval",
                                          "refund-A-17", start=inputs).result()
    assert asked["status"] == "waiting"
    assert asked["waiting_for"]["waiting for"] == refund_langgraph.APPROVAL
    answered = langgraph_worker.start_worker(
        path, "refund.refund_with_approval", "refund-A-17",
        answer={"approved": True, "by": "ana"}, crash=CrashAt("refund", AFTER_EFFECT))
    answered.join()
    assert answered.killed
    resumed = langgraph_worker.start_worker(path, "refund.refund_with_approval",
                                            "refund-A-17", resume=True).result()
    assert resumed["status"] == "waiting"                    # now the cooling-off hour
    assert resumed["waiting_for"]["waiting for"] == refund_langgraph.COOLING_OFF
    assert resumed["replayed"] == ["lookup", "clock", "clock"]   # the deadline, the answer's time
    ledger = parity.ledger(world)
    assert (ledger["refunds paid"], ledger["refund requests"], ledger["emails"]) == (1, 2, 1)


def test_a_worker_refuses_an_unclear_order_naming_what_is_wrong(tmp_path):
    path = tmp_path / "x.sqlite"
    with pytest.raises(ValueError, match="exactly one of start, resume, answer"):
        langgraph_worker.start_worker(path, "refund.refund", "t", resume=True,
                                      answer={"approved": True})
    with pytest.raises(ValueError, match="durability 'fast'"):
        langgraph_worker.start_worker(path, "refund.refund", "t", resume=True,
                                      durability="fast")
    report = langgraph_worker.start_worker(path, "refund.refund", "nobody",
                                           resume=True).result()
    assert "has no checkpoint to resume" in report["error"] and report["status"] is None


# LangGraph stays optional ------------------------------------------------------------------------
def test_import_durable_lite_and_its_engines_package_load_no_langgraph():
    code = ("import sys, durable_lite, durable_lite.engines, durable_lite.engines.compare.parity; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'langgraph'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]"


def test_without_the_extra_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "langgraph.func", None)      # as if not installed
    with pytest.raises(ImportError, match=r"durable-lite\[engines\]"):
        langgraph_support.require()


# the port table ----------------------------------------------------------------------------------
def test_the_langgraph_port_table_quotes_lines_that_are_really_in_their_modules():
    import inspect
    for row in concepts.LANGGRAPH_PORT:
        for line, where in ((row.durable_lite, row.durable_lite_in),
                            (row.langgraph, row.langgraph_in)):
            source = inspect.getsource(importlib.import_module(f"durable_lite.{where}"))
            for part in line.split("  ...  "):
                assert part in source, f"{row.concept}: {part!r} is not in {where}"
        assert row.changes
    table = concepts.langgraph_port_table()
    assert list(table.columns) == ["concept", "durable_lite", "LangGraph", "what changes"]
    assert len(table) == len(concepts.LANGGRAPH_PORT)
    assert not any("  " in text for text in table["LangGraph"])


def test_the_port_tables_claim_about_retries_holds(tmp_path, saver):
    """Neither engine retries unless told; RetryPolicy's default filter skips ValueError."""
    calls = {"langgraph": 0}

    @task
    def flaky():
        calls["langgraph"] += 1
        raise ToolError("down")

    @entrypoint()
    def once(_):
        return flaky().result()

    with pytest.raises(ToolError):
        langgraph_support.bind(once, saver).invoke({}, langgraph_support.config("once"))
    assert calls["langgraph"] == 1

    @dl.workflow("langgraph-port-retries")
    def once_on_durable_lite(ctx, folder):
        return ctx.step("flaky", ex.research_tool, folder, "drafting")

    engine = dl.Engine(dl.SQLiteStore(str(tmp_path / "runs.db")), dl.FakeClock())
    run = engine.start(once_on_durable_lite, str(tmp_path / "w"), run_id="once")
    assert run.status == "failed" and "after 1 attempt" in run.error
    policy = RetryPolicy()
    assert policy.retry_on(ToolError("down")) and not policy.retry_on(ValueError("bad"))


def test_the_run_here_cells_name_real_tests_and_concepts_of_the_map():
    for concept, cell in concepts.LANGGRAPH_RUN_HERE.items():
        assert concept in concepts.CONCEPTS and cell.confirmed
        filename, _, test = cell.source.partition("::")
        path = os.path.join(os.path.dirname(TESTS_DIR), filename)
        with open(path, encoding="utf-8") as f:
            assert not test or f"def {test}(" in f.read(), cell.source
