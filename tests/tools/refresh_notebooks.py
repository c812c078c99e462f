"""Re-execute lessons in a fresh kernel and save them clean, ready to commit.

    python tests/tools/refresh_notebooks.py notebooks/02_checkpoint_every_step.ipynb ...
    make notebooks          # every lesson

Each notebook runs top to bottom in a fresh kernel, from its own folder (as JupyterLab
runs it). Per-cell timing metadata is dropped, and each cell's consecutive prints are saved as one
output however the kernel chunked them, so a re-run changes only what really changed.
Saved widget views are dropped too: a view points at a widget that lived in the kernel
that made it, so in a fresh clone it can only show as dead weight (up to ~100 KB a
notebook). Each widget output keeps its text/plain line, which is what nbval compares and
what an untrusted notebook shows. Prints how long each notebook took: a lesson should stay
well under 15 s.
"""

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def strip_widget_views(nb) -> None:
    """Remove saved widget views (keeping each output's text/plain) and the widget state."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            output.get("data", {}).pop(WIDGET_VIEW, None)
        cell.outputs = [o for o in cell.outputs if "data" not in o or o["data"]]
    nb.metadata.pop("widgets", None)


def coalesce_streams(nb) -> None:
    """Join consecutive stdout (or stderr) outputs of a cell into one. How a kernel chunks
    a cell's prints depends on timing; saved this way, a re-run changes nothing."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        merged = []
        for output in cell.outputs:
            previous = merged[-1] if merged else None
            if (output.output_type == "stream" and previous is not None
                    and previous.output_type == "stream" and previous.name == output.name):
                previous.text += output.text
            else:
                merged.append(output)
        cell.outputs = merged


def refresh(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - started
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    strip_widget_views(nb)
    coalesce_streams(nb)
    nbformat.write(nb, path)
    return seconds


def main(paths):
    paths = [Path(p) for p in paths] or sorted(Path("notebooks").glob("*.ipynb"))
    for path in paths:
        print(f"{path}: {refresh(path):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
