"""The two things a store keeps: runs and the entries (checkpoints) recorded inside them.

They are plain classes rather than dataclasses: the stores build one per row they read
(a resume reads every entry of its run), and `import durable_lite` stays fast without the
dataclasses module. An entry is a tuple: never changed once recorded, cheap to build.
"""

from operator import itemgetter

# Run statuses. Plain strings, so they print and compare simply in a notebook.
RUNNING = "running"      # executing now, or interrupted (its worker died) and resumable
WAITING = "waiting"      # parked until a signal arrives or its deadline passes
SLEEPING = "sleeping"    # parked until its wake time
COMPLETED = "completed"
FAILED = "failed"        # the workflow raised (e.g. a step exhausted its retries); resume
                         # tries the step that failed again
HALTED = "halted"        # a budget limit stopped it; resume keeps it halted
DIVERGED = "diverged"    # replay met a call its history does not record there: the code
                         # changed under the run. Someone must act (see Engine.resume)
DEAD = "dead"            # its executions were interrupted again and again at one point: a
                         # poison run, set aside so it cannot kill every worker (engine.py)
COMPENSATED = "compensated"   # a step failed for good and the run undid what it had done,
                              # in reverse (saga.py); finished, like completed
QUEUED = "queued"        # waiting in a durable queue until a worker's engine.work() starts
                         # it within the queue's limits (queue.py); recover() leaves it alone

FINISHED = (COMPLETED, FAILED, HALTED, DIVERGED, DEAD,   # nothing happens until someone acts
            COMPENSATED)
PARKED = (WAITING, SLEEPING)
UNFINISHED = (RUNNING, WAITING, SLEEPING)                # what recover() looks after

# Kinds of recorded entry. Every one occupies a position in the run's sequence.
STEP = "step"            # ctx.step
ERROR = "error"          # a ctx.step that failed for good: replayed as StepFailed
VALUE = "value"          # ctx.now / ctx.uuid / ctx.random: a non-deterministic value
SIGNAL = "signal"        # the outcome of ctx.wait_for_signal (payload, or None on timeout)
TIMER = "timer"          # a deadline or wake-up time, fixed the first time it is reached
WOKE = "woke"            # ctx.sleep finished
PATCH = "patch"          # ctx.patched: this run took the new branch of a patch gate
                         # (a marker; see versioning.py)


class _Record:
    """Fields by position or by name, compared and printed field by field."""

    __slots__ = ()

    def __eq__(self, other):
        return type(self) is type(other) and all(
            getattr(self, f) == getattr(other, f) for f in self.__slots__)

    def __repr__(self):
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def copy(self, **changes):
        """A copy, with `changes` applied (what a store hands out, so nobody edits its own)."""
        new = object.__new__(type(self))
        for f in self.__slots__:
            setattr(new, f, changes[f] if f in changes else getattr(self, f))
        return new


class RunRecord(_Record):
    """One run as the store keeps it."""

    __slots__ = ("run_id", "workflow", "version", "args_json", "kwargs_json", "status",
                 "created_at", "updated_at", "result_json", "error", "budget_json", "halt_reason",
                 "waiting_for", "wake_at", "lease_owner", "lease_expires", "spent_steps",
                 "spent_cost", "interruptions", "taken_up_at")

    def __init__(self, run_id, workflow, version, args_json, kwargs_json, status, created_at,
                 updated_at, result_json=None, error=None, budget_json=None, halt_reason=None,
                 waiting_for=None, wake_at=None, lease_owner=None, lease_expires=None,
                 spent_steps=0, spent_cost=0.0, interruptions=0, taken_up_at=None):
        self.run_id, self.workflow, self.version = run_id, workflow, version
        self.args_json, self.kwargs_json, self.status = args_json, kwargs_json, status
        self.created_at, self.updated_at = created_at, updated_at
        self.result_json, self.error, self.budget_json = result_json, error, budget_json
        self.halt_reason, self.waiting_for, self.wake_at = halt_reason, waiting_for, wake_at
        self.lease_owner, self.lease_expires = lease_owner, lease_expires
        # What checkpoints discarded by invalidate() had used, so a budget still counts it.
        self.spent_steps, self.spent_cost = spent_steps, spent_cost
        # Poison-run bookkeeping (engine.py): how many executions in a row stopped at the
        # run's current position without finishing, and how many entries the run had when
        # the execution in flight took it up (None when no execution is in flight).
        self.interruptions, self.taken_up_at = interruptions, taken_up_at


class Entry(tuple):
    """One checkpoint: the recorded outcome at one position of a run."""

    __slots__ = ()
    _fields = ("position", "kind", "name", "occurrence", "result_json", "attempts",
               "started_at", "ended_at", "worker", "cost")

    def __new__(cls, position, kind, name, occurrence, result_json, attempts=1,
                started_at=None, ended_at=None, worker=None, cost=0.0):
        return tuple.__new__(cls, (position, kind, name, occurrence, result_json, attempts,
                                   started_at, ended_at, worker, cost))

    @classmethod
    def from_row(cls, row):
        """An entry from a row holding the fields in order (as the SQLite store reads them)."""
        return tuple.__new__(cls, row)

    position = property(itemgetter(0))
    kind = property(itemgetter(1))
    name = property(itemgetter(2))           # "lookup", "refund", "now", "approval"…
    occurrence = property(itemgetter(3))     # 1 for the first "search" in a run, 2 for the second…
    result_json = property(itemgetter(4))
    attempts = property(itemgetter(5))
    started_at = property(itemgetter(6))
    ended_at = property(itemgetter(7))
    worker = property(itemgetter(8))
    cost = property(itemgetter(9))

    @property
    def label(self) -> str:
        return self[2] if self[3] == 1 else f"{self[2]}#{self[3]}"

    def __repr__(self):
        return f"Entry({', '.join(f'{f}={v!r}' for f, v in zip(self._fields, self))})"


class Event(_Record):
    """Something that happened to a run but is not a checkpoint: a failed attempt, a park…"""

    __slots__ = ("run_id", "at", "kind", "position", "name", "worker", "detail", "seq")

    def __init__(self, run_id, at, kind, position=None, name=None, worker=None, detail=None, seq=0):
        self.run_id, self.at, self.kind = run_id, at, kind
        self.position, self.name, self.worker, self.detail, self.seq = position, name, worker, detail, seq


# durable queues (queue.py) --------------------------------------------------------------
class QueuedRun(_Record):
    """A run's place in a durable queue, as the store keeps it.

    state: "waiting" (not started yet), "started" (a worker took it up: it holds one of the
    queue's slots until it finishes) or "done" (it finished, so its slot is free again).
    seq orders the queue (first in, first out within a key); turn numbers the queue's
    starts, so a key's latest turn tells the round-robin whose turn is next.
    """

    __slots__ = ("seq", "queue", "key", "run_id", "enqueued_at", "state", "started_at",
                 "turn", "worker")

    def __init__(self, seq, queue, key, run_id, enqueued_at, state="waiting", started_at=None,
                 turn=None, worker=None):
        self.seq, self.queue, self.key, self.run_id = seq, queue, key, run_id
        self.enqueued_at, self.state, self.started_at = enqueued_at, state, started_at
        self.turn, self.worker = turn, worker
