"""JSON Schema → llama.cpp grammar, for the embedded model's constrained decoding.

llama-cpp-python converts a JSON Schema to GBNF (``json_schema_to_gbnf``), but quietly
ignores keywords it cannot express (``uniqueItems``, ``multipleOf``, ``patternProperties``, a
``minimum`` on a number, ...): a reply would then be "constrained" to less than the schema
says. :func:`unsupported_keywords` lists those, and :func:`compile_grammar` refuses a schema
that uses one — :class:`~sharpen.models.structured.UnsupportedSchema`, naming the keyword and
its place — instead of constraining to something else. Every reply is validated against the
full schema afterwards anyway (:meth:`~sharpen.models.structured.ResponseSchema.parse`).

Two details of the converter are worked around here:

* a string's ``maxLength`` becomes nested optional rules, one level per character, which
  llama.cpp's parser refuses beyond a few hundred; :func:`_fold_repetitions` rewrites them as
  GBNF's own bounded repetition ``char{0,N}``;
* a grammar llama.cpp cannot parse is reported by a NULL sampler (and a crash when it is
  used), so :func:`compile_grammar` parses it once against the model's vocabulary and raises
  instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sharpen.models.structured import ResponseSchema, UnsupportedSchema

# What llama-cpp-python's converter turns into grammar rules (0.3.x), keyword by keyword; not
# minimum/maximum, not even on an integer (0.3.36 leaves them as a TODO).
_CONSTRAINING = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "prefixItems",
    "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "pattern",
    "minLength", "maxLength",
})
# Keywords that do not constrain a value (annotations, containers of definitions).
_ANNOTATIONS = frozenset({
    "$schema", "$id", "$defs", "definitions", "title", "description", "default", "examples",
    "$comment", "readOnly", "writeOnly", "deprecated",
})
_FORMATS = frozenset({"date", "time", "date-time", "uuid"})

# The converter's string character admits raw control characters (a newline, a tab), which
# JSON forbids inside a string: replies with multi-line text did not parse. JSON's own set:
_LAX_CHAR = r'char ::= [^"\\] |'
_JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] |'

_NESTED_OPTIONAL = re.compile(r"\((?P<rule>[A-Za-z][\w-]*)(?P<more>(?: \((?P=rule))*)(?P<close>(?:\)\?)+)")


_SHAPES = frozenset({"type", "properties", "enum", "const", "$ref", "anyOf", "oneOf", "allOf",
                     "items", "prefixItems"})
"""Keywords that give a sub-schema a shape the converter can turn into rules; an ``anyOf``
branch with none of them (``{"required": ["email"]}``: a constraint on its parent) it cannot."""

_KEYWORD_PARTS = ("properties", "$defs", "definitions")
_LIST_PARTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_PARTS = ("items", "additionalProperties")


def _why_not(key: str, value: Any) -> str | None:
    """Why the grammar cannot enforce ``key: value`` (``None`` when it can)."""
    if key in _ANNOTATIONS:
        return None
    if key == "format":
        return None if value in _FORMATS else f"format {value!r}"
    if key == "pattern":  # the converter takes anchored patterns, and copies escapes as they
        # are into the grammar, where llama.cpp refuses \\d, \\s, \\. and the like
        if not (isinstance(value, str) and value.startswith("^") and value.endswith("$")):
            return f"pattern {value!r} (not anchored with ^...$)"
        return f"pattern {value!r} (regex escapes)" if "\\" in value else None
    if key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
        bare = [v for v in value if not (isinstance(v, dict) and _SHAPES & v.keys())]
        return f"{key} of bare constraints" if bare else None
    if key == "$ref" and isinstance(value, str) and not value.startswith("#"):
        return f"$ref {value!r} (not local)"
    return None if key in _CONSTRAINING else key


def unsupported_keywords(schema: Any, path: str = "") -> list[str]:
    """``keyword at /path`` for every keyword of ``schema`` the grammar cannot enforce."""
    if not isinstance(schema, dict):
        return []
    found: list[str] = []
    for key, value in schema.items():
        why = _why_not(key, value)
        if why is not None:
            found.append(f"{why} at {path or '/'}")
        elif key in _KEYWORD_PARTS and isinstance(value, dict):
            for name, sub in value.items():
                found += unsupported_keywords(sub, f"{path}/{key}/{name}")
        elif key in _LIST_PARTS and isinstance(value, list):
            for i, sub in enumerate(value):
                found += unsupported_keywords(sub, f"{path}/{key}/{i}")
        elif key in _SCHEMA_PARTS:
            found += unsupported_keywords(value, f"{path}/{key}")
    return found


def _enforceable(schema: Any) -> Any:
    """``schema`` without the keywords :func:`unsupported_keywords` reports, at any depth (a
    non-local ``$ref`` stays: without it nothing would be left to constrain)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if _why_not(key, value) is not None and key != "$ref":
            continue
        if key in _KEYWORD_PARTS and isinstance(value, dict):
            value = {name: _enforceable(sub) for name, sub in value.items()}
        elif key in _LIST_PARTS and isinstance(value, list):
            value = [_enforceable(sub) for sub in value]
        elif key in _SCHEMA_PARTS:
            value = _enforceable(value)
        out[key] = value
    return out


def _fold_repetitions(gbnf: str) -> str:
    """``(r (r (r)?)?)?`` → ``r{0,3}``: the same language, in the form llama.cpp parses for
    any length."""

    def fold(m: re.Match[str]) -> str:
        opened = 1 + m.group("more").count("(")
        closed = m.group("close").count(")?")
        if closed < opened:  # not one nest of this rule alone: leave it
            return m.group(0)
        rest = ")?" * (closed - opened)
        return f"{m.group('rule')}{{0,{opened}}}{rest}"

    return _NESTED_OPTIONAL.sub(fold, gbnf)


def schema_to_gbnf(rs: ResponseSchema) -> str:
    """The GBNF grammar of ``rs``; :class:`UnsupportedSchema` when it uses a keyword the
    grammar cannot enforce — unless ``rs.strict`` is off: then such keywords are left out of
    the grammar (the reply is validated against them afterwards)."""
    schema = rs.json_schema if rs.strict else _enforceable(rs.json_schema)
    bad = unsupported_keywords(schema)
    if bad:
        raise UnsupportedSchema(
            f"the embedded model cannot constrain decoding to schema {rs.name!r}: "
            f"{', '.join(bad[:5])}{' …' if len(bad) > 5 else ''}",
            "drop those keywords from the schema (every reply is validated against the full "
            "schema anyway), or set decoding: free",
        )
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        gbnf = json_schema_to_gbnf(json.dumps(schema))
    except (AssertionError, ValueError, KeyError, TypeError) as exc:
        raise UnsupportedSchema(
            f"the embedded model cannot constrain decoding to schema {rs.name!r}: {exc}",
            "simplify the schema (local $refs, no not/if/then), or set decoding: free",
        ) from None
    gbnf = _fold_repetitions(gbnf.replace(_LAX_CHAR, _JSON_CHAR))
    return _with_fence(gbnf) if rs.fenced else gbnf


_FENCE_RULES = (
    'root ::= json-root | fence\n'
    'fence ::= "```" [a-z0-9]* "\\n" fence-body "```"\n'
    # any text without three backticks in a row: the block ends at its closing fence
    'fence-body ::= ([^`] | "`" [^`] | "``" [^`])+\n'
)


def _with_fence(gbnf: str) -> str:
    """``gbnf`` (whose start rule is ``root``) or one fenced block of free text."""
    lines = gbnf.splitlines()
    renamed = ["json-root ::=" + line[len("root ::="):] if line.startswith("root ::=") else line
               for line in lines]
    return _FENCE_RULES + "\n".join(renamed) + "\n"


def compile_grammar(rs: ResponseSchema, model: Any) -> Any:
    """A ``llama_cpp.LlamaGrammar`` for ``rs``, checked to parse against ``model``'s
    vocabulary (a ``llama_cpp.Llama``); :class:`UnsupportedSchema` otherwise."""
    import llama_cpp

    gbnf = schema_to_gbnf(rs)
    grammar = llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(model.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
    if not sampler:
        raise UnsupportedSchema(
            f"llama.cpp refused the grammar of schema {rs.name!r} (too many repetitions? a "
            "maxLength or maxItems in the thousands)",
            "lower maxLength / maxItems in the schema, or set decoding: free",
        )
    llama_cpp.llama_sampler_free(sampler)
    return grammar
