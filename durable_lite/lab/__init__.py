"""Teaching aids for the notebooks: widgets, plots and tables.

Nothing here is imported by `import durable_lite`; each name below loads its module (and
ipywidgets, matplotlib or pandas) the first time a lesson asks for it.
"""

import importlib

# public name -> module in this package that defines it
_EXPORTS = {
    "scratch_folder": "workspace",
    "CrashLab": "crash_lab",
    "CrashLabModel": "crash_lab",
    "CrashLabMode": "crash_lab",
    "crash_lab_sweep": "crash_lab",
    "history_table": "tables",
    "trace_table": "tables",
    "ledger_table": "tables",
    "events_table": "tables",
    "sweep_table": "tables",
    "grouped_bars": "plots",
    "executions_per_attempt": "plots",
    "step_timeline": "plots",
    "run_through_crashes": "replay",
    "attempts_frame": "replay",
    "count_checkpoints": "replay",
    "plot_bars": "replay",
    "plot_lines": "replay",
    "ReliabilityExplorer": "reliability",
    "ReliabilityModel": "reliability",
    "ApprovalInbox": "inbox",
    "InboxModel": "inbox",
    "BudgetMeter": "budget_meter",
    "BudgetGauge": "budget_meter",
    "trace_timeline": "timeline",
    "steps_table": "timeline",
    "time_split": "timeline",
    "TimeAxis": "timeline",
    # lesson 11: flow control
    "requests_per_second": "flow",
    "last_request": "flow",
    "last_answer": "flow",
    "tenant_finish_times": "flow",
    "outcomes_table": "flow",
    # exercise 11: a flood to try your answers on
    "try_flood": "flood_trial",
    "flood_deadlines": "flood_trial",
    "FLOOD_WORKERS": "flood_trial",
    # lesson 15: four engines
    "crash_heat_map": "four_engines",
    "fitted_table": "four_engines",
    "histories_side_by_side": "four_engines",
}


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'durable_lite.lab' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_EXPORTS])
