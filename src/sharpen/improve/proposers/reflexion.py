"""The ``reflexion`` proposer: give the agent within-task retries with verbal reflections.

It changes how the spec runs, not what it says: the child runs under the
:class:`~sharpen.agents.reflexion.ReflexionAgent` with one more trial than its parent (a
plain tool agent counts as one trial), up to ``max_trials``. The reflections live in an
episodic memory per task and never enter the spec's components, so this proposer's gains
stay apart from any cross-task memory. A parent already at ``max_trials`` has nothing left to
propose (an invalid proposal, so the engine moves on).
"""

from __future__ import annotations

from sharpen.core.registry import PluginRef, register
from sharpen.improve.proposal import InvalidProposal, Proposal, ProposalContext


@register("proposer", "reflexion")
class ReflexionProposer:
    """Args: ``max_trials`` (attempts per task at most), ``reflection_tokens`` (max tokens of
    one reflection)."""

    def __init__(self, max_trials: int = 3, reflection_tokens: int = 96) -> None:
        self.max_trials = max_trials
        self.reflection_tokens = reflection_tokens

    async def propose(self, ctx: ProposalContext) -> Proposal:
        """The parent with one more reflexion trial (see the module doc)."""
        spec = ctx.parent.spec
        args = dict(spec.agent.args)
        trials = int(args.get("trials", 2)) if spec.agent.name == "reflexion" else 1
        if trials >= self.max_trials:
            raise InvalidProposal(f"the parent already has {trials} trials (max_trials {self.max_trials})")
        args.update(trials=trials + 1, reflection_tokens=self.reflection_tokens)
        if spec.agent.name != "reflexion" and "protocol" in spec.agent.args:
            args["protocol"] = spec.agent.args["protocol"]
        child = spec.model_copy(update={"agent": PluginRef(name="reflexion", args=args), "parents": []})
        return Proposal(spec=child, change=f"reflexion with {trials + 1} trials per task")
