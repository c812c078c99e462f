"""Tables for lessons: a run's history, a trace of what each attempt did, the world's ledger.

Each function returns a pandas DataFrame (pandas is imported on first use), so the last
line of a cell shows it as a table. Output stays deterministic: worker ids made up of
host, process id and a random token are shown as "process 1", "process 2", … in order of
appearance, and times are shown as seconds since the run's first entry.
"""

import json


def _pandas():
    import pandas
    return pandas


def _short(value, width=48) -> str:
    text = json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= width else text[:width - 1] + "…"


def _friendly_workers(names):
    """Map generated worker ids ("host:pid:token") to "process 1", "process 2", …;
    names a lesson chose itself ("worker-1") stay as they are."""
    mapping = {}
    for name in names:
        if name and ":" in name and name not in mapping:
            mapping[name] = f"process {len(mapping) + 1}"
    return [mapping.get(name, name) for name in names]


def history_table(engine, run_id: str, times: bool = False, results: bool = True):
    """The run's recorded history, one row per entry: what the store knows.

    engine.history(run_id) holds the same data as dicts; this picks the columns a lesson
    reads (position, step, kind, status, attempts, worker, result) and, with `times=True`,
    adds started/ended as seconds since the first entry started.
    """
    rows = engine.history(run_id)
    workers = _friendly_workers([row["worker"] for row in rows])
    start = min((row["started_at"] for row in rows), default=0.0)
    out = []
    for row, worker in zip(rows, workers):
        line = {"position": row["position"], "step": row["step"], "kind": row["kind"],
                "status": row["status"], "attempts": row["attempts"], "worker": worker}
        if times:
            line["started (s)"] = round(row["started_at"] - start, 3)
            line["ended (s)"] = round(row["ended_at"] - start, 3)
        if results:
            line["result"] = _short(row["result"])
        out.append(line)
    columns = ["position", "step", "kind", "status", "attempts", "worker"]
    columns += ["started (s)", "ended (s)"] * times + ["result"] * results
    return _pandas().DataFrame(out, columns=columns).set_index("position")


def trace_table(*attempts, labels=None):
    """What each attempt did, one row per step: executed (the work ran) or replayed
    (answered from a checkpoint).

    Each argument is one attempt: a `dl.Run` (uses .replayed then .executed), a
    `dl.naive.NaiveResult` (every step it ran, grouped by its own attempt numbers), a
    `faults.ChildOutcome` (the run the child reported, if it lived to report), or a plain
    list of (step, "executed"|"replayed") pairs.
    """
    rows = []
    n = 0
    for i, attempt in enumerate(attempts):
        for sub, pairs in _attempt_pairs(attempt):
            n += 1
            label = labels[i] if labels else f"attempt {n}"
            if sub is not None and labels:
                label = f"{label} ({sub})"
            rows += [{"attempt": label, "step": step, "what happened": how} for step, how in pairs]
    return _pandas().DataFrame(rows, columns=["attempt", "step", "what happened"])


def _attempt_pairs(attempt):
    """[(sub-label or None, [(step, how), ...]), ...] for one argument of trace_table."""
    if hasattr(attempt, "executions"):                     # NaiveResult: many attempts
        groups = {}
        for number, step in attempt.executions:
            groups.setdefault(number, []).append((step, "executed"))
        return [(f"try {number}", pairs) for number, pairs in groups.items()]
    if hasattr(attempt, "returncode"):                     # ChildOutcome
        run = attempt.run or {"replayed": [], "executed": []}
        attempt = run
    if isinstance(attempt, dict):
        return [(None, [(s, "replayed") for s in attempt["replayed"]] +
                 [(s, "executed") for s in attempt["executed"]])]
    if hasattr(attempt, "replayed"):                       # dl.Run
        return [(None, [(s, "replayed") for s in attempt.replayed] +
                 [(s, "executed") for s in attempt.executed])]
    return [(None, list(attempt))]


def ledger_table(world):
    """Everything the simulated world recorded: refunds paid, emails sent, tickets closed.

    One row per record, in the order each service received them. This is the outside
    world's memory, which no crash of the workflow's process can reset.
    """
    rows = []
    for provider, name in ((world.payments, "payments"), (world.careless, "payments (careless)")):
        for r in provider.refunds():
            rows.append({"service": name, "record": r["refund_id"],
                         "detail": f"refund {r['amount']:g} for order {r['order_id']}"})
    for m in world.mailer.sent():
        rows.append({"service": "mailer", "record": m["message_id"],
                     "detail": f"to {m['to']}: {m['subject']}"})
    # the desk offers counts only, so read its ledger table directly (same package)
    for ticket, close_id in world.tickets._db.execute("SELECT ticket, id FROM closes ORDER BY id"):
        rows.append({"service": "ticket desk", "record": f"close {close_id}",
                     "detail": f"closed ticket {ticket}"})
    return _pandas().DataFrame(rows, columns=["service", "record", "detail"])


def events_table(engine, run_id: str):
    """The run's event log (starts, resumes, failed attempts, endings), one row per event.

    Times are seconds since the run's first event, the detail of a park included: the
    engine logs a wait's deadline (or a sleep's wake time) as a clock reading, which this
    shows as "deadline at 259,219.191 s (in 3 d 0 h 00 m)" rather than a raw epoch."""
    events = engine.events(run_id)
    workers = _friendly_workers([e.worker for e in events])
    start = events[0].at if events else 0.0
    rows = [{"at (s)": round(e.at - start, 3), "event": e.kind, "step": e.name or "",
             "worker": w, "detail": _detail(e, start)} for e, w in zip(events, workers)]
    return _pandas().DataFrame(rows, columns=["at (s)", "event", "step", "worker", "detail"])


# park events whose detail is the moment the run becomes due again, and what to call it
_DUE = {"waiting": "deadline", "sleeping": "wakes"}


def _detail(event, start: float) -> str:
    if event.kind in _DUE and event.detail:
        try:
            due = float(event.detail)
        except ValueError:
            return event.detail
        from ..trace import format_duration
        return (f"{_DUE[event.kind]} at {due - start:,.3f} s "
                f"(in {format_duration(due - event.at)})")
    return event.detail or ""


def sweep_table(rows, value: str = "refunds"):
    """Pivot `crash_lab_sweep()` rows: one row per crash point, one column per mode."""
    frame = _pandas().DataFrame(rows)
    order = list(dict.fromkeys(frame["crash"]))
    modes = list(dict.fromkeys(frame["mode"]))
    table = frame.pivot(index="crash", columns="mode", values=value).loc[order, modes]
    table.columns.name = f"{value} after resume"
    table.index.name = "crash lands at"
    return table
