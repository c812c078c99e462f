"""Workflow versions: a run records the name and version it started on and finishes on
that code, while new runs start on the newest version."""

from core_support import *  # noqa: F401,F403

from durable_lite.workflow import _registry, lookup
from durable_lite.errors import WorkflowNotRegistered


@pytest.fixture
def forget():
    """Unregister (name, version) pairs for one test, restoring them afterwards."""
    removed = {}

    def drop(name, version):
        removed[(name, version)] = _registry.pop((name, version))

    yield drop
    _registry.update(removed)


def define_v1():
    @dl.workflow("core-onboard", version=1)
    def onboard_v1(ctx, user):
        ctx.step("welcome", lambda: f"welcome {user}")
        ctx.wait_for_signal("verified", timeout=86_400)
        return {"user": user, "code": "v1"}
    return onboard_v1


def define_v2():
    @dl.workflow("core-onboard", version=2)
    def onboard_v2(ctx, user):
        ctx.step("welcome", lambda: f"welcome {user}")
        ctx.step("survey", lambda: "sent")            # new in v2: a different history
        ctx.wait_for_signal("verified", timeout=86_400)
        return {"user": user, "code": "v2"}
    return onboard_v2


def test_in_progress_v1_runs_finish_on_v1_while_new_runs_start_on_v2(engine, fresh):
    define_v1()
    assert engine.start("core-onboard", "ana", run_id="old").status == "waiting"
    assert engine.get("old").version == 1

    define_v2()                                        # deployed while "old" is waiting
    assert engine.start("core-onboard", "bo", run_id="new").status == "waiting"
    assert engine.get("new").version == 2

    for run_id in ("old", "new"):
        engine.signal(run_id, "verified", True)
    old, new = fresh().resume("old"), fresh().resume("new")
    assert old.result == {"user": "ana", "code": "v1"} and old.replayed == ["welcome"]
    assert new.result == {"user": "bo", "code": "v2"} and new.replayed == ["welcome", "survey"]


def test_resuming_a_run_whose_version_has_no_code_is_a_clear_error(engine, forget):
    define_v1()
    define_v2()
    engine.start(lookup("core-onboard", 1), "cy", run_id="orphan")
    forget("core-onboard", 1)                          # v1's code is gone from this process
    with pytest.raises(WorkflowNotRegistered) as err:
        engine.resume("orphan")
    message = str(err.value)
    assert "'orphan'" in message and "'core-onboard' version 1" in message and "[2]" in message
    engine.signal("orphan", "verified", True)          # due now, but not for this process:
    assert engine.recover() == []                      # recover() leaves it to one that has
    assert engine.get("orphan").status == "waiting"    # the code, instead of failing on it


def test_starting_an_unknown_workflow_name_is_a_clear_error(engine):
    with pytest.raises(WorkflowNotRegistered, match="'core-nowhere'"):
        engine.start("core-nowhere", run_id="x")


def test_workflow_names_and_versions_are_validated():
    with pytest.raises(ValueError):
        dl.workflow("")
    with pytest.raises(ValueError, match="version"):
        dl.workflow("core-bad-version", version=0)


def test_starting_new_code_on_a_run_recorded_on_v1_continues_on_v1_and_says_so(engine):
    v1 = define_v1()
    assert engine.start(v1, "ana", run_id="pinned").status == "waiting"
    v2 = define_v2()
    engine.signal("pinned", "verified", True)
    run = engine.start(v2, "ana", run_id="pinned")
    assert run.status == "completed" and run.version == 1
    assert run.result == {"user": "ana", "code": "v1"}               # v2's code did not run
    assert "v1" in run.note and "v2" in run.note and "new run id" in run.note
    assert "note=" in repr(run)
    (event,) = [e for e in engine.events("pinned") if e.kind == "pinned"]
    assert event.detail == run.note
    assert engine.start(v2, "ana", run_id="pinned").note is not None  # every time it happens
    assert engine.start(v1, "ana", run_id="pinned").note is None      # the recorded version: nothing to say
    assert engine.start("core-onboard", "ana", run_id="pinned").note is not None   # the name means v2
