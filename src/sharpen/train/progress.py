"""What a training shows while it runs and leaves behind: a Rich progress bar fed by
:class:`~sharpen.train.method.TrainEvent` s (loss, reward, ETA), and the curves as a plot.

The bar's completed fraction is the larger of the method's own ``metrics["progress"]`` (0–1,
e.g. rounds and steps done of those planned) and the budget spent (samples of
``max_samples``, seconds of ``max_seconds``); the ETA is Rich's, from that fraction.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sharpen.core.errors import UserError
from sharpen.train.method import TrainBudget, TrainEvent

CURVE_STEM = "curves"


def fraction(event: TrainEvent, budget: TrainBudget) -> float:
    """How much of the training ``event`` says is done, in [0, 1]."""
    parts = [event.metrics.get("progress", 0.0)]
    if budget.max_samples:
        parts.append(event.samples / budget.max_samples)
    if budget.max_seconds:
        parts.append(event.seconds / budget.max_seconds)
    return min(1.0, max(parts))


def event_text(event: TrainEvent) -> str:
    """One event in a few words: round, step, loss, reward, samples."""
    bits = [f"round {event.round}" if event.round else "", f"step {event.step}",
            "" if event.loss is None else f"loss {event.loss:.3f}",
            "" if event.reward is None else f"reward {event.reward:.2f}",
            f"{event.samples} samples"]
    return " · ".join(b for b in bits if b)


class TrainProgress:
    """A progress bar on ``console`` (nothing when not ``enabled``); call :meth:`update` with
    each event."""

    def __init__(self, console: Console, budget: TrainBudget, *, enabled: bool, title: str) -> None:
        self.budget = budget
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                                 TextColumn("eta"), TimeRemainingColumn(), console=console,
                                 disable=not enabled)
        self.task = self.progress.add_task(title, total=1000, status="starting")

    def __enter__(self) -> TrainProgress:
        self.progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.progress.stop()

    def update(self, event: TrainEvent) -> None:
        self.progress.update(self.task, completed=1000 * fraction(event, self.budget),
                             status=event_text(event))


def plot_curves(events: list[TrainEvent], target: Path, title: str) -> list[Path]:
    """Loss and reward against steps as ``target/curves.png`` and ``.svg``; ``[]`` when
    matplotlib (the ``plot`` extra) is missing or there is nothing to draw."""
    from sharpen.stats.plot import plot_paths, pyplot, save

    losses = [(e.step, e.loss) for e in events if e.loss is not None]
    rewards = [(e.step, e.reward) for e in events if e.reward is not None]
    if not losses and not rewards:
        return []
    paths = plot_paths(target, CURVE_STEM)
    try:
        plt = pyplot(paths[0].parent)
    except UserError:  # no matplotlib: the curves stay in the folder's JSON
        return []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    for ax, points, label in ((ax1, losses, "training loss"), (ax2, rewards, "reward")):
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker=".")
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return save(fig, paths)
