"""The Python API: sharpen from a notebook or a script, through the objects the CLI uses.

::

    import sharpen

    run = sharpen.run("code", agent="reference", tasks=5, env_args={"source": "generated"})
    run.summary.success_rate          # 1.0
    sharpen.report(run)               # the RunReport ``sharpen report --json`` prints
    sharpen.compare(base, run)        # the ComparisonReport ``sharpen compare --json`` prints
    sharpen.load("latest")            # a stored run, by id, unique prefix or "latest"
    sharpen.improve("code", ...)      # the ExperimentResult ``sharpen improve`` reports

Every function builds what its CLI command builds (the same :class:`RunConfig`, runner,
report, comparison and experiment, through :mod:`sharpen.runner.compose`,
:mod:`sharpen.improvement.launch`, :func:`sharpen.stats.report.build_report` and
:func:`sharpen.stats.compare.compare_stored`), so a run started here is a run like any other:
``sharpen runs``, ``sharpen show`` and the viewer list it. A store is a URL, a
:class:`~sharpen.store.Store`, or ``None`` for ``$SHARPEN_STORE`` or the default store.

:func:`run` and :func:`improve` start their own event loop; inside one that is already
running (a Jupyter notebook, async code) they raise a :class:`UserError` that says to
``await`` :func:`arun` / :func:`aimprove` instead. Nothing prints unless ``progress=True``.
Errors a user can cause are :class:`UserError`; a wrong type of argument is a ``TypeError``.
Documented with executed examples in docs/api.md.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.manifest import RunManifest
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import ENV
from sharpen.improvement import launch
from sharpen.improvement.budget import Budget
from sharpen.improvement.engine import EngineConfig
from sharpen.improvement.experiment import ExperimentConfig, ExperimentResult
from sharpen.improvement.objective import parse_objective
from sharpen.judges.runner import JudgeSummary
from sharpen.models.base import MODEL
from sharpen.runner import RetryPolicy, RunConfig, Runner, RunSummary
from sharpen.runner.compose import select_tasks, with_agent, with_perturbations
from sharpen.runner.executor import Executor
from sharpen.stats.bootstrap import DEFAULT_REPS
from sharpen.stats.compare import ComparisonReport, compare_stored
from sharpen.stats.report import RunReport, build_report
from sharpen.store import RunRecord, Store
from sharpen.store.open import open_store

__all__ = ["Run", "aimprove", "ajudge", "arun", "compare", "improve", "judge", "load", "report",
           "run"]

RefLike = str | PluginRef | Mapping[str, Any]
"""A plug-in: a name (``"code"``, ``"mypkg.envs:MyEnv"``, ``"path/to/file.py:MyEnv"``), a
:class:`PluginRef`, or a ``{"name": ..., "args": {...}}`` mapping."""
AgentLike = AgentSpec | str | os.PathLike[str] | PluginRef | None
"""An :class:`AgentSpec`; a path to its YAML (a ``PathLike``, or a string ending in
``.yaml``/``.yml``); an agent plug-in (its name or :class:`PluginRef`: ``"tool"``,
``"null"``, ``"reference"``, ``"reflexion"``, ...); or ``None`` for the default spec."""
StoreLike = str | Store | None
"""A store URL, a :class:`Store`, or ``None`` (``$SHARPEN_STORE``, else the default)."""

YAML_SUFFIXES = (".yaml", ".yml")


class Run:
    """One stored run: what the store says about it (:class:`RunRecord`) and the store it is
    in, to read its trajectories and report it. Not a new record type: a handle on the
    store's. It reflects the store when it was made; :meth:`refresh` reads it again."""

    def __init__(self, store: Store, record: RunRecord) -> None:
        self.store = store
        """The store the run is in."""
        self.record = record
        """The store's record of the run (manifest, spec, status, counts, summary)."""

    @property
    def id(self) -> str:
        """The run id."""
        return self.record.id

    @property
    def manifest(self) -> RunManifest:
        """Environment, agent hash, task ids, epochs, seed, config hash, isolation."""
        return self.record.manifest

    @property
    def spec(self) -> AgentSpec:
        """The AgentSpec the run evaluated."""
        return self.record.agent

    @property
    def status(self) -> str:
        """``running``, ``finished``, ``interrupted`` or ``failed``."""
        return self.record.status

    @property
    def success_rate(self) -> float | None:
        """Successes over the attempts that count (errors that are not the agent's are
        excluded); ``None`` when none counts."""
        return self.record.success_rate

    @property
    def summary(self) -> RunSummary:
        """The summary ``sharpen run`` prints: the runner's, once it wrote one, else counted
        from the stored trajectories (a run still running or killed)."""
        if self.record.summary is not None:
            return RunSummary.model_validate(self.record.summary)
        return RunSummary.of(self.id, self.trajectories(with_steps=False), 0.0)

    def trajectories(self, *, with_steps: bool = True) -> Iterator[Trajectory]:
        """The run's trajectories in start order, each with its feedback;
        ``with_steps=False`` leaves steps and messages out (a fast listing)."""
        return self.store.iter_trajectories(self.id, with_steps=with_steps)

    def report(self, *, target_effect: float = 0.10, alpha: float = 0.05,
               power: float = 0.8) -> RunReport:
        """:func:`report` of this run."""
        return report(self, target_effect=target_effect, alpha=alpha, power=power)

    def refresh(self) -> Run:
        """This run as the store has it now."""
        return Run(self.store, self.store.get_run(self.id))

    def __repr__(self) -> str:
        r = self.record
        rate = f"{r.n_success}/{r.n_counted}" if r.n_counted else "n/a"
        return (f"Run({self.id!r}, env={r.manifest.env.name!r}, agent={r.agent.name!r}, "
                f"model={r.agent.model.name!r}, status={r.status!r}, success={rate})")


# -- arguments ----------------------------------------------------------------------------


def _ref(value: RefLike, what: str) -> PluginRef:
    if isinstance(value, PluginRef):
        return value
    if isinstance(value, str):
        return PluginRef(name=value)
    if isinstance(value, Mapping):
        return PluginRef.model_validate(dict(value))
    raise TypeError(f"{what} must be a name, a PluginRef or a {{name, args}} mapping, not "
                    f"{type(value).__name__}")


def _env_ref(env: RefLike, env_args: Mapping[str, Any] | None) -> PluginRef:
    """``env`` with ``env_args`` added to (and overriding) its own args."""
    ref = _ref(env, "env")
    return ref.model_copy(update={"args": {**ref.args, **(env_args or {})}}) if env_args else ref


def _spec(agent: AgentLike, model: RefLike | None, registry: Registry) -> AgentSpec:
    """The spec ``agent`` names, with ``model`` as its model when given (see
    :data:`AgentLike`); unknown agent or model names raise a UserError with suggestions."""
    if agent is None:
        spec = AgentSpec()
    elif isinstance(agent, AgentSpec):
        spec = agent
    elif isinstance(agent, os.PathLike) or (isinstance(agent, str) and agent.endswith(YAML_SUFFIXES)):
        spec = AgentSpec.load(Path(agent))
    elif isinstance(agent, str | PluginRef):
        spec = with_agent(AgentSpec(), _ref(agent, "agent"), named=True,
                          keep_model=model is not None, registry=registry)
    else:
        raise TypeError(f"agent must be an AgentSpec, a YAML path or an agent plug-in's name or "
                        f"PluginRef, not {type(agent).__name__}")
    if model is None:
        return spec
    if not isinstance(model, str | PluginRef | Mapping):
        # A live ChatModel cannot be stored: a run records the ref it can rebuild the model from.
        raise TypeError(f"model must be a name, a PluginRef or a {{name, args}} mapping, not "
                        f"{type(model).__name__}: a run stores the model's ref so that resume and "
                        "re-scoring can build it again")
    ref = _ref(model, "model")
    if isinstance(model, str) and model == spec.model.name:
        ref = spec.model  # like --model: naming the spec's own model keeps its args
    registry.get(MODEL, ref.name)  # unknown names fail here, with suggestions
    return spec.model_copy(update={"model": ref})


async def _tasks(env_ref: PluginRef, tasks: int | Sequence[TaskSpec] | None, split: str | None,
                 seed: int, registry: Registry, perturb: Sequence[str] = ()) -> list[TaskSpec]:
    environment = registry.create(ENV, env_ref)  # an unknown env name fails here
    try:
        if tasks is None or isinstance(tasks, int):
            chosen = select_tasks(environment, env_ref.name, split=split, limit=tasks, seed=seed)
        elif split is not None:
            raise UserError("both a task list and a split were given",
                            "give tasks as a count with split=..., or a list of TaskSpecs alone")
        else:
            chosen = list(tasks)
            if not chosen or not all(isinstance(t, TaskSpec) for t in chosen):
                raise UserError("tasks must be a count or a non-empty list of TaskSpecs",
                                "pass tasks=N, or TaskSpecs from the environment's "
                                "list_tasks(...)")
        return with_perturbations(environment, chosen, perturb, seed)
    finally:
        await environment.close()


def _no_running_loop(name: str) -> None:
    """A UserError when called inside a running event loop (where ``asyncio.run`` cannot be)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UserError(f"sharpen.{name}(...) cannot start an event loop inside a running one "
                    "(a notebook or async code)", f"use `await sharpen.a{name}(...)` there")


def _resolve(run: Run | str, store: StoreLike) -> tuple[Store, str]:
    """The store and full id of ``run`` (a :class:`Run`, or an id, prefix or ``latest`` in
    ``store``)."""
    if isinstance(run, Run):
        return run.store, run.id
    if not isinstance(run, str):
        raise TypeError(f"a run is a Run or a run id, prefix or 'latest', not {type(run).__name__}")
    st = open_store(store)
    return st, st.resolve_run(run)


# -- runs ---------------------------------------------------------------------------------


async def arun(
    env: RefLike, *, agent: AgentLike = None, model: RefLike | None = None,
    tasks: int | Sequence[TaskSpec] | None = None, split: str | None = None, epochs: int = 1,
    seed: int = 0, concurrency: int = 4, store: StoreLike = None,
    env_args: Mapping[str, Any] | None = None, progress: bool = False, resume: bool = False,
    retry: RetryPolicy | None = None, registry: Registry = REGISTRY,
    perturb: Sequence[str] = (), executor: Executor | None = None,
) -> Run:
    """Run ``agent`` on ``env``'s tasks and store every episode; what ``sharpen run`` does.

    ``tasks``: the first N tasks (of ``split`` when given: ``train``, ``val`` or ``test``), or
    a list of :class:`TaskSpec`; ``None`` runs every task listed. ``env_args`` are the
    environment's args (``-E``). ``agent`` and ``model``: see :data:`AgentLike` and
    :data:`RefLike`; an agent plug-in that needs no model (``null``, ``reference``) gets none.
    ``resume=True`` continues the newest run with the same config, skipping finished work.
    ``retry``: retries of infra errors per model call (the CLI's defaults). Plug-ins come from
    ``registry``. ``perturb``: names of perturbations the environment declares; each task is
    followed by its variant under each (``--perturb``), which fills the report's robustness
    row. ``executor``: where episodes are played (default: in this process; e.g.
    ``sharpen.runner.ray_executor.RayExecutor(address="auto")``, docs/scale.md), closed by the
    caller. Interrupted, it raises (``KeyboardInterrupt`` or ``CancelledError``) with
    every finished episode saved; ``resume=True`` does the rest."""
    if epochs < 1:
        raise UserError(f"epochs must be at least 1, not {epochs}", "set epochs=1 or more")
    if concurrency < 1:
        raise UserError(f"concurrency must be at least 1, not {concurrency}",
                        "set concurrency=1 or more")
    env_ref = _env_ref(env, env_args)
    names = [perturb] if isinstance(perturb, str) else list(perturb)
    task_list = await _tasks(env_ref, tasks, split, seed, registry, names)
    spec = _spec(agent, model, registry)
    st = open_store(store)
    config = RunConfig(env=env_ref, agent=spec, tasks=task_list, epochs=epochs,
                       concurrency=concurrency, seed=seed, retry=retry or RetryPolicy())
    summary = await Runner(st, progress=progress, registry=registry,
                           executor=executor).run(config, resume=resume)
    return Run(st, st.get_run(summary.run_id))


def run(
    env: RefLike, *, agent: AgentLike = None, model: RefLike | None = None,
    tasks: int | Sequence[TaskSpec] | None = None, split: str | None = None, epochs: int = 1,
    seed: int = 0, concurrency: int = 4, store: StoreLike = None,
    env_args: Mapping[str, Any] | None = None, progress: bool = False, resume: bool = False,
    retry: RetryPolicy | None = None, registry: Registry = REGISTRY,
    perturb: Sequence[str] = (), executor: Executor | None = None,
) -> Run:
    """:func:`arun` in its own event loop (see there); inside a running loop (a notebook),
    a UserError that says to ``await sharpen.arun(...)``. SIGTERM stops it as Ctrl-C does
    (the run is stored ``interrupted``), raising :class:`~sharpen.runner.signals.Terminated`
    (a KeyboardInterrupt)."""
    _no_running_loop("run")
    from sharpen.runner.signals import run_sync

    return run_sync(arun(
        env, agent=agent, model=model, tasks=tasks, split=split, epochs=epochs, seed=seed,
        concurrency=concurrency, store=store, env_args=env_args, progress=progress,
        resume=resume, retry=retry, registry=registry, perturb=perturb, executor=executor))


def load(run: str = "latest", store: StoreLike = None) -> Run:
    """The stored run ``run`` names: a full id, a unique prefix, or ``latest``; an unknown or
    ambiguous one raises a UserError."""
    st, run_id = _resolve(run, store)
    return Run(st, st.get_run(run_id))


async def ajudge(run: Run | str, judge: str | PluginRef, *, model: RefLike = "local",
                 versus: Run | str | None = None, resume: bool = False, limit: int | None = None,
                 concurrency: int = 1, store: StoreLike = None,
                 registry: Registry = REGISTRY) -> JudgeSummary:
    """Score a stored run with a judge; what ``sharpen judge`` does. ``judge``: a rubric file,
    ``rubric:NAME``, a registered judge name, or a ``PluginRef`` with args; ``model``: the
    judge model (default: the embedded one); ``versus``: the other run of a pairwise judge.
    Returns the :class:`~sharpen.judges.runner.JudgeSummary`; the scores are the run's
    ``Feedback(source="judge")`` (``report(run).judges``)."""
    from sharpen.judges.runner import JudgeSetup, judge_run, resolve_judge

    st, run_id = _resolve(run, store)
    other = None if versus is None else _resolve(versus, st)[1]
    ref = judge if isinstance(judge, PluginRef) else resolve_judge(judge)
    setup = JudgeSetup(judge=ref, model=_ref(model, "model"))
    return await judge_run(st, run_id, setup, versus=other, resume=resume, limit=limit,
                           concurrency=concurrency, registry=registry)


def judge(run: Run | str, judge: str | PluginRef, *, model: RefLike = "local",
          versus: Run | str | None = None, resume: bool = False, limit: int | None = None,
          concurrency: int = 1, store: StoreLike = None,
          registry: Registry = REGISTRY) -> JudgeSummary:
    """:func:`ajudge` in its own event loop (see there)."""
    _no_running_loop("judge")
    from sharpen.runner.signals import run_sync

    return run_sync(ajudge(run, judge, model=model, versus=versus, resume=resume, limit=limit,
                           concurrency=concurrency, store=store, registry=registry))


def report(run: Run | str, *, target_effect: float = 0.10, alpha: float = 0.05,
           power: float = 0.8, store: StoreLike = None) -> RunReport:
    """The :class:`RunReport` that ``sharpen report RUN --json`` prints: accuracy with
    intervals, excluded errors, cost, reliability, the power plan for ``target_effect`` (a
    rate: 0.1 is 10 points) at ``alpha`` and ``power``, and validity. ``run``: a :class:`Run`,
    or an id, prefix or ``latest`` in ``store``."""
    st, run_id = _resolve(run, store)
    return build_report(st, run_id, effect=target_effect, alpha=alpha, power=power)


def compare(a: Run | str, b: Run | str, *others: Run | str, alpha: float = 0.05, seed: int = 0,
            bootstrap: int = DEFAULT_REPS, store: StoreLike = None) -> ComparisonReport:
    """The :class:`ComparisonReport` that ``sharpen compare A B ... --json`` prints: each of
    ``b, *others`` against the baseline ``a`` on their common tasks (McNemar or a paired
    bootstrap of ``bootstrap`` replicates seeded by ``seed``; Holm-adjusted verdicts when
    more than one run is compared). Runs named by string are looked up in ``store``."""
    named = [r for r in (a, b, *others) if not isinstance(r, Run)]
    st = open_store(store) if named else None
    runs = [_resolve(r, st) for r in (a, b, *others)]
    return compare_stored(runs, seed=seed, alpha=alpha, n_boot=bootstrap)


# -- improvement --------------------------------------------------------------------------


async def aimprove(
    env: RefLike, *, proposer: RefLike = "reflexion", baselines: Sequence[RefLike] = (),
    agent: AgentLike = None, model: RefLike | None = None,
    proposer_model: RefLike | None = None, env_args: Mapping[str, Any] | None = None,
    train: int = 20, val: int = 10, test: int = 30, budget_rollouts: int | None = 60,
    budget_tokens: int | None = None, budget_usd: float | None = None, minibatch: int = 4,
    seed: int = 0, task_seed: int = 0, folder: str | os.PathLike[str] | None = None,
    resume: bool = False, fresh: bool = False, concurrency: int = 1, store: StoreLike = None,
    progress: bool = False, on_event: Callable[[str], None] | None = None,
    registry: Registry = REGISTRY, objective: str = "success",
    judge_model: RefLike | None = None,
) -> ExperimentResult:
    """Improve a seed spec on ``env``'s train/val tasks within a budget, then score the seed
    and each proposer's winner on ``test`` held-out tasks; what ``sharpen improve`` does.

    ``proposer`` and each of ``baselines`` (other proposers given the same budget) are names,
    references or PluginRefs with args. ``agent``/``model`` make the seed spec as in
    :func:`arun`; ``proposer_model`` is the model proposers write with (default: the seed's).
    The experiment checkpoints in ``folder/<experiment id>`` (default: ``improve/`` next to a
    SQLite store); an existing checkpoint needs ``resume=True`` (continue) or ``fresh=True``
    (start over). ``on_event`` receives one line per engine event (``print`` shows them).
    ``result.results[0]`` is the main proposer's outcome; ``.comparison.verdict`` says in
    words whether its winner beat the seed on test success. ``objective`` is what the engine
    maximises, as ``--objective``: ``"success"`` or ``"judge:J[:CRITERION]"`` (the judge's
    model ``judge_model``, default the seed's); with a judge, ``.objective_comparison`` is
    the held-out difference on it (docs/improve.md, "Objectives")."""
    spec = _spec(agent, model, registry)
    config = ExperimentConfig(
        objective=parse_objective(
            objective, seed_model=spec.model, registry=registry,
            judge_model=None if judge_model is None else _ref(judge_model, "judge_model")),
        env=_env_ref(env, env_args), seed_spec=spec, proposer=_ref(proposer, "proposer"),
        baselines=[_ref(b, "baseline") for b in baselines], train=train, val=val, test=test,
        task_seed=task_seed,
        proposer_model=None if proposer_model is None else _ref(proposer_model, "proposer_model"),
        engine=EngineConfig(budget=Budget(rollouts=budget_rollouts, tokens=budget_tokens,
                                          usd=budget_usd), minibatch=minibatch, seed=seed),
    )
    launch.check_config(config, registry)
    st = open_store(store)
    where = launch.prepare_folder(st, config, None if folder is None else Path(folder),
                                  resume=resume, fresh=fresh)
    return await launch.run_experiment(config, st, where, concurrency=concurrency,
                                       progress=progress, on_event=on_event, registry=registry)


def improve(
    env: RefLike, *, proposer: RefLike = "reflexion", baselines: Sequence[RefLike] = (),
    agent: AgentLike = None, model: RefLike | None = None,
    proposer_model: RefLike | None = None, env_args: Mapping[str, Any] | None = None,
    train: int = 20, val: int = 10, test: int = 30, budget_rollouts: int | None = 60,
    budget_tokens: int | None = None, budget_usd: float | None = None, minibatch: int = 4,
    seed: int = 0, task_seed: int = 0, folder: str | os.PathLike[str] | None = None,
    resume: bool = False, fresh: bool = False, concurrency: int = 1, store: StoreLike = None,
    progress: bool = False, on_event: Callable[[str], None] | None = None,
    registry: Registry = REGISTRY, objective: str = "success",
    judge_model: RefLike | None = None,
) -> ExperimentResult:
    """:func:`aimprove` in its own event loop (see there); inside a running loop (a
    notebook), a UserError that says to ``await sharpen.aimprove(...)``."""
    _no_running_loop("improve")
    return asyncio.run(aimprove(
        env, proposer=proposer, baselines=baselines, agent=agent, model=model,
        proposer_model=proposer_model, env_args=env_args, train=train, val=val, test=test,
        budget_rollouts=budget_rollouts, budget_tokens=budget_tokens, budget_usd=budget_usd,
        minibatch=minibatch, seed=seed, task_seed=task_seed, folder=folder, resume=resume,
        fresh=fresh, concurrency=concurrency, store=store, progress=progress, on_event=on_event,
        registry=registry, objective=objective, judge_model=judge_model))
