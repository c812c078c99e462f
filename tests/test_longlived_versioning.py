"""Deploy day: runs parked on approvals meet new code. Versions let them finish on the code
they started with; a patch gate lets one function serve old and new runs; a migration moves
a run's recorded state onto a new version; a fork re-executes a run from one step. Effects
are counted in the simulated world's ledgers, on both stores.
"""

import json
import sqlite3

import versioning_workflows as w
from core_support import *  # noqa: F401,F403

from durable_lite import examples as ex
from durable_lite.keys import derive_key
from durable_lite.sim import World


@pytest.fixture(autouse=True)
def registrations():
    """Each test deploys its own code: the workflows and migrations registered before it
    are back after it, and nothing it registered stays."""
    from durable_lite.versioning import _migrations
    from durable_lite.workflow import _registry
    workflows, migrations = dict(_registry), dict(_migrations)
    yield
    for saved, live in ((workflows, _registry), (migrations, _migrations)):
        live.clear()
        live.update(saved)


@pytest.fixture
def deployed():
    """deployed(edition) registers that edition of vx-approval v1."""
    return w.deploy


def park(eng, folder, orders, prefix="old"):
    """Start one approval per order on the code deployed now; each parks on "approval"."""
    runs = [eng.start(w.NAME, folder, order, 40, run_id=f"{prefix}-{order}") for order in orders]
    assert {r.status for r in runs} == {"waiting"}
    return [r.run_id for r in runs]


def approve(eng, run_ids):
    for run_id in run_ids:
        eng.signal(run_id, "approval", {"approved": True})
    return {r.run_id: r for r in eng.recover()}


def ledger(folder):
    world = World(folder)
    fraud = world.ledger(w.FRAUD).records()
    return {"refunds": world.payments.count(), "asks": world.mailer.count(w.APPROVER),
            "fraud_checks": sorted(r["detail"]["order"] for r in fraud)}


# versions ---------------------------------------------------------------------------------
def test_parked_v1_runs_survive_a_v2_with_a_new_step_and_finish_on_v1(eng, folder, deployed):
    deployed("original")
    old = park(eng, folder, ["A-1", "A-2", "A-3"])

    @dl.workflow(w.NAME, version=2)                 # the deploy: v2 adds the fraud check
    def approval_v2(ctx, folder, order_id, amount):
        return w.naive(ctx, folder, order_id, amount)

    new = [eng.start(w.NAME, folder, order, 40, run_id=f"new-{order}").run_id for order in ("B-1", "B-2")]
    assert [eng.get(r).version for r in old + new] == [1, 1, 1, 2, 2]
    assert ledger(folder)["fraud_checks"] == ["B-1", "B-2"]      # new runs checked at once

    finished = approve(eng, old + new)
    assert {r.status for r in finished.values()} == {"completed"}
    assert [finished[r].result["fraud"] for r in old] == [None, None, None]     # v1's code
    assert [finished[r].result["fraud"] for r in new] == [0.1, 0.1]             # v2's code
    assert ledger(folder) == {"refunds": 5, "asks": 5, "fraud_checks": ["B-1", "B-2"]}
    assert eng.runs_on(w.NAME, version=1) == []      # v1's code may go now
    assert len(eng.runs_on(w.NAME, version=1, include_completed=True)) == 3


def test_a_naive_deploy_makes_every_parked_run_diverge_and_a_replay_check_says_so_first(eng, folder, deployed):
    deployed("original")
    old = park(eng, folder, ["A-1", "A-2"])
    deployed("naive")                                # the same version, edited in place
    checks = [eng.check_replay(r) for r in old]
    assert [c.ok for c in checks] == [False, False]
    assert "'ask'" in checks[0].error and "'fraud-check'" in checks[0].error

    finished = approve(eng, old)
    assert {r.status for r in finished.values()} == {"diverged"}
    run = eng.get(old[0])
    assert "position 1" in run.error and "'ask'" in run.error and "'fraud-check'" in run.error
    assert ledger(folder) == {"refunds": 0, "asks": 2, "fraud_checks": []}    # nobody paid

    deployed("original")                             # roll back: the history fits again
    assert [eng.resume(r).status for r in old] == ["completed", "completed"]
    assert ledger(folder)["refunds"] == 2


# patch gates ------------------------------------------------------------------------------
def test_a_patch_gate_replays_old_runs_down_the_old_path_and_new_runs_down_the_new(eng, folder, deployed):
    deployed("original")
    old = park(eng, folder, ["A-1", "A-2"])
    deployed("gated")
    new = park(eng, folder, ["B-1"], prefix="new")
    assert [e.kind for e in eng.store.load_entries(new[0])][:3] == ["step", "patch", "step"]
    assert [e.kind for e in eng.store.load_entries(old[0])][:3] == ["step", "step", "timer"]

    finished = approve(eng, old + new)
    assert {r.status for r in finished.values()} == {"completed"}
    assert [finished[r].result["fraud"] for r in old + new] == [None, None, 0.1]
    assert finished[old[0]].replayed == ["lookup", "ask"]
    assert ledger(folder) == {"refunds": 3, "asks": 3, "fraud_checks": ["B-1"]}
    # every later replay (a fresh engine, as after a restart) takes the same branches
    for run_id in old + new:
        assert again(eng).check_replay(run_id).outcome == "finishes with no new work"
    row = next(r for r in eng.history(new[0]) if r["kind"] == "patch")
    assert (row["position"], row["step"], row["result"]) == (1, "fraud-check", True)


def test_a_run_that_reaches_the_gate_only_after_the_deploy_takes_the_new_branch(eng, folder, deployed):
    @dl.workflow("vx-late-gate")
    def late(ctx, folder, order_id):
        ctx.step("lookup", w.lookup, folder, order_id)
        decision = ctx.wait_for_signal("approval", timeout=w.DAY)
        return {"decision": decision, "checked": False}

    assert eng.start(late, folder, "A-1", run_id="late").status == "waiting"

    @dl.workflow("vx-late-gate")
    def late_gated(ctx, folder, order_id):
        ctx.step("lookup", w.lookup, folder, order_id)
        decision = ctx.wait_for_signal("approval", timeout=w.DAY)
        checked = ctx.patched("fraud-check")          # after the point where the run waits
        if checked:
            ctx.step("fraud-check", w.fraud_check, folder, order_id, ctx.idempotency_key("fraud"))
        return {"decision": decision, "checked": checked}

    eng.signal("late", "approval", True)
    assert eng.resume("late").result == {"decision": True, "checked": True}
    assert ledger(folder)["fraud_checks"] == ["A-1"]


def test_a_gate_is_retired_in_two_stages_that_the_patch_report_announces(eng, folder, deployed):
    from durable_lite.faults import CrashAt
    deployed("original")
    old = park(eng, folder, ["A-1"])
    deployed("gated")
    new = park(eng, folder, ["B-1", "C-1"], prefix="new")
    with pytest.raises(dl.Crash):                   # killed before its first checkpoint
        again(eng, crash_at=CrashAt("lookup", "after_effect")).start(
            w.NAME, folder, "E-1", 40, run_id="early")
    report = eng.patch_report(w.NAME, "fraud-check")
    assert (report.old, report.new, report.not_reached) == (old, new, ["early"])
    assert "keep" in report.advice and "1 unfinished run(s) still take the old branch" in report.advice

    approve(eng, old)                                           # the old run drains
    report = eng.patch_report(w.NAME, "fraud-check")
    assert report.old == [] and "replace the gate by ctx.deprecate_patch('fraud-check')" in report.advice

    deployed("deprecated")                                      # stage 1
    after = park(eng, folder, ["D-1"], prefix="after")
    assert "patch" not in [e.kind for e in eng.store.load_entries(after[0])]
    finished = approve(eng, [new[0], "early"] + after)          # B-1's marker is replayed
    assert [finished[r].result["fraud"] for r in [new[0], "early"] + after] == [0.1, 0.1, 0.1]
    report = eng.patch_report(w.NAME, "fraud-check")
    assert (report.old, report.new, report.not_reached) == ([], [new[1]], [])
    assert "once the 1 run(s) holding the marker have finished" in report.advice
    approve(eng, [new[1]])
    assert "can go" in eng.patch_report(w.NAME, "fraud-check").advice           # stage 2
    assert ledger(folder) == {"refunds": 5, "asks": 5,
                              "fraud_checks": ["B-1", "C-1", "D-1", "E-1"]}


def test_deprecating_a_gate_too_early_is_found_by_the_report_before_a_run_diverges(eng, folder, deployed):
    deployed("original")
    old = park(eng, folder, ["A-1"])
    deployed("deprecated")                           # the old branch deleted too soon
    report = eng.patch_report(w.NAME, "fraud-check")
    assert list(report.broken) == old and "'ask'" in report.broken[old[0]]
    assert "could not be checked" in report.advice
    assert approve(eng, old)[old[0]].status == "diverged"


def test_patched_is_refused_outside_the_workflow_function_and_with_a_bad_name(eng):
    def inside_a_step(ctx):
        return ctx.patched("x")

    @dl.workflow("vx-gate-misuse")
    def misuse(ctx, where):
        if where == "step":
            return ctx.step("s", inside_a_step, ctx)
        return ctx.patched("a#b" if where == "hash" else 7)

    assert "inside step 's'" in eng.start(misuse, "step", run_id="m1").error
    assert "'#'" in eng.start(misuse, "hash", run_id="m2").error
    assert "non-empty string" in eng.start(misuse, "int", run_id="m3").error


# state migrations -------------------------------------------------------------------------
def define_cents_versions():
    """v1 takes dollars (a float) and records the request in dollars; v2 works in cents."""
    @dl.workflow("vx-cents", version=1)
    def v1(ctx, order_id, dollars):
        request = ctx.step("ask", lambda: {"order": order_id, "amount": dollars})
        ctx.wait_for_signal("approval", timeout=w.DAY)
        return ctx.step("pay", lambda: {"paid": request["amount"]})

    @dl.workflow("vx-cents", version=2)
    def v2(ctx, order_id, cents):
        request = ctx.step("ask", lambda: {"order": order_id, "cents": cents})
        ctx.wait_for_signal("approval", timeout=w.DAY)
        return ctx.step("pay", lambda: {"paid_cents": request["cents"]})

    return v1, v2


def to_cents(state):
    order_id, dollars = state.args
    state.args = [order_id, round(dollars * 100)]
    state.steps["ask"] = {"order": order_id, "cents": round(state.steps["ask"]["amount"] * 100)}
    return state


def test_a_state_1_run_is_refused_without_a_migration_and_moved_with_one(eng):
    v1, v2 = define_cents_versions()
    assert eng.start(v1, "A-7", 12.5, run_id="cents").status == "waiting"
    before = eng.store.load_entries("cents")
    with pytest.raises(dl.UpgradeRefused) as refused:
        eng.upgrade("cents", to_version=2)
    message = str(refused.value)
    assert "'cents'" in message and "vx-cents v1" in message and "v2" in message
    assert "waiting for 'approval' after step 'ask'" in message
    assert "@dl.migration('vx-cents', from_version=1, to_version=2)" in message
    assert eng.get("cents").version == 1 and eng.store.load_entries("cents") == before

    dl.migration("vx-cents", from_version=1, to_version=2)(to_cents)
    run = eng.upgrade("cents")                                  # default: the newest version
    assert (run.version, run.status) == (2, "waiting") and "v1 to v2" in run.note
    record = eng.store.get_run("cents")
    assert json.loads(record.args_json) == ["A-7", 1250]
    ask = eng.history("cents")[0]
    assert ask["result"] == {"order": "A-7", "cents": 1250} and ask["worker"] == before[0].worker
    events = {e.kind: e for e in eng.events("cents")}
    assert events["migrated"].detail == before[0].result_json             # nothing lost
    assert json.loads(events["upgraded"].detail)["args"] == ["A-7", 12.5]

    eng.signal("cents", "approval", True)
    done = again(eng).resume("cents")
    assert done.result == {"paid_cents": 1250} and done.replayed == ["ask"]


def test_an_upgrade_whose_new_code_does_not_fit_the_history_changes_nothing(eng):
    v1, _ = define_cents_versions()

    @dl.workflow("vx-cents", version=3)
    def v3(ctx, order_id, cents):                    # a new step before the recorded one
        ctx.step("fraud-check", lambda: 0.1)
        return v1.fn(ctx, order_id, cents / 100)

    eng.start(v1, "A-8", 5.0, run_id="misfit")
    dl.migration("vx-cents", from_version=1, to_version=2)(to_cents)
    dl.migration("vx-cents", from_version=2, to_version=3)(lambda state: state)
    before = (eng.store.get_run("misfit"), eng.store.load_entries("misfit"))
    with pytest.raises(dl.UpgradeRefused) as refused:
        eng.upgrade("misfit", to_version=3)
    assert "'fraud-check'" in str(refused.value) and "Nothing was changed" in str(refused.value)
    assert (eng.store.get_run("misfit"), eng.store.load_entries("misfit")) == before


def test_migrations_chain_and_their_own_errors_name_the_run_and_the_migration(eng):
    v1, _ = define_cents_versions()

    @dl.workflow("vx-cents", version=3)
    def v3(ctx, order_id, cents, currency):
        request = ctx.step("ask", lambda: {"order": order_id, "cents": cents})
        ctx.wait_for_signal("approval", timeout=w.DAY)
        return ctx.step("pay", lambda: {"paid": request["cents"], "currency": currency})

    eng.start(v1, "A-9", 3.0, run_id="chain")

    @dl.migration("vx-cents", from_version=2, to_version=3)
    def add_currency(state):
        state.kwargs["currency"] = "EUR"

    with pytest.raises(dl.UpgradeRefused, match="no migration from vx-cents v1"):
        eng.upgrade("chain", to_version=3)

    @dl.migration("vx-cents", from_version=1, to_version=2)
    def broken(state):
        raise KeyError("dollars")

    with pytest.raises(dl.UpgradeRefused, match=r"'chain'.*v1->v2 \(broken\) raised KeyError"):
        eng.upgrade("chain", to_version=3)

    @dl.migration("vx-cents", from_version=1, to_version=2)
    def drops_a_step(state):
        del state.steps["ask"]
        return state

    with pytest.raises(dl.UpgradeRefused, match="added or removed recorded steps"):
        eng.upgrade("chain", to_version=3)

    dl.migration("vx-cents", from_version=1, to_version=2)(to_cents)
    run = eng.upgrade("chain", to_version=3)
    assert run.version == 3 and "v1->v2 (to_cents) then v2->v3 (add_currency)" in run.note
    eng.signal("chain", "approval", True)
    assert eng.resume("chain").result == {"paid": 300, "currency": "EUR"}


def test_what_an_upgrade_refuses_outright(eng):
    v1, v2 = define_cents_versions()
    dl.migration("vx-cents", from_version=1, to_version=2)(to_cents)
    eng.start(v2, "A-1", 100, run_id="on-v2")
    with pytest.raises(dl.UpgradeRefused, match="cannot move back to v1"):
        eng.upgrade("on-v2", to_version=1)
    assert "already" in eng.upgrade("on-v2", to_version=2).note
    eng.signal("on-v2", "approval", True)
    eng.resume("on-v2")
    with pytest.raises(dl.RunFinishedError, match="fork it"):
        eng.upgrade("on-v2", to_version=2)
    eng.start(v1, "A-2", 1.0, run_id="no-code")
    with pytest.raises(dl.WorkflowNotRegistered, match="version 9"):
        eng.upgrade("no-code", to_version=9)


def test_a_diverged_run_upgraded_onto_code_that_fits_is_due_again(eng, folder, deployed):
    deployed("original")
    park(eng, folder, ["A-1"])
    deployed("naive")
    approve(eng, ["old-A-1"])
    assert eng.get("old-A-1").status == "diverged"

    @dl.workflow(w.NAME, version=2)
    def approval_v2(ctx, folder, order_id, amount):
        return w.gated(ctx, folder, order_id, amount)

    dl.migration(w.NAME, from_version=1, to_version=2)(lambda state: state)
    run = eng.upgrade("old-A-1")
    assert (run.version, run.status, run.error) == (2, "running", None)
    (finished,) = eng.recover()
    assert finished.status == "completed" and finished.result["fraud"] is None


# forks ------------------------------------------------------------------------------------
def keys_paid(folder):
    with sqlite3.connect(f"{folder}/payments.db") as db:
        return [k for (k,) in db.execute("SELECT idempotency_key FROM refunds ORDER BY id")]


@pytest.mark.parametrize("step", ex.REFUND_STEPS)
def test_a_fork_from_each_step_of_the_refund_executes_exactly_the_steps_after_it(eng, folder, step):
    original = eng.start(ex.refund, folder, "A-17", 40, key_notices=True, run_id="orig")
    world = World(folder)
    order = world.orders.lookup("A-17")

    def counts():
        return (world.payments.count("A-17"), world.mailer.count(order["email"]),
                world.tickets.closes(order["ticket"]))

    assert counts() == (1, 1, 1)
    fork = eng.fork("orig", from_step=step, run_id="fork")
    at = ex.REFUND_STEPS.index(step)
    assert fork.status == "completed"
    assert fork.replayed == list(ex.REFUND_STEPS[:at]) and fork.executed == list(ex.REFUND_STEPS[at:])
    # copied steps happened once; every step the fork executed is a new effect
    assert counts() == (1 + (at <= 1), 1 + (at <= 2), 2)
    assert keys_paid(folder) == [derive_key("orig", "refund", "A-17")] + \
        ([derive_key("fork", "refund", "A-17")] if at <= 1 else [])
    if at >= 2:                                         # the refund was copied, not repeated
        assert fork.result == original.result
    rows = {r["step"]: r["result"] for r in eng.history("fork")}
    assert all(rows[s] == eng.history("orig")[i]["result"] for i, s in enumerate(ex.REFUND_STEPS[:at]))
    lineage = [json.loads(e.detail) for e in eng.events("fork") if e.kind == "forked"]
    assert lineage == [{"from": "orig", "step": step, "position": at, "version": 1}]
    assert [e.detail for e in eng.events("orig") if e.kind == "forked_to"] == \
        ['{"run": "fork", "version": 1}']
    # asking again for the same fork continues it: nothing new happens to the world
    assert "made before" in eng.fork("orig", from_step=step, run_id="fork").note
    assert counts() == (1 + (at <= 1), 1 + (at <= 2), 2)


def test_a_forks_history_and_trace_tell_copied_steps_from_executed_ones(eng, folder, clock):
    eng.start(ex.refund, folder, "A-1", 10, run_id="by-one")
    clock.advance(3600)
    other = again(eng)
    fork = other.fork("by-one", from_step="close", run_id="by-other")
    workers = [r["worker"] for r in other.history("by-other")]
    assert workers == ["copied from by-one"] * 3 + [other.worker] and fork.executed == ["close"]
    copied, executed = other.trace("by-other").children
    assert [s.name for s in copied.children] == ["lookup", "refund", "email"]
    assert copied.worker == "copied from by-one"
    assert [s.name for s in executed.children] == ["close"] and executed.status == "completed"


def test_a_fork_from_before_a_wait_waits_again_for_its_own_signal(eng, folder, deployed):
    deployed("gated")
    park(eng, folder, ["A-1"])
    approve(eng, ["old-A-1"])
    fork = eng.fork("old-A-1", from_step="approval", run_id="again")
    assert fork.status == "waiting" and fork.replayed == ["lookup", "fraud-check", "ask"]
    eng.signal("again", "approval", {"approved": True})
    assert eng.resume("again").status == "completed"
    assert ledger(folder) == {"refunds": 2, "asks": 1, "fraud_checks": ["A-1"]}


def test_a_fork_onto_a_newer_version_migrates_the_copied_state(eng):
    v1, v2 = define_cents_versions()
    eng.start(v1, "A-3", 2.5, run_id="dollars")
    eng.signal("dollars", "approval", True)
    assert eng.resume("dollars").result == {"paid": 2.5}
    with pytest.raises(dl.UpgradeRefused, match="'dollars'.*forked from 'pay' onto v2.*no migration"):
        eng.fork("dollars", from_step="pay", run_id="cents", version=2)
    assert eng.store.get_run("cents") is None
    dl.migration("vx-cents", from_version=1, to_version=2)(to_cents)
    fork = eng.fork("dollars", from_step="pay", run_id="cents", version=2)
    assert (fork.version, fork.result, fork.executed) == (2, {"paid_cents": 250}, ["pay"])


def test_what_a_fork_refuses(eng, folder, deployed):
    eng.start(ex.refund, folder, "A-2", 10, run_id="src")
    with pytest.raises(dl.UnknownStepError) as unknown:
        eng.fork("src", from_step="nope")
    assert str(unknown.value) == ("run 'src' has no recorded step or wait 'nope' to fork from "
                                  "(it has ['lookup', 'refund', 'email', 'close'])")
    eng.start(ex.refund, folder, "A-3", 10, run_id="taken")
    with pytest.raises(dl.RunArgumentsMismatch, match="'taken' already exists"):
        eng.fork("src", from_step="email", run_id="taken")
    deployed("original")
    park(eng, folder, ["A-4"])
    eng.signal("old-A-4", "approval", True)
    eng.resume("old-A-4")
    deployed("naive")
    with pytest.raises(dl.UpgradeRefused, match="copied steps do not fit.*'fraud-check'"):
        eng.fork("old-A-4", from_step="refund", run_id="misfit")
    assert eng.store.get_run("misfit") is None
    generated = eng.fork("src", from_step="close")
    assert generated.run_id.startswith("src-fork-") and generated.status == "completed"


def test_an_upgraded_run_with_its_answer_already_waiting_is_due_at_once(eng):
    v1, _ = define_cents_versions()
    dl.migration("vx-cents", from_version=1, to_version=2)(to_cents)
    eng.start(v1, "A-4", 1.25, run_id="answered")
    eng.signal("answered", "approval", True)         # arrives before anyone resumes it
    run = eng.upgrade("answered")
    assert (run.version, run.status) == (2, "running") and "due now" in run.note
    (done,) = eng.recover()
    assert done.result == {"paid_cents": 125}


def test_an_upgrade_is_refused_while_another_worker_executes_the_run(eng):
    other = again(eng)
    refused = []

    def meddle():
        with pytest.raises(dl.LeaseHeldError, match="'busy'"):
            other.upgrade("busy", to_version=2)
        refused.append(True)
        return "b"

    @dl.workflow("vx-busy", version=1)
    def busy(ctx):
        return [ctx.step("a", lambda: "a"), ctx.step("b", meddle)]

    @dl.workflow("vx-busy", version=2)
    def busy_v2(ctx):
        return busy.fn(ctx)

    dl.migration("vx-busy", from_version=1, to_version=2)(lambda state: state)
    assert eng.start(busy, run_id="busy").result == ["a", "b"] and refused
    assert eng.get("busy").version == 1


def test_one_gate_name_at_two_points_decides_at_each(eng):
    @dl.workflow("vx-two-points")
    def loop(ctx):
        return [ctx.patched("cap") for _ in range(2)]

    assert eng.start(loop, run_id="two").result == [True, True]
    labels = [(e.kind, e.label) for e in eng.store.load_entries("two")]
    assert labels == [("patch", "cap"), ("patch", "cap#2")]
    assert eng.check_replay("two").outcome == "finishes with no new work"


def test_a_migration_that_leaves_a_value_json_cannot_hold_is_refused_naming_it(eng):
    v1, _ = define_cents_versions()
    eng.start(v1, "A-9", 3.0, run_id="not-json")

    @dl.migration("vx-cents", from_version=1, to_version=2)
    def into_a_set(state):
        state.args = [state.args[0], {300}]
        return state

    with pytest.raises(dl.UpgradeRefused, match=r"'not-json'.*into_a_set.*set") as err:
        eng.upgrade("not-json", to_version=2)
    assert "Nothing was changed" in str(err.value)

    @dl.migration("vx-cents", from_version=1, to_version=2)
    def step_into_an_object(state):
        state.steps["ask"] = object()
        return state

    with pytest.raises(dl.UpgradeRefused, match=r"step_into_an_object.*'ask'"):
        eng.upgrade("not-json", to_version=2)
    assert eng.get("not-json").version == 1
