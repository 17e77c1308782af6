"""Adapters: environments from other libraries, and sharpen environments for other libraries.

- :mod:`~sharpen.envs.adapters.reasoning_gym_env` — env ``reasoning_gym``: any reasoning-gym
  dataset as a single-turn task (extra ``reasoning``);
- :mod:`~sharpen.envs.adapters.textarena_env` — env ``textarena``: single-player TextArena
  games (extra ``textarena``);
- :mod:`~sharpen.envs.adapters.from_gym` — env ``gymnasium`` and :func:`from_gymnasium`: a
  Gymnasium env with text or toy-text observations as a sharpen env (extra ``gym``);
- :mod:`~sharpen.envs.adapters.to_gym` — :func:`to_gymnasium` and
  :func:`register_gymnasium_envs`: every sharpen env as a ``gymnasium.Env`` (extra ``gym``).

Every module here imports without its optional package (the registry imports the env modules
for ``sharpen envs``); the package is imported on use, and a missing one is a ``UserError``
naming the extra to install. Only :mod:`~sharpen.envs.adapters.to_gym` needs gymnasium at
import, so this package imports it on first use of the two functions below.
"""

from __future__ import annotations

from typing import Any


def to_gymnasium(env_name: str, **args: Any) -> Any:
    """The sharpen env ``env_name`` (built with ``args``) as a ``gymnasium.Env``; see
    :class:`sharpen.envs.adapters.to_gym.SharpenGymEnv`."""
    from sharpen.envs.adapters.optional import require

    require("gymnasium")
    from sharpen.envs.adapters.to_gym import SharpenGymEnv

    return SharpenGymEnv(env_name, **args)


def register_gymnasium_envs() -> list[str]:
    """Register every sharpen env with Gymnasium as ``sharpen/NAME-v0``; the ids."""
    from sharpen.envs.adapters.optional import require

    require("gymnasium")
    from sharpen.envs.adapters.to_gym import register_gymnasium_envs as register

    return register()


def from_gymnasium(env: Any, **args: Any) -> Any:
    """A Gymnasium env (an id or an instance) as a sharpen env; see
    :class:`sharpen.envs.adapters.from_gym.GymnasiumEnv`."""
    from sharpen.envs.adapters.from_gym import from_gymnasium as convert

    return convert(env, **args)


__all__ = ["from_gymnasium", "register_gymnasium_envs", "to_gymnasium"]
