"""ToolshopVerifier: re-scores a stored toolshop trajectory offline.

It rebuilds the task's shop from ``trajectory.task`` (seed and knobs) into a fresh SQLite
file, replays the stored actions in order through the same
:class:`~sharpen.envs.toolshop.episode.Episode` rules the environment used, and stops where
the environment stopped. The simulated customer is not asked again: its answers are read
back from the steps' ``info["user"]`` (and a failure at the start from the first message),
so a replay needs no model and gives exactly the environment's Outcome. Simulated tools are
not asked again either: a simulated step's result (or the simulator's failure) is read back
from ``info["tool_sim"]``, while the call itself is replayed on the real shop as the
environment did.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import BaseVerifier
from sharpen.envs.toolshop import generator as gen
from sharpen.envs.toolshop import user as sim
from sharpen.envs.toolshop.env import USER_FAILED, tool_sim_id
from sharpen.envs.toolshop.episode import Episode


def _start_failure(trajectory: Trajectory) -> str | None:
    """The simulated customer's failure at the start, read from the first user message."""
    first = next((m.content or "" for m in trajectory.messages if m.role == "user"), "")
    if first.startswith(USER_FAILED):
        return first.removeprefix(USER_FAILED).strip().removesuffix("]")
    return None


@register("verifier", "toolshop")
class ToolshopVerifier(BaseVerifier):
    """Takes the same arguments as :class:`~sharpen.envs.toolshop.env.ToolshopEnv`, so the
    env's own ``{name, args}`` builds its verifier; ``max_actions``, ``user`` (whether there
    is a customer, not the model), ``user_prompt_version``, ``tools`` and
    ``tool_sim_version`` matter here."""

    def __init__(self, difficulty: str = "easy", knobs: dict[str, Any] | None = None,
                 max_actions: int = 30, user: dict[str, Any] | None = None,
                 user_prompt_version: str = sim.DEFAULT_VERSION,
                 user_params: dict[str, Any] | None = None, tools: str = "real",
                 tool_model: dict[str, Any] | None = None, tool_sim_version: str = "1",
                 tool_params: dict[str, Any] | None = None) -> None:
        self.max_actions = max_actions
        self.tool_sim = tool_sim_id(tools, tool_model, tool_sim_version)
        self.user = user is not None
        self.user_prompt_version = sim.check_version(user_prompt_version)

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The Outcome of replaying ``trajectory`` (see the module doc)."""
        shop = gen.shop_of(trajectory.task)
        with tempfile.TemporaryDirectory(prefix="sharpen-toolshop-verify-") as tmp:
            ep = Episode(shop, Path(tmp) / "shop.db", self.max_actions, user=self.user,
                         tool_sim=self.tool_sim)
            try:
                failed = _start_failure(trajectory) if self.user else None
                if failed is not None:
                    ep.fail_user(failed)
                for step in trajectory.steps:
                    if ep.done:
                        break
                    if step.action is None:
                        continue
                    report = ep.apply(step.action, step.index)
                    if report.message is not None:
                        ep.user_turn(sim.UserTurn.from_info(step.info["user"]), step.index)
                    elif report.simulate:
                        simulated = step.info["tool_sim"]
                        if "error" in simulated:
                            ep.simulation_failed(report, simulated["error"])
                        else:
                            ep.simulated_result(report, simulated["result"], step.index)
                out = ep.outcome()
            finally:
                ep.close()
        if self.user:
            out.evidence += f"; simulated customer prompt {sim.prompt_id(self.user_prompt_version)}"
        return out
