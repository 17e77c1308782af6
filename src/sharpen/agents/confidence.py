"""Stated confidence: an agent's own estimate, with its final answer, that the answer is right.

Calibration (:mod:`sharpen.stats.reliability`) reads ``Outcome.components["confidence"]``;
this module is how a built-in model agent fills it, once for every environment:

- **Offered.** With the agent arg ``confidence: true`` the agent offers each *final* tool of
  the environment (``ToolSpec.final``: code's ``submit``, sql's ``submit_sql``, shell's
  ``done``, toolshop's ``finish`` and ``transfer_to_human``, reasoning_gym's ``answer``) with
  one more optional argument, ``confidence``, a number from 0 to 1 (:func:`offer`), and says
  so in the system prompt (:func:`instructions`). A reply that answers in a fenced block (the
  text protocol) may state it on a line ``Confidence: 0.7`` outside the block. A final tool
  that already declares a ``confidence`` argument of its own is left alone. An environment
  with no final tool (textworld, gridsafety: the episode ends on an ordinary move) gets
  nothing, and its calibration row stays "not available".
- **Stripped.** :func:`take` removes the argument from the action before the environment
  sees it, so no environment and no verifier changes, and records it on the step:
  ``Step.info["stated_confidence"]`` (a float, or ``None`` when the final call stated none).
  A value that is not a number in [0, 1] (``"high"``, ``1.5``, ``true``) is dropped, with why
  in ``Step.info["confidence_dropped"]``; it is never an invalid action.
- **Carried.** :func:`attach` (the runner calls it on every outcome) puts the stated confidence
  of the episode — that of the last final call the environment accepted, in the last trial
  for agents that retry — into ``Outcome.components["confidence"]``, unless the environment's
  verdict already has one.
"""

from __future__ import annotations

import math
import re
from typing import Any

from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.trajectory import TRIAL, Action, Trajectory

ARGUMENT = "confidence"
"""The argument offered on final tools, and the outcome component it fills."""

STATED = "stated_confidence"
"""``Step.info`` key on every step that called a final tool: the stated confidence (a float in
[0, 1]) or ``None`` when the call stated none (or stated a value that was dropped)."""

DROPPED = "confidence_dropped"
"""``Step.info`` key: why a stated confidence was dropped (not a number in [0, 1])."""

PROPERTY: dict[str, Any] = {
    "type": "number",
    "description": ("Optional: how sure you are that this answer is correct, from 0 (surely "
                    "wrong) to 1 (surely right)."),
}
"""The JSON Schema of the offered argument. No bounds: a value outside [0, 1] is dropped with
a note rather than refused as an invalid action by a schema check."""

_FENCED = re.compile(r"```.*?(```|\Z)", re.DOTALL)
_LINE = re.compile(r"^[\s*_>#-]*confidence[\s*_]*[:=][\s*_]*(\S+)", re.IGNORECASE | re.MULTILINE)


def offered_on(tools: list[ToolSpec]) -> frozenset[str]:
    """Names of the tools a confidence is offered on: the final ones without a ``confidence``
    argument of their own."""
    return frozenset(t.name for t in tools
                     if t.final and ARGUMENT not in t.parameters.get("properties", {}))


def offer(tools: list[ToolSpec]) -> list[ToolSpec]:
    """``tools`` with the optional ``confidence`` argument added to each of
    :func:`offered_on`'s (copies; the environment's tools are untouched)."""
    names = offered_on(tools)
    out = []
    for tool in tools:
        if tool.name in names:
            params = dict(tool.parameters)
            params["properties"] = {**params.get("properties", {}), ARGUMENT: dict(PROPERTY)}
            tool = tool.model_copy(update={"parameters": params})
        out.append(tool)
    return out


def instructions(tools: list[ToolSpec]) -> str:
    """The system prompt's sentence asking for a confidence, or ``""`` when no tool is offered
    one."""
    names = sorted(offered_on(tools))
    if not names:
        return ""
    listed = " or ".join(f"`{n}`" for n in names)
    return (f"When you call {listed}, also state how sure you are that your answer is correct, "
            f"as the `{ARGUMENT}` argument: a number from 0 (surely wrong) to 1 (surely right). "
            "If you answer in a ``` block instead, add a line `Confidence: P` after the block, "
            "P being your number.")


def check(value: object) -> tuple[float | None, str | None]:
    """``(confidence, None)`` for a number in [0, 1] (a numeric string is read as one), else
    ``(None, why it was dropped)``."""
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip().strip("*_`").rstrip(".,;"))
        except ValueError:
            number = None
    if number is None:
        return None, f"stated confidence {value!r} is not a number; dropped"
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        return None, f"stated confidence {value!r} is outside [0, 1]; dropped"
    return number, None


def _from_text(text: str) -> str | None:
    """The value of a ``Confidence: X`` line outside the reply's fenced blocks, if any."""
    found = _LINE.findall(_FENCED.sub("", text))
    return found[-1] if found else None


def take(action: Action, reply_text: str | None,
         tools: list[ToolSpec]) -> tuple[Action, dict[str, Any]]:
    """``action`` without its ``confidence`` argument when it calls a tool confidence is offered
    on (:func:`offered_on` of the environment's ``tools``), and the ``Step.info`` entries that
    record the stated value (see the module doc; a ``Confidence:`` line of ``reply_text``
    counts when the arguments hold none). Any other action comes back unchanged, with no
    entries. The caller sends the action and adds the entries to the step's info after the
    environment answered (:func:`~sharpen.agents.acting.apply_action` replaces the info)."""
    if action.tool not in offered_on(tools):
        return action, {}
    args = dict(action.arguments)
    raw = args.pop(ARGUMENT, None)
    if raw is None and reply_text:
        raw = _from_text(reply_text)
    value, note = (None, None) if raw is None else check(raw)
    entries: dict[str, Any] = {STATED: value}
    if note is not None:
        entries[DROPPED] = note
    return action.model_copy(update={"arguments": args}), entries


def stated(trajectory: Trajectory) -> float | None:
    """The episode's stated confidence: that of its last final call the environment accepted
    (not an invalid action), among the steps of its last trial; ``None`` if that call stated
    none or there was none."""
    steps = [s for s in trajectory.steps if STATED in s.info and s.invalid_action is None]
    trials = [s.info[TRIAL] for s in trajectory.steps if TRIAL in s.info]
    if trials:
        steps = [s for s in steps if s.info.get(TRIAL) == max(trials)]
    if not steps:
        return None
    value = steps[-1].info[STATED]
    return float(value) if isinstance(value, int | float) else None


def attach(outcome: Outcome, trajectory: Trajectory) -> Outcome:
    """``outcome`` with ``components["confidence"]`` set to :func:`stated` of ``trajectory``
    when there is one and the environment's verdict has none of its own."""
    value = stated(trajectory)
    if value is None or ARGUMENT in outcome.components:
        return outcome
    return outcome.model_copy(update={"components": {**outcome.components, ARGUMENT: value}})
