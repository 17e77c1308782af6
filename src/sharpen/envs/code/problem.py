"""CodeProblem: the materialised content of one code task (prompt, hidden tests, reference)."""

from __future__ import annotations

from pydantic import BaseModel


class CodeProblem(BaseModel):
    """One "write a Python function" problem.

    The hidden tests are the source of a function ``check(candidate)`` whose top-level
    statements are run one by one, so a report can say *which* assertions failed. ``context``
    is trusted code (for HumanEval: the original prompt, which defines helpers such as
    ``poly`` that some tests call) executed in the checker's namespace before the tests.
    """

    task_id: str
    """Task id, e.g. ``HumanEval/0``."""
    prompt: str
    """What the model is shown: signature and docstring."""
    entry_point: str
    """Name of the function the candidate must define."""
    test: str
    """Hidden test source defining ``check(candidate)``."""
    context: str = ""
    """Trusted code run in the checker before the tests (never shown to the candidate process)."""
    reference: str | None = None
    """A complete program that passes the tests (canonical solution), when known."""
