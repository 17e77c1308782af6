"""The Runner: AgentSpec × tasks × epochs, async, bounded concurrency, stored as it goes.

Contract:
- Each finished trajectory is written to the store the moment it ends, so a crash, a Ctrl-C
  or a SIGKILL loses at most the episodes in flight.
- A cancelled run (Ctrl-C; SIGTERM under :func:`sharpen.runner.signals.run_sync`) is marked
  ``interrupted``; the process is recorded as the run's owner, so a run killed by SIGKILL is
  reported ``interrupted`` by the next reader on this host (``Store.settle_orphans``).
- Where the episodes are played is the executor's business (:mod:`sharpen.runner.executor`:
  ``local`` asyncio tasks by default, ``ray`` on a cluster); the runner keeps the manifest,
  resume, the one store writer, the tally, the bar and the breaker, whichever plays them.
- ``resume=True`` continues the newest run with the same config hash and skips every
  (task, spec, epoch) triple already stored; the store's unique key makes a duplicate
  impossible even if two processes race.
- Infra errors are retried per model call (:mod:`sharpen.runner.retry`); how an episode's
  failures are classified (``infra``, ``env``, ``agent``) is :mod:`sharpen.runner.episode`'s.
  A :class:`~sharpen.core.errors.UserError` stops the run.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sharpen.agents.base import needs_model
from sharpen.agents.constrained import decoding_label
from sharpen.core.errors import UserError
from sharpen.core.manifest import RunManifest
from sharpen.core.registry import REGISTRY, Registry
from sharpen.core.trajectory import Trajectory, trajectory_key
from sharpen.envs.base import ENV
from sharpen.models.base import MODEL, ChatModel
from sharpen.models.pricing import PricedModel, PriceTable
from sharpen.runner.config import RunConfig
from sharpen.runner.episode import play_episode
from sharpen.runner.executor import Episode, Executor, LocalExecutor, Work
from sharpen.runner.progress import RunProgress
from sharpen.runner.summary import RunSummary, SummaryBuilder
from sharpen.runner.writer import StoreWriter
from sharpen.sandbox.closing import Closing
from sharpen.store import RunStatus, Store
from sharpen.store.owner import RunOwner

RETRY_ON_RESUME = ("infra",)
"""Error kinds whose episodes ``resume`` runs again instead of keeping."""


class NoModel:
    """Stands in for the model of an agent that declares ``needs_model = False`` (the
    ``null`` and ``reference`` baselines): nothing is loaded, and a call is a bug."""

    name = "none"
    supports_tools = False

    async def complete(self, messages: Any, tools: Any = None, params: Any = None,
                       **_: Any) -> Any:
        raise RuntimeError("an agent that declared needs_model = False called the model")

    async def aclose(self) -> None:
        return None


def build_model(config: RunConfig, registry: Registry = REGISTRY,
                prices: PriceTable | None = None) -> ChatModel:
    """The run's model from the spec's ref, priced by ``prices`` (default: the table as loaded
    now) — or :class:`NoModel` when the agent plug-in declares ``needs_model = False``."""
    if not needs_model(registry, config.agent.agent):
        return NoModel()
    return PricedModel(registry.create(MODEL, config.agent.model), prices or PriceTable.load())


async def _isolation(config: RunConfig, registry: Registry) -> str:
    """What the run's untrusted code gets: the environment's own answer (its
    ``isolation()``, for an environment whose sandbox differs from the default) or the default
    sandbox's. Building the environment here also checks its arguments before any episode."""
    env = registry.create(ENV, config.env)
    try:
        own = env.isolation()
    finally:
        await env.close()
    if own is not None:
        return own
    from sharpen.sandbox.local import detect_isolation

    return detect_isolation()


class Runner:
    """Runs a :class:`RunConfig` into a :class:`Store`."""

    def __init__(
        self,
        store: Store,
        *,
        progress: bool = True,
        transient: bool = False,
        verbose: bool = False,
        model_factory: Callable[[RunConfig], ChatModel] | None = None,
        registry: Registry = REGISTRY,
        prices: PriceTable | None = None,
        on_episode: Sequence[Callable[[Trajectory], None]] = (),
        executor: Executor | None = None,
    ) -> None:
        self.store = store
        self.progress = progress
        self.transient = transient  # the bar leaves the screen when a run ends
        self.verbose = verbose  # a line per finished episode, bar or not
        self.registry = registry
        """Where environments, agents and models are built from."""
        # Tests and benchmarks may inject a model (priced by them); normally it is built from
        # the spec's ref and priced by ``prices`` (default: the table as each run starts).
        self.model_factory = model_factory or (lambda c: build_model(c, registry, prices))
        self.on_episode = tuple(on_episode)
        """Called with each trajectory once it is stored (live exports: ``--otlp``); an
        observer's exception is reported on stderr and never stops the run."""
        self.executor: Executor = executor or LocalExecutor()
        """Where episodes are played (:mod:`sharpen.runner.executor`); whoever passes one
        closes it (``aclose``) when done with it."""

    async def run(self, config: RunConfig, *, resume: bool = False, label: str = "episodes") -> RunSummary:
        """Run (or resume) ``config``; returns the summary of every trajectory of the run.
        ``label`` names the work on the progress bar."""
        config_hash = config.config_hash()
        run_id = self.store.find_resumable(config_hash) if resume else None
        done: set[str] = set()
        model = self.model_factory(config)
        if run_id is None:
            run_id = uuid.uuid4().hex[:12]
            manifest = RunManifest(
                run_id=run_id, env=config.env, agent_hash=config.agent.hash(),
                task_ids=[t.id for t in config.tasks], epochs=config.epochs, seed=config.seed,
                config_hash=config_hash, isolation=await _isolation(config, self.registry),
                extra={"concurrency": config.concurrency, "model": config.agent.model.name,
                       "decoding": decoding_label(config.agent.decoding, model),
                       "executor": self.executor.name, **config.labels},
            )
            self.store.create_run(manifest, config.agent, config.tasks)
        else:
            _refuse_if_in_flight(self.store, run_id)
            # Infra errors are not verdicts: a resume attempts those episodes again.
            self.store.discard_trajectories(run_id, RETRY_ON_RESUME)
            done = self.store.finished_keys(run_id)
        # The owner lets a later reader tell a run killed by SIGKILL from one in flight.
        self.store.set_run_status(run_id, "running", owner=RunOwner.current())
        agent_hash = config.agent.hash()
        todo = [
            Episode(task, epoch)
            for epoch in range(config.epochs)
            for task in config.tasks
            if trajectory_key(task, agent_hash, epoch) not in done
        ]
        started = time.monotonic()
        tally = SummaryBuilder()
        if done:
            for t in self.store.iter_trajectories(run_id, with_steps=False):
                tally.add(t)
        # One thread does every store write, batching what queues (see run.writer): episodes
        # never wait on the database (their slot is free while the write runs).
        writes = StoreWriter(self.store)
        closing = Closing()  # sandboxes the episodes close in the background (sandbox.closing)
        status: RunStatus = "interrupted"
        try:
            with RunProgress(total=len(config.tasks) * config.epochs, done=len(done),
                             enabled=self.progress, label=label, transient=self.transient,
                             max_steps=config.agent.limits.max_steps,
                             verbose=self.verbose) as bar:
                breaker = _InfraBreaker(
                    limit=max(1, min(len(todo), max(INFRA_STREAK_LIMIT, config.concurrency)))
                )

                async def play(episode: Episode) -> Trajectory:
                    return await play_episode(config, run_id, model, episode.task,
                                              episode.epoch, self.registry, bar)

                async def finished(traj: Trajectory) -> None:
                    # Shielded: a finished episode is saved even if Ctrl-C cancels us now.
                    await asyncio.shield(asyncio.wrap_future(writes.submit(traj)))
                    tally.add(traj)
                    bar.advance(traj)
                    self._observe(traj)
                    breaker.record(traj)

                with closing.scope():
                    await self.executor.run(Work(config, run_id, todo, play), finished)
            status = "finished"
        except UserError:
            status = "failed"
            raise
        finally:
            writes.shutdown()  # every finished episode is stored before we report
            await model.aclose()
            await closing.close()  # sandboxes still closing in the background
            if status != "finished":
                # Episodes saved while being cancelled never reached the tally: recount.
                tally = SummaryBuilder()
                for t in self.store.iter_trajectories(run_id, with_steps=False):
                    tally.add(t)
            summary = tally.build(run_id, time.monotonic() - started)
            # Synchronous on purpose: the status is written even while Ctrl-C cancels tasks.
            self.store.set_run_status(run_id, status, summary.model_dump(mode="json"))
        return summary

    def _observe(self, traj: Trajectory) -> None:
        for observer in self.on_episode:
            try:
                observer(traj)
            except Exception as exc:  # noqa: BLE001 — an exporter's fault is not the run's
                print(f"sharpen: an episode observer failed: {exc!r}", file=sys.stderr)


def _refuse_if_in_flight(store: Store, run_id: str) -> None:
    """A UserError when another live process on this host runs ``run_id``: two processes
    would run the same missing episodes (the store keeps one of each, but the work is done
    twice and each marks the run finished when it ends)."""
    rec = store.get_run(run_id)  # settles a run whose owner is gone
    owner = rec.owner
    if rec.status != "running" or owner is None or owner == RunOwner.current() or owner.gone():
        return
    if owner.host != RunOwner.current().host:
        return  # another machine's process cannot be checked from here
    raise UserError(
        f"run {run_id} is in flight in process {owner.pid}; --resume would run its missing "
        "episodes a second time",
        f"wait for it to end, or stop it (kill {owner.pid}) and rerun with --resume",
    )


INFRA_STREAK_LIMIT = 3
"""Episodes in a row lost to infra errors, with none completed before, that stop a run."""


class _InfraBreaker:
    """Stops a run whose endpoint is plainly down (a wrong URL, a server not started)
    instead of burning every episode on retries: after ``limit`` infra-failed episodes in a
    row, before any episode completed, it raises a UserError naming the last error. Once an
    episode has completed, later infra errors are only recorded (transient outages)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.streak = 0
        self.completed = False

    def record(self, traj: Trajectory) -> None:
        o = traj.outcome
        if o is None or o.error_kind != "infra":
            self.completed = True
            return
        self.streak += 1
        if not self.completed and self.streak >= self.limit:
            raise UserError(
                f"the first {self.streak} episodes all failed with infra errors; last: {o.error}",
                "check that the model endpoint is up and --base-url is right, then rerun the "
                "same command with --resume",
            )
