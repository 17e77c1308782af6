"""Exceptions that carry their own remedy.

A ``UserError`` is something the user can fix (a typo in a config, an unknown name, a dead
URL). The CLI prints its message and its ``fix`` on one line and exits with status 2 — never
a traceback. ``InfraError`` marks failures of the infrastructure (rate limits, 5xx, timeouts,
refused connections, truncated responses): the runner retries them and, if they persist,
records the attempt with error kind ``infra`` so it never counts against the agent.
"""

from __future__ import annotations


class SharpenError(Exception):
    """Base class of every exception sharpen raises on purpose."""


class UserError(SharpenError):
    """A problem the user can fix; ``fix`` says how."""

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} — {self.fix}" if self.fix else self.message


class InfraError(SharpenError):
    """A failure outside the agent's control. ``retryable`` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool = True, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class AgentError(SharpenError):
    """The agent itself failed before reaching an answer — an external agent program that
    crashed, exited non-zero or ran past its timeout. The runner stores the episode as a
    failure with error kind ``agent``: it counts against the agent."""
