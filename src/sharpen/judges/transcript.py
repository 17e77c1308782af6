"""A trajectory as a judge reads it: the task, then each step under its id (``[S0]``, ``[S1]``,
...), cut to a token budget — and the cut said, so the judge knows what it did not see.

The verifier's verdict is never shown: a judge is measured against it (``sharpen judge
validate``), and one that could read it would agree by copying.
"""

from __future__ import annotations

import json
import re

from sharpen.core.text import CHARS_PER_TOKEN, clip
from sharpen.core.trajectory import Step, Trajectory

STEP_ID = re.compile(r"\[S(\d+)\]")
"""A step citation in a judge's explanation."""


def task_text(t: Trajectory) -> str:
    """The task as the agent was given it: the first user message."""
    return next((m.content or "" for m in t.messages if m.role == "user"), "").strip()


def _step_text(s: Step, limit: int) -> str:
    reply = next((m for m in s.messages if m.role == "assistant"), None)
    said = (reply.content or "").strip() if reply is not None else ""
    if s.action is not None:
        did = f"calls {s.action.tool}({json.dumps(s.action.arguments, ensure_ascii=False)})"
    else:
        did = f"gives no valid action ({s.invalid_action or 'unparseable reply'})"
    lines = [f"[S{s.index}] Agent {did}"]
    if said and s.action is None:
        lines.append(f"Agent wrote: {clip(said, limit // 2)}")
    lines.append(f"Environment: {clip((s.observation or '(nothing)').strip(), limit // 2)}")
    return "\n".join(lines)


def render(t: Trajectory, token_budget: int) -> tuple[str, bool]:
    """``(text, cut)``: the task and the steps within about ``token_budget`` tokens. Each step
    gets an equal share; when even that does not fit, the first and last steps are kept and
    the middle ones are named as left out. ``cut`` says whether anything was cut."""
    chars = max(400, token_budget * CHARS_PER_TOKEN)
    task = task_text(t)
    head = f"Task:\n{clip(task, chars // 3)}"
    if not t.steps:
        return f"{head}\n\n(The agent took no step.)", len(task) > chars // 3
    room = chars - len(head)
    share = max(160, room // len(t.steps))
    blocks = [_step_text(s, share) for s in t.steps]
    cut = len(task) > chars // 3 or any("characters cut]" in b for b in blocks)
    kept = list(range(len(blocks)))
    while sum(len(blocks[i]) for i in kept) > room and len(kept) > 2:
        kept.pop(len(kept) // 2)  # drop from the middle: the start and the end say most
        cut = True
    out = [head, ""]
    prev = -1
    for i in kept:
        if i != prev + 1:
            out.append(f"[S{prev + 1}–S{i - 1} left out to fit the budget]")
        out.append(blocks[i])
        prev = i
    return "\n".join(out), cut


def cited_steps(text: str, n_steps: int) -> list[int]:
    """The step ids ``text`` cites, in order, without repeats or ids the trajectory lacks."""
    seen: list[int] = []
    for m in STEP_ID.finditer(text):
        i = int(m[1])
        if i < n_steps and i not in seen:
            seen.append(i)
    return seen
