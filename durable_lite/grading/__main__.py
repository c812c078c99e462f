"""Command line: generate exercises from solutions, grade notebooks, or report on a class.

    python -m durable_lite.grading generate [--check] [--root DIR]
    python -m durable_lite.grading NOTEBOOK.ipynb [NOTEBOOK.ipynb ...] [--json] [--timeout S] [--seed N]
    python -m durable_lite.grading report SUBMISSIONS_DIR --out DIR [--jobs N] [--timeout S] [--seed N]
"""

import argparse
import sys


def generate_main(argv) -> int:
    from .generate import default_root, generate, stale

    parser = argparse.ArgumentParser(
        prog="python -m durable_lite.grading generate",
        description="Write exercises/*.ipynb from solutions/*.ipynb (solution regions become stubs).")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if any exercise is out of date")
    parser.add_argument("--root", default=None, help="the course folder (default: this one)")
    args = parser.parse_args(argv)
    root = args.root or default_root()
    if args.check:
        problems = stale(root)
        for path, reason in problems:
            print(f"{path}: {reason}")
        if problems:
            print("run `make exercises` (python -m durable_lite.grading generate) to fix")
        else:
            print("exercises are up to date")
        return 1 if problems else 0
    written = generate(root)
    for path in written:
        print(f"wrote {path}")
    if not written:
        print("exercises are up to date")
    return 0


def grade_main(argv) -> int:
    from .grader import DEFAULT_TIMEOUT, grade

    parser = argparse.ArgumentParser(
        prog="python -m durable_lite.grading",
        description="Grade exercise notebooks, each in a sandbox of its own, and print a score "
                    "per question.",
        epilog="`python -m durable_lite.grading report DIR --out OUT` grades a whole class; "
               "`python -m durable_lite.grading generate` writes the exercises from the solutions.")
    parser.add_argument("notebooks", nargs="+", help="exercise notebooks to grade")
    parser.add_argument("--json", action="store_true", help="print JSON (for collecting many)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds allowed per notebook (default {DEFAULT_TIMEOUT:.0f})")
    parser.add_argument("--seed", type=int, default=None,
                        help="the cases' seed (default: a new one, printed); repeats a run's cases")
    args = parser.parse_args(argv)
    return grade(args.notebooks, timeout=args.timeout, as_json=args.json, seed=args.seed)


def report_main(argv) -> int:
    from .grader import DEFAULT_TIMEOUT
    from .report import report

    parser = argparse.ArgumentParser(
        prog="python -m durable_lite.grading report",
        description="Grade every notebook in a folder (one sub-folder per learner, or flat), in "
                    "parallel and each in its own sandbox; write scores.csv, summary.md, "
                    "summary.png and the graded notebooks into --out.")
    parser.add_argument("submissions", help="the folder of learners' notebooks")
    parser.add_argument("--out", required=True, help="the folder to write the report into")
    parser.add_argument("--jobs", type=int, default=None,
                        help="notebooks graded at a time (default: one per CPU core)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds allowed per notebook (default {DEFAULT_TIMEOUT:.0f})")
    parser.add_argument("--seed", type=int, default=None,
                        help="the cases' seed (default: a new one, printed)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    result = report(args.submissions, args.out, jobs=args.jobs, timeout=args.timeout,
                    seed=args.seed, progress=False if args.no_progress else None)
    for warning in result.warnings:
        print(f"warning: {warning}")
    print(result.summary_line())
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "generate":
        return generate_main(argv[1:])
    if argv and argv[0] == "report":
        return report_main(argv[1:])
    return grade_main(argv)


if __name__ == "__main__":
    sys.exit(main())
