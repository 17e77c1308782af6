"""Stated confidence (sharpen.agents.confidence): offered on an environment's final tools only
when the agent asks, stripped before the environment sees the action, carried by the runner
to ``Outcome.components["confidence"]``, and read by ``sharpen report`` as calibration.

The model is a scripted in-process ChatModel with native tool calls (no weights), so what it
states is known; the environments, runner, store and report CLI are the real ones."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import sharpen

from sharpen.agents import confidence
from sharpen.agents.tool_agent import ToolAgent
from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.errors import UserError
from sharpen.core.messages import Message, ToolCall, ToolSpec, Usage
from sharpen.core.outcome import Outcome
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import TRIAL, Action, Step, Trajectory
from sharpen.envs.base import ENV, Environment, StepResult
from sharpen.models.base import Completion
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store

CODE = PluginRef(name="code", args={"source": "generated", "max_submissions": 1})
WRONG = "def nothing():\n    return None\n"


class Scripted:
    """A native-tools model that answers each task with one planned ``submit`` call (the code
    and the raw ``confidence`` argument, left out when ``None``), or with ``text`` as a plain
    reply; it records the tools each call was shown."""

    name = "scripted"
    supports_tools = True

    def __init__(self, plan: dict[str, tuple[str, Any]], text: str | None = None) -> None:
        self.plan = plan  # task prompt -> (code, confidence)
        self.text = text
        self.seen_tools: list[list[ToolSpec] | None] = []

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None) -> Completion:
        self.seen_tools.append(tools)
        usage = Usage(input_tokens=10, output_tokens=5, calls=1)
        if self.text is not None:
            return Completion(message=Message(role="assistant", content=self.text), usage=usage)
        code, conf = self.plan[messages[1].content or ""]
        args: dict[str, Any] = {"code": code}
        if conf is not None:
            args["confidence"] = conf
        call = ToolCall(id="c1", name="submit", arguments=args)
        return Completion(message=Message(role="assistant", tool_calls=[call]), usage=usage)

    async def aclose(self) -> None:
        return None


class Spy:
    """An environment that records every action it is sent and forwards to ``inner``."""

    def __init__(self, inner: Environment) -> None:
        self.inner = inner
        self.actions: list[Action] = []

    @property
    def tools(self) -> list[ToolSpec]:
        return self.inner.tools

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        return await self.inner.reset(task)

    async def step(self, action: Action) -> StepResult:
        self.actions.append(action)
        return await self.inner.step(action)

    async def outcome(self) -> Outcome:
        return await self.inner.outcome()


def _tasks(n: int) -> tuple[Environment, list[TaskSpec], list[str]]:
    env = REGISTRY.create(ENV, CODE)
    tasks = env.list_tasks(limit=n, seed=0)[:n]
    prompts = [asyncio.run(env.reset(t))[0] for t in tasks]
    return env, tasks, prompts


SPEC = AgentSpec(model=PluginRef(name="scripted"), limits=Limits(max_steps=2))


async def _play(agent: ToolAgent, model: Scripted, task: TaskSpec) -> tuple[Spy, Trajectory]:
    spy = Spy(REGISTRY.create(ENV, CODE))
    traj = Trajectory(task=task, agent_hash="h")
    await agent.run(spy, model, SPEC, traj)  # type: ignore[arg-type]
    traj.outcome = confidence.attach(await spy.outcome(), traj)
    return spy, traj


def test_the_model_sees_confidence_on_the_final_tool_only_when_the_agent_asks() -> None:
    env, tasks, prompts = _tasks(1)
    seen = {}
    for asked in (False, True):
        model = Scripted({prompts[0]: (WRONG, None)})
        _, traj = asyncio.run(_play(ToolAgent(confidence=asked), model, tasks[0]))
        (submit,) = model.seen_tools[0] or []
        seen[asked] = submit.parameters["properties"]
        assert ("confidence" in traj.messages[0].content) is asked  # the system prompt asks
    assert "confidence" not in seen[False]
    assert seen[True]["confidence"]["type"] == "number" and "code" in seen[True]
    assert "confidence" not in env.tools[0].parameters["properties"]  # env's tools untouched
    # Only final tools get it: toolshop's finish and transfer_to_human, not its look-ups.
    shop = REGISTRY.create(ENV, PluginRef(name="toolshop")).tools
    offered = {t.name for t in confidence.offer(shop)
               if "confidence" in t.parameters.get("properties", {})}
    assert offered == {"finish", "transfer_to_human"}
    # An environment without a final tool (textworld ends on an ordinary move) gets nothing.
    world = REGISTRY.create(ENV, PluginRef(name="textworld")).tools
    assert confidence.offer(world) == world and confidence.instructions(world) == ""


def test_a_stated_confidence_lands_in_the_outcome_and_the_environment_never_sees_it() -> None:
    env, tasks, prompts = _tasks(1)
    ref = env.reference_solution(tasks[0])
    assert ref is not None
    model = Scripted({prompts[0]: (ref, 0.85)})
    spy, traj = asyncio.run(_play(ToolAgent(confidence=True), model, tasks[0]))
    assert [a.arguments for a in spy.actions] == [{"code": ref}]
    assert traj.steps[0].action is not None and traj.steps[0].action.arguments == {"code": ref}
    assert traj.steps[0].info[confidence.STATED] == 0.85
    assert traj.outcome is not None and traj.outcome.success
    assert traj.outcome.components["confidence"] == 0.85
    # The verifier's own components are kept beside it.
    assert {k for k in traj.outcome.components if k != "confidence"}


@pytest.mark.parametrize("bad", ["high", 1.5, -0.1, True, float("nan"), [0.5]])
def test_a_bad_confidence_is_dropped_with_a_note_and_is_not_an_invalid_action(bad: Any) -> None:
    env, tasks, prompts = _tasks(1)
    ref = env.reference_solution(tasks[0])
    assert ref is not None
    model = Scripted({prompts[0]: (ref, bad)})
    spy, traj = asyncio.run(_play(ToolAgent(confidence=True), model, tasks[0]))
    assert [a.arguments for a in spy.actions] == [{"code": ref}]
    step = traj.steps[0]
    assert step.info[confidence.STATED] is None
    assert "dropped" in step.info[confidence.DROPPED]
    assert traj.invalid_actions == 0 and step.invalid_action is None
    assert traj.outcome is not None and traj.outcome.success
    assert "confidence" not in traj.outcome.components


def test_a_fenced_answer_states_confidence_on_a_line_after_the_block() -> None:
    env, tasks, _ = _tasks(1)
    ref = env.reference_solution(tasks[0])
    assert ref is not None
    reply = f"```python\n{ref}```\nConfidence: 0.4\n"
    spy, traj = asyncio.run(_play(ToolAgent(protocol="text", confidence=True),
                                  Scripted({}, text=reply), tasks[0]))
    assert spy.actions[0].arguments == {"code": ref}
    assert traj.outcome is not None and traj.outcome.components["confidence"] == 0.4
    # Without the arg the same line is ignored: nothing is recorded.
    spy, traj = asyncio.run(_play(ToolAgent(protocol="text"), Scripted({}, text=reply), tasks[0]))
    assert confidence.STATED not in traj.steps[0].info
    assert traj.outcome is not None and "confidence" not in traj.outcome.components


def test_the_last_accepted_final_call_of_the_last_trial_counts() -> None:
    def step(i: int, value: float | None, **info: Any) -> Step:
        return Step(index=i, messages=[], info={confidence.STATED: value, **info})

    traj = Trajectory(task=TaskSpec(id="t", env="code"), agent_hash="h")
    traj.steps = [step(0, 0.2, **{TRIAL: 0}), step(1, 0.9, **{TRIAL: 1}),
                  Step(index=2, messages=[], info={TRIAL: 1})]
    assert confidence.stated(traj) == 0.9
    traj.steps.append(step(3, 0.7, **{TRIAL: 1}).model_copy(update={"invalid_action": "bad"}))
    assert confidence.stated(traj) == 0.9  # an action the env refused states nothing
    traj.steps.append(step(4, None, **{TRIAL: 1}))
    assert confidence.stated(traj) is None  # the answer that counts stated none
    traj.steps = [step(0, 0.2, **{TRIAL: 0}), Step(index=1, messages=[], info={TRIAL: 1})]
    assert confidence.stated(traj) is None  # the last trial never answered
    kept = Outcome(success=True, components={"confidence": 0.5})
    traj.steps = [step(0, 0.9)]
    assert confidence.attach(kept, traj) is kept  # an environment's own value wins


def test_confidence_must_be_a_bool() -> None:
    with pytest.raises(UserError, match="confidence must be true or false"):
        ToolAgent(confidence="yes")  # type: ignore[arg-type]


def test_report_json_fills_calibration_from_stated_confidences(tmp_path: Path) -> None:
    env, tasks, prompts = _tasks(4)
    refs = [env.reference_solution(t) for t in tasks]
    assert all(refs)
    # Two right answers stated at 0.9 and 0.6, two wrong ones at 0.3 and 0.8.
    plan = {prompts[0]: (refs[0], 0.9), prompts[1]: (refs[1], 0.6),
            prompts[2]: (WRONG, 0.3), prompts[3]: (WRONG, 0.8)}
    spec = SPEC.model_copy(update={"agent": PluginRef(name="tool", args={"confidence": True})})
    db = f"sqlite:///{tmp_path / 's.db'}"
    with Store(db) as store:
        config = RunConfig(env=CODE, agent=spec, tasks=tasks, epochs=1, concurrency=2, seed=0)
        runner = Runner(store, progress=False, model_factory=lambda _: Scripted(plan))
        summary = asyncio.run(runner.run(config))
    assert summary.n_trajectories == 4
    out = sharpen("report", summary.run_id, "--json", "--store", db, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    cal = json.loads(out.stdout)["reliability"]["calibration"]
    assert cal["available"] is True and cal["n"] == 4
    # By hand: one trial per bin, so ECE = mean |y − p| = (0.1 + 0.4 + 0.3 + 0.8) / 4 = 0.4;
    # Brier = mean (p − y)² = (0.01 + 0.16 + 0.09 + 0.64) / 4 = 0.225.
    assert cal["ece"] == pytest.approx(0.4)
    assert cal["brier"] == pytest.approx(0.225)
    assert cal["mean_confidence"] == pytest.approx(0.65) and cal["accuracy"] == pytest.approx(0.5)
    text = sharpen("report", summary.run_id, "--store", db, cwd=tmp_path, timeout=300)
    assert "ECE 0.400 · Brier 0.225" in text.stdout, text.stdout


def test_sharpen_run_agent_arg_reaches_the_agent(tmp_path: Path) -> None:
    out = sharpen("run", "code", "-E", "source=generated", "--agent-arg", "confidence=maybe",
                  "-n", "1", "-q", "--store", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path)
    assert out.returncode == 2
    assert "confidence must be true or false, got 'maybe'" in out.stdout + out.stderr
