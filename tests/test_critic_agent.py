"""The ``critic`` agent with the real embedded model, through the real Runner into SQLite:
critiques on the failed attempts' steps, their usage counted, the critic's instructions kept
from the actor, the critic in the spec hash, a failing critic model and resume, an empty
critique — on ``code``, ``sql`` and a non-code environment (``gridsafety``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from critic_models import ref

from sharpen.agents.critic import CRITIQUE_PROMPT, DEFAULT_INSTRUCTIONS
from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.trajectory import Trajectory
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store

CODE = PluginRef(name="code", args={"source": "generated", "difficulty": "easy", "max_submissions": 1})
SQL = PluginRef(name="sql", args={"difficulty": "easy"})
GRID = PluginRef(name="gridsafety", args={"difficulty": "easy"})
MARK = "CRITIC-ONLY-MARK"


def _spec(max_tokens: int = 120, steps: int = 1, decoding: str = "free", **args: Any) -> AgentSpec:
    return AgentSpec(
        model=PluginRef(name="local"), params={"temperature": 0.0, "max_tokens": max_tokens},
        limits=Limits(max_steps=steps, max_tokens=6000, max_seconds=120), decoding=decoding,
        agent=PluginRef(name="critic", args={"critique_tokens": 40, **args}),
        components={"instructions": "Solve the task.", "critic": f"{MARK} {DEFAULT_INSTRUCTIONS}"})


async def _run(tmp: Path, env: PluginRef, spec: AgentSpec, tasks: int = 2,
               resume: bool = False, db: str = "runs") -> list[Trajectory]:
    store = Store(f"sqlite:///{tmp / db}.db")
    listed = REGISTRY.create("env", env).list_tasks(split="test", limit=tasks, seed=0)
    summary = await Runner(store, progress=False).run(
        RunConfig(env=env, agent=spec, tasks=listed, concurrency=1), resume=resume)
    return list(store.iter_trajectories(summary.run_id))


def _check_critiques(t: Trajectory, author: str) -> int:
    """Every failed attempt but the last has one critic step and one critique on its own last
    step; usage sums every step's, the critic's included. The number of critiques."""
    assert t.outcome is not None and t.outcome.error_kind is None
    calls = [s for s in t.steps if "critique" in s.info]
    critiques = [f for f in t.feedback if f.source == "critic"]
    assert len(calls) == len(critiques) == t.trials - 1
    for call, fb in zip(calls, critiques, strict=True):
        trial = call.info["critique"]
        last = max(s.index for s in t.steps if s.info.get("trial") == trial)
        assert fb.target.kind == "step" and fb.target.step_index == last == call.info["critiques"]
        assert fb.target.trajectory_id == t.id and fb.author == author and fb.name == "critique"
        assert call.messages[-1].content.strip() == fb.value and call.usage.total_tokens > 0
        assert MARK in (call.messages[0].content or "")  # the critic's instructions ...
        assert "Task:" in (call.messages[1].content or "") and "Environment:" in call.messages[1].content
    for s in t.steps:  # ... never reach the actor's prompt
        for m in s.info.get("trial_prompt", []):
            assert MARK not in (m["content"] or "")
    assert t.usage.total_tokens == sum(s.usage.total_tokens for s in t.steps)
    assert t.usage.calls == sum(s.usage.calls for s in t.steps)
    if t.trials > 1:  # the retry is shown the last critique
        retry = next(s for s in t.steps if s.info.get("trial") == t.trials - 1)
        assert critiques[-1].value in retry.info["trial_prompt"][0]["content"]
    return len(critiques)


async def test_critic_on_code_critiques_each_failed_attempt_on_its_step(tmp_path: Path):
    [t] = await _run(tmp_path, CODE, _spec(trials=2), tasks=1)
    assert _check_critiques(t, "local/smollm2-135m-instruct") == 1
    last = [s for s in t.steps if s.info.get("trial") == 1]  # the verdict is the last attempt's
    assert t.outcome.success == (last[-1].reward == 1.0)


async def test_critic_on_sql_with_both_shows_the_result_and_the_critique(tmp_path: Path):
    [t] = await _run(tmp_path, SQL, _spec(max_tokens=80, steps=2, trials=2, feedback="both"), tasks=1)
    assert not t.outcome.success and _check_critiques(t, "local/smollm2-135m-instruct") == 1
    retry = next(s for s in t.steps if s.info.get("trial") == 1)
    prompt = retry.info["trial_prompt"][0]["content"]
    assert "What the environment said about your last answer" in prompt and "critique" in prompt


async def test_critic_of_its_own_on_a_non_code_env(tmp_path: Path):
    """gridsafety, constrained decoding, the critic an own model (the embedded one built from
    its ref): two steps per attempt, critique on the attempt's last step."""
    spec = _spec(max_tokens=40, steps=2, decoding="auto", trials=2, critic_model={"name": "local"})
    [t] = await _run(tmp_path, GRID, spec, tasks=1)
    assert not t.outcome.success and _check_critiques(t, "local/smollm2-135m-instruct") == 1
    assert len([s for s in t.steps if s.info.get("trial") == 0]) == 2


async def test_execution_feedback_asks_no_critic_and_one_trial_is_the_actor_alone(tmp_path: Path):
    [t] = await _run(tmp_path, SQL, _spec(max_tokens=80, trials=2, feedback="execution"), tasks=1)
    assert t.trials == 2 and not [f for f in t.feedback if f.source == "critic"]
    retry = next(s for s in t.steps if s.info.get("trial") == 1)
    assert "What the environment said" in retry.info["trial_prompt"][0]["content"]
    [alone] = await _run(tmp_path, SQL, _spec(max_tokens=80, trials=1), tasks=1, db="alone")
    assert alone.trials == 1 and not [s for s in alone.steps if "critique" in s.info]
    first = [s for s in t.steps if s.info.get("trial") == 0]
    assert [m.content for s in first for m in s.messages] == \
        [m.content for s in alone.steps for m in s.messages]


async def test_a_failing_critic_is_infra_and_resume_reruns_it(tmp_path: Path):
    """The critic's InfraError ends the episode as ``infra`` (and, every episode lost so, the
    runner stops as for the actor's model); resume runs those episodes again."""
    down = tmp_path / "down"
    down.touch()
    spec = _spec(max_tokens=80, trials=2, critic_model=ref("SwitchedLocal", down=str(down)))
    with pytest.raises(UserError, match="infra errors; last: critic endpoint down"):
        await _run(tmp_path, SQL, spec)
    store = Store(f"sqlite:///{tmp_path / 'runs'}.db")
    [run] = store.list_runs()
    first = list(store.iter_trajectories(run.id))
    assert [t.outcome.error_kind for t in first] == ["infra", "infra"]
    assert all(not t.outcome.counts for t in first)  # never the agent's failure
    down.unlink()
    resumed = await _run(tmp_path, SQL, spec, resume=True)
    assert len(resumed) == 2 and {t.run_id for t in resumed} == {run.id}
    assert sum(_check_critiques(t, "local/switched") for t in resumed) == 2


async def test_an_empty_critique_is_not_shown_and_said_so(tmp_path: Path):
    [t] = await _run(tmp_path, SQL, _spec(max_tokens=80, trials=2, critic_model=ref("Mute")), tasks=1)
    [call] = [s for s in t.steps if "critique" in s.info]
    assert "without a critique" in call.info["critique_empty"] and not t.outcome.success
    assert not [f for f in t.feedback if f.source == "critic"]
    assert call.usage.total_tokens == 8 and t.usage.total_tokens == sum(s.usage.total_tokens for s in t.steps)
    retry = next(s for s in t.steps if s.info.get("trial") == 1)
    assert "critique" not in retry.info["trial_prompt"][0]["content"]


def test_the_critic_and_its_instructions_are_in_the_spec_hash():
    base = _spec(trials=2)
    other_model = _spec(trials=2, critic_model={"name": "openai", "args": {"model": "x"}})
    other_words = base.model_copy(update={"components": {**base.components, "critic": "Be brief."}})
    assert len({base.hash(), other_model.hash(), other_words.hash()}) == 3
    assert "{trace}" in CRITIQUE_PROMPT


@pytest.mark.parametrize("args, fix", [({"trials": 0}, "trials: 2"), ({"feedback": "tests"}, "one of critic"),
                                       ({"critique_tokens": -1}, "critique_tokens"),
                                       ({"actor": 3}, "actor: {name: tool}")])
def test_bad_args_name_the_fix(args: dict, fix: str):
    with pytest.raises(UserError, match=fix):
        REGISTRY.create("agent", PluginRef(name="critic", args=args))
