"""`Usage`: what a run has consumed so far — steps executed, and their cost added up exactly.

Money must come out the same however it is added up. Adding floats one at a time rounds
after every addition, so ten steps of $0.10 come to 0.9999999999999999, and the result
depends on the order of the additions. Python 3.12 also changed how the built-in `sum()`
adds floats, so one list of costs could print $0.0062 on one Python and $0.0063 on the
next. A `Usage` keeps the exact sum of every cost added to it and rounds once, when the
total is read: the correctly rounded number `math.fsum` gives for the whole list. So a
run's cost is the same live and on replay, in `engine.get`, and on every Python version.

Usage is derived from a run's checkpoints and never reset; a Budget (policy.py) says when
it is too much.
"""

import math


class Usage:
    __slots__ = ("steps", "_partials")

    def __init__(self, steps: int = 0, cost: float = 0.0):
        self.steps = steps
        self._partials = []        # floats whose exact sum is the exact total cost
        self.add_cost(cost)

    @property
    def cost(self) -> float:
        """The exact total, rounded once."""
        return math.fsum(self._partials)

    def add_cost(self, cost: float) -> None:
        """Add `cost` without rounding the total.

        Each float addition is split into its rounded result and the part rounding lost
        (`low` below, exact by Shewchuk's argument); both are kept, so the list's exact sum
        is always the exact total. The list stays short: a few floats, however many costs.
        """
        if not cost:
            return                             # most steps cost nothing
        x, kept = cost, 0
        for y in self._partials:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)
            if low:
                self._partials[kept] = low
                kept += 1
            x = high
        self._partials[kept:] = [x]

    def exceeded(self, budget, started_at: float, now: float):
        """The reason the run must stop before its next step, or None."""
        if budget is None:
            return None
        if budget.max_steps is not None and self.steps >= budget.max_steps:
            return f"max_steps={budget.max_steps} reached ({self.steps} steps executed)"
        if budget.max_cost is not None and self.cost >= budget.max_cost:
            return f"max_cost={budget.max_cost} reached (cost so far {self.cost:.4f})"
        if budget.deadline is not None and now - started_at >= budget.deadline:
            return f"deadline={budget.deadline}s passed ({now - started_at:.0f}s since start)"
        return None

    def __repr__(self):
        return f"Usage(steps={self.steps}, cost={self.cost!r})"
