"""Per-step options (retries, backoff, timeout, cost) and per-run budgets.

These are plain data. The engine applies them; the store persists what must survive a crash
(a run's budget and everything counted against it, see usage.py).

`import durable_lite` does not load this module (nor the dataclasses module it uses): it
loads the first time a Step, Retry or Budget is needed.
"""

import random as _random
from dataclasses import asdict, dataclass
from typing import Callable, Optional, Tuple, Type, Union


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
        if self.max_attempts < 1:
            raise ValueError(f"Retry.max_attempts must be at least 1, got {self.max_attempts}")

    def delay(self, attempt: int, rng: Optional[_random.Random] = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        ceiling = min(self.cap, self.initial * self.multiplier ** (attempt - 1))
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

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data):
        return cls(**data) if data else None
