"""GymnasiumEnv and :func:`from_gymnasium`: a Gymnasium env as a sharpen environment.

Any Gymnasium env whose observations can be put in words: a ``spaces.Text`` observation is
shown as it is; the toy-text envs that ship with Gymnasium (FrozenLake, Taxi, CliffWalking,
Blackjack — no downloads) have built-in renderers (:mod:`~sharpen.envs.adapters.gym_text`);
any other observation is shown through ``render_obs(obs, env)`` if given, else the env's
``ansi`` rendering (colour codes stripped), else ``str(obs)``.

The agent has one tool, ``act(action)``. Its text becomes an action of the env's action
space: for ``Discrete`` an index or an action name (the built-in names of the toy-text envs,
or ``action_names``), case, brackets, quotes and a trailing period ignored; for ``Text`` the
text itself. Other action spaces are refused at construction. An unreadable action is
explained and not sent to the env.

Episodes: a task is ``(env_id, env_kwargs, seed)``; reset calls ``env.reset(seed=task.seed)``
with the seed in its split's range. ``success`` = the episode *terminated* (not truncated) and
its last reward is positive — or, for envs whose goal gives no positive reward
(CliffWalking), simply terminated (``success_rule``). ``reward`` = the return.
:class:`GymnasiumVerifier` re-scores offline by replaying the actions with the same seed
(exact for envs whose reset and step depend on the seed alone, as all toy-text ones do).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory
from sharpen.envs import generation
from sharpen.envs.adapters import gym_text
from sharpen.envs.adapters.optional import available, install_hint, require
from sharpen.envs.base import BaseEnvironment, BaseVerifier, EnvInfo, StepResult
from sharpen.envs.generation import DEFAULT_LIMIT, SPLITS

ENV_NAME = "gymnasium"
DEFAULT_ENV_ID = "FrozenLake-v1"
SUCCESS_RULES = ("positive_reward", "terminated")

ACT = ToolSpec(
    name="act",
    description="Take one action in the environment: an action name or its index.",
    parameters={
        "type": "object",
        "properties": {"action": {"type": "string", "description": "The action, e.g. down."}},
        "required": ["action"],
    },
    text_argument="action",
    text_hint="To act, reply with one action name in a ``` block",
)
"""The one tool of a Gymnasium env."""


def _callable(ref: str | Callable[..., str] | None) -> Callable[..., str] | None:
    """``ref`` itself, or the function a ``"module:function"`` string names."""
    if ref is None or callable(ref):
        return ref
    module, _, name = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise UserError(f"cannot import render_obs {ref!r}",
                        "give a callable or a 'package.module:function' string") from None


class _Tasks:
    """The :class:`~sharpen.envs.base.Generator` of a Gymnasium env: one task per seed."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any]) -> None:
        self.env_id, self.env_kwargs = env_id, env_kwargs

    def knobs(self) -> list:
        return []

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec:
        task_seed = generation.seed_for(split, seed)
        return TaskSpec(env=ENV_NAME, id=f"{self.env_id}/{task_seed}", seed=task_seed,
                        knobs={"env_id": self.env_id, "env_kwargs": self.env_kwargs},
                        split=generation.as_split(split), metadata={"difficulty": "default"})

    def is_solvable(self, task: TaskSpec) -> bool:  # pragma: no cover - no general answer
        return True


class Episode:
    """One episode of a Gymnasium env, shared by the live env and the verifier's replay."""

    def __init__(self, owner: GymnasiumEnv, task: TaskSpec) -> None:
        self.owner = owner
        self.env = owner.make()
        self.obs, _ = self.env.reset(seed=task.seed)
        self.total = 0.0
        self.last_reward = 0.0
        self.steps = 0
        self.terminated = self.truncated = False

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def apply(self, action: Any) -> None:
        """One step with an already-parsed action."""
        self.obs, reward, terminated, truncated, _ = self.env.step(action)
        self.steps += 1
        self.last_reward = float(reward)
        self.total += self.last_reward
        self.terminated, self.truncated = bool(terminated), bool(truncated)

    def outcome(self) -> Outcome:
        """The verdict so far (see the module doc)."""
        rule = self.owner.success_rule
        success = self.terminated and (rule == "terminated" or self.last_reward > 0)
        state = ("terminated" if self.terminated else "truncated" if self.truncated
                 else "not finished")
        return Outcome(success=success, reward=round(self.total, 10),
                       components={"return": round(self.total, 10), "steps": float(self.steps),
                                   "terminated": float(self.terminated)},
                       evidence=f"episode {state} after {self.steps} steps, return {self.total:g}, "
                                f"last reward {self.last_reward:g} (success rule: {rule})")


@register("env", "gymnasium")
class GymnasiumEnv(BaseEnvironment):
    """A Gymnasium env as a sharpen env. Serialisable args (``{name, args}``):

    - ``env_id``: a Gymnasium id (default ``FrozenLake-v1``);
    - ``env_kwargs``: keyword args for ``gymnasium.make`` (e.g. ``{"is_slippery": false}``);
    - ``action_names``: names of the ``Discrete`` actions, in index order;
    - ``render_obs``: ``"module:function"`` turning ``(obs, env)`` into text;
    - ``success_rule``: ``positive_reward`` or ``terminated`` (default: per env, see above);
    - ``max_steps``: Gymnasium's ``max_episode_steps``.

    :func:`from_gymnasium` also accepts an env instance and a callable ``render_obs``; such an
    env works directly but cannot be rebuilt from ``{name, args}`` (so not through the Runner).
    """

    def __init__(self, env_id: str | Any = DEFAULT_ENV_ID, env_kwargs: dict[str, Any] | None = None,
                 action_names: list[str] | None = None,
                 render_obs: str | Callable[..., str] | None = None,
                 success_rule: str | None = None, max_steps: int | None = None) -> None:
        self.instance = None if isinstance(env_id, str) else env_id
        self.env_id = env_id if isinstance(env_id, str) else _id_of(env_id)
        self.env_kwargs = dict(env_kwargs or {})
        self.max_steps = max_steps
        self.render_obs = _callable(render_obs)
        self.base = self.env_id.split("/")[-1].split("-v")[0]
        self.action_names = list(action_names or gym_text.ACTION_NAMES.get(self.base, []))
        self.success_rule = success_rule or gym_text.SUCCESS_RULES.get(self.base, "positive_reward")
        if self.success_rule not in SUCCESS_RULES:
            raise UserError(f"unknown success_rule {success_rule!r}",
                            f"use one of {', '.join(SUCCESS_RULES)}")
        self.generator = _Tasks(self.env_id, self.env_kwargs)
        self.tools = [ACT]
        self._episode: Episode | None = None

    def make(self) -> Any:
        """The Gymnasium env of this adapter (the instance given, or a new one from the id)."""
        if self.instance is not None:
            return self.instance
        gym = require("gymnasium")
        kwargs = dict(self.env_kwargs)
        if self.max_steps is not None:
            kwargs["max_episode_steps"] = self.max_steps
        try:
            if self.render_obs is None and self.base not in gym_text.RENDERERS:
                creator = gym.envs.registration.load_env_creator(gym.spec(self.env_id).entry_point)
                if "ansi" in getattr(creator, "metadata", {}).get("render_modes", []):
                    kwargs.setdefault("render_mode", "ansi")  # the text fallback of gym_text.render
            env = gym.make(self.env_id, **kwargs)
        except (gym.error.Error, TypeError) as exc:
            raise UserError(f"cannot make Gymnasium env {self.env_id!r}: {exc}",
                            "check env_id and env_kwargs (e.g. Taxi-v4, FrozenLake-v1)") from None
        self._check_action_space(env)
        return env

    def _check_action_space(self, env: Any) -> None:
        spaces = require("gymnasium.spaces")
        space = env.action_space
        if not isinstance(space, spaces.Discrete | spaces.Text):
            raise UserError(f"{self.env_id}: action space {space} is not supported",
                            "from_gymnasium reads Discrete or Text actions from text")
        if isinstance(space, spaces.Discrete) and self.action_names and len(self.action_names) != space.n:
            raise UserError(f"{len(self.action_names)} action_names for {space}",
                            f"give exactly {space.n} names, in index order")

    def observe(self, episode: Episode) -> str:
        """The current observation in words (see the module doc)."""
        env = episode.env
        if self.render_obs is not None:
            return str(self.render_obs(episode.obs, env.unwrapped))
        return gym_text.render(self.base, episode.obs, env)

    def parse(self, env: Any, raw: Any) -> tuple[Any, str | None]:
        """``(action, None)`` for text the action space accepts, else ``(None, why)``."""
        spaces = require("gymnasium.spaces")
        space = env.action_space
        if not isinstance(raw, str):
            return None, f"`action` must be a string, not {type(raw).__name__}."
        if isinstance(space, spaces.Text):
            return (raw, None) if space.contains(raw) else (None, f"{raw[:40]!r} is not in {space}.")
        return gym_text.discrete_action(raw, space, self.action_names)

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Reset the Gymnasium env with the task's seed; the first observation in words."""
        self._episode = ep = Episode(self, task)
        names = ", ".join(self.action_names) if self.action_names else None
        space = ep.env.action_space
        how = (f"Actions: {names} (or their index 0..{len(self.action_names) - 1})." if names
               else f"Action space: {space}.")
        intro = gym_text.INTROS.get(self.base, f"You are acting in the Gymnasium environment {self.env_id}.")
        text = (f"{intro}\n\n{self.observe(ep)}\n\n{how} Take one action per reply with the `act` "
                "tool: reply with just the action in a code block.")
        return text, {"env_id": self.env_id}

    async def step(self, action: Action) -> StepResult:
        """Parse the action, step the Gymnasium env, describe the result."""
        ep = self._episode
        if ep is None:
            raise RuntimeError("GymnasiumEnv.step called before reset")
        if ep.done:
            return StepResult(observation="The episode is over.", terminated=ep.terminated,
                              truncated=ep.truncated, info={"invalid": True, "reason": "episode over"})
        if action.tool != ACT.name:
            unknown = f"Unknown tool {action.tool!r}. The only tool is `act`, with one argument `action`."
            return StepResult(observation=unknown, info={"invalid": True, "reason": unknown})
        parsed, why = self.parse(ep.env, action.arguments.get("action"))
        if why is not None:
            return StepResult(observation=why, info={"invalid": True, "reason": why})
        ep.apply(parsed)
        text = f"{self.observe(ep)}\nReward: {ep.last_reward:g} (total {ep.total:g})."
        if ep.done:
            text += " The episode is over."
        return StepResult(observation=text, reward=ep.last_reward, terminated=ep.terminated,
                          truncated=ep.truncated, info={"steps": ep.steps})

    async def outcome(self) -> Outcome:
        """The verdict so far; before any reset, a failure."""
        if self._episode is None:
            return Outcome(success=False, evidence="no episode")
        return self._episode.outcome()

    def reference_actions(self, task: TaskSpec) -> list[Action] | None:
        """The shortest winning action sequence of a deterministic tabular env (one with a
        transition table ``P`` whose every transition has probability 1), found by BFS;
        ``None`` for any other env (the ``reference`` agent's hook)."""
        env = self.make()
        obs, _ = env.reset(seed=task.seed)
        plan = gym_text.tabular_plan(env.unwrapped, obs, self.success_rule)
        if plan is None:
            return None
        return [Action(tool=ACT.name, arguments={"action": self.action_names[a] if self.action_names
                                                  else str(a)}) for a in plan]

    async def close(self) -> None:
        """Close the Gymnasium env (an instance given by the caller is left open)."""
        if self._episode is not None and self.instance is None:
            self._episode.env.close()
        self._episode = None

    def describe(self) -> EnvInfo:
        """Name, description, task counts, tools (a Gymnasium env has no knobs or presets)."""
        note = "" if available("gymnasium") else f" (needs {install_hint('gymnasium')})"
        return EnvInfo(
            name=ENV_NAME,
            description=(f"A Gymnasium env ({self.env_id}) with text observations; act(action) "
                         "takes an action name or index. Args: env_id, env_kwargs, action_names, "
                         f"render_obs, success_rule, max_steps.{note}"),
            task_counts={s: DEFAULT_LIMIT for s in SPLITS}, tools=[t.name for t in self.tools])

    def list_tasks(self, split: str | None = None, limit: int | None = None,
                   seed: int = 0) -> list[TaskSpec]:
        """``limit`` (default 50) seeds per split, as tasks."""
        return generation.list_generated(self.generator, {}, split, limit, seed)


def _id_of(env: Any) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(getattr(env, "unwrapped", env)).__name__


def from_gymnasium(env: str | Any, render_obs: str | Callable[..., str] | None = None,
                   **args: Any) -> GymnasiumEnv:
    """A Gymnasium env (an id, or an env instance) as a sharpen environment; ``render_obs(obs,
    env)`` turns an observation into text, ``args`` are :class:`GymnasiumEnv`'s others."""
    return GymnasiumEnv(env_id=env, render_obs=render_obs, **args)


@register("verifier", "gymnasium")
class GymnasiumVerifier(BaseVerifier):
    """Takes the env's arguments and replays the stored valid actions with the task's seed."""

    def __init__(self, **args: Any) -> None:
        self.env = GymnasiumEnv(**args)

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The Outcome the environment gave (see the module doc)."""
        ep = Episode(self.env, trajectory.task)
        for step in trajectory.steps:
            if ep.done:
                break
            if step.action is None or step.action.tool != ACT.name:
                continue
            parsed, why = self.env.parse(ep.env, step.action.arguments.get("action"))
            if why is None:
                ep.apply(parsed)
        return ep.outcome()
