"""SharpenGymEnv: every sharpen environment as a ``gymnasium.Env`` with text spaces.

``to_gymnasium("gridsafety", difficulty="hard")`` (or ``gymnasium.make("sharpen/gridsafety-v0",
difficulty="hard")`` after :func:`register_gymnasium_envs`) gives a Gymnasium env whose
observation and action spaces are :class:`AnyText`:

- **reset(seed, options)** picks a task: ``options["task"]`` (a TaskSpec or its dict), else
  ``options["task_index"]``, else one drawn with the env's seeded ``np_random`` from the first
  ``n_tasks`` tasks of ``split`` (default 50 of ``train``). The same seed gives the same task
  and the same first observation. ``info`` holds ``task_id``, the task, and the env's info.
- **step(action)** reads the text: a JSON object ``{"tool": NAME, "arguments": {...}}`` naming
  one of the env's tools is that call; any other text is the ``text_argument`` of the env's
  answer tool (e.g. ``submit(code=TEXT)`` for ``code``, ``move(direction=TEXT)`` for
  ``gridsafety``). It returns the env's observation, reward and termination; when the episode
  ends, ``info["outcome"]`` is the verifier's Outcome (``success``, ``reward`` ...).
- The sharpen env is async; the wrapper runs it on its own event loop in a background thread,
  so the sync Gymnasium API works from plain code and from inside a running loop (Jupyter).

Text spaces. Gymnasium's ``Text`` space only contains strings over a fixed charset, while
sharpen observations hold any character (code, tables, Unicode). :class:`AnyText` keeps
``Text``'s length bounds but accepts every character, and samples short printable strings
(a random 100 000-character action only wastes the env's time). Observations longer than
``max_length`` are cut, with a note, so they always lie in the space.
"""

from __future__ import annotations

import asyncio
import copy
import json
import string
import threading
import weakref
from collections.abc import Coroutine
from typing import Any

import gymnasium
from gymnasium import spaces

from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action
from sharpen.envs.base import ENV

MAX_OBSERVATION = 1_000_000
"""Characters an observation may have (longer ones are cut)."""
MAX_ACTION = 100_000
"""Characters an action may have."""
SAMPLE_LENGTH = 64
"""Longest string :meth:`AnyText.sample` draws without a mask."""
_CUT = "\n[... observation cut at {n} characters]"


class AnyText(spaces.Text):
    """A ``Text`` space whose ``contains`` accepts any characters (see the module doc)."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None) -> None:
        super().__init__(max_length=max_length, min_length=min_length,
                         charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        """Any ``str`` within the length bounds."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A printable string of at most :data:`SAMPLE_LENGTH` characters (or as ``Text``
        samples when a mask or probability is given)."""
        if mask is None and probability is None:
            upper = max(self.min_length, min(self.max_length, SAMPLE_LENGTH))
            length = int(self.np_random.integers(self.min_length, upper + 1))
            return super().sample(mask=(length, None))
        return super().sample(mask=mask, probability=probability)

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


class _Loop:
    """An event loop running in a daemon thread; :meth:`run` waits for a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="sharpen-gym", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
        if not self.loop.is_running() and not self.loop.is_closed():
            self.loop.close()


def parse_action(text: str, tools: list) -> Action:
    """The action ``text`` stands for (see the module doc)."""
    names = {t.name for t in tools}
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        obj = None
    if isinstance(obj, dict) and obj.get("tool") in names and isinstance(obj.get("arguments", {}), dict):
        return Action(tool=obj["tool"], arguments=obj.get("arguments", {}))
    text_tools = [t for t in tools if t.text_argument]
    tool = text_tools[0] if text_tools else tools[0]
    return Action(tool=tool.name, arguments={tool.text_argument: text} if tool.text_argument else {})


class SharpenGymEnv(gymnasium.Env):
    """The sharpen env ``env_name`` (built from ``env_args``) as a Gymnasium env."""

    # render_fps means nothing for text, but Gymnasium's checker warns without one. Not a
    # ClassVar: gymnasium.Env declares metadata a plain attribute, and an override must match.
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012

    def __init__(self, env_name: str, split: str = "train", n_tasks: int = 50,
                 render_mode: str | None = None, **env_args: Any) -> None:
        if render_mode not in (None, "ansi"):
            raise UserError(f"render_mode {render_mode!r} is not supported", "use 'ansi' or None")
        self.render_mode = render_mode
        self.ref = PluginRef(name=env_name, args=env_args)
        probe = REGISTRY.create(ENV, self.ref)
        self.tasks = probe.list_tasks(split=split, limit=n_tasks, seed=0)
        if not self.tasks:
            raise UserError(f"sharpen env {env_name!r} lists no {split} tasks", "pick another split")
        self.tools = list(probe.tools)
        self.observation_space = AnyText(MAX_OBSERVATION)
        self.action_space = AnyText(MAX_ACTION, min_length=1)
        self._loop = _Loop()
        self._finalizer = weakref.finalize(self, self._loop.stop)
        self._env: Any = None
        self._last = ""

    def _observation(self, text: str) -> str:
        if len(text) > MAX_OBSERVATION:
            note = _CUT.format(n=MAX_OBSERVATION)
            text = text[: MAX_OBSERVATION - len(note)] + note
        self._last = text
        return text

    def _task(self, options: dict[str, Any] | None) -> TaskSpec:
        options = options or {}
        if "task" in options:
            task = options["task"]
            return task if isinstance(task, TaskSpec) else TaskSpec.model_validate(task)
        if "task_index" in options:
            return self.tasks[int(options["task_index"]) % len(self.tasks)]
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[str, dict[str, Any]]:
        """Start an episode on a task (see the module doc)."""
        super().reset(seed=seed)
        task = self._task(options)
        self._close_env()
        self._env = REGISTRY.create(ENV, self.ref)
        obs, info = self._loop.run(self._env.reset(task))
        info = {"task_id": task.id, "task": task.model_dump(mode="json"), **copy.deepcopy(info)}
        return self._observation(obs), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """One action (text) on the episode (see the module doc)."""
        if self._env is None:
            raise RuntimeError("SharpenGymEnv.step called before reset")
        result = self._loop.run(self._env.step(parse_action(str(action), self.tools)))
        info = copy.deepcopy(result.info)
        if result.feedback:
            info["feedback"] = [f.model_dump(mode="json", exclude={"id", "created_at"})
                                for f in result.feedback]
        if result.terminated or result.truncated:
            info["outcome"] = self._loop.run(self._env.outcome()).model_dump(mode="json")
        return (self._observation(result.observation), float(result.reward),
                bool(result.terminated), bool(result.truncated), info)

    def render(self) -> str | None:
        """With ``render_mode="ansi"``, the last observation."""
        return self._last if self.render_mode == "ansi" else None

    def _close_env(self) -> None:
        if self._env is not None:
            env, self._env = self._env, None
            self._loop.run(env.close())

    def close(self) -> None:
        """Close the sharpen env and stop the event loop (safe to call twice)."""
        if self._loop.loop.is_closed():
            return
        self._close_env()
        self._finalizer()


def gym_id(env_name: str) -> str:
    """The Gymnasium id of sharpen env ``env_name``: ``sharpen/NAME-v0``."""
    return f"sharpen/{env_name}-v0"


def register_gymnasium_envs() -> list[str]:
    """Register every sharpen env with Gymnasium (``gymnasium.make("sharpen/code-v0", ...)``;
    keyword args go to :class:`SharpenGymEnv`). Idempotent; returns the ids."""
    ids = []
    for name in REGISTRY.names("env"):
        env_id = gym_id(name)
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=f"{__name__}:SharpenGymEnv",
                               kwargs={"env_name": name})
        ids.append(env_id)
    return ids


__all__ = ["MAX_ACTION", "MAX_OBSERVATION", "AnyText", "SharpenGymEnv", "gym_id", "parse_action",
           "register_gymnasium_envs"]
