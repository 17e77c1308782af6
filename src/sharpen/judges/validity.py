"""Judge validity: how far a judge can be trusted, measured where the truth is known.

On an environment with a verifier, :func:`gather` runs (or reuses, by config hash) three
agents on the same tasks — the ``reference`` agent (its episodes should succeed), the ``null``
agent (they should fail) and a real agent — and judges every trajectory with the judge under
test (stored, resumable: a second call reuses every judgement). :func:`measure` then sets the
judge's verdict beside the verifier's:

- **accuracy, Cohen's κ and AUROC** against the verifier, with 95% intervals;
- **per source**: how often the judge passes reference episodes and fails null ones — a judge
  that cannot tell an empty episode from a solution is not measuring the task;
- **length bias**: score against transcript length at a fixed verifier outcome;
- **self-consistency**: the same transcripts judged again with sampling, agreement across
  the repeats;
- **position bias** of the pairwise judge on the same model: how often its verdict on a
  (reference, real agent) pair flips when the order is swapped.

The judge never sees the verifier's verdict (:mod:`sharpen.judges.transcript`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import ENV
from sharpen.judges.base import JUDGE, JudgeError, as_verdict
from sharpen.judges.rubric import Criterion, Rubric
from sharpen.judges.runner import JudgeSetup, JudgeSummary, judge_run, judgeable
from sharpen.judges.transcript import render
from sharpen.models.base import ChatModel
from sharpen.runner import RunConfig, Runner
from sharpen.runner.compose import select_tasks
from sharpen.stats.judge_validity import (
    FlipRate,
    LengthBias,
    SelfConsistency,
    VerifierValidity,
    flip_rate,
    length_bias,
    self_consistency,
    verifier_validity,
)
from sharpen.stats.judged import as_number
from sharpen.store import Store

SOURCES = ("reference", "null", "agent")


class ValidityPlan(BaseModel):
    """What :func:`gather` runs and judges."""

    env: PluginRef
    judge: JudgeSetup
    tasks: int = 34
    """Tasks per agent (three agents: 34 gives the 100 trajectories the docs recommend)."""
    split: str | None = None
    seed: int = 0
    agent: AgentSpec = Field(default_factory=AgentSpec)
    """The real agent (default: the default spec, the embedded model)."""
    agent_runs: list[str] = Field(default_factory=list)
    """Stored runs to use as the real agent's instead of running ``agent``."""
    criterion: str | None = None
    """The judge's criterion compared with the verifier (default: its first yes/no one)."""
    pairs: int = 20
    """(reference, agent) pairs the pairwise judge sees in both orders (0: skip)."""
    samples: int = 3
    """Repeats per transcript for self-consistency (0: skip)."""
    consistency_items: int = 20
    """Transcripts judged ``samples`` times."""
    concurrency: int = 1
    judge_new: bool = True
    """``False``: measure the judgements already stored and judge nothing new (runs are still
    run or reused: a run this judge has not judged contributes nothing)."""


class Row(BaseModel):
    """One judged trajectory beside its verifier verdict."""

    trajectory_id: str
    task: str
    source: str
    success: bool
    value: Any
    score: float | None
    length: int
    """Characters of the transcript the judge would read uncut."""


class Gathered(BaseModel):
    """What :func:`gather` collected: the rows and what judging cost."""

    plan: ValidityPlan
    runs: dict[str, list[str]]
    rows: list[Row]
    criterion: str
    judge_hash: str
    judge_errors: int
    summaries: list[JudgeSummary]
    pair_orders: list[dict[str, Any]]
    """Per pair: ``ab``/``ba`` verdicts and ``flipped``."""
    samples: list[list[float | None]]
    """Per repeated transcript: the score of each sample."""


def _rubric(plan: ValidityPlan) -> Rubric | None:
    """The rubric of a ``rubric`` judge under test (``None`` for another judge)."""
    ref = plan.judge.judge
    return Rubric.parse(ref.args.get("rubric")) if ref.name == "rubric" else None


def _criterion(plan: ValidityPlan, rubric: Rubric | None) -> str:
    if plan.criterion:
        return plan.criterion
    ref = plan.judge.judge
    if rubric is not None:
        pick = next((c for c in rubric.criteria if c.scale == "bool"), rubric.criteria[0])
        return pick.name
    if ref.name == "reference":
        return str(ref.args.get("criterion", "correct"))
    if ref.name == "checklist":
        return "checklist"
    raise UserError(f"which criterion of judge {ref.name!r} is the verifier's verdict?",
                    "name it with --criterion")


def _rubric_criterion(rubric: Rubric | None, name: str) -> Criterion | None:
    return None if rubric is None else next((c for c in rubric.criteria if c.name == name), None)


async def _run(store: Store, plan: ValidityPlan, spec: AgentSpec, tasks: list[Any],
               progress: bool) -> str:
    config = RunConfig(env=plan.env, agent=spec, tasks=tasks, seed=plan.seed,
                       concurrency=plan.concurrency)
    summary = await Runner(store, progress=progress).run(config, resume=True,
                                                         label=f"{spec.name} episodes")
    return summary.run_id


def _score(fb: Feedback | None, crit: Criterion | None) -> float | None:
    if fb is None:
        return None
    if crit is not None and isinstance(fb.value, str):
        return crit.as_number(fb.value)
    return as_number(fb.value)


async def gather(store: Store, plan: ValidityPlan, *, model: ChatModel | None = None,
                 progress: bool = True, registry: Registry = REGISTRY,
                 on_judged: Callable[..., None] | None = None) -> Gathered:
    """Run the three agents (reusing stored runs of the same config) and judge them."""
    env = registry.create(ENV, plan.env)
    try:
        tasks = select_tasks(env, plan.env.name, split=plan.split, limit=plan.tasks,
                             seed=plan.seed)
    finally:
        await env.close()
    rubric = _rubric(plan)
    crit_name = _criterion(plan, rubric)
    runs: dict[str, list[str]] = {
        "reference": [await _run(store, plan, AgentSpec(name="reference",
                                                        agent=PluginRef(name="reference")),
                                 tasks, progress)],
        "null": [await _run(store, plan, AgentSpec(name="null", agent=PluginRef(name="null")),
                            tasks, progress)],
        "agent": [store.resolve_run(r) for r in plan.agent_runs]
        or [await _run(store, plan, plan.agent, tasks, progress)],
    }
    summaries = []
    for ids in runs.values():
        for rid in ids if plan.judge_new else []:
            summaries.append(await judge_run(store, rid, plan.judge, resume=True, model=model,
                                             concurrency=plan.concurrency, on_done=on_judged,
                                             registry=registry))
    jhash = plan.judge.hash(registry=registry)
    crit = _rubric_criterion(rubric, crit_name)
    rows: list[Row] = []
    errors = 0
    judged: dict[str, Trajectory] = {}
    for source, ids in runs.items():
        for rid in ids:
            calls = {j.id: j for j in store.judgements(rid, jhash)}
            errors += sum(j.status == "error" for j in calls.values())
            for t in store.iter_trajectories(rid):
                if not judgeable(t) or t.outcome is None or t.outcome.success is None:
                    continue
                fb = next((f for f in reversed(t.feedback)
                           if f.call_id in calls and f.name == crit_name), None)
                if fb is None:
                    continue
                judged[t.id] = t
                rows.append(Row(trajectory_id=t.id, task=t.task.id, source=source,
                                success=bool(t.outcome.success), value=fb.value,
                                score=_score(fb, crit), length=len(render(t, 10**6)[0])))
    if not rows:
        raise UserError(f"no trajectory got a score on {crit_name!r} from this judge",
                        "check --criterion names one of the judge's criteria, and the judge "
                        "errors above")
    pair_orders = await _pairs(store, plan, runs, model, registry, summaries)
    samples = await _samples(plan, [judged[r.trajectory_id] for r in _mixed(rows)], crit_name,
                             crit, model, registry)
    return Gathered(plan=plan, runs=runs, rows=rows, criterion=crit_name, judge_hash=jhash,
                    judge_errors=errors, summaries=summaries, pair_orders=pair_orders,
                    samples=samples)


async def _pairs(store: Store, plan: ValidityPlan, runs: dict[str, list[str]],
                 model: ChatModel | None, registry: Registry,
                 summaries: list[JudgeSummary]) -> list[dict[str, Any]]:
    """Both orders of the pairwise judge (same model) on (agent, reference) pairs."""
    if plan.pairs <= 0:
        return []
    pair = JudgeSetup(judge=PluginRef(name="pairwise"), model=plan.judge.model)
    agent, reference = runs["agent"][0], runs["reference"][0]
    if plan.judge_new:
        summaries.append(await judge_run(store, agent, pair, versus=reference, resume=True,
                                         limit=plan.pairs, model=model, registry=registry,
                                         concurrency=plan.concurrency))
    return [j.detail for j in store.judgements(agent, pair.hash()) if j.status == "ok"]


def _mixed(rows: list[Row]) -> list[Row]:
    """``rows`` taken in turn from each agent (reference, null, real, reference, ...), so that
    the first few — the ones self-consistency samples — are not all one agent's."""
    by = [[r for r in rows if r.source == s] for s in SOURCES]
    out = []
    for i in range(max(map(len, by), default=0)):
        out += [b[i] for b in by if i < len(b)]
    return out


async def _samples(plan: ValidityPlan, trajectories: list[Trajectory], name: str,
                   crit: Criterion | None, model: ChatModel | None,
                   registry: Registry) -> list[list[float | None]]:
    """Each of the first ``consistency_items`` transcripts (taken in turn from each agent)
    judged ``samples`` times with sampling (temperature 0.7, a seed per sample); not stored."""
    if plan.samples <= 0 or plan.consistency_items <= 0:
        return []
    from sharpen.judges.runner import build_judge_model

    chat = model if model is not None else build_judge_model(plan.judge.model, registry)
    out: list[list[float | None]] = []
    try:
        for t in trajectories[: plan.consistency_items]:
            scores: list[float | None] = []
            for k in range(plan.samples):
                params = {**plan.judge.judge.args.get("params", {}), "temperature": 0.7,
                          "seed": 1 + k}
                args = {**plan.judge.judge.args, "params": params}
                try:
                    judge = registry.create(JUDGE, PluginRef(name=plan.judge.judge.name,
                                                             args=args))
                    verdict = as_verdict(await judge.judge(t, chat))
                except UserError:
                    return []  # the judge takes no sampling params: not measurable
                except JudgeError:  # a failed sample is a missing rating
                    scores.append(None)
                    continue
                fb = next((f for f in verdict.feedback if f.name == name), None)
                scores.append(_score(fb, crit))
            out.append(scores)
    finally:
        if model is None:
            await chat.aclose()
    return out


class SourceRate(BaseModel):
    """How the judge scored one agent's trajectories."""

    source: str
    n: int
    verifier_rate: float
    """Share the verifier passed."""
    judge_rate: float | None
    """Share the judge passed (its label, or its score at the threshold)."""


class ValidityReport(BaseModel):
    """The judge's validity on one environment (docs/judges.md reads every field)."""

    env: PluginRef
    judge: str
    judge_hash: str
    model: str
    criterion: str
    runs: dict[str, list[str]]
    n: int
    judge_errors: int
    """Judgements that gave no verdict (error kind ``judge``): left out of every number."""
    threshold: float | None
    """Score at or above which a numeric score counts as a pass."""
    verifier: VerifierValidity
    sources: list[SourceRate]
    length_bias: LengthBias | None
    flip: FlipRate | None
    consistency: SelfConsistency | None
    tokens: int
    """Judge-model tokens spent by this measurement's judging (reused judgements: 0)."""


def _threshold(crit: Criterion | None, rows: list[Row]) -> float | None:
    if all(isinstance(r.value, bool) for r in rows):
        return None
    if crit is not None:
        choices = [crit.as_number(c) for c in crit.choices()]
        nums = [c for c in choices if c is not None]
        return (min(nums) + max(nums)) / 2 if nums else None
    return 0.5  # checklist fractions, reference booleans read as numbers


def measure(g: Gathered, *, n_boot: int = 2000, seed: int = 0) -> ValidityReport:
    """The statistics of :class:`ValidityReport` from what :func:`gather` collected (pure)."""
    rows = g.rows
    crit = _rubric_criterion(_rubric(g.plan), g.criterion)
    thr = _threshold(crit, rows)
    clusters = [r.task for r in rows]
    judged = [r.value if isinstance(r.value, bool) else r.score for r in rows]
    verdicts = [r.success for r in rows]
    verifier = verifier_validity(judged, verdicts, threshold=thr, n_boot=n_boot, seed=seed,
                                 clusters=clusters)

    def passed(r: Row) -> bool | None:
        if isinstance(r.value, bool):
            return r.value
        return None if r.score is None or thr is None else r.score >= thr

    sources = []
    for s in SOURCES:
        mine = [r for r in rows if r.source == s]
        if mine:
            marks = [p for p in (passed(r) for r in mine) if p is not None]
            sources.append(SourceRate(source=s, n=len(mine),
                                      verifier_rate=sum(r.success for r in mine) / len(mine),
                                      judge_rate=sum(marks) / len(marks) if marks else None))
    scores = [r.score for r in rows]
    bias = (length_bias(scores, [r.length for r in rows], verdicts, n_boot=n_boot, seed=seed,
                        clusters=clusters)
            if any(s is not None for s in scores) and len(rows) >= 4 else None)
    flip = None
    if g.pair_orders:
        back = {"A": "B", "B": "A"}
        flip = flip_rate([d.get("ab") for d in g.pair_orders],
                         [back.get(d["ba"], "tie") if d.get("ba") else None
                          for d in g.pair_orders])
    consistency = (self_consistency(g.samples, scale="nominal" if crit is None or
                                    crit.scale == "bool" or isinstance(crit.scale, list)
                                    else "interval", n_boot=n_boot, seed=seed)
                   if g.samples else None)
    main = g.summaries[0] if g.summaries else None
    return ValidityReport(
        env=g.plan.env, judge=main.judge if main else g.plan.judge.judge.name,
        judge_hash=g.judge_hash, model=main.model if main else g.plan.judge.model.name,
        criterion=g.criterion, runs=g.runs, n=len(rows), judge_errors=g.judge_errors,
        threshold=thr, verifier=verifier, sources=sources, length_bias=bias, flip=flip,
        consistency=consistency,
        tokens=sum(s.usage.total_tokens for s in g.summaries))
