"""Plotting helpers shared by the lessons (matplotlib, imported on first use).

Every helper draws on a given Axes or makes its own figure sized for a notebook column,
labels its axes, and takes a `title` that should state the finding ("Naive retry runs 7
steps; durable runs 5"), not just name the variables. It returns the Axes; end the cell
with `plt.show()`.
"""

# One colour per way of running, the same in every lesson.
COLORS = {"naive": "#c0392b", "durable": "#2e86c1", "checkpointed": "#2e86c1",
          "checkpointed + key": "#27ae60", "executed": "#e67e22", "replayed": "#95a5a6"}
_FALLBACK = ["#8e44ad", "#16a085", "#d35400", "#7f8c8d"]
FIGSIZE = (7.5, 3.8)


def _plt():
    import matplotlib.pyplot as plt
    return plt


def _axes(ax, figsize=FIGSIZE):
    if ax is not None:
        return ax
    _, ax = _plt().subplots(figsize=figsize, layout="constrained")
    return ax


def color_for(label: str, i: int = 0) -> str:
    return COLORS.get(label, _FALLBACK[i % len(_FALLBACK)])


def grouped_bars(groups, series: dict, *, title: str, xlabel: str, ylabel: str, ax=None,
                 colors: dict = None, value_labels: bool = True, integer: bool = True):
    """Bars side by side: one group per entry of `groups`, one bar per series.

    series: {label: [value for each group]}. Values are written on the bars.
    """
    ax = _axes(ax)
    n = len(series)
    width = 0.8 / max(n, 1)
    for i, (label, values) in enumerate(series.items()):
        if len(values) != len(groups):
            raise ValueError(f"series {label!r} has {len(values)} values for {len(groups)} groups")
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        color = (colors or {}).get(label) or color_for(label, i)
        bars = ax.bar(xs, values, width * 0.92, label=label, color=color)
        if value_labels:
            ax.bar_label(bars, fmt="%d" if integer else "%.3g", padding=2)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if integer:
        ax.yaxis.get_major_locator().set_params(integer=True)
    ax.margins(y=0.15)
    ax.legend(frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return ax


def executions_per_attempt(per_attempt: dict, *, title: str, ax=None,
                           ylabel: str = "step executions", total: bool = True):
    """Step executions in each attempt, one bar per way of running (e.g. naive vs durable).

    per_attempt: {label: [executions in attempt 1, attempt 2, ...]}; shorter lists are
    padded with zeros. With `total=True` a last group shows the sum.
    """
    attempts = max(len(v) for v in per_attempt.values())
    series = {label: list(v) + [0] * (attempts - len(v)) for label, v in per_attempt.items()}
    groups = [f"attempt {i + 1}" for i in range(attempts)]
    if total:
        groups.append("total")
        series = {label: v + [sum(v)] for label, v in series.items()}
    ax = grouped_bars(groups, series, title=title, xlabel="attempt", ylabel=ylabel, ax=ax)
    if total:
        ax.axvline(len(groups) - 1.5, color="#bbb", linewidth=1, linestyle=":")
    return ax


def step_timeline(rows, *, title: str, ax=None, crashes: dict = None):
    """Which steps each attempt executed or replayed, as a grid of coloured cells.

    rows: a sequence of (attempt label, step, "executed"|"replayed"), e.g. the rows of
    `lab.trace_table(...)`. Attempts run down, steps across in order of first appearance.
    crashes: {attempt label: text}, drawn as a red mark just after that attempt's last cell
    (e.g. {"process 1": "SIGKILL"}).
    """
    rows = [tuple(r) for r in (rows.itertuples(index=False) if hasattr(rows, "itertuples") else rows)]
    attempts = list(dict.fromkeys(r[0] for r in rows))
    steps = list(dict.fromkeys(r[1] for r in rows))
    ax = _axes(ax, figsize=(7.5, 0.7 + 0.55 * len(attempts)))
    for attempt, step, how in rows:
        y, x = attempts.index(attempt), steps.index(step)
        ax.barh(y, 0.9, left=x - 0.45, height=0.7, color=color_for(how), edgecolor="white")
        ax.text(x, y, how, ha="center", va="center", fontsize=9, color="white", weight="bold")
    for attempt, text in (crashes or {}).items():
        y = attempts.index(attempt)
        x = max(steps.index(step) for a, step, _ in rows if a == attempt) + 0.5
        ax.plot([x, x], [y - 0.4, y + 0.4], color=COLORS["naive"], linewidth=3)
        ax.text(x + 0.06, y, text, ha="left", va="center", fontsize=9, color=COLORS["naive"],
                weight="bold")
    ax.set_yticks(range(len(attempts)), attempts)
    ax.set_xticks(range(len(steps)), steps)
    ax.set_xlim(-0.5, len(steps) - 0.5)
    ax.set_ylim(len(attempts) - 0.5, -0.5)
    ax.set_xlabel("step, in workflow order")
    ax.set_title(title)
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.tick_params(left=False)
    return ax
