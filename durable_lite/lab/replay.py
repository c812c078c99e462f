"""Aids for the lessons on the checkpoint window (03), replay determinism (04) and the
model call as a step (05).

    run_through_crashes   start a run, crash it at chosen points, let fresh engines finish it
    count_checkpoints     make a store count the checkpoints it writes
    plot_bars / plot_lines  the two plot shapes these lessons draw

Nothing here changes how the engine works: each helper only calls the public API, so a
lesson can show the long way once and then use the short way.
"""

from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional

from ..clock import FakeClock
from ..engine import Engine
from ..errors import Crash


# driving a run through crashes ------------------------------------------------------------
@dataclass
class Attempt:
    """What one attempt at a run did. `crashed_at` is None for the attempt that finished."""
    number: int
    crashed_at: Optional[str]
    status: str
    executed: List[str] = field(default_factory=list)   # steps that ran and were recorded
    replayed: List[str] = field(default_factory=list)   # steps answered from the record
    measured: Any = None                                 # what `measure()` returned after it

    def row(self) -> dict:
        return {"attempt": self.number, "crashed at": self.crashed_at or "-",
                "status": self.status, "executed": ", ".join(self.executed) or "-",
                "replayed": ", ".join(self.replayed) or "-"}


def run_through_crashes(store, wf, *args, run_id: str, crashes=(), clock=None, ids=None,
                        pause: float = 60.0, measure: Optional[Callable[[], Any]] = None,
                        **kwargs) -> List[Attempt]:
    """Start `wf` as `run_id`, crash it at each `dl.faults.CrashAt` in `crashes` in turn,
    then let one more attempt finish it. Returns one `Attempt` per attempt.

    Every attempt uses a new `Engine` on the same store, as a restarted process would:
    nothing carries over in memory. The clock moves `pause` seconds between attempts (the
    time a restart takes). `measure()`, if given, is called after each attempt and its
    value kept, e.g. `lambda: world.llm.calls()`.
    """
    clock = clock or FakeClock()
    attempts = []
    for number, crash in enumerate([*crashes, None], start=1):
        if number > 1:
            clock.advance(pause)
        engine = Engine(store, clock, ids=ids, worker=f"worker-{number}", crash_at=crash)
        executed, replayed = [], []
        engine.on_step = lambda label, how: (executed if how == "executed" else replayed).append(label)
        try:
            status = engine.start(wf, *args, run_id=run_id, **kwargs).status
            crashed_at = None
        except Crash:
            status = "crashed"
            label = crash.step if crash.occurrence == 1 else f"{crash.step}#{crash.occurrence}"
            crashed_at = f"{label} {crash.when}"
        attempts.append(Attempt(number, crashed_at, status, executed, replayed,
                                measure() if measure else None))
        if crashed_at is None:
            break
    return attempts


def attempts_frame(attempts: List[Attempt]):
    """The attempts as a pandas table, one row each."""
    import pandas as pd
    return pd.DataFrame([a.row() for a in attempts]).set_index("attempt")


# counting checkpoint writes ---------------------------------------------------------------
def count_checkpoints(store):
    """Make `store` count the checkpoints it commits, in `store.checkpoint_writes`.

    Wraps this one object's `record_entry` (every step, clock read, id and timer is one
    entry); other stores and the class itself are untouched. Returns the store.
    """
    record_entry = store.record_entry

    def counted(run_id, entry):
        record_entry(run_id, entry)
        store.checkpoint_writes += 1     # counted only once the commit has succeeded

    store.checkpoint_writes = 0
    store.record_entry = counted
    return store


# plots ------------------------------------------------------------------------------------
_GOOD, _BAD, _NEUTRAL = "#2b7a3d", "#c0392b", "#5b6b7f"


def plot_bars(labels, values, *, title: str, ylabel: str, expected: Optional[float] = None,
              xlabel: str = "", figsize=(7.5, 3.6)):
    """Bars with their values written on top. With `expected`, a bar equal to it is green,
    any other red, and a dashed line marks it. Returns (fig, ax); end the cell with plt.show().
    """
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=figsize)
    if expected is None:
        colors = [_NEUTRAL] * len(values)
    else:
        colors = [_GOOD if v == expected else _BAD for v in values]
    bars = ax.bar(range(len(values)), values, color=colors, width=0.6)
    for bar, v in zip(bars, values):
        ax.annotate(f"{v:g}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    xytext=(0, 3), textcoords="offset points", ha="center", fontweight="bold")
    if expected is not None:
        ax.axhline(expected, color=_GOOD, linestyle="--", linewidth=1)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylim(0, max(values) * 1.25 + 0.5)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title(title, loc="left", fontsize=11)
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig, ax


def plot_lines(x, series: dict, *, title: str, xlabel: str, ylabel: str, figsize=(7.5, 3.6)):
    """One line with markers per entry of `series` ({label: [y, ...]}), the last value of
    each written at its end. Returns (fig, ax); end the cell with plt.show().
    """
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=figsize)
    colors = [_BAD, _GOOD, _NEUTRAL, "#b35900"]
    for (label, ys), color in zip(series.items(), colors):
        ax.plot(x, ys, marker="o", color=color, label=label)
        ax.annotate(f"{ys[-1]:g}", (x[-1], ys[-1]), xytext=(6, 0), textcoords="offset points",
                    va="center", color=color, fontweight="bold")
    ax.set_xticks(list(x))
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(bottom=0)
    ax.set_title(title, loc="left", fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False, loc="upper left")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig, ax
