"""The ``toolshop`` environment: tau-bench-shaped customer service over a stateful SQLite
shop, with JSON-Schema tools, state-hash success, collateral-damage feedback and an optional
LLM-simulated customer and optional LLM-simulated tools (:mod:`.simulation`).

Importing this package registers ``env`` ``"toolshop"`` (:class:`ToolshopEnv`) and
``verifier`` ``"toolshop"`` (:class:`ToolshopVerifier`).
"""

from sharpen.envs.toolshop.actions import RuleError
from sharpen.envs.toolshop.database import diff, snapshot, state_hash
from sharpen.envs.toolshop.env import POLICY, ToolshopEnv
from sharpen.envs.toolshop.episode import Episode, expected_state
from sharpen.envs.toolshop.generator import (
    PRESETS,
    ToolshopTaskGenerator,
    check_reference,
    resolve_knobs,
    shop_of,
)
from sharpen.envs.toolshop.goals import build_shop
from sharpen.envs.toolshop.schema import argument_errors, check_call
from sharpen.envs.toolshop.score import ToolshopVerifier
from sharpen.envs.toolshop.simulation import RESULT_SCHEMAS
from sharpen.envs.toolshop.tools import TOOLS
from sharpen.envs.toolshop.user import STOP, USER_PROMPTS, SimulatedUser, UserTurn, check_reply
from sharpen.envs.toolshop.world import Shop

__all__ = [
    "POLICY", "PRESETS", "RESULT_SCHEMAS", "STOP", "TOOLS", "USER_PROMPTS", "Episode", "RuleError",
    "Shop", "SimulatedUser", "ToolshopEnv", "ToolshopTaskGenerator", "ToolshopVerifier", "UserTurn",
    "argument_errors", "build_shop", "check_call", "check_reference", "check_reply", "diff",
    "expected_state", "resolve_knobs", "shop_of", "snapshot", "state_hash",
]
