"""``check_agent``: does an agent keep the :class:`~sharpen.agents.base.Agent` contract?

Checks:

- ``build`` — the registry builds it (the contract's members present);
- ``needs-model`` — ``needs_model`` is a bool;
- ``episode`` — one or two episodes on a small environment finish without raising, within
  a time limit (an agent that declares ``needs_model = False`` gets a model that refuses
  calls; one that needs a model gets the caller's ``model``, which is required);
- ``trajectory`` — each trajectory is well formed: it has messages and steps, each step has
  its messages and its index, ``ended_at`` is set (not before ``started_at``), usage is
  never negative, and an agent that needs a model records its calls;
- ``serialisable`` — the trajectory survives JSON (what the store writes) unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sharpen.agents.base import AGENT
from sharpen.checks.report import CheckReport, explain, plugin_ref
from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.errors import UserError
from sharpen.core.messages import Usage
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import ENV
from sharpen.models.base import MODEL, ChatModel
from sharpen.runner.runner import NoModel

DEFAULT_ENV = PluginRef(name="code", args={"max_submissions": 1})
"""A small, fast environment: HumanEval with one submission."""
EPISODE_SECONDS = 120.0
"""The most one checked episode may take."""


def usage_fault(usage: Usage) -> str | None:
    """What is negative in ``usage``, or ``None``."""
    bad = [f"{k}={v}" for k, v in usage.model_dump().items() if v is not None and v < 0]
    return ", ".join(bad) or None


def trajectory_faults(t: Trajectory, needs_model: bool) -> list[str]:
    """How ``t`` breaks the shape the runner and the store expect (empty when it is fine)."""
    out: list[str] = []
    if not t.messages:
        out.append("trajectory.messages is empty: record the conversation (the task prompt first)")
    if not t.steps:
        out.append("trajectory.steps is empty: append a Step for each turn")
    for i, s in enumerate(t.steps):
        if s.index != i:
            out.append(f"step {i} has index {s.index}: number steps 0, 1, 2, ... in order")
        if not s.messages:
            out.append(f"step {i} has no messages: put the assistant reply (and the observation) "
                       "in step.messages")
        if (bad := usage_fault(s.usage)) is not None:
            out.append(f"step {i} usage is negative ({bad})")
    if t.ended_at is None:
        out.append("ended_at is not set: set trajectory.ended_at when the episode ends")
    elif t.ended_at < t.started_at:
        out.append("ended_at is before started_at")
    if (bad := usage_fault(t.usage)) is not None:
        out.append(f"trajectory usage is negative ({bad})")
    if needs_model and t.usage.calls == 0:
        out.append("needs_model is True but trajectory.usage records no model call: add each "
                   "completion's usage to the trajectory")
    return out


async def _episode(registry: Registry, ref: PluginRef, env_ref: PluginRef, model: ChatModel,
                   spec: AgentSpec, task_index: int, seed: int) -> Trajectory:
    env = registry.create(ENV, env_ref)
    try:
        task = env.list_tasks(limit=task_index + 1, seed=seed)[task_index]
        agent = registry.create(AGENT, ref)  # fresh per episode, as the runner builds it
        traj = Trajectory(run_id="check", task=task, agent_hash=spec.hash(), seed=seed)
        await asyncio.wait_for(agent.run(env, model, spec, traj), EPISODE_SECONDS)
        traj.outcome = await env.outcome()
        return traj
    finally:
        await env.close()


async def acheck_agent(
    agent: str | PluginRef | dict[str, Any], *, args: dict[str, Any] | None = None,
    env: str | PluginRef | dict[str, Any] = DEFAULT_ENV, env_args: dict[str, Any] | None = None,
    model: str | PluginRef | dict[str, Any] | None = None, registry: Registry = REGISTRY,
    episodes: int = 2, seed: int = 0, max_steps: int = 3,
) -> CheckReport:
    """Check the agent ``agent`` (name, reference or ``{name, args}``; ``args`` merged over
    its own) on ``episodes`` tasks of ``env`` (``env_args`` merged over its args), at most
    ``max_steps`` turns each. An agent that needs a model is run with ``model`` (a model
    name or ``{name, args}``); leaving it out is a :class:`UserError`. Never raises for a
    failed check."""
    ref = plugin_ref(agent, args)
    env_ref = plugin_ref(env, env_args)
    r = CheckReport(kind="agent", name=ref.name)
    try:
        built = registry.create(AGENT, ref)
    except Exception as exc:  # noqa: BLE001 — every failure becomes a problem
        r.fail("build", f"cannot build the agent: {explain(exc)}")
        return r
    r.pass_("build", f"{type(built).__qualname__} meets the Agent contract")
    needs = built.needs_model
    if not isinstance(needs, bool):
        r.fail("needs-model", f"needs_model is {needs!r} ({type(needs).__name__}): make it True or "
               "False (the runner builds no model when it is False)")
        return r
    r.pass_("needs-model", f"needs_model is {needs}")
    if needs and model is None:
        raise UserError(f"agent {ref.name!r} needs a model to be checked",
                        "pass model= (CLI: --model NAME, e.g. --model openai --base-url URL)")
    model_ref = plugin_ref(model, None) if needs and model is not None else None
    if not needs and model is not None:
        r.note("episode", "needs_model is False: the model given was not used")
    spec = AgentSpec(name="check", agent=ref, model=model_ref or AgentSpec().model,
                     params={"temperature": 0.0, "max_tokens": 128},
                     limits=Limits(max_steps=max_steps, max_seconds=EPISODE_SECONDS))
    try:
        chat: ChatModel = registry.create(MODEL, model_ref) if model_ref is not None else NoModel()
    except Exception as exc:  # noqa: BLE001
        r.fail("episode", f"cannot build the model {model_ref.name if model_ref else ''!r}: "
               f"{explain(exc)}")
        return r
    trajs: list[Trajectory] = []
    try:
        for i in range(episodes):
            try:
                trajs.append(await _episode(registry, ref, env_ref, chat, spec, i, seed))
            except TimeoutError:
                r.fail("episode", f"episode {i} on {env_ref.name!r} did not end within "
                       f"{EPISODE_SECONDS:.0f} s: stop at spec.limits.max_steps")
                return r
            except Exception as exc:  # noqa: BLE001
                r.fail("episode", f"episode {i} on {env_ref.name!r} raised {explain(exc)}")
                return r
    finally:
        await chat.aclose()
    steps = sum(len(t.steps) for t in trajs)
    r.pass_("episode", f"{len(trajs)} episode(s) on {env_ref.name!r} ended ({steps} steps)")
    faults = [f for t in trajs for f in trajectory_faults(t, needs)]
    for fault in dict.fromkeys(faults):  # each fault once, in order
        r.fail("trajectory", fault)
    if not faults:
        r.pass_("trajectory", "messages, steps, ended_at and usage well formed")
    for t in trajs:
        try:
            back = Trajectory.model_validate_json(t.model_dump_json())
        except Exception as exc:  # noqa: BLE001
            r.fail("serialisable", f"the trajectory does not survive JSON: {explain(exc)}; keep "
                   "step.info and arguments JSON-serialisable")
            break
        if back.model_dump(mode="json") != t.model_dump(mode="json"):
            r.fail("serialisable", "the trajectory changes through JSON: keep step.info and "
                   "arguments to JSON types (str, number, bool, list, dict)")
            break
    else:
        r.pass_("serialisable", "the trajectories survive JSON unchanged")
    return r


def check_agent(
    agent: str | PluginRef | dict[str, Any], *, args: dict[str, Any] | None = None,
    env: str | PluginRef | dict[str, Any] = DEFAULT_ENV, env_args: dict[str, Any] | None = None,
    model: str | PluginRef | dict[str, Any] | None = None, registry: Registry = REGISTRY,
    episodes: int = 2, seed: int = 0, max_steps: int = 3,
) -> CheckReport:
    """:func:`acheck_agent` from synchronous code."""
    return asyncio.run(acheck_agent(agent, args=args, env=env, env_args=env_args, model=model,
                                    registry=registry, episodes=episodes, seed=seed,
                                    max_steps=max_steps))
