"""From what a person names to a :class:`RunConfig`: the steps ``sharpen run`` and
``sharpen.run(...)`` share, so that the CLI and the Python API build the same run.

- :func:`with_agent` puts an agent plug-in into a spec (an agent that needs no model gets the
  model ref ``none`` and no params or components, unless a model was asked for);
- :func:`select_tasks` lists an environment's tasks (the first ``limit`` of a split), and
  refuses an empty list with a :class:`UserError`;
- :func:`with_perturbations` follows each task with its variants under the perturbations
  the environment declares (``--perturb``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sharpen.agents.base import needs_model
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.envs.base import Environment

NO_MODEL = PluginRef(name="none")
"""The model ref of a spec whose agent plug-in declares ``needs_model = False``."""


def with_agent(spec: AgentSpec, ref: PluginRef, *, named: bool, keep_model: bool,
               registry: Registry = REGISTRY) -> AgentSpec:
    """``spec`` run by agent plug-in ``ref``. ``named``: the spec takes the plug-in's name
    (when the spec was not loaded from a file). An agent that needs no model gets the model
    ref ``none`` and no params or components, unless ``keep_model`` (a model was named).
    An unknown agent name raises a :class:`UserError` with suggestions."""
    update: dict[str, Any] = {"agent": ref}
    if named:
        update["name"] = ref.name
    if not needs_model(registry, ref) and not keep_model:
        update.update(model=NO_MODEL, params={}, components={})
    return spec.model_copy(update=update)


def select_tasks(environment: Environment, env_name: str, *, split: str | None,
                 limit: int | None, seed: int) -> list[TaskSpec]:
    """The first ``limit`` tasks (all when ``None``) of ``split`` (all splits when ``None``)
    that ``environment`` lists with ``seed``; a :class:`UserError` when there are none or
    ``limit`` is below 1 (a negative one would slice from the end)."""
    if limit is not None and limit < 1:
        raise UserError(f"the number of tasks must be 1 or more, got {limit}",
                        "pass a positive number of tasks, or none to run them all")
    tasks = environment.list_tasks(split=split, limit=limit, seed=seed)
    if limit is not None:
        tasks = tasks[:limit]
    if not tasks:
        raise UserError(f"environment {env_name!r} has no tasks for split {split!r}",
                        "drop the split or pick train, val or test")
    return tasks


def with_perturbations(environment: Environment, tasks: list[TaskSpec], names: Sequence[str],
                       seed: int) -> list[TaskSpec]:
    """``tasks``, each followed by its variant under every perturbation in ``names`` (in
    order, repeats dropped) drawn with ``seed`` (:meth:`Environment.perturb`), so a run
    scores every original beside its variants and the report's robustness row pairs them by
    ``base_task``. No names: ``tasks`` as they are. A name the environment does not declare
    raises the environment's :class:`UserError` before anything runs."""
    names = list(dict.fromkeys(names))
    return [v for t in tasks for v in (t, *(environment.perturb(t, n, seed) for n in names))]
