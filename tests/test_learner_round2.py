"""What a learner saw, round 2 (the issue of that name), each item checked where a learner
would see it: in the committed lessons, by running a lesson's own code, or in a picture.

The widget items have their tests beside the widget: 06's explorer in
tests/test_lab_reliability.py, 11's legend in tests/test_lab_flow.py, 01's Resume on a
finished run in tests/test_crash_lab.py, and lesson 00's workshop days in
tests/test_lessons.py.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest

import durable_lite as dl
from durable_lite.examples import issue_refund, lookup_order

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def lesson(prefix):
    (path,) = NOTEBOOKS.glob(f"{prefix}*.ipynb")
    return nbformat.read(path, as_version=4)


def markdown(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def outputs(nb) -> str:
    return json.dumps([c.get("outputs", []) for c in nb.cells if c.cell_type == "code"])


def code_cells(nb):
    return [c.source for c in nb.cells if c.cell_type == "code"]


# 08: "try-this 1 ends `failed`, not `halted`, without a word why" ---------------------------
def test_lesson_08_try_this_1_ends_as_the_lesson_says_it_does():
    """Run section 1 of the lesson itself with the try-this's change: the in-memory limit
    fires at call 201 and the run ends `failed` (an ordinary error in a step), not
    `halted`; one more worker, with fresh memory, runs 200 more calls."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    nb = lesson("08_")
    text = " ".join(markdown(nb).split())
    try_this = text[text.index("**Try this**"):]
    assert ("1. Set `CALLS_BEFORE_OOM = 250` and re-run section 1. The in-memory limit fires at "
            "call 201, and the run ends `failed`, not `halted`") in try_this
    assert "only `dl.Budget` halts" in try_this
    assert 'worker_process("agent-local", step_limit=STEP_LIMIT)' in try_this

    setup, bug, processes = code_cells(nb)[:3]
    assert "CALLS_BEFORE_OOM = 160" in bug
    namespace = {}
    for source in (setup, bug.replace("CALLS_BEFORE_OOM = 160", "CALLS_BEFORE_OOM = 250"),
                   processes):
        exec(compile(source, "lesson-08", "exec"), namespace)
    exec("run, attempts = run_until_done('agent-local', step_limit=STEP_LIMIT)", namespace)
    run, attempts, world = namespace["run"], namespace["attempts"], namespace["world"]
    assert run.status == "failed" and run.halt_reason is None
    assert "RuntimeError: step limit of 200 reached" in run.error
    assert list(attempts["status"]) == ["failed"] and world.llm.calls() == 200
    again = eval("worker_process('agent-local', step_limit=STEP_LIMIT)", namespace)
    assert again.status == "failed" and world.llm.calls() == 400     # fresh memory, 200 more


# 09: "the heat map colours a yes/no column under a 'fewer: lost' legend" ------------------
def yes_no_sweep():
    from durable_lite.sweep import Sweep
    clean = {"status": "completed", "result": "ok", "error": None, "attempts": 1,
             "effects": {"refunds": 1, "balanced": True}}

    def row(step, refunds, balanced):
        base = clean["effects"]
        counts = {"refunds": refunds, "balanced": balanced}
        return {"step": step, "kind": "step", "when": "after_effect", "crashed": True,
                "attempts": 2, "status": "completed", "result": "ok", "error": None,
                "effects": counts,
                "duplicates": {k: counts[k] - base[k] for k in counts if counts[k] > base[k]},
                "lost": {k: base[k] - counts[k] for k in counts if counts[k] < base[k]},
                "same_result": True}
    rows = [row("charge", 1, True), row("undo:charge", 2, False)]
    return Sweep("trip", "durable", False, "signal", clean, rows, ["refunds", "balanced"])


def test_a_yes_no_column_is_never_drawn_on_the_count_scale():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex
    from durable_lite import sweep as sw

    s = yes_no_sweep()
    fig = s.plot()
    ax = fig.axes[0]
    cells = [t.get_text() for t in ax.texts]          # line by line: refunds, balanced, same result
    assert cells == ["1", "yes", "completed", "1", "yes", "yes", "2 (+1)", "no", "yes"]
    assert not any("(-1)" in c for c in cells)       # a "no" is not one fewer of something
    image = ax.images[0].get_array()
    changed = to_hex(image[2][1][:3])                 # undo:charge, balanced
    assert changed == sw._FLIPPED and changed not in (sw._FEWER, sw._MORE)
    assert to_hex(image[2][0][:3]) == sw._MORE        # the count beside it keeps its scale
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert "yes/no not as in the clean run" in labels and "fewer: lost" in labels
    assert s.finding() == "1 of 2 crash points repeat an effect (refunds); 1 change a yes/no (balanced)"
    plt.close(fig)


def test_lesson_09_hands_the_sweep_a_yes_no_and_says_so():
    nb = lesson("09_")
    hook = next(c for c in code_cells(nb) if "def ledgers(folder)" in c)
    assert 'counts["balanced"] = dl.sim.travel_at(folder).statement()["balance"] == 0' in hook
    text = " ".join(markdown(nb).split())
    assert "`balanced`: `True` when the trip's statement comes to zero, a yes or no rather than a count" in text
    assert "`balanced` turns blue" not in text and "`balanced` says no" in text


# 05: "uses 'generation' for both the nonce and the call count" -----------------------------
def test_lesson_05_uses_generation_for_the_call_count_only():
    nb = lesson("05_")
    text, shown = markdown(nb), outputs(nb)
    assert "*generation*: the number of the call that wrote it" in " ".join(text.split())
    assert "draft delivered: nonce 1, generation 1" in shown
    assert "draft delivered: nonce 999, generation 2" in shown
    assert "[generation 999]" not in shown + text     # the nonce is never called a generation
    assert '"written with nonce N"' not in text and "model call 1" not in shown
    for number in re.findall(r"\bgeneration (\d+)", text):
        assert number in ("1", "2"), number           # the model's first and second call


# the playground: "crash-point names differ from the heat map's" ---------------------------
def test_the_crash_labs_menu_names_each_point_as_the_heat_map_does():
    pytest.importorskip("ipywidgets")
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import sweep_workflows as wfs
    from durable_lite import examples as ex

    for wf, args in ((wfs.sms_refund, ("A-17", 40)), (ex.approved_refund, ("A-17", 40))):
        lab = dl.lab.CrashLab(wf, *args)
        menu = [label for label, _ in lab.crash.options][1:]          # after "no crash"
        fig = dl.faults.sweep(wf, *args).plot()
        lines = [t.get_text() for t in fig.axes[0].get_yticklabels()][1:]   # after the clean run
        assert menu == lines
        plt.close(fig)
    assert "sms · after effect" in menu or "refund · after effect" in menu

    playground = nbformat.read(NOTEBOOKS / "crash_playground.ipynb", as_version=4)
    text = markdown(playground)
    assert '"sms · after effect"' in text and "after the effect, before the checkpoint" not in text
    assert "names its crash points the same way" in " ".join(text.split())


# the playground: "a key shared by two orders is reported 'no effect repeated'" ------------
def send_sms(folder, phone, text, key=None):
    return dl.sim.world_at(folder).ledger("sms").record(key=key, detail={"to": phone, "text": text})


@dl.workflow("round2-charge-key")
def refund_charge_key(ctx, folder, order_id, amount):
    order = ctx.step("lookup", lookup_order, folder, order_id)
    paid = ctx.step("refund", issue_refund, folder, order_id, amount,
                    idempotency_key=f"charge-{amount}")
    ctx.step("sms", send_sms, folder, "+44 7700 900123", f"{amount} refunded for {order_id}",
             ctx.idempotency_key("sms", order_id))
    return {"order": order["id"], "refund_id": paid["refund_id"]}


@dl.workflow("round2-order-key")
def refund_order_key(ctx, folder, order_id, amount):
    order = ctx.step("lookup", lookup_order, folder, order_id)
    paid = ctx.step("refund", issue_refund, folder, order_id, amount,
                    idempotency_key=ctx.idempotency_key("refund", order_id))
    ctx.step("sms", send_sms, folder, "+44 7700 900123", f"{amount} refunded for {order_id}",
             ctx.idempotency_key("sms", order_id))
    return {"order": order["id"], "refund_id": paid["refund_id"]}


@dl.workflow("round2-two-orders")
def two_orders(ctx, folder, orders, keyed):
    refund = refund_order_key if keyed else refund_charge_key
    return [refund(ctx, folder, order_id, amount) for order_id, amount in orders]


ORDERS = [["A-17", 40], ["A-18", 40]]


def test_a_key_two_orders_share_gets_past_a_sweep_of_one_order_and_shows_with_two():
    """What the playground's section 8 says, with the key from the issue, f"charge-{amount}"."""
    alone = dl.faults.sweep(refund_charge_key, "A-17", 40)
    assert alone.problems() == [] and alone.clean["effects"] == {"refunds": 1, "sms": 1}
    assert alone.finding() == "No effect repeated or lost at any of 9 crash points"

    shared = dl.faults.sweep(two_orders, ORDERS, False)
    assert shared.problems() == []                   # the sweep's own yardstick: nothing differs
    assert shared.clean["effects"] == {"refunds": 1, "sms": 2}     # two orders, one refund
    assert [r["refund_id"] for r in shared.clean["result"]] == ["R-1", "R-1"]
    assert all(r["effects"]["refunds"] == 1 for r in shared.rows)  # every crashed case too

    keyed = dl.faults.sweep(two_orders, ORDERS, True)
    assert keyed.problems() == [] and keyed.clean["effects"] == {"refunds": 2, "sms": 2}
    assert [r["refund_id"] for r in keyed.clean["result"]] == ["R-1", "R-2"]


def test_the_playground_says_what_a_sweep_cannot_see_and_shows_it_with_two_orders():
    nb = nbformat.read(NOTEBOOKS / "crash_playground.ipynb", as_version=4)
    text = " ".join(markdown(nb).split())
    assert "## 8. What a sweep cannot see" in markdown(nb)
    assert "cannot see a mistake the clean run makes too, nor one that takes two runs to show" in text
    assert '`f"charge-{amount}"`' in text and "`sweep` plays one run per case" in text
    code = "\n".join(code_cells(nb))
    assert 'idempotency_key=f"charge-{amount}"' in code
    shown = outputs(nb)
    assert "two orders: <Sweep of 'two-orders'" in shown and "No effect repeated or lost at any of 18" in shown
    assert "its clean run: {'refunds': 1, 'sms': 2} ['R-1', 'R-1']" in shown
    assert "its clean run: {'refunds': 2, 'sms': 2} ['R-1', 'R-2']" in shown
