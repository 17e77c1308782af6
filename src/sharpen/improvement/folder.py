"""An experiment's folder: what ``sharpen improve`` leaves on disk, and reading it back.

::

    <base>/<experiment id>/config.json             ExperimentConfig, written when it starts
    <base>/<experiment id>/<proposer>/state.json   each engine's checkpoint (archive,
                                                   rejections, account, anytime curve)
    <base>/<experiment id>/result.json             ExperimentResult, once test is scored

``base`` is ``improve/`` next to a SQLite store's file, else ``.sharpen/improve``. The
trajectories themselves are in the store; the folder holds what only the engine knows.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from sharpen.core.folders import FolderReader, beside_store, pick_folder
from sharpen.improvement.experiment import (
    CONFIG_FILE,
    RESULT_FILE,
    STATE_FILE,
    ExperimentConfig,
    ExperimentResult,
)
from sharpen.improvement.state import EngineState


def experiments_base(store_url: str) -> Path:
    """Where experiments of the store at ``store_url`` keep their folders by default."""
    return beside_store(store_url, "improve")


def experiment_folder(store_url: str, experiment_id: str, base: Path | None = None) -> Path:
    """The folder of experiment ``experiment_id``: ``base/ID``, ``base`` defaulting to
    :func:`experiments_base`."""
    return (base if base is not None else experiments_base(store_url)) / experiment_id


class ExperimentFolder(BaseModel):
    """One experiment folder as read from disk (for the viewer). A file that cannot be read
    is named in ``problems`` and left out; nothing here raises for a damaged folder."""

    id: str
    """The experiment id (the folder's name)."""
    path: Path
    """The folder."""
    config: ExperimentConfig | None = None
    """Its config (``None`` for folders written before ``config.json`` existed)."""
    result: ExperimentResult | None = None
    """Its result, once the test split was scored."""
    states: dict[str, EngineState] = Field(default_factory=dict)
    """Each proposer's engine checkpoint, by proposer name, main proposer first."""
    problems: list[str] = Field(default_factory=list)
    """Files that could not be read, with why."""
    updated: datetime
    """When any of its files last changed."""

    @property
    def finished(self) -> bool:
        """Whether the test split was scored."""
        return self.result is not None

    @property
    def definition(self) -> ExperimentConfig | None:
        """The config, from ``config.json`` or else from the result."""
        return self.config or (self.result.config if self.result else None)


def read_experiment(path: Path) -> ExperimentFolder:
    """Read the folder at ``path`` (see :class:`ExperimentFolder`)."""
    reader = FolderReader(path)
    config = reader.load(path / CONFIG_FILE, ExperimentConfig)
    result = reader.load(path / RESULT_FILE, ExperimentResult)
    loaded = {f.parent.name: reader.load(f, EngineState) for f in sorted(path.glob(f"*/{STATE_FILE}"))}
    folder = ExperimentFolder(id=path.name, path=path, config=config, result=result,
                              problems=reader.problems, updated=reader.updated)
    defined = folder.definition
    order = [r.name for r in [defined.proposer, *defined.baselines]] if defined else []
    names = [n for n in order if n in loaded] + [n for n in loaded if n not in order]
    folder.states = {n: state for n in names if (state := loaded[n]) is not None}
    return folder


def _experiment_dirs(base: Path) -> list[Path]:
    """Folders under ``base`` that hold an experiment's files."""
    if not base.is_dir():
        return []
    return [p for p in base.iterdir() if p.is_dir() and (
        (p / CONFIG_FILE).is_file() or (p / RESULT_FILE).is_file() or any(p.glob(f"*/{STATE_FILE}")))]


def list_experiments(base: Path) -> list[ExperimentFolder]:
    """Every experiment folder under ``base``, most recently changed first (none when
    ``base`` does not exist)."""
    found = [read_experiment(p) for p in _experiment_dirs(base)]
    return sorted(found, key=lambda f: f.updated, reverse=True)


def find_experiment(base: Path, ref: str) -> ExperimentFolder:
    """The experiment under ``base`` whose id is ``ref`` or starts with it; a UserError when
    none or several match."""
    return read_experiment(pick_folder(
        _experiment_dirs(base), ref, kind="experiment", base=base,
        fix="pick one from the improvement list (sharpen improve writes them)"))
