"""How a stored step and its feedback are laid out for the trajectory page."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sharpen.core.feedback import Feedback
from sharpen.core.trajectory import Step

SEPARATOR = "\n\n"
"""Span offsets index the step's text: its messages' contents joined by this."""


@dataclass
class Thread:
    """The current version of one annotation and the versions it replaced, newest first."""

    current: Feedback
    history: list[Feedback] = field(default_factory=list)
    quote: str | None = None


@dataclass
class StepView:
    """A step ready to render: calls on the left, results on the right."""

    step: Step
    calls: list[dict[str, Any]]
    results: list[dict[str, Any]]
    text: str
    threads: list[Thread]


def step_text(step: Step) -> str:
    """The text span offsets refer to."""
    return SEPARATOR.join(m.content or "" for m in step.messages)


def step_view(step: Step, threads: list[Thread]) -> StepView:
    """Split the step's messages into the agent's side and the environment's side, each
    message with its offset in :func:`step_text`."""
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    offset = 0
    for i, m in enumerate(step.messages):
        entry = {"role": m.role, "content": m.content or "", "offset": offset, "i": i,
                 "tool_calls": [{"name": c.name, "id": c.id,
                                 "arguments": json.dumps(c.arguments, indent=2, ensure_ascii=False)}
                                for c in m.tool_calls], "tool_call_id": m.tool_call_id}
        (calls if m.role == "assistant" else results).append(entry)
        offset += len(m.content or "") + len(SEPARATOR)
    text = step_text(step)
    for t in threads:
        span = t.current.target.span
        if span is not None:
            t.quote = text[span[0]:span[1]]
    return StepView(step=step, calls=calls, results=results, text=text, threads=threads)


def feedback_threads(records: list[Feedback]) -> dict[int | None, list[Thread]]:
    """Group feedback by step (``None``: the trajectory itself), folding edits: a record
    named by another's ``supersedes`` is history of that newer record."""
    by_id = {f.id: f for f in records}
    replaced = {f.supersedes for f in records if f.supersedes}
    out: dict[int | None, list[Thread]] = {}
    for f in records:
        if f.id in replaced:
            continue
        history = []
        seen = {f.id}
        prev = f.supersedes
        while prev and prev in by_id and prev not in seen:
            seen.add(prev)
            history.append(by_id[prev])
            prev = by_id[prev].supersedes
        out.setdefault(f.target.step_index, []).append(Thread(current=f, history=history))
    return out
