"""Looking at a run's trace: a timeline that stays readable across days, and a table.

A lumpy run mixes scales: steps of a tenth of a second, retries of a few seconds, and a
wait of two days. On one linear axis the two days take the whole width and every step
is a hairline. `trace_timeline` cuts the axis instead: each stretch where a worker was
executing gets its own readable scale, and each long stretch where nobody was (a wait, a
sleep, a dead worker's lease running out) is squeezed into a narrow break, labelled with
how long it really was. `TimeAxis` is that mapping, kept apart from the drawing so it can
be tested without matplotlib.

`steps_table` is the same tree as one row per step, wait and sleep: where the time and
the money went. (matplotlib and pandas are imported on first use.)
"""

from typing import List, Optional

from ..trace import ATTEMPT, EXECUTION, RUN, SLEEP, STEP_SPAN, WAIT, format_duration

BREAK_WIDTH = 12.0         # display units of one squeezed stretch (the axis is 100 wide)
MIN_SHARE = 0.25           # a busy stretch gets at least this share of the busy width
INSTANT_WIDTH = 10.0       # display units of a stretch that lasted no time at all
COLORS = {"model": "#8e44ad", "tool": "#2e86c1", "failed": "#c0392b", "parked": "#bdc3c7",
          "run": "#34495e", "lost": "#e67e22"}
WORKER_COLORS = ["#aed6f1", "#f5cba7", "#abebc6", "#d7bde2", "#f9e79f"]


class TimeAxis:
    """Maps epoch seconds to a 0..100 display axis on which long idle stretches are squeezed.

    Busy stretches are the executions, grouped when the gap between them is shorter than
    the longest execution. A gap longer than that becomes a break of fixed width.
    """

    def __init__(self, tree):
        executions = sorted((s for s in tree.children if s.kind == EXECUTION), key=lambda s: s.start)
        spans = [(s.start, s.end) for s in executions] or [(tree.start, tree.end)]
        longest = max(max(e - s for s, e in spans), 1.0)
        clusters = [list(spans[0])]
        for s, e in spans[1:]:
            if s - clusters[-1][1] <= longest:
                clusters[-1][1] = max(clusters[-1][1], e)
            else:
                clusters.append([s, e])
        # The run may begin before its first execution or end after its last (open waits).
        clusters[0][0] = min(clusters[0][0], tree.start)
        self.breaks_at = [(a[1], b[0]) for a, b in zip(clusters, clusters[1:])]
        if tree.end - clusters[-1][1] > longest:
            self.breaks_at.append((clusters[-1][1], tree.end))
            tail = [tree.end, tree.end]
        else:
            clusters[-1][1] = max(clusters[-1][1], tree.end)
            tail = None
        self.segments = []             # (start s, end s, x from, x to) per busy stretch
        x = 0.0
        for (s, e), width in zip(clusters, _widths(clusters, len(self.breaks_at))):
            self.segments.append((s, e, x, x + width))
            x += width + BREAK_WIDTH
        if tail is not None:           # an open wait at the end: a break, then the run's "now"
            self.segments.append((tail[0], tail[1], 100.0, 100.0))

    def x(self, t: float) -> float:
        """Display position of time `t`."""
        segments = self.segments
        if t <= segments[0][0]:
            return segments[0][2]
        for (s, e, x0, x1), nxt in zip(segments, segments[1:] + [None]):
            if t <= e:
                return x0 + (x1 - x0) * (0.5 if e == s else (t - s) / (e - s))
            if nxt is not None and t < nxt[0]:           # inside the break after this stretch
                return x1 + (nxt[2] - x1) * (t - e) / (nxt[0] - e)
        return segments[-1][3]

    def time_at(self, x: float) -> float:
        """The time shown at display position `x` (the inverse of `x()`)."""
        segments = self.segments
        for (s, e, x0, x1), nxt in zip(segments, segments[1:] + [None]):
            if x <= x1:
                return s if x1 == x0 else s + (e - s) * max(0.0, x - x0) / (x1 - x0)
            if nxt is not None and x < nxt[2]:
                return e + (nxt[0] - e) * (x - x1) / (nxt[2] - x1)
        return segments[-1][1]

    def breaks(self):
        """[(x from, x to, seconds squeezed)] for each break."""
        out = []
        for (s, e, x0, x1), nxt in zip(self.segments, self.segments[1:]):
            out.append((x1, nxt[2], nxt[0] - e))
        return out


def _widths(clusters, n_breaks) -> List[float]:
    """Display width of each busy stretch: what the breaks leave, shared in proportion to
    duration, but at least MIN_SHARE of it each; a stretch of no time gets INSTANT_WIDTH."""
    room = 100.0 - BREAK_WIDTH * n_breaks
    durations = [e - s for s, e in clusters]
    if not any(durations):
        return [room / len(clusters)] * len(clusters)
    room -= INSTANT_WIDTH * durations.count(0)
    weights = [max(d, MIN_SHARE * sum(durations)) if d else 0.0 for d in durations]
    return [room * w / sum(weights) if d else INSTANT_WIDTH for d, w in zip(durations, weights)]


def time_split(tree) -> dict:
    """Seconds of the run spent working (executions), parked (waits, sleeps), and with no
    worker although it was not parked (e.g. a dead worker's lease running out)."""
    working = sum(s.duration for s in tree.children if s.kind == EXECUTION)
    parked = sum(s.duration for s in tree.children if s.kind in (WAIT, SLEEP))
    return {"total": tree.duration, "working": working, "parked": parked,
            "no worker": max(0.0, tree.duration - working - parked)}


def _rows(tree) -> List[tuple]:
    """(depth, span) for each row: the run, its executions, waits and steps (attempts are
    drawn inside their step's row)."""
    rows = [(0, tree)]
    for child in tree.children:
        rows.append((1, child))
        rows += [(2, step) for step in child.children]
    return rows


def _label(span) -> str:
    if span.kind == RUN:
        return f"run {span.name}"
    if span.kind == EXECUTION:
        return f"{span.name} · {span.worker}"
    if span.kind in (WAIT, SLEEP):
        return f"{span.kind} {span.name}"
    return span.name


def trace_timeline(tree, *, title: Optional[str] = None, ax=None):
    """A Gantt chart of `tree` (from `engine.trace(run_id)`) on a broken time axis.

    One row per execution, step, wait and sleep; attempts are segments of their step's
    row (failed ones red); model calls are purple and say what they cost; a worker that
    died is marked ✕ where its record ends. Returns the Axes; end the cell with plt.show().
    """
    import matplotlib.pyplot as plt

    axis = TimeAxis(tree)
    rows = _rows(tree)
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.36 * len(rows) + 1.6), layout="constrained")
    workers = list(dict.fromkeys(s.worker for s in tree.children if s.kind == EXECUTION))
    X = axis.x
    for y, (depth, span) in enumerate(rows):
        x0, x1 = X(span.start), X(span.end)
        width = max(x1 - x0, 0.25)
        if span.kind == RUN:
            ax.barh(y, x1 - x0, left=x0, height=0.3, color=COLORS["run"])
        elif span.kind == EXECUTION:
            color = WORKER_COLORS[workers.index(span.worker) % len(WORKER_COLORS)]
            ax.barh(y, width, left=x0, height=0.7, color=color, edgecolor="#555", linewidth=0.6)
            if span.status == "interrupted":
                ax.plot(x1, y, marker="X", markersize=11, color=COLORS["failed"], zorder=5)
                ax.annotate("worker died here: no record after this", (x1, y), xytext=(10, 0),
                            textcoords="offset points", va="center", fontsize=8.5,
                            color=COLORS["failed"])
        elif span.kind in (WAIT, SLEEP):
            ax.barh(y, width, left=x0, height=0.6, color=COLORS["parked"], hatch="//",
                    edgecolor="#7f8c8d", linewidth=0)
        elif span.kind == STEP_SPAN:
            color = COLORS["model"] if span.is_model_call else COLORS["tool"]
            if span.status in ("failed", "interrupted"):
                color = COLORS["failed"]
            parts = span.children or [span]
            for part in parts:
                a, b = X(part.start), X(part.end)
                tone = COLORS["failed"] if part.kind == ATTEMPT and part.status == "failed" else color
                ax.barh(y, max(b - a, 0.25), left=a, height=0.6, color=tone,
                        edgecolor="white", linewidth=0.8)
        note = _note(span)
        if note:
            ax.text(x0 + width + 0.6, y, note, va="center", fontsize=8.5, color="#333")
    parked = [(s.start, s.end) for s in tree.children if s.kind in (WAIT, SLEEP)]
    for x0, x1, seconds in axis.breaks():
        ax.axvspan(x0, x1, color="#f4f6f6", zorder=0)
        what = "parked" if any(a <= axis.time_at(x0) and axis.time_at(x1) <= b
                               for a, b in parked) else "no worker"
        ax.text((x0 + x1) / 2, -0.95, f"{format_duration(seconds)}\n{what}", ha="center",
                va="center", fontsize=8, color="#555", linespacing=1.1)
    _broken_bottom_axis(ax, axis, len(rows) - 0.4)
    _ticks(ax, axis, tree.start)
    ax.set_yticks(range(len(rows)), [_label(s) for d, s in rows])
    for (depth, span), label in zip(rows, ax.get_yticklabels()):
        if depth < 2:                 # the run, its executions and waits; steps in grey
            label.set_fontweight("bold")
        else:
            label.set_color("#444")
    ax.set_ylim(len(rows) - 0.4, -1.4)
    ax.set_xlim(0, 114)               # room on the right for the last stretch's notes
    ax.legend(handles=_legend(), loc="lower left", fontsize=8.5, frameon=False)
    ax.tick_params(axis="y", length=0)
    ax.spines[["top", "right", "left", "bottom"]].set_visible(False)
    ax.set_xlabel("time since the run started (each grey band squeezes a long stretch; "
                  "its real length is written above it)", fontsize=9)
    ax.set_title(title or _finding(tree), fontsize=11, loc="left")
    return ax


def _broken_bottom_axis(ax, axis, y):
    """The x axis drawn only under the busy stretches, with // where it is cut."""
    dy = 0.18
    for s, e, x0, x1 in axis.segments:
        if x1 > x0:
            ax.plot([x0, x1], [y, y], color="black", linewidth=0.8, clip_on=False)
    for x0, x1, _ in axis.breaks():
        for x in (x0, x1):
            for shift in (-0.35, 0.35):
                ax.plot([x + shift - 0.35, x + shift + 0.35], [y + dy, y - dy], color="black",
                        linewidth=0.8, clip_on=False)


def _legend():
    from matplotlib.patches import Patch
    return [Patch(color=COLORS["model"], label="model call"),
            Patch(color=COLORS["tool"], label="tool step"),
            Patch(color=COLORS["failed"], label="failed attempt"),
            Patch(facecolor=COLORS["parked"], hatch="//", edgecolor="#7f8c8d",
                  label="parked: no worker, no process"),
            # every retry's segment, failed or not, begins where the attempt before it ended
            Patch(facecolor="white", edgecolor="white",
                  label="a retry's segment includes the backoff before it")]


_UNTIL = {"signal": "until its signal came", "timeout": "until its deadline",
          "woke": "until its wake time", "waiting": "and still waiting",
          "sleeping": "and still sleeping"}


def _note(span) -> str:
    if span.kind == STEP_SPAN:
        bits = []
        if span.attributes.get("attempts", 1) > 1:
            bits.append(f"{span.attributes['attempts']} attempts")
        bits.append(format_duration(span.duration))
        if span.tokens:
            bits.append(f"{span.tokens:,} tokens")
        if span.cost:
            bits.append(f"${span.cost:.4f}")
        return " · ".join(bits)
    if span.kind in (WAIT, SLEEP):
        return f"parked {format_duration(span.duration)} {_UNTIL.get(span.status, '')}".rstrip()
    if span.kind == EXECUTION and span.status != "interrupted":
        return f"ran {format_duration(span.duration)}, then {span.status}"
    return ""


def _ticks(ax, axis, origin):
    """Ticks per busy stretch: its start as time since the run began, then '+N s'."""
    positions, labels = [], []
    for s, e, x0, x1 in axis.segments:
        positions.append(axis.x(s))
        labels.append(format_duration(s - origin))
        span = e - s
        if span <= 0 or x1 - x0 < 6:
            continue
        step = _nice_step(span / max(2, int((x1 - x0) / 12)))
        t = step
        while t < span * 0.95:
            if axis.x(s + t) - x0 >= 9:              # clear of the stretch's first label
                positions.append(axis.x(s + t))
                labels.append(f"+{t:g} s")
            t += step
    ax.set_xticks(positions, labels, fontsize=8)


def _nice_step(raw: float) -> float:
    for unit in (0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600):
        if unit >= raw:
            return unit
    return raw


def _finding(tree) -> str:
    split = time_split(tree)
    text = (f"{tree.name}: {format_duration(split['total'])} in all — parked "
            f"{format_duration(split['parked'])}, working {format_duration(split['working'])}")
    if split["no worker"] >= 1:
        text += f", no worker {format_duration(split['no worker'])}"
    return text


def steps_table(tree):
    """One row per step (summed over executions), wait and sleep of `tree`: kind, who ran
    it, attempts, seconds, share of the run's time, tokens, cost and share of the cost."""
    import pandas as pd

    rows = {}
    for child in tree.children:
        items = child.children if child.kind == EXECUTION else [child]
        for span in items:
            row = rows.setdefault(span.name, {
                "step": span.name, "kind": _kind(span), "workers": [], "attempts": 0,
                "seconds": 0.0, "tokens": 0, "cost": 0.0, "status": span.status})
            if span.worker and span.worker not in row["workers"]:
                row["workers"].append(span.worker)
            row["attempts"] += span.attributes.get("attempts", 0)
            row["seconds"] += span.duration
            row["tokens"] += span.tokens
            row["cost"] += span.cost
            row["status"] = span.status
    frame = pd.DataFrame(list(rows.values()), columns=["step", "kind", "workers", "attempts",
                                                       "seconds", "tokens", "cost", "status"])
    frame["workers"] = frame["workers"].map(", ".join)
    total_cost = frame["cost"].sum()
    frame["% of time"] = (100 * frame["seconds"] / tree.duration).round(3) if tree.duration else 0.0
    frame["% of cost"] = (100 * frame["cost"] / total_cost).round(1) if total_cost else 0.0
    frame["seconds"] = frame["seconds"].round(2)
    frame["cost"] = frame["cost"].round(6)
    columns = ["step", "kind", "workers", "status", "attempts", "seconds", "% of time",
               "tokens", "cost", "% of cost"]
    return frame[columns].set_index("step")


def _kind(span) -> str:
    if span.kind == STEP_SPAN:
        return "model call" if span.is_model_call else "tool"
    return span.kind
