"""The ``fixed_hint`` proposer: appends one fixed sentence to a text component.

It writes without an LLM and sees no traces, so it is the smallest proposer there is: each
parent gets one child, its ``component`` (default ``instructions``) with ``hint`` appended.
A parent that already holds the hint, or whose hinted child was tried, has nothing left to
propose (:class:`NothingToPropose`, which the engine counts and does not retry). The engine
gates, evaluates and archives the child like any other proposal.
"""

from __future__ import annotations

from sharpen.improvement.proposal import (
    BaseProposer,
    NothingToPropose,
    Proposal,
    ProposalContext,
)

DEFAULT_HINT = "Check the arithmetic once more before you answer, and give the number only."


class FixedHintProposer(BaseProposer):
    """Args: ``hint`` (the sentence appended), ``component`` (default ``instructions``)."""

    def __init__(self, hint: str = DEFAULT_HINT, component: str = "instructions") -> None:
        if not hint.strip():
            raise ValueError("fixed_hint: the hint must not be empty")
        self.hint = hint.strip()
        self.component = component

    async def propose(self, ctx: ProposalContext) -> Proposal:
        """The parent with the hint appended to its component (see the module doc)."""
        parent = ctx.parent.spec
        current = parent.components.get(self.component, "")
        if self.hint in current:
            raise NothingToPropose(f"{self.component!r} already ends with the hint")
        text = f"{current.rstrip()}\n\n{self.hint}" if current.strip() else self.hint
        child = parent.model_copy(update={"components": {**parent.components, self.component: text},
                                          "parents": [ctx.parent.hash]})
        if child.hash() in ctx.tried:
            raise NothingToPropose("the hinted child of this parent was tried already")
        return Proposal(spec=child, change=f"appended the hint to {self.component!r}")
