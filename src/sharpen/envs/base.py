"""Protocols of the domain layer: Environment, Verifier and Generator."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from sharpen.core.feedback import Feedback
from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory


class Knob(BaseModel):
    """One difficulty knob of a generator."""

    name: str
    """Knob name."""
    type: str
    """``int``, ``float``, ``bool`` or ``choice``."""
    default: Any
    """Default value."""
    low: float | None = None
    """Lower bound for numbers."""
    high: float | None = None
    """Upper bound for numbers."""
    choices: list[Any] | None = None
    """Allowed values for ``choice`` knobs."""
    help: str = ""
    """What it changes."""


class EnvInfo(BaseModel):
    """What ``sharpen envs`` shows about an environment."""

    name: str
    """Registered name."""
    description: str
    """One paragraph for people."""
    knobs: list[Knob] = Field(default_factory=list)
    """Difficulty knobs (empty for fixed datasets)."""
    difficulties: list[str] = Field(default_factory=list)
    """Named difficulty presets, e.g. ``easy``, ``medium``, ``hard``."""
    task_counts: dict[str, int] = Field(default_factory=dict)
    """Tasks available per split (procedural sources report how many are pre-listed)."""
    tools: list[str] = Field(default_factory=list)
    """Tool names offered to the agent."""


class StepResult(BaseModel):
    """What :meth:`Environment.step` returns, Gymnasium-style."""

    observation: str
    """Text the agent sees next."""
    reward: float = 0.0
    """Reward for this step."""
    terminated: bool = False
    """The episode is over (solved, or no submissions left)."""
    truncated: bool = False
    """The episode was cut short."""
    info: dict[str, Any] = Field(default_factory=dict)
    """Extra structured information."""
    feedback: list[Feedback] = Field(default_factory=list)
    """Feedback produced by this step (execution results, safety signals)."""

    def as_tuple(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """``(obs, reward, terminated, truncated, info)`` as in Gymnasium."""
        return self.observation, self.reward, self.terminated, self.truncated, self.info


@runtime_checkable
class Environment(Protocol):
    """Async, Gymnasium-shaped environment with chat-native observations and JSON-Schema tools.
    One instance serves one episode at a time; the runner creates one per episode."""

    tools: list[ToolSpec]
    """Tools the agent may call."""

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Start an episode: the first observation (the task prompt) and info."""
        ...

    async def step(self, action: Action) -> StepResult:
        """Apply an action."""
        ...

    async def outcome(self) -> Outcome:
        """The verdict on the episode so far (the final one once terminated). Computed by the
        environment's Verifier, which can recompute it offline from the stored trajectory."""
        ...

    async def close(self) -> None:
        """Release resources (sandboxes, temp dirs)."""
        ...

    def describe(self) -> EnvInfo:
        """Name, knobs, difficulties, task counts and tools, for ``sharpen envs``."""
        ...

    def list_tasks(
        self, split: str | None = None, limit: int | None = None, seed: int = 0
    ) -> list[TaskSpec]:
        """Tasks in a deterministic order; ``split=None`` means all splits. Procedural
        sources generate ``limit`` tasks from ``seed``."""
        ...


@runtime_checkable
class Verifier(Protocol):
    """Scores a finished episode; works offline on a stored trajectory so it can be re-scored."""

    async def score(self, trajectory: Trajectory) -> Outcome: ...


@runtime_checkable
class Generator(Protocol):
    """Produces tasks at a chosen difficulty."""

    def knobs(self) -> list[Knob]: ...

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec: ...

    def is_solvable(self, task: TaskSpec) -> bool: ...
