"""The parity suite, part 3: where DBOS and durable_lite differ, each difference shown from
both sides, and the registry (durable_lite/engines/compare/differences.py) checked to be
complete: every entry has its evidence test, and every test here has its entry.

Also the lesson's two tables of data: the port, concept by concept (every line really is in
its module), and the concept map (every cell either names a source or says it was not
confirmed; durable_lite and DBOS names exist in the code).
"""

import inspect
import re
import time

from engines_support import *  # noqa: F401,F403
from engines_support import pair

import durable_lite as dl
from durable_lite import examples as ex
from durable_lite.engines.compare import concepts, differences, parity
from durable_lite.engines.dbos import faults as dbos_faults, support as dbos_support
from durable_lite.engines.dbos import refund as refund_dbos, research as research_dbos
from durable_lite.engines.lite import refund as refund_durable_lite
from durable_lite.faults import CrashAt
from durable_lite.sim import ToolError

from dbos import DBOS, SetWorkflowID, SetWorkflowTimeout

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def engine_at(workdir, clock=None):
    return dl.Engine(dl.SQLiteStore(os.path.join(workdir, "runs.db")), clock or dl.FakeClock(),
                     ids=dl.SequentialIds("run"))


# one test per difference ---------------------------------------------------------------------
def test_naive_retry_is_durable_lite_only(tmp_path, sqlite_url):
    """durable_lite's naive runner retries from the top: 7 executions, 2 emails. DBOS has no
    such mode; the same harm needs a retry under a new workflow id, which is exactly a retry
    from the top."""
    dl_world, _ = pair(tmp_path, "durable_lite")
    outcome = dl.naive.NaiveRunner(max_attempts=3).run(ex.research, dl_world, parity.TOPIC)
    assert outcome.step_executions == 7 and ex.research_world(dl_world).mailer.count() == 2

    dbos_world, _ = pair(tmp_path, "dbos")
    with dbos_support.running(sqlite_url):
        for attempt in (1, 2):
            try:
                with SetWorkflowID(f"research-try-{attempt}"):
                    research_dbos.research(dbos_world, parity.TOPIC)
            except ToolError:
                pass
    assert parity.ledger(dbos_world)["tool calls"] == 7
    assert parity.ledger(dbos_world)["emails"] == 2


def test_budgets_halt_on_durable_lite_dbos_only_times_out(tmp_path, sqlite_url):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    run = engine_at(dl_work).start(ex.refund, dl_world, "A-17", 40, run_id="refund-A-17",
                                   budget=dl.Budget(max_steps=2))
    assert run.status == "halted" and "max_steps" in run.halt_reason
    assert parity.ledger(dl_world)["emails"] == 0              # stopped before the email

    params = inspect.signature(DBOS.workflow).parameters
    assert not {"budget", "max_steps", "max_cost"} & set(params)
    dbos_world, _ = pair(tmp_path, "dbos")
    with dbos_support.running(sqlite_url):
        with SetWorkflowTimeout(0.3):
            handle = refund_dbos.start(dbos_world, "A-17", 250, "refund-A-17",
                                       approval_timeout=30)
        deadline = time.monotonic() + 20
        while DBOS.get_workflow_status("refund-A-17").status == "PENDING":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert DBOS.get_workflow_status("refund-A-17").status == "CANCELLED"
        assert handle.get_workflow_id() == "refund-A-17"


def test_a_failed_run_continues_on_durable_lite_and_is_forked_on_dbos(tmp_path, sqlite_url):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    engine = engine_at(dl_work)
    assert engine.start(ex.research, dl_world, parity.TOPIC, run_id="r").status == "failed"
    assert engine.start(ex.research, dl_world, parity.TOPIC, run_id="r").status == "completed"

    dbos_world, _ = pair(tmp_path, "dbos")
    with dbos_support.running(sqlite_url):
        for _ in range(2):                                   # the same id, twice
            with pytest.raises(ToolError), SetWorkflowID("r"):
                research_dbos.research(dbos_world, parity.TOPIC)
        assert parity.ledger(dbos_world)["tool calls"] == 3    # the second call ran nothing
        from durable_lite.engines.dbos.worker import step_id
        with SetWorkflowID("r-fork"):
            forked = DBOS.fork_workflow("r", step_id("r", "drafting"))
        assert forked.get_result(polling_interval_sec=0.05)["topic"] == parity.TOPIC
        assert DBOS.get_workflow_status("r").status == "ERROR"


def test_both_fork_to_a_new_run_only_durable_lite_rewinds_in_place(tmp_path, sqlite_url):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    engine = engine_at(dl_work)
    engine.start(ex.refund, dl_world, "A-17", 40, run_id="refund-A-17", key_notices=True)
    forked = engine.fork("refund-A-17", from_step="email", run_id="refund-A-17-fork")
    assert forked.result["refund_id"] == "R-1" and forked.executed == ["email", "close"]
    assert engine.get("refund-A-17").status == "completed"               # untouched
    assert engine.invalidate("refund-A-17", "email") == ["email", "close"]  # and a rewind
    again = engine.resume("refund-A-17")
    assert again.run_id == "refund-A-17" and again.executed == ["email", "close"]
    assert parity.ledger(dl_world)["refunds paid"] == 1

    dbos_world, _ = pair(tmp_path, "dbos")
    with dbos_support.running(sqlite_url):
        with SetWorkflowID("refund-A-17"):
            refund_dbos.refund(dbos_world, "A-17", 40, key_notices=True)
        from durable_lite.engines.dbos.worker import step_id
        forked = DBOS.fork_workflow("refund-A-17", step_id("refund-A-17", "email"))
        assert forked.get_workflow_id() != "refund-A-17"
        assert forked.get_result(polling_interval_sec=0.05)["refund_id"] == "R-1"
        assert DBOS.get_workflow_status("refund-A-17").status == "SUCCESS"   # untouched
    assert parity.ledger(dbos_world)["refunds paid"] == 1


def test_a_waiting_run_parks_on_durable_lite_and_blocks_on_dbos(tmp_path, sqlite_url):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    run = refund_durable_lite.start(engine_at(dl_work), dl_world, "A-17", 250, "refund-A-17")
    assert run.status == "waiting" and run.waiting_for == refund_durable_lite.APPROVAL

    dbos_world, _ = pair(tmp_path, "dbos")
    with dbos_support.running(sqlite_url):
        handle = refund_dbos.start(dbos_world, "A-17", 250, "refund-A-17", approval_timeout=30,
                                   cooling_off=0.01)
        time.sleep(0.3)
        assert DBOS.get_workflow_status("refund-A-17").status == "PENDING"
        refund_dbos.approve("refund-A-17")
        assert handle.get_result(polling_interval_sec=0.05)["refunded"]


def test_a_none_payload_is_refused_by_durable_lite_and_reads_as_a_timeout_on_dbos(tmp_path,
                                                                                  sqlite_url):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    engine = engine_at(dl_work)
    refund_durable_lite.start(engine, dl_world, "A-17", 250, "refund-A-17")
    with pytest.raises(ValueError, match="cannot be None"):
        engine.signal("refund-A-17", refund_durable_lite.APPROVAL, None)

    dbos_world, _ = pair(tmp_path, "dbos")
    with dbos_support.running(sqlite_url):
        handle = refund_dbos.start(dbos_world, "A-17", 250, "refund-A-17", approval_timeout=30)
        DBOS.send("refund-A-17", None, refund_dbos.APPROVAL)     # someone answered...
        started = time.monotonic()
        result = handle.get_result(polling_interval_sec=0.05)
    assert time.monotonic() - started < 20                        # ...long before the deadline
    assert result["refunded"] is False                            # and it read as "too late"


def test_durable_lite_waits_on_an_injected_clock_dbos_on_the_wall_clock(tmp_path, sqlite_url):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    started = time.monotonic()
    outcome = parity.approval_durable_lite(False, dl_world, dl_work)     # a two-day deadline
    assert outcome["result"]["refunded"] is False
    assert time.monotonic() - started < 5

    from dbos import DBOSConfig
    assert not {"clock", "time_source"} & set(DBOSConfig.__annotations__)
    dbos_world, _ = pair(tmp_path, "dbos")
    started = time.monotonic()
    outcome = parity.approval_dbos(False, dbos_world, sqlite_url, timeout=0.5)
    assert outcome["result"]["refunded"] is False
    assert time.monotonic() - started >= 0.5                       # it really waited


def test_a_result_json_cannot_hold_fails_on_durable_lite_and_is_pickled_by_dbos(tmp_path,
                                                                                sqlite_url):
    @dl.workflow("parity-returns-a-set")
    def returns_a_set(ctx):
        return ctx.step("tags", lambda: {"refund", "urgent"})

    _, dl_work = pair(tmp_path, "durable_lite")
    run = engine_at(dl_work).start(returns_a_set, run_id="tags")
    assert run.status == "failed" and "tags" in run.error and "JSON" in run.error

    @DBOS.step(name="tags")
    def tags():
        return {"refund", "urgent"}

    @DBOS.workflow(name="parity_returns_a_set")
    def dbos_returns_a_set():
        return tags()

    with dbos_support.running(sqlite_url):
        assert dbos_returns_a_set() == {"refund", "urgent"}


def test_dbos_recovers_only_on_the_same_application_version(tmp_path, sqlite_url):
    dl_world, dl_work = pair(tmp_path, "durable_lite")
    run = engine_at(dl_work).start(ex.refund, dl_world, "A-17", 40, run_id="refund-A-17")
    assert (run.workflow, run.version) == ("refund", 1)           # pinned per workflow

    dbos_world, _ = pair(tmp_path, "dbos")
    dbos_faults.arm(CrashAt("deliver", "after_checkpoint"))
    try:
        dbos_support.launch(sqlite_url)
        with pytest.raises(dl.Crash), SetWorkflowID("delivery-1"):
            research_dbos.deliver(dbos_world, "the report")
        dbos_support.launch(sqlite_url, app_version="course-2")    # new code, new version
        time.sleep(1.5)
        assert DBOS.get_workflow_status("delivery-1").status == "PENDING"   # not recovered
        dbos_support.launch(sqlite_url)                             # the version it began on
        assert DBOS.retrieve_workflow("delivery-1").get_result(polling_interval_sec=0.05)
    finally:
        dbos_faults.disarm()
    assert parity.ledger(dbos_world)["deliveries"] == 1


def test_both_engines_queue_with_limits_and_only_dbos_also_limits_each_worker(tmp_path, sqlite_url):
    """Both keep queues in their database, limited across workers, per key and per period.
    DBOS also caps each worker process (worker_concurrency); a durable_lite worker takes
    one run at a time in each thread that calls engine.work."""
    limits = set(inspect.signature(dl.Queue).parameters)
    assert {"concurrency", "per_key", "rate"} <= limits and "worker_concurrency" not in limits
    params = inspect.signature(DBOS.register_queue).parameters
    assert {"worker_concurrency", "global_concurrency", "partition_concurrency",
            "limiter"} <= set(params)

    dl_world, dl_work = pair(tmp_path, "durable_lite")
    engine = engine_at(dl_work)
    refunds = dl.Queue("refunds", concurrency=1, rate=(10, 60.0))
    for order in ("A-17", "B-42", "C-7"):
        engine.enqueue(refunds, ex.refund, dl_world, order, 40, run_id=f"refund-{order}")
    assert [r.status for r in engine.work(refunds)] == ["completed"] * 3
    assert parity.ledger(dl_world)["refunds paid"] == 3

    dbos_world, _ = pair(tmp_path, "dbos")
    with dbos_support.running(sqlite_url):
        queue = refund_dbos.register_queue()
        assert (queue.worker_concurrency, queue.limiter) == (1, {"limit": 10, "period": 60.0})
        handles = [refund_dbos.enqueue(dbos_world, order, 40, f"refund-{order}", cooling_off=0.01)
                   for order in ("A-17", "B-42", "C-7")]
        assert [h.get_result(polling_interval_sec=0.05)["refunded"] for h in handles] == [True] * 3
    assert parity.ledger(dbos_world)["refunds paid"] == 3


# the registry is complete ----------------------------------------------------------------------
def _tests_in(filename):
    with open(os.path.join(TESTS_DIR, filename), encoding="utf-8") as f:
        return set(re.findall(r"^def (test_\w+)", f.read(), re.M))


def test_every_difference_has_evidence_and_every_difference_test_has_an_entry():
    named = set()
    for d in differences.DIFFERENCES:
        filename, test = d.evidence.split("::")
        assert test in _tests_in(filename), f"{d.key}: no {d.evidence}"
        named.add((filename, test))
        assert d.topic and d.durable_lite and d.dbos
    here = {("test_parity_differences.py", t) for t in _tests_in("test_parity_differences.py")
            if not t.startswith("test_every_") and not t.startswith("test_the_")}
    assert here <= named, f"difference tests without an entry: {sorted(here - named)}"
    assert len({d.key for d in differences.DIFFERENCES}) == len(differences.DIFFERENCES)


def test_the_differences_table_lists_every_entry():
    table = differences.table()
    assert list(table.columns) == ["topic", "durable_lite", "DBOS"]
    assert len(table) == len(differences.DIFFERENCES)


# the port and the concept map -------------------------------------------------------------------
def test_the_port_table_quotes_lines_that_are_really_in_the_two_modules():
    sources = (inspect.getsource(refund_durable_lite), inspect.getsource(refund_dbos))
    for concept, *lines in concepts.PORT:
        for line, source in zip(lines, sources):
            for part in line.split("  ...  "):
                assert part in source, f"{concept}: {part!r} is not in the module"


def test_the_concept_map_has_every_cell_and_says_which_it_could_not_confirm():
    for engine in concepts.ENGINES:
        assert set(concepts.MAP[engine]) == set(concepts.CONCEPTS), engine
        for concept, cell in concepts.MAP[engine].items():
            assert cell.name
            assert cell.confirmed == (not cell.name.startswith(concepts.UNCONFIRMED))
    assert concepts.concept_map().shape == (len(concepts.CONCEPTS), len(concepts.ENGINES))
    assert ("durable_lite", "step") not in concepts.unconfirmed()


def test_the_concept_maps_durable_lite_and_dbos_names_exist_in_the_code():
    owners = {"ctx": dl.Context, "engine": dl.Engine, "dl": dl, "DBOS": DBOS}
    checked = 0
    for engine in ("durable_lite", "DBOS"):
        for cell in concepts.MAP[engine].values():
            for owner, attr in re.findall(r"\b(ctx|engine|dl|DBOS)\.(\w+)", cell.name):
                assert hasattr(owners[owner], attr), f"{owner}.{attr} in {cell.name!r}"
                checked += 1
    assert checked >= 12
