"""What a failed test case says: the call, what it returned, what was expected, or the error.

``last`` is the candidate proxy's record of its latest call, ``(args, kwargs, result)``, with
``result`` one of the markers :data:`NO_RESULT` (no answer came) or :data:`RAISED`.
"""

from __future__ import annotations

import ast

from .plan import clip

NO_RESULT = object()
RAISED = object()
SAFE_CALLS = {"list", "tuple", "set", "frozenset", "dict", "float", "int", "str", "bool",
              "sorted", "abs", "round", "len", "bytes"}
"""Calls allowed in an expected value that is evaluated to be shown (never the candidate)."""


def short(value, limit=120):
    """``repr(value)`` cut to ``limit`` characters."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - plain values only, but never crash on a repr
        text = "<unprintable>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_call(param, last):
    """``candidate(1, 2)`` for the latest call, clipped."""
    if last is None:
        return "candidate()"
    args, kwargs, _ = last
    parts = [short(a, 60) for a in args] + ["%s=%s" % (k, short(v, 40)) for k, v in kwargs.items()]
    return clip("%s(%s)" % (param, ", ".join(parts)), 160)


def last_call_note(param, last):
    """``candidate(1, 2) returned -1``, or ``None`` when the latest call gave no value."""
    if last is None or last[2] is NO_RESULT or last[2] is RAISED:
        return None
    return "%s returned %s" % (describe_call(param, last), short(last[2]))


def assert_message(exc, node, ns, param, last):
    """Why an ``assert`` failed: the call, its result and the expected value when they can be
    found, plus the assertion's own message."""
    failing = None
    if node is not None:
        line = None
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "<test>":
                line = tb.tb_lineno
            tb = tb.tb_next
        asserts = [n for n in ast.walk(node) if isinstance(n, ast.Assert)]
        failing = next((a for a in asserts if a.lineno == line), None)
        if failing is None and len(asserts) == 1:
            failing = asserts[0]
    parts = []
    note = last_call_note(param, last)
    expected = expected_value(failing, ns, param) if failing is not None else None
    if note and expected is not None:
        parts.append("%s, expected %s" % (note, short(expected[0])))
    elif note:
        parts.append(note)
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - the message may come from a program's value
        text = ""
    if text:
        parts.append("assertion message: " + text)
    if not parts:
        parts.append("assertion failed")
    return "; ".join(parts)


def expected_value(assert_node, ns, param):
    """``(X,)``, the value the candidate's result was compared with in ``assert cand(...) == X``,
    or ``None`` when there is no such value or it is not safe to evaluate."""
    test = assert_node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Eq, ast.Is))):
        return None
    left, right = test.left, test.comparators[0]

    def is_call(n):
        return isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == param

    other = right if is_call(left) else left if is_call(right) else None
    if other is None:
        return None
    for n in ast.walk(other):
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name)
                                            and n.func.id in SAFE_CALLS):
            return None
        if isinstance(n, ast.Name) and n.id == param:
            return None
    try:
        return (eval(compile(ast.Expression(other), "<expected>", "eval"), ns),)
    except Exception:  # noqa: BLE001 - only decorates the message
        return None


def other_message(exc, param, last):
    """``TypeName: message`` of any other exception, with the latest call's result."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - the message may come from a program's value
        text = type(exc).__name__
    note = last_call_note(param, last)
    return text + (" (%s)" % note if note else "")
