"""The simulated world (dl.sim), the naive runner (dl.naive) and the fault tools
(dl.faults): the pieces the lessons and the crash tests stand on."""

import threading

from core_support import *  # noqa: F401,F403

from durable_lite import examples as ex
from durable_lite.faults import CRASH_POINTS, CrashAt, CrashPlan, every_crash_point


def test_every_service_keeps_its_ledger_in_its_own_file_and_remembers_it(folder):
    world = dl.sim.World(folder)
    world.payments.refund("A-1", 10, idempotency_key="k1")
    world.careless.refund("A-1", 10)
    world.mailer.send("ana@example.com", "hi")
    world.tickets.close("T-1")
    world.llm.complete("hello")
    world.tools.call("search", "x")
    world.close()
    assert sorted(f for f in os.listdir(folder) if f.endswith(".db")) == [
        "careless_payments.db", "llm.db", "mail.db", "payments.db", "tickets.db", "tools.db"]
    again = dl.sim.World(folder)                       # a fresh process would see the same
    assert again.summary() == {"refunds": 2, "emails": 1, "tickets_closed": 1, "llm_calls": 1,
                               "tool_calls": 1}


def test_the_honest_provider_honours_keys_and_the_careless_one_does_not(folder):
    world = dl.sim.World(folder)
    first = world.payments.refund("A-1", 10, idempotency_key="k")
    again = world.payments.refund("A-1", 10, idempotency_key="k")
    assert first["refund_id"] == again["refund_id"] and again["repeat"] and not first["repeat"]
    assert world.payments.count() == 1 and world.payments.calls() == 2
    world.careless.refund("A-1", 10, idempotency_key="k")
    world.careless.refund("A-1", 10, idempotency_key="k")
    assert world.careless.count() == 2 and world.careless.total("A-1") == 20


def test_a_key_used_by_two_callers_at_once_still_pays_once(folder):
    worlds = [dl.sim.World(folder) for _ in range(4)]         # four connections, one file
    barrier = threading.Barrier(4)
    results = []

    def pay(world):
        barrier.wait()
        results.append(world.payments.refund("A-1", 10, idempotency_key="same")["refund_id"])

    threads = [threading.Thread(target=pay, args=(w,)) for w in worlds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and worlds[0].payments.count() == 1


def test_mailer_and_desk_dedupe_only_when_given_a_key(folder):
    world = dl.sim.World(folder)
    world.mailer.send("a@example.com", "s")
    world.mailer.send("a@example.com", "s")
    world.mailer.send("a@example.com", "s", idempotency_key="m")
    assert world.mailer.send("a@example.com", "s", idempotency_key="m")["repeat"]
    assert world.mailer.count() == 3
    world.tickets.close("T-1")
    world.tickets.close("T-1")
    world.tickets.close("T-2", idempotency_key="c")
    world.tickets.close("T-2", idempotency_key="c")
    assert world.tickets.closes("T-1") == 2 and world.tickets.closes("T-2") == 1


def test_the_fake_llm_answers_differently_each_call_reports_tokens_and_cost_and_is_seeded(tmp_path):
    answers = []
    for n in range(2):
        llm = dl.sim.World(str(tmp_path / f"w{n}"), seed=5).llm
        answers.append([llm.complete("summarise the incident") for _ in range(3)])
    first = answers[0]
    assert len({a["text"] for a in first}) == 3                      # a new answer per call
    assert [a["generation"] for a in first] == [1, 2, 3]
    assert all(a["tokens"] > 0 and a["cost"] > 0 for a in first)
    assert answers[0] == answers[1]                                   # same seed, same story
    other = dl.sim.World(str(tmp_path / "other"), seed=6).llm.complete("summarise the incident")
    assert other["text"] != first[0]["text"]
    plan = dl.sim.World(str(tmp_path / "w0"), seed=5).llm.plan("ship it", n_tasks=3)
    assert len(plan["tasks"]) == 3 and plan["cost"] > 0


def test_the_flaky_tool_fails_at_its_rate_deterministically(tmp_path):
    outcomes = []
    for n in range(2):
        tools = dl.sim.World(str(tmp_path / f"w{n}"), seed=1, failure_rate=0.3).tools
        run = []
        for _ in range(200):
            try:
                tools.call("search", "q")
                run.append(True)
            except dl.sim.ToolError as err:
                assert "search failed" in str(err)
                run.append(False)
        outcomes.append(run)
    failures = outcomes[0].count(False)
    assert 40 <= failures <= 80                                       # about 30 % of 200
    assert outcomes[0] == outcomes[1]


def test_the_naive_runner_starts_over_after_a_crash_and_repeats_every_effect(folder):
    result = dl.naive.NaiveRunner(max_attempts=3, crash_at=CrashAt("email", "after_effect")).run(
        ex.refund, folder, "A-17", 40, use_key=False, careless=True)
    world = ex.world_at(folder)
    assert result.status == "completed" and result.attempts == 2
    assert "Crash" in result.errors[0]
    assert world.careless.count() == 2 and world.mailer.count() == 2 and world.tickets.closes() == 1
    assert result.step_executions == 4 + 3


def test_the_naive_runner_gives_up_after_its_attempts(folder):
    @dl.workflow("core-always-fails")
    def always(ctx):
        ctx.step("boom", lambda: 1 / 0)

    result = dl.naive.run(always, max_attempts=2)
    assert result.status == "failed" and len(result.errors) == 2


def test_crash_points_and_plans():
    assert CRASH_POINTS == ("before_step", "after_effect", "after_checkpoint")
    points = every_crash_point(["a", "b"])
    assert [(c.step, c.when) for c in points] == [(s, w) for s in "ab" for w in CRASH_POINTS]
    with pytest.raises(ValueError, match="crash point"):
        CrashAt("a", "during_lunch")
    plan = CrashPlan([CrashAt("a", "before_step")])
    plan.check("a", 2, "before_step")                   # another occurrence: no crash
    with pytest.raises(dl.Crash, match="'a'"):
        plan.check("a", 1, "before_step")
    plan.check("a", 1, "before_step")                   # each crash fires once
    assert not plan


def test_an_in_process_crash_cannot_be_swallowed_by_except_exception(engine, clock):
    @dl.workflow("core-swallow-crash")
    def wf(ctx):
        try:
            ctx.step("a", lambda: 1)
        except Exception:
            return "swallowed"
        return "done"

    with pytest.raises(dl.Crash):
        dl.Engine(engine.store, clock, crash_at=CrashAt("a", "after_effect")).start(wf, run_id="c")
    assert engine.resume("c").result == "done"


def test_one_world_can_be_called_from_several_threads_at_once(tmp_path):
    import threading

    world = dl.sim.World(str(tmp_path / "threads"))
    errors = []

    def send_many(i):
        try:
            for j in range(25):
                world.mailer.send(f"user{i}@example.com", f"note {j}")
                world.llm.complete(f"prompt {i} {j}")
        except Exception as exc:          # collected: a thread's error must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=send_many, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert world.mailer.count() == 100 and world.llm.calls() == 100
    world.close()


def test_threads_open_and_forget_worlds_side_by_side(tmp_path):
    """A grader runs checks on threads: one opening its world while another forgets a
    folder's must not see the table change under it ("dictionary changed size")."""
    import threading
    from durable_lite import sim

    errors = []

    def churn(n):
        try:
            for i in range(300):
                folder = tmp_path / f"t{n}" / f"w{i % 5}"
                sim.world_at(folder)
                sim.forget_worlds(tmp_path / f"t{n}")
        except Exception as exc:          # noqa: BLE001 - collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    sim.forget_worlds(tmp_path)


def _tables_and_mode(path):
    import sqlite3
    db = sqlite3.connect(path)
    try:
        return (sorted(db.execute("SELECT type, name, sql FROM sqlite_master")),
                db.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        db.close()


def test_a_new_service_file_made_in_one_step_is_the_file_its_statements_make(tmp_path, monkeypatch):
    """A world's new service file is a copy of an empty one (store/template.py
    create_scripted): built in memory, or before Python 3.11 in a draft file. Made by its
    statements in place instead (no hard links), it is the same file; each way the folder
    holds only the service's files, and the service works."""
    import errno

    from durable_lite.store import template

    def made(way):
        folder = tmp_path / way
        folder.mkdir()
        world = dl.sim.World(str(folder))
        world.payments.refund("A-1", 5, idempotency_key="k")
        world.close()
        files = {f.name for f in folder.iterdir()} - {"payments.db-wal", "payments.db-shm"}
        assert files == {"payments.db"}, (way, files)
        again = dl.sim.World(str(folder))
        assert again.summary()["refunds"] == 1
        again.close()
        return _tables_and_mode(str(folder / "payments.db"))

    monkeypatch.setattr(template, "_SCRIPTED", {})
    copied = made("copied")
    assert dl.sim.Payments.ddl in template._SCRIPTED       # made from the empty file's bytes
    monkeypatch.setattr(template, "_SCRIPTED", {})
    monkeypatch.setattr(template, "IN_MEMORY", False)           # as on a Python before 3.11
    drafted = made("drafted")

    def no_hard_links(source, target):
        raise OSError(errno.EPERM, "this filesystem has no hard links")
    monkeypatch.setattr(template.os, "link", no_hard_links)
    in_place = made("in-place")
    assert copied == drafted == in_place
    assert copied[1] == "wal"
