"""Simulated parties an environment can take: a user (:mod:`.user`) and tools (:mod:`.tools`).

Both are chat models playing a part, with versioned prompts whose ids are recorded with
every episode. Their failures are the simulator's, never the agent's: an environment ends
such an episode with ``error_kind="user_sim"`` (excluded from success rates).
:data:`REALISM_RUBRIC` is a rubric file with which the rubric judge scores how realistic a
simulated user was (the simulator's quality, not the agent's).
"""

from pathlib import Path

from sharpen.envs.simulated.tools import (
    ERROR_RESULT,
    TOOL_PROMPTS,
    ToolPrompt,
    ToolSimError,
    ToolSimulator,
)
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

REALISM_RUBRIC = Path(__file__).with_name("realism.yaml")
"""The rubric (YAML) of a simulated user's realism: in role, waits to be asked, consistent,
natural."""

__all__ = ["ERROR_RESULT", "REALISM_RUBRIC", "STOP", "TOOL_PROMPTS", "USER_PROMPTS", "ToolPrompt",
           "ToolSimError", "ToolSimulator", "UserProfile", "UserPrompt", "UserSimulator",
           "UserTurn", "check_reply", "reply_schema"]
