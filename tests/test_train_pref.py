"""The preference methods through real TRL on the CPU with the embedded model (tiny): ``dpo``
writes a checkpoint and a GGUF that ``--model local`` runs; ``reward-model`` measures itself on
val pairs with a Wilson interval and scores trajectories as the ``reward_model`` judge, which
the best-of-N selector reads; the test split never reaches either."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.task import TaskSpec
from sharpen.judges.runner import JudgeSetup, judge_run
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store
from sharpen.train.best_of_n import best_of_n, random_of_n
from sharpen.train.dpo import DPOMethod
from sharpen.train.engine import TrainReport
from sharpen.train.method import TrainContext, TrainEvent, TrainResult
from sharpen.train.pairs import sample_pairs
from sharpen.train.reward_model import RewardModelMethod, RewardScorer

TASK_SEED = 11


def _tasks() -> dict[str, list[TaskSpec]]:
    env = REGISTRY.create("env", DEMO_ENV)
    return {s: env.list_tasks(split=s, limit=n, seed=TASK_SEED)
            for s, n in (("train", 3), ("val", 2), ("test", 1))}


def _context(tmp: Path, base_checkpoint: Path, base_gguf: Path, seen: list[str],
             events: list[TrainEvent], store_dir: Path | None = None) -> TrainContext:
    """A context as the engine builds one: rollouts are the sharpen runner on train/val tasks,
    through the guard; every task id they were asked for lands in ``seen``. Contexts on one
    ``store_dir`` share their samples (a run of the same config resumes, as in the engine)."""
    tasks = _tasks()
    store = Store(f"sqlite:///{(store_dir or tmp) / 'store.db'}")
    ctx = TrainContext(env=DEMO_ENV, spec=DEMO_SPEC, train_tasks=tasks["train"],
                       val_tasks=tasks["val"], base_checkpoint=base_checkpoint, base_gguf=base_gguf,
                       workdir=tmp / "method", store=store, report=events.append)

    async def rollouts(tasks: Sequence[TaskSpec], *, model_path: Path, epochs: int = 1,
                       temperature: float | None = None, label: str = "", seed: int = 0) -> str:
        ctx.check_tasks(tasks)
        seen.extend(t.id for t in tasks)
        spec = DEMO_SPEC.model_copy(update={
            "model": PluginRef(name="local", args={"model_path": str(model_path)}),
            "params": {**DEMO_SPEC.params, "temperature": temperature or 0.0}})
        config = RunConfig(env=DEMO_ENV, agent=spec, tasks=list(tasks), epochs=epochs, seed=seed,
                           labels={"role": label})
        return (await Runner(store, progress=False).run(config, resume=True)).run_id

    ctx.rollouts = rollouts
    return ctx


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store for both methods: the reward model's train attempts are DPO's, resumed."""
    return tmp_path_factory.mktemp("pref-store")


@pytest.fixture(scope="module")
def dpo_trained(store_dir: Path, base_checkpoint: Path, base_gguf: Path) -> TrainReport:
    """``dpo`` through the engine (``sharpen train``'s Python API): splits, guard, GGUF and the
    held-out verdict on one test task."""
    from sharpen.train.engine import train

    store = Store(f"sqlite:///{store_dir / 'store.db'}")
    method = PluginRef(name="dpo", args={"attempts": 4, "temperature": 1.0, "batch_size": 2,
                                         "max_length": 384, "learning_rate": 5e-5})
    n = {s: len(ts) for s, ts in _tasks().items()}
    return asyncio.run(train(method, DEMO_ENV, DEMO_SPEC, store, folder=store_dir / "dpo",
                             train=n["train"], val=n["val"], test=n["test"], task_seed=TASK_SEED,
                             base=(base_checkpoint, base_gguf)))


@pytest.fixture(scope="module")
def rm_trained(tmp_path_factory: pytest.TempPathFactory, base_checkpoint: Path, base_gguf: Path,
               store_dir: Path) -> tuple[TrainContext, TrainResult, list[str]]:
    seen: list[str] = []
    ctx = _context(tmp_path_factory.mktemp("rm"), base_checkpoint, base_gguf, seen, [], store_dir)
    method = RewardModelMethod(attempts=4, temperature=1.0, batch_size=2, max_length=384)
    return ctx, asyncio.run(method.train(ctx)), seen


@pytest.mark.slow  # samples with the embedded model and trains (minutes on two cores)
def test_dpo_pairs_come_from_the_verifier_and_train_a_model_local_runs(
        dpo_trained: TrainReport, store_dir: Path, base_checkpoint: Path, base_gguf: Path) -> None:
    import torch
    from safetensors.torch import load_file

    report, result = dpo_trained, dpo_trained.result
    ctx = _context(store_dir, base_checkpoint, base_gguf, [], [], store_dir)
    assert result.policy and result.stopped_by == "done"
    assert result.extra["pairs"] >= 1 and result.samples == 4 * len(ctx.train_tasks)
    # the verifier made the pairs: in each, chosen scored strictly better than rejected
    lines, _ = asyncio.run(sample_pairs(
        ctx, ctx.train_tasks, model_path=base_gguf, attempts=4, temperature=1.0,
        source="verifier", pairs_per_prompt=1, label="dpo"))  # the engine's run, resumed
    assert len(lines) == result.extra["pairs"]
    for x in lines:
        good, bad = x["meta"]["chosen"], x["meta"]["rejected"]
        assert (good["success"], good["reward"]) > (bad["success"], bad["reward"])
    assert result.events and all(e.loss is not None for e in result.events)
    assert "rewards/accuracies" in result.events[-1].metrics
    assert set(report.seen_tasks) == {t.id for t in ctx.train_tasks}  # no val, no test
    trained = load_file(str(result.checkpoint / "model.safetensors"))
    base = load_file(str(base_checkpoint / "model.safetensors"))
    assert any(not torch.equal(trained[k], base[k]) for k in base if k in trained)
    # the engine wrote its GGUF and ran it with --model local on the held-out test task
    assert Path(report.lineage.gguf).is_file() and "model_path=" in report.command
    t = next(iter(ctx.store.iter_trajectories(report.verdict.trained_run)))
    assert t.task.id in report.test_tasks and t.outcome is not None
    assert t.outcome.error_kind in (None, "agent")
    assert any(m.role == "assistant" and m.content for m in t.messages)


@pytest.mark.slow  # samples with the embedded model and trains (minutes on two cores)
def test_dpo_resume_returns_the_finished_training_without_sampling(
        dpo_trained: TrainReport, store_dir: Path, base_checkpoint: Path, base_gguf: Path) -> None:
    result = dpo_trained.result
    ctx = _context(store_dir, base_checkpoint, base_gguf, [], [], store_dir)

    async def no_rollouts(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("a finished training sampled again")

    ctx.workdir, ctx.resume, ctx.rollouts = result.checkpoint.parent, True, no_rollouts
    again = asyncio.run(DPOMethod(attempts=4).train(ctx))
    assert again.checkpoint == result.checkpoint and again.extra == result.extra


@pytest.mark.slow  # samples with the embedded model and trains (minutes on two cores)
def test_reward_model_reports_held_out_accuracy_with_a_wilson_interval(
        rm_trained: tuple[TrainContext, TrainResult, list[str]]) -> None:
    from sharpen.stats.intervals import wilson

    ctx, result, seen = rm_trained
    extra = result.extra
    assert not result.policy
    assert extra["pairs"] >= 1 and extra["val_pairs"] >= 1
    assert extra["val_accuracy"] == extra["val_right"] / extra["val_pairs"]
    interval = wilson(extra["val_right"], extra["val_pairs"])
    assert (extra["val_low"], extra["val_high"]) == (interval.low, interval.high)
    assert result.events[-1].metrics["val_accuracy"] == extra["val_accuracy"]
    assert set(seen) == {t.id for t in ctx.train_tasks} | {t.id for t in ctx.val_tasks}
    # the scalar head scores: two different conversations get different rewards
    scorer = RewardScorer(result.checkpoint)
    a = scorer.score([{"role": "user", "content": "Add two numbers."},
                      {"role": "assistant", "content": "def add(a, b):\n    return a + b"}])
    b = scorer.score([{"role": "user", "content": "Add two numbers."},
                      {"role": "assistant", "content": "I cannot do that."}])
    assert a != b


@pytest.mark.slow  # samples with the embedded model and trains (minutes on two cores)
def test_the_reward_model_judge_scores_runs_and_best_of_n_keeps_the_highest(
        rm_trained: tuple[TrainContext, TrainResult, list[str]]) -> None:
    ctx, result, _ = rm_trained
    assert ctx.rollouts is not None  # the val attempts the method sampled, resumed
    run = asyncio.run(ctx.rollouts(ctx.val_tasks, model_path=ctx.base_gguf, epochs=4,
                                   temperature=1.0, seed=ctx.seed))
    setup = JudgeSetup(judge=PluginRef(name="reward_model", args={"path": str(result.checkpoint)}),
                       model=PluginRef(name="local"))
    summary = asyncio.run(judge_run(ctx.store, run, setup))
    assert summary.judged >= 1 and summary.errors == 0
    scores: dict[str, list[tuple[float, str]]] = {}
    for t in ctx.store.iter_trajectories(run, with_steps=False):
        reward = [f.value for f in ctx.store.feedback_for(t.id)
                  if f.source == "judge" and f.name == "reward"]
        if reward:
            assert isinstance(reward[0], float)
            scores.setdefault(t.task.hash(), []).append((reward[0], t.id))
    picked = best_of_n(ctx.store, run)
    assert set(picked) == set(scores)
    for task, pick in picked.items():
        assert pick.id == max(scores[task])[1]
    assert set(random_of_n(ctx.store, run, seed=1)) == set(picked)
    # the judge's version is the reward model's weights: another checkpoint is another judge
    other = REGISTRY.create("judge", PluginRef(name="reward_model", args={"path": str(ctx.base_checkpoint)}))
    assert setup.hash() != JudgeSetup(judge=setup.judge, model=setup.model).hash(other)


def test_pairs_never_come_from_test_tasks(tmp_path: Path, base_checkpoint: Path,
                                          base_gguf: Path) -> None:
    ctx = _context(tmp_path, base_checkpoint, base_gguf, [], [])
    test_task = _tasks()["test"][0]
    with pytest.raises(UserError, match="outside its train/val split"):
        asyncio.run(sample_pairs(ctx, [test_task], model_path=base_gguf, attempts=2,
                                 temperature=1.0, source="verifier", pairs_per_prompt=1, label="x"))


@pytest.mark.parametrize("make", [
    lambda: DPOMethod(pairs="vibes"), lambda: DPOMethod(attempts=1),
    lambda: RewardModelMethod(batch_size=0), lambda: RewardModelMethod(pairs="votes")])
def test_bad_hyperparameters_are_user_errors(make: Any) -> None:
    with pytest.raises(UserError):
        make()
