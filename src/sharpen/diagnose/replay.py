"""Deterministic replay: an episode rebuilt from its task and its actions.

An environment's episode is a function of the task (its seed is in the :class:`TaskSpec`) and
the actions played — unless a model plays a part (a simulated customer, a model opponent),
which the environment declares in ``describe().not_replayable``. :func:`replay` rebuilds such
an episode on a fresh environment: ``reset(task)``, the actions in order (stopping once the
environment ends the episode), and the environment's verdict, ``outcome()``.

:func:`replay_trajectory` replays a stored trajectory on an environment built as its run built
it (the registry and the run manifest's ``{name, args}``), one ``reset`` per trial of a
several-trial trajectory (``Step.info[TRIAL]``); :func:`divergence` compares a replay with the
stored steps byte for byte — observation, reward, the environment's flags and the JSON of its
``info`` — and names the first step that differs. What the comparison leaves out, because the
agent wrote it and not the environment: steps whose reply held no action (the environment never
saw them), the info keys in :data:`AGENT_INFO` and the ``truncated`` flag of a step the agent
cut short at a limit (``info["limit"]``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from sharpen.core.outcome import Outcome
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import TRIAL, TRIAL_PROMPT, Action, Step, Trajectory
from sharpen.envs.base import ENV, Environment, StepResult

LIMIT = "limit"
"""``Step.info`` key the tool agent writes when it cuts an episode short at a limit."""

AGENT_INFO = (LIMIT, TRIAL, TRIAL_PROMPT)
"""``Step.info`` keys that agents add to what the environment returned (not compared)."""


class NotReplayable(RuntimeError):
    """The environment declares that its episodes are not a function of the task and the
    actions (``describe().not_replayable`` says why)."""


class ReplayStep(BaseModel):
    """One action replayed and the environment's answer."""

    index: int
    """The step's index in the trajectory replayed (its place in ``actions`` for
    :func:`replay`)."""
    action: Action
    result: StepResult


class Replay(BaseModel):
    """An episode rebuilt from a task and actions."""

    prompts: list[str] = Field(default_factory=list)
    """The first observation of each ``reset`` (one per trial)."""
    steps: list[ReplayStep] = Field(default_factory=list)
    outcome: Outcome
    """The environment's verdict after the last action."""
    ended: bool = False
    """The environment ended the episode (terminated or truncated) at the last step; actions
    after that were not played."""


class Divergence(BaseModel):
    """Where a replay first differs from the stored trajectory."""

    step: int | None
    """The stored step's index (``None``: the outcome, or the number of steps)."""
    field: str
    """``observation``, ``reward``, ``terminated``, ``truncated``, ``info``, ``steps`` or
    ``outcome``."""
    stored: str
    replayed: str


def not_replayable(env: Environment) -> str | None:
    """Why episodes of ``env`` cannot be replayed, or ``None`` when they can."""
    return env.describe().not_replayable


async def replay(env: Environment, task: TaskSpec, actions: Sequence[Action],
                 indexes: Sequence[int] | None = None) -> Replay:
    """Reset ``env`` on ``task`` and apply ``actions`` in order, until the environment ends
    the episode; the steps and its ``outcome()``. ``indexes`` (default ``0..n-1``) number the
    steps. Raises :class:`NotReplayable` when the environment declares it is not. The caller
    builds and closes ``env``."""
    why = not_replayable(env)
    if why is not None:
        raise NotReplayable(why)
    prompt, _ = await env.reset(task)
    done = Replay(prompts=[prompt], outcome=Outcome(success=False))
    await _play(env, actions, list(indexes) if indexes is not None else list(range(len(actions))),
                done)
    done.outcome = await env.outcome()
    return done


async def _play(env: Environment, actions: Sequence[Action], indexes: list[int],
                into: Replay) -> None:
    for index, action in zip(indexes, actions, strict=True):
        result = await env.step(action.model_copy(deep=True))
        into.steps.append(ReplayStep(index=index, action=action, result=result))
        if result.terminated or result.truncated:
            into.ended = True
            return


def played(trajectory: Trajectory) -> list[list[tuple[int, Action]]]:
    """The actions the environment saw, per trial: ``(step index, action)``; steps whose
    reply held no action are left out."""
    trials: dict[int, list[tuple[int, Action]]] = {}
    for s in trajectory.steps:
        trial = int(s.info.get(TRIAL, 0))
        trials.setdefault(trial, [])
        if s.action is not None:
            trials[trial].append((s.index, s.action))
    return [trials[t] for t in sorted(trials)] or [[]]


def run_env(store_env: PluginRef | dict[str, Any], registry: Registry = REGISTRY) -> Environment:
    """The environment of a run, built from its manifest's ``{name, args}``."""
    ref = store_env if isinstance(store_env, PluginRef) else PluginRef.model_validate(store_env)
    return registry.create(ENV, ref)


async def replay_trajectory(trajectory: Trajectory, env_ref: PluginRef,
                            registry: Registry = REGISTRY) -> Replay:
    """Replay ``trajectory`` on a fresh environment built from ``env_ref`` (its run's
    manifest ``env``): one ``reset(task)`` per trial, each trial's actions in order. Raises
    :class:`NotReplayable` when the environment declares it is not."""
    env = run_env(env_ref, registry)
    try:
        why = not_replayable(env)
        if why is not None:
            raise NotReplayable(why)
        done = Replay(outcome=Outcome(success=False))
        for trial in played(trajectory):
            prompt, _ = await env.reset(trajectory.task)
            done.prompts.append(prompt)
            done.ended = False
            await _play(env, [a for _, a in trial], [i for i, _ in trial], done)
        done.outcome = await env.outcome()
        return done
    finally:
        await env.close()


def info_json(info: dict[str, Any]) -> str:
    """``info`` as compared: the environment's keys (not :data:`AGENT_INFO`), as canonical
    JSON (sorted keys, the store's rendering of tuples and other values)."""
    own = {k: v for k, v in info.items() if k not in AGENT_INFO}
    return json.dumps(json.loads(json.dumps(own, default=str)), sort_keys=True)


def _fields(step: Step | StepResult) -> dict[str, str]:
    return {"observation": step.observation or "", "reward": repr(float(step.reward)),
            "terminated": str(step.terminated), "truncated": str(step.truncated),
            "info": info_json(step.info)}


def divergence(trajectory: Trajectory, rebuilt: Replay,
               ignore: Sequence[str] = ()) -> Divergence | None:
    """The first place where ``rebuilt`` differs from ``trajectory``'s stored steps (see the
    module doc for what is compared), or ``None`` when they are identical; the step fields
    named in ``ignore`` (e.g. ``observation``) are not compared."""
    stored = [s for s in trajectory.steps if s.action is not None]
    for s, r in zip(stored, rebuilt.steps, strict=False):
        want, got = _fields(s), _fields(r.result)
        if LIMIT in s.info:  # the agent, not the environment, cut this step short
            want.pop("truncated")
            got.pop("truncated")
        for name, value in want.items():
            if name in ignore:
                continue
            if got[name] != value:
                return Divergence(step=s.index, field=name, stored=value, replayed=got[name])
    if len(stored) != len(rebuilt.steps):
        at = stored[len(rebuilt.steps)].index if len(stored) > len(rebuilt.steps) else None
        return Divergence(step=at, field="steps", stored=str(len(stored)),
                          replayed=str(len(rebuilt.steps)))
    if trajectory.outcome is not None and trajectory.outcome.error_kind is None:
        want_o = _outcome_key(trajectory.outcome)
        got_o = _outcome_key(rebuilt.outcome)
        if want_o != got_o:
            return Divergence(step=None, field="outcome", stored=want_o, replayed=got_o)
    return None


def _outcome_key(o: Outcome) -> str:
    return json.dumps({"success": o.success, "reward": o.reward, "components": o.components},
                      sort_keys=True)
