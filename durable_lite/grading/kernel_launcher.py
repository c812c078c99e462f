"""The grading kernels' launcher: ipykernel's own, without its debugger.

A graded notebook is run, never debugged, yet ipykernel starts its debugger in every
kernel where debugpy is installed (as JupyterLab needs it to be), importing some 140
modules of debugpy and pydevd: a tenth of a second each start, and half a second more
where they must be compiled first, as in the grading run's own bytecode folder
(bytecode.py). Here `import debugpy` fails, so ipykernel runs without one.

    python -m durable_lite.grading.kernel_launcher -f CONNECTION_FILE
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    # as ipykernel_launcher does: the current folder leaves sys.path while ipykernel loads
    # (IPython puts it back for the notebook's own imports)
    if sys.path[0] == "" or Path(sys.path[0]) == Path.cwd():
        del sys.path[0]
    sys.modules["debugpy"] = None          # an import that fails: no debugger

    from ipykernel import kernelapp

    kernelapp.launch_new_instance()
