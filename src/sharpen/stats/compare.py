"""ComparisonReport: ``sharpen compare A B [C ...]`` as one pydantic model.

The first run is the baseline ``A``; every other run (``B``, ``C``, ...) is compared with it
by :func:`sharpen.stats.paired.compare_pair`. With more than one comparison the p-values are
Holm-adjusted (:mod:`sharpen.stats.multiple`) and the verdicts use the adjusted values, so
the chance of any false "better"/"worse" stays at α. Intervals stay at their nominal level
(unadjusted). ``any_worse`` is what ``--fail-if-worse`` gates on. Judge scores the runs share
are paired on tasks too (:mod:`sharpen.stats.judge_compare`); they are shown, never gated on.
So is each run's IRT ability difference from ``A`` in one fit over the compared runs
(:mod:`sharpen.stats.irt_runs`).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from sharpen.core.errors import UserError
from sharpen.stats.accuracy import Metric, success_metric
from sharpen.stats.bootstrap import DEFAULT_REPS
from sharpen.stats.cost import CostSummary, Frontier, FrontierPoint, cost_summary, frontier
from sharpen.stats.irt_runs import IRTComparison, compare_abilities
from sharpen.stats.judge_compare import JudgeComparison, compare_scores, judge_values
from sharpen.stats.multiple import holm
from sharpen.stats.paired import PairedComparison, compare_pair, with_verdict
from sharpen.stats.report import ErrorSummary, RunInfo, error_summary, load_table
from sharpen.stats.taskdata import TaskTable
from sharpen.store import RunRecord, Store


class RunBrief(BaseModel):
    """One compared run at a glance."""

    label: str
    """``A`` (baseline), ``B``, ``C``, ..."""
    run: RunInfo
    """Which run."""
    success: Metric
    """Mean success over all its scored tasks, with interval."""
    cost: CostSummary
    """What it spent."""
    errors: ErrorSummary
    """Excluded attempts."""


class ComparisonReport(BaseModel):
    """Every run against the baseline."""

    runs: list[RunBrief]
    """The runs, baseline first."""
    comparisons: list[PairedComparison]
    """``B vs A``, ``C vs A``, ..."""
    alpha: float
    """Family-wise significance level."""
    holm: bool
    """Whether p-values were Holm-adjusted (more than one comparison)."""
    frontier: Frontier
    """The runs on the cost–accuracy plane."""
    warnings: list[str]
    """What weakens the comparison (errors, unmatched tasks, different environments)."""
    any_worse: bool
    """Whether any run is significantly worse than the baseline."""
    seed: int
    """Seed of the bootstrap's numpy Generator."""
    judge_scores: list[JudgeComparison] = []
    """Judge scores paired on tasks, per other run, judge and criterion
    (:mod:`sharpen.stats.judge_compare`); empty when no judge scored two of the runs."""
    irt: IRTComparison | None = None
    """Each run's IRT ability minus A's, from one fit over the compared runs
    (:mod:`sharpen.stats.irt_runs`); ``None`` when a run has no scored task."""


def brief(label: str, rec: RunRecord, table: TaskTable) -> RunBrief:
    """The :class:`RunBrief` of one run."""
    return RunBrief(label=label, run=RunInfo.of(rec), success=success_metric(table),
                    cost=cost_summary(table), errors=error_summary(table))


def brief_frontier(briefs: list[RunBrief]) -> Frontier:
    """The cost–accuracy frontier of the runs that scored at least one task."""
    points = [FrontierPoint(run_id=b.run.run_id, label=b.label, accuracy=b.success.value or 0.0,
                            ci_low=b.success.ci.low if b.success.ci else 0.0,
                            ci_high=b.success.ci.high if b.success.ci else 1.0,
                            cost_per_task=b.cost.cost_per_task,
                            tokens_per_task=b.cost.tokens_per_task or 0.0)
              for b in briefs if b.success.value is not None]
    return frontier(points)


def label(i: int) -> str:
    """``A``, ``B``, ..., ``Z``, ``R26``, ..."""
    return string.ascii_uppercase[i] if i < 26 else f"R{i}"


def compare_runs(
    records: list[RunRecord], tables: list[TaskTable], *, seed: int = 0, alpha: float = 0.05,
    n_boot: int = DEFAULT_REPS,
) -> ComparisonReport:
    """Compare ``tables[1:]`` with ``tables[0]`` (the records give names and manifests)."""
    if len(tables) < 2 or len(records) != len(tables):
        raise ValueError("compare_runs needs a baseline and at least one other run")
    rng = np.random.default_rng(seed)
    briefs = [brief(label(i), r, t) for i, (r, t) in enumerate(zip(records, tables, strict=True))]
    raw = [compare_pair(tables[0], t, rng, label_a="A", label_b=label(i), alpha=alpha, n_boot=n_boot)
           for i, t in enumerate(tables[1:], start=1)]
    family = len(raw)
    adjusted = holm([c.p_value for c in raw]) if family > 1 else [c.p_value for c in raw]
    comps = [with_verdict(c, p, family) for c, p in zip(raw, adjusted, strict=True)]
    warnings: list[str] = []
    for b in briefs:
        if not b.errors.trustworthy:
            warnings.append(f"{b.label} ({b.run.run_id}): {b.errors.excluded_share:.1%} of attempts "
                            "errored: its numbers are not trustworthy")
    for c in comps:
        if c.only_a or c.only_b:
            warnings.append(f"{c.label_b} vs A: {len(c.only_a)} task(s) only in A, {len(c.only_b)} only "
                            f"in {c.label_b}: compared on the {c.matched_tasks} common task(s)")
    envs = {b.run.env.model_dump_json() for b in briefs}
    if len(envs) > 1:
        warnings.append("the runs use different environment settings: tasks are matched by hash, "
                        "so only identical tasks are compared")
    return ComparisonReport(
        runs=briefs, comparisons=comps, alpha=alpha, holm=family > 1, frontier=brief_frontier(briefs),
        warnings=warnings, any_worse=any(c.direction == "worse" for c in comps), seed=seed,
        irt=compare_abilities([b.label for b in briefs], tables),
    )


def compare_stored(runs: Sequence[tuple[Store, str]], *, seed: int = 0, alpha: float = 0.05,
                   n_boot: int = DEFAULT_REPS) -> ComparisonReport:
    """:func:`compare_runs` of stored runs, each a (store, full run id) pair, the first the
    baseline: what ``sharpen compare`` and ``sharpen.compare(...)`` print and return. A run
    named twice raises a :class:`UserError`."""
    ids = [run_id for _, run_id in runs]
    if len(set(ids)) < len(ids):
        raise UserError("the same run is named twice", "name each run once; `sharpen runs` lists them")
    rep = compare_runs([st.get_run(i) for st, i in runs], [load_table(st, i) for st, i in runs],
                       seed=seed, alpha=alpha, n_boot=n_boot)
    # A Generator of its own, so judge scores leave the success comparison's draws unchanged.
    rng = np.random.default_rng(seed)
    scores = [judge_values(st.iter_trajectories(i, with_steps=False)) for st, i in runs]
    judged = [c for k in range(1, len(runs))
              for c in compare_scores(scores[0], scores[k], rng, run_a=ids[0], run_b=ids[k],
                                      label_b=label(k), n_boot=n_boot)]
    return rep.model_copy(update={"judge_scores": judged})
