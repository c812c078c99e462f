"""The refund workflow, killed for real (SIGKILL, no cleanup) at every step and crash point,
then resumed by a fresh process: every side effect happens exactly once.

Then the window itself: a careless provider and no key refund twice when the kill lands
between the refund's effect and its checkpoint; the honest provider with a key, once.
"""

from core_support import *  # noqa: F401,F403

from durable_lite import examples as ex
from durable_lite.child import run_in_child
from durable_lite.faults import CRASH_POINTS, CrashAt

pytestmark = pytest.mark.crash

CASES = [(step, when) for step in ex.REFUND_STEPS for when in CRASH_POINTS]


def kill_then_resume(store_path, folder, crash, **options):
    killed = run_in_child(store_path, "durable_lite.examples", "refund", folder, "A-17", 40,
                          run_id="refund-A-17", crash_at=crash, **options)
    assert killed.killed and killed.run is None          # it died without reporting
    resumed = run_in_child(store_path, "durable_lite.examples", "refund", run_id="refund-A-17",
                           resume=True)
    assert resumed.returncode == 0
    return resumed.run


@pytest.mark.parametrize("step,when", CASES, ids=[f"{s}-{w}" for s, w in CASES])
def test_killed_at_any_point_and_resumed_by_a_fresh_process_every_effect_happens_once(
        store_path, folder, step, when):
    run = kill_then_resume(store_path, folder, CrashAt(step, when, kill=True), key_notices=True)
    assert run["status"] == "completed"
    assert run["result"] == {"order": "A-17", "refund_id": "R-1", "amount": 40}
    world = dl.sim.World(folder)
    assert world.payments.count() == 1 and world.careless.count() == 0
    assert world.mailer.count() == 1
    assert world.tickets.closes() == 1 and world.tickets.is_closed("T-17")
    # what the fresh process replayed is everything checkpointed before the kill
    done_before = list(ex.REFUND_STEPS[:ex.REFUND_STEPS.index(step)])
    if when == "after_checkpoint":
        done_before.append(step)
    assert run["replayed"] == done_before


def test_the_window_is_real_a_careless_provider_without_a_key_refunds_twice(store_path, folder):
    run = kill_then_resume(store_path, folder, CrashAt("refund", "after_effect", kill=True),
                           use_key=False, careless=True)
    assert run["status"] == "completed"
    assert dl.sim.World(folder).careless.count("A-17") == 2


def test_the_honest_provider_with_a_key_refunds_once_across_the_same_kill(store_path, folder):
    run = kill_then_resume(store_path, folder, CrashAt("refund", "after_effect", kill=True),
                           use_key=True, careless=False)
    assert run["status"] == "completed"
    world = dl.sim.World(folder)
    assert world.payments.count("A-17") == 1
    assert world.payments.calls() == 2            # it was asked twice, and paid once
