"""Answers to exercise 16 written as a learner's notebook cells: the right one (the
solution's, cell for cell), and helpers that run cells the way a kernel does, keeping their
sources in the namespace's `_ih` so a fresh process can run them again."""

GIVEN = '''import durable_lite as dl
from durable_lite.capstone import (APPROVAL_HOURS, APPROVAL_OVER, approval_expired, ask_approval,
                                   buy_source, draft, email_report, extract, fetch, model_cost,
                                   plan, post_report, refund_source)
'''

QUEUE = '''RESEARCH = dl.Queue("research", per_key=1)
'''

STEPS = '''def gather(ctx, folder, request):
    rid = request["id"]
    planned = ctx.step(dl.Step("plan", cost=model_cost), plan, folder, request)
    docs = [ctx.step(f"fetch:{call['id']}", fetch, folder, rid, call) for call in planned["calls"]]
    return ctx.step("extract", extract, folder, request, docs,
                    idempotency_key=ctx.idempotency_key("extracted", rid))


def pay_if_approved(ctx, saga, folder, request):
    rid = request["id"]
    if not request["source_price"]:
        return
    if request["source_price"] > APPROVAL_OVER:
        ctx.step("ask", ask_approval, folder, request,
                 idempotency_key=ctx.idempotency_key("ask", rid))
        answer = ctx.wait_for_signal("approval", timeout=APPROVAL_HOURS * 3600)
        if answer is None:
            ctx.step("expired", approval_expired, folder, request,
                     idempotency_key=ctx.idempotency_key("expired", rid))
        if not answer:
            return
    paid = ctx.idempotency_key("charge", rid)
    saga.step("buy", buy_source, folder, request, idempotency_key=paid,
              undo=(refund_source, folder, paid))


DRAFTING = dl.Step("draft", retry=dl.Retry(max_attempts=4, initial=1, jitter=False),
                   cost=model_cost)


def write_and_deliver(ctx, folder, request, with_sources):
    rid = request["id"]
    facts = gather(ctx, folder, request)
    with dl.Saga(ctx) as saga:
        pay_if_approved(ctx, saga, folder, request)
        report = ctx.step(DRAFTING, draft, folder, request, facts)
        report_id = ctx.uuid()
        sources = facts["sources"] if with_sources else None
        ctx.step("post", post_report, folder, request, report_id, report["text"],
                 sources=sources, idempotency_key=ctx.idempotency_key("post", rid))
    ctx.step("email", email_report, folder, request, report_id,
             idempotency_key=ctx.idempotency_key("email", rid))
    return {"request": rid, "report_id": report_id}
'''

V1 = '''@dl.workflow("research-agent", version=1)
def research(ctx, folder, request):
    return write_and_deliver(ctx, folder, request, with_sources=False)
'''

V2 = '''@dl.workflow("research-agent", version=2)
def research_v2(ctx, folder, request):
    return write_and_deliver(ctx, folder, request, with_sources=True)
'''

SUBMIT = '''def submit(engine, folder, request, workflow):
    limit = request["budget"]
    budget = dl.Budget(max_steps=limit["steps"], max_cost=limit["dollars"],
                       deadline=limit["hours"] * 3600)
    return engine.enqueue(RESEARCH, workflow, folder, request, key=request["tenant"],
                          run_id=f"research-{request['id']}", budget=budget)


def serve(engine):
    return engine.work(RESEARCH)
'''

RIGHT = [GIVEN, QUEUE, STEPS, V1, V2, SUBMIT]

# Right answers written differently: {what the learner did: [(old text, new text)]}, each
# a change of RIGHT that must keep full marks.
RIGHT_VARIANTS = {
    # keys made another way, the budget in a helper, the queue's tenant limit with a concurrency
    "other keys and names": [
        ('idempotency_key=ctx.idempotency_key("email", rid)',
         'idempotency_key=ctx.idempotency_key("report-mail", request["tenant"], rid)'),
        ('dl.Queue("research", per_key=1)', 'dl.Queue("research", concurrency=4, per_key=1)'),
        ('run_id=f"research-{request[\'id\']}"', 'run_id="agent/" + request["id"]'),
    ],
    # the wait answered by a falsy check written out, the sources from the plan's recorded calls
    "written out": [
        ('''        if not answer:
            return''', '''        if answer is None or answer is False:
            return'''),
        ('sources = facts["sources"] if with_sources else None',
         'sources = None\n        if with_sources:\n            sources = list(facts["sources"])'),
    ],
    # the draft's retry as a learner first writes it: the default backoff (1 s, then 2 s)
    "the draft retried with the default backoff": [
        ("dl.Retry(max_attempts=4, initial=1, jitter=False)",
         "dl.Retry(max_attempts=3, jitter=False)"),
    ],
    # a backoff longer than the grader's lease: the worker's clock is well past its phase's
    # start when it takes the next run
    "the draft retried after a long backoff": [
        ("dl.Retry(max_attempts=4, initial=1, jitter=False)",
         "dl.Retry(max_attempts=3, initial=45, jitter=False)"),
    ],
}


def variant(name):
    """The cells of the right answer written differently as RIGHT_VARIANTS[name] says."""
    cells = RIGHT
    for old, new in RIGHT_VARIANTS[name]:
        cells = replace(cells, old, new)
    return cells


def run_cells(cells, name="answer_cells"):
    """Run `cells` as a kernel would, in a fresh namespace that keeps their sources in
    `_ih`; returns the four answers (research, research_v2, submit, serve)."""
    namespace = {"__name__": "__main__", "_ih": [""]}
    for n, cell in enumerate(cells):
        namespace["_ih"].append(cell)
        exec(compile(cell, f"<{name}-cell-{n}>", "exec"), namespace)
    return tuple(namespace[k] for k in ("research", "research_v2", "submit", "serve"))


def replace(cells, old, new):
    """The cells with `old` replaced by `new` (exactly once somewhere)."""
    joined = "\x00".join(cells)
    assert joined.count(old) == 1, f"{old!r} occurs {joined.count(old)} times"
    return joined.replace(old, new).split("\x00")
