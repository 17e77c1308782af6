"""Checking a tool call's arguments against the tool's JSON Schema, with precise messages.

The toolshop tools use a small part of JSON Schema, and this module checks exactly that
part: an ``object`` with ``properties``, ``required``, ``additionalProperties: false`` and
``anyOf`` of ``required`` sets; properties of type ``string`` (``minLength``, ``pattern``,
``enum``) or ``array`` of strings (``minItems``, ``uniqueItems``, ``items``). A failing
string names the expected form through the schema's ``examples``, e.g.
``argument 'order_id' must match #W1234567; got 'W12'``. Every problem of a call is reported,
not only the first.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sharpen.core.messages import ToolSpec

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
               dict: "object", type(None): "null"}


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _string_errors(where: str, value: Any, schema: dict[str, Any]) -> list[str]:
    """Problems of ``value`` as a string of ``schema``; ``where`` names it (``argument 'x'``)."""
    if not isinstance(value, str):
        return [f"{where} must be a string; got {_shown(value)} ({_kind(value)})"]
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(repr(v) for v in schema["enum"])
        return [f"{where} must be one of {allowed}; got {_shown(value)}"]
    if len(value) < schema.get("minLength", 0) or (schema.get("minLength") and not value.strip()):
        return [f"{where} must not be empty"]
    pattern = schema.get("pattern")
    if pattern and not re.fullmatch(pattern, value):
        form = (schema.get("examples") or [pattern])[0]
        return [f"{where} must match {form}; got {_shown(value)}"]
    return []


def _property_errors(name: str, value: Any, schema: dict[str, Any]) -> list[str]:
    where = f"argument '{name}'"
    if schema.get("type") != "array":
        return _string_errors(where, value, schema)
    items = schema.get("items", {})
    if not isinstance(value, list):
        example = json.dumps(items.get("examples", ["..."])[:1])
        return [f"{where} must be an array of strings like {example}; got {_shown(value)} "
                f"({_kind(value)})"]
    if len(value) < schema.get("minItems", 0):
        return [f"{where} must hold at least {schema['minItems']} item"
                f"{'s' * (schema['minItems'] > 1)}; got []"]
    errors = []
    for i, element in enumerate(value):
        errors.extend(_string_errors(f"{where} item {i}", element, items))
    if schema.get("uniqueItems"):
        seen: set[str] = set()
        for element in value:
            if isinstance(element, str) and element in seen:
                errors.append(f"{where} holds {element!r} twice")
            seen.add(str(element))
    return errors


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
    errors = []
    if params.get("additionalProperties") is False:
        for name in sorted(set(arguments) - set(props)):
            takes = ", ".join(props) or "no arguments"
            errors.append(f"unknown argument '{name}' ({tool.name} takes: {takes})")
    for name in params.get("required", []):
        if name not in arguments:
            errors.append(_missing(name, props[name]))
    alternatives = [alt["required"] for alt in params.get("anyOf", [])]
    if alternatives and not any(all(n in arguments for n in alt) for alt in alternatives):
        options = ", or ".join(" and ".join(f"'{n}'" for n in alt) for alt in alternatives)
        errors.append(f"{tool.name} needs {options}")
    for name, value in arguments.items():
        if name in props:
            errors.extend(_property_errors(name, value, props[name]))
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
