"""What a run records must read back the same in every process: names, keys and values.

A name is refused before anything runs if the store could not keep it, or if it could be
mistaken for another (`#` separates a name from its occurrence number in labels such as
"search#2"). A value is refused if JSON would change it on the way back (a set, a dict
holding both 1 and "1"). An idempotency key is made only of JSON values, so it is the
same in the process that crashed and in the one that resumes. On both stores.
"""

import subprocess

from core_support import *  # noqa: F401,F403
from core_support import Calls

from durable_lite.errors import RunArgumentsMismatch, StepResultNotJSON
from durable_lite.keys import derive_key

# idempotency keys ---------------------------------------------------------------------------

KEY_PROBE = ("import sys, json; from durable_lite.keys import derive_key; "
             "print(derive_key('run-1', 'refund', {'order': 'A-17', 'lines': [1, 2.5, None]}, "
             "['x', True], 'ü'))")


def test_a_key_is_the_same_in_every_process_whatever_its_hash_seed():
    keys = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", KEY_PROBE], capture_output=True, text=True,
                             check=True, env=env)
        keys.add(out.stdout.strip())
    here = derive_key("run-1", "refund", {"order": "A-17", "lines": [1, 2.5, None]}, ["x", True], "ü")
    assert keys == {here}


@pytest.mark.parametrize("part", [{"A-1", "A-2"}, frozenset({1}), object(), b"bytes",
                                  float("nan"), {1: "a", "1": "b"}],
                         ids=["set", "frozenset", "object", "bytes", "nan", "clashing-keys"])
def test_a_key_refuses_a_part_that_is_not_a_json_value_naming_the_run_and_the_type(eng, part):
    calls = Calls()

    @dl.workflow("values-key-part")
    def wf(ctx):
        key = ctx.idempotency_key("refund", part)
        return ctx.step("pay", calls, "pay", key)

    run = eng.start(wf, run_id="key-part")
    assert run.status == "failed" and calls.total == 0
    assert "'key-part'" in run.error and "idempotency_key" in run.error
    if isinstance(part, float):
        assert "nan" in run.error.lower()
    elif isinstance(part, dict):
        assert "'1'" in run.error
    else:
        assert type(part).__name__ in run.error


def test_derive_key_refuses_a_set_directly_too():
    with pytest.raises(StepResultNotJSON, match="set"):
        derive_key("r", {"a", "b"})


# names the store cannot keep, or that read as another name -------------------------------

def bad_name_workflows(name):
    """One workflow per place a name is given, each with an effect before and after."""
    calls = Calls()

    @dl.workflow("values-bad-step-name")
    def as_step(ctx):
        ctx.step("before", calls, "before")
        return ctx.step(name, calls, "effect")

    @dl.workflow("values-bad-step-spec")
    def as_spec(ctx):
        ctx.step("before", calls, "before")
        return ctx.step(dl.Step(name, retry=dl.Retry(2)), calls, "effect")

    @dl.workflow("values-bad-wait-name")
    def as_wait(ctx):
        ctx.step("before", calls, "before")
        return ctx.wait_for_signal(name, timeout=60)

    @dl.workflow("values-bad-sleep-name")
    def as_sleep(ctx):
        ctx.step("before", calls, "before")
        return ctx.sleep(1, name=name)

    return calls, [as_step, as_spec, as_wait, as_sleep]


@pytest.mark.parametrize("name, why", [("\ud800", "surrogate"), ("s#2", "'#'"), ("#", "'#'")],
                         ids=["lone-surrogate", "hash", "only-hash"])
def test_a_name_the_store_cannot_keep_or_that_reads_as_another_is_refused_before_running(eng, name, why):
    calls, workflows = bad_name_workflows(name)
    for i, wf in enumerate(workflows):
        run = eng.start(wf, run_id=f"bad-{i}")
        assert run.status == "failed", (wf, run)
        assert f"'bad-{i}'" in run.error and why in run.error, run.error
        assert [e.label for e in eng.store.load_entries(f"bad-{i}")] == ["before"]
    assert calls.counts == {"before": len(workflows)}          # no effect ever ran
    with pytest.raises(ValueError, match=why):
        eng.signal("bad-0", name, "x")


def test_a_step_named_like_a_second_occurrence_cannot_shadow_it(eng):
    """Before: a step literally named "s#2" and the second "s" shared the label "s#2",
    and invalidate("r", "s#2") discarded three steps instead of one."""
    @dl.workflow("values-hash-shadow")
    def wf(ctx):
        first = ctx.step("s", lambda: 1)
        second = ctx.step("s", lambda: 2)
        third = ctx.step("s#2", lambda: 3)
        return [first, second, third]

    run = eng.start(wf, run_id="shadow")
    assert run.status == "failed" and "'s#2'" in run.error and "'#'" in run.error
    assert [e.label for e in eng.store.load_entries("shadow")] == ["s", "s#2"]


def test_a_run_id_must_be_a_non_empty_string_the_store_can_keep(eng):
    @dl.workflow("values-run-id")
    def wf(ctx):
        return ctx.step("only", lambda: 1)

    for bad in ("", "\udcff", 7):
        with pytest.raises((ValueError, TypeError), match="run id"):
            eng.start(wf, run_id=bad)
    assert eng.store.list_runs() == []
    assert eng.start(wf).run_id.startswith("values-run-id-")     # None: an id is generated


def test_a_workflow_name_the_store_cannot_keep_is_refused_at_definition():
    with pytest.raises(ValueError, match="surrogate"):
        dl.workflow("bad\ud800")


# the same run, compared as JSON ---------------------------------------------------------------

@dl.workflow("values-same-run")
def same_run(ctx, value, options=None):
    return ctx.step("echo", lambda: [value, options])


def test_starting_an_existing_run_id_compares_the_recorded_json_not_python_equality(eng):
    assert eng.start(same_run, 1, run_id="r1").result == [1, None]
    for different in (True, 1.0):                    # == 1 in Python, not the same JSON
        with pytest.raises(RunArgumentsMismatch, match="'r1'"):
            eng.start(same_run, different, run_id="r1")
    eng.start(same_run, {"a": 1, "b": 2}, run_id="r2")
    # the same values in another order are the same run (dicts are unordered in JSON)
    assert eng.start(same_run, {"b": 2, "a": 1}, run_id="r2").result == [{"a": 1, "b": 2}, None]
    eng.start(same_run, 1, options={"x": 1, "y": 2}, run_id="r3")
    assert eng.start(same_run, 1, options={"y": 2, "x": 1}, run_id="r3").status == "completed"
    with pytest.raises(RunArgumentsMismatch):
        eng.start(same_run, 1, options={"x": True, "y": 2}, run_id="r3")


# values JSON would change on the way back -------------------------------------------------------

CLASHING = {1: "one (int key)", "1": "one (str key)"}


def test_a_dict_whose_keys_clash_in_json_is_refused_wherever_a_value_is_recorded(eng):
    with pytest.raises(StepResultNotJSON, match="'1'"):
        eng.start(same_run, CLASHING, run_id="args")
    with pytest.raises(StepResultNotJSON, match="'1'"):
        eng.start(same_run, 1, options={"nested": [{True: 1, "true": 2}]}, run_id="kwargs")
    assert eng.store.list_runs() == []

    @dl.workflow("values-clash-wait")
    def waits(ctx):
        return ctx.wait_for_signal("go", timeout=60)

    eng.start(waits, run_id="w")
    with pytest.raises(StepResultNotJSON, match="'1'"):
        eng.signal("w", "go", {"ok": CLASHING})
    assert eng.store.pending_signal("w", "go") is None


def test_a_step_returning_a_dict_whose_keys_clash_fails_naming_the_step(eng):
    calls = Calls()

    @dl.workflow("values-clash-step")
    def wf(ctx):
        return ctx.step("fetch", lambda: calls("fetch", dict(CLASHING)))

    run = eng.start(wf, run_id="clash")
    assert run.status == "failed"
    assert "step 'fetch' of run 'clash'" in run.error and "'1'" in run.error
    # the effect happened; the resume meets the recorded failure instead of repeating it
    assert again(eng).resume("clash").status == "failed" and calls["fetch"] == 1


def test_int_keys_alone_still_read_back_as_strings_live_and_on_replay(eng):
    @dl.workflow("values-int-keys")
    def wf(ctx):
        return ctx.step("table", lambda: {1: "a", 2: "b"})

    assert eng.start(wf, run_id="ik").result == {"1": "a", "2": "b"}
    assert again(eng).resume("ik").result == {"1": "a", "2": "b"}
