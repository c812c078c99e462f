"""A budget meter for one run, and the two plots of the lesson on budgets.

`BudgetGauge` is the logic: given a `dl.Budget` and a `Run` snapshot, how full is each
limit? `BudgetMeter` shows a gauge as progress bars. It reads the run from the store —
`engine.get(run_id)`, whose `steps` and `cost` count every step the run has executed over
its whole life — so the bars fill across crashes and resumes exactly as the engine's own
budget check sees them. Attach it to an engine (it hooks `engine.on_step`) and the bars
move while the run runs; or call `meter.poll()` whenever you like.

    meter = dl.lab.BudgetMeter(engine, "agent-1", dl.Budget(max_steps=200, max_cost=0.50))
    meter.attach()                      # refresh as steps execute
    engine.start(agent, ..., run_id="agent-1", budget=meter.budget)

Plots: `plot_spend` (cumulative steps and dollars after each attempt, for several runs)
and `plot_backoff` (retry delays with and without jitter, from `dl.Retry.delay`).
"""

import html
import random
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from ..errors import UnknownRunError
from ..policy import Budget, Retry
from ..run import Run


@dataclass
class BudgetGauge:
    """How much of `budget` a run has used. Limits that are None are simply not shown."""

    budget: Budget
    steps: int = 0
    cost: float = 0.0
    status: Optional[str] = None
    halt_reason: Optional[str] = None
    samples: List[Tuple[int, float]] = field(default_factory=list)   # (steps, cost) per update

    def update(self, run: Run) -> "BudgetGauge":
        self.steps, self.cost = run.steps, run.cost
        self.status, self.halt_reason = run.status, run.halt_reason
        if not self.samples or self.samples[-1] != (run.steps, run.cost):
            self.samples.append((run.steps, run.cost))
        return self

    @staticmethod
    def _fraction(used, limit) -> Optional[float]:
        if limit is None:
            return None
        return used / limit if limit else 1.0

    @property
    def steps_fraction(self) -> Optional[float]:
        return self._fraction(self.steps, self.budget.max_steps)

    @property
    def cost_fraction(self) -> Optional[float]:
        return self._fraction(self.cost, self.budget.max_cost)

    @property
    def over(self) -> bool:
        """True if a limit has been passed (possible only if nothing enforced it)."""
        return any(f is not None and f > 1 for f in (self.steps_fraction, self.cost_fraction))

    def lines(self) -> List[str]:
        out = []
        if self.budget.max_steps is not None:
            out.append(f"steps {self.steps} / {self.budget.max_steps} ({self.steps_fraction:.0%})")
        if self.budget.max_cost is not None:
            out.append(f"cost ${self.cost:.4f} / ${self.budget.max_cost:.2f} ({self.cost_fraction:.0%})")
        if self.status is not None:
            out.append(f"status {self.status}" + (f": {self.halt_reason}" if self.halt_reason else ""))
        return out


class BudgetMeter:
    """Progress bars for one run's steps and cost against a budget.

    `budget` is the limit to draw against: normally the same `dl.Budget` you pass to
    `engine.start`. Drawing a run that has no budget against one shows what a limit would
    have said: the bar fills and the text turns red when the run goes past it.
    `every`: refresh on every n-th executed step (reading the run costs one store query).
    """

    def __init__(self, engine, run_id: str, budget: Budget, every: int = 1):
        import ipywidgets as w

        if budget.max_steps is None and budget.max_cost is None:
            raise ValueError("BudgetMeter needs a budget with max_steps or max_cost to draw")
        self.engine, self.run_id, self.budget, self.every = engine, run_id, budget, max(1, every)
        self.gauge = BudgetGauge(budget)
        self.polls = 0
        self._seen = 0
        self._previous_hook = None
        self._attached_to = None
        bar = dict(layout=w.Layout(width="320px"), style={"description_width": "60px"})
        self.steps_bar = w.IntProgress(min=0, max=budget.max_steps or 1, description="steps",
                                       **bar)
        self.cost_bar = w.FloatProgress(min=0.0, max=budget.max_cost or 1.0, description="cost",
                                        **bar)
        self.text = w.HTML()
        bars = [b for b, limit in ((self.steps_bar, budget.max_steps),
                                   (self.cost_bar, budget.max_cost)) if limit is not None]
        self.panel = w.VBox([w.HTML(f"<b>budget of <code>{html.escape(run_id)}</code></b>"),
                             *bars, self.text])
        # Stable names for the parts, for tests in a real browser.
        for part, name in ((self.panel, "dl-budget-meter"), (self.steps_bar, "dl-budget-steps"),
                           (self.cost_bar, "dl-budget-cost"), (self.text, "dl-budget-text")):
            part.add_class(name)
        self.poll()

    # reading the run ----------------------------------------------------------------------
    def poll(self) -> BudgetGauge:
        """Read the run from the store and redraw. Before the run exists, draw zeros."""
        self.polls += 1
        try:
            self.gauge.update(self.engine.get(self.run_id))
        except UnknownRunError:
            pass
        self._draw()
        return self.gauge

    def _draw(self):
        g = self.gauge
        if self.budget.max_steps is not None:
            self.steps_bar.value = min(g.steps, self.budget.max_steps)
            self.steps_bar.bar_style = _style(g.steps_fraction)
        if self.budget.max_cost is not None:
            self.cost_bar.value = min(g.cost, self.budget.max_cost)
            self.cost_bar.bar_style = _style(g.cost_fraction)
        color = "#c0392b" if g.over else "#222"
        self.text.value = (f"<div style='font-family:monospace; color:{color}'>"
                           + "<br>".join(html.escape(line) for line in g.lines())
                           + ("<br><b>over budget: nothing enforced this limit</b>" if g.over else "")
                           + "</div>")

    # live updates -------------------------------------------------------------------------
    def attach(self, engine=None) -> "BudgetMeter":
        """Refresh while `engine` (default: the meter's) executes steps; keeps any hook
        that was already there."""
        engine = engine or self.engine
        self.detach()
        self._previous_hook, self._attached_to = engine.on_step, engine

        def hook(label, how):
            if self._previous_hook is not None:
                self._previous_hook(label, how)
            if how == "executed":
                self._seen += 1
                if self._seen % self.every == 0:
                    self.poll()

        engine.on_step = hook
        return self

    def detach(self):
        if self._attached_to is not None:
            self._attached_to.on_step = self._previous_hook
            self._attached_to = self._previous_hook = None

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.panel._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)      # short and stable for notebook diffs
        return bundle

    def __repr__(self):
        return f"BudgetMeter({self.run_id!r}: {'; '.join(self.gauge.lines()[:2])})"


def _style(fraction) -> str:
    if fraction is None or fraction < 0.75:
        return "success"
    return "warning" if fraction < 1 else "danger"


# plots ------------------------------------------------------------------------------------
def plot_spend(series: dict, limit_steps: Optional[int] = None, limit_cost: Optional[float] = None,
               axes=None):
    """Cumulative steps and dollars after each attempt, one line per run.

    `series` maps a label to a list of (attempt, steps, dollars) rows, e.g. read from the
    model's ledger after every attempt. Returns the two Axes.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    ax_steps, ax_cost = axes
    styles = [dict(color="#c0392b", marker="o"), dict(color="#27ae60", marker="s"),
              dict(color="#2471a3", marker="^"), dict(color="#7d3c98", marker="d")]
    for (label, rows), style in zip(series.items(), styles):
        attempts = [0] + [a for a, _, _ in rows]
        ax_steps.plot(attempts, [0] + [s for _, s, _ in rows], label=label, lw=2, **style)
        ax_cost.plot(attempts, [0] + [c for _, _, c in rows], label=label, lw=2, **style)
    if limit_steps is not None:
        ax_steps.axhline(limit_steps, color="#555", ls="--", lw=1)
        ax_steps.annotate(f"limit: {limit_steps} steps", (1, limit_steps), xytext=(-4, 4),
                          xycoords=("axes fraction", "data"), textcoords="offset points",
                          ha="right", fontsize=8, color="#555")    # right end: clear of the lines
    if limit_cost is not None:
        ax_cost.axhline(limit_cost, color="#555", ls="--", lw=1)
    ax_steps.set_ylabel("model calls made (all attempts)")
    ax_cost.set_ylabel("dollars billed (all attempts)")
    for ax in axes:
        ax.set_xlabel("attempt (each one a fresh process)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    return axes


def backoff_delays(retry: Retry, attempts: int, clients: int = 1, seed: int = 0):
    """Delays before retry 1..attempts-1, for `clients` independent callers.

    Returns a list (one per client) of lists of seconds, from `retry.delay`, with one
    seeded random generator shared by all clients (as one process would have).
    """
    rng = random.Random(seed)
    return [[retry.delay(a, rng) for a in range(1, attempts)] for _ in range(clients)]


def plot_backoff(retry: Retry, attempts: int = 8, clients: int = 50, seed: int = 0, ax=None):
    """When `clients` failing callers retry: the ceiling without jitter vs full jitter.

    Without jitter every client waits the same time and retries in lockstep (one line).
    With jitter the retries of the same attempt spread between 0 and the ceiling.
    Returns the Axes.
    """
    import dataclasses

    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(8, 4))[1]
    steady = dataclasses.replace(retry, jitter=False)
    jittered = dataclasses.replace(retry, jitter=True)
    xs = list(range(1, attempts))
    ceiling = backoff_delays(steady, attempts)[0]
    spread = backoff_delays(jittered, attempts, clients, seed)
    jitter_rng = random.Random(seed + 1)     # only to offset the dots sideways for legibility
    for i, delays in enumerate(spread):
        ax.scatter([x + jitter_rng.uniform(-0.18, 0.18) for x in xs], delays, s=10,
                   color="#2471a3", alpha=0.45, label="with jitter (one dot per client)" if i == 0 else None)
    ax.plot(xs, ceiling, color="#c0392b", lw=2.5, marker="o",
            label=f"without jitter: all {clients} clients wait exactly this long")
    ax.set_xlabel("after failed attempt number")
    ax.set_ylabel("seconds before the next attempt")
    ax.set_xticks(xs)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return ax
