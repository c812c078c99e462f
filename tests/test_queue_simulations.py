"""The pieces lesson 11 simulates with: a model provider with a rate limit (dl.sim), a clock a
crowd of threads shares (simtime), and the lesson's scenarios (storm.py)."""

import threading

from core_support import *  # noqa: F401,F403

from durable_lite import storm
from durable_lite.sim import ModelProvider, RateLimited, ToolError
from durable_lite.simtime import VirtualClock


# the provider -------------------------------------------------------------------------------

def test_the_provider_answers_its_limit_each_second_and_refuses_the_rest(tmp_path):
    clock = dl.FakeClock(1000.0)
    provider = ModelProvider(str(tmp_path / "p.db"), limit=3, clock=clock, refusal_seconds=0.0,
                             first_token=0.0, tokens_per_second=1e9)
    answers, refusals = [], []
    for i in range(5):
        try:
            answers.append(provider.complete("one two three four", caller=f"r{i}", tenant="acme"))
        except RateLimited as exc:
            refusals.append(exc)
    assert len(answers) == 3 and len(refusals) == 2
    assert isinstance(refusals[0], ToolError) and refusals[0].status == 429
    assert refusals[0].retry_after == pytest.approx(1.0)
    assert answers[0]["input_tokens"] == 4 and answers[0]["tokens"] > 4
    clock.advance(1.5)
    provider.complete("again")                           # a new second: answered
    clock.advance(2)
    provider.complete("later")
    rows = provider.per_second()
    assert [(r["second"], r["requests"], r["answered"], r["refused"]) for r in rows] == [
        (0, 5, 3, 2), (1, 1, 1, 0), (2, 0, 0, 0), (3, 1, 1, 0)]
    assert rows[0]["refused_input_tokens"] == 8 and rows[2]["tokens"] == 0
    totals = provider.totals()
    assert (totals["requests"], totals["refused"], totals["peak_requests_per_second"]) == (7, 2, 5)
    assert totals["tokens"] == sum(a["tokens"] for a in answers) + rows[1]["tokens"] + rows[3]["tokens"]
    again = ModelProvider(str(tmp_path / "p.db"), limit=3, clock=clock)   # another process
    assert again.totals() == totals and len(again.requests()) == 7
    with pytest.raises(ValueError, match="limit"):
        ModelProvider(str(tmp_path / "q.db"), limit=0)


def test_an_answer_takes_time_on_the_providers_clock(tmp_path):
    clock = dl.FakeClock(0.0)
    provider = ModelProvider(str(tmp_path / "p.db"), limit=1, clock=clock, first_token=0.5,
                             tokens_per_second=100.0, refusal_seconds=0.25)
    answer = provider.complete("hello")
    assert clock() == pytest.approx(0.5 + answer["output_tokens"] / 100)
    quick = ModelProvider(str(tmp_path / "q.db"), limit=1, clock=clock, first_token=0.0,
                          tokens_per_second=1e12, refusal_seconds=0.25)
    clock.t = 10.0
    quick.complete("first in this second")
    with pytest.raises(RateLimited):
        quick.complete("second in this second")
    assert clock() == pytest.approx(10.25)


# the shared clock ------------------------------------------------------------------------------

def test_threads_on_a_virtual_clock_wait_in_simulated_time_in_a_fixed_order():
    def simulate():
        clock = VirtualClock(0.0)
        seen = []

        def worker(name, pause, times):
            for _ in range(times):
                clock.sleep(pause)
                seen.append((clock(), name))

        for name, pause in (("slow", 3.0), ("fast", 1.0), ("mid", 2.0)):
            clock.spawn(worker, name, pause, 3)
        clock.run()
        return seen, clock()

    seen, end = simulate()
    assert end == 9.0
    assert seen[:4] == [(1.0, "fast"), (2.0, "mid"), (2.0, "fast"), (3.0, "slow")]   # ties: who slept first
    assert [t for t, _ in seen] == sorted(t for t, _ in seen)
    assert simulate() == (seen, end)                      # the same, every time


def test_a_virtual_clock_reports_errors_jams_and_plain_use():
    clock = VirtualClock(0.0)
    clock.spawn(lambda: clock.sleep(1) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        clock.run()
    clock.sleep(5)                                         # the notebook's own thread: a FakeClock
    assert clock() == 6.0
    jam = threading.Event()
    stuck = VirtualClock(0.0, timeout=0.3)
    stuck.spawn(jam.wait)                                  # blocked on something else
    with pytest.raises(RuntimeError, match="blocked on something other than this clock"):
        stuck.run()
    jam.set()


# the lesson's scenarios --------------------------------------------------------------------------

def test_lockstep_retries_come_in_waves_and_a_queue_keeps_to_the_limit(tmp_path):
    folder = str(tmp_path)
    lockstep = storm.burst("lockstep", folder, runs=100, limit=10)
    waves = [r["second"] for r in lockstep.per_second if r["requests"]]
    assert waves == [0, 1, 3, 7, 15, 31]                   # 1, 2, 4, 8, 16 s apart: lockstep
    assert lockstep.statuses == {"completed": 60, "failed": 40}
    jitter = storm.burst("jitter", folder, runs=100, limit=10)
    assert jitter.statuses.get("completed", 0) > 60
    queued = storm.burst("queue", folder, runs=100, limit=10, workers=40)
    assert queued.statuses == {"completed": 100}
    assert queued.provider["refused"] == 0 and queued.provider["peak_requests_per_second"] == 10
    with pytest.raises(ValueError, match="mode"):
        storm.burst("politely", folder)


def test_keys_let_a_small_tenant_through_a_flood(tmp_path):
    folder = str(tmp_path)
    fifo = storm.flood(dl.Queue("llm", concurrency=6), folder, keys=False, a_runs=60, label="fifo")
    keys = storm.flood(dl.Queue("llm", concurrency=6), folder, a_runs=60, label="keys")
    assert len(fifo.finish_times("B")) == len(keys.finish_times("B")) == 10
    assert max(keys.finish_times("B")) * 2 < max(fifo.finish_times("B"))
    assert min(fifo.finish_times("B")) > max(fifo.finish_times("A")) - 15   # behind the flood


def test_a_poison_document_kills_workers_until_it_is_dead_and_the_rest_are_parsed(tmp_path):
    folder = str(tmp_path / "world")
    store_path = str(tmp_path / "docs.db")
    engine = dl.Engine(dl.SQLiteStore(store_path))
    docs = dl.Queue("docs", concurrency=1)
    names = ["a.pdf", "b.pdf", storm.POISON, "c.pdf"]
    for name in names:
        engine.enqueue(docs, storm.parse_document, folder, name, run_id=name)
    exits = storm.run_workers(store_path, docs)
    assert [e.killed for e in exits] == [True] * 5 + [False]    # max_interruptions=5
    assert {r.run_id: r.status for r in engine.runs()} == {
        "a.pdf": "completed", "b.pdf": "completed", storm.POISON: "dead", "c.pdf": "completed"}
    assert dl.sim.World(folder).ledger("parsed").count() == 3
