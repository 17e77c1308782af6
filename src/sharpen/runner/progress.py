"""A run's progress bar: episodes, steps, tokens, what the episodes in flight are doing, a
rate and an ETA from steps.

What is shown, and where it comes from:

- episodes finished of the total, and the success so far over counted attempts;
- steps and tokens, of finished episodes and of those in flight: the bar reads the in-flight
  trajectories' step lists and usage when it redraws (four times a second, in Rich's refresh
  thread), so the episodes themselves do no counting;
- the current activity of each episode in flight — ``model`` (waiting on a completion),
  ``environment`` (everything else: reset, step, outcome) or ``sandbox`` (running untrusted
  code) — counted per activity. The runner marks model calls (:meth:`RunProgress.metered`);
  sandboxes report themselves with :func:`sharpen.core.activity.doing`, which finds the
  episode through a context variable set here per episode task;
- a rate in steps per second and an ETA from steps: remaining episodes × steps per episode ÷
  the step rate. Before any episode has finished, steps per episode is the agent's
  ``max_steps`` limit, so the ETA is an upper bound and reads ``ETA ≤ …``.

A disabled bar (``enabled=False``: ``--no-progress``, the benchmarks, the Python API by
default) costs an integer add per finished episode and nothing per step: :meth:`episode` and
:meth:`metered` return a shared no-op or their argument, and a sandbox's ``doing`` is one
context-variable read. ``verbose`` prints one line per finished episode, with or without the
bar.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import TracebackType
from typing import Any

from rich import get_console
from rich.console import RenderableType
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from sharpen.core.activity import ACTIVITIES, REPORTER, Activity
from sharpen.core.messages import Message, ToolSpec
from sharpen.core.trajectory import Trajectory
from sharpen.models.base import ChatModel, Completion, ModelWrapper
from sharpen.models.structured import ResponseSchema

_NULL: AbstractContextManager[None] = nullcontext()

_SHORT: dict[Activity, str] = {"model": "model", "environment": "env", "sandbox": "sandbox"}
"""Activities as the bar names them (short, to fit 80 columns)."""


class _Episode:
    """One episode in flight on a bar: its trajectory and its current activity."""

    __slots__ = ("bar", "now", "trajectory")

    def __init__(self, bar: RunProgress, trajectory: Trajectory) -> None:
        self.bar = bar
        self.trajectory = trajectory
        self.now: Activity = "environment"

    @contextmanager
    def doing(self, what: Activity) -> Iterator[None]:
        before, active = self.now, self.bar.active
        active[before] -= 1
        active[what] += 1
        self.now = what
        try:
            yield
        finally:
            active[what] -= 1
            active[before] += 1
            self.now = before


class _MeteredModel(ModelWrapper):
    """A ChatModel that marks its episode ``model`` while a completion is awaited."""

    def __init__(self, inner: ChatModel, episode: _Episode) -> None:
        super().__init__(inner)
        self.episode = episode

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, *,
                       response_schema: ResponseSchema | None = None) -> Completion:
        with self.episode.doing("model"):
            return await super().complete(messages, tools, params, response_schema=response_schema)


class _TwoLines(Progress):
    """The bar on one line and the work under it (both fit 80 columns): Rich redraws both on
    each refresh, calling ``status`` for the second line."""

    def __init__(self, *columns: ProgressColumn, status: Callable[[], str], **kw: Any) -> None:
        self._status = status  # before Progress.__init__, which renders once
        super().__init__(*columns, **kw)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        line = Text.from_markup(self._status(), overflow="ellipsis")
        line.no_wrap = True
        yield line


class RunProgress:
    """The bar of one run invocation (see the module doc). ``total`` episodes, ``done`` of
    them stored before (a resume); ``label`` names the work (``episodes`` for a run; the
    improvement engine says whose evaluation it is); ``max_steps`` bounds an episode's steps
    (the ETA before any episode finished); a ``transient`` bar leaves the screen when done,
    for work that reports its own result line; ``verbose`` prints a line per episode."""

    def __init__(self, total: int, done: int = 0, enabled: bool = True, *, label: str = "episodes",
                 transient: bool = False, max_steps: int | None = None,
                 verbose: bool = False) -> None:
        self.enabled = enabled
        self.verbose = verbose
        self.total = total
        self.done_before = done
        self.max_steps = max_steps
        self.success = 0
        self.counted = 0
        self.errors = 0
        self.finished = 0
        self.finished_steps = 0
        self.finished_tokens = 0
        self.active: dict[Activity, int] = dict.fromkeys(ACTIVITIES, 0)
        self._flight: dict[str, _Episode] = {}
        self._started = time.monotonic()
        self._progress = _TwoLines(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            status=self.status_text,
            # Off the terminal a transient bar shows nothing but would leave a blank line.
            disable=not enabled or (transient and not get_console().is_terminal),
            transient=transient,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task(escape(label), total=total, completed=done, rate="")

    def __enter__(self) -> RunProgress:
        self._started = time.monotonic()
        self._progress.__enter__()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.__exit__(et, e, tb)

    # -- what the runner reports ------------------------------------------------------------

    def episode(self, trajectory: Trajectory) -> AbstractContextManager[None]:
        """Count ``trajectory`` as in flight (its steps, tokens and activity) — its activity
        for the block, its work until :meth:`advance` — and make ``doing`` inside the block
        report to this bar. A no-op when disabled."""
        return self._in_flight(trajectory) if self.enabled else _NULL

    @contextmanager
    def _in_flight(self, trajectory: Trajectory) -> Iterator[None]:
        episode = _Episode(self, trajectory)
        self._flight[trajectory.id] = episode
        self.active["environment"] += 1
        token = REPORTER.set(episode)
        try:
            yield
        finally:
            REPORTER.reset(token)
            self.active[episode.now] -= 1
            # Its steps stay counted as in flight until advance() moves them to finished.

    def metered(self, model: ChatModel) -> ChatModel:
        """``model``, marking the current episode ``model`` during each completion (call
        inside :meth:`episode`); ``model`` itself when disabled."""
        episode = REPORTER.get()
        if not isinstance(episode, _Episode) or episode.bar is not self:
            return model
        return _MeteredModel(model, episode)

    def advance(self, trajectory: Trajectory) -> None:
        """One more episode finished (in this invocation)."""
        outcome = trajectory.outcome
        if outcome is not None and outcome.counts:
            self.counted += 1
            self.success += int(outcome.success)
        else:
            self.errors += 1
        self.finished += 1
        if not self.enabled and not self.verbose:
            return
        self.finished_steps += len(trajectory.steps)
        self.finished_tokens += trajectory.usage.total_tokens
        self._flight.pop(trajectory.id, None)
        if self.verbose:
            self._progress.console.print(episode_line(trajectory), highlight=False)
        rate = f"success {self.success}/{self.counted}" if self.counted else ""
        if self.errors:
            rate += f" [yellow]errors {self.errors}[/]"
        self._progress.update(self._task, advance=1, rate=rate)

    # -- what the bar draws -----------------------------------------------------------------

    def _flight_work(self) -> tuple[int, int]:
        # list(): a snapshot, since episodes start and end on the event loop meanwhile.
        trajectories = [e.trajectory for e in list(self._flight.values())]
        return (sum(len(t.steps) for t in trajectories),
                sum(t.usage.total_tokens for t in trajectories))

    def status_text(self) -> str:
        """The line under the bar: :meth:`work_text`, then :meth:`eta_text`."""
        eta = self.eta_text()
        return f"  {self.work_text()}" + (f" · {eta}" if eta else "")

    def work_text(self) -> str:
        """``12 steps · 3.4k tok · model 2 env 1 sandbox 1``: work so far and what is in
        flight (``env``: the environment)."""
        steps, tokens = self._flight_work()
        parts = [f"{self.finished_steps + steps} steps", f"{_si(self.finished_tokens + tokens)} tok"]
        busy = " ".join(f"{_SHORT[a]} {n}" for a, n in self.active.items() if n > 0)
        if busy:
            parts.append(f"[cyan]{busy}[/]")
        return " · ".join(parts)

    def eta_text(self) -> str:
        """``1.8 steps/s ETA 0:02:10`` (``ETA ≤`` while it rests on ``max_steps``)."""
        steps = self.finished_steps + self._flight_work()[0]
        elapsed = time.monotonic() - self._started
        left = self.total - self.done_before - self.finished
        if left <= 0:
            return ""
        if steps == 0 or elapsed <= 0:
            return "ETA -:--:--"
        rate = steps / elapsed
        if self.finished:
            per_episode, bound = self.finished_steps / self.finished, ""
        elif self.max_steps:
            per_episode, bound = float(self.max_steps), "≤ "
        else:
            return f"{rate:.1f} steps/s ETA -:--:--"
        remaining = max(0.0, per_episode * left - self._flight_work()[0])
        return f"{rate:.1f} steps/s ETA {bound}{_clock(remaining / rate)}"


def episode_line(t: Trajectory) -> str:
    """One finished episode as ``-v`` prints it."""
    o = t.outcome
    mark = "E" if o is None or not o.counts else ("✓" if o.success else "✗")
    seconds = (t.ended_at - t.started_at).total_seconds() if t.ended_at else 0.0
    first = ((o.error or "").strip().splitlines() or [""])[0][:60] if o is not None else ""
    why = f" · {o.error_kind}: {first}" if o is not None and o.error_kind else ""
    reward = f"{o.reward:.2f}" if o is not None else "-"
    return (f"{mark} {t.task.id} epoch {t.epoch} · reward {reward} · {len(t.steps)} steps · "
            f"{t.usage.total_tokens:,} tok · {seconds:.1f} s{why}")


def _si(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e4 else str(n)


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
