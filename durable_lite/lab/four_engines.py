"""Lesson 15's pictures: one crash table across four engines, and two histories side by side.

    table = crash_table.committed()          # durable_lite.engines.compare.crash_table
    crash_heat_map(table); plt.show()
    histories_side_by_side(temporal_rows, durable_lite_rows)

matplotlib and pandas are imported on first use.
"""

# what a customer (or the bank) saw, counted over the three effects
_ONCE, _TWICE, _MORE = "#e9edf0", "#f4a582", "#d7301f"
_BORDER = "#222222"


def _shade(extra: int) -> str:
    return _ONCE if extra == 0 else _TWICE if extra == 1 else _MORE


# Lesson 15's output area in JupyterLab at 1100 x 800 is 920 px wide with the file browser
# closed and 668 px with it open (measured in Chromium, 2026-12-06). At the inline backend's
# 100 dpi this figure is 6.6 inches (650 px as saved), so it is shown at full size in both,
# and its smallest text (7.5 pt) is about 10 px high as rendered.
HEAT_MAP_WIDTH = 6.6


def crash_heat_map(table, ax=None, title=None):
    """The crash table as a heat map: one line per case (effect · when · keyed), one
    column per engine (by its label: "LangGraph (sync)"). Each cell reads "refunds paid ·
    emails · tickets closed"; its colour is how many of the three the customer saw twice.
    A cell whose counts differ from durable_lite's is framed and names, in a word, the
    registered difference (engines/compare/differences.py, crash_table.KNOWN) that explains
    it; a cell that reads like durable_lite's carries no mark. Returns the figure."""
    try:
        import matplotlib.pyplot as plt
        from matplotlib.colors import to_rgb
        from matplotlib.patches import Patch, Rectangle
    except ImportError:
        raise ImportError("crash_heat_map needs matplotlib: "
                          "pip install 'durable-lite[lab]'") from None
    from ..engines.compare import crash_table as ct
    cases, columns = table.cases, table.columns
    differs = {(ct.case_id(case), column) for case, column, _ in table.shown_differences()}
    if ax is None:
        _, ax = plt.subplots(figsize=(HEAT_MAP_WIDTH, 2.1 + 0.4 * len(cases)))
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
            ax.text(x, y - (0.14 if framed else 0), text, ha="center", va="center",
                    fontsize=9.5, color="white" if extra > 1 else "#222222",
                    weight="bold" if extra else "normal")
            if framed:
                known = ct.KNOWN.get(column)
                ax.text(x, y + 0.24, known.short if known else "unexplained", ha="center",
                        va="center", fontsize=7.5, color="white" if extra > 1 else "#222222")
                ax.add_patch(Rectangle((x - 0.46, y - 0.44), 0.92, 0.88, fill=False,
                                       edgecolor=_BORDER, linewidth=1.6))
        colors.append(line)
    ax.imshow(colors, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(columns)), [ct.label(c).replace(" (", "\n(") for c in columns],
                  fontsize=8.5)
    ax.xaxis.tick_top()
    # each line names the effect and the moment; "keyed" and "unkeyed" label the two groups
    ax.set_yticks(range(len(cases)), [ct.case_label(c).rsplit(" · ", 1)[0] for c in cases],
                  fontsize=8.5)
    ax.set_xticks([x - 0.5 for x in range(1, len(columns))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(cases))], minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="both", length=0)
    keyed = sum(1 for _, _, k in cases if k)
    if 0 < keyed < len(cases):
        ax.axhline(keyed - 0.5, color="#555555", linewidth=1.5)
    fig.canvas.draw()                       # the tick labels' width places the group names
    labels = max(t.get_window_extent().width for t in ax.get_yticklabels()) * 72 / fig.dpi
    for first, last, name in ((0, keyed, "keyed"), (keyed, len(cases), "unkeyed")):
        if last > first:
            ax.annotate(name, xy=(0, (first + last - 1) / 2), xycoords=("axes fraction", "data"),
                        xytext=(-labels - 12, 0), textcoords="offset points", rotation=90,
                        ha="center", va="center", fontsize=9, weight="bold")
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(title or f"{table.finding()}\nlesson 01's refund killed by SIGKILL, then "
                          f"finished by a fresh process", fontsize=9.5,
                 pad=10, x=1.0, ha="right")    # centred on the cells, it would pass the edge
    ax.set_xlabel("refunds paid · emails sent · tickets closed, once the run finished",
                  fontsize=8.5)
    legend = [Patch(color=_ONCE, label="each effect once"),
              Patch(color=_TWICE, label="one effect twice"),
              Patch(color=_MORE, label="two or more twice"),
              Patch(facecolor="white", edgecolor=_BORDER,
                    label="counts differ from durable_lite's")]
    fig.legend(handles=legend, loc="lower center", ncol=2, frameon=False, fontsize=8.5)
    fig.tight_layout(rect=(0, 0.6 / fig.get_figheight(), 1, 1))
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


class FittedTable:
    """A DataFrame shown as a table as wide as the output area and no wider: fixed column
    widths (`widths`, shares of the whole, the index first), text left-aligned and wrapped,
    code (`code`: columns holding lines of code) broken where a line would not fit.

    pandas' own table grows to fit its longest unbroken line of code: lesson 15's port
    table was 1,427 px wide in a 968 px output area, its last column off-screen. The styles
    are inline, and only those JupyterLab keeps in an untrusted notebook (it drops
    `overflow-wrap:anywhere`, for one). The text repr, which nbval compares, is the
    frame's."""

    _CELL = ("text-align:left; vertical-align:top; white-space:normal; "
             "overflow-wrap:break-word; padding:4px 6px")

    def __init__(self, frame, widths=None, code=()):
        self.frame, self.code = frame, set(code)
        n = len(frame.columns) + 1
        self.widths = list(widths or [1 / n] * n)
        if len(self.widths) != n:
            raise ValueError(f"widths: {n} shares (the index, then each column), "
                             f"got {len(self.widths)}")

    def _cell(self, tag, text, code=False):
        from html import escape
        # JupyterLab keeps <code> on one line unless told otherwise
        body = (f"<code style='white-space:pre-wrap; overflow-wrap:break-word; font-size:85%'>"
                f"{escape(str(text))}</code>" if code else escape(str(text)))
        return f"<{tag} style='{self._CELL}'>{body}</{tag}>"

    def _repr_html_(self) -> str:
        total = sum(self.widths)
        cols = "".join(f"<col style='width:{100 * w / total:.1f}%'>" for w in self.widths)
        head = self._cell("th", self.frame.index.name or "") + "".join(
            self._cell("th", c) for c in self.frame.columns)
        rows = "".join(
            "<tr>" + self._cell("th", index) + "".join(
                self._cell("td", value, code=column in self.code)
                for column, value in zip(self.frame.columns, row)) + "</tr>"
            for index, row in zip(self.frame.index, self.frame.itertuples(index=False)))
        return (f"<table style='width:100%; max-width:100%; table-layout:fixed; "
                f"margin:0'><colgroup>{cols}</colgroup><thead><tr>{head}</tr></thead>"
                f"<tbody>{rows}</tbody></table>")

    def __repr__(self) -> str:
        return self.frame.to_string()


def fitted_table(frame, widths=None, code=()):
    """`frame` as a FittedTable (see there)."""
    return FittedTable(frame, widths, code)


def port_table():
    """Lesson 15's port, concept by concept (concepts.engine_port_table), fitted to the
    output area: a line of code per engine, then what does not change."""
    from ..engines.compare import concepts
    frame = concepts.engine_port_table().set_index("concept")
    return fitted_table(frame, widths=(1.3, 1.7, 1.7, 1.8, 1.8, 2.2),
                        code=concepts.ENGINE_COLUMNS)


def choosing_table():
    """Lesson 15's last table: a question a row, an engine a column (engines.compare.choosing)."""
    from ..engines.compare import choosing
    return fitted_table(choosing.table(), widths=(1.3, 2, 2, 2, 2))
