"""Cross-task memory of rules (ExpeL / ACE style) for the ``guidelines`` proposer.

A :class:`RuleMemory` holds every rule a proposal has put before a gate, each with a
``helpful`` and a ``harmful`` count. The proposer's LLM edits the rules of one parent with
operations written one per line::

    ADD: <a new rule>
    EDIT 2: <new wording of rule 2>
    UPVOTE 1
    DOWNVOTE 3
    REMOVE 3

Numbers refer to the rules as shown in the prompt (1-based). :func:`parse_ops` reads them
leniently (case, list markers, ``#``, the text on the line after ``ADD:``) and ignores every
other line; :func:`bare_rule` reads a reply that is just a rule sentence;
:meth:`RuleMemory.apply` drops operations that cannot apply (a number out of range, a rule
that is too short or too long, a placeholder, a repeat, text copied from the prompt, or a
rule the memory already dropped).

Counts: the gate upvotes (``helpful``) the rules a child added or edited when it wins, and
downvotes (``harmful``) them when it loses; the LLM's own UPVOTE / DOWNVOTE count the same
way. A rule whose ``harmful`` exceeds ``helpful`` by :data:`DROP_MARGIN` or more is
*dropped*: it stays in the memory (so its record is kept and ADD cannot bring it back) but
leaves the next child of any parent that holds it.

In an AgentSpec, rules live in one text component, one rule per line as ``- text``, under an
optional header line (:func:`render_rules` / :func:`parse_rules`).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

DROP_MARGIN = 2
"""``harmful - helpful`` at which a rule is dropped."""

MIN_RULE_CHARS = 12
"""Shortest rule text accepted (shorter is junk such as ``ADD: yes``)."""

MAX_RULE_CHARS = 200
"""Longest rule text accepted (a rule is one line, not an essay or a code listing)."""

RULES_HEADER = "Rules learned from earlier tasks:"
"""Header line of a rendered rules component."""

OpKind = Literal["ADD", "EDIT", "UPVOTE", "DOWNVOTE", "REMOVE"]

_OP = re.compile(
    r"^\s*(?:[-*•]\s*|\d+[.)]\s*)?\**\s*(ADD|EDIT|UPVOTE|DOWNVOTE|REMOVE)\b\**\s*"
    r"(?:(?:rule\s*)?#?\s*(\d+)\b)?\**\s*(.*)$",
    re.IGNORECASE,
)
_SEP = ":-–"
_PLACEHOLDER = re.compile(r"^<[^<>]*>$|^\[[^\[\]]*\]$|^\.\.\.$")


class Rule(BaseModel):
    """One rule and its record at the gate."""

    id: int
    """Stable id within the memory."""
    text: str
    """The rule, one line."""
    helpful: int = 0
    """Times it was in a child that won its gate, plus the LLM's upvotes."""
    harmful: int = 0
    """Times it was in a child that lost its gate, plus the LLM's downvotes."""

    @property
    def dropped(self) -> bool:
        """Whether it failed often enough to leave every later child."""
        return self.harmful - self.helpful >= DROP_MARGIN


class Op(BaseModel):
    """One parsed operation."""

    kind: OpKind
    """What to do."""
    ref: int | None = None
    """1-based number of the rule it applies to (EDIT, UPVOTE, DOWNVOTE, REMOVE)."""
    text: str = ""
    """The rule text (ADD, EDIT)."""


def _slot(op: Op) -> int:
    """The 0-based index of the rule ``op`` names (every operation but ADD names one)."""
    if op.ref is None:
        raise TypeError(f"{op.kind} needs a rule number")
    return op.ref - 1


def normalize(text: str) -> str:
    """The comparison key of a rule: lower case, single spaces, no end punctuation."""
    return re.sub(r"\s+", " ", text).strip().strip(".!;:,").strip().lower()


def clean_rule(text: str) -> str:
    """``text`` as a rule line: one line, no surrounding quotes, markers or spaces."""
    text = re.sub(r"\s+", " ", text).strip()
    text = text.strip("`\"'*").strip()
    return re.sub(r"^[-*•]\s+", "", text)


def rule_problem(text: str) -> str | None:
    """Why ``text`` cannot be a rule (``None`` when it can)."""
    if len(text) < MIN_RULE_CHARS:
        return "too short"
    if len(text) > MAX_RULE_CHARS:
        return "too long"
    if _PLACEHOLDER.match(text) or not re.search(r"[A-Za-z]{3}", text):
        return "a placeholder, not a rule"
    return None


def parse_ops(reply: str) -> list[Op]:
    """Every operation line of ``reply`` in order; other lines (prose, fences) are ignored.

    ADD and EDIT need a separator before their text (``ADD: text``, ``EDIT 2 - text``); when
    the text is not on that line, the next line is taken (small models often break the line
    after ``ADD:``). EDIT, votes and REMOVE need a number; a vote or REMOVE line may end with
    punctuation or a reason after a separator, not with more words (so prose such as
    "Remove 2 spaces" is no operation)."""
    ops: list[Op] = []
    lines = reply.splitlines()
    for i, line in enumerate(lines):
        m = _OP.match(line)
        if not m:
            continue
        kind = m.group(1).upper()
        ref = int(m.group(2)) if m.group(2) else None
        rest = m.group(3).strip()
        if kind in ("ADD", "EDIT"):
            if not rest or rest[0] not in _SEP:
                continue
            text = clean_rule(rest[1:])
            if not text and i + 1 < len(lines) and not _OP.match(lines[i + 1]) \
                    and not lines[i + 1].lstrip().startswith("```"):
                text = clean_rule(lines[i + 1])
            if kind == "ADD" and text:  # "ADD 1: text": a number the model put before the text
                ops.append(Op(kind="ADD", text=text))
            elif kind == "EDIT" and ref is not None and text:
                ops.append(Op(kind="EDIT", ref=ref, text=text))
        elif ref is not None and (not rest or rest[0] in _SEP + ".,;(!"):
            ops.append(Op.model_validate({"kind": kind, "ref": ref}))  # kind: one the regex matched
    return ops


_NOT_PROSE = re.compile(r"```|…\[|^\s*(def|import|from|return|assert|class)\b|^\W|[:?]$")
_LABEL = re.compile(r"^(task|solved task|failed task|current rules|agent|environment|verdict|rules?)\b",
                    re.IGNORECASE)


def bare_rule(reply: str) -> str | None:
    """The first line of a reply that holds no operation, when it reads as a rule — a prose
    sentence, not code, not a trace label, not a lead-in ending with a colon or a question —
    else ``None``. Small models asked for one rule often write just the rule instead of
    ``ADD: rule``; the proposer may take it as ``ADD`` (whose checks still apply)."""
    first = next((line.strip() for line in reply.splitlines() if line.strip()), "")
    text = clean_rule(first)
    if not text or _NOT_PROSE.search(text) or _LABEL.match(text) or rule_problem(text):
        return None
    return text


def parse_rules(component: str) -> tuple[list[str], list[str]]:
    """``(header_lines, rules)`` of a rules component: lines ``- text`` are rules, every
    other non-blank line is kept as header."""
    header, rules = [], []
    for line in component.splitlines():
        stripped = line.strip()
        if stripped.startswith("- ") or stripped.startswith("* "):
            text = clean_rule(stripped[2:])
            if text:
                rules.append(text)
        elif stripped:
            header.append(stripped)
    return header, rules


def render_rules(rules: list[str], header: list[str] | None = None) -> str:
    """The component text of ``rules`` (empty string for no rules)."""
    if not rules:
        return ""
    head = header if header else [RULES_HEADER]
    return "\n".join([*head, *(f"- {r}" for r in rules)])


class Applied(BaseModel):
    """What :meth:`RuleMemory.apply` did."""

    rules: list[str]
    """The child's rules, in order."""
    done: list[str] = Field(default_factory=list)
    """One short line per operation applied."""
    ignored: list[str] = Field(default_factory=list)
    """One short line per operation that could not apply, and why."""


class RuleMemory(BaseModel):
    """Every rule that reached a gate, with its counts (see the module doc)."""

    rules: list[Rule] = Field(default_factory=list)
    """Rules in order of first use."""
    next_id: int = 1
    """Id of the next new rule."""

    def find(self, text: str) -> Rule | None:
        """The rule whose text equals ``text`` up to :func:`normalize`."""
        key = normalize(text)
        return next((r for r in self.rules if normalize(r.text) == key), None)

    def intern(self, text: str) -> Rule:
        """The rule for ``text``, added with zero counts when new."""
        found = self.find(text)
        if found is not None:
            return found
        rule = Rule(id=self.next_id, text=clean_rule(text))
        self.next_id += 1
        self.rules.append(rule)
        return rule

    def vote(self, text: str, helpful: bool) -> Rule:
        """Count one vote for the rule ``text`` (interned first)."""
        rule = self.intern(text)
        if helpful:
            rule.helpful += 1
        else:
            rule.harmful += 1
        return rule

    def live(self, texts: list[str]) -> list[str]:
        """``texts`` without the rules this memory has dropped."""
        out = []
        for t in texts:
            rule = self.find(t)
            if rule is None or not rule.dropped:
                out.append(t)
        return out

    def apply(self, ops: list[Op], current: list[str], *, max_rules: int, max_ops: int,
              prompt: str = "") -> Applied:
        """Apply ``ops`` to ``current`` (the rules as numbered in the prompt), at most
        ``max_ops`` of them and never beyond ``max_rules`` rules. Votes count at once in the
        memory; ADD / EDIT / REMOVE shape the returned child rules. Numbers always refer to
        ``current``, whatever earlier operations did. A rule text found in ``prompt`` (a
        small model echoing the task or the format) is refused."""
        echo = normalize(prompt)
        slots: list[str | None] = list(current)
        added: list[str] = []
        out = Applied(rules=[])
        taken = {normalize(t) for t in current}
        for op in ops:
            if len(out.done) >= max_ops:
                out.ignored.append(f"{op.kind}: more than {max_ops} operations")
                continue
            if op.ref is not None and not 1 <= op.ref <= len(current):
                out.ignored.append(f"{op.kind} {op.ref}: no such rule")
                continue
            if op.kind in ("ADD", "EDIT"):
                why = rule_problem(op.text)
                known = self.find(op.text)
                if why is None and normalize(op.text) in taken:
                    why = "repeats a rule"
                if why is None and echo and normalize(op.text) in echo:
                    why = "copies the prompt"
                if why is None and known is not None and known.dropped:
                    why = "was dropped for failing at the gate"
                if why is not None:
                    out.ignored.append(f"{op.kind}: {op.text[:40]!r} {why}")
                    continue
                if op.kind == "ADD":
                    if len([s for s in slots if s is not None]) + len(added) >= max_rules:
                        out.ignored.append(f"ADD: already {max_rules} rules")
                        continue
                    added.append(op.text)
                else:
                    k = _slot(op)
                    if slots[k] is None:
                        out.ignored.append(f"EDIT {op.ref}: the rule was removed")
                        continue
                    taken.discard(normalize(slots[k] or ""))
                    slots[k] = op.text
                taken.add(normalize(op.text))
                out.done.append(f"{op.kind}{'' if op.ref is None else f' {op.ref}'}: {op.text}")
            elif op.kind == "REMOVE":
                k = _slot(op)
                if slots[k] is None:
                    out.ignored.append(f"REMOVE {op.ref}: already removed")
                    continue
                slots[k] = None
                out.done.append(f"REMOVE {op.ref}")
            else:
                self.vote(current[_slot(op)], helpful=op.kind == "UPVOTE")
                out.done.append(f"{op.kind} {op.ref}")
        out.rules = [s for s in slots if s is not None] + added
        return out
