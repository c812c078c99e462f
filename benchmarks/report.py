"""The report: ratios, targets, the printed tables and the plot, from a run's results.

Everything here reads the result dictionary only, so `--show` can print and plot a run
saved months ago exactly as a fresh one.
"""

import os

from replay import FLOOR_NAMES, REPLAY_ROWS
from support import fmt
from writing import WRITE_ROWS

# The targets the package sets itself; the report says honestly whether each was met.
TARGET_SQLITE_RATIO = 1.2      # durable_lite SQLiteStore per step <= 1.2 x bare sqlite3, same mode
TARGET_DBOS_FACTOR = 20.0      # durable_lite per step >= 20 x cheaper than DBOS on SQLite
TARGET_LOAD_RATIO = 2.0        # loading a run's entries <= 2 x a bare SELECT of the rows
TARGET_REPLAY_RATIO = 2.0      # resuming (replaying) a run <= 2 x SELECT + json.loads of its rows
TARGET_IMPORT_MS = 30.0        # `import durable_lite` in a fresh interpreter, bytecode cached
TARGET_TRACE_RATIO = 5.0       # engine.trace of a long run <= 5 x engine.history of the same run

NOT_AVAILABLE = "not available here"


def add_ratios(records, median_field):
    by = {(r["key"], r["n"]): r for r in records}
    for r in records:
        base = by.get((r["baseline"], r["n"]))
        r["ratio"] = r[median_field] / base[median_field] if base else None


def targets(writes, replays, imported, tracing=()):
    w = {(r["key"], r["n"]): r["median_us"] for r in writes}
    p = {(r["key"], r["n"]): r["median_ms"] for r in replays}
    out = []

    def add(name, value, limit, met, unit):
        out.append({"target": name, "value": value, "limit": limit, "met": met, "unit": unit})

    for n in sorted({r["n"] for r in writes}):
        for dl_key, bare_key, mode in (("dl_process", "sqlite_normal", "process/NORMAL"),
                                       ("dl_power", "sqlite_full", "power/FULL")):
            ratio = w[dl_key, n] / w[bare_key, n]
            add(f"SQLiteStore {mode} <= {TARGET_SQLITE_RATIO}x bare sqlite3 per step, N={n}",
                ratio, TARGET_SQLITE_RATIO, ratio <= TARGET_SQLITE_RATIO, "x")
        if ("dbos_sqlite", n) in w:
            for dl_key, mode in (("dl_process", "process"), ("dl_power", "power")):
                factor = w["dbos_sqlite", n] / w[dl_key, n]
                add(f"SQLiteStore {mode} >= {TARGET_DBOS_FACTOR:g}x cheaper per step than DBOS "
                    f"on SQLite, N={n}", factor, TARGET_DBOS_FACTOR, factor >= TARGET_DBOS_FACTOR,
                    "x")
    for n in sorted({r["n"] for r in replays}):
        ratio = p["dl_load", n] / p["sqlite_select", n]
        add(f"replay load <= {TARGET_LOAD_RATIO:g}x bare SELECT of the rows, N={n}", ratio,
            TARGET_LOAD_RATIO, ratio <= TARGET_LOAD_RATIO, "x")
        if ("sqlite_select_json", n) in p:            # runs saved before this row existed lack it
            ratio = p["dl_resume", n] / p["sqlite_select_json", n]
            add(f"resume (replay) <= {TARGET_REPLAY_RATIO:g}x bare SELECT + json.loads of the "
                f"rows, N={n}", ratio, TARGET_REPLAY_RATIO, ratio <= TARGET_REPLAY_RATIO, "x")
    add(f"import durable_lite < {TARGET_IMPORT_MS:g} ms", imported["median_ms"], TARGET_IMPORT_MS,
        imported["median_ms"] < TARGET_IMPORT_MS, "ms")
    read = {r["key"]: r for r in tracing}
    if read:
        ratio = read["trace"]["median_ms"] / read["history"]["median_ms"]
        add(f"trace <= {TARGET_TRACE_RATIO:g}x history of the same run, N={read['trace']['n']}",
            ratio, TARGET_TRACE_RATIO, ratio <= TARGET_TRACE_RATIO, "x")
    return out


def table(headers, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.append("  ".join(str(c).rjust(w) if isinstance(c, int) or c[:1].isdigit()
                               else str(c).ljust(w) for c, w in zip(row, widths)))
    return "\n".join(lines)


def write_rows(result):
    """The writing table's rows: every measured row, and a 'not available here' row for
    each system this machine could not run (the reason is printed under the table)."""
    measured = result["step_overhead"]
    unavailable = result.get("unavailable", {})
    order = list(WRITE_ROWS)
    rows = []
    for n in sorted({r["n"] for r in measured}):
        here = {r["key"]: r for r in measured if r["n"] == n}
        for key in order:
            if key in here:
                r = here[key]
                rows.append([r["system"], r["mode"], r["n"], fmt(r["median_us"]),
                             f"{fmt(r['min_us'])}-{fmt(r['max_us'])}", fmt(r["ratio"], 2),
                             WRITE_ROWS[r["baseline"]][1]])
            elif key in unavailable:
                system, mode, baseline = WRITE_ROWS[key]
                shown = "skipped" if unavailable[key].startswith("skipped") else NOT_AVAILABLE
                rows.append([system, mode, n, shown, "-", "-", WRITE_ROWS[baseline][1]])
    return rows


def report(result):
    meta = result["meta"]
    load = meta["load_average"]
    peak = f", at most {meta['load_average_max']:.2f} while it ran" \
        if "load_average_max" in meta else ""
    out = [f"durable_lite step overhead - {meta['repeats']} repeat(s) per row, median "
           f"(min-max); {meta['cpu_count']} CPU(s), Python {meta['python']}, "
           f"SQLite {meta['sqlite']}; load average {load[0]:.2f} before, "
           f"{load[1]:.2f} after (1 min){peak}"]
    if meta.get("file_system") in ("tmpfs", "ramfs"):
        out.append(f"  its files were on {meta['file_system']}, held in memory: every fsync "
                   "was free, and the power-loss rows measure nothing")
    out.append("")
    out.append("Writing: wall time of a workflow of N trivial steps / N")
    out.append(table(["system", "mode", "N", "us/step", "min-max", "x bare", "bare mode"],
                     write_rows(result)))
    for key, why in result.get("unavailable", {}).items():
        out.append(f"  {WRITE_ROWS[key][0]}: {why if why.startswith('skipped') else NOT_AVAILABLE + ': ' + why}")
    out += ["", "Replay after a real crash (child SIGKILLed after N checkpointed steps)"]
    rows = [[r["system"], r["n"], fmt(r["median_ms"]), f"{fmt(r['min_ms'])}-{fmt(r['max_ms'])}",
             fmt(r["per_step_us_median"]), fmt(r["ratio"], 2), FLOOR_NAMES[r["baseline"]]]
            for r in sorted(result["replay"],
                            key=lambda r: (r["n"], list(REPLAY_ROWS).index(r["key"])))]
    out.append(table(["what", "N", "ms", "min-max", "us/step", "x floor", "floor"], rows))
    if result.get("tracing"):                         # runs saved before it existed lack it
        history = next(r for r in result["tracing"] if r["key"] == "history")
        rows = [[r["what"], r["n"], fmt(r["median_ms"]), f"{fmt(r['min_ms'])}-{fmt(r['max_ms'])}",
                 fmt(r["median_ms"] / history["median_ms"], 2)] for r in result["tracing"]]
        out += ["", "Reading a long run back"]
        out.append(table(["what", "N", "ms", "min-max", "x history"], rows))
    imp = result["import_durable_lite"]
    out += ["", f"import durable_lite in a fresh interpreter: {fmt(imp['median_ms'])} ms median "
                f"({fmt(imp['min_ms'])}-{fmt(imp['max_ms'])}, {imp['repeats']} runs)"
                + (", bytecode cached" if "import_durable_lite_compiling" in result else "")]
    cold = result.get("import_durable_lite_compiling")
    if cold:
        out.append(f"  ... compiling every module (PYTHONDONTWRITEBYTECODE=1): "
                   f"{fmt(cold['median_ms'])} ms median ({fmt(cold['min_ms'])}-"
                   f"{fmt(cold['max_ms'])}, {cold['repeats']} runs)")
    if result["skipped"]:
        out += [""] + [f"{name}: {why}" for name, why in result["skipped"].items()]
    out += ["", "Targets"]
    for t in result["targets"]:
        unit = " ms" if t["unit"] == "ms" else "x"
        out.append(f"  [{'met' if t['met'] else 'MISSED'}] {t['target']}: measured "
                   f"{fmt(t['value'], 4)}{unit}")
    out += ["", f"benchmark took {meta['duration_s']:.1f} s"]
    return "\n".join(out)


def plot(result, path):
    """The writing rows as horizontal bars on a log scale, one colour per N. Returns None,
    or why no plot was drawn."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "skipped: matplotlib is not installed"
    records = result["step_overhead"]
    counts = sorted({r["n"] for r in records})
    keys = [k for k in WRITE_ROWS if any(r["key"] == k for r in records)]
    labels = [f"{WRITE_ROWS[k][0]}\n{WRITE_ROWS[k][1]}" for k in keys]
    by = {(r["key"], r["n"]): r for r in records}
    fig, ax = plt.subplots(figsize=(9, 0.75 * len(keys) + 1.5))
    height = 0.8 / len(counts)
    for j, n in enumerate(counts):
        ys = [i + (j - (len(counts) - 1) / 2) * height for i in range(len(keys))]
        medians = [by[k, n]["median_us"] for k in keys]
        low = [by[k, n]["median_us"] - by[k, n]["min_us"] for k in keys]
        high = [by[k, n]["max_us"] - by[k, n]["median_us"] for k in keys]
        ax.barh(ys, medians, height=height, xerr=[low, high], capsize=2, label=f"N = {n}")
        for y, k, m in zip(ys, keys, medians):     # the label sits past the whisker
            ax.annotate(f"{fmt(m)} µs", (by[k, n]["max_us"], y), xytext=(5, 0),
                        textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(range(len(keys)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    low_end = min(r["min_us"] for r in records)
    ax.set_xlim(low_end / 3, max(r["max_us"] for r in records) * 12)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    ax.set_xlabel("per-step cost in µs, log scale (bar: median; whisker: min to max)")
    ax.set_title("What one durable step costs, in a workflow of N trivial steps")
    ax.legend(loc="upper right")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None
