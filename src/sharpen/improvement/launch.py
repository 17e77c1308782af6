"""Starting an improvement experiment the way ``sharpen improve`` and ``sharpen.improve(...)``
both do: check what the config names before any rollout, prepare its folder (continue a
checkpoint or start over), run it with one model instance per ref, and close those models.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, Registry
from sharpen.envs.base import ENV
from sharpen.improvement.experiment import Experiment, ExperimentConfig, ExperimentResult
from sharpen.improvement.folder import experiment_folder
from sharpen.improvement.models import SharedModels
from sharpen.improvement.proposal import PROPOSER
from sharpen.runner.executor import Executor
from sharpen.store.store import Store


def check_config(config: ExperimentConfig, registry: Registry = REGISTRY) -> None:
    """A :class:`UserError` for a budget that limits nothing or an unknown environment or
    proposer name (with suggestions), before anything runs."""
    config.engine.budget.check()
    registry.get(ENV, config.env.name)
    for ref in [config.proposer, *config.baselines]:
        registry.get(PROPOSER, ref.name)


def prepare_folder(store: Store, config: ExperimentConfig, base: Path | None, *,
                   resume: bool, fresh: bool) -> Path:
    """The experiment's folder (``base/<experiment id>``, see
    :func:`~sharpen.improvement.folder.experiment_folder`). An existing checkpoint is kept
    with ``resume``, deleted with ``fresh``, and otherwise refused with a :class:`UserError`
    (so that a rerun never silently continues or discards earlier work)."""
    exp_id = config.experiment_id()
    folder = experiment_folder(store.url, exp_id, base)
    if folder.exists() and not resume:
        if not fresh:
            raise UserError(f"experiment {exp_id} already has a checkpoint in {folder}",
                            "add --resume (resume=True in Python) to continue it, or --fresh "
                            "(fresh=True) to start it over")
        shutil.rmtree(folder)
    return folder


async def run_experiment(config: ExperimentConfig, store: Store, folder: Path, *,
                         concurrency: int = 1, progress: bool = False,
                         on_event: Callable[[str], None] | None = None,
                         registry: Registry = REGISTRY,
                         executor: Executor | None = None) -> ExperimentResult:
    """Run ``config`` into ``store``, checkpointing in ``folder``, sharing one model instance
    per ref across its runs and closing them at the end, however it ends. ``executor`` plays
    every episode (default: in this process); the caller closes it."""
    models = SharedModels(registry)
    try:
        return await Experiment(config, store, folder, models=models, concurrency=concurrency,
                                progress=progress, on_event=on_event, registry=registry,
                                executor=executor).run()
    finally:
        await models.aclose()
