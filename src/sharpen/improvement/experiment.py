"""The experiment protocol: improve on train/val within a budget, prove it on test.

1. Tasks come from the environment's own splits (``list_tasks(split=...)``); the three lists
   must not share a task.
2. Each proposer (the main one and any baselines such as ``opro`` and ``best_of_n``) gets its
   own :class:`~sharpen.improvement.engine.Engine` with the same seed spec, splits, seeds and
   budget. Engines see training and validation tasks only.
3. Outside every budget, the seed spec and each engine's winner (best on validation) are
   scored on the test split with the same seeds, and each winner is compared with the seed
   by :func:`sharpen.stats.paired.compare_pair` — a gain with its paired 95% interval, or
   "no detectable difference" with the smallest detectable effect. The report also gives
   the val→test gap, the winner's lineage, its tokens per task next to the baseline's, and
   the anytime curve.
4. With an objective other than success (``--objective judge:...``,
   :mod:`sharpen.improvement.objective`) every score above is the objective's, the held-out
   verdict is the objective's paired difference
   (:func:`sharpen.stats.judge_compare.compare_scores`) and success is compared beside it
   as in 3 — never left out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.hashing import content_hash
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.envs.base import ENV
from sharpen.improvement.budget import Spend
from sharpen.improvement.candidate import Candidate
from sharpen.improvement.engine import Engine, EngineConfig
from sharpen.improvement.evaluate import Evaluation, Evaluator
from sharpen.improvement.models import SharedModels
from sharpen.improvement.objective import Objective, ObjectiveSpec, build_objective
from sharpen.improvement.proposal import PROPOSER
from sharpen.improvement.state import Account, CurvePoint
from sharpen.runner.executor import Executor
from sharpen.stats.judge_compare import JudgeComparison, compare_scores
from sharpen.stats.paired import PairedComparison, compare_pair
from sharpen.stats.taskdata import TaskTable
from sharpen.store.aggregate import run_aggregate
from sharpen.store.store import Store

CONFIG_FILE, RESULT_FILE, STATE_FILE = "config.json", "result.json", "state.json"
"""The experiment folder's files: ``config.json`` when it starts, ``<proposer>/state.json``
after every engine iteration, ``result.json`` once test is scored (see
:mod:`sharpen.improvement.folder`)."""


class ExperimentConfig(BaseModel):
    """Everything that defines an improvement experiment (its hash names its folder)."""

    env: PluginRef
    """Environment, as ``{name, args}``."""
    seed_spec: AgentSpec = Field(default_factory=AgentSpec)
    """The starting (and baseline) AgentSpec."""
    proposer: PluginRef = Field(default_factory=lambda: PluginRef(name="reflexion"))
    """The proposer under test."""
    baselines: list[PluginRef] = Field(default_factory=list)
    """Other proposers run with the same budget, for comparison (e.g. opro, best_of_n)."""
    engine: EngineConfig = Field(default_factory=EngineConfig)
    """Budget, minibatch, proposer sampling, seed."""
    train: int = 20
    """Training tasks (minibatches are drawn from these)."""
    val: int = 20
    """Validation tasks (every accepted candidate is scored on all of them)."""
    test: int = 30
    """Held-out test tasks (scored outside the budget, never shown to a proposer)."""
    task_seed: int = 0
    """Seed of ``list_tasks`` (which generated tasks each split holds)."""
    proposer_model: PluginRef | None = None
    """Model proposers write with; default: the seed spec's model."""
    objective: ObjectiveSpec = Field(default_factory=ObjectiveSpec)
    """What the engine maximises (default: success)."""

    def experiment_id(self) -> str:
        """Content hash of the config (12 hex digits). The default objective is left out of
        it, so experiments from before objectives existed keep their ids (and folders)."""
        data = self.model_dump(mode="json")
        if self.objective.is_success:
            data.pop("objective")
        return content_hash(data)[:12]


class LineageEntry(BaseModel):
    """One step of a winner's lineage."""

    hash: str
    """Spec hash."""
    proposer: str
    """Who made it."""
    change: str
    """What changed."""
    val_score: float
    """Its validation score on the objective (success by default)."""
    iteration: int
    """When it was accepted."""


class ProposerResult(BaseModel):
    """One proposer's outcome."""

    proposer: PluginRef
    """The proposer."""
    stop_reason: str
    """Why its engine stopped."""
    account: Account
    """Proposals tried, invalid, gated out, accepted."""
    spend: Spend
    """Budget used."""
    archive_size: int
    """Accepted candidates, the seed included."""
    winner: AgentSpec
    """Best candidate on validation."""
    lineage: list[LineageEntry]
    """Seed → … → winner."""
    val_score: float
    """Winner's validation score on the objective (success by default)."""
    test_score: float
    """Winner's test score on the objective (its mean over scored tasks)."""
    test_run: str
    """Run id of the winner's test evaluation."""
    tokens_per_task: float
    """Winner's mean tokens per test task."""
    rollouts_per_task: float = 1.0
    """Winner's mean environment episodes per test task (above 1 for an agent that retries)."""
    comparison: PairedComparison
    """Winner vs seed on test success (whatever the objective)."""
    test_success: float | None = None
    """Winner's test success (``None`` in results written before objectives: the same as
    ``test_score``)."""
    objective_comparison: JudgeComparison | None = None
    """Winner vs seed on test on the objective, paired on the tasks both were scored on;
    ``None`` when the objective is success (``comparison`` is then the objective's)."""
    test_judge_errors: int = 0
    """Winner's test episodes the objective's judge left unscored."""
    objective: str = "success"
    """The objective's label (``success``, ``judge:rubric:NAME``, ...)."""
    rollouts_to_best: int
    """Rollouts spent when the winner was accepted."""
    curve: list[CurvePoint]
    """Anytime curve."""
    val_discordant: tuple[int, int] | None = None
    """Validation tasks only the seed solved, and only the winner solved (``None`` in results
    written before this was recorded)."""

    @property
    def val_test_gap(self) -> float:
        """Validation minus test score of the winner (positive: it overfit validation)."""
        return self.val_score - self.test_score


class ExperimentResult(BaseModel):
    """Everything ``sharpen improve`` reports."""

    experiment_id: str
    """Hash of the config."""
    config: ExperimentConfig
    """The config."""
    baseline_test_score: float
    """Seed spec's test score on the objective (success by default)."""
    baseline_test_success: float | None = None
    """Seed spec's test success (``None`` in results written before objectives)."""
    baseline_judge_errors: int = 0
    """Seed spec's test episodes the objective's judge left unscored."""
    baseline_run: str
    """Run id of the seed's test evaluation."""
    baseline_tokens_per_task: float
    """Seed spec's mean tokens per test task."""
    baseline_rollouts_per_task: float = 1.0
    """Seed spec's mean environment episodes per test task."""
    results: list[ProposerResult]
    """Main proposer first, then the baselines."""


def split_tasks(env_ref: PluginRef, config: ExperimentConfig,
                registry: Registry = REGISTRY) -> dict[str, list[TaskSpec]]:
    """Train, val and test tasks; a UserError when a split is short or splits overlap."""
    env = registry.create(ENV, env_ref)
    out: dict[str, list[TaskSpec]] = {}
    for split, n in (("train", config.train), ("val", config.val), ("test", config.test)):
        if n < 1:
            raise UserError(f"--{split} must be at least 1", f"set --{split} to 1 or more")
        tasks = env.list_tasks(split=split, limit=n, seed=config.task_seed)[:n]
        if len(tasks) < n:
            raise UserError(f"environment {env_ref.name!r} has only {len(tasks)} {split} tasks",
                            f"set --{split} {len(tasks)} or fewer")
        out[split] = tasks
    hashes = [{t.hash() for t in ts} for ts in out.values()]
    if hashes[0] & hashes[1] or hashes[0] & hashes[2] or hashes[1] & hashes[2]:
        raise UserError(f"environment {env_ref.name!r} gives overlapping train/val/test tasks",
                        "use an environment whose splits are disjoint")
    return out


def _tokens_per_task(ev: Evaluation) -> float:
    return float(np.mean([r.usage.total_tokens for r in ev.records])) if ev.records else 0.0


def _rollouts_per_task(ev: Evaluation) -> float:
    return float(np.mean([r.trials for r in ev.records])) if ev.records else 0.0


def _mean_score(ev: Evaluation) -> float:
    """Mean objective score over the tasks it scored (0 when none was)."""
    scores = [r.score for r in ev.records if r.score is not None]
    return float(np.mean(scores)) if scores else 0.0


def _objective_values(ev: Evaluation, tasks: list[TaskSpec]) -> dict[str, list[float | bool]]:
    """Task hash → ``[score]`` for the scored tasks; 0/1 scores as booleans, so that a
    yes/no objective is tested as success is (McNemar)."""
    scored = {t.hash(): r.score for t, r in zip(tasks, ev.records, strict=True)
              if r.score is not None}
    binary = all(v in (0.0, 1.0) for v in scored.values())
    return {h: [bool(v) if binary else v] for h, v in scored.items()}


class Experiment:
    """Runs an :class:`ExperimentConfig` into ``store``, checkpointing under ``folder``.
    Proposers are built from ``registry`` (the default one unless a caller brings its own)."""

    def __init__(self, config: ExperimentConfig, store: Store, folder: Path, *,
                 models: SharedModels | None = None, concurrency: int = 1,
                 on_event: Callable[[str], None] | None = None, registry: Registry = REGISTRY,
                 progress: bool = False, executor: Executor | None = None) -> None:
        self.config = config
        self.executor = executor
        """Where every evaluation's episodes are played (None: in this process)."""
        self.store = store
        self.folder = folder
        self.models = models or SharedModels(registry)
        self.concurrency = concurrency
        self.on_event = on_event or (lambda _m: None)
        self.registry = registry
        self.progress = progress
        """A progress bar with ETA per evaluation (the CLI's; off for library callers)."""
        self.id = config.experiment_id()
        judge = config.objective.judge
        self.objective: Objective = build_objective(
            config.objective, None if judge is None else self.models.get(judge.model), registry,
            concurrency)
        """Scores every evaluation, train, val and test alike."""

    def _evaluator(self, role: str) -> Evaluator:
        return Evaluator(self.store, self.config.env, seed=self.config.engine.seed,
                         concurrency=self.concurrency, model_factory=self.models,
                         labels={"experiment": self.id, "role": role}, progress=self.progress,
                         registry=self.registry, objective=self.objective,
                         executor=self.executor)

    async def run(self) -> ExperimentResult:
        """Run every engine (continuing checkpoints), then score test; the folder gets the
        config first and the result last."""
        c = self.config
        tasks = split_tasks(c.env, c, self.registry)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / CONFIG_FILE).write_text(c.model_dump_json(indent=2))
        proposer_model = self.models.get(c.proposer_model or c.seed_spec.model)
        engines = []
        for ref in [c.proposer, *c.baselines]:
            proposer = self.registry.create(PROPOSER, ref)
            self.on_event(f"[{ref.name}] improving on {len(tasks['train'])} train / "
                          f"{len(tasks['val'])} val tasks")

            def on_event(msg: str, n: str = ref.name) -> None:
                self.on_event(f"[{n}] {msg}")
            engine = Engine(
                proposer=proposer, proposer_name=ref.name, seed_spec=c.seed_spec,
                train=tasks["train"], val=tasks["val"], evaluator=self._evaluator(f"improve:{ref.name}"),
                proposer_model=proposer_model, config=c.engine,
                checkpoint=self.folder / ref.name / STATE_FILE,
                on_event=on_event,
            )
            await engine.run()
            engines.append((ref, engine))
        # Test: outside the budget, after every engine is done; no proposer sees it.
        tester = self._evaluator("test")
        self.on_event(f"scoring the seed spec on {len(tasks['test'])} held-out test tasks")
        base_ev = await tester.evaluate(c.seed_spec, tasks["test"], "test", "seed")
        base_table = self._table(base_ev)
        results = []
        for ref, engine in engines:
            results.append(await self._result(ref, engine, tester, tasks["test"], base_ev, base_table))
        result = ExperimentResult(
            experiment_id=self.id, config=c, baseline_test_score=_mean_score(base_ev),
            baseline_test_success=base_ev.successes / len(tasks["test"]),
            baseline_judge_errors=sum(r.score is None for r in base_ev.records),
            baseline_run=base_ev.records[0].run_id, baseline_tokens_per_task=_tokens_per_task(base_ev),
            baseline_rollouts_per_task=_rollouts_per_task(base_ev),
            results=results,
        )
        (self.folder / RESULT_FILE).write_text(result.model_dump_json(indent=2))
        return result

    def _table(self, ev: Evaluation) -> TaskTable:
        runs = {r.run_id for r in ev.records}
        if len(runs) != 1:  # test evaluations are one run each: nothing is cached across specs
            raise RuntimeError(f"a test evaluation spans {len(runs)} runs")
        return TaskTable.from_aggregate(run_aggregate(self.store, runs.pop()))

    async def _result(self, ref: PluginRef, engine: Engine, tester: Evaluator, test: list[TaskSpec],
                      base_ev: Evaluation, base_table: TaskTable) -> ProposerResult:
        s = engine.state
        winner = s.archive.best()
        self.on_event(f"[{ref.name}] scoring its winner on the test tasks")
        ev = await tester.evaluate(winner.spec, test, "test", f"{ref.name} winner")
        table = self._table(ev)
        cmp = compare_pair(base_table, table, np.random.default_rng(engine.config.seed),
                           label_a="seed", label_b=ref.name)
        objective_cmp = None
        if not self.config.objective.is_success:
            key = ("objective", self.objective.label())
            objective_cmp = compare_scores(
                {key: _objective_values(base_ev, test)}, {key: _objective_values(ev, test)},
                np.random.default_rng(engine.config.seed), run_a=base_ev.records[0].run_id,
                run_b=ev.records[0].run_id, label_a="seed", label_b=ref.name)[0]
        lineage = [LineageEntry(hash=x.hash, proposer=x.proposer, change=x.change,
                                val_score=x.val_score, iteration=x.iteration)
                   for x in s.archive.lineage(winner.hash)]
        return ProposerResult(
            proposer=ref, stop_reason=s.stop_reason or "", account=s.account, spend=s.spend,
            archive_size=len(s.archive.candidates), winner=winner.spec, lineage=lineage,
            val_score=winner.val_score, test_score=_mean_score(ev),
            test_success=ev.successes / len(test), objective_comparison=objective_cmp,
            test_judge_errors=sum(r.score is None for r in ev.records),
            objective=self.objective.label(),
            test_run=ev.records[0].run_id, tokens_per_task=_tokens_per_task(ev),
            rollouts_per_task=_rollouts_per_task(ev), comparison=cmp,
            rollouts_to_best=s.rollouts_to(winner), curve=s.curve,
            val_discordant=_discordant(s.archive.candidates[0], winner),
        )


def _discordant(seed: Candidate, winner: Candidate) -> tuple[int, int]:
    """(validation tasks ``seed`` scored higher on, ``winner`` scored higher on), over the
    tasks both were scored on (with success: only one of them solved)."""
    tasks = seed.val.keys() & winner.val.keys()
    return (sum(seed.val[t] > winner.val[t] for t in tasks),
            sum(winner.val[t] > seed.val[t] for t in tasks))
