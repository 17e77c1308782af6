"""What an environment takes, in one object: ``sharpen envs NAME [--json]`` prints it.

Its arguments come from the constructor's signature, its knobs, presets, task counts and tools
from ``describe()`` of the env built with the given args (so an env whose knobs depend on an
arg, like reasoning_gym's ``dataset``, shows that dataset's). Every argument and every knob
listed here is accepted as ``-E name=value`` (:mod:`sharpen.envs.arguments`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from sharpen.core.registry import PluginRef, Registry
from sharpen.envs.arguments import Argument, constructor_arguments, knob_parameter
from sharpen.envs.base import ENV, Knob


class EnvSchema(BaseModel):
    """An environment's arguments, knobs, presets, task counts and tools (the JSON of
    ``sharpen envs NAME --json``; a field is added, never renamed or removed)."""

    name: str
    """The name it was asked for (a registered name or a reference)."""
    description: str
    """The env's own paragraph (with an install hint when its package is missing)."""
    arguments: list[Argument] = Field(default_factory=list)
    """Constructor arguments, in signature order."""
    knobs: list[Knob] = Field(default_factory=list)
    """Difficulty knobs; each is also accepted as a top-level arg (``-E n_ops=2``)."""
    knobs_argument: str | None = None
    """The argument that takes knob overrides as a mapping (``knobs``; ``config`` for
    reasoning_gym), or ``None`` when the env takes none."""
    difficulties: list[str] = Field(default_factory=list)
    """Named presets (``difficulty=...``)."""
    task_counts: dict[str, int] = Field(default_factory=dict)
    """Tasks per split (procedural sources: how many are listed by default)."""
    tools: list[str] = Field(default_factory=list)
    """Tool names offered to the agent."""
    stages: dict[str, str] = Field(default_factory=dict)
    """Stages by action kind (:attr:`~sharpen.envs.base.BaseEnvironment.stages`)."""
    perturbations: dict[str, str] = Field(default_factory=dict)
    """Declared perturbations, name -> what changes
    (:attr:`~sharpen.envs.base.BaseEnvironment.perturbations`; ``sharpen run --perturb``)."""


def env_schema(registry: Registry, name: str, args: dict[str, Any] | None = None) -> EnvSchema:
    """The schema of env ``name`` built with ``args`` (its defaults when ``None``); an unknown
    name or a bad arg is a :class:`~sharpen.core.errors.UserError`."""
    factory = registry.get(ENV, name)
    info = registry.create(ENV, PluginRef(name=name, args=args or {})).describe()
    return EnvSchema(name=name, description=info.description,
                     arguments=constructor_arguments(factory), knobs=info.knobs,
                     knobs_argument=knob_parameter(factory), difficulties=info.difficulties,
                     task_counts=info.task_counts, tools=info.tools,
                     stages=info.stages, perturbations=info.perturbations)
