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


def shown_counts(lab) -> dict:
    """The counters as the panel shows them: {label: number}."""
    import re
    pairs = re.findall(r">(\d+)</div><div class='dl-count-label'[^>]*>([^<]+)<", lab.counters.value)
    return {label: int(n) for n, label in pairs}


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
    assert shown_counts(lab)["refunds paid"] == c["refunds"]


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
    assert model.resume() == "ready" and model.attempt == 0      # nothing to resume: no error
    assert model.notice == "Nothing to resume: the run has not started yet. Press Run."
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


# any workflow: the menu and counters come from the sweep's discovery ------------------------
import sweep_workflows as wfs  # noqa: E402
from durable_lite import examples as ex  # noqa: E402
from durable_lite.lab.crash_lab import CrashLabMode  # noqa: E402


def test_the_refunds_menu_is_what_the_discovery_finds():
    model = CrashLabModel()
    assert model.crash_choices == CRASH_CHOICES
    assert model.order == ORDER and model.ledgers == ["refunds", "emails", "tickets_closed"]


def test_a_learners_workflow_in_the_widget_with_a_ledger_of_its_own():
    lab = CrashLab(wfs.sms_refund, "A-17", 40)
    assert list(lab.mode.options) == [NAIVE, CHECKPOINTED]
    labels = [label for label, _ in lab.crash.options]
    assert labels == ["no crash", "lookup · before", "lookup · after effect", "lookup · after checkpoint",
                      "refund · before", "refund · after effect", "refund · after checkpoint",
                      "sms · before", "sms · after effect", "sms · after checkpoint"]
    assert lab.model.crash is None and repr(lab) == "CrashLab('sweep-sms', mode='naive', crash='no crash')"

    lab.mode.value = CHECKPOINTED
    lab.crash.value = "sms:after_effect"
    lab.run_button.click()
    assert lab.model.status == "crashed" and "CRASH (sms · after effect)" in lab.log.value
    lab.resume_button.click()
    assert lab.model.status == "completed"
    assert lab.model.counters == {"refunds": 1, "sms": 2, "executed": 4, "replayed": 2, "attempts": 2}
    assert shown_counts(lab)["sms"] == 2
    assert "+1 vs no crash (1): done twice" in lab.counters.value         # the bar says it in numbers

    lab.mode.value = NAIVE
    lab.crash.value = "refund:after_checkpoint"
    lab.run_button.click()
    lab.resume_button.click()
    assert lab.model.counters["refunds"] == 1                 # the honest provider and a key
    assert lab.model.counters["sms"] == 1 and lab.model.counters["executed"] == 5


def test_a_learners_menu_is_every_point_the_sweep_crashes_in_its_order():
    """The crash playground: "its crash menu is the list of points the sweep found", under
    the names the sweep's heat map gives them."""
    from durable_lite.faults import sweep
    model = CrashLabModel(workflow=wfs.sms_refund, args=("A-17", 40))
    swept = sweep(wfs.sms_refund, "A-17", 40)
    found = [(r["step"], r["when"]) for r in swept.rows]
    assert list(model.crash_choices) == [None, *found]
    assert [model.describe(c) for c in found] == [p.label for p in swept.points]
    for mode in model.modes:                      # a crash before a step, in every mode
        model.reset(mode, ("refund", "before_step"))
        model.play()
        assert model.status == "completed" and model.attempt == 2
        assert model.counters["refunds"] == 1 and model.counters["sms"] == 1
        assert "CRASH (refund · before)" in model.log_text()


def test_a_workflow_that_waits_is_answered_in_the_lab_and_has_no_naive_mode():
    lab = CrashLab(ex.approved_refund, "A-17", 40)
    assert list(lab.mode.options) == [CHECKPOINTED]           # the naive runner cannot wait
    assert "approval (wait) · after checkpoint" in [label for label, _ in lab.crash.options]
    lab.crash.value = "approval:after_checkpoint"
    lab.run_button.click()
    assert "approval: waiting; the lab sends the signal true" in lab.log.value
    assert lab.model.status == "crashed"
    lab.resume_button.click()
    assert lab.model.status == "completed"
    assert lab.model.result == {"order": "A-17", "outcome": "refunded", "refund_id": "R-1"}
    assert (lab.model.counters["refunds"], lab.model.counters["emails"]) == (1, 1)

    late = CrashLabModel(workflow=ex.approved_refund, args=("A-17", 40), waits="deadline").play()
    assert late.result["outcome"] == "escalated"
    assert "nobody answers, the deadline passes" in late.log_text()


def test_a_run_a_saga_undid_ends_compensated_not_failed():
    from durable_lite.booking import book_trip
    lab = CrashLab(book_trip, "trip-7", ["TP662-flex", "car-compact", "hotel-canal-house"],
                   mode=CHECKPOINTED)                     # the hotel is sold out
    assert "undo:car · after effect" in [l for l, _ in lab.crash.options]
    lab.crash.value = "undo:car:after_effect"             # a crash while undoing
    lab.run_button.click()
    assert lab.model.status == "crashed"
    lab.resume_button.click()
    assert lab.model.status == "compensated"
    last = lab.model.log[-1]
    assert (last.kind, last.text) == ("compensated", "compensated: step hotel failed for good; "
                                      "undone, newest first: undo:hotel, undo:car, undo:flight, "
                                      "undo:charge")
    assert "the run ended" not in lab.log.value and "color:#6c3483" in lab.log.value
    assert lab.status.value.startswith("<b>Compensated: a step failed for good, and the saga undid")
    assert "as with no crash" in lab.counters.value              # the run is over: compared
    assert lab.run_button.disabled and lab.resume_button.disabled


def test_modes_of_your_own():
    modes = [CrashLabMode("no key", "durable", {"use_key": False, "careless": True}),
             CrashLabMode("key", "durable", {"use_key": True})]
    rows = crash_lab_sweep(workflow=ex.refund, args=("A-17", 40), modes=modes,
                           crashes=[("refund", AFTER_EFFECT)])
    assert [(r["mode"], r["refunds"]) for r in rows] == [("no key", 2), ("key", 1)]


# what the learner sees --------------------------------------------------------------------
def test_an_error_in_a_click_is_shown_in_the_panel(lab):
    lab.run_button.click()
    lab.run_button.click()                                    # a second Run: refused
    assert "RuntimeError" in lab.error.value and "press Reset" in lab.error.value
    lab.resume_button.click()
    assert lab.error.value == ""                              # a good click clears it

    def broken():
        raise ValueError("the store file is gone")
    lab.model.run = broken
    lab.reset_button.click()
    lab.run_button.click()
    assert "ValueError" in lab.error.value and "the store file is gone" in lab.error.value


def test_the_selected_mode_and_disabled_buttons_stand_out(lab):
    assert list(lab.mode.icons) == ["check", "", ""]
    assert "Selected mode: <b style='color:#1f4e99'>naive</b>" in lab.mode_caption.value
    lab.mode.value = WITH_KEY
    assert list(lab.mode.icons) == ["", "", "check"] and "checkpointed + key" in lab.mode_caption.value
    assert lab.resume_button.disabled and lab.resume_button.button_style == ""
    assert "Nothing to resume" in lab.resume_button.tooltip
    assert lab.run_button.button_style == "primary" and lab.run_button.tooltip == ""
    lab.run_button.click()
    assert lab.run_button.disabled and lab.run_button.button_style == ""
    assert not lab.resume_button.disabled and lab.resume_button.button_style == "warning"
    css = lab.panel.children[0].value
    assert ".mod-active" in css and ":disabled" in css and "dl-crash-lab" in lab.panel._dom_classes


def test_mode_buttons_are_wide_enough_for_their_labels_and_the_check_mark(lab):
    """"checkpointed + key" was cut to "checkpointed + ke…", its check mark hidden."""
    from durable_lite.lab.crash_lab import _mode_width
    width = float(lab.mode.style.button_width.removesuffix("em"))
    assert lab.mode.style.button_width == _mode_width(lab.model.modes)
    assert width >= 0.62 * len(WITH_KEY) + 3                   # bold text, icon and padding
    assert lab.mode.layout.flex_flow == "row wrap"              # a narrow window wraps, never cuts
    two = CrashLab(wfs.sms_refund, "A-17", 40)
    assert float(two.mode.style.button_width.removesuffix("em")) < width   # sized by its labels


def test_the_result_beside_each_bar_is_full_size_and_coloured_by_meaning():
    """It was 10 px grey: now as large as the panel's text, red for done twice."""
    import re
    lab = CrashLab(mode=CHECKPOINTED, crash=("refund", AFTER_EFFECT))
    lab.run_button.click()
    notes = re.findall(r"<div class='dl-versus' style='([^']*)'>([^<]*)<", lab.counters.value)
    assert notes and all("font-size" not in style for style, _ in notes)
    assert all(text.startswith("so far") for _, text in notes)      # before it has finished
    lab.resume_button.click()
    notes = dict((text, style) for style, text in
                 re.findall(r"<div class='dl-versus' style='([^']*)'>([^<]*)<", lab.counters.value))
    assert "color:#c0392b; font-weight:bold" in notes["+1 vs no crash (1): done twice"]
    assert notes["as with no crash"] == "margin-left:0.6em; color:#222"
    assert "font-size:0.8em" not in lab.counters.value


@pytest.mark.parametrize("crash", [c for c in CRASH_CHOICES if c is not None and c[0] == "refund"])
def test_a_refund_the_provider_recognised_says_so_in_the_log(crash):
    """With the key, a refund executed again after the crash is answered from the first
    payment: the log says why "refund: executed" appears twice beside 1 refund paid, and
    only when the provider's answer really was a repeat."""
    model = CrashLabModel(WITH_KEY, crash).play()
    refunds = [line.text for line in model.log if line.step == "refund" and line.kind == "executed"]
    recognised = [t for t in refunds if "recognised the key" in t]
    calls = model.world.payments.calls()                      # the provider's own count
    assert model.counters["refunds"] == 1
    assert len(recognised) == calls - 1                       # every call after the first
    if crash == ("refund", AFTER_EFFECT):
        assert refunds == ["refund: executed (its checkpoint was never written)",
                           "refund: executed (the provider recognised the key and answered "
                           "R-1 again: no new payment)"]
    else:
        assert recognised == []                               # executed once, recorded
    checkpointed = CrashLabModel(CHECKPOINTED, ("refund", AFTER_EFFECT)).play()
    assert not [line for line in checkpointed.log if "recognised" in line.text]
    assert checkpointed.counters["refunds"] == 2              # no key: a second payment


def test_the_panel_names_its_parts_with_stable_css_classes(lab):
    """Browser tests and the panel's CSS find the parts by these names, not by their text."""
    parts = {"dl-crash-lab": lab.panel, "dl-mode": lab.mode, "dl-crash-point": lab.crash,
             "dl-run": lab.run_button, "dl-resume": lab.resume_button,
             "dl-reset": lab.reset_button, "dl-status": lab.status,
             "dl-counters": lab.counters, "dl-log": lab.log, "dl-error": lab.error}
    for name, widget in parts.items():
        assert name in widget._dom_classes, name


@pytest.mark.parametrize("mode", MODES)
def test_resume_on_a_finished_run_says_plainly_that_there_is_nothing_to_resume(mode):
    """Lesson 01 (issue "What a learner sees, round 2"): a Resume that reaches the kernel
    after the run has finished (a double click; a button the browser has not greyed out
    yet) showed a red "RuntimeError: the run is completed; there is nothing to resume"."""
    lab = CrashLab(mode=mode)                                 # the story's crash
    lab.run_button.click()
    lab.resume_button.click()
    assert lab.model.status == "completed" and lab.error.value == ""
    before = (dict(lab.model.counters), list(lab.model.log), lab.status.value)
    lab.resume_button.click()                                 # the second click of a double click
    assert (lab.model.counters, lab.model.log, lab.status.value) == before   # nothing ran
    assert "Nothing to resume: the run has completed. Press Reset to run it again." in lab.error.value
    assert "Error" not in lab.error.value and "#c0392b" not in lab.error.value   # not red, no error name
    lab.reset_button.click()
    assert lab.error.value == ""                              # the next click clears it


def test_resume_in_code_hands_a_finished_run_back_as_engine_resume_does():
    model = CrashLabModel(CHECKPOINTED, ("refund", AFTER_EFFECT)).play()
    attempts = model.attempt
    assert model.resume() == "completed" and model.attempt == attempts
    assert model.notice.startswith("Nothing to resume")
    from durable_lite.booking import book_trip
    saga = CrashLabModel(CHECKPOINTED, None, workflow=book_trip,
                         args=("trip-7", ["TP662-flex", "car-compact", "hotel-canal-house"])).play()
    assert saga.resume() == "compensated"
    assert saga.notice == "Nothing to resume: the run ended compensated. Press Reset to run it again."
