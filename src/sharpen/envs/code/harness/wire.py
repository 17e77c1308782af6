"""What crosses the pipe between the checker and the worker: tagged JSON of plain data only.

Values: None, bool, int, float (incl. nan/inf), str, bytes, list, tuple, dict with any literal
keys, set, frozenset. Instances of subclasses of these types are converted to the base type
through the base type's own methods, so an overridden ``__eq__`` never reaches the checker;
anything else raises :class:`Unsupported`. Nothing is ever unpickled. Stdlib only: this module
runs inside the sandbox, in both processes.
"""

from __future__ import annotations

import binascii
import json
import os

MAX_DEPTH = 200
BIG = 1 << 63


class Unsupported(Exception):
    """A value that cannot cross the RPC."""


def encode(x, depth=0):
    """Tagged JSON of a plain value; subclasses of plain types are converted first."""
    if depth > MAX_DEPTH:
        raise Unsupported("a value nested too deeply")
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is int:
        return x if -BIG < x < BIG else {"i": hex(x)}
    if t is float:
        return {"f": float.__repr__(x)}
    d = depth + 1
    if t is list:
        return {"L": [encode(v, d) for v in x]}
    if t is tuple:
        return {"T": [encode(v, d) for v in x]}
    if t is dict:
        return {"D": [[encode(k, d), encode(v, d)] for k, v in x.items()]}
    if t is set:
        return {"S": [encode(v, d) for v in x]}
    if t is frozenset:
        return {"F": [encode(v, d) for v in x]}
    if t is bytes:
        return {"B": binascii.b2a_base64(x, newline=False).decode("ascii")}
    for base, convert in (
        (int, int.__int__), (float, float.__float__), (str, str.__str__),
        (bytes, lambda v: bytes(memoryview(v))), (list, lambda v: list(list.__iter__(v))),
        (tuple, lambda v: tuple(tuple.__iter__(v))), (dict, lambda v: dict(dict.items(v))),
        (frozenset, lambda v: frozenset(frozenset.__iter__(v))),
        (set, lambda v: set(set.__iter__(v))),
    ):
        if issubclass(t, base):
            return encode(convert(x), depth)
    raise Unsupported("an unsupported type " + str(type.__dict__["__name__"].__get__(t))[:80])


def _unb64(text):
    """Strict base64 (``base64.b64decode(validate=True)`` without importing ``base64``)."""
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except TypeError:  # Python < 3.11 has no strict_mode (a fallback sandbox may run one)
        import base64

        return base64.b64decode(text.encode("ascii"), validate=True)


def decode(v, depth=0):
    """Inverse of :func:`encode`; raises ``ValueError`` on anything malformed."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    t = type(v)
    if v is None or t is bool or t is str or t is int:
        return v
    if t is dict and len(v) == 1:
        ((tag, p),) = v.items()
        d = depth + 1
        if tag == "i" and type(p) is str:
            return int(p, 16)
        if tag == "f" and type(p) is str:
            return float(p)
        if tag == "B" and type(p) is str:
            return _unb64(p)
        if type(p) is list:
            if tag == "L":
                return [decode(e, d) for e in p]
            if tag == "T":
                return tuple(decode(e, d) for e in p)
            if tag == "S":
                return {decode(e, d) for e in p}
            if tag == "F":
                return frozenset(decode(e, d) for e in p)
            if tag == "D" and all(type(kv) is list and len(kv) == 2 for kv in p):
                return {decode(k, d): decode(val, d) for k, val in p}
    raise ValueError("malformed value")


def _no_constants(name):
    raise ValueError("bare JSON constant " + name)


def loads(line):
    """Parse one JSON message; bare ``NaN``/``Infinity`` are refused (floats are tagged)."""
    return json.loads(line, parse_constant=_no_constants)


def send(fd, obj):
    """Write ``obj`` as one JSON line to ``fd`` (blocking)."""
    data = (json.dumps(obj) + "\n").encode("ascii")
    while data:
        data = data[os.write(fd, data):]
