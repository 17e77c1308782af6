"""The shell environment: generation, sandboxed commands, hidden checks, baselines, re-scoring."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sharpen.agents.text_protocol import parse_text_action
from sharpen.core import AgentSpec, PluginRef
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY
from sharpen.core.trajectory import Action
from sharpen.envs.base import Environment, Generator
from sharpen.envs.generation import SPLITS
from sharpen.envs.shell import ShellEnv, ShellTaskGenerator, ShellVerifier, build, materialize
from sharpen.envs.shell.tasks import FAMILIES, PRESETS, resolve_knobs
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store

DIFFICULTIES = tuple(PRESETS)


def test_registered_and_protocols():
    assert REGISTRY.get("env", "shell") is ShellEnv
    assert REGISTRY.get("verifier", "shell") is ShellVerifier
    env = ShellEnv()
    assert isinstance(env, Environment) and isinstance(ShellTaskGenerator(), Generator)
    info = env.describe()
    assert info.name == "shell" and info.tools == ["run", "done"]
    assert set(info.difficulties) == {"easy", "medium", "hard"}
    assert {k.name for k in info.knobs} >= {"family", "size", "n_files"}
    with pytest.raises(UserError):
        ShellEnv(difficulty="impossible")
    with pytest.raises(UserError):
        ShellEnv(knobs={"size": 10_000})


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_generation_is_deterministic_and_splits_are_disjoint(difficulty):
    env = ShellEnv(difficulty=difficulty)
    ids = {}
    for split in SPLITS:
        tasks = env.list_tasks(split, limit=50, seed=0)
        assert len(tasks) == 50 and len({t.id for t in tasks}) == 50
        assert all(t.split == split for t in tasks)
        assert tasks == ShellEnv(difficulty=difficulty).list_tasks(split, limit=50, seed=0)
        assert tasks[:10] == env.list_tasks(split, limit=10, seed=0)
        ids[split] = {t.seed for t in tasks}
        for t in tasks[:10]:  # byte-for-byte from (seed, knobs), in any order
            again = build(t.seed, resolve_knobs(t.knobs))
            assert again.model_dump_json() == materialize(t).model_dump_json()
    assert not (ids["train"] & ids["val"]) and not (ids["val"] & ids["test"])
    assert not (ids["train"] & ids["test"])
    assert env.list_tasks("test", 5, seed=1) != env.list_tasks("test", 5, seed=0)


def test_every_family_is_generated_and_solvable():
    gen = ShellTaskGenerator()
    for family in FAMILIES:
        for difficulty in ("easy", "hard"):
            knobs = {**PRESETS[difficulty], "family": family}
            task = gen.sample(knobs, seed=3, split="val")
            assert task.metadata["family"] == family and task.env == "shell"
            assert gen.is_solvable(task), task.id


async def test_observation_has_exit_code_stdout_and_stderr():
    env = ShellEnv(knobs={"family": "sort"}, max_commands=3)
    task = env.list_tasks("test", 1)[0]
    prompt, info = await env.reset(task)
    try:
        assert "numbers.txt" in prompt and "sorted.txt" in prompt and info["commands_left"] == 3
        r = await env.step(Action(tool="run", arguments={"command": "echo out; echo err >&2; exit 3"}))
        assert "exit code: 3" in r.observation
        assert "out" in r.observation and "err" in r.observation and not r.terminated
        assert r.feedback and r.feedback[0].source == "execution" and r.feedback[0].value == 3
        r = await env.step(Action(tool="run", arguments={"command": "   "}))
        assert r.info.get("invalid") and not r.terminated  # an empty command is not counted
        r = await env.step(Action(tool="run", arguments={"command": "sort -n numbers.txt | head -1"}))
        assert "exit code: 0" in r.observation
        assert r.observation.split("stdout:\n")[1].split("\n")[0].lstrip("-").isdigit()
        r = await env.step(Action(tool="run", arguments={"command": "ls"}))
        assert r.terminated and r.reward == 0.0  # max_commands reached, task not done
        assert not (await env.outcome()).success
    finally:
        await env.close()


async def test_tools_are_available_in_the_sandbox_and_timeouts_are_reported():
    env = ShellEnv(command_timeout=1.0)
    await env.reset(env.list_tasks("test", 1)[0])
    try:
        tools = "bash sort grep awk sed wc tr cut head tail find xargs chmod mkdir uniq"
        probe = f"for t in {tools}; do command -v $t >/dev/null || echo MISSING $t; done"
        r = await env.step(Action(tool="run", arguments={"command": probe}))
        assert "exit code: 0" in r.observation and "MISSING" not in r.observation
        r = await env.step(Action(tool="run", arguments={"command": "sleep 5"}))
        assert "timed out" in r.observation
    finally:
        await env.close()


async def test_a_command_cannot_see_the_checks():
    env = ShellEnv(difficulty="hard", knobs={"family": "script"})
    task = env.list_tasks("test", 1)[0]
    problem = materialize(task)
    hidden = problem.checks[-1].inputs["data.txt"]
    await env.reset(task)
    try:
        workdir = env._sandbox.workdir  # the real directory
        found = {os.path.relpath(os.path.join(d, f), workdir)
                 for d, _, files in os.walk(workdir) for f in files}
        assert found == set(problem.files)  # only the task's own files exist
        r = await env.step(Action(tool="run", arguments={
            "command": "cat $(find / -xdev -type f -name '*.txt' 2>/dev/null) 2>/dev/null | wc -c; "
                       "ls -a"}))
        assert hidden not in r.observation and "check" not in r.observation.split("stdout:")[1]
        # a script printing the visible sum fails: the checks also run it on hidden data
        visible = problem.checks[1].expected
        script = f"printf '#!/bin/bash\\necho {visible}\\n' > script.sh && chmod +x script.sh"
        await env.step(Action(tool="run", arguments={"command": script}))
        r = await env.step(Action(tool="done"))
        outcome = await env.outcome()
        assert r.terminated and not outcome.success and outcome.components["checks_passed"] == 2
        assert "other input data" in outcome.evidence
    finally:
        await env.close()


async def test_reference_and_null_agents_and_rescoring(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path / 'shell.db'}")
    for difficulty in DIFFICULTIES:
        env_ref = PluginRef(name="shell", args={"difficulty": difficulty})
        tasks = ShellEnv(difficulty=difficulty).list_tasks("test", limit=50, seed=0)
        rates = {}
        for agent in ("reference", "null"):
            spec = AgentSpec(agent=PluginRef(name=agent))
            config = RunConfig(env=env_ref, agent=spec, tasks=tasks, concurrency=4, seed=0)
            summary = await Runner(store, progress=False).run(config)
            stored = list(store.iter_trajectories(summary.run_id))
            assert len(stored) == 50
            assert all(t.outcome is not None and t.outcome.error_kind is None for t in stored)
            rates[agent] = sum(t.outcome.success for t in stored) / len(stored)
            verifier = ShellVerifier(**env_ref.args)
            for t in stored[:5]:  # the offline verifier agrees with the live outcome
                again = await verifier.score(t)
                assert (again.success, again.reward, again.components) == (
                    t.outcome.success, t.outcome.reward, t.outcome.components)
        assert rates["reference"] >= 0.95, (difficulty, rates)
        assert rates["null"] <= 0.02, (difficulty, rates)


def test_a_bash_block_in_a_text_reply_becomes_run():
    action = parse_text_action("Let me look.\n```bash\nls -la\n```", ShellEnv().tools)
    assert action.tool == "run" and action.arguments["command"].strip() == "ls -la"


def test_generation_is_identical_in_another_process():
    tasks = ShellEnv(difficulty="medium").list_tasks(None, limit=15, seed=2)
    code = ("import sys, json; from sharpen.core.task import TaskSpec; "
            "from sharpen.envs.shell import materialize; "
            "print(json.dumps([materialize(TaskSpec.model_validate_json(line)).model_dump_json() "
            "for line in sys.stdin.read().splitlines()]))")
    out = subprocess.run([sys.executable, "-c", code], input="\n".join(
        t.model_dump_json() for t in reversed(tasks)), capture_output=True, text=True,
        env={**os.environ, "PYTHONHASHSEED": "123"}, check=True).stdout
    assert json.loads(out)[::-1] == [materialize(t).model_dump_json() for t in tasks]
