"""TaskSpec: the frozen, hashable identity of one task instance."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sharpen.core.hashing import content_hash

Split = Literal["train", "val", "test"]


class TaskSpec(BaseModel):
    """Everything needed to rebuild one task instance: its environment materialises the
    prompt and hidden checks from ``(env, id, seed, knobs)`` deterministically."""

    model_config = ConfigDict(frozen=True)

    env: str
    """Registered environment name, e.g. ``"code"``."""
    id: str
    """Task id inside the environment, e.g. ``"HumanEval/0"`` or ``"gen/arith-3/17"``."""
    seed: int = 0
    """Instance seed: procedural tasks are generated from it."""
    knobs: dict[str, Any] = Field(default_factory=dict)
    """Difficulty knobs the instance was generated with."""
    split: Split = "test"
    """Which split the task belongs to."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form labels (source, cluster key, difficulty name); not part of the identity."""

    def hash(self) -> str:
        """Content hash of the task's identity (metadata excluded)."""
        return content_hash({"env": self.env, "id": self.id, "seed": self.seed, "knobs": self.knobs})

    def __hash__(self) -> int:
        return hash(self.hash())
