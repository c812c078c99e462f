"""Lesson 11's simulations: what happens when recovery works too well.

- `burst(mode)`: one customer uploads 300 documents at once. Each is a run of
  `summarise`: one model call, retried on a 429 after 1, 2, 4, 8 and 16 seconds. The model
  provider (`sim.ModelProvider`) answers 20 requests a second and refuses the rest.
  mode "lockstep": every run starts at once and retries without jitter; "jitter": the
  same with full jitter; "queue": the runs wait in a `dl.Queue` with `rate=(20, 1.0)` and
  60 workers take them from it.
- `flood(queue)`: tenant A enqueues 300 runs; 5 seconds later tenant B enqueues 10.
  Twelve workers take them from `queue`. When does B get its answers?
- `parse_document` and `run_workers`: a queue of documents, one of which kills every worker
  process that parses it (a poison run), and a supervisor that starts a new worker each
  time one dies, as systemd or Kubernetes would.

The first two run on a `simtime.VirtualClock`: every run or worker is a thread waiting in
simulated time, so minutes of traffic take a fraction of a second and come out the same
every time. The simulations keep their runs in a MemoryStore (nothing here needs to
survive a crash); the provider keeps its ledger in a file, like every service in `sim`.
"""

import json
import os
import signal
import sys
from dataclasses import dataclass, field
from typing import Optional

from .engine import Engine
from .policy import Retry, Step
from .queue import Queue
from .sim import ModelProvider, world_at
from .simtime import VirtualClock
from .store import MemoryStore
from .workflow import workflow

PROVIDER_LIMIT = 20            # requests a second the provider answers
DOCUMENT_WORDS = 1200          # a document's words: the input tokens of its model call
RETRY = {"max_attempts": 6, "initial": 1.0, "multiplier": 2.0, "cap": 30.0}

_providers = {}                # name -> ModelProvider, for the step below (threads share it)


# the run: one document, one model call ---------------------------------------------------------
def document(doc: str, words: int = DOCUMENT_WORDS) -> str:
    return f"Summarise document {doc}: " + " ".join(["text"] * words)


def ask_model(provider: str, doc: str, caller: str, tenant: Optional[str]) -> dict:
    return _providers[provider].complete(document(doc), caller=caller, tenant=tenant)


def _dollars(answer) -> float:
    return answer["cost"]


@workflow("summarise", version=1)
def summarise(ctx, provider, doc, tenant=None, jitter=True):
    """Summarise one document with one model call, retried on failure (a 429) with
    exponential backoff: 1, 2, 4, 8, 16 s, drawn from [0, that] with full jitter."""
    retry = Retry(**RETRY, jitter=jitter)
    answer = ctx.step(Step("summarise", retry=retry, cost=_dollars), ask_model, provider, doc,
                      ctx.run_id, tenant)
    return {"doc": doc, "tokens": answer["tokens"]}


# what a simulation returns ---------------------------------------------------------------------
@dataclass
class Outcome:
    """What happened in one simulation, read from the provider's ledger and the store."""

    label: str
    per_second: list                # the provider's requests, answered, refused... per second
    provider: dict                  # the provider's totals (sim.ModelProvider.totals)
    statuses: dict                  # run status -> how many runs ended so
    finished: dict = field(default_factory=dict)   # run id -> seconds after the start, completed runs
    tenants: dict = field(default_factory=dict)    # run id -> tenant

    def finish_times(self, tenant=None) -> list:
        """Seconds after the simulation began when each run (of `tenant`) completed, sorted."""
        return sorted(t for run, t in self.finished.items()
                      if tenant is None or self.tenants.get(run) == tenant)

    def summary(self) -> dict:
        """One row for a table comparing simulations."""
        return {"requests": self.provider["requests"], "refused": self.provider["refused"],
                "peak requests/s": self.provider["peak_requests_per_second"],
                "runs completed": self.statuses.get("completed", 0),
                "runs failed": self.statuses.get("failed", 0),
                "last answer after (s)": round(max(self.finished.values(), default=0.0), 1),
                "prompt tokens refused": self.provider["refused_input_tokens"]}


def _outcome(label, provider, store, began, tenants=None) -> Outcome:
    statuses, finished = {}, {}
    for record in store.list_runs():
        statuses[record.status] = statuses.get(record.status, 0) + 1
        if record.status == "completed":
            finished[record.run_id] = round(record.updated_at - began, 3)
    return Outcome(label, provider.per_second(), provider.totals(), statuses, finished,
                   tenants or {})


def _provider(folder, name, limit, clock, seed) -> ModelProvider:
    path = os.path.join(folder, f"{name}.db")
    for suffix in ("", "-wal", "-shm"):          # a fresh ledger for every simulation
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    provider = ModelProvider(path, limit=limit, clock=clock, seed=seed)
    _providers[name] = provider
    return provider


# 1. the storm ----------------------------------------------------------------------------------
def burst(mode: str, folder, *, runs: int = 300, limit: int = PROVIDER_LIMIT, seed: int = 0,
          workers: int = 60, queue: Optional[Queue] = None) -> Outcome:
    """One customer's `runs` documents at once (see the module's docstring for `mode`).
    In mode "queue", `queue` replaces the default `Queue("llm", rate=(limit, 1.0))`."""
    if mode not in ("lockstep", "jitter", "queue"):
        raise ValueError(f"mode is 'lockstep', 'jitter' or 'queue', not {mode!r}")
    clock = VirtualClock()
    began = clock()
    name = f"burst-{mode}"
    provider = _provider(folder, name, limit, clock, seed)
    store = MemoryStore()
    engine = Engine(store, clock, seed=seed, lease_seconds=600, worker="web")
    docs = [(f"doc-{i:03d}", f"D{i:03d}") for i in range(runs)]
    if mode == "queue":
        queue = queue or Queue("llm", rate=(limit, 1.0))
        for run_id, doc in docs:
            engine.enqueue(queue, summarise, name, doc, jitter=True, run_id=run_id)
        for w in range(workers):
            worker = Engine(store, clock, seed=seed + w, lease_seconds=600, worker=f"worker-{w}")
            clock.spawn(worker.work, queue, poll=0.25)
    else:
        for run_id, doc in docs:        # every upload starts its run at once
            clock.spawn(engine.start, summarise, name, doc, jitter=(mode == "jitter"),
                        run_id=run_id)
    clock.run()
    return _outcome(mode, provider, store, began)


# 2. tenants ------------------------------------------------------------------------------------
def flood(queue: Queue, folder, *, keys=True, a_runs: int = 300, b_runs: int = 10,
          b_at: float = 5.0, workers: int = 12, limit: int = PROVIDER_LIMIT, seed: int = 0,
          label: Optional[str] = None) -> Outcome:
    """Tenant A enqueues `a_runs` runs at once; `b_at` seconds later tenant B enqueues
    `b_runs`. `workers` workers take them from `queue`. Each run is enqueued with its
    tenant as key; with keys=False, with no key; or with `keys(tenant, i)` if keys is a
    function. Runs until every run has finished; finish times are counted from the
    moment each tenant's runs arrived."""
    clock = VirtualClock()
    began = clock()
    name = f"flood-{label or queue.name}"
    _provider(folder, name, limit, clock, seed)
    store = MemoryStore()
    engine = Engine(store, clock, seed=seed, lease_seconds=600, worker="web")
    tenants = {}

    def arrive(tenant, count):
        for i in range(count):
            run_id = f"{tenant}-{i:03d}"
            tenants[run_id] = tenant
            key = keys(tenant, i) if callable(keys) else tenant if keys else None
            engine.enqueue(queue, summarise, name, f"{tenant}/{i}", tenant, run_id=run_id,
                           key=key)

    arrive("A", a_runs)
    arrivals = {"done": False}

    def tenant_b():
        clock.sleep(b_at)
        arrive("B", b_runs)
        arrivals["done"] = True

    def work(worker):
        while True:
            worker.work(queue, poll=0.5)          # until nothing is queued or unfinished
            if arrivals["done"]:
                return
            clock.sleep(0.5)

    clock.spawn(tenant_b)
    for w in range(workers):
        clock.spawn(work, Engine(store, clock, seed=seed + w, lease_seconds=600,
                                 worker=f"worker-{w}"))
    clock.run()
    outcome = _outcome(label or queue.name, _providers[name], store, began, tenants)
    outcome.finished = {run: t - (b_at if tenants[run] == "B" else 0.0)
                        for run, t in outcome.finished.items()}
    return outcome


# 3. a poison run -------------------------------------------------------------------------------
POISON = "scan-0413.pdf"       # the document whose parser kills the process


def parse(folder, doc):
    """Parse a document. One of them crashes the parser so hard the process dies (think
    of a segfault in a PDF library, or the out-of-memory killer): SIGKILL, nothing caught."""
    if doc == POISON:
        os.kill(os.getpid(), signal.SIGKILL)
    return world_at(folder).ledger("parsed").record(key=doc, detail={"doc": doc})


@workflow("parse-document", version=1)
def parse_document(ctx, folder, doc):
    parsed = ctx.step("parse", parse, folder, doc)
    return parsed["record_id"]


@dataclass(frozen=True)
class WorkerExit:
    number: int
    killed: bool                    # SIGKILLed (the poison), or it finished the queue


def run_workers(store_path, queue: Queue, *, max_workers: int = 10, max_interruptions: int = 5,
                timeout: float = 60.0) -> list:
    """A supervisor: start a worker process on the queue; when it dies, start another, up
    to `max_workers`, until one finishes because nothing is left. Returns how each ended.
    Each worker's engine declares a run dead after `max_interruptions` (engine.py)."""
    import subprocess

    spec = json.dumps({"store": os.fspath(store_path), "queue": queue.name,
                       "limits": queue.limits_json(), "max_interruptions": max_interruptions})
    child = "import sys; from durable_lite.storm import _worker_main; _worker_main(sys.argv[1])"
    exits = []
    for number in range(1, max_workers + 1):
        proc = subprocess.run([sys.executable, "-c", child, spec], capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode not in (0, -signal.SIGKILL):
            raise RuntimeError(f"worker {number} failed (exit {proc.returncode}):\n"
                               f"{proc.stderr[-2000:]}")
        exits.append(WorkerExit(number, proc.returncode == -signal.SIGKILL))
        if proc.returncode == 0:
            break
    return exits


def _worker_main(spec_json: str):
    from .store import SQLiteStore
    spec = json.loads(spec_json)
    engine = Engine(SQLiteStore(spec["store"]), max_interruptions=spec["max_interruptions"])
    engine.work(Queue.from_json(spec["queue"], spec["limits"]), poll=0.02)
