"""Time and ids, injectable so that lessons and tests are deterministic.

The engine only ever asks `clock()` for epoch seconds and `sleep(seconds)` to wait. A
`FakeClock` lets a lesson jump two days ahead without sleeping, and a `SequentialIds`
makes every generated id predictable in notebook output.
"""

import itertools
import time


class SystemClock:
    """Real wall-clock time."""

    # Calling the clock is calling time.time itself: the engine asks twice per step, and a
    # method of our own in between would cost a Python call each time.
    __call__ = staticmethod(time.time)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to. Sleeping on it advances it instantly."""

    def __init__(self, start: float = 1_767_225_600.0):  # 2026-01-01 00:00:00 UTC
        self.t = float(start)

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        """Move time forward (e.g. `clock.advance(2 * 86400)` for two days); returns now."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (asked to move {seconds} s)")
        self.t += seconds
        return self.t

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))

    def __repr__(self):
        return f"FakeClock(t={self.t})"


def sleeper_for(clock):
    """How to wait on `clock`: its own `sleep` if it has one, else real sleep."""
    return getattr(clock, "sleep", SystemClock().sleep)


def random_ids():
    """The default id source: random UUID4 strings."""
    import uuid  # on first use: on Python 3.10 `import uuid` also loads subprocess
    return str(uuid.uuid4())


class SequentialIds:
    """Predictable ids, `prefix-0001`, `prefix-0002`, … for deterministic output.

    `start`: the first number. A restarted process that must not repeat the ids its run
    already recorded begins after them (the crash sweep does)."""

    def __init__(self, prefix: str = "id", start: int = 1):
        self.prefix = prefix
        self._n = itertools.count(start)

    def __call__(self) -> str:
        return f"{self.prefix}-{next(self._n):04d}"
