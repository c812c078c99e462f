"""Crash before and after every single write the engine makes to its store — inside steps,
waits, sleeps, signal deliveries, leases and status changes — then carry on with a fresh
engine. On both stores the run must end as one that never crashed: the same result, each
signal consumed once and in order, every wait and sleep keeping the deadline it first had,
and each step executed once (twice only when the crash fell between its effect and its
checkpoint, the window idempotency keys exist for).
"""

from core_support import *  # noqa: F401,F403

from durable_lite.store.records import STEP, TIMER

WRITES = {"create_run", "update_run", "record_entry", "discard_entries_from", "add_signal",
          "consume_signal_into", "try_lease", "renew_lease", "release_lease", "add_event"}


class CrashingStore:
    """Wraps a store; the `at`-th write raises Crash just before (or just after) it happens."""

    def __init__(self, inner, at, after):
        self.inner, self.at, self.after = inner, at, after
        self.writes, self.fired, self.signals = 0, None, 0

    def __getattr__(self, name):
        method = getattr(self.inner, name)
        if name not in WRITES:
            return method

        def write(*args, **kwargs):
            self.writes += 1
            hit = self.writes == self.at
            if hit and not self.after:
                self.fired = (name, args)
                raise dl.Crash(f"before {name}")
            out = method(*args, **kwargs)
            self.signals += name == "add_signal"
            if hit:
                self.fired = (name, args)
                raise dl.Crash(f"after {name}")
            return out
        return write


effects = Calls()


@dl.workflow("crash-every-write")
def errand(ctx):
    first = ctx.step("a", effects, "a", [1, 2])
    started = ctx.now()
    go1 = ctx.wait_for_signal("go", timeout=100)
    ctx.sleep(30)
    second = ctx.step("b", effects, "b", {"go": go1})
    go2 = ctx.wait_for_signal("go", timeout=100)
    go3 = ctx.wait_for_signal("go", timeout=100)
    third = ctx.step("c", effects, "c", ctx.uuid())
    return {"a": first, "go": [go1, go2, go3], "b": second, "c": third, "started": started}


def drive(store, clock):
    """Start the run, deliver three signals as it waits, let time pass; restart on a crash."""
    announced = set()                  # (what, wake_at) every park reported
    for _ in range(60):
        engine = dl.Engine(store, clock, ids=dl.SequentialIds("u"), seed=1)
        try:
            if store.get_run("r") is None:
                run = engine.start(errand, run_id="r")
            else:
                run = engine.resume("r")
            if run.status == "completed":
                return run, announced
            assert run.status in ("waiting", "sleeping"), run
            announced.add(run.wake_at)
            if run.status == "sleeping":
                clock.advance(31)
            elif store.signals < 3:
                engine.signal("r", "go", store.signals + 1)
            else:
                clock.advance(200)     # no more signals: the wait's deadline passes
        except (dl.Crash, dl.LeaseHeldError):
            clock.advance(31)          # the restart takes a while; a dead worker's lease lapses
    raise AssertionError("the run never completed")


def open_store(kind, path):
    return dl.MemoryStore() if kind == "memory" else dl.SQLiteStore(path)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_crash_at_any_write_then_a_restart_ends_like_a_run_that_never_crashed(kind, tmp_path):
    effects.counts.clear()
    plain = open_store(kind, str(tmp_path / "ref.db"))
    reference, _ = drive(CrashingStore(plain, 0, False), dl.FakeClock())
    if kind == "sqlite":
        plain.close()
    expected = dict(reference.result, started=None)
    assert expected["go"] == [1, 2, 3] and effects.counts == {"a": 1, "b": 1, "c": 1}

    at, crashed = 0, 0
    while True:
        at += 1
        for after in (False, True):
            effects.counts.clear()
            inner = open_store(kind, str(tmp_path / f"{at}-{after}.db"))
            store = CrashingStore(inner, at, after)
            run, announced = drive(store, dl.FakeClock())
            if store.fired is None:
                continue
            crashed += 1
            where = f"crash {'after' if after else 'before'} write {at} ({store.fired[0]})"
            assert dict(run.result, started=None) == expected, where
            # each step ran once, or twice if the crash hit its own checkpoint's write
            rerun = store.fired[0] == "record_entry" and not after and store.fired[1][1].kind == STEP
            for name, count in effects.counts.items():
                allowed = 2 if rerun and store.fired[1][1].name == name else 1
                assert count <= allowed, f"{where}: step {name!r} ran {count} times"
            entries = inner.load_entries("r")
            assert [e.position for e in entries] == list(range(len(entries))), where
            deadlines = {float(e.result_json) for e in entries if e.kind == TIMER}
            assert announced <= deadlines, f"{where}: a deadline moved"
            assert inner.pending_signal("r", "go") is None, where
            if kind == "sqlite":
                inner.close()
        if store.fired is None:
            break
    assert crashed > 80          # every write of the scenario, before and after
