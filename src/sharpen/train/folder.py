"""A training's folder read back (for the viewer): what ``sharpen train`` leaves on disk
(:mod:`sharpen.train.engine` writes it; its docstring lists the files). Nothing here raises
for a damaged folder: a file that cannot be read is named in ``problems``."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from sharpen.core.folders import FolderReader, pick_folder
from sharpen.train.engine import CONFIG_FILE, RESULT_FILE, STATE_FILE, TrainConfig, TrainReport, TrainState
from sharpen.train.method import TrainEvent


class TrainingFolder(BaseModel):
    """One training folder as read from disk."""

    id: str
    """The training id (the folder's name: the hash of its config)."""
    path: Path
    config: TrainConfig | None = None
    state: TrainState | None = None
    """What the engine wrote as it went: every task that reached the method, every event."""
    report: TrainReport | None = None
    """The report, once the verdict is in."""
    problems: list[str] = Field(default_factory=list)
    updated: datetime
    """When any of its files last changed."""

    @property
    def finished(self) -> bool:
        return self.report is not None

    @property
    def definition(self) -> TrainConfig | None:
        """The config, from ``config.json`` or else from the report."""
        return self.config or (self.report.config if self.report else None)

    @property
    def events(self) -> list[TrainEvent]:
        """The training's curve: the report's whole curve once finished, else the events so far."""
        if self.report is not None and self.report.result.events:
            return self.report.result.events
        return self.state.events if self.state is not None else []

    @property
    def seen_tasks(self) -> list[str]:
        """Ids of every task that reached the method."""
        if self.report is not None:
            return self.report.seen_tasks
        return self.state.seen_tasks if self.state is not None else []


def read_training(path: Path) -> TrainingFolder:
    """Read the folder at ``path`` (see :class:`TrainingFolder`)."""
    reader = FolderReader(path)
    config = reader.load(path / CONFIG_FILE, TrainConfig)
    state = reader.load(path / STATE_FILE, TrainState)
    report = reader.load(path / RESULT_FILE, TrainReport)
    return TrainingFolder(id=path.name, path=path, config=config, state=state, report=report,
                          problems=reader.problems, updated=reader.updated)


def _training_dirs(base: Path) -> list[Path]:
    if not base.is_dir():
        return []
    return [p for p in base.iterdir() if p.is_dir() and (
        (p / CONFIG_FILE).is_file() or (p / RESULT_FILE).is_file())]


def list_trainings(base: Path) -> list[TrainingFolder]:
    """Every training folder under ``base``, most recently changed first (none when ``base``
    does not exist)."""
    return sorted((read_training(p) for p in _training_dirs(base)), key=lambda f: f.updated,
                  reverse=True)


def find_training(base: Path, ref: str) -> TrainingFolder:
    """The training under ``base`` whose id is ``ref`` or starts with it; a UserError when
    none or several match."""
    return read_training(pick_folder(
        _training_dirs(base), ref, kind="training", base=base,
        fix="pick one from the training list (sharpen train writes them)"))
