"""The ``opro`` baseline: OPRO's meta-prompt (Yang et al., "Large Language Models as
Optimizers").

The prompt lists the ``top_k`` best archived texts of one component with their validation
scores in *ascending* order (the best last, next to the request), plus the task text of up
to ``exemplars`` training tasks of the minibatch, and asks for a new text that scores
higher. There are no traces and no feedback: the only signal is the score of earlier texts
(with ``diagnosis: true``, also how many of the minibatch's failures each built-in detector
flagged: :mod:`sharpen.improvement.diagnosis`).
The child is built on the archive's best candidate (not the engine's Pareto parent), with
``parents = [best]``; the engine still gates it against the parent it drew.
"""

from __future__ import annotations

from sharpen.core.registry import register
from sharpen.improvement.candidate import Candidate
from sharpen.improvement.diagnosis import render_diagnosis
from sharpen.improvement.proposal import BaseProposer, Proposal, ProposalContext
from sharpen.improvement.proposers.rewrite import (
    DEFAULT_COMPONENT,
    FORMAT,
    ask_for_edit,
    change_line,
    clip,
    tokens,
    with_component,
)

PROMPT = """Your job is to write the "{name}" text of an AI agent's system prompt.
{examples}{diagnosis}
Below are earlier {name} texts with their scores (share of tasks solved), from worst to best.

{scored}

Write a new {name} text that is different from all of the texts above and would score \
higher than all of them. {fmt}"""


def top_scored(ctx: ProposalContext, name: str, top_k: int) -> list[tuple[str, float]]:
    """The ``top_k`` best distinct texts of component ``name`` in the archive with their
    validation scores, ascending (ties: the later-accepted first, so the earliest of equal
    scores sits nearest the request)."""
    best: dict[str, Candidate] = {}
    for c in ctx.archive.candidates:
        text = c.spec.components.get(name, "")
        if text and (text not in best or c.val_score > best[text].val_score):
            best[text] = c
    ranked = sorted(best.items(), key=lambda kv: (kv[1].val_score, -kv[1].iteration))[-top_k:]
    return [(text, c.val_score) for text, c in ranked]


def _task_text(trajectory) -> str:
    return next((m.content for m in trajectory.messages if m.role == "user"), "") or ""


def opro_prompt(ctx: ProposalContext, name: str, top_k: int, exemplars: int, fmt: str = FORMAT,
                diagnosis: bool = False) -> str:
    """The meta-prompt (see the module doc), ending with ``fmt`` (how to reply); texts are
    clipped so the prompt stays within ``ctx.reflection_tokens``. With ``diagnosis``, the
    detectors' counts over the minibatch's failures follow the tasks (no trace is shown, so
    no per-trajectory finding either)."""
    scored = top_scored(ctx, name, top_k)
    share = max(200, ctx.reflection_tokens * 4 // (2 * max(1, len(scored))))
    body = "\n\n".join(f"text:\n```\n{clip(text, share)}\n```\nscore: {100 * score:.0f}%"
                       for text, score in scored)
    room = ctx.reflection_tokens - tokens(body) - 120
    tasks = [_task_text(t) for t in ctx.minibatch[:exemplars]]
    examples = ""
    if tasks and room > 100:
        each = room * 4 // len(tasks)
        examples = "\nThe agent is given tasks like these:\n\n" + "\n\n".join(
            f"Task:\n{clip(t.strip(), each)}" for t in tasks) + "\n"
    found = render_diagnosis(ctx.diagnosed()) if diagnosis else ""
    return PROMPT.format(name=name, scored=body, examples=examples, fmt=fmt,
                         diagnosis=f"\n{found}\n" if found else "")


@register("proposer", "opro")
class OproProposer(BaseProposer):
    """Args: ``component`` (default ``instructions``), ``top_k`` (scored texts shown, default
    8), ``exemplars`` (training task texts shown, default 2), ``diagnosis`` (show the
    detectors' counts over the minibatch's failures, default false)."""

    def __init__(self, component: str = DEFAULT_COMPONENT, top_k: int = 8, exemplars: int = 2,
                 diagnosis: bool = False) -> None:
        if top_k < 1:
            raise ValueError(f"opro: top_k must be at least 1, got {top_k}")
        self.component = component
        self.top_k = top_k
        self.exemplars = exemplars
        self.diagnosis = diagnosis

    async def propose(self, ctx: ProposalContext) -> Proposal:
        """A new text for ``component`` on the archive's best candidate."""
        base = ctx.archive.best()
        current = base.spec.components.get(self.component, "")
        edit = await ask_for_edit(
            ctx.llm, lambda fmt: opro_prompt(ctx, self.component, self.top_k, self.exemplars, fmt,
                                   self.diagnosis),
            name=self.component, current=current)
        child = with_component(base.spec, self.component, edit.text, parents=[base.hash])
        return Proposal(spec=child, change=change_line("opro", self.component, edit.text, edit.rationale))
