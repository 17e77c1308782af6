"""The ``best_of_n`` baseline: random search over rewrites, with no feedback at all.

Each proposal asks the LLM for a variant of the parent's component text, sampled at
``temperature`` (> 0, so repeated asks differ). It sees neither traces nor scores; the
engine's gate and validation pass are what pick the best of the N variants the budget pays
for. Any gain another proposer shows over this one is the worth of its feedback.
"""

from __future__ import annotations

from sharpen.core.registry import register
from sharpen.improvement.proposal import BaseProposer, Proposal, ProposalContext
from sharpen.improvement.proposers.rewrite import (
    DEFAULT_COMPONENT,
    FORMAT,
    ask_for_edit,
    change_line,
    clip,
    with_component,
)

PROMPT = """Here is the "{name}" text of an AI agent's system prompt:

```
{current}
```

Write a variant of it: say the same in other words, and you may add one piece of general \
advice that could help the agent. {fmt}"""


def best_of_n_prompt(name: str, current: str, fmt: str = FORMAT) -> str:
    """The rewrite prompt for ``current`` (the text of component ``name``), ending with
    ``fmt`` (how to reply)."""
    return PROMPT.format(name=name, current=clip(current, 4000) if current else "(empty)", fmt=fmt)


@register("proposer", "best_of_n")
class BestOfNProposer(BaseProposer):
    """Args: ``component`` (default ``instructions``), ``temperature`` (of the rewrite,
    default 1.0; must be > 0)."""

    def __init__(self, component: str = DEFAULT_COMPONENT, temperature: float = 1.0) -> None:
        if temperature <= 0:
            raise ValueError(f"best_of_n: temperature must be > 0 for a random search, got {temperature}")
        self.component = component
        self.temperature = temperature

    async def propose(self, ctx: ProposalContext) -> Proposal:
        """A sampled variant of the parent's ``component``."""
        current = ctx.parent.spec.components.get(self.component, "")
        edit = await ask_for_edit(ctx.llm, lambda fmt: best_of_n_prompt(self.component, current, fmt),
                                  name=self.component, current=current, temperature=self.temperature)
        return Proposal(spec=with_component(ctx.parent.spec, self.component, edit.text),
                        change=change_line("best_of_n", self.component, edit.text, edit.rationale))
