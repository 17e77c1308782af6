"""The task families of :class:`~sharpen.envs.code.generator.FunctionTaskGenerator`.

A family is a one-argument function shape (``arith``: ``int -> int``; ``list``:
``list[int] -> list[int] | int``; ``string``: ``str -> str | int``) plus a catalogue of
operations. An operation is described twice from the same parameters: in words (for the
docstring the model reads) and as one Python expression over the argument (for the trusted
reference implementation), so the words and the code cannot drift apart. Every expression is
total on every input of its family (no exception for empty lists, zero or negative numbers).

Everything random takes a ``random.Random`` argument; nothing here touches the global RNG or
iterates over a ``set`` of strings, so generation is identical in every process.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Params = Callable[[random.Random], dict[str, Any]]


def _none(_: random.Random) -> dict[str, Any]:
    return {}


def _with_km1(k: int) -> dict[str, Any]:
    return {"k": k, "km1": k - 1}


def _k(low: int, high: int) -> Params:
    return lambda r: {"k": r.randint(low, high)}


@dataclass(frozen=True)
class OpTemplate:
    """One kind of operation. ``description`` and ``expr`` are ``str.format`` templates over the
    sampled params; ``expr`` also gets ``v``, the argument's name."""

    name: str
    description: str
    expr: str
    params: Params = _none
    reduces: bool = False
    """The operation ends the pipeline by turning the value into an ``int``."""


@dataclass(frozen=True)
class Op:
    """A sampled operation: its identity (``key``), words and code."""

    key: str
    description: str
    expr: str
    reduces: bool


def instantiate(t: OpTemplate, var: str, rng: random.Random) -> Op:
    """Sample ``t``'s parameters from ``rng`` and render its words and code."""
    p = t.params(rng)
    key = t.name + "(" + ",".join(f"{k}={p[k]!r}" for k in sorted(p)) + ")"
    return Op(key, t.description.format(**p), t.expr.format(v=var, **p), t.reduces)


ARITH = (
    OpTemplate("add", "add {k}", "{v} + {k}", _k(1, 20)),
    OpTemplate("sub", "subtract {k}", "{v} - {k}", _k(1, 20)),
    OpTemplate("mul", "multiply by {k}", "{v} * {k}", _k(2, 5)),
    OpTemplate("floordiv", "divide by {k}, rounding down toward negative infinity "
               "(like Python's `//`)", "{v} // {k}", _k(2, 5)),
    OpTemplate("mod", "replace it by the remainder of dividing it by {k} (like Python's `%`, "
               "so the result is between 0 and {km1})", "{v} % {k}",
               lambda r: _with_km1(r.randint(3, 10))),
    OpTemplate("abs", "take its absolute value", "abs({v})"),
    OpTemplate("neg", "negate it (flip its sign)", "-{v}"),
    OpTemplate("square", "square it (multiply it by itself)", "{v} * {v}"),
    OpTemplate("atleast", "if it is smaller than {k}, replace it by {k}", "max({v}, {k})",
               _k(-10, 30)),
    OpTemplate("atmost", "if it is larger than {k}, replace it by {k}", "min({v}, {k})",
               _k(-10, 30)),
    OpTemplate("digitsum", "replace it by the sum of the decimal digits of its absolute value",
               "sum(int(d) for d in str(abs({v})))"),
    OpTemplate("collatz", "if it is even, halve it; otherwise multiply it by 3 and add 1",
               "{v} // 2 if {v} % 2 == 0 else 3 * {v} + 1"),
    OpTemplate("revdigits", "reverse the decimal digits of its absolute value and keep its sign "
               "(120 becomes 21, -34 becomes -43)",
               "(-1 if {v} < 0 else 1) * int(str(abs({v}))[::-1])"),
)

LIST = (
    OpTemplate("gt", "keep only the elements greater than {k}",
               "[x for x in {v} if x > {k}]", _k(-5, 10)),
    OpTemplate("lt", "keep only the elements less than {k}",
               "[x for x in {v} if x < {k}]", _k(0, 15)),
    OpTemplate("even", "keep only the even elements", "[x for x in {v} if x % 2 == 0]"),
    OpTemplate("odd", "keep only the odd elements", "[x for x in {v} if x % 2 != 0]"),
    OpTemplate("addeach", "add {k} to every element", "[x + {k} for x in {v}]", _k(1, 10)),
    OpTemplate("muleach", "multiply every element by {k}", "[x * {k} for x in {v}]", _k(2, 4)),
    OpTemplate("squareeach", "square every element", "[x * x for x in {v}]"),
    OpTemplate("abseach", "replace every element by its absolute value", "[abs(x) for x in {v}]"),
    OpTemplate("reverse", "reverse the order of the elements", "{v}[::-1]"),
    OpTemplate("sortasc", "sort the elements in ascending order", "sorted({v})"),
    OpTemplate("sortdesc", "sort the elements in descending order", "sorted({v}, reverse=True)"),
    OpTemplate("dedupe", "remove repeated values, keeping only the first occurrence of each value",
               "list(dict.fromkeys({v}))"),
    OpTemplate("take", "keep only the first {k} elements (all of them if there are fewer)",
               "{v}[:{k}]", _k(1, 4)),
    OpTemplate("drop", "remove the first {k} elements (nothing is left if there are fewer)",
               "{v}[{k}:]", _k(1, 3)),
    OpTemplate("cumsum", "replace every element by the sum of itself and all elements before it "
               "(running total)", "[sum({v}[:i + 1]) for i in range(len({v}))]"),
    OpTemplate("evenpos", "keep only the elements at even positions (indexes 0, 2, 4, ...)",
               "{v}[::2]"),
    OpTemplate("rotate", "rotate the list left by {k} (the first {k} elements move to the end, "
               "in order; for a list of length n this is a rotation by {k} modulo n; an empty "
               "list stays empty)",
               "{v}[{k} % len({v}):] + {v}[:{k} % len({v})] if {v} else []", _k(1, 3)),
    OpTemplate("append", "append {k} at the end", "{v} + [{k}]", _k(0, 9)),
    OpTemplate("diffs", "replace the list by the differences of consecutive elements (each "
               "element minus the one before it); a list with fewer than 2 elements becomes empty",
               "[b - a for a, b in zip({v}, {v}[1:])]"),
    OpTemplate("sum", "the sum of the elements (0 for an empty list)", "sum({v})", reduces=True),
    OpTemplate("len", "the number of elements", "len({v})", reduces=True),
    OpTemplate("max", "the largest element, or 0 if the list is empty",
               "max({v}) if {v} else 0", reduces=True),
    OpTemplate("min", "the smallest element, or 0 if the list is empty",
               "min({v}) if {v} else 0", reduces=True),
    OpTemplate("countgt", "the number of elements greater than {k}",
               "sum(1 for x in {v} if x > {k})", _k(0, 10), reduces=True),
)

_CHARS = "aeiolnrst"
_REPL = "aeiouxz*#"


def _char(r: random.Random) -> dict[str, Any]:
    return {"c": r.choice(_CHARS)}


def _replace(r: random.Random) -> dict[str, Any]:
    c = r.choice(_CHARS)
    return {"c": c, "d": r.choice([x for x in _REPL if x != c])}


STRING = (
    OpTemplate("reverse", "reverse it", "{v}[::-1]"),
    OpTemplate("upper", "convert every lowercase letter to uppercase", "{v}.upper()"),
    OpTemplate("lower", "convert every uppercase letter to lowercase", "{v}.lower()"),
    OpTemplate("swapcase", "swap the case of every letter (lowercase becomes uppercase and "
               "uppercase becomes lowercase)", "{v}.swapcase()"),
    OpTemplate("replace", "replace every {c!r} by {d!r}", "{v}.replace({c!r}, {d!r})", _replace),
    OpTemplate("remove", "remove every {c!r}", "{v}.replace({c!r}, '')", _char),
    OpTemplate("novowels", "remove every vowel (a, e, i, o, u, lowercase or uppercase)",
               "''.join(c for c in {v} if c.lower() not in 'aeiou')"),
    OpTemplate("dedupe", "remove repeated characters, keeping only the first occurrence of each "
               "character (case-sensitive)", "''.join(dict.fromkeys({v}))"),
    OpTemplate("squeeze", "replace every run of one character repeated back to back by a single "
               "copy of it ('aabccc' becomes 'abc')",
               "''.join(c for i, c in enumerate({v}) if i == 0 or c != {v}[i - 1])"),
    OpTemplate("letters", "remove every character that is not a letter (keep the characters "
               "for which str.isalpha() is true)", "''.join(c for c in {v} if c.isalpha())"),
    OpTemplate("rotate", "rotate it left by {k} (the first {k} characters move to the end, in "
               "order; for a string of length n this is a rotation by {k} modulo n; an empty "
               "string stays empty)",
               "{v}[{k} % len({v}):] + {v}[:{k} % len({v})] if {v} else ''", _k(1, 3)),
    OpTemplate("take", "keep only the first {k} characters (all of them if it is shorter)",
               "{v}[:{k}]", _k(2, 5)),
    OpTemplate("double", "write every character twice ('ab' becomes 'aabb')",
               "''.join(c * 2 for c in {v})"),
    OpTemplate("caesar", "shift every lowercase letter {k} places forward in the alphabet, "
               "wrapping from 'z' back to 'a' (other characters stay as they are)",
               "''.join(chr((ord(c) - 97 + {k}) % 26 + 97) if 'a' <= c <= 'z' else c "
               "for c in {v})", _k(1, 5)),
    OpTemplate("sortchars", "sort its characters by Unicode code point (spaces first, then "
               "digits, then uppercase letters, then lowercase letters)", "''.join(sorted({v}))"),
    OpTemplate("spaces", "replace every space by {d!r}", "{v}.replace(' ', {d!r})",
               lambda r: {"d": r.choice("_-.")}),
    OpTemplate("strip", "remove the spaces at its start and at its end", "{v}.strip(' ')"),
    OpTemplate("len", "its length (the number of characters)", "len({v})", reduces=True),
    OpTemplate("count", "the number of times {c!r} occurs in it", "{v}.count({c!r})", _char,
               reduces=True),
    OpTemplate("vowels", "the number of vowels (a, e, i, o, u, lowercase or uppercase) in it",
               "sum(1 for c in {v} if c.lower() in 'aeiou')", reduces=True),
    OpTemplate("uppers", "the number of uppercase letters in it",
               "sum(1 for c in {v} if c.isupper())", reduces=True),
    OpTemplate("distinct", "the number of distinct characters in it (case-sensitive)",
               "len(set({v}))", reduces=True),
)

_WORDS = (
    "apple", "banana", "level", "rotor", "hello", "world", "python", "sharpen", "queue",
    "letter", "coffee", "robot", "stone", "river", "salt", "tree", "moon", "listen", "silent",
    "noon", "arena", "tools", "bottle", "seas", "train", "lemon", "ninja", "orbit",
)


def _arith_typical(r: random.Random) -> Any:
    return r.randint(1, 99)


def _arith_edges(r: random.Random) -> list[Any]:
    return [0, -1, 1, -r.randint(2, 99), r.randint(100, 999), -r.randint(100, 999)]


def _list_typical(r: random.Random) -> Any:
    xs = [r.randint(0, 20) for _ in range(r.randint(3, 7))]
    if r.random() < 0.5:
        xs.insert(r.randint(0, len(xs)), r.choice(xs))
    return xs


def _list_edges(r: random.Random) -> list[Any]:
    x = r.randint(-9, 9)
    return [[], [r.randint(-20, 20)], [r.randint(-10, 10) for _ in range(5)], [x, x, x],
            sorted((r.randint(-5, 15) for _ in range(4)), reverse=True), [0, -3, 0, 7, -3]]


def _string_typical(r: random.Random) -> Any:
    return " ".join(r.choice(_WORDS) for _ in range(r.randint(1, 3)))


def _string_edges(r: random.Random) -> list[Any]:
    return ["", r.choice("abcxyz"), r.choice(_WORDS).upper(), "MiXeD CaSe", "abc 123",
            "  " + r.choice(_WORDS) + " ", "aaabbbcca"]


@dataclass(frozen=True)
class Family:
    """A function shape: argument name and type, entry point, operations, input makers."""

    name: str
    entry_point: str
    var: str
    noun: str
    """How the docstring names the argument, e.g. ``the list of integers `nums```."""
    arg_type: str
    result_noun: str
    """What a pipeline without a reducer returns, e.g. ``the resulting list``."""
    ops: tuple[OpTemplate, ...]
    typical: Callable[[random.Random], Any]
    edges: Callable[[random.Random], list[Any]]

    @property
    def transforms(self) -> tuple[OpTemplate, ...]:
        return tuple(t for t in self.ops if not t.reduces)

    @property
    def reducers(self) -> tuple[OpTemplate, ...]:
        return tuple(t for t in self.ops if t.reduces)


FAMILIES: dict[str, Family] = {
    "arith": Family("arith", "transform_number", "n", "the integer `n`", "int", "the result",
                    ARITH, _arith_typical, _arith_edges),
    "list": Family("list", "transform_list", "nums", "the list of integers `nums`", "list[int]",
                   "the resulting list", LIST, _list_typical, _list_edges),
    "string": Family("string", "transform_text", "s", "the string `s`", "str",
                     "the resulting string", STRING, _string_typical, _string_edges),
}
"""The families by name, in the fixed order that ``family="any"`` draws from."""
