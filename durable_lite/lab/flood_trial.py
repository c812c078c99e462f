"""Exercise 11's flood, to try in the notebook: the workers, the deadlines and the busy rule
the exercise's checks hold a queue to, and one flood run with your own answers.

Tenant A enqueues a flood of runs at once, tenant B a handful a few seconds later, and
`FLOOD_WORKERS` workers take them from one queue (`storm.flood`). Each run is one call to a
model provider that answers `limit` requests a second and refuses the rest. A queue in front
of it is judged by three numbers: the requests the provider refused (none), the seconds in
which it was sent its full limit while runs waited (at least half of them: a provider left
idle while work waits is money and time lost), and when each tenant's last run was done
(`flood_deadlines`).
"""

# 48 workers keep a provider of up to 14 requests a second at its limit (a call lasts about
# 3 s, so that is about 42 runs in flight).
FLOOD_WORKERS = 48
BUSY_SHARE = 0.5          # of the seconds while runs wait, at least this share at the full limit


def flood_deadlines(limit: int, a_runs: int, b_runs: int) -> tuple:
    """(A's, B's): seconds after its runs arrive by which each tenant's last run must be done.
    Each is a quarter more than the provider needs at its limit, plus 7 s for the last
    answers to come back (an answer takes up to 4.5 s)."""
    everyone = (a_runs + b_runs) / limit      # the provider's time to answer every run
    b_turns = 2 * b_runs / limit              # B's runs, taking every other turn while A waits
    return 1.25 * everyone + 7.0, 1.25 * b_turns + 7.0


def seconds_at_the_limit(requests: list, limit: int) -> tuple:
    """(seconds in which the provider was sent its full `limit`, seconds while runs waited),
    from the requests it received in each second. Runs wait in the queue until the last one
    starts: every second before the last one with a request."""
    waiting = list(requests)[:-1]
    return sum(n >= limit for n in waiting), len(waiting)


def try_flood(make_queue, key_for, limit: int = 10, a_runs: int = 300, b_runs: int = 10,
              b_at: float = 5.0, seed: int = 0, tenants=("acme", "globex")):
    """One flood with your make_queue and key_for, for tenants "acme" (A) and "globex" (B):
    prints what the exercise's checks look at, and returns the `storm.Outcome` (for
    `dl.lab.requests_per_second`)."""
    import tempfile

    from .. import storm
    queue = make_queue(limit)
    keys = {"A": [key_for(tenants[0], i) for i in range(a_runs)],
            "B": [key_for(tenants[1], i) for i in range(b_runs)]}
    with tempfile.TemporaryDirectory(prefix="durable-lite-flood-") as folder:
        outcome = storm.flood(queue, folder, keys=lambda tenant, i: keys[tenant][i],
                              a_runs=a_runs, b_runs=b_runs, b_at=b_at, workers=FLOOD_WORKERS,
                              limit=limit, seed=seed, label="your queue")
    deadline_a, deadline_b = flood_deadlines(limit, a_runs, b_runs)
    full, waiting = seconds_at_the_limit([r["requests"] for r in outcome.per_second], limit)
    print(f"a provider answering {limit} requests a second; tenant {tenants[0]!r} (A) enqueues "
          f"{a_runs} runs at once, tenant {tenants[1]!r} (B) {b_runs} runs {b_at:.1f} s later; "
          f"{FLOOD_WORKERS} workers; {queue!r}")
    print(f"  provider: {outcome.provider['requests']} requests, {outcome.provider['refused']} "
          f"refused, at most {outcome.provider['peak_requests_per_second']} in one second "
          f"(it answers {limit}); its full {limit} in {full} of the {waiting} seconds while "
          f"runs waited (at least {BUSY_SHARE:.0%} of them, to keep it busy)")
    print(f"  runs: {outcome.statuses}")
    b_done, a_done = outcome.finish_times("B"), outcome.finish_times("A")
    if b_done:
        print(f"  B: last run done {b_done[-1]:.1f} s after B's runs arrived "
              f"(deadline {deadline_b:.1f} s)")
    if a_done:
        print(f"  A: last run done {a_done[-1]:.1f} s after A's upload "
              f"(deadline {deadline_a:.1f} s)")
    return outcome
