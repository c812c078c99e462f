"""`make lock`: pin every package the course installs, for every supported Python.

    python tests/tools/lock.py [--python PATH ...] [--output constraints.txt]

For each Python (by default every 3.x from the project's minimum up that this machine
has, as `python3.N` on the PATH or under pyenv), pip resolves `.[every extra]` without
installing anything (`pip install --dry-run --report`). The Python running this script is
the reference: the one the committed notebook outputs are made with. Its newest versions
are the pins, and every other Python is first asked to take exactly those; only a Python
that cannot (too old for them, say) gets its own newest versions.

The answers are merged into one constraints file: a package every Python resolves to the
same version is pinned plainly; one that differs gets a pin per range of Pythons, with an
environment marker (`numpy==2.2.6 ; python_version < "3.11"`). `make lab` and `make test`
install with `pip install -c constraints.txt ...`, so next year's fresh clone gets this
year's versions.

Run it again whenever pyproject.toml's dependencies change; it rewrites the file whole.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADER = """\
# Every package that `pip install -e '.[{extras}]'` installs, pinned: the versions the
# committed notebook outputs were made and tested with. `make lab` and `make test` install
# with `-c constraints.txt`; environment.yml uses it too. Do not edit by hand: `make lock`
# rewrites it (resolved on Python {pythons}). A package that only some platforms need (e.g.
# appnope on macOS) is not listed, so pip picks its version there freely.
"""


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def minimum_python(pyproject: str) -> tuple:
    match = re.search(r'requires-python\s*=\s*">=\s*(\d+)\.(\d+)', pyproject)
    return (int(match.group(1)), int(match.group(2))) if match else (3, 10)


def extras(pyproject: str) -> list:
    """The names under [project.optional-dependencies], in order."""
    section = re.search(r"^\[project\.optional-dependencies\]\s*$(.*?)(?=^\[|\Z)", pyproject,
                        re.M | re.S)
    return re.findall(r"^([A-Za-z0-9][\w-]*)\s*=", section.group(1), re.M) if section else []


def find_pythons(minimum: tuple) -> list:
    """[(version 'X.Y', interpreter path)] for every X.Y >= minimum found here."""
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = []
    for minor in range(minimum[1], 30):
        version = f"{minimum[0]}.{minor}"
        candidates = [shutil.which(f"python{version}")]
        candidates += sorted(glob.glob(os.path.join(pyenv_root, "versions", f"{version}.*",
                                                    "bin", f"python{version}")), reverse=True)
        for path in filter(None, candidates):
            if python_version(path) == version:
                found.append((version, path))
                break
    return found


def python_version(path: str):
    try:
        out = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def resolve(python: str, extras_list: list, pinned: dict = None):
    """{normalized name: (name, version)} that pip would install on this Python, taking
    exactly the versions in `pinned` if given; None if it cannot."""
    with tempfile.TemporaryDirectory(prefix="durable-lite-lock-") as tmp:
        report = os.path.join(tmp, "report.json")
        target = f".[{','.join(extras_list)}]" if extras_list else "."
        command = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                   "--disable-pip-version-check", "--report", report, target]
        if pinned:
            constraints = os.path.join(tmp, "pinned.txt")
            with open(constraints, "w", encoding="utf-8") as f:
                f.writelines(f"{name}=={version}\n" for name, version in pinned.values())
            command += ["-c", constraints]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            if pinned:
                return None
            sys.exit(f"pip could not resolve {target} on {python}:\n{done.stderr[-3000:]}")
        with open(report, encoding="utf-8") as f:
            installs = json.load(f)["install"]
    pins = {}
    for item in installs:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if normalize(name) != "durable-lite":
            pins[normalize(name)] = (name, version)
    return pins


def merge(resolved: dict) -> list:
    """resolved: {'3.10': pins, '3.11': pins, ...} -> constraint lines, sorted by name."""
    versions = list(resolved)
    lines = []
    for key in sorted({k for pins in resolved.values() for k in pins}):
        chosen = [resolved[v].get(key, (None, None))[1] for v in versions]
        name = next(resolved[v][key][0] for v in versions if key in resolved[v])
        if len(set(chosen)) == 1:
            lines.append(f"{name}=={chosen[0]}")
            continue
        start = 0
        for i in range(1, len(versions) + 1):
            if i < len(versions) and chosen[i] == chosen[start]:
                continue
            if chosen[start] is not None:
                bounds = []
                if start > 0:
                    bounds.append(f'python_version >= "{versions[start]}"')
                if i < len(versions):
                    bounds.append(f'python_version < "{versions[i]}"')
                lines.append(f"{name}=={chosen[start]} ; {' and '.join(bounds)}")
            start = i
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", default=[],
                        help="an interpreter to resolve on (repeat; default: all found here)")
    parser.add_argument("--output", default=str(ROOT / "constraints.txt"))
    args = parser.parse_args(argv)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    minimum = minimum_python(pyproject)
    if args.python:
        pythons = [(python_version(p), p) for p in args.python]
        missing = [p for v, p in pythons if v is None]
        if missing:
            sys.exit(f"cannot run {', '.join(missing)}")
    else:
        pythons = find_pythons(minimum)
    pythons.sort(key=lambda vp: tuple(int(x) for x in vp[0].split(".")))
    oldest = f"{minimum[0]}.{minimum[1]}"
    if not pythons or pythons[0][0] != oldest:
        sys.exit(f"no Python {oldest} found: the oldest supported Python must be resolved "
                 "(install it, or name interpreters with --python)")
    names = extras(pyproject)
    reference = "%d.%d" % sys.version_info[:2]
    if reference not in dict(pythons):
        pythons.append((reference, sys.executable))
        pythons.sort(key=lambda vp: tuple(int(x) for x in vp[0].split(".")))
    print(f"resolving .[{','.join(names)}] on Python {reference} (the reference) …", flush=True)
    pins = resolve(dict(pythons)[reference], names)
    resolved = {}
    for version, path in pythons:
        if version == reference:
            resolved[version] = pins
            continue
        print(f"resolving on Python {version} ({path}) …", flush=True)
        same = resolve(path, names, pinned=pins)
        if same is None:
            print(f"  Python {version} cannot take the reference versions: its own newest", flush=True)
        resolved[version] = same or resolve(path, names)
    lines = merge(resolved)
    text = HEADER.format(extras=",".join(names), pythons=", ".join(resolved)) + "\n".join(lines) + "\n"
    Path(args.output).write_text(text, encoding="utf-8")
    print(f"wrote {len(lines)} pins to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
