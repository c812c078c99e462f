"""Lesson 15's scenes, from plain pytest: the numbers its prose relies on, its try-this
prompts, the tables it prints (checked against the code), and its promise to leave no
Temporal process behind. The Temporal scenes run on the session's server; the notebook
itself runs under nbval.
"""

import importlib
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import time

from engines_support import *  # noqa: F401,F403

from durable_lite import sim
from durable_lite.engines.compare import concepts
from durable_lite.engines.langgraph import (refund as refund_langgraph,
                                            support as langgraph_support,
                                            worker as langgraph_worker)
from durable_lite.engines.temporal import machines as temporal_machines, tour as temporal_tour
from durable_lite.faults import CrashAt

pytestmark = pytest.mark.crash
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSON = os.path.join(ROOT, "notebooks", "15_the_same_run_on_temporal_and_langgraph.ipynb")


# Temporal -------------------------------------------------------------------------------------
def test_after_a_kill_temporals_history_counts_the_killed_attempt_and_durable_lites_does_not(
        temporal_address, tmp_path):
    """The refund killed inside its window on each engine, finished by machine B. Both
    histories hold the same steps, results and workers; Temporal's refund row is attempt 2
    with the first attempt's timeout, durable_lite's is one attempt, and only its event
    log (an "interrupted" event) and the bank's ledger remember the first."""
    seen = temporal_machines.run(temporal_address, str(tmp_path / "temporal"))
    on_dl = temporal_tour.killed_on_durable_lite(tmp_path / "durable_lite")
    temporal, durable_lite = seen["history"], on_dl["history"]
    columns = ("step", "kind", "status", "worker", "result")
    assert [tuple(r[c] for c in columns) for r in temporal] == \
        [tuple(r[c] for c in columns) for r in durable_lite]
    assert [r["worker"] for r in temporal] == ["machine-a"] + ["machine-b"] * 3
    assert (temporal[1]["attempts"], temporal[1]["error"]) == (2, "activity StartToClose timeout")
    assert (durable_lite[1]["attempts"], durable_lite[1]["error"]) == (1, None)
    assert on_dl["events"] == ["started", "interrupted", "resumed", "completed"]
    assert seen["ledger"]["refund requests"] == on_dl["refund requests"] == 2
    assert seen["ledger"]["refunds paid"] == on_dl["refunds paid"] == 1


def test_the_tour_s_scenes_tell_the_same_story_when_a_cell_is_run_again(temporal_address,
                                                                        tmp_path):
    """nbval holds each scene's first run to the lesson's saved output; a learner reruns
    cells (every try-this prompt does), so each scene must also play afresh: new ids, a
    new world, the same numbers."""
    with temporal_tour.Tour(temporal_address, tmp_path) as tour:
        for _ in range(2):
            assert tour.started_twice() == {"same result": True, "runs": 1,
                                            "refunds paid": 1, "emails": 1}
            approvals = tour.approvals(approval_timeout=2.0, cooling_off=0.2)
            assert approvals["A-101"]["result"] == {"order": "A-101", "refunded": True,
                                                    "refund_id": "R-1", "amount": 250}
            assert approvals["A-102"]["result"] == {"order": "A-102", "refunded": False,
                                                    "amount": 250}
            shown = temporal_tour.history_table(approvals["A-101"]["history"])
            assert list(shown["step"]) == ["lookup", "approval deadline", "approval", "refund",
                                           "email", "cooling off", "close"]
            assert list(shown["status"])[1] == "cancelled"        # the answer beat the deadline
            assert list(shown["worker"]) == ["worker-1", "(the server)", temporal_tour.INBOX,
                                             "worker-1", "worker-1", "(the server)", "worker-1"]
            late = [(r["step"], r["status"]) for r in approvals["A-102"]["history"]]
            assert late == [("lookup", "completed"), ("approval deadline", "completed"),
                            ("email", "completed")]
    assert not tour.worker.alive


def test_left_running_names_this_process_s_temporal_worker_until_it_stops(temporal_address,
                                                                         tmp_path):
    tour = temporal_tour.Tour(temporal_address, tmp_path)
    try:
        running = temporal_tour.left_running()
        assert (tour.worker.process.pid, "worker") in running
        assert "server" in {kind for _, kind in running}          # the session's server
    finally:
        tour.stop()
    assert tour.worker.process.pid not in {pid for pid, _ in temporal_tour.left_running()}


def test_left_running_counts_a_process_named_as_a_worker_until_it_is_killed_not_reaped():
    """A killed worker whose parent has not collected it yet is a zombie: it holds a pid,
    not a machine. Counted, a check that killed every worker could still see one."""
    from durable_lite.engines.temporal.worker import PROCESS_NAME
    # A stand-in: a child that names itself as a worker. Started, not forked: a fork of this
    # multi-threaded test process could deadlock in the child.
    names_itself = ("import ctypes, sys, time\n"
                    "ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)   # PR_SET_NAME\n"
                    "time.sleep(600)")
    child = subprocess.Popen([sys.executable, "-c", names_itself, PROCESS_NAME])
    pid = child.pid
    try:
        deadline = time.monotonic() + 60
        while (pid, "worker") not in temporal_tour.left_running():
            assert time.monotonic() < deadline, "the named child was never counted"
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)               # killed, and deliberately not reaped yet
        deadline = time.monotonic() + 60
        while open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline, "the killed child never became a zombie"
            time.sleep(0.01)
        assert pid not in {p for p, _ in temporal_tour.left_running()}
    finally:
        child.kill()
        child.wait()


def test_the_lesson_stops_what_it_started_and_checks_that_nothing_is_left():
    """Its last code cell stops the tour's worker and the server and prints what is still
    running, so an nbval run that leaves a Temporal process behind fails on that line."""
    with open(LESSON, encoding="utf-8") as f:
        cells = [c for c in json.load(f)["cells"] if c["cell_type"] == "code"]
    last = "".join(cells[-1]["source"])
    assert "tour.stop()" in last and "server.stop()" in last and "left_running()" in last
    printed = "".join("".join(o.get("text", "")) for o in cells[-1]["outputs"])
    assert printed == "Temporal processes left running: []\n"
    starts = [i for i, c in enumerate(cells) if "TempTemporal(" in "".join(c["source"])]
    assert len(starts) == 1, "the lesson starts one server, in its setup cell"


# LangGraph ------------------------------------------------------------------------------------
def killed_then_resumed(tmp_path, crash):
    checkpoints, world = str(tmp_path / "checkpoints.sqlite"), str(tmp_path / "world")
    inputs = {"folder": world, "order_id": "A-17", "amount": 40, "key_notices": True}
    first = langgraph_worker.start_worker(checkpoints, "refund.refund", "refund-A-17",
                                          start=inputs, crash=crash)
    first.join()
    again = langgraph_worker.start_worker(checkpoints, "refund.refund", "refund-A-17",
                                          resume=True).result()
    return first, again, sim.World(world)


def test_try_this_2_killed_after_the_refunds_checkpoint_the_bank_is_asked_once(tmp_path):
    first, again, world = killed_then_resumed(tmp_path, CrashAt("refund", "after_checkpoint"))
    assert first.killed
    assert (again["replayed"], again["ran"]) == (["lookup", "refund"], ["email", "close"])
    assert (world.payments.calls(), world.payments.count()) == (1, 1)


@pytest.mark.parametrize("also_approve", [False, True], ids=["as-in-the-lesson", "try-this-3"])
def test_two_days_later_the_sweep_wakes_what_is_due(tmp_path, also_approve):
    import durable_lite as dl
    clock = dl.FakeClock()
    previous = refund_langgraph.set_clock(clock)
    saver = langgraph_support.open_saver(tmp_path / "checkpoints.sqlite")
    try:
        approval = langgraph_support.bind(refund_langgraph.refund_with_approval, saver)
        for order in ("A-101", "A-102"):
            refund_langgraph.start(approval, str(tmp_path / "world"), order, 250,
                                   f"refund-{order}")
        refund_langgraph.approve(approval, "refund-A-101")
        if also_approve:
            refund_langgraph.approve(approval, "refund-A-102")
        waiting = {t: v["waiting for"] for t, v in langgraph_support.waiting(approval).items()}
        assert waiting == {"refund-A-101": "cooling off",
                           "refund-A-102": "cooling off" if also_approve else "approval"}
        clock.advance(2 * 86400 + 1)
        assert sorted(refund_langgraph.wake_due(approval)) == ["refund-A-101", "refund-A-102"]
        results = {t: langgraph_support.result(approval, t) for t in waiting}
        assert results["refund-A-101"]["refunded"] is True
        assert results["refund-A-102"]["refunded"] is also_approve
    finally:
        refund_langgraph.set_clock(previous)
        langgraph_support.close_saver(saver)


# the tables the lesson prints -----------------------------------------------------------------
def test_the_engine_port_table_quotes_lines_that_are_really_in_their_modules():
    for row in concepts.ENGINE_PORT:
        assert [engine for engine, _, _ in row.lines] == list(concepts.ENGINE_COLUMNS)
        for engine, line, module in row.lines:
            source = inspect.getsource(importlib.import_module(f"durable_lite.{module}"))
            assert line in source, f"{row.concept}, {engine}: {line!r} is not in {module}"
        assert row.stays
    table = concepts.engine_port_table()
    assert list(table.columns) == ["concept", *concepts.ENGINE_COLUMNS, "what does not change"]
    assert len(table) == len(concepts.ENGINE_PORT)


def test_the_concept_maps_run_here_cells_name_real_tests_and_agree_with_langgraphs_list():
    ran = concepts.ran_here()
    assert {(e, c) for e, c, _ in ran} == {("LangGraph", "sleep"), ("LangGraph", "versioning")}
    for engine, concept, test in ran:
        filename, test_name = test.split("::")
        with open(os.path.join(ROOT, filename), encoding="utf-8") as f:
            assert re.search(rf"^def {test_name}\(", f.read(), re.M), test
        assert concepts.MAP[engine][concept].confirmed
        assert (engine, concept) not in concepts.unconfirmed()
        assert concepts.LANGGRAPH_RUN_HERE[concept].source == test
    assert len(concepts.unconfirmed()) == 4


def test_the_lessons_helpers_load_no_plotting_or_engine_at_import():
    import subprocess
    import sys
    code = ("import sys, durable_lite.lab.four_engines, durable_lite.engines.compare.crash_table\n"
            "loaded = [m for m in ('matplotlib', 'pandas', 'dbos', 'temporalio', 'langgraph')"
            " if m in sys.modules]\n"
            "assert not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# what a learner sees (issue "What a learner sees, round 2") ------------------------------------
# JupyterLab at 1100 x 800: the output area is 668 px wide with the file browser open, 920 px
# with it closed (measured in Chromium). An output wider than that is shrunk or scrolled.
OUTPUT_AREA_PX = 668


def _lesson_cells():
    with open(LESSON, encoding="utf-8") as f:
        return json.load(f)["cells"]


def test_the_crash_table_names_the_mode_of_every_langgraph_column():
    from durable_lite.engines.compare import crash_table as ct
    assert ct.LANGGRAPH_COLUMNS["LangGraph"] == "sync"
    labels = [ct.label(column) for column in ct.COLUMNS]
    assert labels[3:] == ["LangGraph (sync)", "LangGraph (async)", "LangGraph (exit)"]
    assert list(ct.committed().frame().columns) == labels


def test_the_heat_map_marks_only_cells_whose_counts_differ_and_fits_the_output_area():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    from matplotlib.text import Text

    import durable_lite as dl
    from durable_lite.engines.compare import crash_table as ct
    table = ct.committed()
    shown = table.shown_differences()
    # under "exit" every run starts over (differences()), but keys leave 7 of 12 cells at
    # durable_lite's counts: those carry no mark
    assert {col for _, col, _ in shown} == {"LangGraph (exit)"}
    assert len(shown) == 5 < len([d for d in table.differences() if d[1] == "LangGraph (exit)"])
    for case, column, effects in shown:
        base, cell = table.cell(case, "durable_lite"), table.cell(case, column)
        assert effects and all(cell[ct.COUNTED[e]] != base[ct.COUNTED[e]] for e in effects)
    fig = dl.lab.crash_heat_map(table)
    try:
        ax = fig.axes[0]
        assert len([p for p in ax.patches if isinstance(p, Rectangle)]) == len(shown)
        texts = [t.get_text() for t in ax.texts]
        assert texts.count(ct.KNOWN["LangGraph (exit)"].short) == len(shown)
        assert [t.get_text() for t in ax.get_xticklabels()][3] == "LangGraph\n(sync)"
        assert ax.get_title().startswith(table.finding())
        fig.canvas.draw()
        dpi = fig.dpi
        assert fig.get_figwidth() * dpi <= OUTPUT_AREA_PX
        sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()]
        assert min(sizes) * dpi / 72 >= 9, min(sizes)        # in px, shown at full size
    finally:
        plt.close(fig)
    (png,) = [o["data"]["image/png"] for c in _lesson_cells() if "crash_heat_map" in "".join(c["source"])
              for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    import base64
    import struct
    width, height = struct.unpack(">II", base64.b64decode(png)[16:24])
    assert width <= OUTPUT_AREA_PX, f"the saved heat map is {width} px wide"


def test_the_port_and_decision_tables_wrap_to_the_output_area_left_aligned():
    from html import escape

    from durable_lite.engines.compare import concepts
    from durable_lite.lab import four_engines
    port = four_engines.port_table()
    html = port._repr_html_()
    assert "width:100%" in html and "table-layout:fixed" in html
    cells = re.findall(r"<t[hd] style='([^']*)'", html)
    assert len(cells) == (len(concepts.ENGINE_PORT) + 1) * (len(concepts.ENGINE_COLUMNS) + 2)
    assert all("text-align:left" in c and "overflow-wrap:break-word" in c for c in cells)
    for row in concepts.ENGINE_PORT:
        assert escape(row.stays) in html
        assert all(escape(line) in html for _, line, _ in row.lines)
    assert "what does not change" in html
    assert repr(port) == concepts.engine_port_table().set_index("concept").to_string()
    widths = [float(w) for w in re.findall(r"<col style='width:([\d.]+)%'>", html)]
    assert len(widths) == len(concepts.ENGINE_COLUMNS) + 2 and abs(sum(widths) - 100) < 0.5
    saved = {"".join(c["source"]): c for c in _lesson_cells() if c["cell_type"] == "code"}
    for source in ("four_engines.port_table()", "four_engines.choosing_table()"):
        (output,) = saved[source]["outputs"]
        assert "table-layout:fixed" in "".join(output["data"]["text/html"]), source
