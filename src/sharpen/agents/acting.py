"""Applying one action to an environment and recording it on a Step — shared by every agent."""

from __future__ import annotations

import time

from sharpen.core.feedback import Feedback
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.envs.base import Environment


def attach_feedback(feedback: list[Feedback], trajectory: Trajectory, index: int) -> list[Feedback]:
    """``feedback`` retargeted at step ``index`` of ``trajectory`` (environments only know
    their own step count, not run or trajectory ids)."""
    return [
        fb.model_copy(update={"target": fb.target.model_copy(update={
            "run_id": trajectory.run_id, "trajectory_id": trajectory.id, "step_index": index,
        })})
        for fb in feedback
    ]


async def apply_action(
    env: Environment, trajectory: Trajectory, step: Step, action: Action
) -> str:
    """Send ``action`` to ``env`` and record the answer on ``step`` (observation, reward,
    flags, info — added to what the step already recorded of its model call — env time) and
    its feedback on ``trajectory``. An action the environment declares invalid
    (``info["invalid"]``) counts in ``trajectory.invalid_actions``.
    Returns the observation; adding it to the conversation is the caller's job."""
    step.action = action
    t0 = time.monotonic()
    result = await env.step(action)
    step.env_seconds = time.monotonic() - t0
    step.observation = result.observation
    step.reward = result.reward
    step.terminated = result.terminated
    step.truncated = result.truncated
    step.info = {**step.info, **result.info}  # what the step knew of its model call stays
    if result.info.get("invalid"):
        trajectory.invalid_actions += 1
        step.invalid_action = result.observation
    trajectory.feedback.extend(attach_feedback(result.feedback, trajectory, step.index))
    return result.observation
