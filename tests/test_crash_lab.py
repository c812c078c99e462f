"""The crash lab, driven the way a learner drives it: set the dropdowns, click the buttons.

The expected counters are the lesson's claims, written out per mode and crash point:
naive pays twice whenever the crash lands after the refund ran; checkpointing alone pays
twice only in the window between the refund's effect and its checkpoint; with an
idempotency key the refund is paid once everywhere. Emails and ticket closes follow the
same pattern, except that the mailer and the desk know nothing of keys.
"""

import pytest

pytest.importorskip("ipywidgets")

from durable_lite.examples import REFUND_STEPS
from durable_lite.lab.crash_lab import (AFTER_CHECKPOINT, AFTER_EFFECT, CHECKPOINTED, CRASH_CHOICES,
                                        MODES, NAIVE, WITH_KEY, CrashLab, CrashLabModel,
                                        crash_key, crash_lab_sweep, describe_crash)

ORDER = list(REFUND_STEPS)


def effect_done(crash, step):
    """Had `step`'s side effect happened when the crash landed?"""
    crashed_step, _ = crash
    return ORDER.index(step) <= ORDER.index(crashed_step)


def expected(mode, crash):
    """(refunds, emails, tickets closed) once the run has completed after resuming."""
    if crash is None:
        return (1, 1, 1)
    counts = []
    for step in ("refund", "email", "close"):
        if mode == NAIVE:
            twice = effect_done(crash, step)                 # redelivery redoes it all
        else:
            twice = crash == (step, AFTER_EFFECT)            # only the unrecorded window
            if step == "refund" and mode == WITH_KEY:
                twice = False                                # the provider dedupes the key
        counts.append(2 if twice else 1)
    return tuple(counts)


@pytest.fixture
def lab():
    return CrashLab()


CASES = [(mode, crash) for mode in MODES for crash in CRASH_CHOICES]


@pytest.mark.parametrize("mode,crash", CASES, ids=[f"{m}|{crash_key(c)}" for m, c in CASES])
def test_every_mode_and_crash_point_through_the_widget(lab, mode, crash):
    lab.mode.value = mode
    lab.crash.value = crash_key(crash)
    assert lab.model.status == "ready" and not lab.run_button.disabled
    assert lab.resume_button.disabled

    lab.run_button.click()
    if crash is None:
        assert lab.model.status == "completed"
    else:
        assert lab.model.status == "crashed"
        assert lab.run_button.disabled and not lab.resume_button.disabled
        assert "CRASH" in lab.log.value
        lab.resume_button.click()
        assert lab.model.status == "completed"
    assert lab.run_button.disabled and lab.resume_button.disabled

    c = lab.model.counters
    assert (c["refunds"], c["emails"], c["tickets_closed"]) == expected(mode, crash)
    # the panel shows the same numbers the model holds
    assert f">{c['refunds']}</div><div style='font-size:0.85em'>refunds paid" in lab.counters.value


@pytest.mark.parametrize("crash", [c for c in CRASH_CHOICES if c is not None], ids=crash_key)
def test_naive_resume_starts_from_the_top_and_replays_nothing(crash):
    model = CrashLabModel(NAIVE, crash).play()
    second = [line for line in model.log if line.attempt == 2 and line.kind in ("executed", "replayed")]
    assert [line.step for line in second] == ORDER
    assert all(line.kind == "executed" for line in second)
    assert model.counters["replayed"] == 0


@pytest.mark.parametrize("mode", [CHECKPOINTED, WITH_KEY])
@pytest.mark.parametrize("crash", [c for c in CRASH_CHOICES if c is not None], ids=crash_key)
def test_checkpointed_resume_replays_recorded_steps_only(mode, crash):
    model = CrashLabModel(mode, crash).play()
    step, when = crash
    recorded = ORDER[:ORDER.index(step) + (1 if when == AFTER_CHECKPOINT else 0)]
    second = [line for line in model.log if line.attempt == 2 and line.kind in ("executed", "replayed")]
    assert [line.step for line in second if line.kind == "replayed"] == recorded
    assert [line.step for line in second if line.kind == "executed"] == ORDER[len(recorded):]
    # every step is recorded once in the engine's history, however the crash fell
    assert [row["step"] for row in model.history()] == ORDER


def test_reset_gives_a_fresh_world_and_store(lab):
    lab.mode.value = CHECKPOINTED
    lab.crash.value = crash_key(("refund", AFTER_EFFECT))
    lab.run_button.click()
    lab.resume_button.click()
    assert lab.model.counters["refunds"] == 2
    old_store = lab.model.store
    lab.reset_button.click()
    assert lab.model.store is not old_store
    assert lab.model.status == "ready" and lab.model.log == []
    assert lab.model.counters == {"refunds": 0, "emails": 0, "tickets_closed": 0,
                                  "executed": 0, "replayed": 0, "attempts": 0}
    assert not lab.run_button.disabled and "Nothing has run yet" in lab.log.value
    assert lab.model.history() == []


def test_changing_a_setting_starts_over(lab):
    lab.run_button.click()                       # default: naive, crash after email
    assert lab.model.status == "crashed"
    lab.crash.value = crash_key(None)
    assert lab.model.status == "ready" and lab.model.counters["refunds"] == 0
    assert lab.model.crash is None


def test_buttons_that_make_no_sense_are_refused():
    model = CrashLabModel(NAIVE, None)
    with pytest.raises(RuntimeError, match="nothing to resume"):
        model.resume()
    model.run()
    with pytest.raises(RuntimeError, match="press Reset"):
        model.run()
    with pytest.raises(ValueError, match="crash point"):
        model.reset(crash=("refund", "sometime"))
    with pytest.raises(ValueError, match="mode"):
        model.reset(mode="optimistic")


def test_the_dropdown_offers_every_step_at_both_points(lab):
    labels = [label for label, _ in lab.crash.options]
    assert labels[0] == "no crash"
    assert len(labels) == 1 + 2 * len(ORDER)
    assert describe_crash(("refund", AFTER_EFFECT)) in labels


def test_repr_is_short_and_stable(lab):
    assert repr(lab) == "CrashLab(mode='naive', crash='between email and close')"
    assert lab._repr_mimebundle_()["text/plain"] == repr(lab)


def test_sweep_agrees_with_the_expected_table():
    rows = crash_lab_sweep()
    assert len(rows) == len(CASES)
    for row, (mode, crash) in zip(rows, CASES):
        assert (row["mode"], row["crash"]) == (mode, describe_crash(crash))
        assert (row["refunds"], row["emails"], row["tickets_closed"]) == expected(mode, crash)
