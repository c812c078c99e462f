"""A fresh process whose wall clock reads later: the resume "the next day", without waiting.

A key built from the wall clock (`int(time.time())`, `date.today()`) is the same on a retry
a moment later and different on a resume the next day, which is when a real worker comes
back after an outage. A check cannot sleep for a day, and the grader's own clock must stay
true, so the clock is moved in the fresh process that resumes the run (child.py): the
learner's module starts with `prelude()`, which moves the clock on by the seconds that
`environment(seconds)` puts in the process's environment, before any of the module's
imports run (so `from datetime import datetime` gets the moved one too).

Moved: `time.time` and `time.time_ns`; `time.localtime`, `gmtime`, `ctime`, `asctime` and
`strftime` called without a time; `datetime.datetime.now`, `utcnow` and `today`, and
`datetime.date.today` (which reads `time.time`). Not moved: the monotonic clocks, which say
nothing about the date and which timeouts rely on.
"""

import datetime
import os
import time

ENV = "DURABLE_LITE_WALL_CLOCK_AHEAD"


def environment(seconds: float) -> dict:
    """The environment entry that makes `prelude()` move a fresh process's clock."""
    return {ENV: repr(float(seconds))}


def prelude() -> str:
    """Source to put first in a module a fresh process imports."""
    return ("import durable_lite.grading.wall_clock as _wall_clock\n"
            "_wall_clock.move_from_environment()\n\n")


def move_from_environment() -> None:
    seconds = float(os.environ.get(ENV) or 0)
    if seconds:
        move(seconds)


def move(seconds: float) -> None:
    """Make this process's wall clock read `seconds` later than it is, from now on."""
    real_time, real_time_ns = time.time, time.time_ns
    real_localtime, real_gmtime = time.localtime, time.gmtime
    real_ctime, real_asctime, real_strftime = time.ctime, time.asctime, time.strftime

    def moved_time():
        return real_time() + seconds

    def moved_time_ns():
        return real_time_ns() + int(seconds * 1e9)

    def now_if_none(secs):
        return moved_time() if secs is None else secs

    time.time, time.time_ns = moved_time, moved_time_ns
    time.localtime = lambda secs=None: real_localtime(now_if_none(secs))
    time.gmtime = lambda secs=None: real_gmtime(now_if_none(secs))
    time.ctime = lambda secs=None: real_ctime(now_if_none(secs))
    time.asctime = lambda t=None: real_asctime(real_localtime(moved_time()) if t is None else t)
    time.strftime = lambda fmt, t=None: real_strftime(fmt, real_localtime(moved_time()) if t is None else t)

    class MovedDatetime(datetime.datetime):
        """datetime whose now() reads the moved clock (today() already reads time.time)."""

        @classmethod
        def now(cls, tz=None):
            return cls.fromtimestamp(moved_time(), tz)

        @classmethod
        def utcnow(cls):
            return cls.utcfromtimestamp(moved_time())

    MovedDatetime.__name__ = MovedDatetime.__qualname__ = "datetime"
    datetime.datetime = MovedDatetime
