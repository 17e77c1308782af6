"""The Agent contract: a Protocol, a base class with its defaults, and :data:`AGENT`, the
kind the registry builds agents under.

An agent runs one episode of an :class:`~sharpen.core.agent_spec.AgentSpec` against an
environment with a model, filling the trajectory in place; the runner sets the outcome and
owns retries, limits of the whole run, and storage.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, runtime_checkable

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import Kind, PluginRef, Registry
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel


@runtime_checkable
class Agent(Protocol):
    """Runs one episode. Built fresh for every episode, so it may keep per-episode state."""

    needs_model: bool
    """Whether the runner must build the spec's model; ``False`` for agents that never call
    one (the ``null`` and ``reference`` baselines), which then get a model that refuses calls."""

    async def run(
        self, env: Environment, model: ChatModel, spec: AgentSpec, trajectory: Trajectory
    ) -> None:
        """Play ``trajectory.task`` in ``env`` (which the agent resets) and fill ``trajectory``
        (messages, steps, usage, invalid actions, ``ended_at``). Raise
        :class:`~sharpen.core.errors.InfraError` for model failures; anything else unexpected
        is stored as an ``env`` error, never as the agent's failure."""
        ...


class BaseAgent(ABC):
    """Base class for agents: define :meth:`run`."""

    needs_model: bool = True
    """Default: the agent calls the spec's model."""

    @abstractmethod
    async def run(
        self, env: Environment, model: ChatModel, spec: AgentSpec, trajectory: Trajectory
    ) -> None:
        """Play one episode into ``trajectory`` (see :meth:`Agent.run`)."""


AGENT: Kind[Agent] = Kind("agent", Agent, "sharpen.agents.base.BaseAgent")
"""The agent plug-in kind."""


def needs_model(registry: Registry, ref: PluginRef) -> bool:
    """Whether the agent ``ref`` builds calls a model (agents are cheap to build)."""
    return registry.create(AGENT, ref).needs_model
