"""How many learners one machine serves: `make hub` under a simulated class, measured.

    .venv/bin/python benchmarks/hub_capacity.py [--levels 1 2 4 6 8] [--budget 1200]
                                                [--engines] [--json PATH]

For each class size N (the levels, smallest first), N learners sign in to a real hub on
127.0.0.1 at once, each in their own thread of cookies, and each, through the hub's proxy
and their own server, does what the first morning of the course does: runs every code cell
of lessons 00, 01, 02 and 03 in a kernel (Jupyter's own websocket protocol, as JupyterLab
does), then answers exercise 01's question 2 and runs its check. Every cell is timed.

- *Slowdown*: each cell's time at N over the same cell's time when one learner ran alone
  (N = 1), for cells that take 50 ms or more alone (shorter ones are noise). A class size
  is served while the median slowdown stays at or under 2x; the run stops at the first
  size past that, or when its time budget is spent.
- *Memory per learner*: the proportional set size (PSS: shared pages split among their
  users) of every process of a learner's (their server, its kernels and whatever those
  start, found by the JUPYTERHUB_USER in their environment), read from /proc: the peak
  while the lessons ran (a server and one lesson's kernel), and the server alone after.
- *Lessons 14 and 15* (--engines): one learner alone runs each through the hub; its wall
  time and the peak PSS of the learner's processes while it ran (DBOS and a PostgreSQL; a
  Temporal dev server and LangGraph) say what each learner adds in that hour. Cells that
  raised are listed (some lessons raise on purpose, in cells tagged raises-exception).

Everything it starts is stopped at the end (the hub, and so every server it started; see
durable_lite/hub/). Results go to benchmarks/results/hub_capacity.json. The load average
is printed beside each size: on a shared machine other work slows the cells too.
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from hub_notebooks import EXERCISE, QUESTION, answer_cell, check_cell, write_answer  # noqa: E402
from hub_support import Kernel, Learner, RunningHub  # noqa: E402

MORNING = ["00_welcome", "01_the_double_refund", "02_checkpoint_every_step",
           "03_the_window_and_idempotency"]
ENGINES = ["14_graduating_to_a_real_engine", "15_the_same_run_on_temporal_and_langgraph"]
NOISE = 0.05                     # seconds: cells faster than this alone are not compared


def code_cells(path: Path) -> list:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


async def morning(learner: Learner, my_work: Path) -> dict:
    """Lessons 00-03, then exercise 01's q2 answered and checked: {cell key: seconds}."""
    times = {}
    for lesson in MORNING:
        kernel = await Kernel(learner, f"notebooks/{lesson}.ipynb").start()
        for i, code in enumerate(code_cells(ROOT / "notebooks" / f"{lesson}.ipynb")):
            times[f"{lesson}[{i}]"] = await kernel.run(code)
        await kernel.stop()
        learner.errors = getattr(learner, "errors", []) + [(lesson, *e) for e in kernel.errors]
    notebook = write_answer(my_work, right=True)
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    kernel = await Kernel(learner, f"my_work/{notebook.name}").start()
    for i in (1, answer_cell(cells), check_cell(cells)):
        times[f"{EXERCISE}[{i}]"] = await kernel.run("".join(cells[i]["source"]))
    await kernel.stop()
    return times


# memory ------------------------------------------------------------------------------------
def pss(pid: int) -> int:
    """Proportional set size in bytes (0 if the process is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def learner_pss(name: str) -> int:
    """PSS of every process a learner's server started, found by the JUPYTERHUB_USER its
    environment carries: a PostgreSQL that pg_ctl made a daemon (its parent is init) too."""
    marker = f"JUPYTERHUB_USER={name}".encode()
    total = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    total += pss(int(entry))
            except OSError:
                continue
    return total


class PeakWatch:
    """The highest PSS of a learner's processes, sampled every half second in a thread."""

    def __init__(self, name: str):
        self.name, self.peak, self.done = name, 0, threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        while not self.done.wait(0.5):
            self.peak = max(self.peak, learner_pss(self.name))

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        return self.peak


# one class size ----------------------------------------------------------------------------
async def one_level(hub: RunningHub, n: int, level: int) -> dict:
    names = [f"l{level}n{i}" for i in range(n)]
    learners = [Learner(hub, name) for name in names]
    started = time.monotonic()
    await asyncio.gather(*(asyncio.to_thread(lr.sign_in) for lr in learners))
    spawns = await asyncio.gather(*(asyncio.to_thread(lr.wait_for_server) for lr in learners))
    spawned = time.monotonic() - started
    load_before = os.getloadavg()[0]
    watches = [PeakWatch(name) for name in names]
    results = await asyncio.gather(*(morning(lr, hub.hub_folder / "users" / lr.name / "my_work")
                                     for lr in learners))
    peaks = [w.stop() for w in watches]
    memory = [learner_pss(name) for name in names]
    errors = [e for lr in learners for e in getattr(lr, "errors", [])]
    # the servers stop, as the idle culler would stop them, so the next size starts afresh
    for lr in learners:
        await asyncio.to_thread(_stop_server, hub, lr)
    return {"n": n, "spawn_seconds": spawns, "all_spawned_seconds": spawned,
            "cells": results, "pss_bytes": memory, "pss_peak_bytes": peaks, "errors": errors,
            "load": [load_before, os.getloadavg()[0]], "seconds": time.monotonic() - started}


def _stop_server(hub: RunningHub, learner: Learner):
    import urllib.request
    token_request = urllib.request.Request(f"{hub.base}/hub/api/users/{learner.name}/server",
                                           method="DELETE",
                                           headers={"Referer": f"{hub.base}/hub/home"})
    xsrf = next((c.value for c in learner.jar if c.name == "_xsrf" and c.path == "/hub/"), "")
    token_request.add_header("X-XSRFToken", xsrf)
    try:
        learner.opener.open(token_request, timeout=120)
    except Exception:
        pass


def slowdowns(alone: dict, results: list) -> list:
    out = []
    for times in results:
        for key, seconds in times.items():
            base = alone.get(key)
            if base and base >= NOISE:
                out.append(seconds / base)
    return out


async def engines_alone(hub: RunningHub) -> dict:
    learner = Learner(hub, "engines")
    await asyncio.to_thread(learner.sign_in)
    await asyncio.to_thread(learner.wait_for_server)
    out = {}
    for lesson in ENGINES:
        before = learner_pss("engines")
        watch = PeakWatch("engines")
        kernel = await Kernel(learner, f"notebooks/{lesson}.ipynb").start()
        started = time.monotonic()
        for code in code_cells(ROOT / "notebooks" / f"{lesson}.ipynb"):
            await kernel.run(code)
        seconds = time.monotonic() - started
        await kernel.stop()
        out[lesson] = {"seconds": seconds, "pss_before": before, "pss_peak": watch.stop(),
                       "errors": kernel.errors}
        print(f"  {lesson}: {seconds:.1f} s, peak {out[lesson]['pss_peak'] / 2**20:.0f} MiB "
              f"(server alone {before / 2**20:.0f} MiB); cells that raised: "
              f"{kernel.errors or 'none'}", file=sys.stderr, flush=True)
    await asyncio.to_thread(_stop_server, hub, learner)
    return out


async def main_async(args) -> dict:
    report = {"cpus": os.cpu_count(), "levels": [], "engines": None,
              "memory_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")}
    deadline = time.monotonic() + args.budget
    with tempfile.TemporaryDirectory(prefix="durable-lite-hub-capacity-") as folder:
        hub = RunningHub(Path(folder)).start()
        try:
            report["hub_ready_seconds"] = hub.ready_seconds
            alone = None
            for level, n in enumerate(args.levels):
                if time.monotonic() > deadline:
                    print(f"budget spent before {n} learners", file=sys.stderr)
                    break
                result = await one_level(hub, n, level)
                if alone is None:
                    alone = {k: v for k, v in result["cells"][0].items()}
                ratios = slowdowns(alone, result["cells"])
                result["slowdown_median"] = statistics.median(ratios)
                result["slowdown_p90"] = sorted(ratios)[int(0.9 * (len(ratios) - 1))]
                result["morning_seconds"] = [sum(t.values()) for t in result["cells"]]
                report["levels"].append(result)
                print(f"{n:3d} learners: spawn {max(result['spawn_seconds']):.1f} s (slowest), "
                      f"lessons 00-03 + check {statistics.median(result['morning_seconds']):.0f} s "
                      f"each, slowdown median {result['slowdown_median']:.2f}x p90 "
                      f"{result['slowdown_p90']:.2f}x, PSS per learner "
                      f"{statistics.median(result['pss_bytes']) / 2**20:.0f} MiB idle, "
                      f"{statistics.median(result['pss_peak_bytes']) / 2**20:.0f} MiB peak, load "
                      f"{result['load'][0]:.1f}->{result['load'][1]:.1f}; cells that raised: "
                      f"{len(result['errors'])}", file=sys.stderr, flush=True)
                if result["slowdown_median"] > 2 and n > 1:
                    break
            if args.engines:
                report["engines"] = await engines_alone(hub)
        finally:
            hub.stop()
            hub.kill_everything_left()
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 6, 8])
    parser.add_argument("--budget", type=float, default=1200.0,
                        help="seconds; no new class size starts after this")
    parser.add_argument("--engines", action="store_true", help="also lessons 14 and 15, alone")
    parser.add_argument("--json", default=str(HERE / "results" / "hub_capacity.json"))
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("make hub, and so this benchmark, is for Linux", file=sys.stderr)
        return 1
    report = asyncio.run(main_async(args))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1))
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
