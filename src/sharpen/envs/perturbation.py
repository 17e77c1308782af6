"""Declared perturbations: variants of a task that its environment knows how to build and its
own verifier still checks.

An environment declares its perturbations by name (``BaseEnvironment.perturbations``, shown
in :class:`~sharpen.envs.base.EnvInfo`); :meth:`BaseEnvironment.perturb` turns a task into
its variant with :func:`variant`. A variant is an ordinary :class:`TaskSpec`:

- its ``id`` is ``<base id>~<name>@<seed>``, so its identity (and a run's config hash)
  differs from the original's and from every other variant's;
- its ``metadata`` carries ``perturbation`` (the name), ``base_task`` (the original's id) and
  ``perturbation_seed`` — the keys the reliability profile's robustness row reads
  (:mod:`sharpen.stats.reliability`) and the environment rebuilds the variant from;
- ``seed``, ``knobs`` and ``split`` are the original's, so the world underneath (database,
  files, hidden tests) is the same one and the same verifier scores it.

Where an environment materialises a task (its ``materialize`` / ``problem_of`` /
``world_of``) it asks :func:`perturbed_of` and, for a variant, builds the original and
applies the named change with :func:`rng_of`'s deterministic random stream. sharpen never
invents a perturbation an environment does not declare.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import NamedTuple

from sharpen.core.errors import UserError
from sharpen.core.hashing import content_hash
from sharpen.core.task import TaskSpec

PERTURBATION = "perturbation"
"""Metadata key: the perturbation's name."""
BASE_TASK = "base_task"
"""Metadata key: the original task's id."""
PERTURBATION_SEED = "perturbation_seed"
"""Metadata key: the seed the perturbation was drawn with."""
_KEYS = (PERTURBATION, BASE_TASK, PERTURBATION_SEED)


class Perturbed(NamedTuple):
    """What a variant is: a perturbation of an original task."""

    name: str
    """The perturbation's name."""
    seed: int
    """The seed it was drawn with."""
    base: TaskSpec
    """The original task (its id and metadata restored)."""


def check_name(env: str, name: str, declared: Mapping[str, str]) -> None:
    """A :class:`UserError` unless ``env`` declares perturbation ``name``; it lists those
    that ``env`` declares."""
    if name in declared:
        return
    if not declared:
        raise UserError(f"environment {env!r} declares no perturbations, so it cannot apply "
                        f"{name!r}", "drop --perturb, or pick an env that `sharpen envs` shows "
                                     "with perturbations (code, sql, toolshop, textworld, shell)")
    raise UserError(f"environment {env!r} has no perturbation {name!r}",
                    f"its perturbations are {', '.join(sorted(declared))}")


def variant(task: TaskSpec, name: str, seed: int) -> TaskSpec:
    """The ``name`` variant of ``task`` drawn with ``seed`` (see the module doc); a variant of
    a variant is refused with a :class:`UserError`."""
    if task.metadata.get(PERTURBATION) is not None:
        raise UserError(f"task {task.id!r} is already a perturbed variant",
                        "perturb the original task (its metadata names it as base_task)")
    return task.model_copy(update={
        "id": f"{task.id}~{name}@{seed}",
        "metadata": {**task.metadata, PERTURBATION: name, BASE_TASK: task.id,
                     PERTURBATION_SEED: seed},
    })


def perturbed_of(task: TaskSpec) -> Perturbed | None:
    """What ``task`` is a variant of, or ``None`` for an unperturbed task."""
    name = task.metadata.get(PERTURBATION)
    if name is None:
        return None
    meta = {k: v for k, v in task.metadata.items() if k not in _KEYS}
    base = task.model_copy(update={"id": str(task.metadata[BASE_TASK]), "metadata": meta})
    return Perturbed(str(name), int(task.metadata.get(PERTURBATION_SEED, 0)), base)


def rng_of(p: Perturbed) -> random.Random:
    """The random stream of one variant: a function of the original's identity, the
    perturbation's name and its seed alone (the same in every process)."""
    return random.Random(content_hash([p.base.hash(), p.name, p.seed]))


def unknown(env: str, p: Perturbed, declared: Mapping[str, str]) -> UserError:
    """The error for a stored variant whose perturbation ``env`` does not (or no longer)
    declare."""
    return UserError(f"task {p.base.id!r} asks for perturbation {p.name!r}, which environment "
                     f"{env!r} does not declare",
                     f"its perturbations are {', '.join(sorted(declared)) or 'none'}")
