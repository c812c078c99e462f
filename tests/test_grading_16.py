"""Exercise 16 can be failed: for every property of its rubric, three (or more) wrong answers,
written as a learner would, lose that property on seeds 1, 2 and 3; right answers written
differently keep full marks; the solution's answer keeps every property at every crash point.

The answers are notebook cells (tests/capstone_answers.py), run the way a kernel runs them,
so each worker process runs their source again. To stay lean, a wrong answer is played only
at the crash points that can show its mistake (`points=`), stopping at the first case that
breaks it: broken there is broken in the grader's whole sweep, which plays the same scenario
and kills it at the same points.
"""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from durable_lite.grading.exercises import ex16_capstone as ex16

from capstone_answers import RIGHT, replace, run_cells

SEEDS = (1, 2, 3)
AFTER_EFFECT = lambda step, when: when == "after_effect"         # noqa: E731
CLEAN_ONLY = lambda step, when: False                           # noqa: E731

# The right answer's two blocks as tests/capstone_answers.py writes them: ask, then buy.
# BUY_FIRST swaps them: the source bought first, then the approver asked, and the purchase
# paid back unless the answer is yes (the ledgers show a refused source bought).
ASK = '''    if request["source_price"] > APPROVAL_OVER:
        ctx.step("ask", ask_approval, folder, request,
                 idempotency_key=ctx.idempotency_key("ask", rid))
        answer = ctx.wait_for_signal("approval", timeout=APPROVAL_HOURS * 3600)
        if answer is None:
            ctx.step("expired", approval_expired, folder, request,
                     idempotency_key=ctx.idempotency_key("expired", rid))
        if not answer:
'''
BUY = '''    paid = ctx.idempotency_key("charge", rid)
    saga.step("buy", buy_source, folder, request, idempotency_key=paid,
              undo=(refund_source, folder, paid))'''
BUY_FIRST = (ASK + "            return\n" + BUY,
             BUY + "\n" + ASK + '''            ctx.step("refund", refund_source, folder, paid,
                     idempotency_key=ctx.idempotency_key("refund", rid))''')

# property: [(what the learner did, old text, new text, the crash points that show it)]
WRONG = {
    "exactly once": [
        ("the report email has no key",
         '''ctx.step("email", email_report, folder, request, report_id,
             idempotency_key=ctx.idempotency_key("email", rid))''',
         '''ctx.step("email", email_report, folder, request, report_id)''',
         lambda step, when: step.startswith("email") and when == "after_effect"),
        ("the post's key is made from the topic, which two requests share",
         'idempotency_key=ctx.idempotency_key("post", rid)',
         'idempotency_key="post-" + request["topic"]', CLEAN_ONLY),
        ("a fresh run id on every submit",
         'run_id=f"research-{request[\'id\']}"',
         'run_id=f"research-{request[\'id\']}-{uuid.uuid4().hex[:6]}"', CLEAN_ONLY),
        # the same in two forks of one Python, different in two new interpreters: a worker
        # started again after a kill must be a new interpreter's (durable_lite/fresh.py)
        ("the report email's key is salted with str's hash seed",
         'idempotency_key=ctx.idempotency_key("email", rid))',
         'idempotency_key=f"email-{rid}-{hash(\'salt\')}")',
         lambda step, when: step.startswith("email") and when == "after_effect"),
        ("the extraction email has no key",
         '''docs,
                    idempotency_key=ctx.idempotency_key("extracted", rid))''',
         '''docs)''', lambda step, when: step == "extract" and when == "after_effect"),
    ],
    "model billed once": [
        ("the plan is asked for outside a step",
         '''planned = ctx.step(dl.Step("plan", cost=model_cost), plan, folder, request)''',
         '''planned = plan(folder, request)''', CLEAN_ONLY),
        ("the plan is kept in a dict in the process's memory",
         '''planned = ctx.step(dl.Step("plan", cost=model_cost), plan, folder, request)''',
         '''planned = PLANS.get(rid) or PLANS.setdefault(rid, plan(folder, request))''',
         CLEAN_ONLY),
        ("the draft is retried by hand, outside a step",
         "report = ctx.step(DRAFTING, draft, folder, request, facts)",
         '''report = None
        while report is None:
            try:
                report = draft(folder, request, facts)
            except Exception:
                pass''', lambda step, when: step == "post" and when != "after_effect"),
    ],
    "recorded non-determinism": [
        ("the report id from uuid4", "report_id = ctx.uuid()", "report_id = str(uuid.uuid4())",
         lambda step, when: step == "post" and when == "after_checkpoint"),
        ("the report id from the clock", "report_id = ctx.uuid()",
         'report_id = f"{rid}-{time.time_ns()}"',
         lambda step, when: step == "post" and when == "after_checkpoint"),
        ("the report id from random", "report_id = ctx.uuid()",
         'report_id = f"{rid}-{random.randrange(10 ** 9)}"',
         lambda step, when: step == "post" and when == "after_checkpoint"),
    ],
    "budget": [
        ("no budget", 'run_id=f"research-{request[\'id\']}", budget=budget)',
         'run_id=f"research-{request[\'id\']}")', CLEAN_ONLY),
        ("dollars and hours, but not steps", 'dl.Budget(max_steps=limit["steps"], max_cost',
         'dl.Budget(max_cost', CLEAN_ONLY),
        ("the plan's dollars are not recorded",
         'ctx.step(dl.Step("plan", cost=model_cost), plan', 'ctx.step("plan", plan', CLEAN_ONLY),
    ],
    "approval deadline": [
        ("the timeout in hours, read as seconds", "timeout=APPROVAL_HOURS * 3600",
         "timeout=APPROVAL_HOURS", CLEAN_ONLY),
        ("silence taken for a yes", '''        if not answer:
            return''', '''        if answer is False:
            return''', CLEAN_ONLY),
        ("the approver is asked outside a step", '''ctx.step("ask", ask_approval, folder, request,
                 idempotency_key=ctx.idempotency_key("ask", rid))''',
         '''ask_approval(folder, request)''', CLEAN_ONLY),
        ("a no taken for a yes", '''        if not answer:
            return''', '''        if answer is None:
            return''', CLEAN_ONLY),
        ("any answer taken for a yes",
         '''answer = ctx.wait_for_signal("approval", timeout=APPROVAL_HOURS * 3600)
        if answer is None:
            ctx.step("expired", approval_expired, folder, request,
                     idempotency_key=ctx.idempotency_key("expired", rid))
        if not answer:
            return''',
         '''answered = ctx.wait_for_signal("approval", timeout=APPROVAL_HOURS * 3600) is not None
        if not answered:
            ctx.step("expired", approval_expired, folder, request,
                     idempotency_key=ctx.idempotency_key("expired", rid))
            return''', CLEAN_ONLY),
        ("the source bought before asking, paid back on a no", BUY_FIRST[0], BUY_FIRST[1],
         CLEAN_ONLY),
        ("the approver given two days", "timeout=APPROVAL_HOURS * 3600",
         "timeout=2 * APPROVAL_HOURS * 3600", CLEAN_ONLY),
        ("the expiry notice is sent outside a step",
         '''ctx.step("expired", approval_expired, folder, request,
                     idempotency_key=ctx.idempotency_key("expired", rid))''',
         '''approval_expired(folder, request)''',
         lambda step, when: step in ("draft", "post") and when == "before_step"),
    ],
    "per-tenant limit": [
        ("a queue with no per-tenant limit", 'dl.Queue("research", per_key=1)',
         'dl.Queue("research")', CLEAN_ONLY),
        ("the queue's key is the request", 'key=request["tenant"]', 'key=request["id"]',
         CLEAN_ONLY),
        ("a concurrency limit of two for everyone", 'dl.Queue("research", per_key=1)',
         'dl.Queue("research", concurrency=2)', CLEAN_ONLY),
    ],
    "compensation": [
        ("no saga: the payment is a plain step",
         '''saga.step("buy", buy_source, folder, request, idempotency_key=paid,
              undo=(refund_source, folder, paid))''',
         '''ctx.step("buy", buy_source, folder, request, idempotency_key=paid)''', CLEAN_ONLY),
        ("the undo names another reference", "undo=(refund_source, folder, paid))",
         'undo=(refund_source, folder, ctx.idempotency_key("refund", rid)))', CLEAN_ONLY),
        ("the post is outside the saga", '''        report_id = ctx.uuid()
        sources = facts["sources"] if with_sources else None
        ctx.step("post", post_report, folder, request, report_id, report["text"],
                 sources=sources, idempotency_key=ctx.idempotency_key("post", rid))''',
         '''    report_id = ctx.uuid()
    sources = facts["sources"] if with_sources else None
    ctx.step("post", post_report, folder, request, report_id, report["text"],
             sources=sources, idempotency_key=ctx.idempotency_key("post", rid))''',
         CLEAN_ONLY),
    ],
    "versioning": [
        ("version 2 declared as version 1", 'dl.workflow("research-agent", version=2)',
         'dl.workflow("research-agent", version=1)', CLEAN_ONLY),
        ("submit always starts version 1", "engine.enqueue(RESEARCH, workflow, folder",
         "engine.enqueue(RESEARCH, research, folder", CLEAN_ONLY),
        ("version 2 forgets the sources", "with_sources=True", "with_sources=False", CLEAN_ONLY),
    ],
}

IMPORTS = "import random\nimport time\nimport uuid\nPLANS = {}\n"


def wrong_cells(old, new):
    return [IMPORTS] + replace(RIGHT, old, new)


CASES = [(prop, what, old, new, pts) for prop, answers in WRONG.items()
         for what, old, new, pts in answers]


@pytest.mark.parametrize("seed", range(1, 41))
def test_every_property_s_distinguishing_case_is_drawn_on_every_run(seed):
    """The scenario's five roles, whatever the seed: each property's case is reached; an
    approval answered yes, one answered no and one nobody answers are in every run."""
    from durable_lite.capstone import APPROVAL_HOURS, APPROVAL_OVER
    from durable_lite.grading.cases import Draw
    r = ex16.requests_for(Draw(seed))
    assert len({q["id"] for q in r.values()}) == 5
    assert r["A1"]["tenant"] == r["A2"]["tenant"] != r["B3"]["tenant"] == r["B4"]["tenant"]
    assert r["A1"]["topic"] == r["B3"]["topic"]                      # a key from the topic
    assert all(r[role]["source_price"] > APPROVAL_OVER for role in ("A1", "A2", "B3"))
    assert 0 < r["B4"]["source_price"] < APPROVAL_OVER               # bought without asking
    assert r["B4"]["project"] == "archived"                          # compensation
    assert r["B5"]["budget"]["steps"] < r["B5"]["calls"] + 1         # the budget halts it
    phases = ex16.phases()
    sent = {role: (i, payload) for i, phase in enumerate(phases) for role, payload in phase[3]}
    assert {role: payload for role, (_, payload) in sent.items()} == {"A1": True, "A2": False}
    hours = [phase[4] for phase in phases]
    # A1 asks in phase 1, A2 and B3 in phase 2: yes and no come before the deadline, the
    # last phase after B3's; and a restarted pod submits B3 and B4 again
    assert sum(hours[1:sent["A1"][0] + 1]) < APPROVAL_HOURS
    assert sum(hours[2:sent["A2"][0] + 1]) < APPROVAL_HOURS
    assert sum(hours[2:]) > APPROVAL_HOURS and phases[-1][2] == [("B3", 2), ("B4", 2)]
    assert {v for _, v in phases[0][2]} == {1} and {v for _, v in phases[1][2]} == {2}


def test_every_property_has_three_wrong_answers():
    assert set(WRONG) == set(ex16.PROPERTIES)
    assert all(len(answers) >= 3 for answers in WRONG.values())


@pytest.fixture(scope="module")
def wrong_results():
    """Every wrong answer on every seed, graded on its own property:
    {(prop, what, seed): (where, message) of what broke it, or None}."""
    jobs = []
    for prop, what, old, new, pts in CASES:
        answers = run_cells(wrong_cells(old, new), name=what.replace(" ", "-"))
        for seed in SEEDS:
            jobs.append((prop, what, seed, answers, pts))

    def grade(job):
        prop, what, seed, answers, pts = job
        graded = ex16.sweep(answers, seed, jobs=1, stop_on=prop, points=pts)
        return (prop, what, seed), graded.broken(prop)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        out = dict(pool.map(grade, jobs))
    out["seconds"] = time.monotonic() - started
    return out


@pytest.mark.parametrize("prop,what", [(c[0], c[1]) for c in CASES])
def test_wrong_answer_loses_its_property_on_every_seed(wrong_results, prop, what):
    for seed in SEEDS:
        assert wrong_results[(prop, what, seed)], f"{what!r} kept {prop!r} on seed {seed}"


REFUSALS = ("a no taken for a yes", "any answer taken for a yes",
            "the source bought before asking, paid back on a no")


@pytest.mark.parametrize("what", REFUSALS)
def test_a_source_bought_though_the_approver_said_no_is_caught_by_the_refused_request(
        wrong_results, what):
    """Such an answer keeps A1 (yes) and B3 (silence) right: only the request the approver
    refuses (A2) shows its mistake, on every seed."""
    from durable_lite.grading.cases import Draw
    for seed in SEEDS:
        where, message = wrong_results[("approval deadline", what, seed)]
        refused = ex16.requests_for(Draw(seed))["A2"]["id"]
        assert where == "no crash" and f"request {refused}" in message, (seed, message)


def test_an_approval_failure_says_what_the_check_saw_without_the_answer(wrong_results):
    """The request, what the ledgers hold against what was expected, the deadline its run
    fixed and the clock: '0 notices' alone left a learner guessing. No code in it."""
    from durable_lite.grading.cases import Draw
    for seed in SEEDS:
        where, message = wrong_results[("approval deadline", "the approver given two days", seed)]
        silent = ex16.requests_for(Draw(seed))["B3"]["id"]
        assert where == "no crash" and message.startswith(f"request {silent} ("), message
        assert "nobody answers its approver" in message
        assert ("the world's ledgers hold 1 question to the approver, 0 'nobody answered' "
                "notices and 0 payments for the source; expected 1, 1 and 0") in message
        assert "its deadline 'approval' was fixed at 1.0 h, 48.0 h ahead" in message
        assert "the clock read 27.0 h when the last worker stopped" in message
        for code in ("3600", "APPROVAL_HOURS", "wait_for_signal", "timeout"):
            assert code not in message
