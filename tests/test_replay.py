"""Deterministic replay: for every built-in environment (and the adapters, when their packages
are installed), episodes run by model-free agents through the real Runner into a real SQLite
store replay byte for byte (observations, rewards, flags, info JSON, outcome) from the task and
the actions — the reference agent's, the null agent's, and a scripted agent's detour through
error paths (invalid tools, refused arguments, failing programs and commands, a command
time-out) before the reference — and perturbed variants of tasks (``sharpen run --perturb``).

What does not replay, and is reported so rather than compared silently:

- an environment where a model plays a part (toolshop's simulated customer or tools,
  negotiation's model opponent or critic) declares ``describe().not_replayable``, and replay
  raises :class:`NotReplayable` (attribution reports ``not_replayable``);
- a shell command that prints the sandbox's own directory (``pwd``, ``$HOME``) or file owners
  and times (``ls -l``) reads what a fresh sandbox makes anew — a new temporary directory, its
  own uid, the clock — so its replay differs; :func:`divergence` names that step (nothing is
  masked).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_agent

from sharpen.agents.base import BaseAgent
from sharpen.agents.baselines import act, answer_tool
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.messages import Message
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.trajectory import Action, Trajectory
from sharpen.diagnose.attribution import attribute
from sharpen.diagnose.replay import NotReplayable, divergence, replay, replay_trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store


class DetourAgent(BaseAgent):
    """Plays ``detour`` (actions as ``{tool, arguments}``), then the environment's reference
    (its actions, or its solution through the answer tool), until the episode ends."""

    needs_model = False

    def __init__(self, detour: list[dict[str, Any]]) -> None:
        self.detour = [Action.model_validate(a) for a in detour]

    async def run(self, env: Environment, model: ChatModel, spec: AgentSpec,
                  trajectory: Trajectory) -> None:
        obs, _ = await env.reset(trajectory.task)
        trajectory.messages = [Message(role="user", content=obs)]
        plan = list(self.detour)
        ref = env.reference_actions(trajectory.task)
        if ref is None:
            tool = answer_tool(env.tools)
            solution = env.reference_solution(trajectory.task)
            assert tool is not None and tool.text_argument and solution is not None
            ref = [Action(tool=tool.name, arguments={tool.text_argument: solution})]
        for action in plan + ref:
            await act(env, trajectory, json.dumps(action.model_dump()), action)
            if trajectory.steps[-1].terminated or trajectory.steps[-1].truncated:
                break


def a(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


GENERATED = {"source": "generated", "max_submissions": 4, "test_timeout": 2}
DETOURS: dict[str, tuple[PluginRef, list[dict[str, Any]]]] = {
    "code": (PluginRef(name="code", args=GENERATED), [
        a("submit", code="def f(:\n    pass"), a("nosuch", code="x"),
        a("submit", code="def solve(*args):\n    raise ValueError('no')"),
        a("submit", code="import sys\nsys.exit(3)")]),
    "code-humaneval": (PluginRef(name="code", args={"max_submissions": 3}), [
        a("submit", code="def broken(:"), a("submit", code="")]),
    "sql": (PluginRef(name="sql", args={"max_submissions": 4}), [
        a("submit_sql", query="SELEC 1"), a("submit_sql", query="DROP TABLE x"),
        a("submit_sql", query="SELECT 1"), a("submit_sql", query="SELECT * FROM nosuch")]),
    "shell": (PluginRef(name="shell", args={"command_timeout": 0.5}), [
        a("run", command="cat no_such_file"), a("run", command="echo out; echo err >&2; exit 3"),
        a("run", command="sleep 3"), a("nosuch"), a("run", command="")]),
    "gridsafety": (PluginRef(name="gridsafety", args={"difficulty": "medium"}), [
        a("move", direction="sideways"), a("jump")]),
    "textworld": (PluginRef(name="textworld", args={"difficulty": "medium"}), [
        a("act", command="look"), a("act", command="dance wildly"), a("act", command="inventory"),
        a("act", command="take moon 9 from sky 1"), a("nosuch")]),
    "toolshop": (PluginRef(name="toolshop", args={"difficulty": "medium"}), [
        a("get_order", order_id="#W0000000"), a("find_customer", name=7),
        a("cancel_order", order_id="#W0000000", reason="bored"), a("nosuch")]),
    "negotiation": (PluginRef(name="negotiation", args={"difficulty": "medium"}), [
        a("offer", price="cheap"), a("nosuch")]),
}
"""Per environment: its ``{name, args}`` and a detour through its error paths."""


def run_detour(db: Path, env: PluginRef, detour: list[dict[str, Any]], n: int) -> list[Trajectory]:
    registry = Registry()
    registry.add("agent", "detour", DetourAgent)
    store = Store(f"sqlite:///{db}")
    tasks = registry.create("env", env).list_tasks("test", limit=n)
    spec = AgentSpec(agent=PluginRef(name="detour", args={"detour": detour}),
                     model=PluginRef(name="none"))
    summary = asyncio.run(Runner(store, progress=False, registry=registry).run(
        RunConfig(env=env, agent=spec, tasks=tasks, concurrency=2)))
    return list(store.iter_trajectories(summary.run_id))


def assert_replays(trajectories: list[Trajectory], env: PluginRef) -> None:
    assert trajectories
    for t in trajectories:
        assert t.outcome is not None and t.outcome.error_kind is None, t.outcome
        rebuilt = asyncio.run(replay_trajectory(t, env))
        assert divergence(t, rebuilt) is None, (t.task.id, divergence(t, rebuilt))
        assert len(rebuilt.steps) == len(t.steps)


@pytest.mark.parametrize("label", list(DETOURS))
def test_stored_episodes_replay_byte_for_byte(label: str, tmp_path: Path) -> None:
    env, detour = DETOURS[label]
    tasks = REGISTRY.create("env", env).list_tasks("test", limit=3)
    for agent in ("reference", "null"):
        stored = asyncio.run(run_agent(tmp_path / f"{agent}.db", env, agent, tasks))
        assert_replays(stored, env)
        assert all(t.outcome and t.outcome.success == (agent == "reference") for t in stored)
    detoured = run_detour(tmp_path / "detour.db", env, detour, 3)
    assert_replays(detoured, env)
    # The detour reached its error paths: each stored trajectory has refused actions.
    assert all(any(s.info.get("invalid") for s in t.steps) for t in detoured)


def test_a_replay_on_a_reused_environment_equals_one_on_a_fresh_one(tmp_path: Path) -> None:
    env_ref, detour = DETOURS["textworld"]
    (t,) = run_detour(tmp_path / "d.db", env_ref, detour, 1)
    actions = [s.action for s in t.steps if s.action is not None]
    env = REGISTRY.create("env", env_ref)

    async def twice() -> tuple[Any, Any]:
        try:
            return await replay(env, t.task, actions), await replay(env, t.task, actions)
        finally:
            await env.close()

    first, second = asyncio.run(twice())
    assert first.model_dump(exclude={"steps": {"__all__": {"result": {"feedback"}}}}) == \
        second.model_dump(exclude={"steps": {"__all__": {"result": {"feedback"}}}})
    assert divergence(t, first) is None


def test_a_command_that_reads_the_sandbox_directory_is_named_as_the_divergence(
        tmp_path: Path) -> None:
    env = PluginRef(name="shell")
    (t,) = run_detour(tmp_path / "pwd.db", env, [a("run", command="echo hello"),
                                                 a("run", command="pwd")], 1)
    gap = divergence(t, asyncio.run(replay_trajectory(t, env)))
    assert gap is not None and gap.step == 1 and gap.field == "observation"
    assert "sharpen-sbx-" in gap.stored and gap.stored != gap.replayed


def test_a_changed_stored_step_is_named_as_the_divergence(tmp_path: Path) -> None:
    env, _ = DETOURS["sql"]
    (t,) = asyncio.run(run_agent(tmp_path / "r.db", env, "null",
                                 REGISTRY.create("env", env).list_tasks("test", limit=1)))
    rebuilt = asyncio.run(replay_trajectory(t, env))
    t.steps[0].info["submissions_left"] = 99
    gap = divergence(t, rebuilt)
    assert gap is not None and (gap.step, gap.field) == (0, "info")


@pytest.mark.parametrize("env", [
    PluginRef(name="toolshop", args={"user": {"name": "local"}}),
    PluginRef(name="toolshop", args={"tools": "simulated", "tool_model": {"name": "local"}}),
    PluginRef(name="negotiation", args={"opponent": {"name": "local"}}),
    PluginRef(name="negotiation", args={"critic": {"name": "local"}}),
])
def test_an_environment_where_a_model_plays_a_part_is_reported_not_replayable(
        env: PluginRef, tmp_path: Path) -> None:
    info = REGISTRY.create("env", env).describe()
    assert info.not_replayable and "model" in info.not_replayable
    plain = PluginRef(name=env.name)
    tasks = REGISTRY.create("env", plain).list_tasks("test", limit=1)
    (t,) = asyncio.run(run_agent(tmp_path / "n.db", plain, "null", tasks))
    with pytest.raises(NotReplayable, match="model"):
        asyncio.run(replay_trajectory(t, env))
    assert asyncio.run(attribute(t, env)).status == "not_replayable"
    for name in ("code", "sql", "shell", "gridsafety", "textworld", "toolshop", "negotiation"):
        assert REGISTRY.create("env", PluginRef(name=name)).describe().not_replayable is None


@pytest.mark.parametrize("name,agents", [("reasoning_gym", ("reference", "null")),
                                         ("textarena", ("reference", "null")),
                                         ("gymnasium", ("null",))])
def test_adapter_episodes_replay_byte_for_byte(name: str, agents: tuple[str, ...],
                                               tmp_path: Path) -> None:
    from sharpen.core.errors import UserError

    env = PluginRef(name=name)
    try:
        tasks = REGISTRY.create("env", env).list_tasks("test", limit=2)
    except (UserError, ImportError) as exc:  # an optional package not installed
        pytest.skip(f"{name}: {exc}")
    for agent in agents:
        assert_replays(asyncio.run(run_agent(tmp_path / f"{agent}.db", env, agent, tasks)), env)


@pytest.mark.parametrize("name", ["code", "sql", "toolshop", "textworld", "shell"])
def test_perturbed_episodes_replay_byte_for_byte(name: str, tmp_path: Path) -> None:
    # A perturbed variant (sharpen run --perturb) is rebuilt from the task's metadata at reset,
    # injected tool failures included, so it replays like any task.
    env = PluginRef(name=name, args={"source": "generated"} if name == "code" else {})
    built = REGISTRY.create("env", env)
    assert built.perturbations, name
    tasks = [built.perturb(t, p, seed=i) for i, t in enumerate(built.list_tasks("test", limit=2))
             for p in built.perturbations]
    stored = asyncio.run(run_agent(tmp_path / "p.db", env, "reference", tasks))
    assert {t.task.metadata.get("perturbation") for t in stored} == set(built.perturbations)
    assert_replays(stored, env)
