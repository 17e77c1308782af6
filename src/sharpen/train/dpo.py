"""``sharpen train dpo ENV``: Direct Preference Optimisation (TRL's ``DPOTrainer``) on the start
model's own attempts, paired by the environment's verifier or by a pairwise judge.

One phase: ``attempts`` episodes per train task at ``temperature`` with the start model (its
GGUF, through :meth:`TrainContext.rollouts`), paired (:mod:`sharpen.train.pairs`), then DPO of
the start checkpoint on the pairs — the start model is also the frozen reference (with
``lora=true`` the adapter trains and the reference is the model with the adapter off). The
loss is TRL's sigmoid DPO loss with ``beta``; TRL's ``rewards/accuracies`` and
``rewards/margins`` are reported per step.

Resume: the rollouts resume by their run's config hash; the DPO itself from the last TRL
checkpoint under ``workdir/trl`` (every ``save_steps`` steps, and where ``max_seconds``
stopped it); a finished training returns its checkpoint without training again.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

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
from sharpen.train.pairs import (
    State,
    capped,
    check_pair_source,
    dataset_rows,
    sample_pairs,
    trainer_callback,
)

METRICS = ("rewards/accuracies", "rewards/margins", "rewards/chosen", "rewards/rejected",
           "grad_norm", "learning_rate")


def _positive(method: str, name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UserError(f"{method}: {name} must be a positive integer, got {value!r}",
                        f"set --method-arg {name}=2 (or more)")


class DPOMethod(BaseTrainMethod):
    """DPO on preference pairs of the start model's attempts (module doc).

    Args: ``attempts`` (episodes per train task, ≥ 2 for verifier pairs), ``temperature``
    (sampling), ``pairs`` (``verifier`` or ``judge``), ``pairs_per_prompt``, ``judge`` (the
    pairwise judge's name, for ``pairs=judge``), ``judge_model`` (its model ref; default the
    spec's), ``epochs``, ``learning_rate``, ``beta``, ``batch_size``, ``lora`` (train a LoRA
    adapter instead of every weight), ``max_length`` (tokens of prompt + reply; longer pairs
    are cut from the end), ``save_steps`` (TRL checkpoint interval, for resume)."""

    title = "DPO on the model's own attempts, paired by the verifier (or a judge)"

    def __init__(self, attempts: int = 4, temperature: float = 0.8, pairs: str = "verifier",
                 pairs_per_prompt: int = 1, judge: str = "pairwise",
                 judge_model: str | dict[str, Any] | None = None, epochs: int = 1,
                 learning_rate: float = 5e-6, beta: float = 0.1, batch_size: int = 2,
                 lora: bool = False, max_length: int = 512, save_steps: int = 50) -> None:
        for name, value in (("attempts", attempts), ("pairs_per_prompt", pairs_per_prompt),
                            ("epochs", epochs), ("batch_size", batch_size),
                            ("max_length", max_length), ("save_steps", save_steps)):
            _positive("dpo", name, value)
        self.source = check_pair_source("dpo", pairs)
        if self.source == "verifier" and attempts < 2:
            raise UserError("dpo: verifier pairs need at least 2 attempts per task",
                            "set --method-arg attempts=4")
        self.attempts, self.temperature = attempts, temperature
        self.pairs_per_prompt, self.judge, self.judge_model = pairs_per_prompt, judge, judge_model
        self.epochs, self.learning_rate, self.beta = epochs, learning_rate, beta
        self.batch_size, self.lora, self.max_length = batch_size, lora, max_length
        self.save_steps = save_steps

    async def train(self, ctx: TrainContext) -> TrainResult:
        """Sample, pair, DPO; the trained checkpoint (see the module doc)."""
        final = ctx.workdir / "checkpoint"
        state = State(ctx.workdir)
        if ctx.resume and state.data.get("done") and (final / "config.json").is_file():
            return TrainResult.model_validate(state.data["result"])
        started = time.monotonic()
        before = float(state.data.get("seconds", 0.0)) if ctx.resume else 0.0
        tasks, cut = capped(ctx, ctx.train_tasks, self.attempts * (1 if self.source == "verifier" else 2))
        lines, count = await sample_pairs(
            ctx, tasks, model_path=ctx.base_gguf, attempts=self.attempts,
            temperature=self.temperature, source=self.source,
            pairs_per_prompt=self.pairs_per_prompt, label="dpo", judge=self.judge,
            judge_model=self.judge_model)
        if not lines:
            raise UserError(
                f"dpo: no preference pair in {count.read} attempts on {len(tasks)} train task(s)"
                " (every task's attempts scored the same)",
                "sample more (--method-arg attempts=8, a higher temperature) or more train tasks")
        state.save(pairs=len(lines), samples=count.read)
        events: list[TrainEvent] = []
        steps, stopped = await asyncio.to_thread(
            self._fit, ctx, dataset_rows(lines), final, events, started, before, count.read)
        seconds = before + time.monotonic() - started
        reason: StopReason = stopped[0] if stopped else ("max_samples" if cut else "done")
        result = TrainResult(
            checkpoint=final, events=events, samples=count.read, seconds=seconds, stopped_by=reason,
            extra={"pairs": len(lines), "attempts": count.read, "train_tasks": len(tasks),
                   "steps": steps, "pairs_source": self.source})
        state.save(seconds=seconds, done=not stopped, result=result.model_dump(mode="json"))
        return result

    def _fit(self, ctx: TrainContext, rows: list[dict[str, Any]], final: Path,
             events: list[TrainEvent], started: float, before: float,
             samples: int) -> tuple[int, list[StopReason]]:
        from datasets import Dataset  # type: ignore[import-untyped]
        from trl import DPOConfig, DPOTrainer

        tokenizer = load_tokenizer(ctx.base_checkpoint)
        model = load_model(ctx.base_checkpoint, ctx.device, LoraSpec() if self.lora else None)
        out = ctx.workdir / "trl"
        callback, stopped = trainer_callback(ctx, events, started, before, samples, METRICS)
        config = DPOConfig(**trl_args(
            ctx.device, out, ctx.seed, num_train_epochs=self.epochs,
            learning_rate=self.learning_rate, beta=self.beta,
            per_device_train_batch_size=self.batch_size, max_length=self.max_length,
            truncation_mode="keep_start", activation_checkpointing=False,
            save_strategy="steps", save_steps=self.save_steps, save_total_limit=1,
            **ctx.trainer_args))
        trainer = DPOTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows),
                             processing_class=tokenizer, callbacks=[callback])
        steps = fit(trainer, last_checkpoint(out) if ctx.resume else None)
        # Stopped by the budget, the weights so far are the result; trl/ holds the resume point.
        save_checkpoint(trainer.model, tokenizer, final)
        return steps, stopped
