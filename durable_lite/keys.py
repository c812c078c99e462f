"""Idempotency keys derived only from stable inputs.

A key made from the run id and what the call is about is the same on every retry, replay
and process. A key made from the clock or a random number is new every time, so a provider
cannot recognise the second attempt as a repeat.
"""

import hashlib
import json


def derive_key(run_id: str, *parts) -> str:
    material = json.dumps([run_id, *parts], separators=(",", ":"), default=str)
    return "idem-" + hashlib.sha256(material.encode()).hexdigest()[:32]
