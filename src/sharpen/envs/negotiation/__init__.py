"""The ``negotiation`` environment: a buyer and a seller with private valuations haggle over
a price.

Importing this package registers ``env`` ``"negotiation"`` (:class:`NegotiationEnv`) and
``verifier`` ``"negotiation"`` (:class:`NegotiationVerifier`).
"""

from sharpen.envs.negotiation.critic import ModelCritic, ScriptedCritic, scripted_comment
from sharpen.envs.negotiation.deal import (
    PRESETS,
    STRATEGIES,
    Deal,
    NegotiationTaskGenerator,
    build_deal,
    deal_of,
    resolve_knobs,
)
from sharpen.envs.negotiation.env import ACCEPT, OFFER, WALK_AWAY, NegotiationEnv
from sharpen.envs.negotiation.episode import Episode, OpponentMove, action_error, parse_price
from sharpen.envs.negotiation.opponents import (
    ModelOpponent,
    ScriptedOpponent,
    parse_reply,
    scripted_counter,
    scripted_move,
)
from sharpen.envs.negotiation.reference import reference_actions, reference_plan, simulate
from sharpen.envs.negotiation.score import NegotiationVerifier

__all__ = [
    "ACCEPT", "OFFER", "PRESETS", "STRATEGIES", "WALK_AWAY", "Deal", "Episode", "ModelCritic",
    "ModelOpponent", "NegotiationEnv", "NegotiationTaskGenerator", "NegotiationVerifier",
    "OpponentMove", "ScriptedCritic", "ScriptedOpponent", "action_error", "build_deal", "deal_of",
    "parse_price", "parse_reply", "reference_actions", "reference_plan", "resolve_knobs",
    "scripted_comment", "scripted_counter", "scripted_move", "simulate",
]
