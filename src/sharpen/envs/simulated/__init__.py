"""Simulated parties an environment can take: a user (:mod:`.user`) and tools (:mod:`.tools`).

Both are chat models playing a part, with versioned prompts whose ids are recorded with
every episode. Their failures are the simulator's, never the agent's: an environment ends
such an episode with ``error_kind="user_sim"`` (excluded from success rates).
"""

from sharpen.envs.simulated.user import (
    STOP,
    USER_PROMPTS,
    UserProfile,
    UserPrompt,
    UserSimulator,
    UserTurn,
    check_reply,
    reply_schema,
)

__all__ = ["STOP", "USER_PROMPTS", "UserProfile", "UserPrompt", "UserSimulator", "UserTurn",
           "check_reply", "reply_schema"]
