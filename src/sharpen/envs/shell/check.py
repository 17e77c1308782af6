"""Running a shell task's hidden checks against a finished workdir.

The checks are generated with the task (:class:`~sharpen.envs.shell.tasks.Check`) but never
exist inside the sandbox during the episode: they are evaluated here, after it, mostly from
the host side (files are read with ``O_NOFOLLOW``, so a symlink planted by the agent never
redirects a check outside the workdir). Only ``script_output`` runs something in the sandbox:
the agent's own script, after the check has written its hidden inputs (the original files
are put back afterwards).
"""

from __future__ import annotations

import contextlib
import os
import stat

from pydantic import BaseModel

from sharpen.envs.shell.tasks import Check, ShellProblem
from sharpen.sandbox.local import LocalSandbox

SCRIPT_TIMEOUT = 5.0
"""Seconds one run of the agent's script may take during verification."""


class CheckResult(BaseModel):
    """The verdict of the checks on one workdir."""

    passed: int
    total: int
    failures: list[str]
    """Why each failed check failed (in order)."""

    @property
    def success(self) -> bool:
        return self.total > 0 and self.passed == self.total

    def text(self, limit: int = 5) -> str:
        head = f"{self.passed}/{self.total} checks passed."
        lines = [head, *(f"- {f}" for f in self.failures[:limit])]
        if len(self.failures) > limit:
            lines.append(f"... and {len(self.failures) - limit} more")
        return "\n".join(lines)


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def _clip(text: str, n: int = 80) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= n else text[: n - 3] + "..."


def _full(sandbox: LocalSandbox, path: str) -> str | None:
    full = os.path.realpath(os.path.join(sandbox.workdir, path))
    return full if full.startswith(sandbox.workdir + os.sep) else None


async def _read(sandbox: LocalSandbox, path: str) -> str | None:
    try:
        return await sandbox.read_file(path)
    except (OSError, ValueError):
        return None


async def _one(sandbox: LocalSandbox, check: Check) -> str | None:
    """``None`` if ``check`` passes, else why it failed."""
    if check.kind == "file_equals":
        text = await _read(sandbox, check.path)
        if text is None:
            return f"{check.path} is missing (or not a regular file)"
        if _lines(text) != _lines(str(check.expected)):
            return f"{check.path} has the wrong contents (starts {_clip(text)!r})"
        return None
    if check.kind == "file_set":
        full = _full(sandbox, check.path)
        if full is None or os.path.islink(os.path.join(sandbox.workdir, check.path)) \
                or not os.path.isdir(full):
            return f"{check.path}/ is missing (or not a directory)"
        got, want = set(os.listdir(full)), set(check.expected)
        if got != want:
            parts = []
            if want - got:
                parts.append(f"{len(want - got)} expected file(s) missing, "
                             f"e.g. {sorted(want - got)[0]}")
            if got - want:
                parts.append(f"{len(got - want)} unexpected file(s), e.g. {sorted(got - want)[0]}")
            return f"{check.path}/: " + "; ".join(parts)
        return None
    if check.kind == "executable":
        try:
            st = os.lstat(os.path.join(sandbox.workdir, check.path))
        except OSError:
            return f"{check.path} is missing"
        if not stat.S_ISREG(st.st_mode):
            return f"{check.path} is not a regular file"
        if not st.st_mode & stat.S_IXUSR:
            return f"{check.path} is not executable"
        return None
    if check.kind == "script_output":
        saved = {p: await _read(sandbox, p) for p in check.inputs}
        try:
            for p, text in check.inputs.items():
                await sandbox.write_file(p, text)
            result = await sandbox.exec(["bash", "-c", f"./{check.path}"],
                                        timeout=SCRIPT_TIMEOUT)
        except (OSError, ValueError) as exc:
            return f"could not run ./{check.path}: {exc}"
        finally:
            for p, text in saved.items():
                if text is not None:
                    with contextlib.suppress(OSError, ValueError):
                        await sandbox.write_file(p, text)
        if result.timed_out:
            return f"./{check.path} timed out"
        if result.returncode != 0:
            return f"./{check.path} exited with status {result.returncode}"
        if _lines(result.stdout) != _lines(str(check.expected)):
            which = "on other input data" if check.inputs else "on data.txt"
            return f"./{check.path} printed {_clip(result.stdout)!r} {which}, which is wrong"
        return None
    raise ValueError(f"unknown check kind {check.kind!r}")  # pragma: no cover


async def run_checks(sandbox: LocalSandbox, problem: ShellProblem) -> CheckResult:
    """Evaluate every check of ``problem`` on ``sandbox``'s workdir."""
    failures = []
    for check in problem.checks:
        why = await _one(sandbox, check)
        if why is not None:
            failures.append(why)
    total = len(problem.checks)
    return CheckResult(passed=total - len(failures), total=total, failures=failures)
