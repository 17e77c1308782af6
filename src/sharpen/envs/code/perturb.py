"""The code environment's declared perturbations, applied where a problem is materialised.

- ``distractor`` — the prompt opens with an irrelevant comment (one of several wordings).
  The function, its docstring and the hidden tests are unchanged.
- ``rename`` — the entry point's parameters get other names (``arg_<k>`` style names drawn
  per variant) in its signature and everywhere the prompt's and the reference's code uses
  them; strings, comments and the docstring are left as written. The hidden tests call the
  function positionally, so they check the renamed function as they checked the original.

Both rebuild the same prompt, reference and tests in every process from the variant's
TaskSpec alone (:mod:`sharpen.envs.perturbation`), so the env and the offline verifier agree.
"""

from __future__ import annotations

import ast
import io
import random
import tokenize

from sharpen.envs.code.problem import CodeProblem

PERTURBATIONS: dict[str, str] = {
    "distractor": "the prompt opens with an irrelevant comment",
    "rename": "the entry point's parameters are renamed (signature and code; tests unchanged)",
}
"""Name -> what it changes (``CodeEnv.perturbations``)."""

_REMARKS = (
    "# Note: this file is part of an internal utilities package.",
    "# Reminder: the team meeting moved to Thursday afternoon.",
    "# The previous implementation of this helper was lost in a refactor.",
    "# Style: keep lines under 100 characters where you can.",
    "# Unrelated: the build server is being migrated this week.",
)
_STEMS = ("value", "item", "data", "arg", "inp", "param")


def perturb_problem(problem: CodeProblem, name: str, rng: random.Random) -> CodeProblem:
    """``problem`` under perturbation ``name`` (one of :data:`PERTURBATIONS`)."""
    if name == "distractor":
        remark = rng.choice(_REMARKS) + "\n"
        reference = None if problem.reference is None else remark + problem.reference
        return problem.model_copy(update={"prompt": remark + problem.prompt,
                                          "reference": reference})
    if name == "rename":
        mapping = _renaming(problem, rng)
        reference = None if problem.reference is None else _rename(problem.reference, mapping)
        return problem.model_copy(update={"prompt": _rename(problem.prompt, mapping),
                                          "reference": reference})
    raise ValueError(f"unknown code perturbation {name!r}")


def _parameters(prompt: str, entry_point: str) -> list[str]:
    """The parameter names of ``entry_point``'s ``def`` in ``prompt``."""
    for node in ast.walk(ast.parse(prompt)):
        if isinstance(node, ast.FunctionDef) and node.name == entry_point:
            a = node.args
            return [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    return []


def _renaming(problem: CodeProblem, rng: random.Random) -> dict[str, str]:
    """Old parameter name -> a fresh one that no name token of the prompt or reference uses."""
    used = _names(problem.prompt) | _names(problem.reference or "")
    stem = rng.choice(_STEMS)
    out: dict[str, str] = {}
    k = rng.randrange(10)
    for old in _parameters(problem.prompt, problem.entry_point):
        while f"{stem}_{k}" in used:
            k += 1
        out[old] = f"{stem}_{k}"
        used.add(out[old])
    return out


def _names(source: str) -> set[str]:
    return {t.string for t in _tokens(source) if t.type == tokenize.NAME}


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(source).readline))


def _rename(source: str, mapping: dict[str, str]) -> str:
    """``source`` with every name token in ``mapping`` renamed, except attribute names
    (after a dot) and keyword arguments of other calls (before ``=`` inside brackets);
    strings and comments are untouched. Token positions are kept, so only the renamed
    spans change."""
    if not mapping:
        return source
    tokens = _tokens(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []
    depth = 0
    for i, t in enumerate(tokens):
        if t.type == tokenize.OP and t.string in "([{":
            depth += 1
        elif t.type == tokenize.OP and t.string in ")]}":
            depth -= 1
        if t.type != tokenize.NAME or t.string not in mapping:
            continue
        before = tokens[i - 1].string if i else ""
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if before == "." or (depth and after == "=" and before in ("(", ",")
                             and not _in_def(tokens, i)):
            continue
        edits.append((t.start[0], t.start[1], t.end[1], mapping[t.string]))
    for row, start, end, new in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:start] + new + line[end:]
    return "".join(lines)


def _in_def(tokens: list[tokenize.TokenInfo], i: int) -> bool:
    """Whether token ``i`` sits in a ``def``'s parameter list (a default, not a keyword
    argument): the nearest unclosed ``(`` before it follows ``def NAME``."""
    depth = 0
    for j in range(i - 1, -1, -1):
        s = tokens[j].string
        if s in ")]}":
            depth += 1
        elif s in "([{":
            if depth == 0:
                return s == "(" and j >= 2 and tokens[j - 2].string == "def"
            depth -= 1
    return False
