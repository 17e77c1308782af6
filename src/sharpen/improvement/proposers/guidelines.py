"""The ``guidelines`` proposer: a cross-task memory of rules (ExpeL, ACE).

Each proposal contrasts what worked with what did not: from the parent's trajectories on the
training minibatch it picks (seeded) one failure and one success of another task — or, when
the minibatch holds no success, the failure alone with its feedback — shows both trimmed to
the trace budget, and asks the LLM to edit the parent's rules with operations
(``ADD: rule``, ``EDIT 2: rule``, ``UPVOTE 1``, ``DOWNVOTE 3``, ``REMOVE 3``; see
:mod:`sharpen.improvement.memory`). Lines that are not operations are ignored; a reply that holds
none but is one rule sentence counts as ``ADD`` of it (the embedded 135M model almost never
writes the ``ADD:`` prefix, but often answers with a rule); a reply with no operation that
applies is an :class:`~sharpen.improvement.proposal.InvalidProposal`.

When the proposer's model constrains decoding
(:attr:`~sharpen.improvement.proposal.ProposerLLM.constrains`), the operations are asked for
as JSON instead (:func:`ops_schema`): a list of one to ``max_ops`` operations, each
``{"op": "ADD", "text"}``, ``{"op": "EDIT", "rule", "text"}`` or ``{"op": "UPVOTE" |
"DOWNVOTE" | "REMOVE", "rule"}`` with ``rule`` a number of a shown rule (only ADD when there
are none) and rule texts bounded so that the reply fits ``max_tokens``, and a short
``rationale``, which ends the change line. The memory's checks (too short, a repeat, copied
from the prompt, dropped at the gate) apply to either form.

The child is the parent with its ``guidelines`` component rewritten (one rule per line,
``- text``), so the spec file is self-contained and ``sharpen run --agent`` uses the rules. A
``tool`` or ``reflexion`` agent also gets ``guidelines_top_k``, so at run time only the rules most relevant to
each task enter its prompt (:func:`sharpen.agents.guidelines.select_guidelines`).

The gate teaches the memory: :meth:`GuidelinesProposer.observe` counts the rules a child
added or edited as helpful when it won and as harmful when it lost. A rule whose harmful
count exceeds its helpful count by two is dropped from every later child and cannot be added
again. The memory (all rules and counts) is the proposer's ``state()``, so a checkpoint
keeps it. Rules are per lineage — a child starts from its parent's rules, not from rules a
rejected sibling tried — and the counts are shared by all lineages.
"""

from __future__ import annotations

from typing import Any

from sharpen.agents.guidelines import COMPONENT
from sharpen.core.registry import PluginRef, register
from sharpen.core.trajectory import Trajectory
from sharpen.improvement.candidate import Candidate
from sharpen.improvement.diagnosis import render_diagnosis
from sharpen.improvement.memory import (
    MAX_RULE_CHARS,
    MIN_RULE_CHARS,
    Op,
    RuleMemory,
    bare_rule,
    clean_rule,
    normalize,
    parse_ops,
    parse_rules,
    render_rules,
)
from sharpen.improvement.proposal import (
    CHARS_PER_TOKEN,
    THINK,
    BaseProposer,
    InvalidProposal,
    Proposal,
    ProposalContext,
    describe_trajectory,
)
from sharpen.improvement.proposers.rewrite import JSON_CHARS_PER_TOKEN, one_line
from sharpen.models.structured import ResponseSchema

SYSTEM = "You write one-line rules for a coding agent."

ASK_ADD = "Reply with one line:\nADD: <the rule>"
"""The request when there are no rules yet (only ADD can apply)."""

ASK_OPS = ("Reply with one to three lines, each one of:\n"
           "ADD: <a new rule>\n"
           "EDIT <number>: <a better wording of that rule>\n"
           "UPVOTE <number>\n"
           "DOWNVOTE <number>\n"
           "REMOVE <number>")
"""The request when there are rules to edit, vote on or remove."""

JSON_ADD = ('Reply with a JSON object: "ops" is a list with one operation {"op": "ADD", "text": '
            '<the rule>}, and "rationale" says in one short sentence why the rule helps.')
"""The JSON request when there are no rules yet."""

JSON_OPS = ('Reply with a JSON object: "ops" is a list of one to three operations, each one of '
            '{"op": "ADD", "text": <a new rule>}, {"op": "EDIT", "rule": <number>, "text": <a better '
            'wording of that rule>}, {"op": "UPVOTE", "rule": <number>}, {"op": "DOWNVOTE", "rule": '
            '<number>}, {"op": "REMOVE", "rule": <number>}; "rationale" says in one short sentence why.')
"""The JSON request when there are rules to edit, vote on or remove."""

RATIONALE_CHARS = 100
"""Longest rationale of a JSON reply."""

OP_TOKENS = 12
"""Tokens of one JSON operation besides its rule text (keys, kind, number)."""

QUESTION = "What rule should the agent follow next time?"

CONTRAST = ("Current rules:\n{rules}\n\nSolved task:\n{success}\n\nFailed task:\n{failure}{diagnosis}\n\n"
            f"Compare the solved and the failed task. {QUESTION} {{ask}}")

FAILURE_ONLY = (f"Current rules:\n{{rules}}\n\nFailed task:\n{{failure}}{{diagnosis}}\n\n{QUESTION} "
                "{ask}")
"""The prompts; ``{diagnosis}`` is empty unless the proposer shows the diagnosis, so the
default prompt is what it was before diagnosis existed."""

_SEEN_FEEDBACK = ("execution", "verifier")  # already in the observations and the verdict


def ops_schema(rules: int, max_ops: int, rule_chars: int) -> ResponseSchema:
    """The schema of a JSON reply (see the module doc) for ``rules`` shown rules, at most
    ``max_ops`` operations and rule texts of at most ``rule_chars`` characters."""
    text = {"type": "string", "minLength": MIN_RULE_CHARS, "maxLength": rule_chars}
    # an enum, not minimum/maximum: the embedded model's grammar cannot bound an integer
    ref = {"enum": list(range(1, max(1, rules) + 1))}

    def op(kind: dict[str, Any], **fields: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {"op": kind, **fields},
                "required": ["op", *fields], "additionalProperties": False}

    kinds = [op({"const": "ADD"}, text=text)]
    if rules:
        kinds += [op({"const": "EDIT"}, rule=ref, text=text),
                  op({"enum": ["UPVOTE", "DOWNVOTE", "REMOVE"]}, rule=ref)]
    return ResponseSchema.of({
        "type": "object",
        "properties": {
            "ops": {"type": "array", "items": kinds[0] if len(kinds) == 1 else {"anyOf": kinds},
                    "minItems": 1, "maxItems": max_ops},
            "rationale": {"type": "string", "maxLength": RATIONALE_CHARS},
        },
        "required": ["ops", "rationale"],
        "additionalProperties": False,
    }, name="rule_ops")


def ops_of(value: Any) -> tuple[list[Op], str]:
    """The operations and rationale of a JSON reply valid against :func:`ops_schema`;
    :class:`InvalidProposal` when a rule text or the rationale holds ``<think>``."""
    rationale = " ".join(str(value.get("rationale", "")).split())
    ops = [Op(kind=o["op"], ref=o.get("rule"), text=clean_rule(str(o.get("text", ""))))
           for o in value["ops"]]
    if THINK.search(rationale) or any(THINK.search(o.text) for o in ops):
        raise InvalidProposal("the proposer's reply holds <think> reasoning")
    return ops, rationale


def _succeeded(t: Trajectory) -> bool:
    return bool(t.outcome and t.outcome.success)


def _with_feedback(t: Trajectory, limit_chars: int) -> str:
    """The trajectory for the prompt, plus feedback the trace does not already show (a
    critic's, a judge's, a person's), within ``limit_chars``."""
    notes = [f"- {f.source} {f.name}: {f.value if f.value is not None else ''} {f.rationale}".strip()
             for f in t.feedback if f.source not in _SEEN_FEEDBACK]
    extra = ("\nFeedback:\n" + "\n".join(notes))[: limit_chars // 3] if notes else ""
    return describe_trajectory(t, limit_chars - len(extra)) + extra


@register("proposer", "guidelines")
class GuidelinesProposer(BaseProposer):
    """Args: ``component`` (where the rules live, default ``guidelines``), ``top_k`` (rules a
    tool agent puts in its prompt per task; ``None`` for all), ``max_rules`` (rules in one
    spec at most), ``max_ops`` (operations applied from one reply), ``trace_tokens`` (trace
    budget of one prompt, capped by the engine's ``reflection_tokens``), ``max_tokens`` (of
    the reply), ``stop`` (stop sequences of the reply: by default it ends at its first blank
    line, since operations come in one block and small models ramble after it),
    ``bare_rule`` (take a reply that holds no operation but reads as one rule sentence as
    ``ADD`` of it: :func:`~sharpen.improvement.memory.bare_rule`), ``diagnosis`` (show what
    the built-in detectors found in the minibatch's failures and in the failed task shown:
    :func:`~sharpen.improvement.diagnosis.render_diagnosis`; default false)."""

    def __init__(self, component: str = COMPONENT, top_k: int | None = 3, max_rules: int = 8,
                 max_ops: int = 3, trace_tokens: int = 250, max_tokens: int = 160,
                 stop: list[str] | None = None, bare_rule: bool = True,
                 diagnosis: bool = False) -> None:
        self.component = component
        self.top_k = top_k
        self.max_rules = max_rules
        self.max_ops = max_ops
        self.trace_tokens = trace_tokens
        self.max_tokens = max_tokens
        self.stop = ["\n\n"] if stop is None else stop
        self.bare_rule = bare_rule
        self.diagnosis = diagnosis
        self.memory = RuleMemory()

    # -- checkpoint -------------------------------------------------------------------------

    def state(self) -> dict:
        """The memory, for the engine's checkpoint."""
        return {"memory": self.memory.model_dump(mode="json")}

    def load_state(self, state: dict) -> None:
        """Restore the memory of :meth:`state`."""
        self.memory = RuleMemory.model_validate(state.get("memory") or {})

    # -- proposing --------------------------------------------------------------------------

    def rules_of(self, candidate: Candidate) -> tuple[list[str], list[str]]:
        """``(header_lines, rules)`` of a candidate's rules component."""
        return parse_rules(candidate.spec.components.get(self.component, ""))

    def prompt(self, ctx: ProposalContext, current: list[str], json: bool = False) -> str:
        """The induction prompt: ``current`` rules numbered, one failure and (when the
        minibatch has one, of another task) one success, both trimmed, and with
        :attr:`diagnosis` the detectors' findings after the failure; it asks for JSON
        operations when ``json``, else for operation lines."""
        failures = [t for t in ctx.minibatch if not _succeeded(t)]
        if not failures:
            raise InvalidProposal("no failure on the minibatch to learn from")
        failure = ctx.rng.choice(failures)
        wins = [t for t in ctx.minibatch if _succeeded(t) and t.task.hash() != failure.task.hash()]
        success = ctx.rng.choice(wins) if wins else None
        chars = min(ctx.reflection_tokens, self.trace_tokens) * CHARS_PER_TOKEN
        rules = "\n".join(f"{i}. {r}" for i, r in enumerate(current, 1)) or "(no rules yet)"
        ask = (JSON_OPS if current else JSON_ADD) if json else (ASK_OPS if current else ASK_ADD)
        found = render_diagnosis(ctx.diagnosed(), [("The failed task", failure)]) \
            if self.diagnosis else ""
        diagnosis = f"\n\n{found}" if found else ""
        if success is None:
            return FAILURE_ONLY.format(rules=rules, failure=_with_feedback(failure, chars), ask=ask,
                                       diagnosis=diagnosis)
        return CONTRAST.format(rules=rules, success=describe_trajectory(success, chars // 2),
                               failure=_with_feedback(failure, chars // 2), ask=ask,
                               diagnosis=diagnosis)

    async def propose(self, ctx: ProposalContext) -> Proposal:
        """The parent with its rules edited by the LLM (see the module doc)."""
        spec = ctx.parent.spec
        header, parent_rules = self.rules_of(ctx.parent)
        for rule in parent_rules:
            self.memory.intern(rule)
        current = self.memory.live(parent_rules)
        if ctx.llm.constrains:
            prompt = self.prompt(ctx, current, json=True)
            value = await ctx.llm.ask_json(prompt, self.schema(len(current)), system=SYSTEM,
                                           max_tokens=self.max_tokens)
            ops, rationale = ops_of(value)
        else:  # the call of the free path as before, so a subclass's prompt() keeps working
            prompt = self.prompt(ctx, current)
            ops, rationale = await self.ask_lines(ctx, prompt), ""
        applied = self.memory.apply(ops, current, max_rules=self.max_rules, max_ops=self.max_ops,
                                    prompt=prompt)
        if not applied.done:
            raise InvalidProposal("no rule operation applies: " + "; ".join(applied.ignored)[:300])
        if applied.rules == parent_rules:
            raise InvalidProposal("the operations leave the rules unchanged: "
                                  + "; ".join(applied.done)[:300])
        components = dict(spec.components)
        text = render_rules(applied.rules, header)
        if text:
            components[self.component] = text
        else:
            components.pop(self.component, None)
        agent = spec.agent
        takes_top_k = agent.name in ("tool", "reflexion")
        if self.top_k is not None and takes_top_k and "guidelines_top_k" not in agent.args:
            agent = PluginRef(name=agent.name, args={**agent.args, "guidelines_top_k": self.top_k})
        dropped = len(parent_rules) - len(current)
        change = "rules: " + "; ".join(applied.done)
        if dropped:
            change += f"; {dropped} rule(s) dropped for failing at the gate"
        if rationale:  # last, so the operations survive the cut to 240 characters first
            change += f" — why: {one_line(rationale, 100)}"
        child = spec.model_copy(update={"components": components, "agent": agent, "parents": []})
        return Proposal(spec=child, change=change[:240])

    def schema(self, rules: int) -> ResponseSchema:
        """:func:`ops_schema` for ``rules`` shown rules, its rule texts bounded so that
        ``max_ops`` of them and the rationale fit :attr:`max_tokens` (at
        :data:`~sharpen.improvement.proposers.rewrite.JSON_CHARS_PER_TOKEN`); fewer operations
        are allowed when a rule would otherwise be cut below 60 characters."""
        room = self.max_tokens - 20 - RATIONALE_CHARS // JSON_CHARS_PER_TOKEN
        ops = max(1, self.max_ops)
        while ops > 1 and (room // ops - OP_TOKENS) * JSON_CHARS_PER_TOKEN < 60:
            ops -= 1
        chars = (room // ops - OP_TOKENS) * JSON_CHARS_PER_TOKEN
        return ops_schema(rules, ops, max(MIN_RULE_CHARS + 8, min(MAX_RULE_CHARS, chars)))

    async def ask_lines(self, ctx: ProposalContext, prompt: str) -> list[Op]:
        """The operations of a free-text reply (lines such as ``ADD: rule``; a bare rule
        sentence when :attr:`bare_rule`); :class:`InvalidProposal` when it holds none."""
        params = {"max_tokens": self.max_tokens, **({"stop": self.stop} if self.stop else {})}
        reply = await ctx.llm.ask(prompt, system=SYSTEM, **params)
        ops = parse_ops(reply)
        if not ops and self.bare_rule and (bare := bare_rule(reply)) is not None:
            ops = [Op(kind="ADD", text=bare)]
        if not ops:
            raise InvalidProposal("the reply holds no rule operation (ADD: rule, EDIT n: rule, "
                                  "UPVOTE n, DOWNVOTE n, REMOVE n)")
        return ops

    def observe(self, parent: Candidate, proposal: Proposal, accepted: bool) -> None:
        """Count the rules the child added or edited: helpful when it won its gate, harmful
        when it lost."""
        before = {normalize(r) for r in self.rules_of(parent)[1]}
        after = parse_rules(proposal.spec.components.get(self.component, ""))[1]
        for rule in after:
            if normalize(rule) not in before:
                self.memory.vote(rule, helpful=accepted)
