"""Step results are JSON: readable by any tool, and reading them never runs code (unlike pickle).

A value is accepted only if it reads back the same everywhere. JSON turns tuples into lists
and keys into strings, and the workflow sees that converted value live too, so live and
replay agree. What JSON cannot hold is refused with an error naming what produced it: a set,
an object, NaN, and a dict with two keys that become one string ({1: "a", "1": "b"} would
quietly lose a value).
"""

import json
from json.encoder import encode_basestring_ascii

from .errors import StepResultNotJSON

# One encoder for every checkpoint: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
_SCALARS = (str, int, float, bool, type(None))   # values that read back exactly as written


class _KeysClash(ValueError):
    def __init__(self, key):
        super().__init__(key)
        self.key = key


def _one_value_per_key(pairs):
    """Build a decoded object, refusing a key that appears twice in the JSON text."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        raise _KeysClash(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_one_value_per_key)


def roundtrip(value, *, what):
    """(JSON text, the value as it will look on replay): tuples become lists, keys strings.

    The first execution returns this value too, so a workflow sees the same value live and
    on replay. `what` says what produced the value ("step 'fetch' of run 'r-1' returned");
    it may be a function returning that text, so the hot path never formats it.
    """
    kind = type(value)
    if kind is str:                   # the most common results, written as json.dumps would
        return encode_basestring_ascii(value), value
    if kind is int:
        return int.__repr__(value), value
    try:
        text = _ENCODER.encode(value)
        if kind in _SCALARS:
            return text, value
        return text, _DECODER.decode(text)
    except _KeysClash as clash:
        what = what() if callable(what) else what
        raise StepResultNotJSON(
            f"{what} a {type(value).__name__} with two keys that both become {clash.key!r} in "
            "JSON (such as 1 and '1'), so one of their values would be lost. Give every key "
            "a distinct string.") from None
    except (TypeError, ValueError) as exc:
        what = what() if callable(what) else what
        shown = f"{type(value).__name__} ({value!r})" if type(value) is float else type(value).__name__
        raise StepResultNotJSON(
            f"{what} a {shown}, which cannot be stored as JSON ({exc}). "
            "Use plain data: dict, list, str, int, float, bool or None."
        ) from None


def encode(value, *, what) -> str:
    """The JSON text of `value`, or StepResultNotJSON naming `what` and the offending type."""
    return roundtrip(value, what=what)[0]


# Replay decodes every checkpoint of a run. json.loads checks for a str and for whitespace
# around the value before its C scanner runs; what we wrote has none, so call the scanner
# directly, and leave anything it does not read whole to json.loads (and its error message).
_scan = json.JSONDecoder().scan_once


def decode(text):
    if text is None:
        return None
    try:
        value, end = _scan(text, 0)
        if end == len(text):
            return value
    except StopIteration:
        pass
    return json.loads(text)
