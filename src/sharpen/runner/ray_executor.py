"""The ``ray`` executor: a run's episodes played on a Ray cluster (``--executor ray``).

Each worker slot is one Ray actor (``cpus_per_episode`` CPUs, default 1) that builds the run's
model once, from the spec's model ref, on its own node — the embedded model is loaded once per
actor, never per episode — and plays its episodes one at a time with
:func:`~sharpen.runner.episode.play_episode`: environment, sandbox and model calls all happen
on the worker. The driver (the ``sharpen`` process) keeps everything else: each finished
trajectory streams back as soon as it is finished and goes to the runner's one store writer,
so a store is written by one process whichever executor plays.

Slots: ``min(concurrency, episodes, cluster CPUs // cpus_per_episode)`` actors, so that none
waits for resources the cluster does not have. Each actor call plays a batch of up to
``chunk`` episodes (a Ray streaming generator, one trajectory yielded per episode): each call
has a fixed cost (its submission, and its config argument fetched and read on the actor)
whether it carries one episode or eight, so batches make short episodes cheap; they shrink
to one episode as the queue runs out (:func:`_batch_size`).
The actors outlive a run and play the executor's next one (``sharpen improve`` runs many),
keeping the models they built, until :meth:`RayExecutor.aclose`.

Failures: an episode whose actor, worker process or node died (any ``ray.exceptions`` error
other than an exception raised by sharpen's own code) is handed back as ``infra`` — which
``--resume`` plays again — as is every episode of its batch not yet handed back; that slot
is dropped and the other slots play the rest. Should every slot die, the episodes left are
``infra`` too. A :class:`~sharpen.core.errors.UserError` raised on a worker stops the run
as it would locally. Cancelling the run (Ctrl-C, SIGTERM)
cancels the actor calls in flight (each episode closes its environment), then kills every
actor of the executor. The driver owns the actors, so a driver killed by SIGKILL takes them with it.

Every node must have sharpen (same release, same plug-ins) and Ray installed; plug-ins are
found on the workers through their entry points or ``module:Name`` refs (a ``file.py:Name``
ref must name a path that exists on every node), and the model's endpoint, cassette or GGUF
must be reachable from every node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.hashing import content_hash
from sharpen.core.outcome import Outcome
from sharpen.core.registry import REGISTRY
from sharpen.core.trajectory import Trajectory
from sharpen.models.base import ChatModel
from sharpen.runner.config import RunConfig
from sharpen.runner.executor import BaseExecutor, Episode, OnDone, Work, gather_or_cancel
from sharpen.sandbox.closing import Closing

CANCEL_GRACE_S = 10.0
"""How long cancelled actor calls get to close their environments before the actors are
killed."""

CHUNK = 8
"""The most episodes one actor call plays (``--executor-arg chunk=N``). A call's fixed cost is
paid once for all the episodes it streams back: steady ray ÷ local 0.96 with batches of 8
against 0.63 with one episode per call (``benchmarks/executor_scaling.py``, 2026-12-04)."""


def _ray() -> Any:
    """The ``ray`` module, or the UserError that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise UserError("--executor ray needs Ray, which is not installed",
                        "pip install 'sharpen[ray]'") from exc
    return ray


class EpisodeActor:
    """One worker slot (a Ray actor when wrapped by ``ray.remote``): the models of the runs it
    plays — one per (agent, model) ref, built on first use and kept until :meth:`close`, so a
    model is loaded once per actor — and the Closing its episodes' sandboxes close in."""

    def __init__(self) -> None:
        self.models: dict[str, ChatModel] = {}
        self.closing = Closing()

    async def play(self, config: RunConfig, run_id: str,
                   episodes: list[tuple[Any, int]]) -> AsyncIterator[Trajectory]:
        """Play ``episodes`` (task, epoch) one after the other, yielding each trajectory as it
        finishes (a Ray streaming generator: the driver stores it at once)."""
        from sharpen.runner.episode import play_episode
        from sharpen.runner.runner import build_model

        key = content_hash([config.agent.agent.model_dump(mode="json"),
                            config.agent.model.model_dump(mode="json")])
        model = self.models.get(key)
        if model is None:  # here, not in __init__: a UserError then reaches the driver
            model = self.models[key] = build_model(config)
        for task, epoch in episodes:
            with self.closing.scope():
                traj = await play_episode(config, run_id, model, task, epoch, REGISTRY)
            yield traj

    async def close(self) -> None:
        for model in self.models.values():
            await model.aclose()
        await self.closing.close()


class RayExecutor(BaseExecutor):
    """Episodes on a Ray cluster (see the module docstring). ``address``: ``auto`` (the
    cluster this machine is part of, or ``RAY_ADDRESS``), ``HOST:PORT`` of a head node, or
    ``None`` for a Ray instance started in this process."""

    name = "ray"

    def __init__(self, address: str | None = None, cpus_per_episode: float = 1.0,
                 chunk: int = CHUNK) -> None:
        if cpus_per_episode <= 0:
            raise UserError(f"cpus_per_episode must be above 0, got {cpus_per_episode}",
                            "pass a positive number of CPUs per episode")
        if chunk < 1:
            raise UserError(f"chunk must be at least 1, got {chunk}",
                            "pass the most episodes one actor call may play, e.g. chunk=8")
        self.address = address
        self.cpus_per_episode = float(cpus_per_episode)
        self.chunk = int(chunk)
        self._started_here = False
        self._pool: list[Any] = []
        """Actors kept from one run to the next (``sharpen improve`` runs many): their start-up
        and model loads are paid once per command; ended by :meth:`aclose`."""

    def _connect(self) -> Any:
        ray = _ray()
        if not ray.is_initialized():
            try:
                # Worker logs stay on the cluster: stdout may hold --json output alone.
                ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise UserError(f"could not reach the Ray cluster at {self.address or 'local'}: "
                                f"{exc}", "start one (`ray start --head`) or fix --ray-address") from exc
            self._started_here = True
        return ray

    def _slots(self, ray: Any, work: Work) -> int:
        cpus = float(ray.cluster_resources().get("CPU", 0.0))
        fit = int(cpus // self.cpus_per_episode)
        if fit < 1:
            raise UserError(f"the Ray cluster has {cpus:g} CPUs, fewer than one episode's "
                            f"{self.cpus_per_episode:g}",
                            "add nodes, or lower --executor-arg cpus_per_episode")
        return max(1, min(work.config.concurrency, len(work.episodes), fit))

    async def run(self, work: Work, on_done: OnDone) -> None:
        if not work.episodes:
            return
        ray = self._connect()
        slots = self._slots(ray, work)
        remote = ray.remote(EpisodeActor).options(num_cpus=self.cpus_per_episode)
        while len(self._pool) < slots:
            self._pool.append(remote.remote())
        actors = self._pool[:slots]
        # Each call carries the config, so without its task list (an episode needs only its
        # own task), put in the object store once per run.
        config = ray.put(work.config.model_copy(update={"tasks": []}))
        queue = deque(work.episodes)
        in_flight: dict[int, Any] = {}  # slot → the stream of the call it reads
        dead: set[int] = set()

        async def slot(i: int, actor: Any) -> None:
            while queue:
                size = _batch_size(len(queue), slots, self.chunk)
                batch = [queue.popleft() for _ in range(size)]
                stream = actor.play.options(num_returns="streaming").remote(
                    config, work.run_id, [(e.task, e.epoch) for e in batch])
                in_flight[i] = stream
                played = 0
                try:
                    async for ref in stream:
                        traj = await ref
                        played += 1
                        await on_done(traj)
                except ray.exceptions.RayTaskError as exc:  # raised by sharpen's own code
                    if isinstance(exc.cause, UserError):
                        raise exc.cause from None
                    raise
                except ray.exceptions.RayError as exc:  # the actor, its process or node died
                    in_flight.pop(i, None)
                    dead.add(i)
                    for episode in batch[played:]:
                        await on_done(_lost(work, episode, exc))
                    return  # this slot is gone; the others play the rest
                # Popped only here: a stream left by a cancellation or an error is still
                # running, and the clean-up below cancels it.
                in_flight.pop(i, None)

        finished = False
        try:
            await gather_or_cancel([slot(i, a) for i, a in enumerate(actors)])
            finished = True
        finally:
            if finished:  # the live actors wait for the next run
                self._pool = [a for i, a in enumerate(actors) if i not in dead] + self._pool[slots:]
            else:  # cancelled, or stopped by an error: end them all
                pool, self._pool = self._pool, []
                await _stop(ray, pool, list(in_flight.values()), graceful=False)
        while queue:  # every slot died before the queue was empty
            await on_done(_lost(work, queue.popleft(), None))

    async def aclose(self) -> None:
        if self._pool:
            pool, self._pool = self._pool, []
            await _stop(_ray(), pool, [], graceful=True)
        if self._started_here:
            _ray().shutdown()
            self._started_here = False


def _batch_size(left: int, slots: int, chunk: int) -> int:
    """How many of the ``left`` queued episodes (``left`` counts this batch too) the next
    actor call plays: an equal share of what is left over twice the slots, at most ``chunk``
    and at least one — big batches while the queue is long, single episodes at the end, so no
    slot is left with a long batch while the others are idle (guided self-scheduling)."""
    return max(1, min(chunk, left // (2 * slots)))


def _lost(work: Work, episode: Episode, exc: BaseException | None) -> Trajectory:
    """The trajectory of an episode that Ray lost: error kind ``infra``, resumable."""
    why = "no Ray worker left to play it" if exc is None else f"{type(exc).__name__}: {exc}"
    traj = Trajectory(run_id=work.run_id, task=episode.task, agent_hash=work.config.agent.hash(),
                      epoch=episode.epoch, seed=work.config.attempt_seed(episode.task, episode.epoch))
    traj.outcome = Outcome(success=False, error_kind="infra", error=f"ray: {why}"[:2000])
    traj.ended_at = datetime.now(UTC)
    return traj


async def _stop(ray: Any, actors: list[Any], pending: list[Any], *, graceful: bool) -> None:
    """End the run's actors: cancel the calls (streams) still in flight and give them
    :data:`CANCEL_GRACE_S` to close their environments; after a finished run, let each actor
    close its model and sandboxes; then kill them all."""
    for stream in pending:
        ray.cancel(stream)
    waits = [stream.completed() for stream in pending]
    if graceful:
        waits += [a.close.remote() for a in actors]
    if waits:
        # Dead actors answer with errors; only the waiting matters here.
        tasks = [asyncio.ensure_future(_quiet(w)) for w in waits]
        _, late = await asyncio.wait(tasks, timeout=CANCEL_GRACE_S)
        for task in late:
            task.cancel()
    for actor in actors:
        ray.kill(actor)


async def _quiet(ref: Any) -> None:
    # A cancelled or dead call's error is expected here.
    with contextlib.suppress(Exception):
        await ref
