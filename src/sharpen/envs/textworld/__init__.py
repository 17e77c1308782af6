"""The ``textworld`` environment: ALFWorld-style household text games, procedural and pure
Python (it does not use Microsoft's ``textworld`` package).

Importing this package registers ``env`` ``"textworld"`` (:class:`TextWorldEnv`) and
``verifier`` ``"textworld"`` (:class:`TextWorldVerifier`).
"""

from sharpen.envs.textworld.env import ACT, TextWorldEnv
from sharpen.envs.textworld.episode import DONE, Episode, default_max_steps
from sharpen.envs.textworld.generate import (
    PRESETS,
    TextWorldTaskGenerator,
    build_world,
    resolve_knobs,
    world_of,
)
from sharpen.envs.textworld.parse import COMMAND_HELP, normalize, parse
from sharpen.envs.textworld.rules import admissible, apply, describe_room
from sharpen.envs.textworld.score import TextWorldVerifier
from sharpen.envs.textworld.solver import solve
from sharpen.envs.textworld.world import FAMILIES, Goal, State, World

__all__ = [
    "ACT", "COMMAND_HELP", "DONE", "FAMILIES", "PRESETS", "Episode", "Goal", "State",
    "TextWorldEnv", "TextWorldTaskGenerator", "TextWorldVerifier", "World", "admissible", "apply",
    "build_world", "default_max_steps", "describe_room", "normalize", "parse", "resolve_knobs",
    "solve", "world_of",
]
