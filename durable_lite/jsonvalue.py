"""Step results are JSON: readable by any tool, and reading them never runs code (unlike pickle)."""

import json

from .errors import StepResultNotJSON


def encode(value, *, what: str) -> str:
    """Serialise `value`, or raise an error that names `what` ("step 'fetch' of run 'r-1'
    returned", "the arguments of run 'r-1' are") and the offending type."""
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise StepResultNotJSON(
            f"{what} a {type(value).__name__}, which cannot be stored as JSON ({exc}). "
            "Use plain data: dict, list, str, int, float, bool or None."
        ) from None


def decode(text):
    return None if text is None else json.loads(text)


def roundtrip(value, *, what: str):
    """The value as it will look on replay (tuples become lists, keys become strings).

    The first execution returns this too, so a workflow sees the same value live and on replay.
    """
    text = encode(value, what=what)
    return text, json.loads(text)
