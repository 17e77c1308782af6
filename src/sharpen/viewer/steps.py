"""How a stored step and its feedback are laid out for the trajectory page."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sharpen.core.feedback import Feedback
from sharpen.core.trajectory import TRIAL, TRIAL_PROMPT, Step
from sharpen.viewer.render_args import ArgView, arg_views

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
    action_args: list[ArgView] = field(default_factory=list)
    """The parsed action's arguments rendered by type (shown when no message has tool calls)."""
    info: dict[str, Any] = field(default_factory=dict)
    """The step's info as shown (the trial's prompt is shown above the step instead)."""
    trial_start: TrialStart | None = None
    """Set on the first step of a trial (agents that play several, ``reflexion``)."""


@dataclass
class TrialStart:
    """Where a trial begins, with the prompt that trial ran with (``None``: not stored —
    trajectories written before :data:`TRIAL_PROMPT` keep only the last trial's)."""

    trial: int
    prompt: list[dict[str, Any]] | None


def mark_trials(views: list[StepView], last_prompt: list[dict[str, Any]]) -> bool:
    """Mark each view that starts a trial with the prompt it ran with; ``False`` when no
    step on the page belongs to a trial (the page then shows ``last_prompt`` above step 0).

    The prompt is the step's own :data:`TRIAL_PROMPT`; failing that, the highest trial on
    the page gets ``last_prompt`` (the stored conversation is the last trial's)."""
    tagged = [v for v in views if TRIAL in v.step.info]
    if not tagged:
        return False
    last = max(int(v.step.info[TRIAL]) for v in tagged)
    previous: int | None = None
    for v in tagged:
        trial = int(v.step.info[TRIAL])
        if TRIAL_PROMPT in v.step.info or (trial != previous and (previous is not None or v.step.index == 0)):
            prompt = v.step.info.get(TRIAL_PROMPT)
            if prompt is None and trial == last:
                prompt = last_prompt or None
            v.trial_start = TrialStart(trial=trial, prompt=prompt)
        previous = trial
    return True


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
                 "tool_calls": [{"name": c.name, "id": c.id, "args": arg_views(c.arguments),
                                 "arguments": json.dumps(c.arguments, indent=2, ensure_ascii=False)}
                                for c in m.tool_calls], "tool_call_id": m.tool_call_id}
        (calls if m.role == "assistant" else results).append(entry)
        offset += len(m.content or "") + len(SEPARATOR)
    text = step_text(step)
    for t in threads:
        span = t.current.target.span
        if span is not None:
            t.quote = text[span[0]:span[1]]
    return StepView(step=step, calls=calls, results=results, text=text, threads=threads,
                    action_args=arg_views(step.action.arguments) if step.action else [],
                    info={k: v for k, v in step.info.items() if k != TRIAL_PROMPT})


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
