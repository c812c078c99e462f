"""A store file deleted while a run executes: the worker says so instead of "completed".

SQLite keeps writing into a file that was deleted while it was open; nobody will ever read
those writes, and a new store on the same path starts empty. A worker that reported the
run finished would invite starting it again, and every effect would happen twice.
"""

import json
import subprocess
import sys
import time

from core_support import *  # noqa: F401,F403
from core_support import TESTS_DIR, python_path

pytestmark = pytest.mark.crash


def wait_for(path, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise AssertionError(f"the worker ended before reaching the gate: "
                                 f"{proc.stdout.read()} {proc.stderr.read()[-2000:]}")
        assert time.monotonic() < deadline, f"the worker never reached the gate ({path})"
        time.sleep(0.01)


@pytest.mark.parametrize("files", [("",), ("", "-wal", "-shm")], ids=["file", "file-wal-shm"])
def test_a_worker_whose_store_file_is_deleted_mid_run_raises_naming_the_file(tmp_path, files):
    store, folder, gate = str(tmp_path / "runs.db"), str(tmp_path / "world"), str(tmp_path / "gate")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path()))
    proc = subprocess.Popen([sys.executable, "deleted_store_child.py", store, folder, gate],
                            cwd=TESTS_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for(gate + ".inside", proc)
        for suffix in files:
            os.remove(store + suffix)
        open(gate, "w").close()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    report = json.loads(out.strip().splitlines()[-1])
    assert "status" not in report, f"the worker reported {report} after its store was deleted"
    assert report["error"].startswith("StoreFileError") and store in report["error"], report
