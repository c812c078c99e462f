"""Lesson 16, the capstone: a research agent for a small team, and the world it works in.

The source article's example, grown into what a team would run: for each request a model
plans the tool calls (their ids invented at run time), tools fetch and extract (extraction
emails the requester that it is done), a paid source dearer than `APPROVAL_OVER` dollars
waits for a person's yes with a deadline, the model drafts a report (it fails on its first
try), and the report is posted to the tenant's tracker and emailed. Requests arrive for
several tenants at once, and each has a budget: steps, dollars, hours.

`naive_research` and `naive_serve` below run, and are wrong under crashes: lesson 16 asks
for the durable version. Every effect is recorded in the world's own ledgers (one SQLite
file, `ledgers.db`, shared by every process), so a crash of the agent's process does not
reset what the world saw:

- "model": one record per billed model call {kind: "plan" | "draft", request, tokens, cost}
- "model_errors": the draft call that failed (not billed)
- "fetches": one per tool call {request, call}
- "mail": one per email {request, to, kind: "extracted" | "report", report_id}
- "approvals": one per question asked of a person; "expired": one per deadline that fired
- "charges", "source_refunds": dollars paid for a source, and paid back
- "tracker": one per report posted {request, tenant, report_id, sources}

A request is plain data (JSON), for example::

    {"id": "req-7", "tenant": "acme", "topic": "vector databases", "owner": "ana@acme.example",
     "source_price": 12.0, "calls": 2, "project": "open",
     "budget": {"steps": 40, "dollars": 1.0, "hours": 72}}
"""

import random
import time
import uuid

from .sim import world_at
from .workflow import workflow

APPROVAL_OVER = 5.0            # dollars: a source dearer than this waits for a person's yes
APPROVAL_HOURS = 24            # and the person has this long to answer
PRICE_PER_1K_TOKENS = 0.02     # the model's price, dollars per 1,000 tokens
_WORDS = ("latency recall index cost cluster shard embedding benchmark throughput vendor "
          "licence storage replica query memory filter").split()


class ModelUnavailable(Exception):
    """The model failed to answer (a 503): worth trying again."""


class TrackerRefused(Exception):
    """The tracker refuses the post for good (the tenant's project is archived)."""


def _ledger(folder, name):
    return world_at(folder).ledger(name)


def _bill(folder, kind, request, prompt):
    """Bill one model call: the record's number makes every call's answer different."""
    model = _ledger(folder, "model")
    n = model.count() + 1
    rng = random.Random(f"{request['id']}/{kind}/{n}")
    words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 16))]
    tokens = len(prompt.split()) + 3 * len(words) + 20
    cost = round(tokens / 1000 * PRICE_PER_1K_TOKENS, 6)
    model.record(detail={"kind": kind, "request": request["id"], "tokens": tokens, "cost": cost})
    return rng, " ".join(words), cost


# the model -----------------------------------------------------------------------------------
def plan(folder, request) -> dict:
    """The model plans the tool calls for a request. Each call gets an id the model invents,
    so asking again gives other ids (and is billed again)."""
    rng, text, cost = _bill(folder, "plan", request, f"plan research on {request['topic']}")
    calls = [{"id": f"call_{rng.getrandbits(32):08x}", "tool": "fetch",
              "query": f"{request['topic']} {rng.choice(_WORDS)}"}
             for _ in range(request["calls"])]
    return {"calls": calls, "cost": cost, "text": text}


def draft(folder, request, facts) -> dict:
    """The model drafts the report. Its first try for each request fails (not billed)."""
    errors = _ledger(folder, "model_errors")
    if not errors.record(key=f"first-try:{request['id']}", detail={"request": request["id"]})["repeat"]:
        raise ModelUnavailable(f"the model is unavailable (503) drafting {request['id']}")
    _, text, cost = _bill(folder, "draft", request, f"draft a report from {facts['summary']}")
    return {"text": f"Report on {request['topic']}: {text}", "cost": cost}


def model_cost(answer) -> float:
    """What a model call's answer says it cost (a step's `cost=`)."""
    return answer["cost"]


# the tools -----------------------------------------------------------------------------------
def fetch(folder, request_id, call) -> dict:
    """Run one planned tool call (a read: safe to repeat)."""
    _ledger(folder, "fetches").record(detail={"request": request_id, "call": call["id"]})
    return {"call": call["id"], "text": f"notes on {call['query']}"}


def extract(folder, request, docs, idempotency_key=None) -> dict:
    """Extract the facts, and email the requester that extraction is done."""
    send_mail(folder, request, "extracted", None, idempotency_key)
    return {"summary": "; ".join(doc["text"] for doc in docs), "sources": [d["call"] for d in docs]}


def send_mail(folder, request, kind, report_id, idempotency_key=None) -> dict:
    return _ledger(folder, "mail").record(key=idempotency_key, detail={
        "request": request["id"], "to": request["owner"], "kind": kind, "report_id": report_id})


def ask_approval(folder, request, idempotency_key=None) -> dict:
    """Ask the tenant's approver to say yes to buying the source (an email)."""
    return _ledger(folder, "approvals").record(key=idempotency_key, detail={
        "request": request["id"], "tenant": request["tenant"], "price": request["source_price"]})


def approval_expired(folder, request, idempotency_key=None) -> dict:
    """Tell the requester nobody answered in time: the report goes ahead without the source."""
    return _ledger(folder, "expired").record(key=idempotency_key, detail={"request": request["id"]})


def buy_source(folder, request, idempotency_key=None) -> dict:
    """Pay for the paid source, charged to the tenant."""
    return _ledger(folder, "charges").record(key=idempotency_key, detail={
        "request": request["id"], "tenant": request["tenant"], "dollars": request["source_price"]})


def refund_source(folder, charge_key, idempotency_key=None) -> dict:
    """Pay back the charge made with key `charge_key` (nothing if there was none)."""
    charge = [r for r in _ledger(folder, "charges").records() if r["key"] == charge_key]
    if not charge:
        return {"refunded": None}
    return _ledger(folder, "source_refunds").record(key=idempotency_key, detail=charge[0]["detail"])


def post_report(folder, request, report_id, text, sources=None, idempotency_key=None) -> dict:
    """Post the report to the tenant's tracker. An archived project refuses it for good."""
    if request.get("project") == "archived":
        raise TrackerRefused(f"the tracker of {request['tenant']} refuses {request['id']}: "
                             "project archived")
    return _ledger(folder, "tracker").record(key=idempotency_key, detail={
        "request": request["id"], "tenant": request["tenant"], "report_id": report_id,
        "sources": sources})


def email_report(folder, request, report_id, idempotency_key=None) -> dict:
    return send_mail(folder, request, "report", report_id, idempotency_key)


# the naive agent: it runs, and it is wrong under crashes --------------------------------------
def naive_research(folder, request, approval=None, clock=time.time) -> dict:
    """One request, top to bottom, as a script would do it. `approval(request_id)` returns
    the person's answer (True, False, or None while they have not answered)."""
    spent = {"steps": 0, "dollars": 0.0}
    started = clock()

    def budget(cost=0.0):
        spent["steps"] += 1
        spent["dollars"] += cost
        limit = request["budget"]
        if spent["steps"] > limit["steps"] or spent["dollars"] > limit["dollars"] or \
                clock() - started > limit["hours"] * 3600:
            raise RuntimeError(f"{request['id']}: over budget")

    planned = plan(folder, request)
    budget(planned["cost"])
    docs = []
    for call in planned["calls"]:
        docs.append(fetch(folder, request["id"], call))
        budget()
    facts = extract(folder, request, docs)
    budget()
    if request["source_price"] > APPROVAL_OVER:
        ask_approval(folder, request)
        answer = approval(request["id"]) if approval else None
        if answer is None:
            approval_expired(folder, request)
        if answer:
            buy_source(folder, request)
    elif request["source_price"]:
        buy_source(folder, request)
    report = draft_until_it_answers(folder, request, facts)
    budget(report["cost"])
    report_id = str(uuid.uuid4())
    post_report(folder, request, report_id, report["text"])
    email_report(folder, request, report_id)
    return {"request": request["id"], "report_id": report_id}


def naive_serve(folder, requests, approval=None) -> list:
    """Every request, one after another: what the team runs today."""
    return [naive_research(folder, request, approval) for request in requests]


def draft_until_it_answers(folder, request, facts, tries=3) -> dict:
    """The naive code's retry of the draft: try again at once when the model is down."""
    for attempt in range(1, tries + 1):
        try:
            return draft(folder, request, facts)
        except ModelUnavailable:
            if attempt == tries:
                raise
    raise AssertionError("unreachable")


@workflow("capstone-naive-agent", version=1)
def naive_agent(ctx, folder, request):
    """`naive_research` (a paid source under the approval threshold) with its effects named,
    so the crash playground's sweep can crash it at every point: run with
    `dl.faults.sweep(naive_agent, request, runner="naive")`, every crash starts it again from
    the top, as the team's job queue does today."""
    planned = ctx.step("plan", plan, folder, request)
    docs = [ctx.step("fetch", fetch, folder, request["id"], call) for call in planned["calls"]]
    facts = ctx.step("extract", extract, folder, request, docs)
    if request["source_price"]:
        ctx.step("buy", buy_source, folder, request)
    report = ctx.step("draft", draft_until_it_answers, folder, request, facts)
    report_id = ctx.uuid()
    ctx.step("post", post_report, folder, request, report_id, report["text"])
    ctx.step("email", email_report, folder, request, report_id)
    return {"request": request["id"], "report_id": report_id}


def example_requests() -> list:
    """Three requests for two tenants, as lesson 16 shows them."""
    def request(rid, tenant, topic, owner, price, calls):
        return {"id": rid, "tenant": tenant, "topic": topic, "owner": owner,
                "source_price": price, "calls": calls, "project": "open",
                "budget": {"steps": 40, "dollars": 1.0, "hours": 72}}
    return [request("req-1", "acme", "vector databases", "ana@acme.example", 12.0, 2),
            request("req-2", "acme", "queue brokers", "ben@acme.example", 3.5, 2),
            request("req-3", "globex", "vector databases", "chen@globex.example", 0, 3)]
