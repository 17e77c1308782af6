"""The shell environment's declared perturbation, applied where a problem is materialised.

- ``noise_files`` — the task directory also holds a few unrelated Markdown notes under
  ``notes/`` (listed with the other files). No family reads ``.md`` files or ``notes/``, and
  the notes use none of the words a ``replace`` task swaps, so the goal, the reference
  commands and the hidden checks are the original's.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tasks.py imports this module to apply the perturbation
    from sharpen.envs.shell.tasks import ShellProblem

PERTURBATIONS: dict[str, str] = {
    "noise_files": "unrelated notes (notes/*.md) sit beside the task's files",
}
"""Name -> what it changes (``ShellEnv.perturbations``)."""

_WORDS = ("alpha", "bravo", "delta", "engine", "gamma", "harbor", "kernel", "lambda", "matrix",
          "orbit", "parser", "router", "signal", "vector", "worker", "zone")
"""Note vocabulary: none of it is a word a ``replace`` task swaps or a log level."""


def perturb_problem(problem: ShellProblem, name: str, rng: random.Random) -> ShellProblem:
    """``problem`` under perturbation ``name`` (one of :data:`PERTURBATIONS`)."""
    if name != "noise_files":
        raise ValueError(f"unknown shell perturbation {name!r}")
    files = dict(problem.files)
    for _ in range(rng.randint(2, 4)):
        path = f"notes/{rng.choice(_WORDS)}-{rng.randrange(100)}.md"
        lines = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 8)))
                 for _ in range(rng.randint(2, 6))]
        files.setdefault(path, "\n".join(lines) + "\n")
    return problem.model_copy(update={"files": files})
