"""Durable queues: runs start when the limits allow, fairly between tenants, on any worker.

Once recovery works, recovery in bulk becomes the problem. One customer uploads 300
documents and 300 runs start at once. The model provider answers 20 requests a second and
refuses the rest (HTTP 429). Every refused run retries after the same backoff, so the
retries arrive together, and most are refused again. A queue keeps the flood from ever
reaching the provider: runs wait in the store and start only as the queue's limits allow.

    llm = dl.Queue("llm", concurrency=8, per_key=4, rate=(20, 1.0))
    engine.enqueue(llm, summarise, doc, key="tenant-a", run_id="doc-17")   # status "queued"
    engine.work(llm)       # a worker: start what the limits allow, until nothing is left

The limits
----------
- `concurrency`: at most this many of the queue's runs hold a slot at once, counted over
  every worker on the store, in any process. A run takes a slot when a worker starts it and
  holds it until the run finishes (completed, failed, halted, diverged or dead), parked on
  a signal or a sleep included, as in DBOS. (Inngest counts only steps executing.)
- `per_key`: at most this many slots for any one key. The key is the tenant: whoever
  the work is for, passed to `enqueue(..., key=...)`.
- `rate=(n, seconds)`: at most n starts in any window of that many seconds (a rolling
  window, like DBOS's limiter).

Which run starts next: round-robin over keys
--------------------------------------------
Of the keys that have a run waiting and room under `per_key`, the next start goes to the
key whose latest start is the oldest (a key never started comes first; between those, the
key whose oldest run has waited longest). Within a key, first in, first out. So tenant
B's 10 runs take turns with tenant A's 1,000 instead of waiting behind them, and a queue
used without keys is plain first-in, first-out. Turns share the starts; `per_key` keeps
room: while A holds its `per_key` slots, the other slots stay free for everyone else.

Everything is in the store
--------------------------
- `enqueue` creates the run, with status QUEUED, and its place in the queue in one
  transaction: a crash loses no queued run. Enqueueing the same run id again returns the
  run instead of queueing it twice, so a caller that crashed may simply enqueue again.
- A worker counts the slots and starts and takes a run in one transaction (for SQLite,
  BEGIN IMMEDIATE: one writer at a time), so two workers can never both take the last slot.
- The run it takes is RUNNING under its lease, like any run `start` creates. If the worker
  dies, any worker's recover() continues the run in the slot it already holds; a run that
  kills every worker that takes it up is set aside as dead (engine.py, "Poison runs"),
  and its slot is free again.
- The queue's limits are stored too, so every worker enforces the same ones; a worker
  that brings a new declaration to `work` replaces them for everyone.

Outside the queue: `engine.resume` of a run that had finished (a person acting on a failed
or dead run) runs it without asking the queue, and `start` never queues.
"""

import contextlib
import json
import math

from .clock import FakeClock
from .errors import QueuedRunError, RunArgumentsMismatch, WorkflowNotRegistered  # noqa: F401
from .store.records import QUEUED, RUNNING, SLEEPING, UNFINISHED

_NOBODY = object()      # no key may start now (a key itself may be None: "no key")


class Queue:
    """A queue's name and limits (see the module's docstring). Plain data: a worker brings
    it to `engine.work`, which stores the limits for every worker on the store."""

    __slots__ = ("name", "concurrency", "per_key", "rate")

    def __init__(self, name: str, *, concurrency: int | None = None, per_key: int | None = None,
                 rate: tuple | None = None):
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a queue needs a non-empty name, not {name!r}")
        for what, value in (("concurrency", concurrency), ("per_key", per_key)):
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"queue {name!r}: {what} must be a whole number >= 1, or None "
                                 f"for no limit; got {value!r}")
        if per_key is not None and concurrency is not None and per_key > concurrency:
            raise ValueError(f"queue {name!r}: per_key={per_key} is more than "
                             f"concurrency={concurrency}; one key can never hold more slots "
                             "than the queue has")
        if rate is not None:
            try:
                n, seconds = rate
            except (TypeError, ValueError):
                raise ValueError(f"queue {name!r}: rate must be (starts, seconds), e.g. "
                                 f"(20, 1.0) for 20 starts a second; got {rate!r}") from None
            if type(n) is not int or n < 1 or type(seconds) not in (int, float) \
                    or not 0 < seconds < math.inf:
                raise ValueError(f"queue {name!r}: rate must be (starts, seconds) with a whole "
                                 f"number of starts >= 1 and a finite number of seconds > 0; "
                                 f"got {rate!r}")
            rate = (n, float(seconds))
        self.name, self.concurrency, self.per_key, self.rate = name, concurrency, per_key, rate

    def limits_json(self) -> str:
        return json.dumps({"concurrency": self.concurrency, "per_key": self.per_key,
                           "rate": None if self.rate is None else list(self.rate)},
                          sort_keys=True)

    @classmethod
    def from_json(cls, name: str, text: str) -> "Queue":
        limits = json.loads(text or "{}")
        rate = limits.get("rate")
        return cls(name, concurrency=limits.get("concurrency"), per_key=limits.get("per_key"),
                   rate=None if rate is None else tuple(rate))

    def __eq__(self, other):
        return isinstance(other, Queue) and self.name == other.name and \
            self.limits_json() == other.limits_json()

    def __hash__(self):
        return hash((self.name, self.limits_json()))

    def __repr__(self):
        parts = [repr(self.name)]
        for what in ("concurrency", "per_key", "rate"):
            if getattr(self, what) is not None:
                parts.append(f"{what}={getattr(self, what)!r}")
        return f"Queue({', '.join(parts)})"


# enqueueing ---------------------------------------------------------------------------------
def enqueue(engine, queue, wf, args, kwargs, key, run_id, budget):
    """Engine.enqueue: create the run as QUEUED, at the back of `queue`, in one transaction."""
    if not isinstance(queue, Queue):
        raise TypeError(f"enqueue needs a dl.Queue as its first argument, not {queue!r}")
    if key is not None and (not isinstance(key, str) or not key):
        raise TypeError(f"queue {queue.name!r}: a key is a non-empty string (the tenant, say), "
                        f"or None for no key; not {key!r}")
    try:
        key is None or key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"queue {queue.name!r}: the key {key!r} is not text a store can keep "
                         "(it holds a lone surrogate)") from None
    new = engine.prepare_run(wf, run_id, args, kwargs, budget)
    store = engine.store
    now = engine.clock()
    try:
        with store.batch():
            store.save_queue(queue.name, queue.limits_json(), replace=False)
            store.create_run(new.record(QUEUED, now))
            store.add_to_queue(queue.name, key, new.run_id, now)
            engine.log_event(new.run_id, "enqueued", detail=_where(queue.name, key))
    except ValueError:                      # the run id exists: enqueued (or started) before
        existing = store.get_run(new.run_id)
        if existing is None:
            raise
        new.check_same(existing)
        _check_same_place(store, new.run_id, queue.name, key)
    return engine.get(new.run_id)


def _check_same_place(store, run_id, queue, key):
    """Enqueueing an existing run again is idempotent only in the same queue, under the
    same key: anywhere else, the caller believes in a place the run does not have."""
    places = [q for q in store.queued_runs() if q.run_id == run_id]
    if not places:
        raise RunArgumentsMismatch(
            f"run {run_id!r} was started directly, not in a queue, so it cannot be enqueued "
            f"into {_where(queue, key)}; use a new run id to queue new work")
    place = places[0]
    if (place.queue, place.key) != (queue, key):
        def told(name, k):
            return f"queue {name!r} with " + ("no key" if k is None else f"key {k!r}")
        raise RunArgumentsMismatch(
            f"run {run_id!r} was enqueued in {told(place.queue, place.key)}; enqueueing it "
            f"again into {told(queue, key)} cannot move it. Use a new run id, or enqueue it "
            "where it is.")


# working ------------------------------------------------------------------------------------
def work(engine, queues, rounds=None, poll=0.1) -> list:
    """Engine.work: the worker loop (see Engine.work for what a round is)."""
    for queue in queues:
        if not isinstance(queue, Queue):
            raise TypeError(f"engine.work takes dl.Queue objects, not {queue!r}")
    if rounds is not None and (type(rounds) is not int or rounds < 1):
        raise ValueError(f"rounds must be a whole number >= 1, or None to work until nothing "
                         f"is left; got {rounds!r}")
    if type(poll) not in (int, float) or not 0 < poll < math.inf:
        raise ValueError(f"poll must be a number of seconds > 0, not {poll!r}")
    store = engine.store
    for queue in queues:
        store.save_queue(queue.name, queue.limits_json())     # these limits, for every worker
    names = [queue.name for queue in queues]
    runs, done_rounds = [], 0
    while True:
        store.check_file()
        recovered = engine.recover()
        started, reopens = start_all(engine, names)
        runs += recovered + started
        done_rounds += 1
        if rounds is not None and done_rounds >= rounds:
            return runs
        if recovered or started:
            continue
        if _nothing_left(store, names):
            return runs
        wait = poll
        if _alone_on(engine.clock):
            # Nothing else can happen on a FakeClock while this worker waits: jump to the
            # next moment something will (a window opens, a sleep ends, a lease lapses).
            # A lease is taken only once its end has passed, so a lease ending now is not
            # "never": the wait of at least `poll` carries the clock past it.
            upcoming = [t for t in (*reopens, *_wake_times(store)) if t >= engine.clock()]
            if not upcoming:
                return runs                   # nothing will ever happen without outside help
            wait = max(poll, min(upcoming) - engine.clock())
        engine.sleep(wait)


def start_all(engine, names):
    """Start runs from the queues, one queue after another, until none may start now.
    Returns the runs it executed, and when a rate limit next lets a queue start one."""
    runs, reopens = [], []
    active = list(names)
    while active:
        for name in list(active):
            run, reopen = start_next(engine, name)
            if run is None:
                active.remove(name)
                if reopen is not None:
                    reopens.append(reopen)
            else:
                runs.append(run)
    return runs, reopens


def start_next(engine, name):
    """Take one run from the queue if its limits allow, and execute it until it completes,
    fails, halts or parks. Returns (the run, None), or (None, when a rate limit lets the
    queue start again, if that is what stops it)."""
    store = engine.store
    with contextlib.ExitStack() as hold:
        with store.batch():                 # the decision and the taking: one transaction
            now = engine.clock()
            chosen, reopen = _choose(store, name, now)
            if chosen is _NOBODY:
                return None, reopen
            key, run_id = chosen
            _check_registered(store, name, run_id)
            record = store.take_from_queue(name, key, engine.worker, now,
                                           now + engine.lease_seconds)
            # Held before the transaction ends, so that none of this engine's other threads
            # can take the run up in between (lease.py, rule 5).
            hold.enter_context(engine.holding(run_id, created=record))
            waited = now - record.created_at
            engine.log_event(run_id, "started", detail=f"{record.workflow} v{record.version}, "
                             f"from {_where(name, key)} after {waited:.2f} s")
        return engine.drive(record, created=True), None


def _choose(store, name, now):
    """((key, run id) of the run to start now, None), or (_NOBODY, when to look again)."""
    limits = Queue.from_json(name, store.queue_limits(name))
    store.settle_queue(name)
    window = None if limits.rate is None else now - limits.rate[1]
    state = store.queue_state(name, since=window)
    if not state["waiting"]:
        return _NOBODY, None
    if limits.concurrency is not None and sum(state["active"].values()) >= limits.concurrency:
        return _NOBODY, None                    # a slot frees when a run finishes
    if limits.rate is not None and len(state["starts"]) >= limits.rate[0]:
        n, seconds = limits.rate                # the window lets one more in when the
        return _NOBODY, state["starts"][-n] + seconds       # n-th latest start leaves it
    room = [key for key in state["waiting"]
            if limits.per_key is None or state["active"].get(key, 0) < limits.per_key]
    if not room:
        return _NOBODY, None
    # Round-robin: the key served longest ago; then the key whose oldest run waited longest.
    key = min(room, key=lambda k: (state["last_turn"].get(k, 0), state["waiting"][k][0]))
    return (key, state["waiting"][key][1]), None


def _check_registered(store, name, run_id):
    from .workflow import lookup
    record = store.get_run(run_id)
    try:
        lookup(record.workflow, record.version, run_id=run_id)
    except WorkflowNotRegistered as exc:
        raise WorkflowNotRegistered(
            f"queue {name!r}: its next run {run_id!r} is workflow {record.workflow!r} "
            f"v{record.version}, which this process has not registered, so this worker cannot "
            f"start it. Run the code that defines the workflow, then work again. ({exc})") from None


def _nothing_left(store, names) -> bool:
    return (not any(store.queue_state(name)["waiting"] for name in names)
            and not store.list_runs(UNFINISHED))


def _wake_times(store):
    """When sleeping runs wake and when leases of runs left running lapse. (Not when a
    wait for a signal times out: that wait is for someone outside, so a lone worker on a
    FakeClock returns rather than fast-forward past a person's deadline.)"""
    for record in store.list_runs(UNFINISHED):
        if record.status == RUNNING:
            if record.lease_expires is not None:
                yield record.lease_expires
        elif record.status == SLEEPING and record.wake_at is not None:
            yield record.wake_at


def _alone_on(clock) -> bool:
    """A FakeClock that only this worker moves (a shared simulation clock says otherwise)."""
    return isinstance(clock, FakeClock) and not getattr(clock, "shared", False)


def _where(name, key) -> str:
    return f"queue {name!r}" + ("" if key is None else f" (key {key!r})")
