"""The ``reward_model`` judge: a trained reward model's score of a trajectory — a verdict with no
verifier and no judge prompt (``sharpen judge RUN --judge reward_model --judge-arg
path=CKPT``).

The reward model is a checkpoint written by ``sharpen train reward-model`` (a scalar head on
the embedded model, :class:`~sharpen.train.reward_model.RewardScorer`). It reads the
conversation up to the agent's last reply — what it was trained on: the environment's final
verdict is left out — and its score is one ``Feedback(source="judge", name=NAME)`` whose value
is the raw scalar (higher is better; only differences between trajectories mean anything,
which is how the best-of-N selector uses them, :mod:`sharpen.train.best_of_n`). The judge
model passed in is not called.

The judge's version (its ``prompt``) is the content hash of the checkpoint's weights, so a
reward model retrained into the same folder is another judge, whose scores are kept apart.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.registry import register
from sharpen.core.trajectory import Trajectory
from sharpen.judges.base import BaseJudge, JudgeError
from sharpen.models.base import ChatModel

NAME = "reward"
"""The feedback name of a reward-model score."""


def weights_hash(checkpoint: Path) -> str:
    """The content hash (sha256, 16 hex digits) of a checkpoint's ``model.safetensors``."""
    digest = hashlib.sha256()
    with (checkpoint / "model.safetensors").open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def agent_turns(t: Trajectory) -> list[dict[str, Any]]:
    """``t``'s conversation as OpenAI messages, up to the agent's last reply."""
    messages = [m.to_openai() for m in t.messages]
    last = max((k for k, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return messages[: last + 1]


@register("judge", "reward_model")
class RewardModelJudge(BaseJudge):
    """Scores a trajectory with a trained reward model (module doc).

    Args: ``path`` (the reward model's checkpoint folder), ``device`` (``cpu`` or ``cuda``),
    ``max_length`` (tokens scored, the last ones of a longer conversation)."""

    title = "reward model"

    def __init__(self, path: str | None = None, device: str = "cpu", max_length: int = 1024) -> None:
        if not path:
            raise UserError("the reward_model judge needs the reward model's checkpoint",
                            "add --judge-arg path=<the folder `sharpen train reward-model` wrote>")
        self.path = Path(path).expanduser()
        if not (self.path / "model.safetensors").is_file():
            raise UserError(f"{self.path} holds no model.safetensors",
                            "pass the checkpoint folder `sharpen train reward-model` wrote")
        self.device, self.max_length = device, max_length
        self.prompt = f"reward model {weights_hash(self.path)}"
        self._scorer: Any = None  # loaded on first use: building the judge stays cheap
        self._lock = asyncio.Lock()

    async def _load(self) -> Any:
        async with self._lock:
            if self._scorer is None:
                from sharpen.train.reward_model import RewardScorer

                self._scorer = await asyncio.to_thread(
                    RewardScorer, self.path, self.device, self.max_length)
        return self._scorer

    async def judge(self, trajectory: Trajectory, model: ChatModel) -> list[Feedback]:
        """The reward model's score of ``trajectory`` (``model`` is not called)."""
        turns = agent_turns(trajectory)
        if not any(m["role"] == "assistant" for m in turns):
            raise JudgeError("the agent never replied: nothing for the reward model to score")
        scorer = await self._load()
        value = await asyncio.to_thread(scorer.score, turns)
        return [Feedback(source="judge", name=NAME, value=value,
                         target=FeedbackTarget(kind="trajectory", run_id=trajectory.run_id,
                                               trajectory_id=trajectory.id))]
