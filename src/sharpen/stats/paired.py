"""Paired comparison of two runs on the same tasks, with a verdict in words.

Tasks are matched by ``TaskSpec.hash()``; a task counts as matched when both runs have at
least one valid trial of it. Tasks only one run has (or that one run could not score) are
reported, not compared. The effect is ``B − A``: the mean over matched tasks of the
per-task difference of success rates, in points (percentage points).

Method:

- **McNemar** — when every matched task has exactly one valid trial in each run and no
  tasks share a cluster: the exact (fewer than 25 discordant pairs) or continuity-corrected
  chi-square McNemar test, with Newcombe's paired interval (:mod:`sharpen.stats.mcnemar`).
- **paired bootstrap** — otherwise (several epochs, or declared clusters): clusters of
  tasks are resampled with replacement, keeping each task's pair together; expanded
  percentile interval and the p-value that inverts it (:mod:`sharpen.stats.bootstrap`).

Verdict: with p (Holm-adjusted when several runs are compared with one baseline) below α,
``"B is better by 6.2 points, 95% CI [2.1, 10.3], p = 0.004"`` (p rounded up, the interval
outward: :mod:`sharpen.stats.rounding`; or ``worse``, with the
interval of ``A − B``); otherwise ``"no detectable difference; with these tasks the smallest
detectable effect is 14 points"`` — the MDE at 80% power and α from the observed spread of
the per-task differences (:func:`paired_mde`), followed, when the interval excludes 0 all the
same (Newcombe's interval against the exact test, or an unadjusted interval against a Holm
p-value), by a clause that says so.
"""

from __future__ import annotations

from typing import Literal, TypedDict

import numpy as np
from pydantic import BaseModel

from sharpen.stats.bootstrap import DEFAULT_REPS, bootstrap_ratio, percentile_interval, percentile_p_value
from sharpen.stats.clustered import cluster_codes, clustered_mean
from sharpen.stats.intervals import Interval
from sharpen.stats.mcnemar import mcnemar, newcombe_interval
from sharpen.stats.power import z_sum
from sharpen.stats.rounding import interval_text
from sharpen.stats.rounding import p_cell as p_cell  # re-exported: the viewer imports it here
from sharpen.stats.rounding import p_text as p_value_text
from sharpen.stats.taskdata import TaskTable

Method = Literal["mcnemar-exact", "mcnemar-chi2", "paired-bootstrap", "none"]


class _Common(TypedDict):
    """The fields of a :class:`PairedComparison` that do not depend on the test chosen."""

    label_a: str
    label_b: str
    run_a: str
    run_b: str
    matched_tasks: int
    only_a: list[str]
    only_b: list[str]
    alpha: float


class PairedComparison(BaseModel):
    """Run B against run A on their common tasks."""

    label_a: str
    """Name of the baseline in the verdict (``A``)."""
    label_b: str
    """Name of the other run in the verdict (``B``, ``C``, ...)."""
    run_a: str
    """Baseline run id."""
    run_b: str
    """Compared run id."""
    matched_tasks: int
    """Tasks both runs scored."""
    n_clusters: int
    """Independent units of the comparison (clusters of matched tasks)."""
    only_a: list[str]
    """Ids of tasks only A scored (B lacks them or could not score them)."""
    only_b: list[str]
    """Ids of tasks only B scored."""
    rate_a: float | None
    """A's mean success on the matched tasks."""
    rate_b: float | None
    """B's mean success on the matched tasks."""
    difference: float | None
    """``rate_b − rate_a`` (a rate; ×100 for points)."""
    ci: Interval | None
    """Interval of the difference."""
    p_value: float
    """Two-sided p-value of ``H0: no difference`` (unadjusted)."""
    p_adjusted: float
    """Holm-adjusted p-value over the family of comparisons (= ``p_value`` for one)."""
    p_upper_bound: bool = False
    """Paired bootstrap only: no replicate crossed 0, so the p-value is an upper bound set by
    the number of replicates (printed ``p ≤ …``)."""
    method: Method
    """How the test and interval were computed."""
    discordant: tuple[int, int] | None = None
    """McNemar only: (A succeeded & B failed, A failed & B succeeded)."""
    mde: float
    """Smallest detectable effect (rate) at 80% power and ``alpha`` with these tasks."""
    alpha: float
    """Significance level."""
    significant: bool = False
    """``p_adjusted < alpha``."""
    direction: Literal["better", "worse", "none"] = "none"
    """Significant direction of B relative to A."""
    verdict: str = ""
    """The verdict in words (see the module doc)."""


def _align(a: TaskTable, b: TaskTable) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    ia = {h: i for i, h in enumerate(a.task_hash) if a.n[i] > 0}
    ib = {h: i for i, h in enumerate(b.task_hash) if b.n[i] > 0}
    common = sorted(set(ia) & set(ib))
    only_a = sorted(a.task_id[ia[h]] for h in set(ia) - set(ib))
    only_b = sorted(b.task_id[ib[h]] for h in set(ib) - set(ia))
    return (np.array([ia[h] for h in common], dtype=np.int64),
            np.array([ib[h] for h in common], dtype=np.int64), only_a, only_b)


def paired_mde(d: np.ndarray, codes: np.ndarray, alpha: float = 0.05, power: float = 0.8) -> float:
    """MDE from per-task differences: ``(z_{1−α/2} + z_power) · SE``, with the clustered SE
    floored at ``1/T`` (one task changing its verdict), so that two runs that happen to
    agree everywhere do not claim to detect any difference at all."""
    t = len(d)
    if t == 0:
        return 1.0
    se = clustered_mean(d, codes).se
    return min(1.0, z_sum(alpha, power) * max(se, 1.0 / t))


def compare_pair(
    a: TaskTable, b: TaskTable, rng: np.random.Generator, *, label_a: str = "A",
    label_b: str = "B", alpha: float = 0.05, level: float = 0.95, n_boot: int = DEFAULT_REPS,
) -> PairedComparison:
    """Compare run ``b`` with baseline ``a`` (see the module doc); the verdict assumes this
    is the only comparison — :func:`sharpen.stats.compare.compare_runs` adjusts a family."""
    ia, ib, only_a, only_b = _align(a, b)
    t = len(ia)
    base: _Common = {"label_a": label_a, "label_b": label_b, "run_a": a.run_id, "run_b": b.run_id,
                     "matched_tasks": t, "only_a": only_a, "only_b": only_b, "alpha": alpha}
    if t == 0:
        out = PairedComparison(**base, n_clusters=0, rate_a=None, rate_b=None, difference=None,
                               ci=None, p_value=1.0, p_adjusted=1.0, method="none", mde=1.0)
        return with_verdict(out, out.p_value, family=1)
    keys = a.cluster_keys()
    codes = cluster_codes([keys[i] for i in ia])
    g = int(codes.max()) + 1
    na, ca, nb, cb = a.n[ia], a.c[ia], b.n[ib], b.c[ib]
    ra, rb = ca / na, cb / nb
    d = rb - ra
    diff = float(d.mean())
    discordant = None
    bound = False
    if bool(np.all(na == 1) and np.all(nb == 1)) and g == t:
        both = int(np.sum((ca == 1) & (cb == 1)))
        a_only = int(np.sum((ca == 1) & (cb == 0)))
        b_only = int(np.sum((ca == 0) & (cb == 1)))
        neither = t - both - a_only - b_only
        test = mcnemar(a_only, b_only)
        lo, hi = newcombe_interval(both, b_only, a_only, neither, level)
        ci = Interval(low=lo, high=hi, level=level, method="newcombe")
        p = test.p_value
        method: Method = "mcnemar-exact" if test.method == "exact-binomial" else "mcnemar-chi2"
        discordant = (a_only, b_only)
    elif g < 2:  # one cluster: nothing to resample, no evidence either way
        ci = Interval(low=-1.0, high=1.0, level=level, method="none")
        p, method = 1.0, "paired-bootstrap"
    else:
        num = np.bincount(codes, weights=d, minlength=g)
        den = np.bincount(codes, minlength=g).astype(float)
        reps = bootstrap_ratio(num, den, n_boot, rng)[:, 0]
        lo, hi = percentile_interval(reps, level, g)
        ci = Interval(low=lo, high=hi, level=level, method="bootstrap-percentile")
        p, bound = percentile_p_value(reps, g)
        method = "paired-bootstrap"
    out = PairedComparison(
        **base, n_clusters=g, rate_a=float(ra.mean()), rate_b=float(rb.mean()), difference=diff,
        ci=ci, p_value=p, p_adjusted=p, p_upper_bound=bound, method=method, discordant=discordant,
        mde=paired_mde(d, codes, alpha),
    )
    return with_verdict(out, p, family=1)


def _points(x: float) -> str:
    return f"{100 * x:.1f}"


def with_verdict(cmp: PairedComparison, p_adjusted: float, family: int) -> PairedComparison:
    """``cmp`` with its adjusted p-value, significance, direction and verdict set, for a
    family of ``family`` comparisons."""
    significant = cmp.difference is not None and p_adjusted < cmp.alpha and cmp.difference != 0
    b = cmp.label_b
    p_text = p_value_text(p_adjusted, bound=cmp.p_upper_bound) + (
        " (Holm-adjusted)" if family > 1 else "")
    level = f"{round(100 * cmp.ci.level)}% CI" if cmp.ci is not None else ""
    if cmp.difference is None or cmp.ci is None:
        verdict = f"no tasks in common between {cmp.label_a} and {b}: nothing to compare"
        direction = "none"
    elif significant:
        if cmp.difference > 0:
            direction = "better"
            verdict = (f"{b} is better by {_points(cmp.difference)} points, {level} "
                       f"{interval_text(cmp.ci.low, cmp.ci.high)}, {p_text}")
        else:
            direction = "worse"
            verdict = (f"{b} is worse by {_points(-cmp.difference)} points, {level} "
                       f"{interval_text(-cmp.ci.high, -cmp.ci.low)}, {p_text}")
    else:
        direction = "none"
        mde = 100 * cmp.mde
        mde_text = f"{mde:.0f}" if mde >= 10 else f"{mde:.1f}"
        verdict = ("no detectable difference; with these tasks the smallest detectable effect "
                   f"is {mde_text} points")
        if cmp.ci.low > 0 or cmp.ci.high < 0:  # ci is set: the first branch took None
            # Newcombe's interval and the exact McNemar test (or Holm's adjustment, which
            # leaves intervals alone) can disagree at the margin; say so rather than let the
            # table's interval contradict the words.
            verdict += (f"; the {level} {interval_text(cmp.ci.low, cmp.ci.high)} "
                        f"of {b} − {cmp.label_a} excludes 0 but the test "
                        f"does not ({p_text}, α = {cmp.alpha:g}): at this margin the verdict "
                        "follows the test")
    return cmp.model_copy(update={"p_adjusted": p_adjusted, "significant": significant,
                                  "direction": direction, "verdict": verdict})
