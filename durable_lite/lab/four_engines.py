"""Lesson 15's pictures: one crash table across four engines, and two histories side by side.

    table = crash_table.committed()          # durable_lite.engines.crash_table
    crash_heat_map(table); plt.show()
    histories_side_by_side(temporal_rows, durable_lite_rows)

matplotlib and pandas are imported on first use.
"""

# what a customer (or the bank) saw, counted over the three effects
_ONCE, _TWICE, _MORE = "#e9edf0", "#f4a582", "#d7301f"
_BORDER = "#222222"


def _shade(extra: int) -> str:
    return _ONCE if extra == 0 else _TWICE if extra == 1 else _MORE


def crash_heat_map(table, ax=None, title=None):
    """The crash table as a heat map: one line per case (effect · when · keyed), one
    column per engine. Each cell reads "refunds paid · emails · tickets closed"; its colour
    is how many of the three the customer saw twice. A cell that differs from
    durable_lite's is framed and names the registered difference (differences.py) that
    explains it. Returns the figure."""
    try:
        import matplotlib.pyplot as plt
        from matplotlib.colors import to_rgb
        from matplotlib.patches import Patch, Rectangle
    except ImportError:
        raise ImportError("crash_heat_map needs matplotlib: "
                          "pip install 'durable-lite[lab]'") from None
    from ..engines import crash_table as ct
    cases, columns = table.cases, table.columns
    differs = {(ct.case_id(case), column) for case, column, _ in table.differences()}
    if ax is None:
        _, ax = plt.subplots(figsize=(2.9 + 1.3 * len(columns), 1.9 + 0.42 * len(cases)))
    fig = ax.figure
    colors = []
    for y, case in enumerate(cases):
        line = []
        for x, column in enumerate(columns):
            cell = table.cell(case, column)
            extra = sum(cell[ct.COUNTED[e]] - 1 for e in ct.EFFECTS)
            line.append(to_rgb(_shade(extra)))
            framed = (ct.case_id(case), column) in differs
            text = " · ".join(str(cell[ct.COUNTED[e]]) for e in ct.EFFECTS)
            ax.text(x, y - (0.13 if framed else 0), text, ha="center", va="center",
                    fontsize=10, color="white" if extra > 1 else "#222222",
                    weight="bold" if extra else "normal")
            if framed:
                known = ct.KNOWN.get(column)
                why = f"{known.key}: {known.short}" if known else "unexplained"
                ax.text(x, y + 0.25, why, ha="center", va="center", fontsize=7,
                        color="white" if extra > 1 else "#222222")
                ax.add_patch(Rectangle((x - 0.46, y - 0.44), 0.92, 0.88, fill=False,
                                       edgecolor=_BORDER, linewidth=1.6))
        colors.append(line)
    ax.imshow(colors, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(columns)), [c.replace(" (", "\n(") for c in columns])
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(cases)), [ct.case_label(c) for c in cases])
    ax.set_xticks([x - 0.5 for x in range(1, len(columns))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(cases))], minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="both", length=0)
    keyed = sum(1 for _, _, k in cases if k)
    if 0 < keyed < len(cases):
        ax.axhline(keyed - 0.5, color="#555555", linewidth=1.5)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(title or f"{table.finding()}\nlesson 01's refund killed by SIGKILL, "
                          f"then finished by a fresh process", fontsize=11, pad=12)
    ax.set_ylabel("where the worker was killed (effect · when · keys)")
    ax.set_xlabel("refunds paid · emails sent · tickets closed, once the run finished")
    legend = [Patch(color=_ONCE, label="each effect once"),
              Patch(color=_TWICE, label="one effect twice"),
              Patch(color=_MORE, label="two or more twice"),
              Patch(facecolor="white", edgecolor=_BORDER, label="differs from durable_lite")]
    fig.legend(handles=legend, loc="lower center", ncol=4, frameon=False, fontsize=9)
    fig.tight_layout(rect=(0, 0.45 / fig.get_figheight(), 1, 1))
    return fig


def histories_side_by_side(left: list, right: list, names=("Temporal", "durable_lite"),
                           columns=("status", "attempts", "worker")):
    """Two engine.history-like lists of rows (position, step, ...) as one table: a row per
    position, and `columns` of each under its engine's name (a pandas MultiIndex)."""
    import pandas
    frames = []
    for name, rows in zip(names, (left, right)):
        frame = pandas.DataFrame([{"step": r["step"], **{c: r.get(c) for c in columns}}
                                  for r in rows])
        frames.append(frame.set_index("step"))
    return pandas.concat(frames, axis=1, keys=list(names))
