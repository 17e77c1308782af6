"""Supervised fine-tuning on kept conversations (TRL's ``SFTTrainer``): the update step of
``star`` and ``rerest``.

Each kept conversation (an ``sft`` export line: ``{"messages": [...]}``) becomes one
prompt–completion pair: the messages before the agent's last reply are the prompt, the last
reply the completion, so the loss is on what the model said and never on the environment's
text (``benchmarks/star_finetune.py`` measured this shape on the embedded model). A multi-turn
conversation whose earlier replies should train too is exported per reply
(``completion`` format) by the caller.

Models are loaded, placed and saved through :mod:`sharpen.train.hf` (the device, LoRA
merged before saving); every step's loss goes to ``on_loss``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sharpen.core.errors import UserError
from sharpen.train.hf import LoraSpec, fit, load_model, load_tokenizer, save_checkpoint, trl_args


class SftSettings(BaseModel):
    """The fine-tuning hyperparameters ``star`` and ``rerest`` take as method args."""

    epochs: float = 2.0
    learning_rate: float = 3e-5
    batch_size: int = 4
    max_steps: int = -1
    """Optimiser steps per round (``-1``: as many as ``epochs`` take)."""
    max_length: int = 1024
    lora: bool = False
    """Train a LoRA adapter (merged into the saved checkpoint) instead of every weight."""
    lora_r: int = 16


def prompt_completion(line: dict[str, Any]) -> dict[str, Any]:
    """The pair of one ``sft`` export line: everything before the last assistant reply, and
    that reply (tool definitions kept when the line has them)."""
    messages = line["messages"]
    last = max((k for k, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    if last < 1:
        raise UserError("an SFT example has no assistant reply after a prompt",
                        "keep only conversations the agent replied in")
    pair: dict[str, Any] = {"prompt": messages[:last], "completion": [messages[last]]}
    if line.get("tools"):
        pair["tools"] = line["tools"]
    return pair


def fine_tune(checkpoint: Path, lines: Sequence[dict[str, Any]], out: Path, *, device: str,
              seed: int, settings: SftSettings, trainer_args: dict[str, Any] | None = None,
              on_loss: Callable[[int, float], None] = lambda step, loss: None) -> list[float]:
    """Fine-tune ``checkpoint`` on ``lines`` and save the result (plain weights) to ``out``;
    returns the loss of every logged step. ``trainer_args`` override any TRL setting."""
    from datasets import Dataset  # type: ignore[import-untyped]
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    if not lines:
        raise UserError("nothing to fine-tune on", "keep at least one conversation")
    losses: list[float] = []

    class Losses(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                   **kwargs: Any) -> None:
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))
                on_loss(int(state.global_step), float(logs["loss"]))

    s = settings
    lora = LoraSpec(r=s.lora_r, alpha=2 * s.lora_r) if s.lora else None
    config = SFTConfig(**trl_args(
        device, out.with_name(out.name + "-trl"), seed, num_train_epochs=s.epochs,
        learning_rate=s.learning_rate, per_device_train_batch_size=s.batch_size, max_steps=s.max_steps,
        max_length=s.max_length, lr_scheduler_type="linear", **(trainer_args or {})))
    tokenizer = load_tokenizer(checkpoint)
    trainer = SFTTrainer(model=load_model(checkpoint, device, lora), args=config,
                         train_dataset=Dataset.from_list([prompt_completion(x) for x in lines]),
                         processing_class=tokenizer, callbacks=[Losses()])
    fit(trainer)  # losses go to on_loss, never to stdout
    save_checkpoint(trainer.model, tokenizer, out)
    return losses
