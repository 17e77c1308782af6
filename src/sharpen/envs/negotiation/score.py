"""NegotiationVerifier: re-scores a stored negotiation trajectory offline.

It rebuilds the deal from ``trajectory.task`` (seed and knobs) and replays the stored actions
through the same :class:`~sharpen.envs.negotiation.episode.Episode` rules the environment
uses. Against the scripted opponent it recomputes every answer (so a tampered record cannot
change the verdict); against a model opponent it cannot call the model again, so it takes
the answers recorded in each step's ``info["opponent"]``. Replies the agent's parser
rejected never reached the environment (no action) and are skipped, as they were live. It
returns the same :class:`Outcome` the environment's ``outcome()`` returned.
"""

from __future__ import annotations

from typing import Any

from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import BaseVerifier
from sharpen.envs.negotiation.deal import deal_of
from sharpen.envs.negotiation.env import model_ref
from sharpen.envs.negotiation.episode import Episode, OpponentMove
from sharpen.envs.negotiation.opponents import scripted_move


@register("verifier", "negotiation")
class NegotiationVerifier(BaseVerifier):
    """Takes the same arguments as :class:`~sharpen.envs.negotiation.env.NegotiationEnv`, so
    the env's own ``{name, args}`` builds its verifier; only ``opponent`` matters here (no
    model is built)."""

    def __init__(
        self, difficulty: str = "easy", knobs: dict[str, Any] | None = None,
        opponent: str | dict[str, Any] = "scripted", critic: str | dict[str, Any] | None = None,
    ) -> None:
        self.recorded = model_ref("opponent", opponent) is not None

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The Outcome of replaying ``trajectory``'s actions (see the module doc)."""
        deal = deal_of(trajectory.task)
        ep = Episode(deal)
        for step in trajectory.steps:
            if ep.done:
                break
            if step.action is None:
                continue
            ep.agent_turn(step.action)
            if ep.pending is None:
                continue
            if self.recorded:
                record = step.info.get("opponent")
                move = (OpponentMove.model_validate(record) if record is not None else
                        OpponentMove(kind="error", error="no opponent answer was recorded"))
            else:
                move = scripted_move(deal, ep, ep.pending)
            ep.opponent_turn(move)
        return ep.outcome()
