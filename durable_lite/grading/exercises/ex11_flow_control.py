"""Exercise 11: one queue, two tenants, a model provider's limit.

Every test lives through lesson 11's flood (`storm.flood`): tenant A enqueues a flood of
runs at once, tenant B a handful a few seconds later, and `WORKERS` workers take them from
one queue. Each run is one call to a model provider that answers `limit` requests a second
and refuses the rest (`sim.ModelProvider`). The learner chooses the key of each run
(q1, `key_for(tenant, i)`) and the queue's limits (q2, `make_queue(limit)`); each question
is judged with the grader's own choice for the other half, so a mistake in one costs only
its own question.

What is drawn per case, so no literal and no table of answers can pass: the provider's
limit (one case from each band of `BANDS` in every test that judges limits), how long A's
flood keeps the provider busy (so A's size), B's size and arrival, the tenants' names and
the simulation's seed.

What an answer is judged by: the provider's ledger (every request, answered or refused,
second by second; every run's answered call) and the store's runs (statuses and when each
completed), never by anything the answer says about itself. The learner's objects are not
trusted either:
- the queue `make_queue` returns is read once, field by field, and rebuilt as a plain
  `dl.Queue` from those numbers (so a subclass cannot report one limit and enforce
  another); the feedback names the rebuilt queue;
- `key_for` is called once for every run of the case, in the learner's kernel, and only the
  keys it returned (checked to be strings or None) travel on;
- the simulation itself runs in a fresh Python process (`python -I`, no learner code in
  it), so a workflow the notebook registered under the storm's name, or anything else the
  notebook changed in its own process, cannot take the storm's place.

The rules are stated to the learner, who gets them from `dl.lab` (lab/flood_trial.py,
shown in the notebook), and the checks use the same definitions:
- the deadlines (`flood_deadlines`): a provider answering `limit` requests a second needs
  `(a_runs + b_runs) / limit` seconds for all of them, and B, taking every other turn while
  A waits, needs `2 * b_runs / limit`; each deadline is a quarter more than that, plus 7 s
  for the last answers to come back. Without keys by tenant, B waits behind A's flood and
  misses its deadline; a queue that counts runs in flight instead of requests a second
  (`concurrency=limit`: a call lasts about three seconds) or keeps A to a few slots
  (`per_key`) misses A's by far.
- busy (`seconds_at_the_limit`): while runs wait in the queue, the provider must be sent its
  full limit in at least half of the seconds. A queue at the provider's limit does so in
  two thirds of them or more (measured over 75 drawn floods: 66% at the least, a start now
  and then drifting into the next second); one a request short of it (`rate=(limit - 1,
  1.0)`, which the deadlines' slack lets through) in none.

What a right answer must have, and how the cases vary it:

q1 `key_for(tenant, i)`
- one key per tenant, the same for all of a tenant's runs (a key per run, or per batch,
  puts B's runs behind A's many keys: B late);
- two tenants never share a key, however alike their names (a case with names that differ
  only after a shared prefix, so a key cut from the name collides);
- a key is a non-empty string or None (checked for every run, once);
- drawn per case: the tenants' names, the provider's limit (the smallest band and the
  largest), A's and B's sizes and B's arrival.

q2 `make_queue(limit)`
- never over the limit: no request refused, at most `limit` in any second of the provider's
  clock, every run answered exactly once;
- busy: the provider sent its full limit in at least half the seconds while runs wait
  (a queue below the limit fails here, however close);
- each tenant on time: A's flood and B's runs each done by its deadline;
- derived from `limit`: one case from each band of limits (6-8, 9-11, 12-14) in each test,
  so one number typed in for one band fails the others.
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from ...lab.flood_trial import BUSY_SHARE, FLOOD_WORKERS, flood_deadlines, seconds_at_the_limit
from ...queue import Queue
from ..checks import Exercise, Fail
from ..harness import needs_callable, scratch
from ..plain import plain

EXERCISE = Exercise("11_flow_control", "A flood, a small tenant and a provider's limit",
                    lesson="notebooks/11_flow_control.ipynb")

# FLOOD_WORKERS (48) keep a provider of up to 14 requests a second at its limit. A's flood
# keeps the provider busy for 25 to 35 s and B arrives within 8 s, so B always meets a long
# queue of A's runs: without keys, B's runs wait behind at least 17 s of them, longer than
# B's deadline can be.
WORKERS = FLOOD_WORKERS
BANDS = ((6, 8), (9, 11), (12, 14))     # the provider's limit, one case per band
FLOOD_SECONDS = (25.0, 35.0)            # A's runs over the provider's limit
B_RUNS, B_AT = (5, 15), (2.0, 8.0)
CHILD_TIMEOUT = 60.0
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])


deadlines = flood_deadlines              # the learner's dl.lab.flood_deadlines, the same rule


# the cases ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    limit: int                # requests a second the provider answers
    a_runs: int
    b_runs: int
    b_at: float               # seconds after A's upload when B's runs arrive
    seed: int
    a_name: str               # the tenants' names: what key_for is given
    b_name: str

    @property
    def deadlines(self) -> tuple:
        return deadlines(self.limit, self.a_runs, self.b_runs)

    def describe(self) -> str:
        return (f"a provider answering {self.limit} requests a second; tenant "
                f"{self.a_name!r} (A) enqueues {self.a_runs} runs at once, tenant "
                f"{self.b_name!r} (B) {self.b_runs} runs {self.b_at:.1f} s later")


_FIRMS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka", "tyrell",
          "cyberdyne", "soylent", "vandelay", "monarch", "oscorp", "aperture", "nakatomi")


def draw_case(draw, band, lookalike: bool = False) -> Case:
    """A case with the provider's limit in `band`. lookalike: the tenants' names differ only
    after a shared prefix ("acme-k2x" and "acme-9qa"), so a key cut from the name collides."""
    limit = draw.randint(*band)
    a_runs = round(limit * draw.uniform(*FLOOD_SECONDS))
    b_runs = draw.randint(*B_RUNS)
    b_at = round(draw.uniform(*B_AT), 1)
    if lookalike:
        firm = draw.choice(_FIRMS)
        a_name, b_name = (f"{firm}-{tail}" for tail in draw.distinct(lambda: draw.token(3), 2))
    else:
        a_name, b_name = (f"{firm}-{draw.token(3)}" for firm in draw.sample(_FIRMS, 2))
    return Case(limit, a_runs, b_runs, b_at, draw.randint(1, 2**31), a_name, b_name)


def draw_cases(draw, bands=BANDS) -> List[Case]:
    cases = [draw_case(draw, band) for band in bands]
    draw.shuffle(cases)
    return cases


# the learner's answers, read once and checked -------------------------------------------------
def keys_of(key_for, case: Case) -> dict:
    """{"A": [key of A's run i, ...], "B": [...]}: key_for called once per run."""
    needs_callable(key_for, "key_for")
    keys = {}
    for tenant, name, count in (("A", case.a_name, case.a_runs), ("B", case.b_name, case.b_runs)):
        keys[tenant] = []
        for i in range(count):
            key = plain(key_for(name, i), f"key_for({name!r}, {i})")
            if key is not None and (not isinstance(key, str) or not key):
                raise Fail(f"key_for({name!r}, {i}) returned {key!r} "
                           f"({type(key).__name__}); a queue's key is a non-empty string, or "
                           "None for no key",
                           "return a string (str(...) of it, if need be)")
            keys[tenant].append(key)
    return keys


def tenant_keys(case: Case) -> dict:
    """The grader's keys for q2: each run keyed by its tenant's name."""
    return {"A": [case.a_name] * case.a_runs, "B": [case.b_name] * case.b_runs}


def queue_of(make_queue, limit: int) -> Queue:
    """The queue make_queue(limit) declares, rebuilt as a plain dl.Queue from its fields,
    each read once: what the simulation enforces is what the feedback names."""
    needs_callable(make_queue, "make_queue")
    made = make_queue(limit)
    if made is None:
        raise Fail(f"make_queue({limit}) returned None",
                   "return the queue: `return dl.Queue(...)`")
    if not isinstance(made, Queue):
        raise Fail(f"make_queue({limit}) returned {type(made).__name__} {made!r:.80}, "
                   "not a dl.Queue", 'return dl.Queue("llm", ...) with its limits')
    fields = {what: plain(getattr(made, what), f"make_queue({limit}).{what}")
              for what in ("name", "concurrency", "per_key", "rate")}
    try:
        return Queue(fields.pop("name"), **fields)
    except (TypeError, ValueError) as exc:
        raise Fail(f"make_queue({limit}) returned a queue whose limits are not a dl.Queue's: "
                   f"{exc}") from None


def grader_queue(limit: int) -> Queue:
    """The grader's queue for q1: as many starts a second as the provider answers."""
    return Queue("llm", rate=(limit, 1.0))


# the simulation, in a process of its own ----------------------------------------------------------
@dataclass
class Flood:
    """What one flood did, read from the provider's ledger and the store."""

    case: Case
    requests: int
    refused: int
    over: Optional[dict]            # the first second with more requests than the limit
    statuses: dict                  # run status -> how many
    unanswered: list                # runs the provider never answered
    repeated: list                  # runs it answered more than once
    a_done: list                    # seconds after A's upload when each A run completed
    b_done: list                    # seconds after B's arrival when each B run completed
    per_second: list                # the requests the provider received in each second

    @property
    def all_completed(self) -> bool:
        return self.statuses == {"completed": self.case.a_runs + self.case.b_runs}


def simulate(queue: Queue, case: Case, keys: dict) -> Flood:
    """Run the case's flood through `queue`, with each run enqueued under its key in `keys`
    ({"A": [key of A's run i, ...], "B": [...]}), in a fresh Python process that runs none
    of the learner's code (`-I`: no PYTHON* variables, no current folder on the path)."""
    spec = {"queue": {"name": queue.name, "limits": queue.limits_json()},
            "case": case.__dict__, "keys": keys}
    child = ("import sys; sys.path.insert(0, sys.argv[1]); "
             "from durable_lite.grading.exercises.ex11_flow_control import _child_main; "
             "_child_main()")
    with scratch("ex11") as folder:
        proc = subprocess.run([sys.executable, "-I", "-c", child, _PACKAGE_PARENT],
                              input=json.dumps(spec), capture_output=True, text=True,
                              cwd=folder, timeout=CHILD_TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"the flood's simulation failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-2000:]}")
    return Flood(case, **json.loads(proc.stdout))


def _child_main():
    spec = json.loads(sys.stdin.read())
    queue = Queue.from_json(spec["queue"]["name"], spec["queue"]["limits"])
    facts = flood_facts(queue, Case(**spec["case"]), spec["keys"], os.getcwd())
    sys.stdout.write(json.dumps(facts))


def flood_facts(queue: Queue, case: Case, keys: dict, folder, label="ex11") -> dict:
    """Run one flood (storm.flood) and read what happened from the provider's ledger and
    the store. Tenants are "A" and "B" inside the storm; `keys` holds each run's key."""
    from ... import storm
    from ...sim import ModelProvider
    outcome = storm.flood(queue, folder, keys=lambda tenant, i: keys[tenant][i],
                          a_runs=case.a_runs, b_runs=case.b_runs, b_at=case.b_at,
                          workers=WORKERS, limit=case.limit, seed=case.seed, label=label)
    ledger = ModelProvider(os.path.join(folder, f"flood-{label}.db"), limit=case.limit)
    try:
        answered = {}
        for request in ledger.requests():
            if request["answered"]:
                answered[request["caller"]] = answered.get(request["caller"], 0) + 1
    finally:
        ledger.close()
    runs = sorted(outcome.tenants)               # every run the flood enqueued
    over = next(({"second": r["second"], "requests": r["requests"], "refused": r["refused"]}
                 for r in outcome.per_second if r["requests"] > case.limit or r["refused"]), None)
    return {"requests": outcome.provider["requests"], "refused": outcome.provider["refused"],
            "over": over,
            "statuses": outcome.statuses,
            "unanswered": [run for run in runs if run not in answered],
            "repeated": [run for run in runs if answered.get(run, 0) > 1],
            "a_done": outcome.finish_times("A"), "b_done": outcome.finish_times("B"),
            "per_second": [r["requests"] for r in outcome.per_second]}


# what the checks say about a flood ----------------------------------------------------------------
def judge_limit(flood: Flood, what: str):
    """Fail if the provider refused a request, received more than its limit in a second, or
    a run did not complete with exactly one answered call."""
    case = flood.case
    if flood.over is not None or flood.refused:
        over = flood.over or {}
        raise Fail(f"{case.describe()}. With {what}, the provider received "
                   f"{flood.requests} requests and refused {flood.refused}; in second "
                   f"{over.get('second', '?')} after the upload it was sent "
                   f"{over.get('requests', '?')}, and it answers {case.limit}",
                   "every run starts with its model call, and the flood puts enough runs "
                   "and workers in the queue to start many at the same moment: count what "
                   "your limits let through in the worst second, not on average")
    if not flood.all_completed or flood.unanswered or flood.repeated:
        raise Fail(f"{case.describe()}. With {what}, the runs ended {flood.statuses}; the "
                   f"provider has no answer for {len(flood.unanswered)} of them and more than "
                   f"one for {len(flood.repeated)}",
                   "every run should complete with one answered call")


def judge_busy(flood: Flood, what: str, hint: str):
    """Fail unless the provider was sent its full limit in at least BUSY_SHARE of the seconds
    while runs waited in the queue."""
    case = flood.case
    full, waiting = seconds_at_the_limit(flood.per_second, case.limit)
    if waiting and full >= BUSY_SHARE * waiting:
        return
    peak = max(flood.per_second[:-1] or flood.per_second or [0])
    raise Fail(f"{case.describe()}. With {what}, runs waited in the queue for {waiting} s, and "
               f"the provider was sent its full {case.limit} requests in {full} of those "
               f"seconds (at most {peak} in any of them); a queue that keeps it busy does so "
               f"in at least {BUSY_SHARE:.0%} of them",
               hint)


def judge_deadlines(flood: Flood, what: str, hint_a: str, hint_b: str, keys=None):
    """Fail if a run was refused or did not complete, or a tenant's last run was done
    after its deadline."""
    case = flood.case
    if flood.refused or flood.over is not None or not flood.all_completed:
        raise Fail(f"{case.describe()}. With {what}, the provider refused {flood.refused} "
                   f"requests and the runs ended {flood.statuses}: no deadline is met by "
                   "going over the limit",
                   "keep the provider within its limit first (the test above), then see "
                   "whether the deadlines are met")
    deadline_a, deadline_b = case.deadlines
    late = []
    if flood.a_done[-1] > deadline_a:
        late.append(f"A's last run was done {flood.a_done[-1]:.1f} s after its upload; A's "
                    f"deadline is {deadline_a:.1f} s, time for the provider to answer all "
                    f"{case.a_runs + case.b_runs} runs at {case.limit} a second and some to spare")
    if flood.b_done[-1] > deadline_b:
        late.append(f"B's runs were done {flood.b_done[0]:.1f} to {flood.b_done[-1]:.1f} s "
                    f"after they arrived; B's deadline is {deadline_b:.1f} s")
    if late:
        span = max(flood.a_done[-1], flood.b_done[-1] + case.b_at)
        pace = (f"The provider answered {flood.requests} requests in {span:.1f} s: "
                f"{flood.requests / span:.1f} a second on average, of the {case.limit} it "
                "could have.")
        raise Fail(f"{case.describe()}. With {what}, " + "; ".join(late) + ". " +
                   (pace if keys is None else describe_keys(keys)),
                   hint_a if flood.a_done[-1] > deadline_a else hint_b)


def describe_keys(keys) -> str:
    """What a learner's keys did, in a sentence: how many keys each tenant's runs used, and
    which both shared."""
    a_keys, b_keys = set(keys["A"]), set(keys["B"])
    if a_keys | b_keys == {None}:
        return "Your keys: None for every run, so the queue had no keys to take turns between."
    shared = sorted(map(repr, a_keys & b_keys))
    return (f"Your keys put A's {len(keys['A'])} runs under {_count(a_keys)} and B's "
            f"{len(keys['B'])} under {_count(b_keys)}"
            + (f"; both tenants' runs used {', '.join(shared[:3])}"
               f"{' and more' if len(shared) > 3 else ''}." if shared else
               "; the two tenants shared none."))


def _count(keys) -> str:
    n = len(keys) - (None in keys)
    text = f"{n} key" + ("" if n == 1 else "s")
    return text + (" and no key (None)" if None in keys else "")


# q1: the key --------------------------------------------------------------------------------------
q1 = EXERCISE.question("q1", "key_for: whose turn it is", answers=["key_for"])

KEYS_HINT = ("the queue takes turns between keys, and goes first in, first out within one "
             "key: what should all the runs of one tenant share, and two tenants never?")


GRADERS_QUEUE = "the grader's queue (it keeps the provider at its limit) and your keys"


def _with_your_keys(key_for, cases):
    """Each case flooded through the grader's queue with the learner's keys, one process
    each, so a failing answer stops at its first failing case: yields (flood, keys)."""
    for case in cases:
        keys = keys_of(key_for, case)
        yield simulate(grader_queue(case.limit), case, keys), keys


@q1.test("while A's flood waits in the queue, B's runs take turns with it: each tenant "
         "done by its deadline", hint=KEYS_HINT)
def _(key_for, draw):
    cases = [draw_case(draw, BANDS[0]), draw_case(draw, BANDS[-1])]
    for flood, keys in _with_your_keys(key_for, cases):
        judge_deadlines(flood, GRADERS_QUEUE, KEYS_HINT, KEYS_HINT, keys)


@q1.test("two tenants whose names look alike still take turns", hint=KEYS_HINT)
def _(key_for, draw):
    case = draw_case(draw, draw.choice(BANDS), lookalike=True)
    for flood, keys in _with_your_keys(key_for, [case]):
        judge_deadlines(flood, GRADERS_QUEUE, KEYS_HINT, "two tenants must never share a key, "
                        "however alike their names", keys)


# q2: the limits -----------------------------------------------------------------------------------
q2 = EXERCISE.question("q2", "make_queue: the provider's limit, kept and used",
                       answers=["make_queue"])

BUSY_HINT = ("the provider's limit counts requests a second. What does each of your limits "
             "count, and how many requests a second does it let through when a call takes "
             "about three seconds?")


def _with_your_queue(make_queue, draw):
    """One case per band of limits, flooded through the learner's queue with each run keyed
    by its tenant, one process each: yields (flood, the queue as rebuilt)."""
    for case in draw_cases(draw):
        queue = queue_of(make_queue, case.limit)
        yield simulate(queue, case, tenant_keys(case)), queue


@q2.test("the provider never refuses a request: at most its limit in any second, and every "
         "run answered once", hint="derive every limit from `limit`: dl.Queue(name, "
         "concurrency=..., per_key=..., rate=(starts, seconds)), any of them or none")
def _(make_queue, draw):
    for flood, queue in _with_your_queue(make_queue, draw):
        judge_limit(flood, f"your queue {queue!r}")


@q2.test("the provider kept busy within its limit: sent its full limit in most seconds while "
         "runs wait, and A's flood and B's runs each done by its deadline",
         hint=BUSY_HINT)
def _(make_queue, draw):
    for flood, queue in _with_your_queue(make_queue, draw):
        what = f"your queue {queue!r}"
        if flood.refused or flood.over is not None or not flood.all_completed:
            judge_deadlines(flood, what, BUSY_HINT, BUSY_HINT)     # says: the limit first
        judge_busy(flood, what, BUSY_HINT)
        judge_deadlines(flood, what, BUSY_HINT,
                        "keyed by tenant, B takes every other start while A waits: see which "
                        "of your limits holds B's runs back", None)
