"""What durability costs, and when it pays for itself: the arithmetic of lesson 13.

A checkpoint costs a little on every step of every run. It pays back only when a crash
happens: a run restarted from the top does again everything it had done, while a run
resumed from its checkpoints does again only the step the crash interrupted.

**The chance of a crash.** Crashes (deploys, out-of-memory kills, lost machines) arrive at
random, `rate` of them per hour of running. One lands in a stretch of `t` seconds with

    q = 1 - exp(-rate * t / 3600)                                   crash_chance(t, rate)

and the stretch gets through with p = 1 - q.

**How often each step runs.** A run is a list of steps; step j completes with p_j.

    resumed from checkpoints   step j runs   1 / p_j                 times on average
    restarted from the top     step j runs   1 / (p_j * p_j+1 * ... * p_n)   times

because, restarting from the top, every crash in step j *or any step after it* sends the
run back through step j. (Lesson 06 did the same arithmetic with failing tool calls.) A
step whose effect the world remembers is completed 1 / (p_j+1 * ... * p_n) times, so it
is *duplicated* that many times minus one: a second refund, a second email. Checkpoints
(with the idempotency keys of lesson 03 closing the window) duplicate nothing.

**What checkpoints cost.** One write per completed step: n * h, where h is the seconds
one checkpoint takes (the benchmark's ladder measures h: about 20 µs for `SQLiteStore` on
this kind of machine, a millisecond or more for an engine on a database server).

**The break-even.** Put everything in dollars, a worker's seconds at
`worker_dollars_per_hour`. Checkpoints pay when what a restart re-spends beyond a resume
(the re-run steps' seconds and dollars, and the harm of the duplicates) is worth more
than n * h. For n equal steps, each worth w (in the same unit as h), and rare crashes
(q * n much less than 1), that boils down to a rule of thumb:

    checkpointing pays   when   h  <  w * q * (n - 1) / 2

One checkpoint against one step's worth, times the chance a crash lands in a step, times
the (n - 1) / 2 finished steps the average crash throws away. The exact formulas above
only grow faster than this, so the rule never says "pays" where it does not.

**Waits.** A step that waits on a person or an outside system (`waits=True`) is different.
A durable run waits as a row in the store: no process runs, so no crash can land in the
wait and no worker is paid to hold it. Without durability a process holds the wait, a
crash anywhere in it loses the run, and the restart asks again.

Simplifications, stated: an interrupted attempt costs as much as a whole one (its tokens
are usually billed; its seconds are an upper bound), and resuming a run costs nothing
(reading its checkpoints back takes milliseconds).

This module is standard library only; the lesson's plot and decision table live in
`durable_lite.lab` (break_even.py and decision_table.py).
"""

import math
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

HOUR = 3600.0

# An assumption, not a price list: what one worker process costs an hour (a share of a
# small cloud machine). It converts seconds into dollars; pass your own.
WORKER_DOLLARS_PER_HOUR = 0.10

# The three reasons the chapter gives to reach for durability, and the line this course
# draws for "long": a redo from the top costs more than a minute or more than a dollar.
REASONS = ("long", "irreversible", "waits")
LONG_SECONDS = 60.0
LONG_DOLLARS = 1.0
DURABLE, RETRY = "make it durable", "retry from the top"


# steps and workloads ------------------------------------------------------------------------
@dataclass(frozen=True)
class StepCost:
    """One step of a workload, as far as its cost goes.

    seconds  how long one attempt runs (for a wait: how long until the answer comes)
    dollars  what one attempt costs: model tokens, paid API calls
    harm     what a duplicate of its effect costs you (0: no effect, or one that is
             harmless to repeat, like overwriting the same file)
    waits    True for a wait on a person or an outside system
    """

    name: str
    seconds: float
    dollars: float = 0.0
    harm: float = 0.0
    waits: bool = False

    def __post_init__(self):
        for what in ("seconds", "dollars", "harm"):
            value = getattr(self, what)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"step {self.name!r}: {what} must be a finite number >= 0, "
                                 f"not {value!r}")


@dataclass(frozen=True)
class Workload:
    """A kind of run: its steps in order, and a line saying what it does."""

    name: str
    steps: Tuple[StepCost, ...]
    about: str = ""

    def __post_init__(self):
        object.__setattr__(self, "steps", tuple(self.steps))
        if not self.steps:
            raise ValueError(f"workload {self.name!r} has no steps")

    @classmethod
    def uniform(cls, name: str, steps: int, seconds: float, dollars: float = 0.0,
                about: str = "") -> "Workload":
        """`steps` equal steps of `seconds` and `dollars` each, with no effects."""
        if steps < 1:
            raise ValueError(f"workload {name!r}: steps must be at least 1, not {steps}")
        return cls(name, tuple(StepCost(f"step-{i + 1}", seconds, dollars)
                               for i in range(steps)), about)

    @property
    def work_seconds(self) -> float:
        """Seconds of work in one clean run (waits left out: nobody works while waiting)."""
        return math.fsum(s.seconds for s in self.steps if not s.waits)

    @property
    def dollars(self) -> float:
        """Dollars one clean run spends."""
        return math.fsum(s.dollars for s in self.steps)

    @property
    def effects(self) -> Tuple[str, ...]:
        """Names of the steps whose duplicate would do harm."""
        return tuple(s.name for s in self.steps if s.harm > 0)

    @property
    def waits(self) -> Tuple[str, ...]:
        return tuple(s.name for s in self.steps if s.waits)


# the arithmetic -----------------------------------------------------------------------------
def crash_chance(seconds: float, crashes_per_hour: float) -> float:
    """Chance that at least one crash lands in `seconds` of running: 1 - exp(-rate * t)."""
    if seconds < 0 or crashes_per_hour < 0:
        raise ValueError("seconds and crashes_per_hour must be >= 0")
    return -math.expm1(-crashes_per_hour * seconds / HOUR)


def _survive(step: StepCost, crashes_per_hour: float, durable: bool) -> float:
    """p: the chance one attempt of the step completes. A durable wait holds no process,
    so nothing can crash inside it."""
    if durable and step.waits:
        return 1.0
    return math.exp(-crashes_per_hour * step.seconds / HOUR)


def attempts_resumed(steps: Sequence[StepCost], crashes_per_hour: float) -> List[float]:
    """Expected attempts of each step when a crash resumes from the checkpoints: 1 / p_j."""
    return [1.0 / _survive(s, crashes_per_hour, durable=True) for s in steps]


def attempts_from_the_top(steps: Sequence[StepCost], crashes_per_hour: float) -> List[float]:
    """Expected attempts of each step when a crash restarts the run from the top:
    1 / (p_j * ... * p_n), every crash in the step or after it sending the run back."""
    out, later = [], 1.0                      # later: product of p_k over k >= j
    for step in reversed(steps):
        later *= _survive(step, crashes_per_hour, durable=False)
        out.append(1.0 / later)
    return out[::-1]


def duplicates_from_the_top(steps: Sequence[StepCost], crashes_per_hour: float) -> List[float]:
    """Expected extra completions of each step when restarting from the top:
    1 / (p_j+1 * ... * p_n) - 1 (a crash after the step finished makes it run again)."""
    out, after = [], 1.0                      # after: product of p_k over k > j
    for step in reversed(steps):
        out.append(1.0 / after - 1.0)
        after *= _survive(step, crashes_per_hour, durable=False)
    return out[::-1]


@dataclass(frozen=True)
class Expected:
    """What one run costs on average under one strategy, crashes included."""

    strategy: str              # "resumed" or "from the top"
    worker_seconds: float      # time a process spends on the run, waits it holds included
    dollars: float             # tokens and paid calls, repeats included
    duplicates: float          # effects performed more than once
    harm: float                # dollars those duplicates cost
    checkpoints: int           # checkpoint writes (0 from the top)


def expected(workload: Workload, crashes_per_hour: float, durable: bool) -> Expected:
    """Expected cost of one run: resumed from checkpoints (`durable=True`) or restarted
    from the top. The checkpoints' own cost is not in here; `balance` adds it."""
    steps = workload.steps
    if durable:
        runs = attempts_resumed(steps, crashes_per_hour)
        seconds = math.fsum(0.0 if s.waits else r * s.seconds for s, r in zip(steps, runs))
        dollars = math.fsum(r * s.dollars for s, r in zip(steps, runs))
        return Expected("resumed", seconds, dollars, 0.0, 0.0, len(steps))
    runs = attempts_from_the_top(steps, crashes_per_hour)
    extra = duplicates_from_the_top(steps, crashes_per_hour)
    seconds = math.fsum(r * s.seconds for s, r in zip(steps, runs))
    dollars = math.fsum(r * s.dollars for s, r in zip(steps, runs))
    duplicates = math.fsum(d for s, d in zip(steps, extra) if s.harm > 0)
    harm = math.fsum(d * s.harm for s, d in zip(steps, extra))
    return Expected("from the top", seconds, dollars, duplicates, harm, 0)


@dataclass(frozen=True)
class Balance:
    """Checkpoints' cost against what they save, per run, on average.

    saved_*: what a restart from the top spends beyond a resume from checkpoints.
    spent_*: what the checkpoints themselves cost (n writes of `checkpoint_seconds`).
    """

    workload: str
    crashes_per_hour: float
    checkpoint_seconds: float
    worker_dollars_per_hour: float
    saved_seconds: float
    saved_model_dollars: float
    duplicates: float
    harm: float
    spent_seconds: float

    def dollars(self, seconds: float) -> float:
        return seconds * self.worker_dollars_per_hour / HOUR

    @property
    def saved(self) -> float:
        """Everything a checkpointed run saves, in dollars."""
        return self.dollars(self.saved_seconds) + self.saved_model_dollars + self.harm

    @property
    def spent(self) -> float:
        """What the checkpoints cost, in dollars."""
        return self.dollars(self.spent_seconds)

    @property
    def ratio(self) -> float:
        """saved / spent: above 1 checkpointing pays for itself, below 1 it is ceremony."""
        if self.spent == 0:
            return math.inf if self.saved > 0 else 1.0
        return self.saved / self.spent

    @property
    def pays(self) -> bool:
        return self.saved > self.spent


def balance(workload: Workload, crashes_per_hour: float, checkpoint_seconds: float,
            worker_dollars_per_hour: float = WORKER_DOLLARS_PER_HOUR) -> Balance:
    """What checkpointing every step of `workload` saves and costs, per run, on average."""
    if checkpoint_seconds < 0 or worker_dollars_per_hour < 0:
        raise ValueError("checkpoint_seconds and worker_dollars_per_hour must be >= 0")
    top = expected(workload, crashes_per_hour, durable=False)
    resumed = expected(workload, crashes_per_hour, durable=True)
    return Balance(workload.name, crashes_per_hour, checkpoint_seconds, worker_dollars_per_hour,
                   saved_seconds=top.worker_seconds - resumed.worker_seconds,
                   saved_model_dollars=top.dollars - resumed.dollars,
                   duplicates=top.duplicates, harm=top.harm,
                   spent_seconds=resumed.checkpoints * checkpoint_seconds)


# break-even for n equal steps ---------------------------------------------------------------
def _uniform_ratio(steps: float, step_seconds: float, step_dollars: float,
                   crashes_per_hour: float, checkpoint_seconds: float,
                   worker_dollars_per_hour: float) -> float:
    """saved / spent for `steps` equal steps (steps may be fractional, for the search)."""
    x = crashes_per_hour * step_seconds / HOUR            # p = exp(-x)
    worth = step_seconds * worker_dollars_per_hour / HOUR + step_dollars
    spent = steps * checkpoint_seconds * worker_dollars_per_hour / HOUR
    if x == 0:
        return 0.0 if spent > 0 else 1.0
    if steps * x > 700:                                   # exp would overflow: so would
        return math.inf                                   # the restarts (none would finish)
    # from the top: sum over i = 1..n of exp(i x); resumed: n exp(x); both times `worth`
    rerun = math.exp(x) * (math.expm1(steps * x) / math.expm1(x) - steps)
    if spent == 0:
        return math.inf if rerun > 0 else 1.0
    return rerun * worth / spent


def break_even_steps(step_seconds: float, crashes_per_hour: float, checkpoint_seconds: float,
                     step_dollars: float = 0.0,
                     worker_dollars_per_hour: float = WORKER_DOLLARS_PER_HOUR,
                     limit: int = 10 ** 7) -> Optional[int]:
    """The fewest equal steps for which checkpointing every one of them pays, or None if
    not even `limit` steps would. (A one-step run never pays: a crash costs both
    strategies the same step.)"""
    args = (step_seconds, step_dollars, crashes_per_hour, checkpoint_seconds,
            worker_dollars_per_hour)
    if _uniform_ratio(limit, *args) <= 1:
        return None
    low, high = 1, limit                  # ratio(low) <= 1 < ratio(high); it grows with n
    while high - low > 1:
        middle = (low + high) // 2
        if _uniform_ratio(middle, *args) > 1:
            high = middle
        else:
            low = middle
    return high


def break_even_crash_rate(steps: int, step_seconds: float, checkpoint_seconds: float,
                          step_dollars: float = 0.0,
                          worker_dollars_per_hour: float = WORKER_DOLLARS_PER_HOUR) -> float:
    """Crashes per hour of running above which checkpointing `steps` equal steps pays.

    math.inf for a single step (nothing to save) or steps that take no time (no crash
    can land in them); 0.0 when checkpoints cost nothing. For rare crashes this is close
    to the rule of thumb: 2 * h * 3600 / ((n - 1) * w * t), with w and h in dollars.
    """
    if steps < 2 or step_seconds == 0:
        return math.inf
    if checkpoint_seconds == 0 or worker_dollars_per_hour == 0:
        return 0.0

    def ratio(rate):
        return _uniform_ratio(steps, step_seconds, step_dollars, rate, checkpoint_seconds,
                              worker_dollars_per_hour)

    low, high = 1e-15, 1.0
    while ratio(high) <= 1:              # the ratio grows with the crash rate
        low, high = high, high * 10
        if high > 1e15:
            return math.inf
    for _ in range(200):                 # bisect on a log scale down to 1 part in 10^12
        middle = math.sqrt(low * high)
        if ratio(middle) > 1:
            high = middle
        else:
            low = middle
        if high / low < 1 + 1e-12:
            break
    return high


# when not to bother: the decision table -------------------------------------------------------
def reasons(workload: Workload, long_seconds: float = LONG_SECONDS,
            long_dollars: float = LONG_DOLLARS) -> Dict[str, bool]:
    """The chapter's three reasons to reach for durability, answered for one workload.

    long          a redo from the top costs more than `long_seconds` of work or
                  `long_dollars` (many steps are not enough: 1,000 steps of 2 ms are 2 s)
    irreversible  some step's effect would do harm if it happened twice
    waits         the run waits on a person or an outside system
    """
    return {"long": workload.work_seconds > long_seconds or workload.dollars > long_dollars,
            "irreversible": bool(workload.effects),
            "waits": bool(workload.waits)}


def verdict(answers: Dict[str, bool]) -> str:
    """Any one reason is enough; with none, a retry from the top is the simple, right tool."""
    return DURABLE if any(answers.get(r, False) for r in REASONS) else RETRY


# Five workloads for the decision table. The crash rate they are judged at, and the
# prices, are assumptions stated in the lesson: change them and see what moves.
CRASHES_PER_HOUR = 0.1        # deploys and kills: about one every ten hours of running
MODEL_CALL_SECONDS = 2.0
MODEL_CALL_DOLLARS = 0.004    # 400 tokens at the course's fake price of $0.01 per 1,000


def _model(name, calls=1):
    return StepCost(name, MODEL_CALL_SECONDS * calls, MODEL_CALL_DOLLARS * calls)


EXAMPLES: Tuple[Workload, ...] = (
    Workload("ticket summary", (
        StepCost("fetch ticket", 0.3),
        _model("summarise"),
        StepCost("post internal note", 0.2),
    ), "fetch a support ticket, summarise it with one model call, post the summary as an "
       "internal note (a second note is harmless)"),
    Workload("thumbnail batch", tuple(
        StepCost(f"thumbnail {i + 1}", 0.002) for i in range(1000)
    ), "resize 1,000 images, 2 ms each, each written over its own file (rewriting one "
       "changes nothing)"),
    Workload("nightly research report", tuple(
        step for i in range(20) for step in (
            StepCost(f"search {i + 1}", 5.0), _model(f"read {i + 1}", calls=10))
    ) + (StepCost("save report", 0.5),),
       "20 rounds of a search and ten model calls of reading, then the report is saved "
       "into our own store under the night's date"),
    Workload("refund", (
        StepCost("look up order", 0.2),
        StepCost("issue refund", 0.5, harm=40.0),
        StepCost("email customer", 0.3, harm=1.0),
        StepCost("close ticket", 0.2),
    ), "lesson 01's refund: $40 back to the customer, an email saying so, the ticket closed"),
    Workload("access request", (
        StepCost("file request", 0.2),
        StepCost("wait for manager", 8 * HOUR, waits=True),
        StepCost("grant access", 0.3),
    ), "file a request in the approvals queue (keyed by request id), wait for a manager's "
       "answer (about a working day), grant access (granting twice changes nothing)"),
)


def example(name: str) -> Workload:
    """One of the five EXAMPLES, by name."""
    for workload in EXAMPLES:
        if workload.name == name:
            return workload
    raise KeyError(f"no example workload named {name!r}; they are "
                   f"{[w.name for w in EXAMPLES]}")


@dataclass(frozen=True)
class Mismatch:
    """One cell of a filled decision table that disagrees with `reasons`."""

    workload: str
    reason: str
    given: Optional[bool]
    expected: bool
    why: str = field(default="")


def check_table(answers: Dict[str, Dict[str, Optional[bool]]],
                workloads: Iterable[Workload] = EXAMPLES) -> List[Mismatch]:
    """Every cell of a filled table ({workload: {reason: True/False}}) that is missing or
    wrong, with a line saying why the right answer is right."""
    wrong = []
    for workload in workloads:
        right = reasons(workload)
        given = answers.get(workload.name, {})
        for reason in REASONS:
            if given.get(reason) is not right[reason]:
                wrong.append(Mismatch(workload.name, reason, given.get(reason), right[reason],
                                      explain(workload, reason)))
    return wrong


def money(dollars: float) -> str:
    """Dollars as people write them: 1,234.50, 0.80, and small amounts to three digits
    (0.004, not 0.00)."""
    if dollars == 0 or abs(dollars) >= 0.01:
        return f"{dollars:,.2f}"
    return f"{dollars:.3g}"


def explain(workload: Workload, reason: str) -> str:
    """One line: the fact about the workload that answers `reason`."""
    if reason == "long":
        return (f"a redo from the top costs {workload.work_seconds:,.1f} s of work and "
                f"${money(workload.dollars)} (long means over {LONG_SECONDS:g} s or "
                f"${LONG_DOLLARS:g})")
    if reason == "irreversible":
        if workload.effects:
            return "a second run of " + " and ".join(repr(e) for e in workload.effects) + \
                   " would do harm"
        return "every step is harmless to repeat"
    if reason == "waits":
        if workload.waits:
            return "it waits: " + ", ".join(repr(w) for w in workload.waits)
        return "it never waits on anyone"
    raise ValueError(f"reason must be one of {REASONS}, not {reason!r}")
