"""``grpo``: TRL's GRPOTrainer on the demo's code tasks with the embedded model, through real TRL
on the CPU (tiny: two train tasks, two replies of at most 32 tokens per step, two steps), and
its reward: the environment's verifier on the reply parsed as the agent parses it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.task import TaskSpec
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store
from sharpen.train.method import TrainContext
from sharpen.train.rewards import VerifierReward, prompts, training_agent

TINY = {"steps": 2, "num_generations": 2, "max_completion_length": 32, "save_every": 1,
        "lora": True, "learning_rate": 1e-4}
"""Two optimiser steps of one task × two replies; LoRA keeps TRL's checkpoints small."""


def _tasks(split: str, n: int) -> list[TaskSpec]:
    return REGISTRY.create("env", DEMO_ENV).list_tasks(split=split, limit=n, seed=0)[:n]


def test_the_reward_is_the_outcome_of_the_agents_episode_for_the_same_reply(tmp_path: Path) -> None:
    """The prompt is what the tool agent sent on its first turn, and a reply's reward is what
    the runner stored for the episode that reply started (one submission: the episode ends)."""
    tasks = _tasks("train", 2)
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    summary = asyncio.run(Runner(store, progress=False).run(RunConfig(
        env=DEMO_ENV, agent=DEMO_SPEC, tasks=tasks)))
    played = {t.task.id: t for t in store.iter_trajectories(summary.run_id, with_messages=True)}
    agent = training_agent(DEMO_SPEC)
    rows = asyncio.run(prompts(DEMO_ENV, DEMO_SPEC, agent, tasks))
    reward = VerifierReward(DEMO_ENV, rows, eos_ids={2})
    env = REGISTRY.create("env", DEMO_ENV)
    for row in rows:
        episode = played[row.task.id]
        assert [m.model_dump(include={"role", "content"}) for m in episode.messages[:2]] == \
            row.messages
        assert episode.outcome is not None
        first = episode.steps[0]
        score = asyncio.run(reward.score(row, episode.messages[2].content or "",
                                         cut_off=bool(first.invalid_action)))
        # One submission: a reply with an action ends the episode with its outcome; one
        # without is worth nothing (the episode went on to a second reply).
        assert score == pytest.approx(episode.outcome.reward if first.action else 0.0)
        solution = env.reference_solution(row.task)
        assert solution is not None
        fenced = f"```python\n{solution}\n```"
        wrong = "```python\ndef nothing():\n    return None\n```"
        got = asyncio.run(reward([row.messages] * 3, [[{"content": fenced}],
                                                      [{"content": wrong}],
                                                      [{"content": "I do not know."}]],
                                 [[5, 2]] * 3, task_index=[rows.index(row)] * 3))
        assert got == [1.0, 0.0, 0.0]
    assert len({played[r.task.id].outcome.reward for r in rows}) == 2, \
        "the start model solves one of these tasks and fails the other (as test_train.py says)"


def test_a_spec_decoding_under_a_grammar_or_a_test_task_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="decoding: free"):
        training_agent(DEMO_SPEC.model_copy(update={"decoding": "constrained"}))
    from sharpen.train.grpo import GrpoMethod

    test = _tasks("test", 1)
    ctx = TrainContext(env=DEMO_ENV, spec=DEMO_SPEC, train_tasks=test, val_tasks=[],
                       base_checkpoint=tmp_path, base_gguf=tmp_path / "x.gguf",
                       workdir=tmp_path / "w", store=Store(f"sqlite:///{tmp_path / 's.db'}"))
    with pytest.raises(UserError, match="outside its train/val"):
        asyncio.run(GrpoMethod(**TINY).train(ctx))
    assert not (tmp_path / "w").exists(), "refused before anything was written"


def test_echo_observation_span_is_the_task_text(base_checkpoint: Path) -> None:
    from sharpen.train.echo import observation_span
    from sharpen.train.hf import load_tokenizer

    tokenizer = load_tokenizer(base_checkpoint)
    messages = [{"role": "system", "content": "Answer in code."},
                {"role": "user", "content": "Write add(a, b) returning a + b."}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    start, end = observation_span(tokenizer, messages)
    assert tokenizer.decode(ids[start:end]).strip() == messages[1]["content"]


@pytest.mark.slow
def test_grpo_through_the_engine_writes_a_model_local_runs_then_resumes_with_echo(
        tmp_path: Path, base_checkpoint: Path, base_gguf: Path) -> None:
    from sharpen.train.engine import train
    from sharpen.train.grpo import GrpoMethod

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    report = asyncio.run(train(PluginRef(name="grpo", args=TINY), DEMO_ENV, DEMO_SPEC, store,
                               folder=tmp_path / "t", train=2, val=1, test=1,
                               base=(base_checkpoint, base_gguf)))
    result = report.result
    assert [e.step for e in result.events] == [1, 2]
    assert result.samples == 4  # two steps × one task × two replies, each scored
    assert all(e.reward is not None and 0.0 <= e.reward <= 1.0 for e in result.events)
    assert report.lineage.checkpoint_hash != report.lineage.base_hash  # the weights moved
    run = store.get_run(report.verdict.trained_run)  # the trained GGUF ran as --model local
    assert run.manifest.extra["model_path"] == report.lineage.gguf
    (played,) = store.iter_trajectories(run.id, with_steps=False, with_messages=True)
    assert any(m.role == "assistant" and m.content for m in played.messages)
    seen, test = set(report.seen_tasks), set(report.test_tasks)
    assert seen and not seen & test
    # Resume from TRL's last checkpoint (step 2) to step 3, with ECHO's auxiliary loss on.
    workdir = result.checkpoint.parent
    ctx = TrainContext(env=DEMO_ENV, spec=DEMO_SPEC, train_tasks=_tasks("train", 2),
                       val_tasks=[], base_checkpoint=base_checkpoint, base_gguf=base_gguf,
                       workdir=workdir, store=store, resume=True)
    again = asyncio.run(GrpoMethod(**{**TINY, "steps": 3, "echo": 0.1}).train(ctx))
    assert again.extra["resumed_at_step"] == 2
    assert [e.step for e in again.events] == [1, 2, 3] and again.samples == 6
    assert again.events[-1].metrics["echo/observation_ce"] > 0
    assert again.gguf is not None and again.gguf.is_file()


def test_the_curve_stops_at_the_sample_budget_and_a_resume_keeps_the_steps_before_its_checkpoint(
        tmp_path: Path) -> None:
    from sharpen.train.grpo import CURVE, Curve
    from sharpen.train.method import TrainBudget, TrainEvent

    seen: list[TrainEvent] = []
    ctx = TrainContext(env=DEMO_ENV, spec=DEMO_SPEC, train_tasks=[], val_tasks=[],
                       base_checkpoint=tmp_path, base_gguf=tmp_path / "x.gguf", workdir=tmp_path,
                       store=Store(f"sqlite:///{tmp_path / 's.db'}"),
                       budget=TrainBudget(max_samples=4), report=seen.append)
    reward = VerifierReward(DEMO_ENV, [])
    curve = Curve(ctx, reward, resumed_at=None)
    for step in (1, 2, 3):
        reward.scored += 2
        curve.record(step, {"loss": 0.5, "reward": 0.25, "num_tokens": 100 * step})
        if curve.over_budget():
            break
    assert step == 2 and curve.stopped_by == "max_samples" and [e.samples for e in seen] == [2, 4]
    resumed = Curve(ctx, VerifierReward(DEMO_ENV, []), resumed_at=1)  # the checkpoint was at 1
    assert [e.step for e in resumed.events] == [1] and resumed.samples == 2
    assert resumed.tokens == 100 and len((tmp_path / CURVE).read_text().splitlines()) == 1


MULTI_ENV = PluginRef(name="code", args={**DEMO_ENV.args, "max_submissions": 2})
"""The demo's tasks with a second submission: a reply's test results (or the feedback on a reply
that holds no action) come back as an observation, and the demo spec's two steps give a second
turn."""

MULTI = {**TINY, "steps": 1, "multi_turn": True, "max_completion_length": 24,
         "max_episode_tokens": 400, "echo": 0.1}
"""One optimiser step of one task × two episodes of up to two 24-token replies, with ECHO's
loss on the environment's tokens: two episodes that score alike have no advantage, and then
only that loss moves the weights."""


@pytest.mark.slow
def test_multi_turn_rollouts_are_the_runners_episodes_as_exact_tokens_and_train_a_model_local_runs(
        tmp_path: Path, base_checkpoint: Path, base_gguf: Path) -> None:
    import torch

    from sharpen.train.engine import train
    from sharpen.train.hf import load_model, load_tokenizer
    from sharpen.train.rollout import EpisodeRollout, model_runs, prompt_ids

    tasks = REGISTRY.create("env", MULTI_ENV).list_tasks(split="train", limit=1, seed=0)[:1]
    rows = asyncio.run(prompts(MULTI_ENV, DEMO_SPEC, training_agent(DEMO_SPEC), tasks))
    tokenizer, model = load_tokenizer(base_checkpoint), load_model(base_checkpoint)
    eos = {tokenizer.eos_token_id}
    rollout = EpisodeRollout(MULTI_ENV, DEMO_SPEC, rows, temperature=0.8, max_tokens=24,
                             max_completion=400, eos_ids=eos)
    episodes = asyncio.run(rollout.play([rows[0].messages] * 2, model, tokenizer))
    assert len({tuple(e.completion_ids) for e in episodes}) == 2, "two seeds, two samples"
    for e in episodes:
        traj = e.trajectory
        assert traj.outcome is not None and traj.outcome.counts
        assert e.reward == traj.outcome.reward  # the episode's outcome, as single-turn's reward
        assert e.prompt_ids == prompt_ids(tokenizer, rows[0].messages)
        said = [m.content for m in traj.messages if m.role == "assistant"]
        runs = model_runs(e.completion_ids, e.env_mask)
        assert [tokenizer.decode(r[:-1] if r[-1] in eos else r) for r in runs] == said
        assert len(e.logprobs) == len(e.completion_ids) == len(e.env_mask)
        # Each sampled token's logprob is the model's (at the temperature) in the context the
        # episode's tokens give it; the environment's tokens carry 0.0.
        ids = torch.tensor([e.prompt_ids + e.completion_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(e.prompt_ids) - 1:-1] / 0.8
        again = torch.log_softmax(logits, -1).gather(-1, ids[0, len(e.prompt_ids):, None])[:, 0]
        sampled = torch.tensor(e.env_mask).bool()
        assert torch.allclose(torch.tensor(e.logprobs)[sampled], again[sampled], atol=1e-3)
        assert all(lp == 0.0 for lp, m in zip(e.logprobs, e.env_mask, strict=True) if not m)
        if len(said) >= 2:  # the environment's answer lies between the replies, as rendered
            assert set(e.env_mask) == {0, 1}
            between = [t for t, m in zip(e.completion_ids, e.env_mask, strict=True) if not m]
            answer = traj.messages[3].content or ""
            assert answer and answer in tokenizer.decode(between)
    assert any(len([m for m in e.trajectory.messages if m.role == "assistant"]) >= 2
               for e in episodes), "a 24-token reply holds no complete submission: a second turn"

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    report = asyncio.run(train(PluginRef(name="grpo", args=MULTI), MULTI_ENV, DEMO_SPEC, store,
                               folder=tmp_path / "t", train=1, val=1, test=1,
                               base=(base_checkpoint, base_gguf)))
    result = report.result
    assert [e.step for e in result.events] == [1] and result.samples == 2  # episodes
    assert result.events[0].reward is not None and 0.0 <= result.events[0].reward <= 1.0
    assert result.events[0].metrics["echo/observation_ce"] > 0
    assert report.lineage.checkpoint_hash != report.lineage.base_hash  # the weights moved
    assert (result.checkpoint / "config.json").is_file()
    run = store.get_run(report.verdict.trained_run)  # the trained GGUF ran as --model local
    assert run.manifest.extra["model_path"] == report.lineage.gguf
    (played,) = store.iter_trajectories(run.id, with_steps=False, with_messages=True)
    assert any(m.role == "assistant" and m.content for m in played.messages)


def test_multi_turn_args_are_checked() -> None:
    from sharpen.train.grpo import GrpoMethod

    with pytest.raises(UserError, match="multi_turn"):
        GrpoMethod(multi_turn="yes")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="max_episode_tokens"):
        GrpoMethod(multi_turn=True, max_completion_length=200, max_episode_tokens=100)
    config = GrpoMethod(multi_turn=True, max_episode_tokens=700).config(
        TrainContext(env=DEMO_ENV, spec=DEMO_SPEC, train_tasks=[], val_tasks=[],
                     base_checkpoint=Path("."), base_gguf=Path("x.gguf"), workdir=Path("w"),
                     store=Store("sqlite://")))
    assert config["max_completion_length"] == 700  # TRL's cap is the whole completion's
