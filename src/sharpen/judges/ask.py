"""The one way a built-in judge asks its model: a JSON reply valid against a schema, or a
:class:`~sharpen.judges.base.JudgeError` that says why there is none."""

from __future__ import annotations

from typing import Any

from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.messages import Message
from sharpen.core.trajectory import Trajectory
from sharpen.judges.base import JudgeError
from sharpen.judges.transcript import cited_steps
from sharpen.models.base import ChatModel
from sharpen.models.structured import ResponseSchema, complete_structured

DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 512}
"""Greedy by default, so a judge gives the same verdict on the same transcript; a budget that
fits an explanation per criterion."""

EXPLANATION_CHARS = 400
"""An explanation is bounded, so that a verbose judge cannot run out of tokens mid-JSON."""


def explained(value: dict[str, Any]) -> dict[str, Any]:
    """The schema of ``{"explanation": ..., "value": VALUE}`` — explanation first, so the judge
    reasons before it commits (backends that constrain write keys in schema order)."""
    return {
        "type": "object",
        "properties": {"explanation": {"type": "string", "maxLength": EXPLANATION_CHARS},
                       "value": value},
        "required": ["explanation", "value"],
        "additionalProperties": False,
    }


async def ask(model: ChatModel, system: str, prompt: str, schema: dict[str, Any],
              params: dict[str, Any] | None = None) -> Any:
    """The model's JSON reply to ``prompt`` (validated against ``schema``, re-asked once).
    Raises :class:`JudgeError` — a context overflow, a reply cut at ``max_tokens``, a reply
    that never validated — with the reason."""
    messages = [Message(role="system", content=system), Message(role="user", content=prompt)]
    reply = await complete_structured(model, messages, ResponseSchema.of(schema, "verdict"),
                                      {**DEFAULT_PARAMS, **(params or {})})
    if reply.ok:
        return reply.value
    if reply.completion.finish_reason == "length" and not (reply.completion.message.content
                                                            or "").strip():
        raise JudgeError("the judge prompt did not fit the model's context (lower the judge's "
                         "token_budget or use a model with a longer context)")
    raise JudgeError(f"the judge's reply was not a valid verdict after {reply.attempts} "
                     f"attempt(s): {reply.error}")


def judge_feedback(t: Trajectory, name: str, value: Any, explanation: str,
                   author: str) -> Feedback:
    """One judge record: on the step the explanation cites when it cites exactly one, else on
    the trajectory."""
    steps = cited_steps(explanation, len(t.steps))
    target = (FeedbackTarget(kind="step", run_id=t.run_id, trajectory_id=t.id,
                             step_index=steps[0]) if len(steps) == 1
              else FeedbackTarget(kind="trajectory", run_id=t.run_id, trajectory_id=t.id))
    return Feedback(source="judge", target=target, name=name, value=value,
                    rationale=explanation.strip(), author=author)
