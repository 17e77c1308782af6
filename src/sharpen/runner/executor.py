"""Executors: where a run's episodes are played (a plug-in kind, ``executor``).

The :class:`~sharpen.runner.runner.Runner` owns everything a run is — its manifest, resume,
the one store writer, the tally, the progress bar, the infra breaker and the run's status —
and hands an executor the episodes still to play as one :class:`Work`. The executor plays
them wherever it plays them and, for each finished trajectory, awaits the runner's
``on_done`` (store it, count it, show it), in the executor's own order.

Contract of :meth:`Executor.run`:

- Every episode of ``work`` is played once with :func:`~sharpen.runner.episode.play_episode`
  (in this process through :attr:`Work.play`, or elsewhere on a copy of ``work.config``), and
  each finished trajectory goes to ``on_done`` exactly once, as soon as it is finished.
- At most ``work.config.concurrency`` episodes are in flight at once.
- An episode that could not be played for a reason outside the agent and the harness (a
  worker process or node that died) is handed to ``on_done`` as a trajectory with error kind
  ``infra``, which ``--resume`` plays again; it is never the agent's failure.
- An exception from ``on_done`` (the breaker's :class:`~sharpen.core.errors.UserError`), a
  :class:`~sharpen.core.errors.UserError` from an episode, or a cancellation of ``run``
  (Ctrl-C, SIGTERM) cancels every episode still in flight and propagates once they are gone.
- Scheduling is not identity: an executor never changes what an episode does, so the same run
  gives the same trajectories under any executor, and the run's config hash does not name it.

An executor is built per command from its ref (``--executor ray --ray-address auto`` is
``{name: ray, args: {address: auto}}``) and may be given several runs in turn (``sharpen
improve`` runs many); :meth:`Executor.aclose` releases what it holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from sharpen.core.registry import Kind
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.runner.config import RunConfig


@dataclass(frozen=True)
class Episode:
    """One (task, epoch) of a run, to be played."""

    task: TaskSpec
    epoch: int


@dataclass(frozen=True)
class Work:
    """The episodes of one run that are still to be played."""

    config: RunConfig
    run_id: str
    episodes: list[Episode]
    play: Callable[[Episode], Awaitable[Trajectory]]
    """Plays one episode in this process, with the run's model and progress bar: what an
    in-process executor calls. A remote executor plays on its workers instead, with a model it
    builds there from ``config.agent.model``."""


OnDone = Callable[[Trajectory], Awaitable[None]]
"""The runner's hand-over of one finished trajectory (store, count, show, breaker)."""


@runtime_checkable
class Executor(Protocol):
    """Plays the episodes of a run (see the module docstring for the contract)."""

    name: str
    """What the run manifest records (``local``, ``ray``)."""

    async def run(self, work: Work, on_done: OnDone) -> None: ...

    async def aclose(self) -> None: ...


class BaseExecutor:
    """Base for executors: subclass, take settings as keyword arguments in ``__init__`` (they
    are the plug-in ref's args), implement :meth:`run`."""

    name: str = ""

    async def run(self, work: Work, on_done: OnDone) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release what the executor holds (nothing, by default)."""


EXECUTOR: Kind[Executor] = Kind("executor", Executor, "sharpen.runner.executor.BaseExecutor")


class LocalExecutor(BaseExecutor):
    """Episodes as asyncio tasks of this process, ``concurrency`` at a time (the default)."""

    name = "local"

    async def run(self, work: Work, on_done: OnDone) -> None:
        sem = asyncio.Semaphore(max(1, work.config.concurrency))

        async def one(episode: Episode) -> None:
            async with sem:
                traj = await work.play(episode)
            await on_done(traj)

        await gather_or_cancel([one(e) for e in work.episodes])


async def gather_or_cancel(coros: list[Coroutine[Any, Any, None]]) -> None:
    """Run all; on the first exception (or cancellation) cancel the rest and re-raise."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
