"""Step and Trajectory: everything that happened in one epoch of one task by one AgentSpec."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from sharpen.core.feedback import Feedback
from sharpen.core.messages import Message, Usage
from sharpen.core.outcome import Outcome
from sharpen.core.task import TaskSpec


class Action(BaseModel):
    """What the agent does in one step: call a tool with arguments."""

    tool: str
    """Tool name."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Arguments, validated by the environment."""


class TokenLogprobs(BaseModel):
    """The backend's per-token log-probabilities of one reply, as the model sampled it: what a
    trainer needs of the policy that acted (importance ratios, KL to the behaviour policy).
    ``tokens`` (the tokens' texts) and ``token_ids``, when the backend gives them, are what
    lets an exporter check that the logprobs align with its own tokenization of the reply
    (:mod:`sharpen.train.tokens`); each is as long as ``logprobs``."""

    logprobs: list[float]
    """One log-probability (≤ 0) per generated token, in order."""
    tokens: list[str] | None = None
    """The text of each token, when the backend gives it (llama.cpp and OpenAI-style servers
    do)."""
    token_ids: list[int] | None = None
    """The id of each token, when the backend gives it."""


class Step(BaseModel):
    """One agent turn: the model's message, the parsed action and the environment's answer."""

    index: int
    """0-based position in the trajectory."""
    messages: list[Message]
    """Messages this step appended: the assistant reply, then the tool/user observation."""
    action: Action | None = None
    """The parsed action, ``None`` when the reply could not be parsed."""
    invalid_action: str | None = None
    """Why the reply was not a valid action (shown to the model as feedback)."""
    observation: str | None = None
    """The environment's text answer."""
    reward: float = 0.0
    """Reward the environment gave for this step."""
    terminated: bool = False
    """The environment ended the episode."""
    truncated: bool = False
    """The episode was cut short (limits)."""
    usage: Usage = Field(default_factory=Usage)
    """Model usage of this step."""
    model_seconds: float = 0.0
    """Wall time spent in the model."""
    env_seconds: float = 0.0
    """Wall time spent in the environment."""
    info: dict[str, Any] = Field(default_factory=dict)
    """Extra environment info (e.g. test results)."""
    logprobs: TokenLogprobs | None = None
    """The per-token logprobs of the step's reply (its last assistant message), when the
    model was asked for them (``logprobs=true`` on ``local`` or ``openai``) and gave them;
    ``None`` otherwise, and for every step stored before they were kept."""


def _now() -> datetime:
    return datetime.now(UTC)


TRIAL = "trial"
"""``Step.info`` key of an agent that plays several trials on a freshly reset environment
within one trajectory (``reflexion``): the 0-based trial the step belongs to."""

TRIAL_PROMPT = "trial_prompt"
"""``Step.info`` key on the first step of each trial (next to :data:`TRIAL`): the messages
that trial's conversation started with (its system prompt and the task), as JSON dicts.
``Trajectory.messages`` keeps only the last trial's conversation, so an earlier trial's
prompt is known only from here."""


class Trajectory(BaseModel):
    """One attempt: one epoch of one task by one AgentSpec."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    """Unique id."""
    run_id: str = ""
    """Run this trajectory belongs to."""
    task: TaskSpec
    """The task."""
    agent_hash: str
    """Content hash of the AgentSpec."""
    epoch: int = 0
    """Repetition index."""
    seed: int = 0
    """Seed used for this attempt (sampling and environment)."""
    messages: list[Message] = Field(default_factory=list)
    """The full conversation, in OpenAI chat format."""
    steps: list[Step] = Field(default_factory=list)
    """The agent's turns."""
    outcome: Outcome | None = None
    """The verdict (``None`` while running)."""
    feedback: list[Feedback] = Field(default_factory=list)
    """Feedback attached during the episode (execution, verifier, ...)."""
    usage: Usage = Field(default_factory=Usage)
    """Total model usage."""
    invalid_actions: int = 0
    """Replies that could not be parsed into an action."""
    infra_retries: int = 0
    """Model calls retried after infra errors (429, 5xx, timeouts, ...) in this episode."""
    started_at: datetime = Field(default_factory=_now)
    """Start time (UTC)."""
    ended_at: datetime | None = None
    """End time (UTC)."""

    @property
    def key(self) -> str:
        """The (task, spec, epoch) identity that resume uses."""
        return trajectory_key(self.task, self.agent_hash, self.epoch)

    @property
    def trials(self) -> int:
        """Environment episodes this trajectory played: one, or as many as the trials its
        steps are tagged with (:data:`TRIAL`). The improvement engine's budget counts
        rollouts in these. (Not the stats' "attempts", which are trajectories.)"""
        return 1 + max((s.info[TRIAL] for s in self.steps if TRIAL in s.info), default=0)

    @property
    def wall_seconds(self) -> float:
        if self.ended_at is None:
            return 0.0
        return (self.ended_at - self.started_at).total_seconds()


def trajectory_key(task: TaskSpec, agent_hash: str, epoch: int) -> str:
    """Identity of a (task, spec, epoch) triple; finished triples are skipped on resume."""
    return f"{task.hash()}:{agent_hash}:{epoch}"
