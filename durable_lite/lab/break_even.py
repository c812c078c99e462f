"""Where checkpointing pays and where it is ceremony: the break-even map of lesson 13.

For a run of n equal steps, `costs.break_even_crash_rate` gives the crash rate above which
checkpoints save more than they cost (durable_lite/costs.py has the formulas). Drawn
against n for a few kinds of step, each line splits the plane: to its right (more
crashes) and above it (longer runs) checkpointing that kind of step pays; to its left
and below, the checkpoints cost more than the crashes they save. One line per checkpoint
cost shows what a cheaper or dearer store does to the border.
"""

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from .. import costs


@dataclass(frozen=True)
class StepKind:
    label: str
    seconds: float
    dollars: float
    colour: str


STEP_KINDS = (
    StepKind(f"model call ({costs.MODEL_CALL_SECONDS:g} s, ${costs.MODEL_CALL_DOLLARS:g})",
             costs.MODEL_CALL_SECONDS, costs.MODEL_CALL_DOLLARS, "#7d3c98"),
    StepKind("tool call (300 ms, free)", 0.3, 0.0, "#2471a3"),
    StepKind("computation (2 ms)", 0.002, 0.0, "#c0392b"),
)


def every(hours: float) -> str:
    """A crash interval in words a person reads at a glance: "every 8.1 hours",
    "every 3 years", "every 1.3 seconds"."""
    if hours == float("inf"):
        return "never"
    for unit, size in (("years", 24 * 365.25), ("days", 24.0), ("hours", 1.0),
                       ("minutes", 1 / 60), ("seconds", 1 / 3600)):
        if hours >= 2 * size or unit == "seconds":
            value = hours / size
            return f"every {value:,.0f} {unit}" if value >= 10 else f"every {value:.2g} {unit}"
    raise AssertionError("unreachable")


def steps_grid(low: int = 2, high: int = 10_000, per_decade: int = 24):
    """Run lengths from low to high, evenly spaced on a log scale (whole numbers)."""
    import math
    count = int(per_decade * math.log10(high / low)) + 1
    return sorted({round(low * (high / low) ** (i / (count - 1))) for i in range(count)})


def break_even_line(kind: StepKind, checkpoint_seconds: float, steps: Sequence[int],
                    worker_dollars_per_hour: float = costs.WORKER_DOLLARS_PER_HOUR):
    """The break-even crash rate (per hour) for each run length in `steps`."""
    return [costs.break_even_crash_rate(n, kind.seconds, checkpoint_seconds, kind.dollars,
                                        worker_dollars_per_hour) for n in steps]


def plot_break_even(checkpoints: Dict[str, float], kinds: Sequence[StepKind] = STEP_KINDS,
                    rates=(1e-5, 1e4), steps=(2, 10_000), mark_rate: Optional[float] = None,
                    worker_dollars_per_hour: float = costs.WORKER_DOLLARS_PER_HOUR, ax=None):
    """The break-even map. `checkpoints`: {label: seconds per checkpoint}; the first is
    drawn solid and shaded where it pays, the others dashed. `mark_rate` draws the crash
    rate a lesson assumes. Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    if ax is None:
        ax = plt.subplots(figsize=(8.4, 6.2), layout="constrained")[1]
    grid = steps_grid(*steps)
    styles = ["-", "--", ":", "-."]
    for (name, seconds), style in zip(checkpoints.items(), styles):
        for kind in kinds:
            line = break_even_line(kind, seconds, grid, worker_dollars_per_hour)
            ax.plot(line, grid, style, color=kind.colour, lw=2 if style == "-" else 1.4,
                    label=f"{kind.label}, checkpoint {name}")
    _shade_bands(ax, list(checkpoints.values())[0], kinds, grid, rates, worker_dollars_per_hour)
    if mark_rate is not None:
        ax.axvline(mark_rate, color="#17202a", lw=0.8)
        ax.annotate(f"{mark_rate:g} crashes/hour", (mark_rate, steps[1]), xytext=(6, -12),
                    textcoords="offset points", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*rates)
    ax.set_ylim(*steps)
    number = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    ax.xaxis.set_major_formatter(number)
    ax.yaxis.set_major_formatter(number)
    ax.set_xlabel("crashes per hour of running (log scale)")
    ax.set_ylabel("steps per run (log scale)")
    ax.grid(alpha=0.25, which="major")
    # under the map, never on it: the lines fill every corner of the axes
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(checkpoints),
              fontsize=8, frameon=False)
    return ax


def band_labels(kinds: Sequence[StepKind] = STEP_KINDS):
    """What each shaded band of the map says, left to right: for which kinds of step
    checkpointing pays there (the kinds in the order their lines come)."""
    names = [kind.label.split(" (")[0] + "s" for kind in kinds]      # "model calls", ...
    labels = ["ceremony for every kind"]
    for i in range(1, len(kinds) + 1):
        if i == len(kinds):
            labels.append("pays for every kind")
        elif i == 1:
            labels.append(f"pays for {names[0]} only")
        else:
            labels.append(f"pays for {', '.join(names[:i - 1])} and {names[i - 1]}")
    return labels


def _shade_bands(ax, seconds, kinds, grid, rates, worker_dollars_per_hour):
    """Shade the map in bands that never overlap, one per set of kinds that pay, each
    labelled inside: left of the first (solid) line nothing pays, between the first and the
    second only the first kind pays, and so on; right of the last, every kind pays. The
    lines are ordered: a kind worth more per step pays at a lower crash rate."""
    import math

    lines = sorted((break_even_line(kind, seconds, grid, worker_dollars_per_hour), kind)
                   for kind in kinds)
    kinds = [kind for _, kind in lines]
    edges = [[rates[0]] * len(grid)] + [line for line, _ in lines] + [[rates[1]] * len(grid)]
    colours = ["#555555"] + [kind.colour for kind in kinds]
    middle = [i for i, n in enumerate(grid) if 5 <= n <= 2000] or list(range(len(grid)))
    for i, (left, right, label) in enumerate(zip(edges, edges[1:], band_labels(kinds))):
        if i:
            ax.fill_betweenx(grid, left, right, color=colours[i], alpha=0.10, lw=0)
        # the label where the band shows widest (log scale), away from the map's edges
        def shown(j):
            lo, hi = max(left[j], rates[0]), min(right[j], rates[1])
            return math.log(hi / lo) if hi > lo else -1.0
        j = max(middle, key=shown)
        if shown(j) < math.log(30):                   # too narrow to write in
            continue
        lo, hi = max(left[j], rates[0]), min(right[j], rates[1])
        ax.text(math.sqrt(lo * hi), grid[j], label, ha="center", va="center", fontsize=8.5,
                color=colours[i], fontweight="bold",
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1.5})
