"""Idempotency keys derived only from stable inputs.

A key made from the run id and what the call is about is the same on every retry, replay
and process. A key made from the clock or a random number is new every time, so a provider
cannot recognise the second attempt as a repeat.

The parts must be JSON values. Anything else would have to be turned into text some other
way, and that text can differ between processes: `str()` of a set follows the process's
hash seed, so the process that resumes would derive a different key than the one that
crashed, and the provider would pay twice.
"""

from . import jsonvalue


def derive_key(run_id: str, *parts) -> str:
    for i, part in enumerate(parts, 1):
        jsonvalue.encode(part, what=lambda: f"idempotency_key(...) of run {run_id!r}: part {i} is")
    material = jsonvalue.encode([run_id, *parts], what="the idempotency key material is")
    import hashlib  # on first use: it loads OpenSSL, which `import durable_lite` can do without
    return "idem-" + hashlib.sha256(material.encode()).hexdigest()[:32]
