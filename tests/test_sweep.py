"""The crash sweep (dl.faults.sweep): every crash point of a workflow, crashed, resumed and
counted against the world's ledgers.

It must agree with what the crash lab shows point by point, find the refund's one window
and nothing else, count a learner's own ledger, give the same rows whether the crash is an
exception or a real SIGKILL, and fail with an error that names the case.
"""

import ast
import os
import subprocess
import sys

import pytest

import durable_lite as dl
from durable_lite import examples as ex
from durable_lite.faults import AFTER_CHECKPOINT, AFTER_EFFECT, BEFORE_STEP
from durable_lite.lab.crash_lab import (CHECKPOINTED, CRASH_CHOICES, NAIVE, WITH_KEY,
                                        crash_lab_sweep, describe_crash)
from durable_lite.sweep import SweepError, crash_points, sweep, world_effects

import sweep_workflows as wfs

LAB_MODES = {NAIVE: dict(runner="naive", use_key=False, careless=True),
             CHECKPOINTED: dict(use_key=False, careless=True),
             WITH_KEY: dict(use_key=True, careless=False)}
LEDGERS = ("refunds", "emails", "tickets_closed")


def points(rows, ledger=None, table="duplicates"):
    return [(r["step"], r["when"]) for r in rows if (ledger in r[table] if ledger else r[table])]


# what the sweep finds ---------------------------------------------------------------------
def test_the_refund_sweep_reproduces_the_crash_labs_27_mode_by_point_outcomes():
    lab = crash_lab_sweep()
    assert len(lab) == 27
    for mode, options in LAB_MODES.items():
        s = sweep(ex.refund, "A-17", 40, **options)
        found = {(r["step"], r["when"]): r["effects"] for r in s.rows}
        for crash in CRASH_CHOICES:
            row, = [r for r in lab if r["mode"] == mode and r["crash"] == describe_crash(crash)]
            effects = s.clean["effects"] if crash is None else found[crash]
            assert tuple(row[k] for k in LEDGERS) == tuple(effects[k] for k in LEDGERS), (mode, crash)


def test_every_step_is_crashed_at_all_three_points_in_the_order_they_happen():
    s = sweep(ex.refund, "A-17", 40)
    assert [(r["step"], r["when"]) for r in s.rows] == [
        (step, when) for step in ex.REFUND_STEPS for when in (BEFORE_STEP, AFTER_EFFECT, AFTER_CHECKPOINT)]
    assert all(r["crashed"] and r["attempts"] == 2 and r["kind"] == "step" for r in s.rows)
    assert s.clean == {"status": "completed", "attempts": 1, "error": None,
                       "result": {"order": "A-17", "refund_id": "R-1", "amount": 40},
                       "effects": {"refunds": 1, "emails": 1, "tickets_closed": 1}}


def test_without_a_key_and_with_a_careless_provider_the_refund_is_paid_twice_exactly_in_its_window():
    s = sweep(ex.refund, "A-17", 40, use_key=False, careless=True)
    assert points(s.rows, "refunds") == [("refund", AFTER_EFFECT)]
    paid_twice, = [r for r in s.duplicates() if "refunds" in r["duplicates"]]
    assert paid_twice["duplicates"] == {"refunds": 1} and paid_twice["effects"]["refunds"] == 2
    assert not paid_twice["same_result"]                 # the result names the second refund
    # the mailer and the desk have their own windows; nothing is ever lost
    assert points(s.duplicates()) == [(s, AFTER_EFFECT) for s in ("refund", "email", "close")]
    assert s.lost() == []
    assert s.finding() == "3 of 12 crash points repeat an effect (refunds, emails, tickets closed)"


def test_with_a_key_on_every_effect_the_sweep_flags_nothing():
    s = sweep(ex.refund, "A-17", 40, key_notices=True)
    assert s.duplicates() == [] and s.lost() == [] and s.problems() == []
    assert all(r["effects"] == {"refunds": 1, "emails": 1, "tickets_closed": 1} for r in s.rows)
    assert s.finding() == "No effect repeated or lost at any of 12 crash points"


def test_the_naive_runner_repeats_everything_done_before_the_crash():
    s = sweep(ex.refund, "A-17", 40, runner="naive", use_key=False, careless=True)
    assert points(s.rows, "refunds") == [("refund", AFTER_EFFECT), ("refund", AFTER_CHECKPOINT),
                                         *[(step, when) for step in ("email", "close")
                                           for when in (BEFORE_STEP, AFTER_EFFECT, AFTER_CHECKPOINT)]]
    assert s.finding().startswith("8 of 12 crash points repeat an effect")


def test_a_learners_own_tool_on_a_generic_ledger_is_counted():
    s = sweep(wfs.sms_refund, "A-17", 40)
    assert s.clean["effects"] == {"refunds": 1, "sms": 1}
    assert s.ledgers == ["refunds", "sms"]
    assert points(s.duplicates()) == [("sms", AFTER_EFFECT)]
    assert s.duplicates()[0]["duplicates"] == {"sms": 1}
    assert sweep(wfs.sms_refund, "A-17", 40, sms_key=True).duplicates() == []


def test_an_effect_that_never_happens_after_a_crash_is_reported_lost():
    s = sweep(wfs.sms_only_when_new, "A-17", 40)
    assert points(s.lost(), table="lost") == [("refund", AFTER_EFFECT)]
    assert s.lost()[0]["lost"] == {"sms": 1} and s.duplicates() == []
    assert s.finding() == "1 of 6 crash points lose an effect (sms)"


def test_repeated_step_names_are_crashed_at_each_occurrence():
    s = sweep(wfs.two_emails, "ana@example.com")
    assert [r["step"] for r in s.rows][::3] == ["email", "email#2"]
    assert points(s.duplicates()) == [("email", AFTER_EFFECT), ("email#2", AFTER_EFFECT)]


# waits and sleeps -------------------------------------------------------------------------
@pytest.mark.parametrize("waits,outcome,last", [
    ("signal", "refunded", "email"), ("deadline", "escalated", "escalate"),
    ({"approval": {"approved": False}}, "declined", "decline")])
def test_waits_are_crash_points_and_are_answered_as_the_caller_chooses(waits, outcome, last):
    s = sweep(ex.approved_refund, "A-17", 40, waits=waits)
    assert s.clean["result"]["outcome"] == outcome
    assert s.clean["attempts"] == 2                       # parked once, answered, resumed
    waits_rows = [(r["step"], r["when"]) for r in s.rows if r["kind"] == "wait"]
    assert waits_rows == [("approval", BEFORE_STEP), ("approval", AFTER_CHECKPOINT)]
    assert all(r["crashed"] for r in s.rows)
    # the refund is keyed; the last message is not, so its window is the one duplicate
    assert points(s.duplicates()) == [(last, AFTER_EFFECT)]


def test_a_crash_after_a_wait_fires_in_the_attempt_that_gets_past_it():
    s = sweep(ex.approved_refund, "A-17", 40)
    row, = [r for r in s.rows if (r["step"], r["when"]) == ("approval", AFTER_CHECKPOINT)]
    assert row["crashed"] and row["attempts"] == 3        # park, crash past the wait, finish


def test_sleeps_are_crash_points_ended_by_the_fake_clock():
    s = sweep(wfs.nap, "A-17")
    assert [(r["step"], r["kind"], r["when"]) for r in s.rows if r["kind"] != "step"] == [
        ("nap", "sleep", BEFORE_STEP), ("nap", "sleep", AFTER_CHECKPOINT)]
    assert s.problems() == [] and s.clean["result"] == "rested"


def test_ids_minted_after_a_resume_never_repeat_those_minted_before_the_crash():
    s = sweep(wfs.uuid_keys)
    assert s.problems() == [], s.finding()               # no text lost to a repeated key
    assert [r["effects"]["sms"] for r in s.rows] == [2] * len(s.rows)
    # a resume mints the ids the uncrashed run minted at that point: the same result
    assert s.clean["result"] == ["id-0001", "id-0002"]
    assert all(r["result"] == s.clean["result"] and r["attempts"] == 2 for r in s.rows)


def test_each_naive_attempt_mints_new_ids_so_keys_from_them_do_not_dedupe():
    s = sweep(wfs.uuid_keys, runner="naive")
    assert points(s.rows, "sms") == [(r["step"], r["when"]) for r in s.rows][1:]   # all but
    # the crash before anything was sent: a redelivered job texts again under a new key
    assert s.rows[-1]["result"] == ["id2-0001", "id2-0002"]


def test_crash_points_alone_is_the_sweeps_discovery():
    clean, found = crash_points(ex.approved_refund, "A-17", 40)
    assert clean["effects"] == {"refunds": 1, "emails": 1}
    assert [str(p) for p in found][:5] == ["lookup / before_step", "lookup / after_effect",
                                           "lookup / after_checkpoint", "approval / before_step",
                                           "approval / after_checkpoint"]


# hooks for graders: own arguments, own ledger counts ----------------------------------------
@dl.workflow("sweep-two-places")
def two_places(ctx, world, notes, order_id):
    ctx.step("refund", ex.issue_refund, world, order_id, 10, careless=True)
    ctx.step("note", _note, notes)
    return "ok"


def _note(path):
    with open(path, "a") as f:
        f.write("noted\n")
    return True


def test_leading_arguments_and_effects_can_be_chosen_per_case():
    seen = []

    def leading(folder):
        seen.append(folder)
        return [os.path.join(folder, "world"), os.path.join(folder, "notes.txt")]

    def effects(folder):
        with open(os.path.join(folder, "notes.txt")) as f:
            notes = len(f.readlines())
        return {**world_effects(os.path.join(folder, "world")), "notes": notes}

    s = sweep(two_places, "A-1", leading=leading, effects=effects)
    assert len(set(seen)) == 1 + len(s.rows)             # a fresh folder for every case
    assert s.ledgers == ["refunds", "notes"]
    assert points(s.duplicates()) == [("refund", AFTER_EFFECT), ("note", AFTER_EFFECT)]


def test_a_run_id_per_case_so_no_memory_keyed_by_run_id_carries_over():
    ids = []

    def fresh(case):
        ids.append(f"run-{len(ids)}")
        return ids[-1]

    s = sweep(ex.refund, "A-17", 40, run_id=fresh, key_notices=True)
    assert len(ids) == 1 + len(s.rows) == len(set(ids))
    assert s.problems() == []          # results equal: keys differ per case, worlds are fresh


def test_the_table_and_the_heat_map_show_the_rows():
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = sweep(ex.refund, "A-17", 40, use_key=False, careless=True)
    table = s.table()
    assert list(table.columns) == [*LEDGERS, "duplicates", "lost", "same_result", "status"]
    assert table.loc[("refund", AFTER_EFFECT), "refunds"] == 2
    assert table.loc[("refund", AFTER_EFFECT), "duplicates"] == "refunds +1"

    fig = s.plot()
    ax = fig.axes[0]
    assert ax.get_title().startswith(s.finding())
    assert [t.get_text() for t in ax.get_yticklabels()][:2] == ["no crash (the clean run)",
                                                                "lookup · before"]
    cells = [t.get_text() for t in ax.texts]
    assert cells.count("2 (+1)") == 3 and len(cells) == (1 + 12) * (len(LEDGERS) + 1)
    plt.close(fig)


# real kills -------------------------------------------------------------------------------
def left_behind(before) -> set:
    """This process's children started since `before`, but for the idle parents that fork
    fresh processes (kept for this process's life), and every child of those."""
    from durable_lite import fresh
    idle = set(fresh.parents())
    return (set(children_of(os.getpid())) - before - idle) | \
        {c for p in idle for c in children_of(p)}


def children_of(pid):
    """Live child processes of `pid` (Linux /proc), so a test can see none were left behind.
    A test compares them with the children from before its sweep: helpers that outlive a
    test on purpose (the DBOS tests' fork server and its resource tracker) are not the
    sweep's."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


AGREE = {
    "refund careless": (ex.refund, ("A-17", 40), dict(use_key=False, careless=True)),
    "refund naive": (ex.refund, ("A-17", 40), dict(runner="naive", use_key=False, careless=True)),
    "approval by deadline": (ex.approved_refund, ("A-17", 40), dict(waits="deadline", use_key=False)),
    "own ledger and a sleep": (wfs.nap, ("A-17",), {}),
    "own ledger, no key": (wfs.sms_refund, ("A-17", 40), {}),
    "keys from ctx.uuid()": (wfs.uuid_keys, (), {}),
    "a step in a finally block": (wfs.with_cleanup, ("A-17",), {}),
    "a step in a finally block, naive": (wfs.with_cleanup, ("A-17",), dict(runner="naive")),
}


@pytest.mark.crash
@pytest.mark.parametrize("name", list(AGREE))
def test_real_kills_and_in_process_crashes_give_the_same_rows(name, tmp_path, monkeypatch):
    wf, args, options = AGREE[name]
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    before = set(children_of(os.getpid())) if os.path.isdir("/proc") else set()
    in_process = sweep(wf, *args, **options)
    killed = sweep(wf, *args, real_kill=True, progress=False, **options)
    assert killed.rows == in_process.rows and killed.clean == in_process.clean
    assert killed.real_kill and all(r["crashed"] for r in killed.rows)
    assert os.listdir(tmp_path) == []                    # its temporary folder is gone
    if os.path.isdir("/proc"):
        assert left_behind(before) == set()                  # and so are its processes


@pytest.mark.crash
def test_a_child_that_outlives_its_timeout_is_killed_and_the_error_names_the_case():
    before = set(children_of(os.getpid())) if os.path.isdir("/proc") else set()
    with pytest.raises(SweepError, match=r"sweep of 'sweep-slow', crash at slow / \w+, attempt \d: "
                                         r"the child process .* did not finish within 0.5 s"):
        sweep(wfs.slow_step, 1.5, real_kill=True, timeout=0.5, workers=1, progress=False)
    if os.path.isdir("/proc"):
        assert left_behind(before) == set()


def test_real_kills_need_a_workflow_a_fresh_process_can_import():
    def in_a_cell(ctx, folder):
        return ctx.step("a", ex.lookup_order, folder, "A-1")
    in_a_cell.__module__ = "__main__"                    # as if defined in a notebook cell
    wf = dl.workflow("sweep-in-a-cell")(in_a_cell)
    with pytest.raises(SweepError, match="importable|cannot import") as err:
        sweep(wf, real_kill=True)
    assert "notebook cell" in str(err.value) and "real_kill=False" in str(err.value)
    assert sweep(wf).problems() == []                    # in-process works for it


# bad input --------------------------------------------------------------------------------
def test_a_plain_function_is_refused_by_name():
    def refund_by_hand(ctx, folder):
        pass
    with pytest.raises(TypeError, match=r"sweep of 'refund_by_hand': it is a plain function.*@dl.workflow"):
        sweep(refund_by_hand)


def test_an_unknown_workflow_name_is_refused_by_name():
    with pytest.raises(dl.WorkflowNotRegistered, match="sweep of 'no-such-workflow'"):
        sweep("no-such-workflow")


def test_arguments_json_cannot_hold_are_refused_naming_the_argument():
    with pytest.raises(dl.StepResultNotJSON, match=r"sweep of 'refund', clean run .*argument 2 .* a set"):
        sweep(ex.refund, "A-17", {40})
    with pytest.raises(dl.StepResultNotJSON, match=r"keyword argument 'use_key' is a object"):
        sweep(ex.refund, "A-17", 40, use_key=object())


@dl.workflow("sweep-forever")
def forever(ctx, folder):
    while True:
        ctx.sleep(60)


@dl.workflow("sweep-waits-twice")
def waits_twice(ctx, folder):
    first = ctx.wait_for_signal("first", timeout=60)
    second = ctx.wait_for_signal("second", timeout=60)
    return [first, second]


def test_a_workflow_that_never_finishes_is_an_error_naming_the_case():
    with pytest.raises(SweepError, match=r"sweep of 'sweep-forever', clean run: the run did not "
                                         r"finish within 5 attempts \(last status 'sleeping' at 'sleep'\)"):
        sweep(forever, max_attempts=5)


def test_a_wait_the_caller_did_not_answer_is_an_error_naming_the_case():
    with pytest.raises(SweepError, match=r"clean run: the run waits for 'second'"):
        sweep(waits_twice, waits={"first": True})
    assert sweep(waits_twice, waits={"first": True, "second": None}).clean["result"] == [True, None]


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="runner"):
        sweep(ex.refund, "A-17", 40, runner="optimistic")
    with pytest.raises(ValueError, match="waits"):
        sweep(ex.refund, "A-17", 40, waits="maybe")


def test_a_sweep_leaves_no_files_behind_even_when_it_fails(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    sweep(ex.refund, "A-17", 40)
    with pytest.raises(SweepError):
        sweep(forever, max_attempts=3)
    assert os.listdir(tmp_path) == []


# progress and imports ---------------------------------------------------------------------
def test_progress_is_a_tqdm_bar_when_asked_for(capsys):
    pytest.importorskip("tqdm")
    sweep(ex.refund, "A-17", 40, progress=True)
    assert "sweep refund" in capsys.readouterr().err
    sweep(ex.refund, "A-17", 40)                           # small and in-process: no bar
    assert capsys.readouterr().err == ""


def test_the_sweep_works_without_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    assert len(sweep(ex.refund, "A-17", 40, progress=True).rows) == 12


def test_faults_does_not_import_the_engine_and_the_sweep_loads_on_first_use():
    source = open(dl.faults.__file__, encoding="utf-8").read()
    imported = {node.module for node in ast.parse(source).body if isinstance(node, ast.ImportFrom)}
    assert imported == {"dataclasses", "errors"}          # no engine, child or sweep at import time
    probe = ("import sys, durable_lite as dl\n"
             "assert 'durable_lite.sweep' not in sys.modules and 'durable_lite.child' not in sys.modules\n"
             "from durable_lite.sweep import sweep, Sweep\n"
             "assert dl.faults.sweep is sweep and dl.faults.Sweep is Sweep\n"
             "from durable_lite.child import run_in_child\n"
             "assert dl.faults.run_in_child is run_in_child\n")
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_the_playground_is_committed_clean():
    """Executed, with no dead widget views, no machine paths, and links only to lessons
    that exist."""
    import json
    import re
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "notebooks", "crash_playground.ipynb")
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["execution_count"] for c in code)                    # committed executed
    assert "dl.faults.sweep" in "".join(code[1]["source"])           # the first cell is the workflow
    assert "ledger(" in "".join(code[0]["source"]) and "@dl.workflow" in "".join(code[0]["source"])
    text = json.dumps([c["outputs"] for c in code])
    assert "application/vnd.jupyter.widget-view+json" not in text and "widgets" not in nb["metadata"]
    assert not re.search(r"/tmp/|/dev/shm/|/home/|/Users/|durable-lite-sweep-", text)
    links = re.findall(r"\]\(([^)]+\.ipynb)\)", "".join("".join(c["source"]) for c in nb["cells"]))
    assert links and all(os.path.exists(os.path.join(root, "notebooks", link)) for link in links)
