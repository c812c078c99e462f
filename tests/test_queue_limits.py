"""Durable queues in one process: what enqueue records, how work() honours each limit on
both stores, round-robin between tenants, poison runs in a queue, and what survives a crash.

Many workers at once run on a simtime.VirtualClock: each is a thread that waits in
simulated time, so a rate limit is checked over minutes of simulated traffic in a moment.
"""

import sqlite3
import subprocess

from core_support import *  # noqa: F401,F403
from core_support import python_path

from durable_lite.errors import RunArgumentsMismatch, WorkflowNotRegistered
from durable_lite.queue import QueuedRunError
from durable_lite.simtime import VirtualClock
from durable_lite.store.schema import MIGRATIONS, SCHEMA_1, SCHEMA_VERSION


@dl.workflow("queue-quick")
def quick(ctx, n):
    return ctx.step("only", lambda: n)


@dl.workflow("queue-napper")
def napper(ctx, n, seconds=10):
    """Holds its slot while it sleeps: a run counts against the limits until it finishes."""
    ctx.step("before", lambda: n)
    ctx.sleep(seconds, name="nap")
    return ctx.step("after", lambda: n)


def spans(store, queue):
    """(key, started, finished) of each run the queue started, from the store."""
    out = []
    for q in store.queued_runs(queue):
        record = store.get_run(q.run_id)
        if q.started_at is not None:
            out.append((q.key, q.started_at, record.updated_at))
    return out


def most_at_once(intervals) -> int:
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    now = peak = 0
    for _, delta in edges:          # an end at t frees its slot before a start at t takes it
        now += delta
        peak = max(peak, now)
    return peak


# declaring and enqueueing -----------------------------------------------------------------

def test_a_queue_states_its_limits_and_refuses_nonsense():
    q = dl.Queue("llm", concurrency=8, per_key=4, rate=(20, 1))
    assert repr(q) == "Queue('llm', concurrency=8, per_key=4, rate=(20, 1.0))"
    assert dl.Queue.from_json("llm", q.limits_json()) == q
    assert repr(dl.Queue("plain")) == "Queue('plain')"
    for bad, words in [(dict(concurrency=0), "concurrency"), (dict(concurrency=2.5), "concurrency"),
                       (dict(per_key=True), "per_key"), (dict(concurrency=2, per_key=3), "per_key=3"),
                       (dict(rate=20), "rate"), (dict(rate=(0, 1)), "rate"),
                       (dict(rate=(5, float("inf"))), "rate"), (dict(rate=(5, -1)), "rate")]:
        with pytest.raises(ValueError, match=words):
            dl.Queue("llm", **bad)
    with pytest.raises(ValueError, match="name"):
        dl.Queue("  ")


def test_an_enqueued_run_waits_in_the_store_and_nothing_but_a_worker_starts_it(eng):
    q = dl.Queue("llm", concurrency=1)
    run = eng.enqueue(q, quick, 7, key="acme", run_id="r1")
    assert run.status == "queued" == dl.QUEUED and not run.done
    assert eng.recover() == []                                 # not a run to recover
    with pytest.raises(QueuedRunError, match=r"'r1' waits in queue 'llm' \(key 'acme'\)"):
        eng.resume("r1")
    with pytest.raises(QueuedRunError, match="engine.work"):
        eng.start(quick, 7, run_id="r1")
    again = eng.enqueue(q, quick, 7, key="acme", run_id="r1")   # a caller that retries
    assert again.status == "queued" and len(eng.store.queued_runs("llm")) == 1
    with pytest.raises(RunArgumentsMismatch):
        eng.enqueue(q, quick, 8, key="acme", run_id="r1")
    with pytest.raises(TypeError, match="dl.Queue"):
        eng.enqueue("llm", quick, 7)
    with pytest.raises(TypeError, match="key"):
        eng.enqueue(q, quick, 7, key=17)
    assert [e.kind for e in eng.events("r1")] == ["enqueued"]

    (done,) = eng.work(q)
    assert (done.run_id, done.status, done.result) == ("r1", "completed", 7)
    started = [e for e in eng.events("r1") if e.kind == "started"]
    assert "from queue 'llm' (key 'acme') after 0.00 s" in started[0].detail
    assert eng.enqueue(q, quick, 7, key="acme", run_id="r1").status == "completed"
    assert len(eng.trace("r1").find(kind="execution")) == 1
    assert eng.work(q) == []                                    # nothing left: returns


def test_a_worker_that_lacks_the_code_says_so_and_leaves_the_run_queued(eng):
    q = dl.Queue("llm")
    eng.enqueue(q, quick, 1, run_id="stranger")
    eng.store.update_run("stranger", workflow="not-in-this-process")
    with pytest.raises(WorkflowNotRegistered, match=r"queue 'llm'.*'stranger'.*'not-in-this-process'"):
        eng.work(q)
    assert eng.get("stranger").status == "queued"
    assert [q.state for q in eng.store.queued_runs("llm")] == ["waiting"]


def test_the_limits_live_in_the_store_and_the_latest_declaration_replaces_them(eng):
    eng.enqueue(dl.Queue("llm", concurrency=2), quick, 1, run_id="a")
    assert eng.store.queue_limits("llm") == dl.Queue("llm", concurrency=2).limits_json()
    eng.enqueue(dl.Queue("llm", concurrency=9), quick, 2, run_id="b")    # enqueue keeps them
    assert eng.store.queue_limits("llm") == dl.Queue("llm", concurrency=2).limits_json()
    eng.work(dl.Queue("llm", concurrency=5, rate=(3, 1.0)))               # a worker replaces them
    assert eng.store.queue_limits("llm") == dl.Queue("llm", concurrency=5, rate=(3, 1.0)).limits_json()


# the limits, one worker on a FakeClock ------------------------------------------------------------

def test_a_parked_run_holds_its_slot_until_it_finishes(eng, clock):
    q = dl.Queue("naps", concurrency=2)
    for i in range(6):
        eng.enqueue(q, napper, i, 10, run_id=f"n{i}")
    began = clock()
    runs = eng.work(q)
    assert sorted(r.run_id for r in runs if r.status == "completed") == [f"n{i}" for i in range(6)]
    intervals = [(s, e) for _, s, e in spans(eng.store, "naps")]
    assert most_at_once(intervals) == 2
    assert clock() - began == 30                 # three rounds of two ten-second naps


def test_per_key_caps_each_tenant_and_round_robin_shares_the_starts(eng, clock):
    q = dl.Queue("naps", concurrency=4, per_key=1)
    for i in range(3):
        for tenant in ("acme", "globex"):
            eng.enqueue(q, napper, i, 10, key=tenant, run_id=f"{tenant}-{i}")
    eng.work(q)
    by_key = {}
    for key, start, end in spans(eng.store, "naps"):
        by_key.setdefault(key, []).append((start, end))
    assert {k: most_at_once(v) for k, v in by_key.items()} == {"acme": 1, "globex": 1}
    assert most_at_once([iv for v in by_key.values() for iv in v]) == 2
    turns = [(q.turn, q.key) for q in sorted(eng.store.queued_runs("naps"), key=lambda q: q.turn)]
    assert [k for _, k in turns] == ["acme", "globex"] * 3


def test_a_tenant_with_ten_runs_finishes_while_another_enqueues_a_thousand(eng, clock):
    q = dl.Queue("llm", concurrency=4)
    for i in range(1000):
        eng.enqueue(q, napper, i, 10, key="flood", run_id=f"a-{i:04d}")
    eng.work(q, rounds=3)                        # the flood has the queue to itself for a while
    arrived = clock()
    for i in range(10):
        eng.enqueue(q, napper, i, 10, key="small", run_id=f"b-{i}")
    eng.work(q)
    finished = {r.run_id: r.updated_at for r in eng.store.list_runs()}
    assert all(finished[f"b-{i}"] - arrived <= 60 for i in range(10))    # 6 naps, not 250
    assert max(finished.values()) - arrived >= 2400
    assert sum(r.status == "completed" for r in eng.store.list_runs()) == 1010


def test_without_keys_a_queue_is_first_in_first_out(eng, clock):
    q = dl.Queue("fifo", concurrency=2)
    for i in range(20):
        eng.enqueue(q, napper, i, 10, run_id=f"a-{i:02d}")
    eng.work(q, rounds=1)
    for i in range(3):
        eng.enqueue(q, napper, i, 10, run_id=f"b-{i}")
    eng.work(q)
    order = [q.run_id for q in sorted(eng.store.queued_runs("fifo"), key=lambda q: q.turn)]
    assert order == [f"a-{i:02d}" for i in range(20)] + ["b-0", "b-1", "b-2"]


def test_a_rate_limit_spaces_the_starts_and_an_idle_worker_jumps_the_clock(eng, clock):
    q = dl.Queue("paced", rate=(3, 2.0))
    for i in range(10):
        eng.enqueue(q, quick, i, run_id=f"p{i}")
    began = clock()
    eng.work(q)
    starts = sorted(q.started_at - began for q in eng.store.queued_runs("paced"))
    assert starts == [0, 0, 0, 2, 2, 2, 4, 4, 4, 6]


def test_rounds_bound_the_work_and_a_worker_returns_when_nothing_can_happen(eng, clock):
    q = dl.Queue("llm", concurrency=1)
    for i in range(3):
        eng.enqueue(q, napper, i, 3600, run_id=f"n{i}")
    runs = eng.work(q, rounds=1)
    assert [(r.run_id, r.status) for r in runs] == [("n0", "sleeping")]
    assert [r.status for r in eng.work(q)].count("completed") == 3     # jumps three hours
    @dl.workflow("queue-asks-a-person")
    def asks(ctx):
        return ctx.wait_for_signal("approved", timeout=86400)

    eng.enqueue(q, asks, run_id="ask")
    began = clock()
    assert [(r.run_id, r.status) for r in eng.work(q)] == [("ask", "waiting")]
    assert clock() == began                      # no fast-forward past a person's deadline
    eng.signal("ask", "approved", {"by": "ana"})
    assert [(r.run_id, r.result) for r in eng.work(q)] == [("ask", {"by": "ana"})]
    with pytest.raises(ValueError, match="rounds"):
        eng.work(q, rounds=0)
    with pytest.raises(ValueError, match="poll"):
        eng.work(q, poll=0)
    with pytest.raises(TypeError, match="dl.Queue"):
        eng.work("llm")


# many workers on one simulated clock --------------------------------------------------------

def test_a_rate_limit_holds_over_simulated_time_with_many_workers(any_store, tmp_path):
    clock = VirtualClock()
    began = clock()
    provider = dl.sim.ModelProvider(str(tmp_path / "provider.db"), limit=5, clock=clock)

    @dl.workflow("queue-asks")
    def asks(ctx, i):
        return ctx.step("ask", lambda: provider.complete(f"question {i}", caller=ctx.run_id))

    q = dl.Queue("llm", rate=(5, 1.0))
    web = dl.Engine(any_store, clock, worker="web")
    for i in range(120):
        web.enqueue(q, asks, i, run_id=f"q{i:03d}")
    for w in range(25):                          # enough to keep up with 5 starts a second
        clock.spawn(dl.Engine(any_store, clock, worker=f"w{w}", lease_seconds=600).work, q, poll=0.2)
    clock.run()
    starts = sorted(q.started_at - began for q in any_store.queued_runs("llm"))
    assert len(starts) == 120
    assert all(later - earlier >= 1.0 - 1e-9 for earlier, later in zip(starts, starts[5:]))
    assert starts[-1] < 24.5                     # and the queue did keep to its pace
    totals = provider.totals()
    assert totals["refused"] == 0 and totals["peak_requests_per_second"] == 5
    assert sum(r.status == "completed" for r in any_store.list_runs()) == 120


def test_concurrency_holds_with_many_workers_in_simulated_time(any_store, tmp_path):
    clock = VirtualClock()

    @dl.workflow("queue-slow")
    def slow(ctx, i):
        ctx.step("think", lambda: clock.sleep(3 + i % 4))      # a step that takes time
        return i

    q = dl.Queue("llm", concurrency=5, per_key=2)
    web = dl.Engine(any_store, clock, worker="web")
    for i in range(60):
        web.enqueue(q, slow, i, key=f"t{i % 4}", run_id=f"s{i:02d}")
    for w in range(12):
        clock.spawn(dl.Engine(any_store, clock, worker=f"w{w}", lease_seconds=600).work, q, poll=0.1)
    clock.run()
    rows = spans(any_store, "llm")
    assert most_at_once([(s, e) for _, s, e in rows]) == 5
    for key in ("t0", "t1", "t2", "t3"):
        assert most_at_once([(s, e) for k, s, e in rows if k == key]) == 2


# poison runs and crashes ----------------------------------------------------------------

POISONED = {"armed": True}


@dl.workflow("queue-poison")
def poisoned(ctx, n):
    def explode():
        if POISONED["armed"] and n == 1:
            raise SystemExit(3)               # the process would stop here
        return n
    return ctx.step("work", explode)


def test_a_poison_run_in_a_queue_is_set_aside_as_dead_and_frees_its_slot(eng, clock):
    q = dl.Queue("docs", concurrency=1)
    for i in range(4):
        eng.enqueue(q, poisoned, i, run_id=f"d{i}")
    worker = dl.Engine(eng.store, clock, worker="w", max_interruptions=3)
    deaths = 0
    while True:
        try:
            runs = worker.work(q)
            break
        except SystemExit:
            deaths += 1                          # a supervisor starts the worker again
    assert deaths == 3
    assert {r.run_id: r.status for r in eng.store.list_runs()} == {
        "d0": "completed", "d1": "dead", "d2": "completed", "d3": "completed"}
    assert "3 times in a row" in eng.get("d1").error
    assert {r.run_id for r in runs} == {"d1", "d2", "d3"}


def test_a_crash_between_enqueue_and_start_loses_no_run(store_path, stores, clock, folder):
    child = f"""
import os, signal, sys
sys.path[:0] = {python_path()!r}
import durable_lite as dl
from durable_lite import examples as ex
engine = dl.Engine(dl.SQLiteStore({store_path!r}))
for i in range(3):
    engine.enqueue(dl.Queue("refunds", concurrency=1), ex.refund, {folder!r}, f"A-{{i}}", 10,
                   run_id=f"refund-{{i}}")
os.kill(os.getpid(), signal.SIGKILL)        # the web process dies before any worker ran
"""
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    from durable_lite import examples as ex       # a worker process registers the workflow
    engine = dl.Engine(stores(store_path), clock)
    assert [r.status for r in engine.runs()] == ["queued"] * 3
    runs = engine.work(dl.Queue("refunds", concurrency=1))
    assert [r.status for r in runs] == ["completed"] * 3
    assert dl.sim.World(folder).payments.count() == 3


def test_a_worker_killed_after_taking_a_run_leaves_it_in_its_slot_for_the_next(store_path, stores,
                                                                                 clock, folder):
    from durable_lite import examples as ex
    q = dl.Queue("refunds", concurrency=1)
    store = stores(store_path)
    engine = dl.Engine(store, clock, worker="web")
    for i in range(2):
        engine.enqueue(q, ex.refund, folder, f"A-{i}", 10, run_id=f"refund-{i}")
    dying = dl.Engine(store, clock, worker="dying",
                      crash_at=dl.faults.CrashAt("refund", "after_effect"))
    with pytest.raises(dl.Crash):
        dying.work(q)
    assert store.get_run("refund-0").status == "running"
    assert [q.state for q in store.queued_runs("refunds")] == ["started", "waiting"]
    runs = dl.Engine(store, clock, worker="next").work(q)
    assert [(r.run_id, r.status) for r in runs] == [("refund-0", "completed"), ("refund-1", "completed")]
    assert dl.sim.World(folder).payments.count() == 2      # the key kept the repeat harmless


# the store file ------------------------------------------------------------------------

def test_a_schema_4_file_gains_the_queue_tables_and_keeps_its_runs(tmp_path, stores, clock):
    path = str(tmp_path / "v4.db")
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1 + MIGRATIONS[2] + MIGRATIONS[3] + MIGRATIONS[4])   # what schema 4 made
    db.execute("INSERT INTO runs VALUES ('v4-1', 'queue-quick', 1, '[4]', '{}', 'running', 1.0, "
               "2.0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 2, 0)")
    db.commit()
    db.close()
    store = stores(path)
    assert store.schema_version() == SCHEMA_VERSION == 5
    record = store.get_run("v4-1")
    assert (record.status, record.interruptions, record.taken_up_at) == ("running", 2, 0)
    assert store.queued_runs() == [] and store.queue_limits("llm") is None
    engine = dl.Engine(store, clock)
    assert engine.resume("v4-1").result == 4                   # the old run goes on
    engine.enqueue(dl.Queue("llm"), quick, 5, run_id="new")
    assert [r.result for r in engine.work(dl.Queue("llm"))] == [5]


def test_enqueueing_an_existing_run_into_another_queue_or_key_is_refused_naming_both(eng):
    llm, mail = dl.Queue("llm"), dl.Queue("mail")
    eng.enqueue(llm, quick, 7, key="acme", run_id="r1")
    assert eng.enqueue(llm, quick, 7, key="acme", run_id="r1").status == dl.QUEUED   # idempotent
    for queue, key in ((mail, "acme"), (llm, "globex"), (llm, None)):
        with pytest.raises(RunArgumentsMismatch) as err:
            eng.enqueue(queue, quick, 7, key=key, run_id="r1")
        message = str(err.value)
        assert "'r1'" in message and "'llm'" in message and "'acme'" in message, message
    eng.start(quick, 8, run_id="direct")
    with pytest.raises(RunArgumentsMismatch, match="'direct'.*not in a queue"):
        eng.enqueue(llm, quick, 8, run_id="direct")
    assert [q.queue for q in eng.store.queued_runs()] == ["llm"]


def test_a_lone_worker_takes_up_a_dead_workers_run_once_its_lease_has_lapsed(tmp_path):
    """On a FakeClock a lone worker jumps to the moment the dead worker's lease ends. A lease
    can be taken only once that moment has passed, so the worker must look again just after
    it, not give up there: the run is completed, not left running for good."""
    store = dl.SQLiteStore(tmp_path / "runs.db")
    q = dl.Queue("jobs")
    for start in (1005.0, 1030.0):      # before the lapse, and exactly at it
        run_id = f"left-{int(start)}"
        dl.Engine(store, dl.FakeClock(1000.0)).enqueue(q, quick, 7, run_id=run_id)
        store.take_from_queue("jobs", None, "dead-worker", 1000.0, 1030.0)   # then it died
        assert store.get_run(run_id).status == "running"
        runs = dl.Engine(store, dl.FakeClock(start), worker="w2").work(q)
        assert [(r.run_id, r.status, r.result) for r in runs] == [(run_id, "completed", 7)]
