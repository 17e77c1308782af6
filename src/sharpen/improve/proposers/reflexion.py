"""The ``reflexion`` proposer: give the agent within-task retries with verbal reflections.

It changes how the spec runs, not what it says: the child runs under the
:class:`~sharpen.agents.reflexion.ReflexionAgent` with more trials than its parent (a plain
tool agent counts as one trial) — the fewest not yet tried, up to ``max_trials``. The
reflections live in an episodic memory per task and never enter the spec's components, so
this proposer's gains stay apart from any cross-task memory. A parent with every trial count
up to ``max_trials`` tried has nothing left to propose.
"""

from __future__ import annotations

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import PluginRef, register
from sharpen.improve.proposal import NothingToPropose, Proposal, ProposalContext


def trials_of(spec: AgentSpec) -> int:
    """Attempts per task ``spec`` makes (1 unless it runs the reflexion agent)."""
    return int(spec.agent.args.get("trials", 2)) if spec.agent.name == "reflexion" else 1


@register("proposer", "reflexion")
class ReflexionProposer:
    """Args: ``max_trials`` (attempts per task at most), ``reflection_tokens`` (max tokens of
    one reflection)."""

    def __init__(self, max_trials: int = 3, reflection_tokens: int = 64) -> None:
        self.max_trials = max_trials
        self.reflection_tokens = reflection_tokens

    def child(self, spec: AgentSpec, trials: int) -> AgentSpec:
        """``spec`` run by the reflexion agent with ``trials`` attempts per task."""
        args = {**spec.agent.args, "trials": trials, "reflection_tokens": self.reflection_tokens}
        if spec.agent.name != "reflexion":
            args = {k: v for k, v in args.items() if k in ("trials", "reflection_tokens", "protocol")}
        return spec.model_copy(update={"agent": PluginRef(name="reflexion", args=args), "parents": []})

    async def propose(self, ctx: ProposalContext) -> Proposal:
        """The parent with the fewest extra trials not yet tried (archived or rejected from
        any parent); :class:`NothingToPropose` when every count up to ``max_trials`` was."""
        spec = ctx.parent.spec
        for trials in range(trials_of(spec) + 1, self.max_trials + 1):
            child = self.child(spec, trials)
            if child.hash() not in ctx.tried:
                return Proposal(spec=child, change=f"reflexion with {trials} trials per task")
        raise NothingToPropose(f"every trial count up to {self.max_trials} was tried from this parent")
