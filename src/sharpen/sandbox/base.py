"""The Sandbox protocol: run untrusted code in a temporary workdir."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel


class ExecResult(BaseModel):
    """Result of one command in the sandbox."""

    returncode: int | None
    """Exit status; negative for a signal; ``None`` if killed by the wall-clock timeout."""
    stdout: str
    """Captured stdout, capped (see ``truncated``)."""
    stderr: str
    """Captured stderr, capped."""
    timed_out: bool = False
    """The wall-clock timeout fired and the whole process tree was killed."""
    truncated: bool = False
    """Output exceeded the cap and was cut."""
    seconds: float = 0.0
    """Wall time."""


class Sandbox(Protocol):
    """A temporary working directory plus a way to run commands confined to it."""

    isolation: str
    """The isolation level actually in force, e.g. ``bwrap+rlimits`` or ``rlimits``."""

    async def exec(
        self,
        argv: list[str],
        *,
        stdin: bytes | None = None,
        timeout: float = 10.0,
    ) -> ExecResult: ...

    async def write_file(self, path: str, content: str | bytes) -> None: ...

    async def read_file(self, path: str) -> str: ...

    async def close(self) -> None: ...
