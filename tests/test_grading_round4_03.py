"""A restart is a new process that runs the notebook's code again (exercise 03).

A value drawn once when the notebook's code first ran — a salt from uuid4(), the clock at
import, the address of a module — is the same for every call in the kernel, so a check that
calls the answer only there is fooled: the key looks stable. The fresh processes of q1 and
q4 now rebuild the answer from the cells' source, so each draws its own value, as a real
restart would, and these answers fail on every seed. Answers that keep the key a function
of the run and the order, written in other ways, still pass.
"""

from test_grading_properties_01_07 import EX03, KEY, KEYED, ONCE, changed, fails, passes

SEEDS = (1, 2, 3)

# Each salt is drawn once, when the cell runs: the kernel sees one value all along.
SALTED_AT_IMPORT = {
    "a uuid drawn at import": ("import uuid\n_SALT = uuid.uuid4().hex\n", "_SALT"),
    "the clock read at import": ("import time\nSTARTED = int(time.time())\n", "STARTED"),
    "the address of a module": ("import hashlib as _h\nPROCESS_TAG = id(_h)\n", "PROCESS_TAG"),
    # Two forks of one Python share these, two new interpreters do not: a restart must
    # cross to another interpreter (durable_lite/fresh.py), or a kill and its resume agree.
    "str's hash seed": ('SALT = hash("orders")\n', "SALT"),
    "the address of an object made at import": ("TOKEN = id(object())\n", "TOKEN"),
}


def salted_key(prelude, name):
    return prelude + changed(EX03, KEY, ('["refund", run_id, order_id]',
                                         f'["refund", run_id, order_id, {name}]'))


def test_03_q1_a_key_salted_once_per_process_fails_in_a_fresh_process():
    for why, (prelude, name) in SALTED_AT_IMPORT.items():
        result = fails(EX03, "q1", {KEY: salted_key(prelude, name)},
                       "a fresh Python process, days later", seeds=SEEDS)
        test = next(t for t in result.tests if t.name.startswith("a fresh Python process"))
        assert "a fresh process" in test.message, (why, test.message)


def test_03_q4_a_key_salted_once_per_process_pays_twice_after_a_real_restart():
    for why, (prelude, name) in SALTED_AT_IMPORT.items():
        fails(EX03, "q4", {KEY: salted_key(prelude, name)},
              "killed right after the refund was paid", seeds=SEEDS)


def test_03_q1_keys_made_other_ways_from_the_run_and_the_order_pass():
    # a salt that is a constant of the code, a separator-free encoding, a cache that only
    # remembers what the function would compute anyway
    passes(EX03, "q1", {KEY: '''
import functools
_SALT = "orders-v1"


@functools.lru_cache(maxsize=None)
def refund_key(run_id, order_id):
    encoded = f"{len(run_id)}:{run_id}{len(order_id)}:{order_id}{_SALT}"
    return hashlib.blake2b(encoded.encode(), digest_size=20).hexdigest()
'''}, seeds=SEEDS)
    passes(EX03, "q4", {KEYED: changed(EX03, KEYED, (
        "key = refund_key(ctx.run_id, order_id)",
        "key = refund_key(*[ctx.run_id, order_id])"))}, seeds=(1,))


# What a test reads from these answers crosses as plain data ---------------------------------
def test_03_a_key_or_an_answer_of_a_class_of_its_own_is_refused():
    # a key that equals every key would pass "the same key a day later" whatever it holds
    result = fails(EX03, "q1", {KEY: '''
class Key(str):
    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


def refund_key(run_id, order_id):
    return Key("refund")
'''}, "returns a non-empty string", "the same run and order", "a fresh Python process",
        "another run", "run and order ids that look alike", seeds=(1,), only=False)
    assert all("Key (a subclass of str)" in t.message for t in result.tests), result.report()
    # an answer dict that equals the provider's answer whatever it holds
    result = fails(EX03, "q2", {ONCE: changed(EX03, ONCE, ("    return answer", '''    class Same(dict):
        def __eq__(self, other):
            return True
    return Same(answer)'''))}, "the first call pays once", seeds=(1,), only=False)
    assert "Same (a subclass of dict)" in result.report()
