"""What the detectors read off a stored step: its action as a comparable key, its observation
with the counters masked, and the tool error it reports (if any).

These read only what every environment stores (``Step.action``, ``Step.observation``,
``Step.invalid_action``) plus the ``Step.info`` keys the built-in environments write for an
error; an environment of your own that reports errors under other keys is simply not seen as
erring by :func:`tool_error`.
"""

from __future__ import annotations

import json
import re

from sharpen.core.trajectory import Step

_NUMBER = r"[-+]?\$?\d+(?:\.\d+)?"
COUNTER = re.compile(
    rf"\b\d+(?:\s+of\s+\d+)?\s+(?:[a-z]+\s+){{0,2}}(?:left|remaining)\b"
    rf"|\b(?:total|turns?|steps?|attempts?|rounds?)\s*:?\s*{_NUMBER}", re.IGNORECASE)
"""A counter in an observation: "24 turns left", "4 of 5 turns left", "2 submissions left",
"(total -0.03)", "Reward this step: -0.01"."""


def action_key(step: Step) -> str | None:
    """The step's action as a canonical string (``None`` when the reply held no action):
    equal keys mean the same tool with the same arguments."""
    if step.action is None:
        return None
    return json.dumps({"tool": step.action.tool, "arguments": step.action.arguments},
                      sort_keys=True, default=str)


def action_text(step: Step, limit: int = 120) -> str:
    """The action as ``tool(arg=value, ...)``, clipped, for a rationale."""
    if step.action is None:
        return "(no action)"
    args = ", ".join(f"{k}={v!r}" for k, v in step.action.arguments.items())
    return clip(f"{step.action.tool}({args})", limit)


def masked(observation: str | None) -> str:
    """The observation with its counters (:data:`COUNTER`) replaced by ``#`` and surrounding
    whitespace stripped: a turn counter or a running total then no longer makes two otherwise
    equal answers differ, while every other number (a position, a counter-offer, a row count)
    still does."""
    return COUNTER.sub("#", observation or "").strip()


def valid(step: Step) -> bool:
    """The step holds an action the environment accepted (neither unparseable nor declared
    invalid)."""
    return step.action is not None and step.invalid_action is None


def tool_error(step: Step) -> str | None:
    """What went wrong in the environment's answer to a valid action, or ``None``: an
    ``error`` (code, sql, negotiation), a shop-rule error (``rule_error``, toolshop), a
    non-zero ``exit_code`` or a time-out (shell), failed tests (``tests_passed`` below
    ``tests_total``, code) or a wrong result (``correct`` false, sql)."""
    if not valid(step):
        return None
    info = step.info
    for key in ("error", "rule_error"):
        value = info.get(key)
        if isinstance(value, str) and value:
            return clip(value, 160)
    code = info.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"exit code {code}"
    if info.get("timed_out") is True:
        return "timed out"
    passed, total = info.get("tests_passed"), info.get("tests_total")
    if isinstance(passed, int) and isinstance(total, int) and passed < total:
        return f"{passed}/{total} tests passed"
    if info.get("correct") is False:
        return "wrong result"
    return None


def clip(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (``...`` marks a cut)."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."
