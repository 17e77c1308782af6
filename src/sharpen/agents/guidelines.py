"""Retrieval of the rules relevant to one task from a ``guidelines`` component.

A rules component (written by the ``guidelines`` proposer, or by hand) holds one rule per
line as ``- text``, under optional header lines. An agent built with ``guidelines_top_k``
puts only the ``k`` rules most relevant to the task into its prompt, so the memory can grow
without crowding the context of a small model.

Relevance is BM25 (k1 = 1.2, b = 0.75) of the task's words against each rule, with the rules
themselves as the collection: a word most rules share counts little, a rare word the rule
and the task share counts a lot. Ties keep the component's order, so the choice is
deterministic; the chosen rules keep their order too.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from sharpen.core.errors import UserError

COMPONENT = "guidelines"
"""The component name agents select rules from."""

_K1, _B = 1.2, 0.75
_WORD = re.compile(r"[a-z0-9_]+")
_STOP = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "has", "have",
    "if", "in", "is", "it", "its", "not", "of", "on", "or", "so", "than", "that", "the", "then",
    "there", "these", "this", "to", "was", "were", "when", "which", "while", "with", "you", "your",
))


def words(text: str) -> list[str]:
    """Lower-case content words of ``text``, a plural ``s`` taken off (``lists`` → ``list``)."""
    out = []
    for w in _WORD.findall(text.lower()):
        if w in _STOP or len(w) < 2:
            continue
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def check_top_k(k: int | None) -> int | None:
    """``k`` when it is ``None`` or a positive integer, else a :class:`UserError`."""
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise UserError(f"guidelines_top_k must be a positive integer, got {k!r}",
                        "set agent args guidelines_top_k: 3, or leave it out to keep every rule")
    return k


def _is_rule(line: str) -> bool:
    return line.lstrip().startswith(("- ", "* "))


def rule_scores(rules: list[str], task_prompt: str) -> list[float]:
    """BM25 score of each rule for ``task_prompt`` (see the module doc)."""
    docs = [Counter(words(r)) for r in rules]
    if not docs:
        return []
    query = set(words(task_prompt))
    avg = sum(sum(d.values()) for d in docs) / len(docs) or 1.0
    df = Counter(w for d in docs for w in d)
    n = len(docs)
    scores = []
    for d in docs:
        length = sum(d.values())
        s = 0.0
        for w in query & d.keys():
            idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
            tf = d[w]
            s += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / avg))
        scores.append(s)
    return scores


def select_guidelines(rules_text: str, task_prompt: str, k: int) -> str:
    """``rules_text`` with only its ``k`` rules most relevant to ``task_prompt`` (header
    lines kept, order kept; unchanged when it has ``k`` rules or fewer)."""
    lines = rules_text.splitlines()
    rule_idx = [i for i, line in enumerate(lines) if _is_rule(line)]
    if len(rule_idx) <= k:
        return rules_text
    scores = rule_scores([lines[i].lstrip()[2:] for i in rule_idx], task_prompt)
    ranked = sorted(range(len(rule_idx)), key=lambda j: (-scores[j], j))
    keep = {rule_idx[j] for j in ranked[:max(k, 0)]}
    return "\n".join(line for i, line in enumerate(lines) if not _is_rule(line) or i in keep)
