"""Counterfactual attribution on planted errors: the reference actions of a task with step
``k``'s action replaced by a wrong one, run by a scripted agent through the real Runner into a
real SQLite store; each planted episode must fail, and attribution must name step ``k`` as
decisive in at least 90% of at least 10 planted cases per environment (code, sql, textworld,
toolshop). The counts are printed.

Where ``k`` can be: in textworld every reference step is needed, so any; in toolshop the
look-ups are redundant for scripted actions (they carry the ids), so the planted step is a
write (a cancel, a return, an exchange, an address change); code and sql are one-answer
environments — the reference is one submission, so the planted error is the first
submission, ``k = 0`` (a failed episode there is always fixed by submitting the reference
answer at its first step).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import sharpen

from sharpen.agents.base import BaseAgent
from sharpen.agents.baselines import act
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.messages import Message
from sharpen.core.registry import PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory
from sharpen.diagnose.attribution import NAME, attribute, attribute_run, reference_fix
from sharpen.envs.base import Environment
from sharpen.envs.code.tasks import materialize
from sharpen.models.base import ChatModel
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store

WRITES = ("cancel_order", "return_items", "exchange_items", "update_address")


class PlanAgent(BaseAgent):
    """Plays the actions ``plans[task id]`` (``{tool, arguments}`` each) in order."""

    needs_model = False

    def __init__(self, plans: dict[str, list[dict[str, Any]]]) -> None:
        self.plans = {k: [Action.model_validate(a) for a in v] for k, v in plans.items()}

    async def run(self, env: Environment, model: ChatModel, spec: AgentSpec,
                  trajectory: Trajectory) -> None:
        obs, _ = await env.reset(trajectory.task)
        trajectory.messages = [Message(role="user", content=obs)]
        for action in self.plans[trajectory.task.id]:
            await act(env, trajectory, json.dumps(action.model_dump()), action)
            if trajectory.steps[-1].terminated or trajectory.steps[-1].truncated:
                break


def reference(env: Environment, task: TaskSpec) -> list[Action]:
    """The reference as actions (a one-answer environment's: its answer submitted)."""
    fix = reference_fix(env, task, [], 0)
    actions = env.reference_actions(task)
    assert actions is not None or fix is not None
    return actions if actions is not None else [fix]  # type: ignore[list-item]


def plant(name: str, env: Environment, task: TaskSpec, i: int) -> tuple[int, Action] | None:
    """Where to plant the ``i``-th case on ``task`` and the wrong action (``None``: no place)."""
    ref = reference(env, task)
    if name == "textworld":
        return i % len(ref), Action(tool="act", arguments={"command": "look"})
    if name == "toolshop":
        writes = [k for k, a in enumerate(ref) if a.tool in WRITES]
        if not writes:
            return None
        k = writes[i % len(writes)]
        return k, Action(tool="get_order", arguments={"order_id": "#W0000000"})
    if name == "sql":
        return 0, Action(tool="submit_sql", arguments={
            "query": f"SELECT * FROM ({ref[0].arguments['query']}) LIMIT 0"})
    entry = materialize(task).entry_point
    return 0, Action(tool="submit", arguments={
        "code": f"def {entry}(*args, **kwargs):\n    return None\n"})


DETOURS = {
    "textworld": lambda actions: Action(tool="act", arguments={"command": "inventory"}),
    "toolshop": lambda actions: actions[0],  # the first look-up again (it changes nothing)
}
"""A state-neutral action to insert before the planted error in every other case."""

ENVS = {
    "code": PluginRef(name="code", args={"source": "generated", "max_submissions": 1}),
    "sql": PluginRef(name="sql", args={"max_submissions": 1}),
    "textworld": PluginRef(name="textworld", args={"difficulty": "medium"}),
    "toolshop": PluginRef(name="toolshop", args={"difficulty": "medium"}),
}
CASES = 12


def planted_run(db: Path, env_ref: PluginRef, name: str) -> tuple[str, dict[str, int]]:
    """A run of planted cases on ``CASES`` tasks of ``env_ref`` into a store at ``db``: the run
    id and each task's planted step."""
    registry = Registry()
    registry.add("agent", "plan", PlanAgent)
    env = registry.create("env", env_ref)
    tasks, plans, where = [], {}, {}
    for i, task in enumerate(env.list_tasks("test", limit=3 * CASES)):
        spot = plant(name, env, task, i)
        if spot is None:
            continue
        k, wrong = spot
        actions = reference(env, task)
        actions[k] = wrong
        if i % 2 and k > 0 and name in DETOURS:  # a harmless extra action before the error
            actions.insert(k // 2, DETOURS[name](actions))
            k += 1
        tasks.append(task)
        plans[task.id] = [a.model_dump() for a in actions]
        where[task.id] = k
        if len(tasks) == CASES:
            break
    spec = AgentSpec(agent=PluginRef(name="plan", args={"plans": plans}),
                     model=PluginRef(name="none"))
    summary = asyncio.run(Runner(Store(f"sqlite:///{db}"), progress=False, registry=registry)
                          .run(RunConfig(env=env_ref, agent=spec, tasks=tasks, concurrency=2)))
    return summary.run_id, where


@pytest.mark.parametrize("name", list(ENVS))
def test_attribution_finds_the_planted_decisive_step(name: str, tmp_path: Path) -> None:
    db = tmp_path / "planted.db"
    run_id, where = planted_run(db, ENVS[name], name)
    store = Store(f"sqlite:///{db}")
    stored = list(store.iter_trajectories(run_id))
    assert len(stored) >= 10
    assert all(t.outcome is not None and t.outcome.counts and not t.outcome.success
               for t in stored), "every planted error makes its episode fail"
    summary = asyncio.run(attribute_run(store, run_id))
    found = sum(r.decisive_step == where[r.task_id] for r in summary.results)
    print(f"{name}: planted step found {found}/{len(stored)}; decisive steps "
          f"{summary.decisive_steps}, stages {summary.decisive_stages}, statuses "
          f"{summary.statuses}")
    assert found >= 0.9 * len(stored)
    records = [fb for t in store.iter_trajectories(run_id) for fb in t.feedback
               if fb.source == "detector" and fb.name == NAME]
    assert len(records) == summary.stored == summary.statuses.get("flipped", 0)
    assert all(fb.target.kind == "step" and fb.value == fb.target.step_index and
               "replacing" in fb.rationale for fb in records)
    again = asyncio.run(attribute_run(store, run_id))
    assert again.stored == 0 and again.decisive_steps == summary.decisive_steps


def test_a_failure_no_single_fix_can_turn_is_reported_no_flip(tmp_path: Path) -> None:
    # Two wrong writes in toolshop: a fix of either one leaves the other (the later actions are
    # kept), so no single fix turns the episode.
    registry = Registry()
    registry.add("agent", "plan", PlanAgent)
    env_ref = ENVS["toolshop"]
    env = registry.create("env", env_ref)
    task = next(t for t in env.list_tasks("test", limit=20)
                if sum(a.tool in WRITES for a in reference(env, t)) >= 2)
    actions = reference(env, task)
    wrong = Action(tool="get_order", arguments={"order_id": "#W0000000"})
    actions = [wrong if a.tool in WRITES else a for a in actions]
    spec = AgentSpec(agent=PluginRef(name="plan", args={
        "plans": {task.id: [a.model_dump() for a in actions]}}), model=PluginRef(name="none"))
    store = Store(f"sqlite:///{tmp_path / 'two.db'}")
    summary = asyncio.run(Runner(store, progress=False, registry=registry).run(
        RunConfig(env=env_ref, agent=spec, tasks=[task])))
    (t,) = store.iter_trajectories(summary.run_id)
    result = asyncio.run(attribute(t, env_ref))
    assert result.status == "no_flip" and result.decisive_step is None
    assert len(result.attempts) >= 2 and not any(a.success for a in result.attempts)


def test_sharpen_attribute_json_end_to_end(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    run_id, where = planted_run(db, ENVS["textworld"], "textworld")
    res = sharpen("attribute", run_id, "--limit", "4", "--json", cwd=tmp_path,
                  env={"SHARPEN_STORE": f"sqlite:///{db}"})
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["attributed"] == 4 and data["flipped"]["count"] == 4 and data["stored"] == 4
    assert all(r["decisive_step"] == where[r["task_id"]] for r in data["results"])
    assert sum(data["decisive_steps"].values()) == 4
    table = sharpen("attribute", run_id, "--no-progress", cwd=tmp_path,
                    env={"SHARPEN_STORE": f"sqlite:///{db}"})
    assert table.returncode == 0, table.stderr
    assert "Decisive steps" in table.stdout and "0 new records stored" not in table.stdout
    bad = sharpen("attribute", run_id, "--fix", "oracle", cwd=tmp_path,
                  env={"SHARPEN_STORE": f"sqlite:///{db}"})
    assert bad.returncode == 2 and "unknown fix" in bad.stderr


def test_the_conversation_before_a_step_is_the_prompt_and_the_earlier_steps(
        tmp_path: Path) -> None:
    from sharpen.diagnose.resample import conversation_before

    run_id, _ = planted_run(tmp_path / "c.db", ENVS["textworld"], "textworld")
    t = next(t for t in Store(f"sqlite:///{tmp_path / 'c.db'}").iter_trajectories(run_id)
             if len(t.steps) >= 3)
    before = conversation_before(t, 2)
    assert before is not None and len(before) == 1 + 2 * 2
    assert before[0].content == t.messages[0].content and before[-1] == t.steps[1].messages[-1]
    assert conversation_before(t.model_copy(update={"messages": []}), 2) is None


def test_resample_needs_a_run_whose_agent_has_a_model(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run_id, _ = planted_run(db, ENVS["sql"], "sql")
    res = sharpen("attribute", run_id, "--fix", "resample", cwd=tmp_path,
                  env={"SHARPEN_STORE": f"sqlite:///{db}"})
    assert res.returncode == 2 and "uses no model" in res.stderr


@pytest.mark.slow
def test_a_resampled_fix_from_the_embedded_model(tmp_path: Path) -> None:
    # The embedded model is asked for step k's action given the stored conversation; its
    # replies are read as actions and replayed (whether one flips is the model's business).
    from sharpen.diagnose.resample import ModelFix
    from sharpen.models.base import MODEL

    db = tmp_path / "m.db"
    run_id, _ = planted_run(db, ENVS["textworld"], "textworld")
    t = next(iter(Store(f"sqlite:///{db}").iter_trajectories(run_id)))
    spec = AgentSpec(model=PluginRef(name="local"),
                     params={"temperature": 0.0, "max_tokens": 40})
    model = Registry().create(MODEL, spec.model)

    async def go() -> Any:
        try:
            return await attribute(t, ENVS["textworld"], ModelFix(model, spec, samples=2))
        finally:
            await model.aclose()

    result = asyncio.run(go())
    print(result.status, [(a.step, a.action.arguments, a.success) for a in result.attempts])
    assert result.status in ("flipped", "no_flip") and result.attempts
    assert all(a.action.tool == "act" and isinstance(a.action.arguments.get("command"), str)
               for a in result.attempts)
    assert result.status == "no_flip" or result.decisive_step is not None


def test_a_trajectory_whose_observations_alone_differ_is_attributed_with_a_note(
        tmp_path: Path) -> None:
    # `pwd` prints each fresh sandbox's own directory, so the replay's text differs; rewards,
    # info and the outcome replay, and the decisive step (the reference command skipped) is
    # found all the same.
    registry = Registry()
    registry.add("agent", "plan", PlanAgent)
    env_ref = PluginRef(name="shell")
    env = registry.create("env", env_ref)
    task = env.list_tasks("test", limit=1)[0]
    ref = reference(env, task)
    plan = [Action(tool="run", arguments={"command": "pwd"}), ref[-1]]  # pwd, then done
    spec = AgentSpec(agent=PluginRef(name="plan", args={
        "plans": {task.id: [a.model_dump() for a in plan]}}), model=PluginRef(name="none"))
    store = Store(f"sqlite:///{tmp_path / 'pwd.db'}")
    summary = asyncio.run(Runner(store, progress=False, registry=registry).run(
        RunConfig(env=env_ref, agent=spec, tasks=[task])))
    (t,) = store.iter_trajectories(summary.run_id)
    assert t.outcome is not None and not t.outcome.success
    result = asyncio.run(attribute(t, env_ref))
    assert result.status == "flipped" and result.decisive_step == 0
    assert result.corrected == ref[0] and result.note.startswith("observations differ")
    assert "step 0 observation" in result.note
