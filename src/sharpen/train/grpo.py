"""``grpo``: online reinforcement learning with TRL's ``GRPOTrainer`` on a sharpen environment.

Each optimiser step samples ``num_generations`` replies to the first turn of ``tasks_per_step``
train tasks (the prompts the ``tool`` agent sends, :mod:`sharpen.train.rewards`), scores every
reply through the environment's verifier (a fresh episode reset to the task, the reply's action
stepped, the outcome's reward), and takes TRL's GRPO step on the group-normalised rewards. Only
``ctx.train_tasks`` reach the trainer, through :meth:`TrainContext.check_tasks`.

Checkpoints: TRL's own, every ``save_every`` steps under ``workdir/trainer`` (model, optimiser,
scheduler, RNG), so ``ctx.resume`` continues from the last one with the curve so far
(``workdir/events.jsonl``). The trained model is saved as a plain checkpoint
(``workdir/checkpoint``, a LoRA adapter merged) and its GGUF (``workdir/model.gguf``), which
``--model local --model-arg model_path=...`` runs.

``multi_turn=true`` trains whole episodes instead (:mod:`sharpen.train.rollout`): TRL's
``rollout_func`` plays each of the ``num_generations`` completions of a prompt as an episode of
its task through the runner's episode code, the completion is every reply's sampled tokens with
the environment's tokens between them (``env_mask`` 0: not trained on), and the reward is the
episode's outcome. ``max_completion_length`` then caps each reply and ``max_episode_tokens`` the
whole completion (TRL's ``max_completion_length``).

``echo=λ`` adds ECHO's auxiliary loss (:mod:`sharpen.train.echo`): λ times the cross-entropy of
the environment's observation tokens beside the policy-gradient loss on the reply's tokens.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Protocol

from sharpen.core.errors import UserError
from sharpen.train.hf import (
    LoraSpec,
    fit,
    last_checkpoint,
    load_model,
    load_tokenizer,
    save_checkpoint,
    trl_args,
)
from sharpen.train.method import BaseTrainMethod, StopReason, TrainContext, TrainEvent, TrainResult
from sharpen.train.rewards import VerifierReward, prompts, training_agent

CURVE = "events.jsonl"


class GrpoMethod(BaseTrainMethod):
    """GRPO (TRL) with the environment's verifier as the reward. Hyperparameters are the
    method args (``--method-arg steps=50``); anything else of TRL's ``GRPOConfig`` goes through
    ``--trainer-arg``."""

    title = "online RL (TRL GRPO) on replies scored by the environment's verifier"

    def __init__(self, steps: int = 20, num_generations: int = 4, tasks_per_step: int = 1,
                 learning_rate: float = 1e-6, temperature: float = 0.8,
                 max_completion_length: int = 200, beta: float = 0.0, lora: bool = False,
                 lora_r: int = 16, echo: float | None = None, save_every: int = 10,
                 concurrency: int = 4, threads: int | None = None, multi_turn: bool = False,
                 max_episode_tokens: int = 1024) -> None:
        if num_generations < 2:
            raise UserError("grpo: num_generations must be at least 2 (a group needs two "
                            "replies to compare)", "set --method-arg num_generations=4")
        if steps < 1 or tasks_per_step < 1 or save_every < 1:
            raise UserError("grpo: steps, tasks_per_step and save_every must be at least 1",
                            "e.g. --method-arg steps=20")
        if not isinstance(multi_turn, bool):
            raise UserError(f"grpo: multi_turn must be true or false, got {multi_turn!r}",
                            "set --method-arg multi_turn=true")
        if max_completion_length < 1 or (multi_turn and max_episode_tokens < max_completion_length):
            raise UserError("grpo: max_completion_length must be at least 1 and "
                            "max_episode_tokens (the whole episode's completion) at least that",
                            "e.g. --method-arg max_completion_length=200 "
                            "--method-arg max_episode_tokens=1024")
        if echo is not None and echo < 0:
            raise UserError(f"grpo: echo is a weight (λ ≥ 0), got {echo}", "e.g. echo=0.1")
        self.steps, self.num_generations, self.tasks_per_step = steps, num_generations, tasks_per_step
        self.learning_rate, self.temperature, self.beta = learning_rate, temperature, beta
        self.max_completion_length = max_completion_length
        self.lora = LoraSpec(r=lora_r, alpha=2 * lora_r) if lora else None
        self.echo, self.save_every, self.concurrency = echo, save_every, concurrency
        self.threads, self.multi_turn, self.max_episode_tokens = threads, multi_turn, max_episode_tokens

    def config(self, ctx: TrainContext) -> dict[str, Any]:
        """The ``GRPOConfig`` keyword arguments (``ctx.trainer_args`` win)."""
        return trl_args(
            ctx.device, ctx.workdir / "trainer", ctx.seed, max_steps=self.steps,
            learning_rate=self.learning_rate, num_generations=self.num_generations,
            per_device_train_batch_size=self.num_generations * self.tasks_per_step,
            temperature=self.temperature,
            max_completion_length=(self.max_episode_tokens if self.multi_turn
                                   else self.max_completion_length),
            beta=self.beta, save_strategy="steps", save_steps=self.save_every,
            save_total_limit=1, **ctx.trainer_args)

    async def train(self, ctx: TrainContext) -> TrainResult:
        from datasets import Dataset  # type: ignore[import-untyped]
        from trl import GRPOConfig, GRPOTrainer

        from sharpen.train.echo import EchoGRPOTrainer

        ctx.check_tasks(ctx.train_tasks)
        if not ctx.train_tasks:
            raise UserError("grpo: no train tasks", "give the training some: --train N")
        if ctx.device == "cpu":
            _cpu_threads(self.threads)
        agent = training_agent(ctx.spec, str(ctx.base_gguf))
        rows = await prompts(ctx.env, ctx.spec, agent, ctx.train_tasks)
        tokenizer = load_tokenizer(ctx.base_checkpoint)
        extra: dict[str, Any] = {} if self.echo is None else {"echo": self.echo}
        reward: Scored
        if self.multi_turn:
            from sharpen.train.rollout import EpisodeReward, EpisodeRollout

            reward = EpisodeReward()
            extra["rollout_func"] = EpisodeRollout(
                ctx.env, ctx.spec, rows, temperature=self.temperature,
                max_tokens=self.max_completion_length, max_completion=self.max_episode_tokens,
                eos_ids=_eos_ids(tokenizer), concurrency=self.concurrency, seed=ctx.seed)
        else:
            reward = VerifierReward(ctx.env, rows, eos_ids=_eos_ids(tokenizer),
                                    concurrency=self.concurrency)
        dataset = Dataset.from_list([{"prompt": p.messages, "task_index": i}
                                     for i, p in enumerate(rows)])
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        last = last_checkpoint(ctx.workdir / "trainer") if ctx.resume else None
        curve = Curve(ctx, reward, resumed_at=_step_of(last) if last else None)
        trainer_cls = GRPOTrainer if self.echo is None else EchoGRPOTrainer
        trainer = trainer_cls(
            model=load_model(ctx.base_checkpoint, ctx.device, self.lora),
            reward_funcs=[reward],  # type: ignore[list-item]  # async: TRL awaits it
            args=GRPOConfig(**self.config(ctx)), train_dataset=dataset,
            processing_class=tokenizer, callbacks=[curve.callback()], **extra)
        started = time.monotonic()
        await asyncio.to_thread(fit, trainer, last)
        train_seconds = time.monotonic() - started
        checkpoint = save_checkpoint(trainer.model, tokenizer, ctx.workdir / "checkpoint")
        from sharpen.train.checkpoint import write_gguf

        gguf = ctx.workdir / "model.gguf"
        gguf.unlink(missing_ok=True)  # a resumed training's model replaces the one before
        write_gguf(checkpoint, gguf, template=ctx.base_gguf)
        return TrainResult(
            checkpoint=checkpoint, gguf=gguf, events=curve.events, samples=curve.samples,
            seconds=curve.seconds(), stopped_by=curve.stopped_by,
            extra={"tokens": curve.tokens, "resumed_at_step": curve.resumed_at,
                   "train_seconds": train_seconds})


class Scored(Protocol):
    """A reward function that counts what it scored (replies, or episodes when multi-turn)."""

    scored: int


class Curve:
    """The training curve: one :class:`TrainEvent` per logged optimiser step, reported, kept in
    ``workdir/events.jsonl`` for a resumed session, and the budget's stop."""

    def __init__(self, ctx: TrainContext, reward: Scored, resumed_at: int | None) -> None:
        self.ctx, self.reward, self.resumed_at = ctx, reward, resumed_at
        self.path = ctx.workdir / CURVE
        self.events: list[TrainEvent] = []
        if resumed_at is not None and self.path.is_file():
            kept = [TrainEvent.model_validate_json(line)
                    for line in self.path.read_text().splitlines() if line.strip()]
            self.events = [e for e in kept if e.step <= resumed_at]
        self.path.write_text("".join(e.model_dump_json() + "\n" for e in self.events))
        before = self.events[-1] if self.events else None
        self.prior_samples = before.samples if before else 0
        self.prior_seconds = before.seconds if before else 0.0
        self.tokens = int(before.metrics.get("num_tokens", 0)) if before else 0
        self.started = time.monotonic()
        self.stopped_by: StopReason = "done"

    @property
    def samples(self) -> int:
        return self.prior_samples + self.reward.scored

    def seconds(self) -> float:
        return self.prior_seconds + time.monotonic() - self.started

    def record(self, step: int, logs: dict[str, Any]) -> None:
        numbers = {k: float(v) for k, v in logs.items() if isinstance(v, int | float)}
        loss, rewarded = numbers.pop("loss", None), numbers.pop("reward", None)
        self.tokens = int(numbers.get("num_tokens", self.tokens))
        event = TrainEvent(step=step, samples=self.samples, loss=loss, reward=rewarded,
                           seconds=self.seconds(), metrics=numbers)
        self.events.append(event)
        with self.path.open("a") as f:
            f.write(event.model_dump_json() + "\n")
        self.ctx.report(event)

    def over_budget(self) -> bool:
        budget = self.ctx.budget
        if budget.max_samples is not None and self.samples >= budget.max_samples:
            self.stopped_by = "max_samples"
        elif budget.max_seconds is not None and self.seconds() >= budget.max_seconds:
            self.stopped_by = "max_seconds"
        return self.stopped_by != "done"

    def callback(self) -> Any:
        from transformers import TrainerCallback

        curve = self

        class Report(TrainerCallback):
            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                       **kwargs: Any) -> None:
                if logs and "loss" in logs:
                    curve.record(int(state.global_step), logs)

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                if curve.over_budget():
                    control.should_training_stop = True
                    control.should_save = True  # a stopped training resumes from here

        return Report()


def _cpu_threads(threads: int | None) -> None:
    """PyTorch's CPU threads for this process: ``threads``, else the cores the load average
    leaves idle (:func:`~sharpen.models.local.default_threads`, ``SHARPEN_THREADS`` wins). Why:
    as llama.cpp's, torch's OpenMP threads spin at their barriers; on two loaded cores, sampling
    2×64 tokens had not finished in 300 s on two threads and took 27 s on one (2026-12-02)."""
    import torch

    from sharpen.models.local import default_threads

    torch.set_num_threads(threads or default_threads())


def _eos_ids(tokenizer: Any) -> set[int]:
    ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    return {i for i in ids if isinstance(i, int)}


def _step_of(checkpoint: str | Path) -> int:
    """The global step of a TRL checkpoint folder (``checkpoint-12`` → 12)."""
    state = Path(checkpoint) / "trainer_state.json"
    if state.is_file():
        return int(json.loads(state.read_text())["global_step"])
    return int(Path(checkpoint).name.rsplit("-", 1)[-1])
