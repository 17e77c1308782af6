"""ECHO's auxiliary loss for GRPO: the policy-gradient loss on the model's own tokens plus λ
times the cross-entropy of the environment's observation tokens (the model learns to predict
what the environment says, beside learning what to do).

Observation tokens are, in the prompt, the content of the last user message (the environment's
first observation: the task; the system message and the chat template's markup are not) and,
in a multi-turn completion, the tokens TRL's ``tool_mask`` marks 0 (tool or environment
results; TRL's ``tool_mask`` is the ``env_mask`` a ``rollout_func`` returns, so with
``multi_turn`` (:mod:`sharpen.train.rollout`) these are the environment's answers between the
replies and the chat template's markup around them). The prompt's span is found from the chat
template itself: the prompt rendered with that message's content emptied shares its leading and
trailing tokens with the full one, and what lies between is the observation.
"""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer


def observation_span(tokenizer: Any, messages: list[dict[str, Any]]) -> tuple[int, int]:
    """``(start, end)``: the token positions of the last user message's content in ``messages``
    rendered with the generation prompt (as TRL renders a conversational prompt)."""
    last = max(k for k, m in enumerate(messages) if m["role"] == "user")
    emptied = [dict(m, content="") if k == last else m for k, m in enumerate(messages)]
    full = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    bare = tokenizer.apply_chat_template(emptied, add_generation_prompt=True, tokenize=True)
    full, bare = _ids(full), _ids(bare)
    start = 0
    while start < min(len(full), len(bare)) and full[start] == bare[start]:
        start += 1
    tail = 0
    while (tail < min(len(full), len(bare)) - start
           and full[len(full) - 1 - tail] == bare[len(bare) - 1 - tail]):
        tail += 1
    return start, len(full) - tail


def _ids(rendered: Any) -> list[int]:
    ids = rendered["input_ids"] if isinstance(rendered, dict) or hasattr(rendered, "keys") else rendered
    return list(ids)


class EchoGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` with ECHO's auxiliary loss of weight ``echo`` (λ)."""

    def __init__(self, *args: Any, echo: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.echo = echo

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        prompt_ids, prompt_mask = output["prompt_ids"], output["prompt_mask"]
        mask = torch.zeros_like(prompt_mask)
        for row, example in enumerate(inputs):
            start, end = observation_span(self.processing_class, example["prompt"])
            pad = int(prompt_ids.shape[1] - prompt_mask[row].sum())  # TRL pads prompts on the left
            mask[row, pad + start:pad + end] = 1
        output["observation_mask"] = mask * prompt_mask
        return output

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> torch.Tensor:
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.echo == 0:
            return loss
        input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        env_in_completion = (torch.zeros_like(inputs["completion_mask"]) if "tool_mask" not in inputs
                             else inputs["completion_mask"] * (1 - inputs["tool_mask"]))
        target = torch.cat([inputs["observation_mask"], env_in_completion], dim=1)[:, 1:].float()
        logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
        nll = torch.nn.functional.cross_entropy(
            logits.float().transpose(1, 2), input_ids[:, 1:], reduction="none")
        ce = (nll * target).sum() / target.sum().clamp(min=1.0)
        self._metrics["train"]["echo/observation_ce"].append(ce.item())
        return loss + self.echo * ce
