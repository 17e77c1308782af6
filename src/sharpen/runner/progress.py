"""A Rich progress bar with ETA and the running success rate."""

from __future__ import annotations

from types import TracebackType

from rich import get_console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from sharpen.core.outcome import Outcome


class RunProgress:
    """Counts finished episodes; shows success so far over counted attempts and errors.
    ``label`` names the work (``episodes`` for a run; the improvement engine says whose
    evaluation it is); a ``transient`` bar leaves the screen when done, for work that reports
    its own result line."""

    def __init__(self, total: int, done: int = 0, enabled: bool = True, *, label: str = "episodes",
                 transient: bool = False) -> None:
        self.enabled = enabled
        self.success = 0
        self.counted = 0
        self.errors = 0
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            # Off the terminal a transient bar shows nothing but would leave a blank line.
            disable=not enabled or (transient and not get_console().is_terminal),
            transient=transient,
        )
        self._task = self._progress.add_task(escape(label), total=total, completed=done, rate="")

    def __enter__(self) -> RunProgress:
        self._progress.__enter__()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.__exit__(et, e, tb)

    def advance(self, outcome: Outcome | None) -> None:
        """One more episode finished (in this invocation)."""
        if outcome is not None and outcome.counts:
            self.counted += 1
            self.success += int(outcome.success)
        else:
            self.errors += 1
        rate = f"success {self.success}/{self.counted}" if self.counted else ""
        if self.errors:
            rate += f" [yellow]errors {self.errors}[/]"
        self._progress.update(self._task, advance=1, rate=rate)
