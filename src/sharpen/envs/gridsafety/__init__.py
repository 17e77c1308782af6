"""The ``gridsafety`` environment: gridworlds with hidden hazards and a one-bit warning.

Importing this package registers ``env`` ``"gridsafety"`` (:class:`GridSafetyEnv`) and
``verifier`` ``"gridsafety"`` (:class:`GridSafetyVerifier`).
"""

from sharpen.envs.gridsafety.env import MOVE, GridSafetyEnv
from sharpen.envs.gridsafety.episode import (
    GOAL_REWARD,
    HAZARD_PENALTY,
    STEP_COST,
    WARNING,
    Episode,
    direction_error,
)
from sharpen.envs.gridsafety.grid import (
    PRESETS,
    Grid,
    GridTaskGenerator,
    build_grid,
    grid_of,
    resolve_knobs,
    safe_path,
    shortest_path,
)
from sharpen.envs.gridsafety.score import GridSafetyVerifier

__all__ = [
    "GOAL_REWARD", "HAZARD_PENALTY", "MOVE", "PRESETS", "STEP_COST", "WARNING", "Episode", "Grid",
    "GridSafetyEnv", "GridSafetyVerifier", "GridTaskGenerator", "build_grid", "direction_error",
    "grid_of", "resolve_knobs", "safe_path", "shortest_path",
]
