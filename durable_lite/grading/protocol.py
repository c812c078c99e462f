"""How a score leaves the kernel: in the kernel's reply to the grader's own cell, signed.

Nothing the learner's cells write can be a score. For each question the grader sends a cell
of its own, after the learner's code for it has run; that cell runs the grader's tests and
keeps the result under a one-time secret the grader made a moment before:

    grade("03_idempotency", "q2", ["refund_once", "open_sent"], seed=..., secret=..., limit=20)

The grader then reads the result back through the execute request's `user_expressions`,
which the kernel evaluates after the cell and returns in its reply on the shell channel —
not on the output stream, which any code in the kernel can print to. The result carries an
HMAC made with that secret. A result file written ahead of time, output printed by a
learner's thread, a variable set to look like a result, an `os._exit` after any of them: none
of them carries a MAC made with a secret that did not exist when they were written, and
none of them is where the grader looks.

What this cannot stop is code that runs *inside* the grading cell — a learner's function,
called by a test, that reaches up the stack for the secret, or a module replaced in memory
before the tests run. The first line of defence against the second is below: `begin()`
fingerprints the grading code in memory before any learner cell runs, and `grade()`
refuses to score if it changed. Both can be defeated by code written for the purpose; the
grader reports answers that refer to its machinery (assemble.py) so a person looks.
"""

import hashlib
import hmac
import importlib
import json
import sys
import types

from . import checks

_BEGUN = {}                      # exercise id -> fingerprint of the grading code in memory
_SIGNED = {}                     # nonce -> the signed result of one grading cell

# Modules whose functions the tests call: loaded before the learner's code, fingerprinted.
_PRELOAD = ("durable_lite.engine", "durable_lite.context", "durable_lite.sweep",
            "durable_lite.child", "durable_lite.sim", "durable_lite.examples",
            "durable_lite.naive", "durable_lite.faults", "durable_lite.grading.checks",
            "durable_lite.grading.cases", "durable_lite.grading.ledgers",
            "durable_lite.grading.harness", "durable_lite.grading.child",
            "durable_lite.grading.portable", "durable_lite.grading.protocol")


# the kernel's side ---------------------------------------------------------------------
def preload() -> None:
    """Import what the tests use (the grader's own kernel does too, for the kernels'
    bytecode: guard.bytecode_folder)."""
    for name in _PRELOAD:
        importlib.import_module(name)


def begin(exercise_id: str) -> None:
    """The grader's first cell: load the checks and everything they use, print plain text,
    and fingerprint the grading code before any of the learner's cells can run."""
    from . import exercise
    checks.PLAIN_TEXT = True
    preload()
    exercise(exercise_id)
    _BEGUN[exercise_id] = _fingerprint(exercise_id)


def grade(exercise_id: str, qid: str, names, seed: int, secret: str, limit: float) -> None:
    """A grading cell: run question `qid`'s tests on the answers the cell's caller (the
    notebook) holds under `names`, print the report, and keep the signed result."""
    from . import exercise
    user = sys._getframe(1).f_globals               # the notebook's namespace
    missing = [n for n in names if n not in user]
    changed = _changed(exercise_id)
    if changed:
        result = _refused(exercise_id, qid, seed, "the grading code in memory was changed "
                          f"before the tests ran ({', '.join(changed[:3])})")
        payload = {**result, "tampered": changed}
    elif missing:
        result = _refused(exercise_id, qid, seed, f"{', '.join(missing)} is not defined: "
                          "its cell raised, or the name was changed")
        payload = result
    else:
        answers = [user[n] for n in names]
        outcome = checks.run_question(exercise(exercise_id), qid, answers, seed=seed,
                                      time_limit=limit)
        print(outcome.report())
        payload = outcome.to_json()
    _SIGNED[_nonce(secret)] = sign(payload, secret)


def signed(nonce: str):
    """What the grader's user_expression reads: the signed result of one grading cell."""
    return _SIGNED.get(nonce)


def _refused(exercise_id, qid, seed, why) -> dict:
    from . import exercise
    question = exercise(exercise_id).questions[qid]
    print(f"{qid} · {question.title}: not graded — {why}")
    return {"exercise": exercise_id, "question": qid, "title": question.title,
            "status": checks.FAILED, "passed": 0, "total": len(question.tests), "seed": seed,
            "tests": [{"name": t.name, "status": checks.FAILED, "message": why, "hint": ""}
                      for t in question.tests]}


def _fingerprint(exercise_id) -> dict:
    """id() of every function and class (and method) the grading path can call, as loaded.

    A learner's cell that rebinds one of them (`checks.run_question = ...`) changes an id.
    Modules loaded later are not covered; _PRELOAD loads the ones the tests use."""
    from . import exercise
    prints = {}
    modules = [m for name, m in list(sys.modules.items())
               if name == "durable_lite" or name.startswith("durable_lite.")]
    modules.append(sys.modules["builtins"])
    for module in modules:
        for name, value in list(vars(module).items()):
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
                prints[f"{module.__name__}.{name}"] = id(value)
                if isinstance(value, type) and module.__name__.startswith("durable_lite"):
                    for attr, member in list(vars(value).items()):
                        if isinstance(member, (types.FunctionType, property, staticmethod, classmethod)):
                            prints[f"{module.__name__}.{name}.{attr}"] = id(member)
    for q in exercise(exercise_id).questions.values():
        for test in q.tests:
            prints[f"test {q.id}: {test.name}"] = (id(test.fn), id(test.fn.__code__))
    return prints


def _changed(exercise_id) -> list:
    before = _BEGUN.get(exercise_id)
    if before is None:
        return ["the grader's first cell never ran"]
    now = _fingerprint(exercise_id)
    return sorted(name for name, value in before.items() if now.get(name) != value)


# both sides ----------------------------------------------------------------------------
def sign(payload: dict, secret: str) -> str:
    text = json.dumps(payload, sort_keys=True, default=str)
    mac = hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()
    return json.dumps({"payload": text, "mac": mac})


def _nonce(secret: str) -> str:
    """The key a result is kept under: derived from the secret, so it names nothing in advance."""
    return hashlib.sha256(("nonce:" + secret).encode()).hexdigest()[:32]


# the grader's side ---------------------------------------------------------------------
def begin_code(exercise_id: str) -> str:
    """The grader's first cell: it leaves no name of its own in the notebook's namespace."""
    return f"__import__('durable_lite.grading.protocol', fromlist=['begin']).begin({exercise_id!r})"


def grading_request(exercise_id, qid, names, seed, secret, limit):
    """(code, user_expressions) for one grading cell."""
    code = (f"__import__('durable_lite.grading.protocol', fromlist=['grade']).grade(\n"
            f"    {exercise_id!r}, {qid!r}, {list(names)!r}, seed={seed}, secret={secret!r}, "
            f"limit={limit})")
    expression = (f"__import__('durable_lite.grading.protocol', fromlist=['signed'])"
                  f".signed({_nonce(secret)!r})")
    return code, {"result": expression}


def verify(reply_content: dict, secret: str, exercise_id: str, qid: str, seed: int):
    """(result dict, None) for an authentic result of this question, else (None, why)."""
    expr = (reply_content.get("user_expressions") or {}).get("result") or {}
    if expr.get("status") != "ok":
        return None, "no result came back"
    import ast
    try:
        envelope = ast.literal_eval(expr.get("data", {}).get("text/plain", "None"))
        if envelope is None:
            return None, "no result came back"
        envelope = json.loads(envelope)
        text, mac = envelope["payload"], envelope["mac"]
    except (ValueError, SyntaxError, KeyError, TypeError):
        return None, "the result was not in the grader's format"
    want = hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, str(mac)):
        return None, "the result was not signed with this cell's secret"
    payload = json.loads(text)
    if (payload.get("exercise"), payload.get("question"), payload.get("seed")) != (exercise_id, qid, seed):
        return None, "the result was for another question or seed"
    return payload, None
