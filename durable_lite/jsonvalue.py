"""Step results are JSON: readable by any tool, and reading them never runs code (unlike pickle)."""

import json

from .errors import StepResultNotJSON

# One encoder for every checkpoint: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
_SCALARS = (str, int, float, bool, type(None))   # values that read back exactly as written


def encode(value, *, what) -> str:
    """Serialise `value`, or raise an error that names `what` ("step 'fetch' of run 'r-1'
    returned", "the arguments of run 'r-1' are") and the offending type. `what` may be a
    function returning that text, so the hot path never formats it."""
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        what = what() if callable(what) else what
        raise StepResultNotJSON(
            f"{what} a {type(value).__name__}, which cannot be stored as JSON ({exc}). "
            "Use plain data: dict, list, str, int, float, bool or None."
        ) from None


def decode(text):
    return None if text is None else json.loads(text)


def roundtrip(value, *, what):
    """The value as it will look on replay (tuples become lists, keys become strings).

    The first execution returns this too, so a workflow sees the same value live and on replay.
    """
    text = encode(value, what=what)
    if type(value) in _SCALARS:
        return text, value
    return text, json.loads(text)
