"""The ``evolve`` proposer: GEPA-style reflective mutation of one named component, and merge
of two lineages.

**Mutation.** Each iteration picks one component of the parent's AgentSpec — round-robin over
``components`` (default: the parent's own components, in order) by engine iteration — and
shows the proposer LLM its current text, the parent's traces on the *training* minibatch with
the environment's feedback (:func:`~sharpen.improvement.proposal.reflective_dataset`), and the
parent's rejection log, so the same rejected change is not tried again (with ``diagnosis:
true``, also what the built-in detectors found in the failures shown:
:mod:`sharpen.improvement.diagnosis`). The whole prompt is
kept within ``ctx.reflection_tokens``. The reply — a JSON edit when the model constrains
decoding, else a fenced block — becomes the component's new text (see
:mod:`~sharpen.improvement.proposers.rewrite` for the checks). A component the spec
does not have yet (``components: [guidelines]``) starts empty.

**Merge.** With probability ``merge_prob``, when the archive's Pareto front holds two
candidates A and B, neither an ancestor of the other, that share an ancestor C (the most
recent common one), the child takes per component the text that changed from C — B's when
only B changed it, A's when only A did, and the one of the higher validation score when both
did — with ``parents = [A, B]``. A merge needs no LLM call. Each pair is merged at most once
(remembered in the proposer's checkpointed state). Parent selection from the Pareto front is
the engine's (:meth:`~sharpen.improvement.candidate.Archive.select_parent`).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import register
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.diagnosis import render_diagnosis
from sharpen.improvement.proposal import BaseProposer, Proposal, ProposalContext, reflective_dataset
from sharpen.improvement.proposers.rewrite import (
    FORMAT,
    ask_for_edit,
    change_line,
    clip,
    rejection_lines,
    tokens,
    with_component,
)

MIN_TRACE_TOKENS = 200
"""Traces get at least this many tokens even when the rest of the prompt is long."""

PROMPT = """Here is how an AI agent did on some tasks, and the feedback it got:

{traces}{diagnosis}
{rejected}
This is the agent's current "{name}" text:
```
{current}
```

Write an improved {name} text for the agent: keep what helped, and add short general advice \
that would have avoided the failures above (no answers to these particular tasks). {fmt}"""

REJECTED = """
Changes already tried that did NOT help (do not propose them again):
{lines}
"""


def evolve_prompt(ctx: ProposalContext, name: str, current: str, fmt: str = FORMAT,
                  diagnosis: bool = False) -> str:
    """The reflection prompt for component ``name`` (see the module doc), ending with ``fmt``
    (how to reply), within ``ctx.reflection_tokens`` (the traces get what the rest leaves);
    with ``diagnosis``, the detectors' findings follow the traces
    (:func:`~sharpen.improvement.diagnosis.render_diagnosis`, each shown failure by its
    example number)."""
    log = rejection_lines(ctx.rejected)
    rejected = REJECTED.format(lines=log) if log else ""
    shown = clip(current, 2000) if current else "(empty)"
    order = sorted(ctx.minibatch, key=lambda t: bool(t.outcome and t.outcome.success))  # as shown
    found = render_diagnosis(ctx.diagnosed(), [(f"Example {i}", t) for i, t in enumerate(order, 1)]) \
        if diagnosis else ""
    rest = PROMPT.format(name=name, current=shown, traces="", rejected=rejected, fmt=fmt,
                         diagnosis=f"\n\n{found}" if found else "")
    budget = max(MIN_TRACE_TOKENS, ctx.reflection_tokens - tokens(rest))
    traces = reflective_dataset(ctx.minibatch, budget)
    if found:  # only the examples that fit the budget are named
        kept = [(f"Example {i}", t) for i, t in enumerate(order, 1) if f"### Example {i}\n" in traces]
        found = render_diagnosis(ctx.diagnosed(), kept)
    return PROMPT.format(name=name, current=shown, traces=traces, rejected=rejected, fmt=fmt,
                         diagnosis=f"\n\n{found}" if found else "")


def _changed(spec: AgentSpec, base: AgentSpec, name: str) -> bool:
    return spec.components.get(name) != base.components.get(name)


def merge_specs(a: Candidate, b: Candidate, ancestor: Candidate) -> tuple[AgentSpec, list[str]]:
    """The merge of ``a`` and ``b`` over their common ``ancestor``, and which components came
    from ``b`` (the rest are ``a``'s or unchanged). Everything other than components (model,
    agent, params, limits) is the higher-scoring candidate's."""
    first = a if a.val_score >= b.val_score else b
    names = list(dict.fromkeys([*ancestor.spec.components, *a.spec.components, *b.spec.components]))
    components: dict[str, str] = {}
    from_b: list[str] = []
    for name in names:
        a_changed, b_changed = _changed(a.spec, ancestor.spec, name), _changed(b.spec, ancestor.spec, name)
        if a_changed and b_changed:
            pick = first
        elif b_changed:
            pick = b
        else:
            pick = a
        text = pick.spec.components.get(name)
        if text is not None:
            components[name] = text
        if pick is b and b_changed:
            from_b.append(name)
    spec = first.spec.model_copy(update={"components": components, "parents": [a.hash, b.hash]})
    return spec, from_b


def merge_pairs(archive: Archive) -> list[tuple[Candidate, Candidate, Candidate]]:
    """Every (A, B, common ancestor) of two front candidates neither of which descends from
    the other, in archive order; the ancestor is the most recently accepted common one."""
    order = {c.hash: i for i, c in enumerate(archive.candidates)}
    front = sorted(archive.front(), key=order.__getitem__)
    out = []
    for ha, hb in combinations(front, 2):
        anc_a, anc_b = archive.ancestors(ha), archive.ancestors(hb)
        if ha in anc_b or hb in anc_a:
            continue
        common = anc_a & anc_b
        if common:
            out.append((archive.get(ha), archive.get(hb), archive.get(max(common, key=order.__getitem__))))
    return out


@register("proposer", "evolve")
class EvolveProposer(BaseProposer):
    """Args: ``components`` (names to evolve, round-robin; default all of the parent's),
    ``merge_prob`` (chance per iteration of trying a merge first, default 0.2), ``diagnosis``
    (show the detectors' findings on the minibatch's failures after the traces, default
    false)."""

    def __init__(self, components: list[str] | None = None, merge_prob: float = 0.2,
                 diagnosis: bool = False) -> None:
        if components is not None and not components:
            raise ValueError("evolve: components must name at least one component")
        if not 0.0 <= merge_prob <= 1.0:
            raise ValueError(f"evolve: merge_prob must be within [0, 1], got {merge_prob}")
        self.components = list(components) if components else None
        self.merge_prob = merge_prob
        self.diagnosis = diagnosis
        self.merged: list[list[str]] = []
        """Pairs (sorted hashes) already merged, so a merge is never proposed twice."""

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the pairs already merged."""
        return {"merged": [list(p) for p in self.merged]}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state`."""
        self.merged = [list(p) for p in state.get("merged", [])]

    def component(self, ctx: ProposalContext) -> str:
        """The component this iteration changes (round-robin by iteration)."""
        names = self.components or list(ctx.parent.spec.components) or ["instructions"]
        return names[(ctx.iteration - 1) % len(names)]

    async def propose(self, ctx: ProposalContext) -> Proposal:
        """A merge (see the module doc) when one is drawn and possible, else a reflective
        mutation of one component."""
        if self.merge_prob > 0 and ctx.rng.random() < self.merge_prob:
            merged = self.merge(ctx.archive)
            if merged is not None:
                return merged
        name = self.component(ctx)
        current = ctx.parent.spec.components.get(name, "")
        edit = await ask_for_edit(ctx.llm,
                                  lambda fmt: evolve_prompt(ctx, name, current, fmt, self.diagnosis),
                                  name=name, current=current)
        return Proposal(spec=with_component(ctx.parent.spec, name, edit.text),
                        change=change_line("evolve", name, edit.text, edit.rationale))

    def merge(self, archive: Archive) -> Proposal | None:
        """A merge of the first pair not merged before whose child is new, or ``None``."""
        for a, b, anc in merge_pairs(archive):
            key = sorted([a.hash, b.hash])
            if key in self.merged:
                continue
            spec, from_b = merge_specs(a, b, anc)
            if spec.hash() in (a.hash, b.hash) or archive.has(spec.hash()):
                continue  # one side's changes hold the other's: nothing to combine
            self.merged.append(key)
            taken = f"; {', '.join(from_b)} from {b.hash[:8]}" if from_b else ""
            return Proposal(spec=spec, change=f"merge of {a.hash[:8]} and {b.hash[:8]}{taken}")
        return None

