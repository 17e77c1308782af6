"""Checking a tool call's arguments against the tool's JSON Schema, with precise messages.

The validation itself is :mod:`jsonschema` (draft 2020-12, the dialect ``sharpen check``
validates tool schemas against); this module turns its :class:`~jsonschema.ValidationError`
objects into messages an agent can act on. A failing string names the expected form through
the schema's ``examples``, e.g. ``argument 'order_id' must match #W1234567; got 'W12'``.
Every problem of a call is reported, not only the first, in the order: unknown arguments,
missing ones, unmet ``anyOf`` alternatives, then each argument's problem in the order the
call gave them (one per value: a wrong type hides the rest).

Two deliberate departures from plain ``jsonschema``: ``pattern`` follows ECMA-262, which
JSON Schema specifies, so a final ``$`` does not also match before a trailing newline as
Python's does (``'#W1234567\\n'`` is not an order id); and a string schema whose pattern is
:data:`NON_BLANK` reports a blank value as ``must not be empty``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import extend

from sharpen.core.messages import ToolSpec

NON_BLANK = r"\S"
"""The ``pattern`` of a string that must hold more than white space."""

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
               dict: "object", type(None): "null"}
_RANK = {"type": 0, "enum": 1, "minLength": 2, "pattern": 3, "minItems": 2, "uniqueItems": 4}
"""Which problem of one value is reported: the first kind found, in this order (uniqueness
of an array is reported next to its items' problems)."""


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
                  ) -> Iterator[ValidationError]:
    # ECMA-262's "$" (no multiline flag) matches only at the very end; Python's "\Z" does.
    if not validator.is_type(instance, "string"):
        return
    python = re.sub(r"(?<!\\)\$$", r"\\Z", pattern)
    if not re.search(python, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = extend(Draft202012Validator, {"pattern": _ecma_pattern})


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _value_message(where: str, error: ValidationError) -> list[str]:
    """The message of ``error``, a problem of the value at ``where`` (``argument 'x'``)."""
    schema, value, kind = error.schema, error.instance, error.validator
    assert isinstance(schema, dict)
    if kind == "type" and schema.get("type") == "array":
        example = json.dumps(schema.get("items", {}).get("examples", ["..."])[:1])
        return [f"{where} must be an array of strings like {example}; got {_shown(value)} "
                f"({_kind(value)})"]
    if kind == "type":
        return [f"{where} must be a{'n' * (schema['type'][0] in 'aeiou')} {schema['type']}; "
                f"got {_shown(value)} ({_kind(value)})"]
    if kind == "enum":
        allowed = ", ".join(repr(v) for v in schema["enum"])
        return [f"{where} must be one of {allowed}; got {_shown(value)}"]
    if kind == "minLength" or (kind == "pattern" and schema["pattern"] == NON_BLANK):
        return [f"{where} must not be empty"]
    if kind == "pattern":
        form = (schema.get("examples") or [schema["pattern"]])[0]
        return [f"{where} must match {form}; got {_shown(value)}"]
    if kind == "minItems":
        n = schema["minItems"]
        return [f"{where} must hold at least {n} item{'s' * (n > 1)}; got {_shown(value)}"]
    if kind == "uniqueItems" and isinstance(value, list):
        seen: set[str] = set()
        twice = []
        for element in value:
            key = json.dumps(element, sort_keys=True, default=str)
            if key in seen:
                twice.append(f"{where} holds {_shown(element)} twice")
            seen.add(key)
        return twice
    return [f"{where}: {error.message}"]  # a keyword the toolshop schemas do not use


def _where(path: list[str | int]) -> str:
    name, *rest = path
    return f"argument '{name}'" + "".join(f" item {i}" for i in rest)


def _missing(name: str, schema: dict[str, Any]) -> str:
    example = (schema.get("examples") or schema.get("items", {}).get("examples") or [None])[0]
    kind = "array of strings" if schema.get("type") == "array" else "string"
    like = f" like {example!r}" if example is not None else ""
    if "enum" in schema:
        like = f": one of {', '.join(repr(v) for v in schema['enum'])}"
    return f"missing required argument '{name}' (a {kind}{like})"


def argument_errors(tool: ToolSpec, arguments: dict[str, Any]) -> list[str]:
    """Every way ``arguments`` break ``tool.parameters`` (empty when they fit)."""
    params = tool.parameters
    props: dict[str, Any] = params.get("properties", {})
    top: set[str] = set()
    per_value: dict[tuple[str | int, ...], ValidationError] = {}
    for error in _Validator(params).iter_errors(arguments):
        path = tuple(error.absolute_path)
        if not path:
            top.add(str(error.validator))
            continue
        best = per_value.get(path)
        if best is None or _RANK.get(str(error.validator), 9) < _RANK.get(str(best.validator), 9):
            per_value[path] = error
    errors = []
    if "additionalProperties" in top:
        takes = ", ".join(props) or "no arguments"
        errors += [f"unknown argument '{name}' ({tool.name} takes: {takes})"
                   for name in sorted(set(arguments) - set(props))]
    if "required" in top:
        errors += [_missing(name, props.get(name, {}))
                   for name in params.get("required", []) if name not in arguments]
    if "anyOf" in top:
        alternatives = [alt["required"] for alt in params["anyOf"]]
        options = ", or ".join(" and ".join(f"'{n}'" for n in alt) for alt in alternatives)
        errors.append(f"{tool.name} needs {options}")
    order = {name: i for i, name in enumerate(arguments)}

    def position(path: tuple[str | int, ...]) -> tuple[int, ...]:
        # An array's own problem (uniqueness) comes after its items' problems.
        items = [int(p) for p in path[1:]]
        return (order.get(str(path[0]), len(order)), *(items or [1 << 30]))

    for path in sorted(per_value, key=position):
        errors += _value_message(_where(list(path)), per_value[path])
    return errors


def check_call(tools: dict[str, ToolSpec], name: str, arguments: dict[str, Any]) -> str | None:
    """Why the call ``name(arguments)`` does not fit the tools' schemas, or ``None``."""
    tool = tools.get(name)
    if tool is None:
        return f"Unknown tool {name!r}. The tools are: {', '.join(tools)}."
    errors = argument_errors(tool, arguments)
    if not errors:
        return None
    return f"Invalid call of {name}: " + "; ".join(errors) + "."
