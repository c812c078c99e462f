"""The reliability arithmetic of a plan of steps, and a simulation that checks it.

A run of `n` steps, each succeeding with probability `p`:

    first try, no retries             p ** n
    up to k attempts of EACH step     (1 - (1 - p) ** k) ** n
    up to k attempts of the WHOLE run 1 - (1 - p ** n) ** k      (restart from the top)

`simulate(...)` checks these against real runs: the same workflow (n named steps, each one
call to a tool that fails with probability 1 - p, like `World.tools`) run many times, either by
`dl.Engine` with a per-step `dl.Retry` on a `FakeClock` (backoff costs no real time), or by
`dl.naive.NaiveRunner`, which restarts the whole run. It counts runs that finish and every
tool call made, failed ones included: the price of each strategy.

`ReliabilityModel` holds the logic behind the `ReliabilityExplorer` widget (sliders for p,
n and k); it is plain Python so tests can drive it without a browser.
"""

import functools
import html
import itertools
import random
import time
from dataclasses import dataclass
from typing import Dict, Optional

from ..clock import FakeClock, SequentialIds
from ..engine import Engine
from ..naive import NaiveRunner
from ..policy import Retry, Step
from ..sim import ToolError
from ..store import MemoryStore
from ..workflow import workflow

DURABLE = "per-step retry"
RESTART = "restart from the top"
STRATEGIES = (DURABLE, RESTART)


# the arithmetic ---------------------------------------------------------------------------
def first_try_rate(p: float, n: int) -> float:
    """Chance that all n steps succeed at their first attempt."""
    return p ** n


def step_success_rate(p: float, k: int) -> float:
    """Chance that one step succeeds within k attempts: it fails only if all k fail."""
    return 1 - (1 - p) ** k


def per_step_retry_rate(p: float, n: int, k: int) -> float:
    """Chance that a run finishes when each step may be attempted up to k times."""
    return step_success_rate(p, k) ** n


def restart_rate(p: float, n: int, k: int) -> float:
    """Chance that a run finishes when the whole run may be attempted up to k times."""
    return 1 - (1 - p ** n) ** k


def finish_rate(strategy: str, p: float, n: int, k: int) -> float:
    return per_step_retry_rate(p, n, k) if strategy == DURABLE else restart_rate(p, n, k)


def expected_executions(strategy: str, p: float, n: int, k: int) -> float:
    """Expected step executions (tool calls, failed ones included) per run.

    Per-step retry: step j is reached only if steps 1..j-1 succeeded, and then costs
    1 + (1-p) + ... + (1-p)**(k-1) attempts on average.
    Restart: one attempt executes step j only if steps 1..j-1 succeeded in that attempt;
    attempt a happens only if the a-1 attempts before it all failed.
    """
    q = 1 - p
    if strategy == DURABLE:
        per_step = sum(q ** i for i in range(k))
        reach = step_success_rate(p, k)
        return per_step * sum(reach ** j for j in range(n))
    per_attempt = sum(p ** j for j in range(n))
    return per_attempt * sum((1 - p ** n) ** a for a in range(k))


def expected_executions_per_finished_run(strategy: str, p: float, n: int, k: int) -> float:
    """Tool calls per *finished* run: every run's calls, the failed runs' included, paid for
    the runs that finish. Over many runs, calls per run ÷ the chance of finishing."""
    return expected_executions(strategy, p, n, k) / finish_rate(strategy, p, n, k)


# the simulation ---------------------------------------------------------------------------
class FlakyTool:
    """The simulation's tool: each call fails with probability `1 - p`, and every call,
    failed or not, is counted. Which calls fail follows a pseudo-random sequence from
    `seed`: the n-th call fails or works the same way whichever strategy makes it.

    It is `World.tools` without the ledger on disk: a simulation makes thousands of calls,
    and writing each one to SQLite was most of its time (a slider move at n=30 took 1.3 to
    6.9 s on two busy cores, this about a tenth of it)."""

    def __init__(self, p: float, seed: int = 0):
        self.failure_rate = 1 - p
        self.random = random.Random(seed)
        self.calls = 0

    def call(self, name: str) -> dict:
        self.calls += 1
        if self.random.random() < self.failure_rate:
            raise ToolError(f"{name} failed (call {self.calls})")
        return {"tool": name, "call": self.calls}


_tools: Dict[str, FlakyTool] = {}       # the tool each running simulation uses, by its id


def _call_tool(tool_id, name):
    return _tools[tool_id].call(name)


@workflow("flaky-plan", version=1)
def flaky_plan(ctx, tool_id, n, k):
    """n named steps, each one flaky tool call, each retried up to k times by the engine.
    (Under the naive runner `ctx.step` just calls the function: no per-step retry.)"""
    retry = Retry(max_attempts=k, initial=1.0, multiplier=2.0, cap=60.0, jitter=True)
    for i in range(1, n + 1):
        ctx.step(Step(f"task-{i}", retry=retry), _call_tool, tool_id, f"task-{i}")
    return {"tasks": n}


@dataclass(frozen=True)
class Tally:
    """What `runs` runs of one strategy did."""

    strategy: str
    p: float
    n: int
    k: int
    runs: int
    finished: int
    executions: int        # every tool call, failed ones included

    @property
    def finish_rate(self) -> float:
        return self.finished / self.runs

    @property
    def executions_per_run(self) -> float:
        return self.executions / self.runs

    @property
    def executions_per_finished_run(self) -> Optional[float]:
        """Every tool call the strategy made, failed runs' included, shared among the runs
        that finished: what one finished run really costs. None if no run finished."""
        return self.executions / self.finished if self.finished else None

    @property
    def predicted_rate(self) -> float:
        return finish_rate(self.strategy, self.p, self.n, self.k)

    @property
    def predicted_executions(self) -> float:
        return expected_executions(self.strategy, self.p, self.n, self.k)

    @property
    def predicted_executions_per_finished_run(self) -> float:
        """The formula's tool calls per run divided by its chance of finishing."""
        return expected_executions_per_finished_run(self.strategy, self.p, self.n, self.k)

    def row(self) -> dict:
        """One table row: the formula next to what the simulation saw."""
        return {"strategy": self.strategy, "p": self.p, "n": self.n, "k": self.k,
                "runs": self.runs, "finished": self.finished,
                "finish rate (formula)": round(self.predicted_rate, 4),
                "finish rate (simulated)": round(self.finish_rate, 4),
                "tool calls per run (formula)": round(self.predicted_executions, 2),
                "tool calls per run (simulated)": round(self.executions_per_run, 2)}


def simulate(strategy: str, p: float, n: int, k: int, runs: int = 200, seed: int = 0) -> Tally:
    """Run the flaky plan `runs` times under one strategy; count finishes and tool calls.

    Every simulation gets a fresh tool, so the same arguments always give the same numbers:
    the tool's failures depend only on the seed and the call count. (The explorer asks for
    the same arguments again whenever a slider comes back to a value; `_simulated` keeps
    the answers.)
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r} is not one of {STRATEGIES}")
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    return _simulated(strategy, float(p), int(n), int(k), int(runs), int(seed))


@functools.lru_cache(maxsize=256)
def _simulated(strategy, p, n, k, runs, seed) -> Tally:
    tool_id = f"tool-{next(_ids)}"
    tool = _tools[tool_id] = FlakyTool(p, seed)
    try:
        if strategy == DURABLE:
            finished = _run_durable(tool_id, n, k, runs, seed)
        else:
            finished = _run_restart(tool_id, n, k, runs, seed)
    finally:
        _tools.pop(tool_id)
    return Tally(strategy, p, n, k, runs, finished, tool.calls)


_ids = itertools.count(1)


def _run_durable(tool_id, n, k, runs, seed) -> int:
    engine = Engine(MemoryStore(), FakeClock(), ids=SequentialIds("run"), seed=seed)
    return sum(engine.start(flaky_plan, tool_id, n, k).status == "completed" for _ in range(runs))


def _run_restart(tool_id, n, k, runs, seed) -> int:
    runner = NaiveRunner(max_attempts=k, clock=FakeClock(), ids=SequentialIds("run"), seed=seed)
    return sum(runner.run(flaky_plan, tool_id, n, k).status == "completed" for _ in range(runs))


def compare(p: float, n: int, k: int, runs: int = 200, seed: int = 0) -> Dict[str, Tally]:
    """Both strategies on the same parameters: {strategy: Tally}."""
    return {s: simulate(s, p, n, k, runs, seed) for s in STRATEGIES}


def percent(fraction: float, decimals: int = 0) -> str:
    """A share as a percentage that never claims more than it is: 0.999 is "99.9%", not
    "100%" (nor 0.001 "0%"). Rounding decides only between values that are not 0 or 1."""
    text = f"{fraction:.{decimals}%}"
    while 0 < fraction < 1 and float(text[:-1]) in (0.0, 100.0):
        if decimals == 4:                       # closer than that: say so in words
            return "nearly 100%" if fraction > 0.5 else "nearly 0%"
        decimals += 1
        text = f"{fraction:.{decimals}%}"
    return text


# plots ------------------------------------------------------------------------------------
def plot_finish_rates(p: float = 0.95, ks=(1, 2, 3), n_max: int = 30, ax=None,
                      restart: bool = False):
    """Finish rate against the number of steps, one curve per k (k=1 is pⁿ).

    With restart=True, dashed curves show the same k spent on restarting the whole run.
    Returns the matplotlib Axes.
    """
    ax = ax or _new_axes()
    ns = list(range(1, n_max + 1))
    for k in ks:
        color = color_for(k)
        label = f"k={k}: first try only (pⁿ)" if k == 1 else f"k={k} attempts per step"
        ax.plot(ns, [per_step_retry_rate(p, n, k) for n in ns], color=color, lw=2, label=label)
        if restart and k > 1:
            ax.plot(ns, [restart_rate(p, n, k) for n in ns], color=color, lw=1.5, ls="--",
                    label=f"k={k} restarts of the whole run")
    ax.set_xlabel("steps in the run (n)")
    ax.set_ylabel("runs that finish")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(1, n_max)
    ax.xaxis.set_major_locator(_integers())
    ax.yaxis.set_major_formatter(_percent())
    ax.grid(alpha=0.3)
    # Beside the plot, not on it: with a low p the curves fill every corner of the axes.
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, fontsize=9,
              frameon=False)
    return ax


def plot_simulation(tallies, ax_rate=None, ax_cost=None):
    """Bars: formula vs simulation for each Tally, finish rate and tool calls per run."""
    import matplotlib.pyplot as plt

    if ax_rate is None or ax_cost is None:
        _, (ax_rate, ax_cost) = plt.subplots(1, 2, figsize=(10, 3.6))
    labels = [f"{t.strategy}\nk={t.k}" for t in tallies]
    xs = range(len(tallies))
    width = 0.38
    for ax, formula, seen, title in (
            (ax_rate, [t.predicted_rate for t in tallies], [t.finish_rate for t in tallies],
             "runs that finish"),
            (ax_cost, [t.predicted_executions for t in tallies],
             [t.executions_per_run for t in tallies], "tool calls per run")):
        bars = [ax.bar([x - width / 2 for x in xs], formula, width, color="#aab7c4", label="formula"),
                ax.bar([x + width / 2 for x in xs], seen, width, color="#2471a3", label="simulated")]
        for group in bars:
            ax.bar_label(group, labels=[percent(b.get_height(), 1) if ax is ax_rate
                                        else f"{b.get_height():.2f}" for b in group],
                         fontsize=7, padding=2)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    ax_rate.set_ylabel("share of all runs")
    ax_cost.set_ylabel("tool calls, failed ones included")
    ax_rate.yaxis.set_major_formatter(_percent())
    ax_rate.set_ylim(0, 1.12)
    ax_cost.margins(y=0.12)
    ax_rate.legend(fontsize=8, loc="lower left")
    return ax_rate, ax_cost


# One colour per number of attempts, k=1 to 6 (the explorer's slider), none of them the
# colour of restarting from the top, which the explorer draws beside whichever k you pick.
RESTART_COLOUR = "#17202a"
_PALETTE = ("#c0392b", "#e67e22", "#27ae60", "#2471a3", "#7d3c98", "#16a085")


def color_for(k: int) -> str:
    """One colour per number of attempts, the same in every plot of the lesson."""
    return _PALETTE[(k - 1) % len(_PALETTE)]


def _integers():
    from matplotlib.ticker import MaxNLocator
    return MaxNLocator(integer=True)


def _new_axes():
    import matplotlib.pyplot as plt
    return plt.subplots(figsize=(7, 4))[1]


def _percent():
    from matplotlib.ticker import PercentFormatter
    return PercentFormatter(1.0)


FORMULA_COLOUR = "#f1c40f"      # the formula's tick on the explorer's cost bars


def _calls(value: float) -> str:
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}" if value < 1e6 else f"{value:.1e}"


def _plot_cost_per_finished_run(ax, tallies: Dict[str, Tally], colors: dict, runs: int):
    """The explorer's right panel: what one FINISHED run costs each strategy, in tool
    calls: every call its runs made, the failed runs' included, over the runs that
    finished. Per run, restarting can look as cheap as retrying each step (its failed runs
    give up early); per finished run it never is. A bar where some run finished, its
    number on it; the formula as a yellow tick, or an arrow at the top when it is far
    above the bars (a strategy that almost never finishes pays almost without limit)."""
    names = list(tallies)
    seen = [tallies[s].executions_per_finished_run for s in names]
    formula = [tallies[s].predicted_executions_per_finished_run for s in names]
    known = [v for v in seen if v is not None]
    scale = max(known) if known else max(tallies[s].executions_per_run for s in names)
    top = 1.2 * max([scale, *(f for f in formula if f <= 2 * scale)])
    for x, (name, value, expected) in enumerate(zip(names, seen, formula)):
        if value is None:
            ax.text(x, 0.04 * top, f"no run\nfinished\n(of {runs})", ha="center", va="bottom",
                    fontsize=9, color="#333333")
        else:
            ax.bar(x, value, width=0.8, color=colors[name])
            inside = value >= 0.2 * top
            ax.text(x, value / 2 if inside else max(value, min(expected, top)) + 0.03 * top,
                    _calls(value), ha="center", va="center" if inside else "bottom",
                    color="white" if inside else "#222222", fontsize=10, weight="bold")
        if expected <= top:
            ax.plot([x], [expected], "_", color=FORMULA_COLOUR, ms=40, mew=3)
        else:                   # off the scale: say how far
            ax.annotate(f"formula\n{_calls(expected)} ↑", (x, top), xytext=(0, -3),
                        textcoords="offset points", ha="center", va="top", fontsize=8.5,
                        color="#7d6608", weight="bold")
    ax.set_ylim(0, top)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([name.replace(" from", "\nfrom") for name in names], fontsize=9)
    ax.set_ylabel("tool calls per finished run")
    ax.set_title("tool calls per finished run\n(failed runs' calls too; yellow: formula)",
                 fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    if not known:               # no bar to read a scale against
        ax.set_yticks([])


# the explorer -----------------------------------------------------------------------------
DPI = 96            # the explorer's PNG: 8.4 in × 96 = about 800 px, a notebook column


class ReliabilityModel:
    """Sliders' state and everything derived from it: formulas and a fresh simulation."""

    def __init__(self, p: float = 0.95, n: int = 6, k: int = 3, runs: int = 200, seed: int = 0):
        self.runs, self.seed = runs, seed
        self.p, self.n, self.k = p, n, k
        self.tallies: Dict[str, Tally] = {}
        self.simulations = 0
        self.set()

    def set(self, p: Optional[float] = None, n: Optional[int] = None, k: Optional[int] = None):
        """Change any of p, n, k; recompute the formulas and re-run the simulation."""
        self.p = self.p if p is None else float(p)
        self.n = self.n if n is None else int(n)
        self.k = self.k if k is None else int(k)
        self.tallies = compare(self.p, self.n, self.k, self.runs, self.seed)
        self.simulations += 1
        return self

    @property
    def formulas(self) -> dict:
        p, n, k = self.p, self.n, self.k
        return {"first try": first_try_rate(p, n), DURABLE: per_step_retry_rate(p, n, k),
                RESTART: restart_rate(p, n, k)}

    def summary(self) -> dict:
        out = {"p": self.p, "n": self.n, "k": self.k, "runs": self.runs,
               "first try (formula)": self.formulas["first try"]}
        for s, t in self.tallies.items():
            out[f"{s} (formula)"] = t.predicted_rate
            out[f"{s} (simulated)"] = t.finish_rate
            out[f"{s}: tool calls per finished run"] = t.executions_per_finished_run
        return out

    def figure(self):
        """The explorer's picture: curves against n, simulated points at the chosen n,
        and what a finished run costs each strategy in tool calls (the failed runs' calls
        included). A matplotlib Figure (no pyplot state).

        Sized for a notebook column (about 800 px wide): the legend sits under the curves,
        never on them, in text as large as the axis labels. The margins are fixed rather
        than computed by a layout engine, which took half the time of every redraw."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(8.4, 4.9))
        ax, ax_cost = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
        fig.subplots_adjust(left=0.08, right=0.985, top=0.885, bottom=0.33, wspace=0.28)
        n_max = max(20, self.n + 5)
        plot_finish_rates(self.p, ks=sorted({1, self.k}), n_max=n_max, ax=ax, restart=True)
        colors = {DURABLE: color_for(self.k), RESTART: RESTART_COLOUR}
        for s, t in self.tallies.items():
            ax.plot([self.n], [t.finish_rate], marker="o" if s == DURABLE else "s", ms=9,
                    ls="none", color=colors[s], markeredgecolor="white",
                    label=f"simulated, {s}: {percent(t.finish_rate, 1)}")
        ax.axvline(self.n, color="#999", lw=0.8)
        handles, labels = ax.get_legend_handles_labels()
        ax.get_legend().remove()
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.005), ncol=2,
                   fontsize=9, frameon=False)
        ax.set_title(f"p={self.p:.3f}, k={self.k}: at n={self.n}, per-step retry\n"
                     f"finishes {percent(self.tallies[DURABLE].finish_rate, 1)} of runs", fontsize=10)
        _plot_cost_per_finished_run(ax_cost, self.tallies, colors, self.runs)
        return fig

    def png(self) -> bytes:
        import io
        buffer = io.BytesIO()
        self.figure().savefig(buffer, format="png", dpi=DPI)
        return buffer.getvalue()

    def __repr__(self):
        return f"ReliabilityModel(p={self.p}, n={self.n}, k={self.k}, runs={self.runs})"


_CELL = "padding:2px 12px; text-align:right"


def _readout_html(model: ReliabilityModel) -> str:
    """The numbers under the picture, as a real table (one notation: pⁿ)."""
    f = model.formulas
    rows = [("first try only (p<sup>n</sup>)", f["first try"], None, None)]
    for s in STRATEGIES:
        t = model.tallies[s]
        rows.append((f"{s}, k={model.k}", f[s], t.finish_rate,
                     "none finished" if t.finished == 0 else f"{t.executions_per_finished_run:.2f}"))
    head = "".join(f"<th style='{_CELL}; border-bottom:1px solid #999'>{h}</th>"
                   for h in ("finish rate: formula", "simulated", "tool calls per finished run"))
    body = "".join(
        f"<tr><td style='{_CELL}; text-align:left'>{name}</td>"
        f"<td style='{_CELL}'>{percent(formula, 2)}</td>"
        f"<td style='{_CELL}'>{'–' if seen is None else percent(seen, 1)}</td>"
        f"<td style='{_CELL}'>{'–' if calls is None else calls}</td></tr>"
        for name, formula, seen, calls in rows)
    return ("<table style='border-collapse:collapse; font-variant-numeric:tabular-nums'>"
            f"<tr><th style='{_CELL}; border-bottom:1px solid #999'></th>{head}</tr>"
            f"{body}</table>")


def _status_html(model: ReliabilityModel, seconds: Optional[float] = None) -> str:
    took = "" if seconds is None else f", recomputed in {seconds:.1f} s"
    return (f"<span style='color:#333'>p={model.p:.3f}, n={model.n}, k={model.k}: "
            f"{model.runs} simulated runs of each strategy{took}</span>")


class ReliabilityExplorer:
    """Sliders for p, n and k; the curves, simulated points and cost redraw on release.

    While a change is being simulated the status line says "recomputing…", and then how
    long it took; the sliders wrap onto new lines rather than shrink when the window is
    narrow."""

    def __init__(self, p: float = 0.95, n: int = 6, k: int = 3, runs: int = 200, seed: int = 0,
                 model: Optional[ReliabilityModel] = None):
        import ipywidgets as w

        self.model = model or ReliabilityModel(p, n, k, runs, seed)
        m = self.model
        # A slider in a flex row shrinks until its track vanishes; give each one a width it
        # keeps, and let the row wrap instead.
        def slider(kind, description, **options):
            return kind(description=description, continuous_update=False,
                        style={"description_width": "9.5em"},
                        layout=w.Layout(min_width="320px", width="360px", flex="1 1 360px"),
                        **options)

        self.p = slider(w.FloatSlider, "p (step succeeds)", value=m.p, min=0.5, max=0.999,
                        step=0.001, readout_format=".3f")
        self.n = slider(w.IntSlider, "n (steps)", value=m.n, min=1, max=30)
        self.k = slider(w.IntSlider, "k (attempts)", value=m.k, min=1, max=6)
        self.status = w.HTML()
        self.image = w.Image(format="png", layout=w.Layout(max_width="100%", height="auto"))
        self.readout = w.HTML()
        self.sliders = w.HBox([self.p, self.n, self.k],
                              layout=w.Layout(flex_flow="row wrap", width="100%"))
        self.panel = w.VBox([self.sliders, self.status, self.image, self.readout])
        # Stable names for the parts, for tests in a real browser.
        for part, name in ((self.panel, "dl-reliability-explorer"), (self.p, "dl-slider-p"),
                           (self.n, "dl-slider-n"), (self.k, "dl-slider-k"),
                           (self.status, "dl-status"), (self.image, "dl-plot"),
                           (self.readout, "dl-readout")):
            part.add_class(name)
        for s in (self.p, self.n, self.k):
            s.observe(self._on_change, names="value")
        self.refresh()

    def _on_change(self, _change):
        # Sent to the browser at once, so the learner sees the work start (a simulation of
        # hundreds of runs takes a moment); refresh() replaces it with the new numbers.
        self.status.value = ("<span style='color:#b35900'>recomputing… "
                             f"({2 * self.model.runs} simulated runs)</span>")
        try:
            started = time.perf_counter()
            self.model.set(p=self.p.value, n=self.n.value, k=self.k.value)
            self.refresh(time.perf_counter() - started)
        except Exception as exc:  # shown in the panel: a callback's error is otherwise lost
            self.status.value = (f"<span style='color:#c0392b'>could not recompute: "
                                 f"{html.escape(type(exc).__name__)}: {html.escape(str(exc))}</span>")

    def refresh(self, started_seconds_ago: Optional[float] = None):
        """Redraw from the model; with the seconds a change has taken so far, the status
        line says how long the whole recompute took (so a learner knows what to expect)."""
        began = time.perf_counter()
        self.image.value = self.model.png()
        self.readout.value = _readout_html(self.model)
        seconds = None if started_seconds_ago is None else \
            started_seconds_ago + time.perf_counter() - began
        self.status.value = _status_html(self.model, seconds)

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.panel._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)       # short and stable for notebook diffs
        return bundle

    def __repr__(self):
        m = self.model
        return f"ReliabilityExplorer(p={m.p}, n={m.n}, k={m.k}, runs={m.runs})"
