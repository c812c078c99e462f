"""Command line: generate exercises from solutions, or grade exercise notebooks.

    python -m durable_lite.grading generate [--check] [--root DIR]
    python -m durable_lite.grading NOTEBOOK.ipynb [NOTEBOOK.ipynb ...] [--json] [--timeout 120]
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
        description="Run exercise notebooks headless and print a score per question.",
        epilog="`python -m durable_lite.grading generate` writes the exercises from the solutions.")
    parser.add_argument("notebooks", nargs="+", help="exercise notebooks to grade")
    parser.add_argument("--json", action="store_true", help="print JSON (for collecting many)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds allowed per notebook (default {DEFAULT_TIMEOUT:.0f})")
    args = parser.parse_args(argv)
    return grade(args.notebooks, timeout=args.timeout, as_json=args.json)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "generate":
        return generate_main(argv[1:])
    return grade_main(argv)


if __name__ == "__main__":
    sys.exit(main())
