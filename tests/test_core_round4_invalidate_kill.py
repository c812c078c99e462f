"""`engine.invalidate` killed for real (SIGKILL) before every SQL statement it runs, so at
every commit and between any two: the run it leaves is either untouched or wholly
invalidated, never a completed run with steps silently gone. Whatever the kill left, every
value the run had recorded is still somewhere (its checkpoint, or an "invalidated" event),
and the run can be carried on to the end by a fresh process.
"""

import json
import shutil
import subprocess
import uuid

from core_support import *  # noqa: F401,F403
from core_support import python_path

pytestmark = pytest.mark.crash

START = 1_767_225_600.0     # the child's FakeClock; the parent's is far past its lease

# The child: open the store, then SIGKILL itself just before the `kill_at`-th SQL statement
# that invalidate() runs (0: never). Without a kill it prints the statements it ran.
CHILD = r"""
import json, os, signal, sqlite3, sys
path, step, kill_at, now = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
ran, armed = [], [False]
connect = sqlite3.connect

def traced(*args, **kwargs):
    db = connect(*args, **kwargs)
    def trace(sql):
        if armed[0]:
            ran.append(sql)
            if len(ran) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
    db.set_trace_callback(trace)
    return db

sqlite3.connect = traced
import durable_lite as dl
engine = dl.Engine(dl.SQLiteStore(path), dl.FakeClock(now))
armed[0] = True
discarded = engine.invalidate("inv", step)
armed[0] = False
print(json.dumps({"discarded": discarded, "statements": ran}))
"""


def fresh(name):
    """A value no execution produces twice, so a lost one cannot be mistaken for a new one."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


@dl.workflow("round4-invalidate-kill")
def quoted(ctx):
    a = ctx.step("a", fresh, "a")
    b = ctx.step("b", fresh, "b")
    token = ctx.uuid()
    c = ctx.step(dl.Step("c", cost=0.5), fresh, "c")
    return [a, b, token, c]


def invalidate_in_child(path, kill_at):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path()))
    proc = subprocess.run([sys.executable, "-c", CHILD, path, "b", str(kill_at), str(START)],
                          capture_output=True, text=True, env=env, timeout=120)
    return proc


def state_of(path):
    store = dl.SQLiteStore(path)
    try:
        record = store.get_run("inv")
        entries = [(e.position, e.label, e.result_json) for e in store.load_entries("inv")]
        invalidated = [(e.position, e.name, e.detail) for e in store.events("inv")
                       if e.kind == "invalidated"]
        return record, entries, invalidated
    finally:
        store.close()


def test_invalidate_killed_at_every_statement_leaves_all_or_nothing_and_loses_no_value(tmp_path):
    pristine = str(tmp_path / "pristine.db")
    engine = dl.Engine(dl.SQLiteStore(pristine), dl.FakeClock(START - 10))
    done = engine.start(quoted, run_id="inv")
    assert done.status == "completed"
    engine.store.close()
    _, before, _ = state_of(pristine)
    gone = before[1:]                              # b, the uuid and c: what "b" discards

    # A clean run, to know the statements invalidate() runs.
    clean = str(tmp_path / "clean.db")
    shutil.copy(pristine, clean)
    proc = invalidate_in_child(clean, 0)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["discarded"] == ["b", "c"]
    statements = report["statements"]
    writes = [s for s in statements if s.split()[0].upper() in ("INSERT", "UPDATE", "DELETE",
                                                                 "COMMIT")]
    assert len(writes) >= 3, statements             # the kills below fall around each of them

    for k in range(1, len(statements) + 1):
        path = str(tmp_path / f"killed-{k}.db")
        shutil.copy(pristine, path)
        proc = invalidate_in_child(path, k)
        where = f"killed before statement {k} ({statements[k - 1][:70]!r})"
        assert proc.returncode == -9, f"{where}: the child exited {proc.returncode}: {proc.stderr}"
        record, entries, invalidated = state_of(path)
        untouched = (entries == before and invalidated == [] and record.status == "completed"
                     and json.loads(record.result_json) == done.result and record.spent_steps == 0)
        whole = (entries == before[:1] and invalidated == gone and record.status == "running"
                 and record.result_json is None and record.spent_steps == 2
                 and record.spent_cost == 0.5)
        assert untouched or whole, (f"{where}: status {record.status}, entries {entries}, "
                                    f"invalidated events {invalidated}, spent "
                                    f"{record.spent_steps}/{record.spent_cost}")

        # A fresh process carries on: invalidate again if nothing happened, then recover().
        later = dl.Engine(dl.SQLiteStore(path), dl.FakeClock(START + 1000))
        try:
            if untouched:
                assert later.invalidate("inv", "b") == ["b", "c"], where
            else:
                with pytest.raises(KeyError):
                    later.invalidate("inv", "b")            # done already: nothing to redo
            [run] = later.recover()
            assert run.status == "completed" and run.executed == ["b", "c"], (where, run)
            assert run.result[0] == done.result[0]           # "a" was kept, not executed again
            assert (run.steps, run.cost) == (5, 1.0), where  # the discarded work still counts
            logged = [(e.position, e.name, e.detail) for e in later.events("inv")
                      if e.kind == "invalidated"]
            assert logged == gone, where                     # each old value, once
        finally:
            later.store.close()
