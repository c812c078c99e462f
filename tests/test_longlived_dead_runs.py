"""Runs that would jam recovery for everyone, and how recover() gets past them.

- A wait or sleep must have a finite deadline, checked when the workflow asks for it: a
  NaN deadline once made every later recover() raise.
- A poison run — one whose execution is interrupted again and again at the same point
  (its step raises SystemExit, or kills its worker) — is declared dead after
  `max_interruptions`, with the reason in get(), the events and the history; recover()
  goes on with the other runs.
- A diverged run gets a status of its own, so recover() stops re-running it.
"""

import json
import signal
import subprocess

from core_support import *  # noqa: F401,F403
from core_support import python_path

from durable_lite.errors import NonDeterminismError
from durable_lite.store.records import RunRecord


# deadlines -------------------------------------------------------------------------------------

@dl.workflow("dead-simple")
def simple(ctx, value):
    return ctx.step("only", lambda: value)


def interrupted(engine, wf, *args, run_id):
    """A run whose worker died before its first step."""
    with pytest.raises(dl.Crash):
        dl.Engine(engine.store, engine.clock, crash_at=dl.faults.CrashAt("only", "before_step")).start(
            wf, *args, run_id=run_id)


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -1, 0, None, "60", True],
                         ids=["nan", "inf", "negative", "zero", "none", "text", "bool"])
def test_a_wait_needs_a_finite_positive_timeout_and_a_bad_one_blocks_no_one(eng, timeout):
    @dl.workflow("dead-bad-wait")
    def wf(ctx):
        ctx.step("before", lambda: 1)
        return ctx.wait_for_signal("approved", timeout=timeout)

    run = eng.start(wf, run_id="bad-wait")
    assert run.status == "failed"
    assert "'bad-wait'" in run.error and "wait_for_signal('approved')" in run.error
    assert "timeout" in run.error and "no deadline" in run.error
    interrupted(eng, simple, 5, run_id="other")
    assert [(r.run_id, r.status) for r in eng.recover()] == [("other", "completed")]
    assert eng.recover() == []


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -5, None, "1"],
                         ids=["nan", "inf", "negative", "none", "text"])
def test_a_sleep_needs_a_finite_duration(eng, seconds):
    @dl.workflow("dead-bad-sleep")
    def wf(ctx):
        ctx.sleep(seconds, name="nap")
        return "woke"

    run = eng.start(wf, run_id="bad-sleep")
    assert run.status == "failed" and "'bad-sleep'" in run.error and "sleep('nap')" in run.error
    assert eng.store.load_entries("bad-sleep") == []


def test_a_parked_run_recorded_without_a_wake_time_does_not_stop_recover(eng, clock):
    """A store written before deadlines were checked may hold a waiting run with no wake
    time. recover() treats it as due, and its fate does not affect the other runs."""
    eng.store.create_run(RunRecord("legacy", "dead-simple", 1, "[7]", "{}", dl.WAITING, clock(),
                                   clock(), waiting_for="approved", wake_at=None))
    interrupted(eng, simple, 5, run_id="other")
    got = {r.run_id: (r.status, r.result) for r in eng.recover()}
    assert got["other"] == ("completed", 5)
    assert "legacy" in got and eng.recover() == []


# poison runs, in this process -------------------------------------------------------------------

POISON = {"armed": True}


@pytest.fixture(autouse=True)
def arm_poison():
    POISON["armed"] = True


def explode(kind):
    if POISON["armed"]:
        raise {"SystemExit": SystemExit(3), "KeyboardInterrupt": KeyboardInterrupt(),
               "GeneratorExit": GeneratorExit()}[kind]
    return "defused"


@dl.workflow("dead-poison")
def poison(ctx, kind):
    ctx.step("lookup", lambda: "order")
    return ctx.step("explode", explode, kind)


@pytest.mark.parametrize("kind", ["SystemExit", "KeyboardInterrupt", "GeneratorExit"])
def test_a_run_interrupted_again_and_again_is_declared_dead_and_recover_goes_on(eng, clock, kind):
    exc = {"SystemExit": SystemExit, "KeyboardInterrupt": KeyboardInterrupt,
           "GeneratorExit": GeneratorExit}[kind]
    engine = dl.Engine(eng.store, clock, max_interruptions=3)
    with pytest.raises(exc):
        engine.start(poison, kind, run_id="poison")           # interruption 1
    clock.advance(1)                                           # so recover() meets it first
    interrupted(eng, simple, 1, run_id="behind-1")             # runs behind it, also unfinished
    interrupted(eng, simple, 2, run_id="behind-2")
    for _ in range(2):                                         # interruptions 2 and 3
        with pytest.raises(exc):
            engine.recover()
    got = {r.run_id: r.status for r in engine.recover()}       # the 4th take-up declares it dead
    assert got == {"poison": dl.DEAD, "behind-1": "completed", "behind-2": "completed"}

    run = engine.get("poison")
    assert run.status == "dead" == dl.DEAD and run.done
    assert "3 times in a row" in run.error and "position 1" in run.error
    assert "'explode'" in run.error and kind in run.error and "resume" in run.error
    kinds = [e.kind for e in engine.events("poison")]
    assert kinds.count("interrupted") == 3 and kinds[-1] == "dead"
    (row,) = [h for h in engine.history("poison") if h["step"] == "explode"]
    assert row["status"] == "incomplete" and row["attempts"] == 3 and kind in row["error"]

    before = len(engine.events("poison"))
    for _ in range(20):
        assert engine.recover() == []                          # left alone from now on
    assert len(engine.events("poison")) == before

    POISON["armed"] = False                                    # the cause is fixed
    revived = engine.resume("poison")                          # an explicit resume tries again
    assert revived.status == "completed" and revived.result == "defused"


@dl.workflow("dead-progress")
def progress(ctx):
    return [ctx.step(f"s{i}", lambda i=i: i) for i in range(6)]


def test_interruptions_that_move_the_run_forward_never_make_it_dead(eng, clock):
    """Six interruptions, each after a new checkpoint: one at each position, so a limit
    of two is never reached."""
    crashes = [dl.faults.CrashAt(f"s{i}", "after_checkpoint") for i in range(6)]
    engine = dl.Engine(eng.store, clock, max_interruptions=2, crash_at=crashes)
    with pytest.raises(dl.Crash):
        engine.start(progress, run_id="forward")
    for _ in range(5):
        with pytest.raises(dl.Crash):
            engine.resume("forward")
    run = engine.resume("forward")
    assert run.status == "completed" and run.result == list(range(6))
    assert [e.kind for e in engine.events("forward")].count("interrupted") == 6


def test_the_limit_is_a_positive_whole_number_or_none_for_no_limit(eng, clock):
    for bad in (0, -1, 1.5, "3", True):
        with pytest.raises(ValueError, match="max_interruptions"):
            dl.Engine(eng.store, max_interruptions=bad)
    engine = dl.Engine(eng.store, clock, max_interruptions=None)
    with pytest.raises(SystemExit):
        engine.start(poison, "SystemExit", run_id="endless")
    for _ in range(12):
        with pytest.raises(SystemExit):
            engine.resume("endless")
    assert engine.get("endless").status == "running"


# poison runs, with real processes -----------------------------------------------------------------

WORKER = """
import json, sys
import durable_lite as dl
import core_workflows             # registers the workflow this worker recovers
engine = dl.Engine(dl.SQLiteStore(sys.argv[1]), max_interruptions=3)
print(json.dumps({r.run_id: r.status for r in engine.recover()}))
"""


def test_a_run_that_kills_every_worker_is_dead_after_the_limit_and_the_rest_complete(store_path, stores):
    store = stores(store_path)
    now = dl.SystemClock()()
    for i, (run_id, kill) in enumerate((("poison", True), ("ok-1", False), ("ok-2", False))):
        store.create_run(RunRecord(run_id, "core-kills-its-worker", 1, json.dumps([kill]), "{}",
                                   dl.RUNNING, now + i, now + i))       # the poison run first
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path()))
    codes, report = [], None
    for _ in range(6):
        worker = subprocess.run([sys.executable, "-c", WORKER, store_path], capture_output=True,
                                text=True, timeout=60, env=env)
        codes.append(worker.returncode)
        if worker.returncode == 0:
            report = json.loads(worker.stdout.strip().splitlines()[-1])
            break
        assert worker.returncode == -signal.SIGKILL, worker.stderr[-2000:]
    assert codes == [-signal.SIGKILL] * 3 + [0]        # three workers died, the fourth went on
    assert report == {"poison": "dead", "ok-1": "completed", "ok-2": "completed"}
    record = store.get_run("poison")
    assert record.status == "dead" and "3 times in a row" in record.error
    assert "position 1" in record.error and "'setup'" in record.error
    kinds = [e.kind for e in store.events("poison")]
    assert kinds.count("interrupted") == 3 and kinds[-1] == "dead"


# diverged runs ---------------------------------------------------------------------------------------

BRANCH = {"name": "page-on-call"}


@dl.workflow("dead-diverge")
def diverge(ctx):
    ctx.step("classify", lambda: "urgent")
    ctx.step(BRANCH["name"], lambda: "sent")
    return ctx.step("close", lambda: "closed")


@pytest.fixture
def diverged(eng, clock):
    BRANCH["name"] = "page-on-call"
    with pytest.raises(dl.Crash):
        dl.Engine(eng.store, clock, crash_at=dl.faults.CrashAt("close", "before_step")).start(
            diverge, run_id="div")
    BRANCH["name"] = "queue-for-morning"          # the code changed under the running run
    with pytest.raises(NonDeterminismError):
        eng.resume("div")
    yield eng
    BRANCH["name"] = "page-on-call"


def test_a_diverged_run_gets_its_own_status_and_recover_stops_retrying_it(diverged):
    eng = diverged
    run = eng.get("div")
    assert run.status == "diverged" == dl.DIVERGED and run.done
    assert "position 1" in run.error and "'page-on-call'" in run.error
    before = len(eng.events("div"))
    for _ in range(50):
        assert eng.recover() == []
    assert len(eng.events("div")) == before               # 1,000 recovers once added 2,001
    assert [e.kind for e in eng.events("div")].count("diverged") == 1


def test_a_diverged_run_continues_when_its_code_matches_its_history_again(diverged):
    BRANCH["name"] = "page-on-call"                       # the change was rolled back
    run = diverged.resume("div")
    assert run.status == "completed" and run.replayed == ["classify", "page-on-call"]


def test_invalidating_where_a_run_diverged_lets_the_new_code_take_over(diverged):
    assert diverged.invalidate("div", "page-on-call") == ["page-on-call"]
    (run,) = diverged.recover()                           # due again: recover() finishes it
    assert run.status == "completed" and run.executed == ["queue-for-morning", "close"]


def test_a_workflow_that_ends_short_of_its_history_is_diverged_too(eng):
    steps = {"n": 2}

    @dl.workflow("dead-shorter")
    def shorter(ctx):
        for i in range(steps["n"]):
            ctx.step("s", lambda i=i: i)
        return ctx.wait_for_signal("go", timeout=60)

    eng.start(shorter, run_id="short")
    steps["n"] = 1
    with pytest.raises(NonDeterminismError):
        eng.resume("short")
    assert eng.get("short").status == "diverged" and eng.recover() == []
