"""Run a pip install and keep saying how far it has got, even where pip says nothing.

    python tests/tools/install_progress.py PIP COMMAND...      (the Makefile's first install)

pip prints a line per package while it downloads, then "Installing collected packages: ..."
and nothing more until it has unpacked every one of them: on a busy two-core laptop, over
two minutes of silence in a first `make lab`, the moment a learner decides it has hung.
This passes pip's output through unchanged and, during that last step, prints every few
seconds how many of the packages are in place, counted from the `.dist-info` folders
appearing in the environment. The standard library only: it runs before anything is
installed.
"""

import re
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

EVERY = 10.0          # seconds between two progress lines while pip is silent


def installed_since(folder: Path, since: float) -> int:
    """Packages (their .dist-info folders) that appeared in `folder` after `since`."""
    try:
        return sum(1 for p in folder.glob("*.dist-info") if p.stat().st_mtime >= since)
    except OSError:
        return 0


def report(total: int, since: float, done: threading.Event, site: Path) -> None:
    while not done.wait(EVERY):
        n = min(installed_since(site, since), total)
        print(f"  ... {n} of {total} packages installed ({time.monotonic() - START:.0f} s so far)",
              flush=True)


def main(command) -> int:
    site = Path(sysconfig.get_paths()["purelib"])
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, bufsize=1)
    done, reporter = threading.Event(), None
    for line in process.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        collected = re.match(r"Installing collected packages: (.*)", line.strip())
        if collected and reporter is None:
            total = len([name for name in collected.group(1).split(",") if name.strip()])
            reporter = threading.Thread(target=report, args=(total, time.time() - 1, done, site),
                                        daemon=True)
            reporter.start()
    done.set()
    return process.wait()


START = time.monotonic()

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
