"""What a conformance check returns: :class:`CheckReport`, a list of passed checks and of
:class:`Problem` s, each naming the fault and the fix.

A checker never raises for a plug-in that fails a check (it records a problem and goes on
with what still can be checked); ``raise_for_problems()`` turns a failed report into one
``AssertionError`` holding every message, which is what a user's own test wants::

    check_env("mypkg.envs:MyEnv").raise_for_problems()
"""

from __future__ import annotations

import traceback
from typing import Any

from pydantic import BaseModel, Field, computed_field

from sharpen.core.errors import UserError
from sharpen.core.registry import PluginRef


class Problem(BaseModel):
    """One failed check."""

    check: str
    """Short id of the check, e.g. ``tool-schema`` or ``list-tasks``."""
    message: str
    """What is wrong and how to fix it, in one or two sentences."""


class CheckReport(BaseModel):
    """The result of checking one plug-in against its kind's contract."""

    kind: str
    """Plug-in kind: ``env``, ``agent``, ``model``, ``proposer`` or ``judge``."""
    name: str
    """The name or reference that was checked."""
    passed: list[str] = Field(default_factory=list)
    """Checks that passed, each ``"id: what was shown"``."""
    problems: list[Problem] = Field(default_factory=list)
    """Checks that failed."""
    notes: list[str] = Field(default_factory=list)
    """Checks that did not apply (no reference solution, no verifier), and why."""

    @computed_field  # type: ignore[prop-decorator]  # pydantic stacks it on a property; mypy cannot
    @property
    def ok(self) -> bool:
        """Whether every check that ran passed."""
        return not self.problems

    def pass_(self, check: str, what: str) -> None:
        """Record that ``check`` passed, showing ``what``."""
        self.passed.append(f"{check}: {what}")

    def fail(self, check: str, message: str) -> None:
        """Record that ``check`` failed; ``message`` names the fault and the fix."""
        self.problems.append(Problem(check=check, message=message))

    def note(self, check: str, message: str) -> None:
        """Record that ``check`` did not apply, and why."""
        self.notes.append(f"{check}: {message}")

    def failed(self, check: str) -> bool:
        """Whether ``check`` has a problem recorded."""
        return any(p.check == check for p in self.problems)

    def raise_for_problems(self) -> None:
        """``AssertionError`` with every problem's message, when there is any."""
        if self.problems:
            lines = "\n".join(f"- [{p.check}] {p.message}" for p in self.problems)
            raise AssertionError(f"{self.kind} {self.name!r} fails {len(self.problems)} "
                                 f"check(s):\n{lines}")

    def lines(self) -> list[str]:
        """The report as text lines for people: passed, failed, then notes."""
        out = [f"{'ok' if self.ok else 'FAILED'}: {self.kind} {self.name}"]
        out += [f"  passed  {p}" for p in self.passed]
        out += [f"  FAILED  {p.check}: {p.message}" for p in self.problems]
        out += [f"  note    {n}" for n in self.notes]
        return out


def explain(exc: BaseException) -> str:
    """One line for an exception a plug-in raised: a :class:`UserError`'s message and fix, or
    the exception's type, message and the line that raised it — never a traceback."""
    if isinstance(exc, UserError):
        return str(exc)
    where = ""
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        where = f" (at {last.filename}:{last.lineno} in {last.name})"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}{where}"


def plugin_ref(ref: str | PluginRef | dict[str, Any], args: dict[str, Any] | None) -> PluginRef:
    """``ref`` (a name, a reference or ``{name, args}``) as a :class:`PluginRef`, with
    ``args`` merged over its own."""
    if isinstance(ref, str):
        ref = PluginRef(name=ref)
    elif isinstance(ref, dict):
        ref = PluginRef.model_validate(ref)
    return ref.model_copy(update={"args": {**ref.args, **(args or {})}}) if args else ref
