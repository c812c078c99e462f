"""What a test reads from an answer crosses as plain data.

A test compares what an answer returned with what it expects: `guess != actual`,
`got["refunds"] == held`. If the answer's value is an object of a class of its own, the
comparison is the answer's code: an `int` whose `__eq__` always says yes equals every
count, a `str` whose `__hash__` collides with every key finds itself in any set. So a test
never compares the answer's objects. It first takes a copy made of exact built-in types,

    got = plain(run_naive(folder, crash), "run_naive(folder, crash_at)")

and compares the copy. `plain` accepts None, bool, int, float, str, list, tuple (copied as
a list) and dict with str keys, nested in any way, and a set or frozenset only where the
question asks for one (`sets=True`, of None, bool, int, float or str). Anything else — a
subclass of any of these included — is refused with a `Fail` that names its type and says
a plain value is expected.

The copy is what a JSON round trip (`json.loads(json.dumps(value))`) gives, made by this
module's own code rather than by an encoder: tuples become lists, every container is new,
and only `type(x) is ...` tests are made on the answer's objects. `type()` cannot be
faked, the exact built-in types run none of the answer's code when they are compared,
hashed or iterated, and their values (numbers, strings) cannot change after the copy is
made.
"""

from .checks import Fail

SCALARS = (type(None), bool, int, float, str)
DEEPEST = 100                    # levels of nesting: any answer of the course needs < 10

_HINT = ("return a value of a built-in type (int, str, list, dict ...), not an object of a "
         "class of your own")


def plain(value, what: str = "the answer", sets: bool = False):
    """A copy of `value` made of exact built-in types (see the module's docstring), or
    `Fail`. `what` names the value in the message ("predicted_refunds('refund',
    'after_effect')"); sets: accept a set or frozenset (copied as a set)."""
    return _copy(value, what, sets, "", [])


def _copy(value, what, sets, where, inside):
    kind = type(value)
    if _one_of(kind, SCALARS):
        return value
    if len(inside) >= DEEPEST or any(value is outer for outer in inside):
        raise Fail(f"{what} returned a value that contains itself{_at(where)}, or is nested "
                   f"more than {DEEPEST} levels deep", "return plain data: a list or dict "
                   "of numbers and strings, each built anew")
    inside.append(value)
    try:
        if kind is list or kind is tuple:
            return [_copy(item, what, sets, f"{where}[{i}]", inside)
                    for i, item in enumerate(value)]
        if kind is dict:
            return _copy_dict(value, what, sets, where, inside)
        if sets and (kind is set or kind is frozenset):
            return _copy_set(value, what, where)
    finally:
        inside.pop()
    raise _refusal(value, what, where, sets)


def _copy_dict(value, what, sets, where, inside):
    copy = {}
    for key, item in value.items():
        if type(key) is not str:
            raise Fail(f"{what} returned a dict with a key of type {_described(key)}"
                       f"{_at(where)}: a plain value is expected, with str keys",
                       "use strings as the dict's keys")
        copy[key] = _copy(item, what, sets, f"{where}[{key!r}]", inside)
    return copy


def _copy_set(value, what, where):
    for item in value:
        if not _one_of(type(item), SCALARS):
            raise _refusal(item, what, f"{where} (in the set)", False)
    return set(value)


def _refusal(value, what, where, sets) -> Fail:
    accepted = "None, bool, int, float, str, list, tuple, dict" + (", set" if sets else "")
    return Fail(f"{what} returned a {_described(value)}{_at(where)}; a plain value is "
                f"expected (the checks read only exact built-in types: {accepted})", _HINT)


def _described(value) -> str:
    """"Sneaky (a subclass of int)", "Decimal": the type, and the built-in it pretends to be."""
    kind = type(value)
    built_in = next((base for base in _MRO_OF(kind) if _one_of(base, _BUILT_INS)), None)
    if built_in is not None and built_in is not kind:
        return f"{_NAME_OF(kind)} (a subclass of {built_in.__name__})"
    return _NAME_OF(kind)


_BUILT_INS = SCALARS + (list, tuple, dict, set, frozenset)
# Read through type's own descriptors: a class of the answer's can make `__name__` or
# `__mro__` a property of its metaclass, and a message must not run the answer's code.
_NAME_OF = vars(type)["__name__"].__get__
_MRO_OF = vars(type)["__mro__"].__get__


def _one_of(kind, types) -> bool:
    # By identity: `kind in types` would ask the class's metaclass, and an answer can give
    # it an `__eq__` that says yes to int.
    return any(kind is t for t in types)


def _at(where: str) -> str:
    return f" (at {where})" if where else ""
