"""Contracts of the domain layer: Environment, Verifier and Generator.

Each plug-in contract is a Protocol (what the runner relies on) plus a base class that gives
every optional member a documented default, so a plug-in written from scratch subclasses
:class:`BaseEnvironment` / :class:`BaseVerifier` and defines only what it must. :data:`ENV`
and :data:`VERIFIER` are the kinds the registry builds them under.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from sharpen.core.feedback import Feedback
from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.registry import Kind
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory
from sharpen.envs.arguments import fold_knobs
from sharpen.envs.perturbation import check_name, variant


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
    stages: dict[str, str] = Field(default_factory=dict)
    """Stages by action kind (:attr:`BaseEnvironment.stages`); empty when none are declared."""
    not_replayable: str | None = None
    """Why an episode is not a function of its task and actions (a model plays a part: a
    simulated user, a model opponent), or ``None``: ``reset(task)`` and the same actions give
    the same observations, rewards and info (:mod:`sharpen.diagnose.replay`)."""
    perturbations: dict[str, str] = Field(default_factory=dict)
    """Perturbations the environment can apply to a task, name -> what it changes
    (:attr:`BaseEnvironment.perturbations`); empty when none are declared."""

    def played_by_models(self, parts: dict[str, bool]) -> EnvInfo:
        """This info with :attr:`not_replayable` set when any of ``parts`` — what a model
        plays, e.g. ``{"a model plays the customer": user is not None}`` — is on."""
        why = [part for part, on in parts.items() if on]
        if why:
            self.not_replayable = (" and ".join(why) + ": its replies are not a function of "
                                   "the task and the actions")
        return self


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

    stages: ClassVar[dict[str, str]]
    """Stages of an episode by action kind (see :attr:`BaseEnvironment.stages`)."""

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

    def reference_actions(self, task: TaskSpec) -> list[Action] | None:
        """Actions that solve ``task`` when played in order (multi-step environments), or
        ``None``. The ``reference`` agent and ``sharpen check env`` use it."""
        ...

    def reference_solution(self, task: TaskSpec) -> str | None:
        """A text answer that solves ``task`` (submitted once through the answer tool), or
        ``None``; consulted when :meth:`reference_actions` gives ``None``."""
        ...

    def stage(self, action: Action) -> str | None:
        """The stage ``action`` belongs to (one of :attr:`stages`' values), or ``None``."""
        ...

    @classmethod
    def isolation(cls) -> str | None:
        """What untrusted code gets in this environment's sandbox (a label recorded in the run
        manifest), or ``None`` for the default sandbox's."""
        ...

    def perturb(self, task: TaskSpec, name: str, seed: int) -> TaskSpec:
        """The variant of ``task`` under the declared perturbation ``name`` drawn with
        ``seed`` (:mod:`sharpen.envs.perturbation`); an undeclared name raises a
        :class:`~sharpen.core.errors.UserError` listing the declared ones."""
        ...


class BaseEnvironment(ABC):
    """Base class for environments: subclass it and define :meth:`reset`, :meth:`step`,
    :meth:`outcome` and :meth:`list_tasks`, and set ``tools``. Every other member of
    :class:`Environment` has the default documented here."""

    tools: list[ToolSpec]
    """Tools the agent may call (set it in ``__init__``)."""

    stages: ClassVar[dict[str, str]] = {}
    """Stages of an episode by action kind, TRAJEVAL-style (toolshop: look up / act /
    reply): a tool name -> the stage its actions belong to. The stages come in the order
    their names first appear among the values. An environment whose tool's arguments decide
    the stage (shell's one ``run`` tool, textworld's ``act``) keys the mapping by what
    :meth:`stage` reads — a command's verb — and overrides :meth:`stage`. Default: empty, no
    stages declared; :mod:`sharpen.diagnose.stages` then reports none."""

    @abstractmethod
    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Start an episode: the first observation (the task prompt) and info."""

    @abstractmethod
    async def step(self, action: Action) -> StepResult:
        """Apply an action."""

    @abstractmethod
    async def outcome(self) -> Outcome:
        """The verdict on the episode so far."""

    @abstractmethod
    def list_tasks(
        self, split: str | None = None, limit: int | None = None, seed: int = 0
    ) -> list[TaskSpec]:
        """Tasks in a deterministic order (see :meth:`Environment.list_tasks`)."""

    async def close(self) -> None:
        """Default: nothing to release."""
        return None

    def describe(self) -> EnvInfo:
        """Default: the registered name, the class docstring's first paragraph and the tool
        names."""
        doc = (type(self).__doc__ or "").strip().split("\n\n")[0]
        name = str(getattr(type(self), "registry_name", type(self).__name__))
        return EnvInfo(name=name, description=" ".join(doc.split()),
                       tools=[t.name for t in self.tools], stages=dict(self.stages),
                       perturbations=dict(self.perturbations))

    def reference_actions(self, task: TaskSpec) -> list[Action] | None:
        """Default: no reference actions."""
        return None

    def reference_solution(self, task: TaskSpec) -> str | None:
        """Default: no reference solution."""
        return None

    def stage(self, action: Action) -> str | None:
        """Default: ``stages[action.tool]``, or ``None`` for a tool no stage names."""
        return self.stages.get(action.tool)

    @classmethod
    def isolation(cls) -> str | None:
        """Default: the default sandbox's isolation."""
        return None

    perturbations: ClassVar[dict[str, str]] = {}
    """Perturbations this environment can apply to a task, name -> one line on what changes
    (``paraphrase``, ``tool_order``, ...). Each keeps the task solvable and checked by the
    same verifier; the environment rebuilds a variant where it materialises a task (see
    :mod:`sharpen.envs.perturbation`). Default: none declared."""

    def perturb(self, task: TaskSpec, name: str, seed: int) -> TaskSpec:
        """Default: :func:`~sharpen.envs.perturbation.variant` of ``task`` when ``name`` is
        one of :attr:`perturbations`, else a :class:`~sharpen.core.errors.UserError` listing
        them."""
        check_name(task.env, name, self.perturbations)
        return variant(task, name, seed)


@runtime_checkable
class Verifier(Protocol):
    """Scores a finished episode; works offline on a stored trajectory so it can be re-scored."""

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The outcome of ``trajectory`` — the same one the environment gave when it ran."""
        ...


class BaseVerifier(ABC):
    """Base class for verifiers: define :meth:`score`."""

    @abstractmethod
    async def score(self, trajectory: Trajectory) -> Outcome:
        """The outcome of ``trajectory``."""


ENV: Kind[Environment] = Kind("env", Environment, "sharpen.envs.base.BaseEnvironment",
                             fold_args=fold_knobs)
"""The environment plug-in kind (a knob name given as an arg goes into ``knobs``:
:mod:`sharpen.envs.arguments`)."""
VERIFIER: Kind[Verifier] = Kind("verifier", Verifier, "sharpen.envs.base.BaseVerifier")
"""The verifier plug-in kind (registered under the environment's name)."""


@runtime_checkable
class Generator(Protocol):
    """Produces tasks at a chosen difficulty."""

    def knobs(self) -> list[Knob]: ...

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec: ...

    def is_solvable(self, task: TaskSpec) -> bool: ...
