"""A run as a tree of spans: where a long, lumpy run spent its time and its money.

A durable run can retry a flaky tool five times, park for two days waiting for a person,
lose its worker to a SIGKILL and be finished by another worker. Its event log lists all
of that, one line after another, and answers none of the questions you have. The same
facts arranged as a tree do:

    run ticket-1042                     created .. finished
    ├─ execution 1   worker-a  parked       "started" .. "waiting" events
    │  ├─ classify   model call             a checkpoint: started_at, ended_at, result
    │  └─ lookup     5 attempts             a checkpoint + "attempt_failed" events
    │     ├─ attempt 1  failed
    │     └─ attempt 5  ok
    ├─ wait approval  parked 2 d            its timer .. its signal checkpoint
    ├─ execution 2   worker-b  interrupted  "resumed", then nothing: the worker died
    └─ execution 3   worker-c  completed    "resumed" .. "completed"

`build_trace(store, run_id)` (or `engine.trace(run_id)`) builds that tree after the fact
from what the store already keeps; nothing extra is written while the run executes.

Where each span comes from
--------------------------
- The run: created_at, and its ending (or now, if it has not ended).
- An execution is one worker's go at the run. It begins with a "started", "resumed" or
  "retrying" event and ends with "completed", "compensated", "failed", "halted",
  "waiting", "sleeping" or "diverged" from the same worker. No ending means the worker
  died (status "interrupted"): its span ends at its last record. A worker that takes up a
  poison run and declares it dead instead of running it ("dead") is an execution of no
  length, status "dead". A queued run's first execution begins when a queue worker starts
  it: until then ("enqueued") no worker had it.
- A step belongs to the execution that recorded it: the latest one by the same worker that
  began with at most `position` checkpoints (a "resumed" event says how many there were).
- Attempts: each failed attempt left an "attempt_failed" event when it ended; the
  successful one ended with the checkpoint. The store does not record when an attempt
  starts, so an attempt's span runs from the end of the one before it: the backoff wait
  before a retry is counted in the retry. A step that worked at its first attempt has no
  attempt spans: the step is its one attempt.
- Waits and sleeps belong to no execution: they are the time between executions, from
  the moment the run first reached them to the moment a worker carried on past them.

Model calls and money
---------------------
A step is a *model call* when its JSON result is an object holding token counts:
`tokens` (the total), and/or `input_tokens` and `output_tokens`; `model` and `provider`
name the model when present. `dl.sim`'s FakeLLM answers that way, and so do most model
APIs' usage blocks. A convention rather than a flag on the step, because the recorded
result is the only place the store keeps the tokens, and it keeps `engine.trace(run_id)`
a one-argument call in any process. Return the usage from your model step, and the trace
finds it. A step's cost is what the engine recorded for it (`dl.Step(..., cost=...)`, the
number budgets add up); a model call that declared none falls back to its result's `cost`.

What a trace cannot show
------------------------
Only what was recorded. A step is recorded when it ends, so the step a worker was running
when it was killed leaves nothing behind (the outside world's ledger still shows what it
did), and a span's times are those of the clock of the worker that wrote them.
Checkpoints discarded by `engine.invalidate` are gone from the tree (their contents are
in the event log). And a store written before every resume logged its "resumed" event
(a resume that found no checkpoint logged none) can hide a worker's second go at a run
inside its first: the tree shows what the log holds.
"""

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional

from . import jsonvalue
from .errors import UnknownRunError
from .lease import owner_is_dead
from .store.records import (ERROR, FINISHED, SIGNAL, SLEEPING, STEP, TIMER, WAITING, WOKE)

# Kinds of span, from the root down.
RUN, EXECUTION, STEP_SPAN, ATTEMPT, WAIT, SLEEP = "run", "execution", "step", "attempt", "wait", "sleep"

# Events that end an execution, and what the ending means for it.
_ENDINGS = {"completed": "completed", "failed": "failed", "halted": "halted",
            "waiting": "parked", "sleeping": "parked", "diverged": "diverged",
            "compensated": "compensated",   # a saga undid the run's steps (saga.py)
            "dead": "dead"}                 # taken up, found poison, not run (engine.py)
# The other events are no worker's go at the run. "signal" (sent by anyone) dates a wait's
# answer; "invalidated" marks a discarded step; "interrupted" is logged by the worker that
# takes the run up after one died (whose span already ends at its last record); "enqueued",
# "pinned", "upgraded", "migrated", "forked" and "forked_to" are about the run's place in a
# queue, its code or its lineage.


@dataclass
class Span:
    """One node of the tree: something that took time, with what it cost.

    kind:   "run", "execution", "step", "attempt", "wait" or "sleep"
    name:   the run id, "execution 2", a step label ("lookup", "search#2"), "attempt 3",
            or the signal / sleep name
    start, end: epoch seconds on the clock of the worker that recorded them
    status: how it ended ("completed", "failed", "interrupted", "parked", "signal", ...)
    worker: who did it (executions, steps, attempts)
    open:   still going when the trace was built (end is then "now")
    attributes: everything else (tokens, cost, attempts, error, deadline, ...)
    """

    kind: str
    name: str
    start: float
    end: float
    status: str
    worker: Optional[str] = None
    attributes: Dict[str, Any] = field(default_factory=dict)
    children: List["Span"] = field(default_factory=list)
    open: bool = False

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def cost(self) -> float:
        return self.attributes.get("cost", 0.0)

    @property
    def tokens(self) -> int:
        return self.attributes.get("tokens", 0)

    @property
    def is_model_call(self) -> bool:
        return self.kind == STEP_SPAN and "tokens" in self.attributes

    def walk(self) -> Iterator["Span"]:
        """This span, then every span below it, depth first, in time order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def find(self, kind: Optional[str] = None, name: Optional[str] = None) -> List["Span"]:
        """Every span below (and including) this one with that kind and/or name."""
        return [s for s in self.walk()
                if (kind is None or s.kind == kind) and (name is None or s.name == name)]

    def render(self, max_depth: Optional[int] = None) -> str:
        """The tree as indented text: one line per span, with its time and money."""
        lines = [self._line(self.start)]
        self._render_children(lines, "", self.start, 1, max_depth)
        return "\n".join(lines)

    def _render_children(self, lines, prefix, origin, depth, max_depth):
        if max_depth is not None and depth > max_depth:
            return
        for i, child in enumerate(self.children):
            last = i == len(self.children) - 1
            lines.append(prefix + ("└─ " if last else "├─ ") + child._line(origin))
            child._render_children(lines, prefix + ("   " if last else "│  "), origin,
                                   depth + 1, max_depth)

    def _line(self, origin) -> str:
        a = self.attributes
        parts = [f"{self.kind} {self.name}" if self.kind in (RUN, WAIT, SLEEP) else self.name]
        if self.kind == RUN:
            parts.append(f"{a['workflow']} v{a['version']}")
        if self.worker and self.kind == EXECUTION:
            parts.append(self.worker)
        if self.kind in (EXECUTION, WAIT, SLEEP):
            parts.append(f"at +{format_duration(self.start - origin)}")
        if self.is_model_call:
            parts.append(f"model {a['model']}" if a.get("model") else "model call")
        if self.kind == STEP_SPAN and a.get("attempts", 1) > 1:
            parts.append(f"{a['attempts']} attempts")
        parts.append(self.status + (" (still open)" if self.open else ""))
        parts.append(format_duration(self.duration))
        if self.tokens:
            parts.append(f"{self.tokens:,} tokens")
        if self.cost:
            parts.append(f"${self.cost:.4f}")
        if self.kind == ATTEMPT and a.get("error"):
            parts.append(a["error"])
        return " · ".join(parts)

    def __repr__(self):
        return (f"Span({self.kind} {self.name!r}, {format_duration(self.duration)}, "
                f"{self.status}, {len(self.children)} children)")


def format_duration(seconds: float) -> str:
    """'0.25 s', '16.3 s', '4 m 05 s', '3 h 02 m', '2 d 0 h 01 m': readable at every scale."""
    s = max(0.0, seconds)
    if s < 10:
        return f"{s:.2f} s".replace(".00 s", " s")
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} m {int(s % 60):02d} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} m"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h {int(s % 3600 // 60):02d} m"


def build_trace(store, run_id: str, now: Optional[float] = None) -> Span:
    """The run `run_id` in `store` as a tree of spans (see the module docstring).

    `now` ends the spans still open (a run waiting for a person); by default the time of
    the run's last record.
    """
    record = store.get_run(run_id)
    if record is None:
        raise UnknownRunError(f"no run {run_id!r} in {store!r}: nothing to trace")
    entries = store.load_entries(run_id)
    events = store.events(run_id)
    if now is None:
        now = max([record.updated_at, *(e.at for e in events),
                   *(e.ended_at for e in entries if e.ended_at is not None)])
    executions = _executions(events)
    _assign_entries(executions, entries)
    invalidated = {(e.position, e.name) for e in events if e.kind == "invalidated"}
    spans = [x.span(record, now, invalidated, last=(i == len(executions) - 1))
             for i, x in enumerate(executions)]
    spans += _parked_spans(entries, events, record, now)
    spans.sort(key=lambda s: (s.start, s.end))

    finished = record.status in FINISHED
    steps = [s for x in spans if x.kind == EXECUTION for s in x.children]
    attributes = {"workflow": record.workflow, "version": record.version,
                  "cost": sum(s.cost for s in steps), "tokens": sum(s.tokens for s in steps),
                  "steps": len(steps)}
    for name in ("error", "halt_reason", "waiting_for"):
        if getattr(record, name):
            attributes[name] = getattr(record, name)
    if record.spent_cost:
        attributes["discarded_cost"] = record.spent_cost
    end = max([record.updated_at, *(s.end for s in spans)]) if finished else now
    return Span(RUN, run_id, record.created_at, end, record.status,
                attributes=attributes, children=spans, open=not finished)


# executions ---------------------------------------------------------------------------
class _Execution:
    """One worker's go at the run, collected from the event log, then given its steps."""

    def __init__(self, number, worker, start, began, replayed=0):
        self.number, self.worker, self.start, self.began = number, worker, start, began
        self.replayed = replayed        # checkpoints the run had when this execution began
        self.end = None                 # set by an ending event
        self.ended = None               # which ending event
        self.failures = []              # its "attempt_failed" events
        self.entries = []               # checkpoints it recorded

    def records(self) -> List[float]:
        times = [f.at for f in self.failures]
        for e in self.entries:
            times += [t for t in (e.started_at, e.ended_at) if t is not None]
        return times

    def first_seen(self, default=0.0) -> float:
        """When it began: its beginning event, else its first record, else its ending."""
        if self.start is not None:
            return self.start
        return min(self.records() or [self.end if self.end is not None else default])

    def span(self, record, now, invalidated, last) -> Span:
        records = self.records()
        start = self.first_seen(default=now)
        # Still running: the last go, not ended, its worker still holding a lease that has
        # not expired, and not a process on this host that no longer exists (lease.py).
        running = (last and self.ended is None and record.status not in FINISHED
                   and record.lease_owner == self.worker and (record.lease_expires or 0) > now
                   and not owner_is_dead(self.worker))
        if self.ended:
            status, end = _ENDINGS[self.ended], self.end
        elif running:
            status, end = "running", now
        else:
            status, end = "interrupted", max([start, *records])
        steps = _step_spans(self, start, status, invalidated)
        attributes = {"number": self.number, "began": self.began, "replayed": self.replayed,
                      "cost": sum(s.cost for s in steps), "tokens": sum(s.tokens for s in steps)}
        return Span(EXECUTION, f"execution {self.number}", start, max(end, start), status,
                    self.worker, attributes, steps, open=running)


def _executions(events) -> List[_Execution]:
    """Cut the event log into executions: begin at a beginning, end at an ending."""
    executions: List[_Execution] = []
    current: Optional[_Execution] = None

    def begin(worker, start, began, replayed=0):
        nonlocal current
        current = _Execution(len(executions) + 1, worker, start, began, replayed)
        executions.append(current)
        return current

    def current_for(event):
        # An event from a worker with no open execution: its beginning was not logged (a
        # store from before the event log, or before a resume with no checkpoints logged
        # one), so infer one.
        if current is None or current.end is not None or current.worker != event.worker:
            return begin(event.worker, None, "inferred")
        return current

    for e in events:
        if e.kind in ("started", "retrying"):
            begin(e.worker, e.at, e.kind)
        elif e.kind == "resumed":
            same = (current is not None and current.end is None and current.began == "retrying"
                    and current.worker == e.worker and not current.failures)
            if same:                  # "retrying" then "resumed": one execution
                current.replayed = _count(e.detail)
            else:
                begin(e.worker, e.at, "resumed", _count(e.detail))
        elif e.kind == "attempt_failed":
            current_for(e).failures.append(e)
        elif e.kind == "dead":            # its own go, begun and ended at the take-up
            x = begin(e.worker, e.at, "taken up")
            x.end, x.ended = e.at, e.kind
        elif e.kind in _ENDINGS:
            x = current_for(e)
            x.end, x.ended = e.at, e.kind
    return executions


def _count(detail) -> int:
    match = re.match(r"(\d+) entr", detail or "")
    return int(match.group(1)) if match else 0


def _assign_entries(executions, entries):
    """Give each checkpoint to the execution that recorded it.

    That is the latest execution by the same worker that began with at most `position`
    checkpoints: any later one began after this checkpoint existed, so with more. A
    checkpoint no logged execution can own (a store from before the event log) gets an
    execution inferred for its worker.
    """
    by_worker: Dict[Optional[str], List[_Execution]] = {}
    for x in executions:
        by_worker.setdefault(x.worker, []).append(x)
    for entry in entries:
        owners = [x for x in by_worker.get(entry.worker, ()) if x.replayed <= entry.position]
        if not owners:
            x = executions[-1] if executions and executions[-1].began == "inferred" \
                and executions[-1].worker == entry.worker else None
            if x is None:
                x = _Execution(len(executions) + 1, entry.worker, None, "inferred")
                executions.append(x)
                by_worker.setdefault(entry.worker, []).append(x)
            owners = [x]
        owners[-1].entries.append(entry)
    executions.sort(key=lambda x: x.first_seen())
    for number, x in enumerate(executions, 1):
        x.number = number


# steps and attempts -------------------------------------------------------------------
def _step_spans(execution, start, status, invalidated) -> List[Span]:
    entries = {e.position: e for e in execution.entries if e.kind in (STEP, ERROR)}
    failures: Dict[int, list] = {}
    for f in execution.failures:
        failures.setdefault(f.position, []).append(f)
    # A step with no checkpoint began where the execution's previous record ended: walk the
    # positions in order, keeping the latest end so far (one pass, however long the run).
    records = sorted(execution.entries, key=lambda e: e.position)
    spans, seen, begun = [], 0, start
    for position in sorted(set(entries) | set(failures)):
        while seen < len(records) and records[seen].position < position:
            ended = records[seen].ended_at
            if ended is not None and ended > begun:
                begun = ended
            seen += 1
        spans.append(_step_span(execution, position, entries.get(position),
                                failures.get(position, []), begun, status, invalidated))
    return spans


def _step_span(execution, position, entry, failed, begun, execution_status, invalidated):
    label = entry.label if entry is not None else failed[0].name
    start = entry.started_at if entry is not None else begun
    attempts, previous = [], start
    for i, f in enumerate(failed, 1):
        number, error = _attempt(f.detail, i)
        attempts.append(Span(ATTEMPT, f"attempt {number}", previous, f.at, "failed", f.worker,
                             {"attempt": number, "error": error}))
        previous = f.at
    attributes = {"position": position, "step": entry.name if entry is not None else _name(label),
                  "attempts": len(failed)}
    if entry is not None and entry.kind == STEP:
        number = max(entry.attempts, len(failed) + 1)
        if failed:                # a step that worked at once has no attempt spans: it is one
            attempts.append(Span(ATTEMPT, f"attempt {number}", previous, entry.ended_at, "ok",
                                 entry.worker, {"attempt": number}))
        attributes["attempts"] = number
        result = jsonvalue.decode(entry.result_json)
        usage = _model_usage(result)
        cost = entry.cost
        if usage is not None:
            attributes.update(usage)
            if not cost and _is_number(result.get("cost")):
                cost = float(result["cost"])
        if cost:
            attributes["cost"] = cost
        status, end = "completed", entry.ended_at
    elif entry is not None:                               # ERROR: every attempt failed
        attributes["error"] = jsonvalue.decode(entry.result_json)["error"]
        status, end = "failed", entry.ended_at
    else:
        attributes["error"] = _attempt(failed[-1].detail, len(failed))[1]
        end = failed[-1].at
        if (position, label) in invalidated:
            status = "discarded"
        elif execution_status in ("failed", "running"):
            status = execution_status
        else:
            status = "interrupted"
    return Span(STEP_SPAN, label, start, max(end, start), status, execution.worker,
                attributes, attempts)


def _attempt(detail, default_number):
    """('attempt 3: ToolError: down') -> (3, 'ToolError: down')."""
    match = re.match(r"attempt (\d+): (.*)", detail or "", re.S)
    return (int(match.group(1)), match.group(2)) if match else (default_number, detail)


def _name(label):
    return re.sub(r"#\d+$", "", label)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _model_usage(result) -> Optional[dict]:
    """Token counts (and model, provider) if `result` follows the model-call convention."""
    if not isinstance(result, dict):
        return None
    counts = {k: result[k] for k in ("tokens", "input_tokens", "output_tokens")
              if _is_number(result.get(k))}
    if not counts:
        return None
    usage = {k: int(v) for k, v in counts.items()}
    usage.setdefault("tokens", usage.get("input_tokens", 0) + usage.get("output_tokens", 0))
    for key in ("model", "provider"):
        if isinstance(result.get(key), str):
            usage[key] = result[key]
    return usage


# waits and sleeps ---------------------------------------------------------------------
def _parked_spans(entries, events, record, now) -> List[Span]:
    """A span per wait and sleep: from its timer (first reached) to its outcome (carried on)."""
    signals: Dict[str, list] = {}
    last_park: Dict[str, str] = {}          # name -> the kind of its latest park event
    for e in events:
        if e.kind == "signal":
            signals.setdefault(e.name, []).append(e)
        elif e.kind in (WAITING, SLEEPING):
            last_park[e.name] = e.kind
    by_position = {e.position: e for e in entries}
    spans = []
    for timer in entries:
        if timer.kind != TIMER:
            continue
        outcome = by_position.get(timer.position + 1)
        if outcome is not None and (outcome.kind not in (SIGNAL, WOKE) or outcome.name != timer.name):
            outcome = None
        kind = _parked_kind(outcome, timer, record, last_park)
        if kind is None:
            continue
        at = jsonvalue.decode(timer.result_json)
        attributes = {"deadline": at} if kind == WAIT else {"wake_at": at}
        if outcome is None:
            status, end, is_open = ("waiting" if kind == WAIT else "sleeping"), now, True
        else:
            end, is_open = outcome.started_at, False
            status = "woke"
            if kind == WAIT:
                payload = jsonvalue.decode(outcome.result_json)
                status = "timeout" if payload is None else "signal"
                attributes["payload"] = payload
        if kind == WAIT and status != "timeout":
            sent = [s for s in signals.get(timer.name, []) if s.at <= at]
            if sent and status == "signal":
                attributes["signal_sent_at"] = sent[0].at
                signals[timer.name].remove(sent[0])
        spans.append(Span(kind, timer.label, timer.started_at, max(end, timer.started_at), status,
                          attributes=attributes, open=is_open))
    return spans


def _parked_kind(outcome, timer, record, last_park) -> Optional[str]:
    if outcome is not None:
        return WAIT if outcome.kind == SIGNAL else SLEEP
    # Not carried on past yet: the run is parked here now, or was when it last stopped.
    if record.status in (WAITING, SLEEPING) and record.waiting_for == timer.name:
        return WAIT if record.status == WAITING else SLEEP
    if timer.name in last_park:
        return WAIT if last_park[timer.name] == WAITING else SLEEP
    return None
