"""Rebuilding a code problem from its TaskSpec alone, whatever its source.

The source is ``task.metadata["source"]`` when present, else the id prefix: ``HumanEval/<n>``
is a HumanEval task, ``gen/...`` a generated one. This is what lets the env, the offline
:class:`~sharpen.envs.code.score.CodeVerifier` and any re-scoring tool agree on a task's
content given only the stored TaskSpec. A perturbed variant
(:mod:`sharpen.envs.perturbation`) is its original's problem changed by
:mod:`sharpen.envs.code.perturb`.
"""

from __future__ import annotations

import functools

from sharpen.core.errors import UserError
from sharpen.core.task import TaskSpec
from sharpen.envs.code import generator, humaneval
from sharpen.envs.code.generator import FunctionTaskGenerator
from sharpen.envs.code.perturb import PERTURBATIONS, perturb_problem
from sharpen.envs.code.problem import CodeProblem
from sharpen.envs.perturbation import perturbed_of, rng_of, unknown

SOURCES = (humaneval.SOURCE, generator.SOURCE)
"""Where code tasks come from."""


def task_source(task: TaskSpec) -> str:
    """``"humaneval"`` or ``"generated"``; anything else raises a :class:`UserError`."""
    source = task.metadata.get("source")
    if source is None:
        if task.id.startswith("HumanEval/"):
            source = humaneval.SOURCE
        elif task.id.startswith("gen/"):
            source = generator.SOURCE
    if source not in SOURCES:
        raise UserError(
            f"cannot tell where code task {task.id!r} comes from",
            'use a HumanEval/<n> or gen/... id, or set metadata["source"] to '
            f"one of {', '.join(SOURCES)}",
        )
    return str(source)


def materialize(task: TaskSpec) -> CodeProblem:
    """The problem (prompt, hidden tests, reference) of ``task``; deterministic."""
    if task.env != "code":
        raise UserError(f"task {task.id!r} belongs to env {task.env!r}, not 'code'",
                        "run it with its own environment")
    variant = perturbed_of(task)
    if variant is not None:  # a declared perturbation of another task: build that, then change it
        if variant.name not in PERTURBATIONS:
            raise unknown("code", variant, PERTURBATIONS)
        return perturb_problem(materialize(variant.base), variant.name, rng_of(variant))
    if task_source(task) == humaneval.SOURCE:
        return humaneval.humaneval_problem(task.id)
    return _generated(task)


@functools.lru_cache(maxsize=4096)
def _generated(task: TaskSpec) -> CodeProblem:
    # Generating compiles and runs the reference (~0.5 ms); epochs and re-scoring ask for the
    # same task again. Callers share the cached problem and must not mutate it.
    return FunctionTaskGenerator().materialize(task)
