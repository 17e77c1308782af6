"""The ``reflexion`` proposer: give the agent within-task retries on the environment's feedback.

It changes how the spec runs, not what it says: the child runs under the
:class:`~sharpen.agents.reflexion.ReflexionAgent` with more trials per task than its parent
(a plain tool agent counts as one), or as many with another memory, up to ``max_trials``.
Each trial count comes with each episodic-memory mode of ``memories`` — what a retry carries
over from the failed attempts: the model's own ``reflections`` on them (Reflexion proper),
the ``feedback`` alone (answer and test results), or ``none`` (a fresh sample; the failed
check only decides that there is a retry).

Order: most trials first (a retry can only add successes on a deterministic model, so the
gate sees the largest effect the user allows), then the memories in the order given —
cheapest first by default (``none``, ``feedback``, ``reflections``), so a richer memory is
only adopted when it beats the simpler one at the gate. Memories live per task and never
enter the spec's components, so this proposer's gains stay apart from any cross-task memory.
A parent with every such child tried has nothing left to propose.
"""

from __future__ import annotations

from sharpen.agents.reflexion import MEMORIES, check_result_chars
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.registry import PluginRef, register
from sharpen.improvement.proposal import BaseProposer, NothingToPropose, Proposal, ProposalContext

AGENT_ARGS = ("trials", "reflection_tokens", "memory", "result_chars", "protocol", "guidelines_top_k")
"""Reflexion agent args a child keeps when its parent ran another agent."""


def trials_of(spec: AgentSpec) -> int:
    """Attempts per task ``spec`` makes (1 unless it runs the reflexion agent)."""
    return int(spec.agent.args.get("trials", 2)) if spec.agent.name == "reflexion" else 1


@register("proposer", "reflexion")
class ReflexionProposer(BaseProposer):
    """Args: ``max_trials`` (attempts per task at most), ``reflection_tokens`` (max tokens of
    one reflection), ``memories`` (the memory modes to offer, in the order tried),
    ``result_chars`` (what of the environment's verdict a memory entry keeps, see
    :class:`~sharpen.agents.reflexion.ReflexionAgent`; ``None`` keeps the agent's default)."""

    def __init__(self, max_trials: int = 3, reflection_tokens: int = 64,
                 memories: list[str] | tuple[str, ...] = ("none", "feedback", "reflections"),
                 result_chars: int | None = None) -> None:
        unknown = [m for m in memories if m not in MEMORIES]
        if unknown or not memories:
            raise UserError(f"reflexion proposer: unknown or no memories {list(memories)!r}",
                            f"set memories to some of {', '.join(MEMORIES)}")
        self.max_trials = max_trials
        self.reflection_tokens = reflection_tokens
        self.memories = list(memories)
        if result_chars is not None:
            check_result_chars(result_chars)
        self.result_chars = result_chars

    def child(self, spec: AgentSpec, trials: int, memory: str = "reflections") -> AgentSpec:
        """``spec`` run by the reflexion agent with ``trials`` attempts per task and episodic
        memory ``memory``."""
        args = {**spec.agent.args, "trials": trials, "reflection_tokens": self.reflection_tokens,
                "memory": memory}
        if self.result_chars is not None:
            args["result_chars"] = self.result_chars
        if spec.agent.name != "reflexion":
            args = {k: v for k, v in args.items() if k in AGENT_ARGS}
        return spec.model_copy(update={"agent": PluginRef(name="reflexion", args=args), "parents": []})

    async def propose(self, ctx: ProposalContext) -> Proposal:
        """The first (trials, memory) child not yet tried (archived or rejected from any
        parent) in the order of the module doc; :class:`NothingToPropose` when every one
        was."""
        spec = ctx.parent.spec
        for trials in range(self.max_trials, max(trials_of(spec), 2) - 1, -1):
            for memory in self.memories:
                child = self.child(spec, trials, memory)
                if child.hash() != spec.hash() and child.hash() not in ctx.tried:
                    return Proposal(spec=child, change=f"reflexion with {trials} trials per task, "
                                                       f"memory {memory}")
        raise NothingToPropose(f"every trial count up to {self.max_trials} with every memory was "
                               "tried from this parent")
