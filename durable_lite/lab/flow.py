"""Lesson 11's plots and tables: the provider's traffic second by second, and when a small
tenant's runs finish during a flood (matplotlib and pandas, imported on first use).

Each takes `storm.Outcome` objects, as `storm.burst` and `storm.flood` return them.
"""

from .plots import _plt

ANSWERED, REFUSED, LIMIT, LAST = "#2e86c1", "#c0392b", "#555555", "#27ae60"
LINES = ["#c0392b", "#e67e22", "#27ae60", "#2e86c1", "#8e44ad"]


def requests_per_second(outcomes, *, limit: int, title: str, seconds: int = None):
    """One panel per outcome, stacked bars of the provider's answered and refused requests
    in the second each arrived, the provider's limit as a dashed line, and a dotted line
    where the last run got its answer: writing an answer takes the model a few seconds, so
    the last answer comes after the last request. Returns the figure."""
    plt = _plt()
    span = seconds or max(len(o.per_second) for o in outcomes)
    fig, axes = plt.subplots(len(outcomes), 1, figsize=(7.5, 1.9 * len(outcomes) + 0.6),
                             sharex=True, sharey=True, layout="constrained")
    axes = list(axes) if len(outcomes) > 1 else [axes]
    for ax, outcome in zip(axes, outcomes):
        rows = outcome.per_second[:span]
        xs = [r["second"] for r in rows]
        answered = [r["answered"] for r in rows]
        refused = [r["refused"] for r in rows]
        ax.bar(xs, answered, width=0.9, color=ANSWERED, label="answered")
        ax.bar(xs, refused, width=0.9, bottom=answered, color=REFUSED, label="refused (429)")
        ax.axhline(limit, color=LIMIT, linestyle="--", linewidth=1, label=f"limit ({limit}/s)")
        last = last_answer(outcome)
        if last is not None:
            ax.axvline(last, color=LAST, linestyle=":", linewidth=1.6, label="last answer")
            ax.annotate(f"last answer {last:.1f} s", (last, 1), xycoords=("data", "axes fraction"),
                        xytext=(4, -4), textcoords="offset points", va="top", fontsize=8.5,
                        color=LAST)
        totals = outcome.provider
        ax.set_title(f"{outcome.label}: {totals['requests']:,} requests, "
                     f"{totals['refused']:,} refused", loc="left", fontsize=10)
        ax.set_ylabel("requests")
        ax.spines[["top", "right"]].set_visible(False)
    axes[-1].set_xlabel("second after the upload")
    axes[-1].set_xlim(-1, span)
    fig.suptitle(title)
    # Below the panels, in a band of its own: inside the top panel it sat on the label of
    # the last answer, wherever that answer came.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, frameon=False, ncol=len(labels), loc="outside lower center",
               fontsize=9)
    return fig


def last_answer(outcome):
    """Seconds after the upload at which the last run that completed got its answer (None
    if none did): the "last answer after (s)" of `outcome.summary()`."""
    return max(outcome.finished.values(), default=None)


def last_request(outcome):
    """The second in which the last request reached the provider (None if none did)."""
    busy = [row["second"] for row in outcome.per_second if row["requests"]]
    return max(busy, default=None)


def tenant_finish_times(outcomes, *, tenant: str = "B", other: str = "A", title: str):
    """Left: how many of `tenant`'s runs had finished, against seconds since its runs
    arrived (log scale), one line per outcome. Right: when the last run of `other` finished,
    the price of each setting for the flooding tenant. Returns the figure."""
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), width_ratios=[3, 2],
                                      layout="constrained")
    for i, outcome in enumerate(outcomes):
        times = outcome.finish_times(tenant)
        left.step([0.5] + times, range(len(times) + 1), where="post", color=LINES[i % len(LINES)],
                  linewidth=2, label=outcome.label)
    left.set_xscale("log")
    left.set_xlabel(f"seconds after tenant {tenant}'s runs arrived (log scale)")
    left.set_ylabel(f"{tenant}'s runs finished")
    left.legend(frameon=False, fontsize=9, loc="upper left")
    left.spines[["top", "right"]].set_visible(False)
    labels = [o.label for o in outcomes]
    lasts = [max(o.finish_times(other)) for o in outcomes]
    bars = right.barh(range(len(outcomes)), lasts, color=[LINES[i % len(LINES)] for i in range(len(outcomes))])
    right.bar_label(bars, fmt="%.0f s", padding=3)
    right.set_yticks(range(len(outcomes)), labels)
    right.invert_yaxis()
    right.set_xlabel(f"when {other}'s last run finished (s)")
    right.margins(x=0.25)
    right.spines[["top", "right"]].set_visible(False)
    fig.suptitle(title)
    return fig


def outcomes_table(outcomes):
    """One row per outcome: its `summary()`, as a pandas DataFrame."""
    import pandas as pd
    return pd.DataFrame([o.summary() for o in outcomes], index=[o.label for o in outcomes])
