"""Per-step options (retries, backoff, timeout, cost) and per-run budgets.

These are plain data. The engine applies them; the store persists what must survive a crash
(a run's budget and everything counted against it, see usage.py).

Every option is checked when it is made, not when the engine first acts on it: a timeout
is read after the step's function has started, a backoff after an attempt failed, so a
value found wrong then would fail the run after its effect happened. The errors name the
option and the value. (A bool is refused wherever a number is asked for: True is not a
number of seconds.)

`import durable_lite` does not load this module (nor the dataclasses module it uses): it
loads the first time a Step, Retry or Budget is needed.
"""

import math
import random as _random
import threading
from dataclasses import asdict, dataclass
from typing import Callable, Optional, Tuple, Type, Union

# The longest wait a thread can be asked for (`join`, `sleep`): about 292 years. A timeout
# or backoff cap beyond it would fail inside the engine, after the step had started.
LONGEST_WAIT = threading.TIMEOUT_MAX


def _is_number(value) -> bool:
    return type(value) in (int, float)


def _check_number(owner, option, value, *, low, low_included, high=math.inf, unit="",
                  none_means=None):
    """Refuse `value` unless it is a number in [low, high] (low excluded unless
    `low_included`); None too when `none_means` says what None stands for."""
    if value is None and none_means is not None:
        return
    fine = (_is_number(value) and math.isfinite(value)
            and (value >= low if low_included else value > low) and value <= high)
    if not fine:
        bound = f">= {low}" if low_included else f"> {low}"
        most = "" if high == math.inf else f" and at most {high:g}"
        none = f", or None for {none_means}" if none_means else ""
        raise ValueError(f"{owner}: {option} must be a finite number{unit} {bound}{most}{none}; "
                         f"got {value!r}")


@dataclass(frozen=True)
class Retry:
    """How often to retry a failing step, and how long to wait in between.

    The wait before attempt n+1 is `min(cap, initial * multiplier ** (n - 1))`; with
    `jitter=True` it is drawn uniformly from [0, that] ("full jitter"), which keeps many
    failing runs from retrying in lockstep.
    """

    max_attempts: int = 3
    initial: float = 1.0
    multiplier: float = 2.0
    cap: float = 60.0
    jitter: bool = True
    no_retry: Tuple[Type[BaseException], ...] = ()

    def __post_init__(self):
        if type(self.max_attempts) is not int or self.max_attempts < 1:
            raise ValueError(f"dl.Retry: max_attempts must be a whole number >= 1; got "
                             f"{self.max_attempts!r}")
        _check_number("dl.Retry", "initial", self.initial, low=0, low_included=True,
                      high=LONGEST_WAIT, unit=" of seconds")
        _check_number("dl.Retry", "multiplier", self.multiplier, low=0, low_included=False)
        _check_number("dl.Retry", "cap", self.cap, low=0, low_included=True,
                      high=LONGEST_WAIT, unit=" of seconds")
        if type(self.jitter) is not bool:
            raise TypeError(f"dl.Retry: jitter must be True or False; got {self.jitter!r}")
        no_retry = self.no_retry
        if not isinstance(no_retry, tuple) or not all(
                isinstance(c, type) and issubclass(c, BaseException) for c in no_retry):
            raise TypeError(f"dl.Retry: no_retry must be a tuple of exception classes, e.g. "
                            f"(KeyError,); got {no_retry!r}")

    def delay(self, attempt: int, rng: Optional[_random.Random] = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        try:
            ceiling = min(self.cap, self.initial * self.multiplier ** (attempt - 1))
        except OverflowError:               # a huge multiplier: the cap is the wait
            ceiling = self.cap
        if not self.jitter:
            return ceiling
        return (rng or _random).uniform(0, ceiling)

    def should_retry(self, exc: BaseException, attempt: int) -> bool:
        return attempt < self.max_attempts and not isinstance(exc, self.no_retry)


NO_RETRY = Retry(max_attempts=1)


@dataclass(frozen=True)
class Step:
    """A step's name plus its options, for when the options are needed.

    `ctx.step("draft", fn, ...)` is the everyday form. `ctx.step(Step("draft", retry=...),
    fn, ...)` carries options without taking any of `fn`'s own keyword arguments.
    `cost` is a number, or a function of the step's result (e.g. the model call's dollars).
    """

    name: str
    retry: Retry = NO_RETRY
    timeout: Optional[float] = None
    cost: Union[float, Callable[[object], float], None] = None

    def __post_init__(self):
        owner = f"dl.Step({self.name!r})"
        if not isinstance(self.retry, Retry):
            raise TypeError(f"{owner}: retry must be a dl.Retry(...) (the default retries "
                            f"nothing); got {self.retry!r}")
        _check_number(owner, "timeout", self.timeout, low=0, low_included=False,
                      high=LONGEST_WAIT, unit=" of seconds", none_means="no timeout")
        if not callable(self.cost):
            _check_number(owner, "cost", self.cost, low=0, low_included=True,
                          none_means="no cost (or a function of the step's result)")

    def cost_of(self, result) -> float:
        if self.cost is None:
            return 0.0
        return float(self.cost(result) if callable(self.cost) else self.cost)


@dataclass(frozen=True)
class Budget:
    """Limits on a whole run, counted across every resume.

    `deadline` is seconds after the run started (on the engine's clock).
    """

    max_steps: Optional[int] = None
    max_cost: Optional[float] = None
    deadline: Optional[float] = None

    def __post_init__(self):
        if self.max_steps is not None and (type(self.max_steps) is not int or self.max_steps < 0):
            raise ValueError(f"dl.Budget: max_steps must be a whole number >= 0, or None for no "
                             f"limit; got {self.max_steps!r}")
        _check_number("dl.Budget", "max_cost", self.max_cost, low=0, low_included=True,
                      none_means="no limit")
        _check_number("dl.Budget", "deadline", self.deadline, low=0, low_included=True,
                      unit=" of seconds", none_means="no deadline")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data):
        return cls(**data) if data else None
