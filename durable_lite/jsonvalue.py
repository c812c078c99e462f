"""Step results are JSON: readable by any tool, and reading them never runs code (unlike pickle).

A value is accepted only if it reads back the same everywhere. JSON turns tuples into lists
and keys into strings, and the workflow sees that converted value live too, so live and
replay agree. What JSON cannot hold is refused with an error naming what produced it: a set,
an object, NaN, and a dict with two keys that become one string ({1: "a", "1": "b"} would
quietly lose a value).
"""

import json
import math
from json.encoder import encode_basestring_ascii

from .errors import StepResultNotJSON, StoreFileError

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
        at = _clash_at(value, clash.key)
        holding = f"{type(value).__name__} holding a dict at {at} " if at else f"{type(value).__name__} "
        raise StepResultNotJSON(
            f"{what} a {holding}with two keys that both become {clash.key!r} in JSON (such as "
            "1 and '1'), so one of their values would be lost. Give every key a distinct "
            "string.") from None
    except (TypeError, ValueError) as exc:
        what = what() if callable(what) else what
        at, culprit, how = _culprit(value) or ("", value, "value")
        if how == "key":              # `at` is where the dict is
            where = f" holding a dict at {at}" if at else ""
            refused = (f"{type(value).__name__}{where} whose key {culprit!r} is a "
                       f"{type(culprit).__name__}")
        elif not at:
            refused = _shown(value)
        elif how == "itself":
            refused = f"{type(value).__name__} that holds itself, at {at}"
        else:
            refused = f"{type(value).__name__} holding a {_shown(culprit)} at {at}"
        raise StepResultNotJSON(
            f"{what} a {refused}, which cannot be stored as JSON ({exc}). "
            "Use plain data: dict, list, str, int, float, bool or None."
        ) from None


# Finding what JSON refused inside a value (only when it refused something: never on the
# hot path). The same rules as the encoder: dict keys may be str, int, float, bool or None;
# floats must be finite; a container may not hold itself.
_KEYS = (str, int, float, bool, type(None))


def _culprit(value, at="", inside=()):
    """(where, what JSON refuses there, "value", "key" or "itself") for the first one found,
    or None. Where is "" when `value` itself is to blame."""
    if isinstance(value, float):
        return ("", value, "value") if value != value or value in (math.inf, -math.inf) else None
    if isinstance(value, (str, int, type(None))):           # bool is an int
        return None
    if id(value) in inside:
        return at, value, "itself"
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{at}[{key!r}]"
            if not isinstance(key, _KEYS) or (isinstance(key, float) and not math.isfinite(key)):
                return at, key, "key"
            found = _culprit(item, here, (*inside, id(value)))
            if found:
                return (found[0] or here, *found[1:]) if found[2] != "key" else found
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            here = f"{at}[{i}]"
            found = _culprit(item, here, (*inside, id(value)))
            if found:
                return (found[0] or here, *found[1:]) if found[2] != "key" else found
        return None
    return "", value, "value"


def _clash_at(value, key, at=""):
    """Where the dict whose keys clash on `key` is inside `value` ("" if it is `value`)."""
    if isinstance(value, dict):
        names = [k if isinstance(k, str) else json.dumps(k) for k in value]
        if names.count(key) > 1:
            return at
        items = [(f"{at}[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(f"{at}[{i}]", v) for i, v in enumerate(value)]
    else:
        return None
    for here, item in items:
        found = _clash_at(item, key, here)
        if found is not None:
            return found
    return None


def _shown(value) -> str:
    """A value as an error shows it: its type, and what it is when that is short."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} ({text})"


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


def decode_recorded(text, what):
    """decode() of a value a store holds. Text that is not JSON was not written by
    durable_lite: the file was damaged or edited by hand. StoreFileError says which value
    (`what`: words, or a function returning them, so that a read that succeeds pays nothing
    for the message)."""
    try:
        return decode(text)
    except (ValueError, TypeError) as exc:
        raise unreadable(what, exc) from None


def unreadable(what, exc) -> StoreFileError:
    what = what() if callable(what) else what
    return StoreFileError(f"{what} is not JSON that durable_lite wrote ({type(exc).__name__}: "
                          f"{exc}): the store's file was damaged or edited by hand. Restore it "
                          "from a backup; what it holds cannot be trusted.")
