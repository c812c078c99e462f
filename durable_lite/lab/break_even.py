"""Where checkpointing pays and where it is ceremony: the break-even map of lesson 13.

For a run of n equal steps, `costs.break_even_crash_rate` gives the crash rate above which
checkpoints save more than they cost (durable_lite/costs.py has the formulas). Drawn
against n for a few kinds of step, each line splits the plane: to its right (more
crashes) and above it (longer runs) checkpointing that kind of step pays; to its left
and below, the checkpoints cost more than the crashes they save. One line per checkpoint
cost shows what a cheaper or dearer store does to the border.

The grain of the checkpoints matters as much as their price. `batched` puts several steps
of a workload in one, so a checkpoint closes a longer stretch of work; `crash_at` says
what one crash re-spends at a given moment; `grain_table` weighs a workload's checkpoints
at several grains. Too fine, and the checkpoints cost more than the redo they save; too
coarse, and a crash redoes everything since the last one, as if there were none.
"""

import math
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

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
    count = int(per_decade * math.log10(high / low)) + 1
    return sorted({round(low * (high / low) ** (i / (count - 1))) for i in range(count)})


def break_even_line(kind: StepKind, checkpoint_seconds: float, steps: Sequence[int],
                    worker_dollars_per_hour: float = costs.WORKER_DOLLARS_PER_HOUR):
    """The break-even crash rate (per hour) for each run length in `steps`."""
    return [costs.break_even_crash_rate(n, kind.seconds, checkpoint_seconds, kind.dollars,
                                        worker_dollars_per_hour) for n in steps]


# the grain: how much work one checkpoint closes ----------------------------------------------
def batched(workload: costs.Workload, per_step: int) -> costs.Workload:
    """`workload` with every `per_step` consecutive steps run as one step (the last may hold
    fewer), so one checkpoint closes them all. A batch takes the seconds, dollars and harm
    of its steps together; a wait cannot share a step with work (a durable wait holds no
    process, a batch does)."""
    if not (isinstance(per_step, int) and per_step >= 1):
        raise ValueError(f"per_step must be a whole number >= 1, not {per_step!r}")
    steps = workload.steps
    groups = [steps[i:i + per_step] for i in range(0, len(steps), per_step)]
    merged = []
    for group in groups:
        if len(group) > 1 and any(s.waits for s in group):
            raise ValueError(f"workload {workload.name!r}: a wait cannot share a step with "
                             f"other steps ({', '.join(s.name for s in group if s.waits)})")
        if len(group) == 1:
            merged.append(group[0])
            continue
        merged.append(costs.StepCost(f"{group[0].name} .. {group[-1].name}",
                                     math.fsum(s.seconds for s in group),
                                     math.fsum(s.dollars for s in group),
                                     math.fsum(s.harm for s in group)))
    if len(merged) == len(steps):
        return workload
    return costs.Workload(f"{workload.name} in {len(merged)} step{'s' * (len(merged) > 1)}",
                          tuple(merged), workload.about)


@dataclass(frozen=True)
class Lost:
    """What one crash re-spends, `at` seconds into a clean run resumed from checkpoints."""

    at: float
    step: str          # the step the crash interrupted
    seconds: float     # work done since the last checkpoint, done again
    dollars: float     # the interrupted step's dollars, paid again (its tokens are billed)


def crash_at(workload: costs.Workload, seconds: float) -> Lost:
    """One crash, `seconds` into a run of `workload` that checkpoints every step: the
    resume redoes the interrupted step from its start. Its seconds are the time it had run;
    its dollars are counted whole, as in `costs` (an interrupted model call is billed).
    Waits are left out of the clock: nobody works while waiting."""
    if not (0 <= seconds < workload.work_seconds):
        raise ValueError(f"a crash must land within the run's {workload.work_seconds:g} s of "
                         f"work, not at {seconds!r}")
    begun = 0.0
    for step in workload.steps:
        if step.waits:
            continue
        if seconds < begun + step.seconds:
            return Lost(seconds, step.name, seconds - begun, step.dollars)
        begun += step.seconds
    raise AssertionError("unreachable")


def grain_table(workloads: Dict[costs.Workload, Sequence[int]], crashes_per_hour: float,
                checkpoint_seconds: float, runs: int = 1000,
                worker_dollars_per_hour: float = costs.WORKER_DOLLARS_PER_HOUR):
    """`costs.balance` of each workload batched at each grain ({workload: (1, 2, ...)}), in
    dollars per `runs` runs: what the checkpoints cost, what they save (worker time and
    model calls a restart from the top would spend again, and the harm of duplicates), and
    whether that pays. A pandas DataFrame, one row per workload and grain."""
    import pandas

    rows = []
    for workload, grains in workloads.items():
        for per_step in grains:
            w = batched(workload, per_step)
            b = costs.balance(w, crashes_per_hour, checkpoint_seconds, worker_dollars_per_hour)
            rows.append({"workload": workload.name, "steps a checkpoint closes": per_step,
                         "checkpoints a run": len(w.steps),
                         "they cost ($)": _dollars(b.spent * runs),
                         "they save ($)": _dollars(b.saved * runs),
                         "pays?": "yes" if b.pays else "no"})
    frame = pandas.DataFrame(rows).set_index(["workload", "steps a checkpoint closes"])
    frame.columns.name = f"per {runs:,} runs"
    return frame


def _dollars(value: float) -> str:
    """Three significant digits, never scientific: 5.41, 0.000819, 0.000000820."""
    if value == 0:
        return "0"
    digits = max(2, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{digits}f}"


# the map ------------------------------------------------------------------------------------
CEREMONY = "no kind pays\nhere: checkpoints\ncost more than\nthey save"
FONT = 9          # points; at the inline backend's 100 dpi, 12.5 px: never below 9 px


def plot_break_even(checkpoints: Dict[str, float], kinds: Sequence[StepKind] = STEP_KINDS,
                    rates=(1e-6, 1e3), steps=(2, 10_000), mark_rate: Optional[float] = None,
                    worker_dollars_per_hour: float = costs.WORKER_DOLLARS_PER_HOUR, ax=None):
    """The break-even map. `checkpoints`: {label: seconds per checkpoint}; the first is
    drawn solid and shaded where it pays, with every band named inside (the white one
    too: there checkpoints pay for no kind); any others are drawn dashed, for comparison.
    `mark_rate` draws the crash rate a lesson assumes. Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if ax is None:
        ax = plt.subplots(figsize=(7.6, 6.2), layout="constrained")[1]
    grid = steps_grid(*steps)
    styles = ["-", "--", ":", "-."]
    several = len(checkpoints) > 1
    for (name, seconds), style in zip(checkpoints.items(), styles):
        for kind in kinds:
            line = break_even_line(kind, seconds, grid, worker_dollars_per_hour)
            label = f"{kind.label}, checkpoint {name}" if several else kind.label
            ax.plot(line, grid, style, color=kind.colour, lw=2.2 if style == "-" else 1.4,
                    label=label)
    _shade_bands(ax, list(checkpoints.values())[0], kinds, grid, rates, worker_dollars_per_hour)
    if mark_rate is not None:
        ax.axvline(mark_rate, color="#17202a", lw=0.8)
        ax.annotate(f"{mark_rate:g} crashes/hour", (mark_rate, steps[1]), xytext=(5, -14),
                    textcoords="offset points", fontsize=FONT)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*rates)
    ax.set_ylim(*steps)
    ax.xaxis.set_major_locator(LogLocator(base=10, numticks=20))
    ax.xaxis.set_major_formatter(FuncFormatter(_rate_tick))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.tick_params(labelsize=FONT + 1)
    ax.set_xlabel("crashes per hour of running (log scale)", fontsize=FONT + 1)
    ax.set_ylabel("steps per run (log scale)", fontsize=FONT + 1)
    ax.grid(alpha=0.25, which="major")
    first = next(iter(checkpoints))
    title = ("each line: where checkpoints start to pay for that kind of step" if not several
             else f"solid: checkpoint {first}; dashed: {', '.join(list(checkpoints)[1:])}")
    # under the map, never on it
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=1 if several else len(kinds),
              fontsize=FONT, title=title, title_fontsize=FONT, frameon=False)
    return ax


def _rate_tick(value: float, _=None) -> str:
    """A tick of the crash-rate axis: 1,000, 10, 1, 0.1, 0.01, 0.001, then powers of ten."""
    if value >= 1:
        return f"{value:,.0f}"
    if value >= 1e-3:
        return f"{value:g}"
    return f"$10^{{{round(math.log10(value))}}}$"


def band_labels(kinds: Sequence[StepKind] = STEP_KINDS):
    """What each band of the map says, left to right: for which kinds of step
    checkpointing pays there (the kinds in the order their lines come)."""
    names = [kind.label.split(" (")[0] + "s" for kind in kinds]      # "model calls", ...
    labels = [CEREMONY]
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
    labelled inside: left of the first (solid) line nothing pays (left white, and labelled
    so), between the first and the second only the first kind pays, and so on; right of
    the last, every kind pays. The lines are ordered: a kind worth more per step pays at a
    lower crash rate."""
    lines = sorted((break_even_line(kind, seconds, grid, worker_dollars_per_hour), kind)
                   for kind in kinds)
    kinds = [kind for _, kind in lines]
    edges = [[rates[0]] * len(grid)] + [line for line, _ in lines] + [[rates[1]] * len(grid)]
    colours = ["#4d5656"] + [kind.colour for kind in kinds]
    for i, (left, right, label) in enumerate(zip(edges, edges[1:], band_labels(kinds))):
        if i:
            ax.fill_betweenx(grid, left, right, color=colours[i], alpha=0.10, lw=0)
        def shown(j):
            lo, hi = max(left[j], rates[0]), min(right[j], rates[1])
            return math.log(hi / lo) if hi > lo else -1.0
        if i == 0:
            # the white corner, left of every line: widest at the bottom, so its label
            # starts at the left edge, low, where the run is shortest
            j = next((j for j, n in enumerate(grid) if n >= 3), 0)
            if shown(j) < math.log(100):              # too narrow to write in
                continue
            ax.text(rates[0] * 1.4, grid[j], label, ha="left", va="bottom", fontsize=FONT,
                    color=colours[i], fontweight="bold", linespacing=1.15)
            continue
        # the label where the band shows widest (log scale), away from the map's edges
        rows = [j for j, n in enumerate(grid) if 20 <= n <= 5000] or list(range(len(grid)))
        j = max(rows, key=shown)
        if shown(j) < math.log(30):                   # too narrow to write in
            continue
        lo, hi = max(left[j], rates[0]), min(right[j], rates[1])
        ax.text(math.sqrt(lo * hi), grid[j], label, ha="center", va="center", fontsize=FONT,
                color=colours[i], fontweight="bold",
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1.5})
