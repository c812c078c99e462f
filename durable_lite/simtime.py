"""Simulated time that many threads share: a crowd of workers on one FakeClock.

A FakeClock makes one run's two-day wait take no time at all. It cannot show three hundred
runs retrying against a busy model provider at once: whoever sleeps moves the clock for
everyone. `VirtualClock` is a FakeClock for a crowd. Each worker, or each run, is a thread
started with `spawn`, and a thread that sleeps waits in simulated time while the others
carry on. Time moves only when every thread is asleep, straight to the earliest wake-up.

    clock = VirtualClock()
    for i in range(300):
        clock.spawn(engine.start, summarise, doc(i), run_id=f"doc-{i}")
    clock.run()          # returns when every thread has finished; time jumped as needed

Only one thread runs at any moment, and the next to run is always the one with the
earliest wake-up (ties go to whoever went to sleep first), so a simulation does the same
thing, in the same order, every time. The engine's retry backoff, a provider's answer
time and a worker's poll all sleep on this clock, unchanged code doing what it would do on
a real one. A thread must never block on anything but this clock (a lock another thread
holds while it sleeps, say): nothing could wake it, and `run` reports the jam.

A thread that was not spawned (the notebook's own) sees an ordinary FakeClock: its sleep
moves the time forward at once.
"""

import heapq
import itertools
import threading

from .clock import FakeClock


class VirtualClock(FakeClock):
    """A FakeClock shared by the threads `spawn` starts (see the module's docstring)."""

    shared = True           # others act while a worker waits: queue.work() polls, never jumps

    def __init__(self, start: float = 1_767_225_600.0, *, timeout: float = 120.0):
        super().__init__(start)
        self.timeout = timeout              # real seconds run() waits for a jammed simulation
        self._lock = threading.Lock()
        self._ready = []                    # heap of (wake at, order, gate) of waiting threads
        self._order = itertools.count()
        self._mine = threading.local()      # the gate of the spawned thread running this code
        self._live = 0
        self._turns = 0                     # hand-overs so far: how run() sees progress
        self._errors = []
        self._finished = threading.Event()

    def spawn(self, fn, *args, **kwargs) -> None:
        """Start `fn(*args, **kwargs)` in a simulated thread, due now. It runs when the
        simulation reaches it: at `run()`, or when the spawning thread next sleeps."""
        gate = threading.Event()

        def body():
            gate.wait()
            self._mine.gate = gate
            try:
                fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - reported by run(), not lost in a thread
                self._errors.append(exc)
            finally:
                with self._lock:
                    self._live -= 1
                self._hand_on()

        with self._lock:
            self._live += 1
            self._finished.clear()
            heapq.heappush(self._ready, (self.t, next(self._order), gate))
        threading.Thread(target=body, name="durable_lite simulated thread", daemon=True).start()

    def sleep(self, seconds: float) -> None:
        gate = getattr(self._mine, "gate", None)
        if gate is None:                    # not a simulated thread: an ordinary FakeClock
            return super().sleep(seconds)
        with self._lock:
            heapq.heappush(self._ready, (self.t + max(0.0, seconds), next(self._order), gate))
        gate.clear()                        # before handing on: the turn may come straight back
        self._hand_on()
        gate.wait()

    def run(self) -> None:
        """Run the spawned threads until every one has finished, then return. Re-raises the
        first exception a thread raised."""
        if getattr(self._mine, "gate", None) is not None:
            raise RuntimeError("VirtualClock.run() is called by the thread that spawned the "
                               "simulation, not from inside it")
        self._hand_on()
        seen = -1
        while not self._finished.wait(self.timeout):
            if self._turns == seen:
                raise RuntimeError(f"the simulation made no progress for {self.timeout} s: a "
                                   "simulated thread is blocked on something other than this "
                                   "clock")
            seen = self._turns
        errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    def _hand_on(self):
        """Let the thread with the earliest wake-up run, moving time to it."""
        with self._lock:
            self._turns += 1
            if self._ready:
                wake_at, _, gate = heapq.heappop(self._ready)
                self.t = max(self.t, wake_at)
                gate.set()
            elif self._live == 0:
                self._finished.set()
