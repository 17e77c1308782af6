"""``sharpen train reward-model ENV``: a Bradley–Terry reward model (TRL's ``RewardTrainer``) —
the embedded model with a scalar head — trained on preference pairs of the start model's
attempts, and measured on pairs of tasks it never saw.

- Train pairs: ``attempts`` episodes per *train* task, paired by the verifier (or a judge,
  ``pairs=judge``; :mod:`sharpen.train.pairs`). The loss is ``−log σ(r(chosen) − r(rejected))``
  on the whole conversation (prompt + reply) under the chat template.
- Held-out pairs: the same sampling on the *val* tasks; the accuracy is the share of them the
  model orders right (``r(chosen) > r(rejected)``; a tie counts as wrong), with its Wilson 95%
  interval, in :attr:`TrainResult.extra` (``val_accuracy``, ``val_low``, ``val_high``,
  ``val_pairs``) and a final :class:`TrainEvent`'s metrics. The test split stays the engine's.
- The result is not a chat model: :attr:`TrainResult.policy` is false (no GGUF, no held-out
  verdict of a policy); it is used through :class:`RewardScorer` — the ``reward_model`` judge
  (:mod:`sharpen.judges.reward_model`) and the best-of-N selector
  (:mod:`sharpen.train.best_of_n`).

Resume as ``dpo`` does: rollouts by config hash, training from the last TRL checkpoint under
``workdir/trl``, a finished training returned as it is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from sharpen.core.errors import UserError
from sharpen.stats.intervals import Interval, wilson
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

METRICS = ("accuracy", "margin", "grad_norm", "learning_rate")


class RewardScorer:
    """A trained reward model, loaded once: :meth:`score` is the scalar it gives a conversation
    (OpenAI chat messages, rendered with the chat template as the trainer rendered them;
    longer than ``max_length`` tokens, the last ``max_length`` are scored — the replies are at
    the end)."""

    def __init__(self, path: str | Path, device: str = "cpu", max_length: int = 1024) -> None:
        import torch

        self.path, self.device, self.max_length = Path(path), device, max_length
        self.tokenizer = load_tokenizer(path)
        self.model = load_model(path, device, head="score").eval()
        self._torch = torch

    def score(self, messages: Sequence[dict[str, Any]],
              tools: list[dict[str, Any]] | None = None) -> float:
        """The reward of one conversation."""
        encoded: Any = self.tokenizer.apply_chat_template(
            list(messages), tools=tools, tokenize=True, return_dict=True)  # type: ignore[arg-type]
        ids = list(encoded["input_ids"])[-self.max_length:]
        with self._torch.no_grad():
            out = self.model(input_ids=self._torch.tensor([ids], device=self.device))
        return float(out.logits[0, 0])


def pair_accuracy(scorer: RewardScorer, lines: Sequence[dict[str, Any]]) -> tuple[int, Interval]:
    """How many preference ``lines`` ``scorer`` orders right (chosen scored above rejected,
    ties wrong), and the Wilson 95% interval of that share."""
    right = sum(scorer.score([*x["prompt"], *x["chosen"]]) > scorer.score([*x["prompt"], *x["rejected"]])
                for x in lines)
    return right, wilson(right, len(lines))


class RewardModelMethod(BaseTrainMethod):
    """A Bradley–Terry reward model from preference pairs (module doc).

    Args: ``attempts`` (episodes per task, ≥ 2 for verifier pairs), ``temperature``, ``pairs``
    (``verifier`` or ``judge``), ``pairs_per_prompt`` (pairs from one task's attempts: best vs
    worst, second best vs second worst, …), ``judge``/``judge_model`` (for ``pairs=judge``),
    ``epochs``, ``learning_rate``, ``batch_size``, ``lora``, ``max_length`` (tokens of a
    conversation; longer pairs are left out of training, as TRL does), ``save_steps``."""

    title = "a Bradley–Terry reward model (scalar head) from preference pairs"

    def __init__(self, attempts: int = 4, temperature: float = 0.8, pairs: str = "verifier",
                 pairs_per_prompt: int = 2, judge: str = "pairwise",
                 judge_model: str | dict[str, Any] | None = None, epochs: int = 1,
                 learning_rate: float = 1e-5, batch_size: int = 2, lora: bool = False,
                 max_length: int = 512, save_steps: int = 50) -> None:
        for name, value in (("attempts", attempts), ("pairs_per_prompt", pairs_per_prompt),
                            ("epochs", epochs), ("batch_size", batch_size),
                            ("max_length", max_length), ("save_steps", save_steps)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UserError(f"reward-model: {name} must be a positive integer, got {value!r}",
                                f"set --method-arg {name}=2 (or more)")
        self.source = check_pair_source("reward-model", pairs)
        if self.source == "verifier" and attempts < 2:
            raise UserError("reward-model: verifier pairs need at least 2 attempts per task",
                            "set --method-arg attempts=4")
        self.attempts, self.temperature = attempts, temperature
        self.pairs_per_prompt, self.judge, self.judge_model = pairs_per_prompt, judge, judge_model
        self.epochs, self.learning_rate, self.batch_size = epochs, learning_rate, batch_size
        self.lora, self.max_length, self.save_steps = lora, max_length, save_steps

    async def train(self, ctx: TrainContext) -> TrainResult:
        """Sample and pair train and val attempts, fit the reward model, measure it on the val
        pairs (module doc)."""
        final = ctx.workdir / "checkpoint"
        state = State(ctx.workdir)
        if ctx.resume and state.data.get("done") and (final / "config.json").is_file():
            return TrainResult.model_validate(state.data["result"])
        started = time.monotonic()
        before = float(state.data.get("seconds", 0.0)) if ctx.resume else 0.0
        per_task = self.attempts * (1 if self.source == "verifier" else 2)
        tasks, cut = capped(ctx, ctx.train_tasks, per_task)
        sample = partial(sample_pairs, ctx, model_path=ctx.base_gguf, attempts=self.attempts,
                         temperature=self.temperature, source=self.source,
                         pairs_per_prompt=self.pairs_per_prompt, judge=self.judge,
                         judge_model=self.judge_model)
        lines, count = await sample(tasks, label="reward-model")
        if not lines:
            raise UserError(
                f"reward-model: no preference pair in {count.read} attempts on {len(tasks)} "
                "train task(s) (every task's attempts scored the same)",
                "sample more (--method-arg attempts=8, a higher temperature) or more train tasks")
        val_tasks, val_cut = capped(ctx, ctx.val_tasks, per_task, spent=count.read)
        val_lines, val_count = await sample(val_tasks, label="reward-model-val")
        samples = count.read + val_count.read
        state.save(pairs=len(lines), val_pairs=len(val_lines), samples=samples)
        events: list[TrainEvent] = []
        steps, stopped = await asyncio.to_thread(
            self._fit, ctx, dataset_rows(lines), final, events, started, before, samples)
        right, interval = await asyncio.to_thread(
            lambda: pair_accuracy(RewardScorer(final, ctx.device, self.max_length), val_lines))
        accuracy = right / len(val_lines) if val_lines else None
        seconds = before + time.monotonic() - started
        if accuracy is not None:
            final_event = TrainEvent(step=steps, samples=samples, seconds=seconds, metrics={
                "val_accuracy": accuracy, "val_low": interval.low, "val_high": interval.high})
            events.append(final_event)
            ctx.report(final_event)
        reason: StopReason = stopped[0] if stopped else (
            "max_samples" if cut or val_cut else "done")
        result = TrainResult(
            checkpoint=final, events=events, samples=samples, seconds=seconds, stopped_by=reason,
            policy=False,
            extra={"pairs": len(lines), "val_pairs": len(val_lines), "val_right": right,
                   "val_accuracy": accuracy, "val_low": interval.low, "val_high": interval.high,
                   "steps": steps, "pairs_source": self.source})
        state.save(seconds=seconds, done=not stopped, result=result.model_dump(mode="json"))
        return result

    def _fit(self, ctx: TrainContext, rows: list[dict[str, Any]], final: Path,
             events: list[TrainEvent], started: float, before: float,
             samples: int) -> tuple[int, list[StopReason]]:
        from datasets import Dataset  # type: ignore[import-untyped]
        from trl import RewardConfig, RewardTrainer

        tokenizer = load_tokenizer(ctx.base_checkpoint)
        model = load_model(ctx.base_checkpoint, ctx.device, LoraSpec() if self.lora else None,
                           head="score")
        out = ctx.workdir / "trl"
        callback, stopped = trainer_callback(ctx, events, started, before, samples, METRICS)
        config = RewardConfig(**trl_args(
            ctx.device, out, ctx.seed, num_train_epochs=self.epochs,
            learning_rate=self.learning_rate, per_device_train_batch_size=self.batch_size,
            max_length=self.max_length, activation_checkpointing=False,
            save_strategy="steps", save_steps=self.save_steps, save_total_limit=1,
            **ctx.trainer_args))
        trainer = RewardTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows),
                                processing_class=tokenizer, callbacks=[callback])
        steps = fit(trainer, last_checkpoint(out) if ctx.resume else None)
        save_checkpoint(trainer.model, tokenizer, final)
        return steps, stopped
