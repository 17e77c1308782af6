"""Evaluating candidates through the runner, each (spec, task) pair at most once.

Every evaluation is an ordinary run in the store (labelled with the experiment and the
split), so ``sharpen show``, ``report`` and ``view`` work on it. All runs of one experiment
share one base seed, so a task gets the same sampling seed whichever spec plays it: a child
and its parent are compared on the same minibatch with the same seeds. A (spec, task) pair
already evaluated is served from the cache and costs no rollout; the cache is part of the
engine's checkpoint, so a resumed run spends exactly what an uninterrupted one would.

Each new run is scored by the experiment's :class:`~sharpen.improvement.objective.Objective`
(success unless ``--objective`` names a judge): the record keeps that score beside success.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field, model_validator

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.messages import Usage
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.improvement.objective import Objective, SuccessObjective, succeeded
from sharpen.models.base import ChatModel
from sharpen.runner.config import RunConfig
from sharpen.runner.executor import Executor
from sharpen.runner.runner import Runner
from sharpen.store.store import Store


def cache_key(spec_hash: str, task_hash: str) -> str:
    """Key of one (spec, task) evaluation in :attr:`EngineState.cache
    <sharpen.improvement.state.EngineState.cache>`."""
    return f"{spec_hash}:{task_hash}"


class EvalRecord(BaseModel):
    """Where one (spec, task) evaluation is stored and how it went."""

    run_id: str
    """The run that holds the trajectory."""
    trajectory_id: str
    """The trajectory."""
    success: bool
    """Whether it counts as a success (errors of the environment or infra count as failure
    here and are visible in the stored run)."""
    usage: Usage
    """Tokens and cost of the episode."""
    trials: int = 1
    """Environment episodes it played (:attr:`~sharpen.core.trajectory.Trajectory.trials`:
    more than one for an agent that retries, such as ``reflexion``)."""
    score: float | None = None
    """The objective's score in [0, 1] (:mod:`sharpen.improvement.objective`); ``None``: the
    task is unscored (a judge error). Records written before objectives existed read their
    success."""

    @model_validator(mode="before")
    @classmethod
    def _score_of_old_records(cls, data: Any) -> Any:
        if isinstance(data, dict) and "score" not in data and "success" in data:
            return {**data, "score": float(bool(data["success"]))}
        return data


def paired_totals(a: Evaluation, b: Evaluation) -> tuple[float, float]:
    """``a``'s and ``b``'s summed scores over the tasks both have a score on (same tasks, in
    the same order): how a gate compares a child with its parent."""
    pairs = [(x.score, y.score) for x, y in zip(a.records, b.records, strict=True)
             if x.score is not None and y.score is not None]
    return sum(x for x, _ in pairs), sum(y for _, y in pairs)


class Evaluation(BaseModel):
    """A spec's results on some tasks, in task order."""

    spec_hash: str
    """The spec."""
    records: list[EvalRecord]
    """One per task."""
    new_rollouts: int = 0
    """Environment episodes this call actually ran (the rest came from the cache): one per
    task, or each attempt of an agent that retries."""
    new_usage: Usage = Field(default_factory=Usage)
    """Usage of those episodes."""
    new_judge_usage: Usage = Field(default_factory=Usage)
    """Usage of the objective's judge on those episodes (none for ``success``)."""
    new_judge_errors: int = 0
    """Of those episodes, the ones the objective left unscored (judge errors)."""

    @property
    def successes(self) -> int:
        """Successful tasks."""
        return sum(r.success for r in self.records)

    @property
    def perfect(self) -> bool:
        """Whether every task has the objective's best score (1)."""
        return all(r.score == 1.0 for r in self.records)


class Evaluator:
    """Runs specs on tasks of one environment into ``store`` (see the module doc)."""

    def __init__(
        self, store: Store, env: PluginRef, *, seed: int, concurrency: int = 1,
        labels: dict[str, str] | None = None,
        model_factory: Callable[[RunConfig], ChatModel] | None = None,
        cache: dict[str, EvalRecord] | None = None, progress: bool = False,
        registry: Registry = REGISTRY, objective: Objective | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.store = store
        self.env = env
        self.seed = seed
        self.concurrency = concurrency
        self.labels = labels or {}
        # A bar per evaluation that leaves the screen when done: the engine prints its own line.
        self.runner = Runner(store, progress=progress, transient=True, model_factory=model_factory,
                             registry=registry, executor=executor)
        self.cache: dict[str, EvalRecord] = cache if cache is not None else {}
        self.objective: Objective = objective or SuccessObjective()

    @staticmethod
    def key(spec_hash: str, task: TaskSpec) -> str:
        """Cache key of one (spec, task) pair."""
        return cache_key(spec_hash, task.hash())

    async def evaluate(self, spec: AgentSpec, tasks: Sequence[TaskSpec], split: str,
                       who: str = "spec") -> Evaluation:
        """``spec`` on ``tasks`` (one epoch); only pairs not yet in the cache are run. A run
        interrupted earlier with the same missing tasks is resumed, not repeated. ``who``
        names the spec on the progress bar (``seed``, ``child``, ...)."""
        h = spec.hash()
        # A task listed twice is run once (its record serves both places).
        missing = list({self.key(h, t): t for t in tasks if self.key(h, t) not in self.cache}.values())
        new_usage, new_rollouts = Usage(), 0
        judge_usage, judge_errors = Usage(), 0
        if missing:
            config = RunConfig(
                env=self.env, agent=spec, tasks=missing, epochs=1, seed=self.seed,
                concurrency=self.concurrency, labels={**self.labels, "split": split},
            )
            summary = await self.runner.run(config, resume=True, label=f"{who} {h[:8]} on {split}")
            # Steps too: they tell how many trials an episode played.
            played = list(self.store.iter_trajectories(summary.run_id))
            scored = await self.objective.score(self.store, summary.run_id, played)
            judge_usage, judge_errors = scored.usage, scored.judge_errors
            for t in played:
                self.cache[self.key(h, t.task)] = EvalRecord(
                    run_id=summary.run_id, trajectory_id=t.id, success=succeeded(t),
                    usage=t.usage, trials=t.trials, score=scored.scores[t.id])
                new_usage = new_usage + t.usage
                new_rollouts += t.trials
        records = [self.cache[self.key(h, t)] for t in tasks]
        return Evaluation(spec_hash=h, records=records, new_rollouts=new_rollouts,
                          new_usage=new_usage, new_judge_usage=judge_usage,
                          new_judge_errors=judge_errors)

    def trajectories(self, evaluation: Evaluation) -> list[Trajectory]:
        """The stored trajectories of ``evaluation``, steps included, in task order."""
        wanted = {r.trajectory_id for r in evaluation.records}
        found: dict[str, Trajectory] = {}
        for run_id in dict.fromkeys(r.run_id for r in evaluation.records):
            for t in self.store.iter_trajectories(run_id):
                if t.id in wanted:
                    found[t.id] = t
        return [found[r.trajectory_id] for r in evaluation.records if r.trajectory_id in found]
