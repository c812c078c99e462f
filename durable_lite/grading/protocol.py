"""How a score leaves the kernel: in the kernel's reply to the grader's own cell, signed with a
key no cell ever holds.

Nothing the learner's cells write can be a score. The grader's first request, before any
learner code exists, loads the checks and installs the grader's watch (watch.py): audit
hooks that record the grading code as loaded, make a random key and hand it back once, in
the reply to that request. For each question the grader then sends a cell of its own,
after the learner's code for it has run:

    grade("03_idempotency", "q2", ["refund_once", "open_sent"], seed=..., nonce=..., limit=20)

It asks the watch to compare the grading code with its record, runs the grader's tests,
asks again, and has the watch sign the result, which the grader reads back through the
execute request's `user_expressions` (evaluated after the cell, returned on the shell
channel — not the output stream, which any code in the kernel can print to). The signature
(HMAC-SHA256) covers the cell's nonce, the result, what changed in the grading code and
what the watch saw the notebook do since the last grading cell. The key is in no cell's
source and not in IPython's history; a results file, a printed "all tests passed", a
variable set to look like a result, an `os._exit`, a dict that re-signs what it is given:
none carries a valid signature, and the watch signs only for the frame running this
module's `grade`. From the last comparison to the signature only the grader's own code runs
(what it prints, it prints before), so a function the notebook replaced cannot forge the
result it signs.
"""

import importlib
import json
import signal
import sys

from . import checks, watch

_BEGUN = []                      # the exercise this kernel grades, once begun
_SIGNED = {}                     # nonce -> the signed result of one grading cell
_HANDLERS = {}                   # signal name -> id of its handler, as last reported

# Modules whose functions the tests call: loaded (and recorded) before the learner's code.
_PRELOAD = ("durable_lite.engine", "durable_lite.context", "durable_lite.sweep",
            "durable_lite.child", "durable_lite.sim", "durable_lite.examples",
            "durable_lite.naive", "durable_lite.faults", "durable_lite.grading.checks",
            "durable_lite.grading.cases", "durable_lite.grading.ledgers",
            "durable_lite.grading.harness", "durable_lite.grading.child",
            "durable_lite.grading.portable", "durable_lite.grading.protocol")

# Signals a notebook can raise on a timer, whose handler gets the frame it interrupted (a
# frame of the tests, say): a handler the notebook set is worth a look, and the watch
# cannot see one being set.
_HANDLED = ("SIGALRM", "SIGVTALRM", "SIGPROF", "SIGUSR1", "SIGUSR2")


# the kernel's side ---------------------------------------------------------------------
def preload() -> None:
    """Import what the tests use, so the watch records it before any learner code runs."""
    for name in _PRELOAD:
        importlib.import_module(name)


def begin(exercise_id: str) -> str:
    """The grader's first request (a user expression, before any learner cell): load the
    checks and everything they use, print plain text, install the watch, and return the
    key results will be signed with. Once per kernel."""
    from . import exercise
    if _BEGUN:
        raise RuntimeError("the grader's first cell runs once per kernel")
    _BEGUN.append(exercise_id)
    checks.PLAIN_TEXT = True
    preload()
    _HANDLERS.update(_handlers())
    return watch.install(grade.__code__, globals(), exercise(exercise_id))


def grade(exercise_id: str, qid: str, names, seed: int, nonce: str, limit: float) -> None:
    """A grading cell: run question `qid`'s tests on the answers the cell's caller (the
    notebook) holds under `names`, print the report, and keep the signed result."""
    from . import exercise
    user = sys._getframe(1).f_globals               # the notebook's namespace
    missing = [n for n in names if n not in user]
    changed = []
    sys.audit(watch.CHECKPOINT, nonce, changed)       # the grading code, before the tests
    if changed:
        payload = _refused(exercise_id, qid, seed, "the grading code in memory was changed "
                           f"before the tests ran ({', '.join(changed[:3])})",
                           "a cell of this notebook changed the course's own code: keep "
                           "your changes to the answer cells")
    elif missing:
        payload = _refused(exercise_id, qid, seed, f"{', '.join(missing)} is not defined: "
                           "its cell raised, or the name was changed",
                           f"run the cell that defines {missing[0]} in the notebook: the "
                           "error it shows there is what stopped it")
    else:
        answers = [user[n] for n in names]
        outcome = checks.run_question(exercise(exercise_id), qid, answers, seed=seed,
                                      time_limit=limit)
        print(outcome.report())
        payload = outcome.to_json()
    handlers = _handlers()
    payload["flags"] = [f"its code set a handler for {name}, which gets the frame it "
                        "interrupts" for name, h in handlers.items() if h != _HANDLERS.get(name)]
    _HANDLERS.update(handlers)
    sys.audit(watch.CHECKPOINT, nonce, changed)       # and after: from here, only our code
    text = json.dumps(payload, sort_keys=True, default=_unknown)
    box = []
    sys.audit(watch.SIGN, text, nonce, box)           # the watch signs for this frame only
    _SIGNED[nonce] = box[0] if box else None


def signed(nonce: str):
    """What the grader's user_expression reads: the signed result of one grading cell."""
    return _SIGNED.get(nonce)


def _refused(exercise_id, qid, seed, why, hint) -> dict:
    from . import exercise
    question = exercise(exercise_id).questions[qid]
    print(f"{qid} · {question.title}: not graded — {why}")
    return {"exercise": exercise_id, "question": qid, "title": question.title,
            "status": checks.FAILED, "passed": 0, "total": len(question.tests), "seed": seed,
            "tests": [{"name": t.name, "status": checks.FAILED, "message": why, "hint": hint}
                      for t in question.tests]}


def _unknown(value) -> str:
    """What a value JSON cannot hold is written as: its type's name (str() could run code
    the notebook wrote, after the last comparison)."""
    return f"<{type(value).__name__}>"


def _handlers() -> dict:
    found = {}
    for name in _HANDLED:
        number = getattr(signal, name, None)
        if number is not None:
            found[name] = id(signal.getsignal(number))
    return found


# the grader's side ---------------------------------------------------------------------
_MODULE = "__import__('durable_lite.grading.protocol', fromlist=['protocol'])"


def begin_request(exercise_id: str):
    """(code, user_expressions) for the grader's first cell: it leaves no name of its own in
    the notebook's namespace, and its reply carries the key (`key`)."""
    return "# the grader's first cell", {"key": f"{_MODULE}.begin({exercise_id!r})"}


def key_of(reply_content: dict):
    """(key, None) from the first cell's reply, else (None, why)."""
    expr = (reply_content.get("user_expressions") or {}).get("key") or {}
    if expr.get("status") != "ok":
        return None, f"{expr.get('ename', 'no reply')}: {expr.get('evalue', '')}".strip(": ")
    import ast
    try:
        key = ast.literal_eval(expr.get("data", {}).get("text/plain", "None"))
        return bytes.fromhex(key), None
    except (ValueError, SyntaxError, TypeError):
        return None, "its reply was not a key"


def grading_request(exercise_id, qid, names, seed, nonce, limit):
    """(code, user_expressions) for one grading cell. Nothing in it is secret: the nonce only
    names this cell's result (and is signed with it, so no other result can stand in)."""
    code = (f"{_MODULE}.grade(\n"
            f"    {exercise_id!r}, {qid!r}, {list(names)!r}, seed={seed}, nonce={nonce!r}, "
            f"limit={limit})")
    return code, {"result": f"{_MODULE}.signed({nonce!r})"}


def verify(reply_content: dict, key: bytes, exercise_id: str, qid: str, seed: int, nonce: str):
    """(result dict, what the watch saw, None) for an authentic result of this question and
    cell, else (None, [], why)."""
    import ast
    import hashlib
    import hmac
    expr = (reply_content.get("user_expressions") or {}).get("result") or {}
    if expr.get("status") != "ok":
        return None, [], "no result came back"
    try:
        envelope = ast.literal_eval(expr.get("data", {}).get("text/plain", "None"))
        if envelope is None:
            return None, [], "no result came back"
        text, seen, mac = envelope
        signed_text = nonce + "\n" + text + "\n" + seen
    except (ValueError, SyntaxError, TypeError):
        return None, [], "the result was not in the grader's format"
    want = hmac.new(key, signed_text.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, str(mac)):
        return None, [], "the result was not signed with the grader's key for this cell"
    payload = json.loads(text)
    if (payload.get("exercise"), payload.get("question"), payload.get("seed")) != (exercise_id, qid, seed):
        return None, [], "the result was for another question or seed"
    return payload, [line for line in seen.split("\n") if line], None
