"""Stage metrics of a stored run, TRAJEVAL-style: where in an episode the agent spent its steps,
tokens and time, and how well its actions in each stage match the reference solution's.

An environment declares its stages by action kind (:attr:`~sharpen.envs.base.BaseEnvironment.stages`,
e.g. toolshop's look up / act / reply) and says which stage an action belongs to
(:meth:`~sharpen.envs.base.BaseEnvironment.stage`). Every step of a trajectory falls in one
stage: its action's, or :data:`UNSTAGED` when the reply had no parseable action or the action's
kind is in no stage — so a trajectory's stage steps always sum to its steps.

Per trajectory and stage (:class:`StageMetrics`):

- ``steps``; ``tokens``: the steps' model tokens (``Step.usage``, prompt + completion);
  ``seconds``: the steps' model and environment time (``model_seconds + env_seconds``);
- ``precision`` and ``recall`` against the reference — where the environment knows one for the
  task: its :meth:`~sharpen.envs.base.Environment.reference_actions`, else its
  :meth:`~sharpen.envs.base.Environment.reference_solution` as one call of the answer tool
  (what the ``reference`` agent plays, :mod:`sharpen.agents.baselines`). The reference's actions
  are staged by the same rule. Matching is of **multisets of action keys**: an action's key is
  its tool name and its arguments with every string stripped and its runs of whitespace
  collapsed to one space (case and everything else kept), compared as canonical JSON. With
  ``A`` the agent's keys in the stage and ``R`` the reference's, ``matched = |A ∩ R|`` (an
  action counts as often as it occurs in both), ``precision = matched / |A|`` and
  ``recall = matched / |R|`` — ``None`` when that denominator is 0 (no agent action in the
  stage; no reference action in it) and for every stage when there is no reference. Order is
  not compared: TRAJEVAL's set view. An exact key is strict — a correct query or function
  worded differently from the reference's does not match — so recall is a lower bound on
  "did what the reference did", tightest for environments whose actions are look-ups and
  commands (toolshop, textworld, shell).

Per run and stage (:class:`StageSummary`): how many trajectories reached the stage (a step in
it), among failed and among solved attempts (a stage funnel, with Wilson intervals); summed
steps, tokens and seconds; and pooled precision and recall (summed ``matched`` over summed
``|A|`` or ``|R|`` of the trajectories with a reference). The environment is built from the
run's stored ``{name, args}`` and never reset: only ``stage`` and the reference hooks are
called. A ``reflexion`` trajectory's trials are pooled (its steps are all staged once).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, PrivateAttr

from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory
from sharpen.diagnose.predict import Prediction, predict_success
from sharpen.envs.base import ENV, Environment
from sharpen.stats.intervals import Interval, wilson
from sharpen.store import Store

UNSTAGED = "(none)"
"""The stage of a step with no action, or whose action no declared stage takes."""


@dataclass(slots=True)
class StageMetrics:
    """One stage of one trajectory (a dataclass: a run makes one per stage per trajectory)."""

    stage: str
    steps: int = 0
    tokens: int = 0
    seconds: float = 0.0
    actions: int = 0
    """The agent's actions in the stage (``|A|``)."""
    reference: int = 0
    """The reference's actions in the stage (``|R|``; 0 without a reference)."""
    matched: int = 0
    """``|A ∩ R|`` as multisets."""
    precision: float | None = None
    recall: float | None = None


@dataclass(slots=True)
class TrajectoryStages:
    """The stages of one trajectory, in the environment's order (then :data:`UNSTAGED`)."""

    trajectory_id: str
    success: bool | None
    """``True``/``False`` for a counted attempt; ``None`` when it does not count."""
    has_reference: bool
    stages: list[StageMetrics]


class StageSummary(BaseModel):
    """One stage over a run."""

    stage: str
    reached: int
    """Trajectories with a step in the stage."""
    reached_failed: float | None
    """Share of the failed attempts that reached it (``None`` with no failed attempt)."""
    reached_failed_ci: Interval
    reached_solved: float | None
    """Share of the solved attempts that reached it (``None`` with no solved attempt)."""
    reached_solved_ci: Interval
    steps: int
    tokens: int
    seconds: float
    precision: float | None
    """Pooled over trajectories with a reference: summed matched / summed agent actions."""
    recall: float | None
    """Pooled: summed matched / summed reference actions."""


class StageReport(BaseModel):
    """Stage metrics of one run (``Diagnosis.stages``)."""

    env: str
    """The environment's name."""
    order: list[str]
    """The declared stages in order (:data:`UNSTAGED` last when any step has none)."""
    trajectories: int
    with_reference: int
    """Trajectories whose task has a reference to compare with."""
    summaries: list[StageSummary]
    predictor: Prediction | None = None
    """The success predictor from these metrics (:mod:`sharpen.diagnose.predict`)."""
    _rows: list[TrajectoryStages] = PrivateAttr(default_factory=list)

    @property
    def per_trajectory(self) -> list[TrajectoryStages]:
        """Each trajectory's stages (kept for the predictor and callers; not serialised)."""
        return self._rows

    def attach(self, rows: list[TrajectoryStages]) -> None:
        """Keep ``rows`` as :attr:`per_trajectory`."""
        self._rows = rows


def stage_order(env: Environment) -> list[str]:
    """The environment's stages in declared order (first appearance among ``stages``' values)."""
    return list(dict.fromkeys(env.stages.values()))


def action_key(action: Action) -> str:
    """The key actions are matched by (see the module doc)."""
    return json.dumps({"tool": action.tool, "arguments": _normalise(action.arguments)},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    return value


def reference_of(env: Environment, task: TaskSpec) -> list[Action] | None:
    """The reference's actions for ``task``: ``reference_actions``, else ``reference_solution``
    through the answer tool (as the ``reference`` agent plays it), else ``None``."""
    from sharpen.agents.baselines import answer_tool

    actions = env.reference_actions(task)
    if actions is not None:
        return actions
    solution = env.reference_solution(task)
    tool = answer_tool(env.tools)
    if solution is None or tool is None or tool.text_argument is None:
        return None
    return [Action(tool=tool.name, arguments={tool.text_argument: solution})]


Staged = dict[str, dict[str, int]]
"""Action keys per stage, each a multiset (key -> count; plain dicts: a run makes many)."""


class Stager:
    """Stages actions in one environment, remembering each distinct action's key and stage
    (a run repeats its actions: the same look-ups, the same commands)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self._known: dict[str, tuple[str, str]] = {}

    def key_and_stage(self, action: Action | None) -> tuple[str | None, str]:
        """``action``'s key (``None`` without an action) and stage (:data:`UNSTAGED` when none)."""
        if action is None:
            return None, UNSTAGED
        raw = repr((action.tool, action.arguments))  # cheap identity before normalising
        hit = self._known.get(raw)
        if hit is None:
            hit = self._known[raw] = (action_key(action), self.env.stage(action) or UNSTAGED)
        return hit

    def staged(self, actions: list[Action]) -> Staged:
        """The keys of ``actions`` per stage."""
        out: Staged = {}
        for action in actions:
            key, stage = self.key_and_stage(action)
            bag = out.setdefault(stage, {})
            bag[str(key)] = bag.get(str(key), 0) + 1
        return out


def trajectory_stages(env: Environment, trajectory: Trajectory,
                      reference: list[Action] | None) -> TrajectoryStages:
    """``trajectory``'s stage metrics against ``reference`` (``None``: no reference)."""
    stager = Stager(env)
    ref = stager.staged(reference) if reference is not None else None
    return staged_trajectory(stager, stage_order(env), trajectory, ref)


def staged_trajectory(stager: Stager, order: list[str], trajectory: Trajectory,
                      ref: Staged | None) -> TrajectoryStages:
    """:func:`trajectory_stages` with the reference already staged (``None``: none)."""
    # Plain counters while counting; one model per stage at the end (cheaper per step).
    acc: dict[str, list[float]] = {s: [0, 0, 0.0, 0] for s in order}
    agent: Staged = {}
    for step in trajectory.steps:
        key, stage = stager.key_and_stage(step.action)
        a = acc.setdefault(stage, [0, 0, 0.0, 0])
        a[0] += 1
        a[1] += step.usage.input_tokens + step.usage.output_tokens
        a[2] += step.model_seconds + step.env_seconds
        if key is not None:
            a[3] += 1
            bag = agent.setdefault(stage, {})
            bag[key] = bag.get(key, 0) + 1
    for stage in ref or {}:
        acc.setdefault(stage, [0, 0, 0.0, 0])
    stages = []
    empty: dict[str, int] = {}
    for stage, (steps, tokens, seconds, actions) in acc.items():
        n = int(actions)
        if ref is None:
            stages.append(StageMetrics(stage=stage, steps=int(steps), tokens=int(tokens),
                                       seconds=seconds, actions=n))
            continue
        mine, theirs = agent.get(stage, empty), ref.get(stage, empty)
        refs = sum(theirs.values())
        matched = sum(min(c, theirs.get(k, 0)) for k, c in mine.items())  # multiset ∩
        stages.append(StageMetrics(
            stage=stage, steps=int(steps), tokens=int(tokens), seconds=seconds, actions=n,
            reference=refs, matched=matched, precision=matched / n if n else None,
            recall=matched / refs if refs else None))
    stages.sort(key=lambda m: m.stage == UNSTAGED)
    outcome = trajectory.outcome
    success = outcome.success if outcome is not None and outcome.counts else None
    return TrajectoryStages(trajectory_id=trajectory.id, success=success,
                            has_reference=ref is not None, stages=stages)


def _rate(count: int, n: int) -> tuple[float | None, Interval]:
    return (count / n if n else None), wilson(count, n)


def summarise(env_name: str, order: list[str], rows: list[TrajectoryStages]) -> StageReport:
    """The run-level :class:`StageReport` of ``rows`` (the predictor is left ``None``)."""
    names = list(order)
    if any(m.stage == UNSTAGED and m.steps for r in rows for m in r.stages):
        names.append(UNSTAGED)
    failed = [r for r in rows if r.success is False]
    solved = [r for r in rows if r.success is True]
    summaries = []
    for name in names:
        ms = [(r, m) for r in rows for m in r.stages if m.stage == name]
        reached = {r.trajectory_id for r, m in ms if m.steps}
        withref = [m for r, m in ms if r.has_reference]
        actions = sum(m.actions for m in withref)
        refs = sum(m.reference for m in withref)
        matched = sum(m.matched for m in withref)
        rf, rf_ci = _rate(sum(r.trajectory_id in reached for r in failed), len(failed))
        rs, rs_ci = _rate(sum(r.trajectory_id in reached for r in solved), len(solved))
        summaries.append(StageSummary(
            stage=name, reached=len(reached), reached_failed=rf, reached_failed_ci=rf_ci,
            reached_solved=rs, reached_solved_ci=rs_ci, steps=sum(m.steps for _, m in ms),
            tokens=sum(m.tokens for _, m in ms), seconds=sum(m.seconds for _, m in ms),
            precision=matched / actions if withref and actions else None,
            recall=matched / refs if withref and refs else None))
    report = StageReport(env=env_name, order=names, trajectories=len(rows),
                         with_reference=sum(r.has_reference for r in rows), summaries=summaries)
    report.attach(rows)
    return report


class StageCollector:
    """Stage metrics gathered one trajectory at a time (one pass over a run, next to the
    detectors), the reference computed once per task."""

    def __init__(self, env: Environment, env_name: str) -> None:
        self.env = env
        self.env_name = env_name
        self.order = stage_order(env)
        self.rows: list[TrajectoryStages] = []
        self._stager = Stager(env)
        self._references: dict[tuple[str, str, int, str], Staged | None] = {}

    def add(self, trajectory: Trajectory) -> None:
        """Stage ``trajectory``."""
        t = trajectory.task  # a perturbed variant has an id of its own
        key = (t.env, t.id, t.seed, repr(sorted(t.knobs.items())) if t.knobs else "")
        if key not in self._references:
            try:
                reference = reference_of(self.env, t)
            except UserError:  # a task this install cannot rebuild: compared with nothing
                reference = None
            self._references[key] = (self._stager.staged(reference) if reference is not None
                                     else None)
        self.rows.append(staged_trajectory(self._stager, self.order, trajectory,
                                           self._references[key]))

    def report(self) -> StageReport:
        """The run-level report of what was added, with the success predictor."""
        report = summarise(self.env_name, self.order, self.rows)
        report.predictor = predict_success(report)
        return report


def stage_report(env: Environment, env_name: str,
                 trajectories: Iterable[Trajectory]) -> StageReport | None:
    """Stage metrics of ``trajectories`` played in ``env``, with the success predictor;
    ``None`` when ``env`` declares no stages."""
    if not stage_order(env):
        return None
    collector = StageCollector(env, env_name)
    for t in trajectories:
        collector.add(t)
    return collector.report()


def stage_collector(store: Store, run_id: str,
                    registry: Registry = REGISTRY) -> StageCollector | None:
    """A collector for run ``run_id``, its environment built from the run's stored
    ``{name, args}``; ``None`` when the environment declares no stages or cannot be built
    here (a plug-in not installed: its stages are unknown, the rest of a diagnosis is not)."""
    ref = store.get_run(run_id).manifest.env
    try:
        env = registry.create(ENV, ref)
    except UserError:
        return None
    return StageCollector(env, ref.name) if stage_order(env) else None


def run_stages(store: Store, run_id: str, registry: Registry = REGISTRY) -> StageReport | None:
    """:func:`stage_report` of a stored run (``None``: no stages, see :func:`stage_collector`)."""
    collector = stage_collector(store, run_id, registry)
    if collector is None:
        return None
    for t in store.iter_trajectories(run_id, with_messages=False):
        collector.add(t)
    return collector.report()
