"""Helpers shared by the grading tests: read a grader's score, and make a learner's notebook
by changing cells of a solution or of an untouched exercise."""

import contextlib
import sys
import zlib
from pathlib import Path

import nbformat
import pytest

import capstone_answers

ROOT = Path(__file__).resolve().parent.parent


def one_seed(seeds, *answers):
    """The one seed of `seeds` these answers are graded on. Every seed draws a case that
    reaches every property (each exercise's drawn-case tests show that over many seeds), so
    grading an answer again on a second seed proves little more, at twice the cost; spread
    by the answers' names, a file's answers between them still meet every seed."""
    names = " ".join(getattr(a, "__name__", None) or str(a) for a in answers)
    return seeds[zlib.crc32(names.encode()) % len(seeds)]


def needs_exercise(name):
    """Skip the calling test, with the exercise's own reason, where its checks cannot run
    on this machine (exercise 14 needs DBOS, which not every Python has)."""
    from durable_lite.grading import exercise
    ok, why = exercise(name).available()
    if not ok:
        pytest.skip(f"exercise {name} cannot be graded here: {why}")


def statuses(score):
    """{question id: "passed" | "failed" | "not attempted" | "check error" | "not checked" |
    "tampered"}."""
    return {q["question"]: q["status"] for q in score.questions}


def failing_tests(score, qid):
    """Names of the tests of question `qid` that did not pass."""
    return [t["name"] for t in score.question(qid)["tests"] if t["status"] != "passed"]


def check_outputs(score):
    """The text printed by every check(...) cell, and whether any of them raised."""
    texts, errors = [], []
    for cell in score.notebook.cells:
        if cell.cell_type == "code" and cell.source.startswith("check("):
            for out in cell.outputs:
                if out.output_type == "error":
                    errors.append(cell.source)
                texts.append(out.get("text", ""))
    return "".join(texts), errors


def report_with_failures(score) -> str:
    """The score's report, then every test that did not pass with its whole message: the
    report names only a question's first failure, and a failure seen once on a busy machine
    must be told apart from the next."""
    lines = [score.report()]
    for q in score.questions:
        for t in q["tests"]:
            if t["status"] != "passed":
                lines.append(f"{q['question']} · {t['name']}: {t['status']}: {t['message']}")
    return "\n".join(lines)


def with_code(name, marker, new_source, tmp_path):
    """A copy of solution `name` whose one cell containing `marker` holds `new_source`."""
    return learner(name, tmp_path, start="solutions", cells={marker: new_source})


def learner(name, folder, start="exercises", cells=None, added=(), filename=None):
    """A learner's notebook: a copy of `start/name` (an untouched exercise, or the solution)
    in which the one cell containing each marker of `cells` holds new source, with `added`
    code cells appended at the end. Written to folder/filename (default: the exercise's name)."""
    nb = nbformat.read(ROOT / start / f"{name}.ipynb", as_version=4)
    for marker, source in (cells or {}).items():
        found = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
        assert len(found) == 1, f"{marker!r} should be in exactly one cell of {start}/{name}"
        found[0].source = source
    for source in added:
        nb.cells.append(nbformat.v4.new_code_cell(source))
    path = Path(folder) / (filename or f"{name}.ipynb")
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def make_class(folder, size=30):
    """A class of `size` notebooks, as learners hand them in: one folder per learner, three
    exercises each, each a full solution, an untouched exercise, or a typical wrong answer."""
    names = sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb"))
    wrong = {name: WRONG[name] for name in names if name in WRONG}
    made = []
    for i in range(size):
        name = names[i % len(names)]
        who = f"learner-{i // 3 + 1:02d}"
        kind = ("solution", "wrong", "untouched")[(i // len(names)) % 3]
        if kind == "wrong" and name not in wrong:
            kind = "solution"
        if kind == "solution":
            path = learner(name, Path(folder) / who, start="solutions")
        elif kind == "untouched":
            path = learner(name, Path(folder) / who)
        else:
            marker, source = wrong[name]
            path = learner(name, Path(folder) / who, start="solutions", cells={marker: source})
        made.append((who, path, kind))
    return made


# One plausible wrong answer per exercise, for classes made by make_class: (a marker of the
# answer cell it replaces, the wrong cell). The marker names the answer whose question fails.
WRONG = {
    "01_naive_retry": ("def predicted_refunds", '''STEPS = ["lookup", "refund", "email", "close"]


def predicted_refunds(step, when):
    return 2 if step in ("email", "close") else 1      # forgets the refund's own crash points
'''),
    "02_memoize": ("def memo_step", '''MEMO = {}


def memo_step(db, run_id, name, fn, *args):
    if (run_id, name) not in MEMO:                      # a dict in memory, not the table
        MEMO[(run_id, name)] = fn(*args)
    return MEMO[(run_id, name)]
'''),
    "03_idempotency": ("def refund_key", '''def refund_key(run_id, order_id):
    return hashlib.sha256((run_id + order_id).encode()).hexdigest()   # ("a1","2") == ("a","12")
'''),
    "04_determinism": ("def receipt", '''@dl.workflow("ex04-receipt", version=1)
def receipt(ctx, folder, order_id):
    issued_at = ctx.now()
    receipt_id = "rcpt-" + uuid.uuid4().hex[:8]         # still read anew on every replay
    order = ctx.step("lookup", lookup_order, folder, order_id)
    ctx.step("email", email_customer, folder, order["email"],
             f"Receipt {receipt_id} for order {order_id}")
    return {"receipt": receipt_id, "issued_at": issued_at, "order": order_id}
'''),
    "05_model_step": ("def triage", '''@dl.workflow("ex05-triage", version=1)
def triage(ctx, folder, ticket):
    reply = ctx.step("classify", classify, folder, ticket)
    desk = "refunds" if "refund" in reply["text"] else "helpdesk"
    ctx.step(desk, forward, folder, desk, ticket)
    audited = random.random() < 0.25                    # unrecorded
    if audited:
        ctx.step("audit", forward, folder, "audit", ticket)
    return {"desk": desk, "audited": audited, "answer": reply["text"]}
'''),
    "06_choose_k": ("def smallest_k", '''def smallest_k(p, n, target):
    k = 1
    while 1 - (1 - p ** n) ** k < target:               # the restart formula
        k += 1
    return k
'''),
    "07_approval_deadline": ("def publish_post", '''@dl.workflow("ex07-publish-post", version=1)
def publish_post(ctx, folder, post_id):
    draft = ctx.step("draft", write_draft, folder, post_id)
    ctx.step("ask-editor", notify, folder, EDITOR, f"Please review {post_id}")
    decision = ctx.wait_for_signal("approval", timeout=1 * DAY)
    if decision is None:                                # gives up after one day
        ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} was not reviewed in time")
        return {"post": post_id, "outcome": "expired"}
    if decision["approved"]:
        ctx.step("publish", publish, folder, post_id, draft["text"])
        return {"post": post_id, "outcome": "published", "by": decision["by"]}
    ctx.step("tell-author", notify, folder, AUTHOR, f"{post_id} was rejected")
    return {"post": post_id, "outcome": "rejected", "by": decision["by"]}
'''),
    "08_budgets": ("def start_agent(", '''def start_agent(engine, agent, folder, run_id):
    global worker_limit
    worker_limit = StepLimit(MAX_STEPS)                 # forgotten by every new worker
    return engine.start(agent, folder, GOAL, run_id=run_id)
'''),
    "09_compensation": ("def refund_card", '''def refund_card(folder, reference, idempotency_key):
    """The undo of charge_card: pay back the charge made under `reference`."""
    return travel_at(folder).refund(reference)          # the saga's key is not handed on


def cancel_booking(folder, reference, idempotency_key):
    """The undo of book: cancel the booking made under `reference`."""
    return travel_at(folder).cancel(reference)
'''),
    "10_tracing": ("def finished_by", '''def finished_by(tree):
    """The execution span that completed the run, or None."""
    return tree.find(kind="execution")[-1]              # the last one, finished or not
'''),
    "11_flow_control": ("def make_queue", '''def make_queue(limit):
    return dl.Queue("llm", rate=(20, 1.0))              # the lesson's provider, not this one
'''),
    "12_versioning": ("def can_retire", '''def can_retire(engine, name):
    """May the old branch of the gate GATE in workflow `name` be deleted now?"""
    return not engine.runs("waiting")                   # a status, not what the history holds
'''),
    "13_costs": ("def break_even_steps", '''def break_even_steps(w, q, h):
    if q == 0:
        return None
    return math.floor(2 * h / (w * q)) + 2             # the rule of thumb, made for rare crashes
'''),
    "14_port_to_dbos": ("def cancel_subscription", '''@step("lookup")
def lookup(folder, sub_id):
    return lookup_subscription(folder, sub_id)


@step("cancel")
def cancel(folder, sub_id, key):
    return cancel_plan(folder, sub_id, idempotency_key=key)


@step("refund")
def refund(folder, sub_id, amount, key):
    return refund_unused(folder, sub_id, amount, idempotency_key=key)


@step("goodbye")
def goodbye(folder, to, subject):
    return send_email(folder, to, subject)


@DBOS.workflow(name="ex14-cancel-subscription")
def cancel_subscription(folder, sub_id, unused):
    import uuid
    sub = lookup(folder, sub_id)
    plan = cancel(folder, sub_id, derive_key(DBOS.workflow_id, "cancel", sub_id))
    refund_id = None
    if unused > 0:
        key = derive_key(str(uuid.uuid4()), "refund", sub_id)     # new on every attempt
        refund_id = refund(folder, sub_id, unused, key)["refund_id"]
    goodbye(folder, sub["email"], f"{sub_id} is cancelled")
    return {"subscription": sub_id, "cancellation": plan["record_id"],
            "refund_id": refund_id, "amount": unused}
'''),
    "15_port_to_temporal_and_langgraph": ("def renew_subscription", '''import time


@task("customer")
def customer(folder, sub_id):
    return lookup_subscription(folder, sub_id)


@task("notice")
def notice(folder, to, subject):
    return send_email(folder, to, subject)


@task("cancel")
def cancel(folder, sub_id, key):
    return cancel_plan(folder, sub_id, idempotency_key=key)


@task("charge")
def charge(folder, sub_id, amount, key):
    return charge_renewal(folder, sub_id, amount, idempotency_key=key)


@task("receipt")
def receipt(folder, to, subject):
    return send_email(folder, to, subject)


@task("clock")
def clock():
    return time.time()


def idempotency_key(*parts):
    return derive_key(get_config()["configurable"]["thread_id"], *parts)


@entrypoint()
def renew_subscription(inputs):
    folder, sub_id, price = inputs["folder"], inputs["sub_id"], inputs["price"]
    deadline = 2 * DAY                       # the run's own deadline ignored
    sub = customer(folder, sub_id).result()
    notice(folder, sub["email"], f"{sub_id} renews at {price}: reply within two days to cancel").result()
    due = clock().result() + deadline
    reply = interrupt({"waiting for": REPLY, "due": due})
    if clock().result() > due:
        reply = None
    if reply is not None and reply["cancel"]:
        plan = cancel(folder, sub_id, idempotency_key("cancel", sub_id)).result()
        return {"subscription": sub_id, "outcome": "cancelled", "replied": True,
                "cancellation": plan["record_id"]}
    charged = charge(folder, sub_id, price, idempotency_key("charge", sub_id)).result()
    receipt(folder, sub["email"], f"{sub_id} renewed: {price} charged ({charged['record_id']})").result()
    return {"subscription": sub_id, "outcome": "renewed", "replied": reply is not None,
            "charge": charged["record_id"], "amount": price}
'''),
    # the capstone: one cell that defines every answer (the last answer cell, so the stubs
    # before it do not replace them), right but for the queue: no per-tenant limit
    "16_capstone": ("def submit(", "\n\n".join(
        [capstone_answers.QUEUE.replace('dl.Queue("research", per_key=1)', 'dl.Queue("research")'),
         capstone_answers.STEPS, capstone_answers.V1, capstone_answers.V2,
         capstone_answers.SUBMIT])),
}


@contextlib.contextmanager
def one_thread_at_a_time():
    """What checks run side by side on threads (test_grading_14.py, test_grading_15.py)
    share in this process and must get back (everything else a case uses is its own:
    folders, databases, run ids, worker processes; the simulated world's cache has a lock of
    its own, sim.py, and the workers' exit statuses are read one at a time by
    durable_lite.engines.processes.forked): sys.stdout and sys.stderr. Each test swaps them
    for a sink while it runs; threads that swap them in turn leave a sink behind, so they
    are put back afterwards."""
    streams = sys.stdout, sys.stderr
    try:
        yield
    finally:
        sys.stdout, sys.stderr = streams


def run_tests(ex, qid, answer, seed, only=None) -> dict:
    """Exercise `ex`'s tests of question `qid` (or only those numbered in `only`) on
    `answer`, with the cases of `seed`: {test number: TestResult}."""
    from durable_lite.grading import checks
    question = ex.questions[qid]
    numbers = list(range(len(question.tests))) if only is None else list(only)
    part = checks.Exercise(ex.id, ex.title, ex.lesson)
    part.question(qid, question.title, question.answers).tests = [question.tests[i]
                                                                   for i in numbers]
    result = checks.run_question(part, qid, [answer], seed=seed)
    return dict(zip(numbers, result.tests))


def failed(results) -> set:
    """The numbers of the tests that did not pass."""
    from durable_lite.grading import checks
    return {n for n, t in results.items() if t.status != checks.PASSED}


def spelled_out(results) -> str:
    """Each test's number, status, whole message and hint, a line each: an assertion's
    message that is a dict is cut to a line by pytest, and with it the cause of a failure."""
    return "\n".join(f"test {n}: {t.status}: {t.message}"
                     + (f" (hint: {t.hint})" if t.hint else "")
                     for n, t in sorted(results.items()))
