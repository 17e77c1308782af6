"""Judge scores of two runs, paired on tasks: what ``sharpen compare`` shows as "judge scores".

For each (judge, criterion) that scored both runs — the judge is the feedback's ``author``,
which names its version and model, so a changed rubric or judge model is another judge and
is not paired — each task's score is the mean of its trajectories' current scores (epochs
averaged first, as for success, :mod:`sharpen.stats.judged`), and the effect is ``B − A``: the
mean over the tasks both runs scored of the per-task difference. Pairwise records
(``versus`` set) are preferences against another run, not scores of this one, and are left
out; so are criteria whose values are labels (no mean).

- **Interval**: the paired bootstrap over tasks of :mod:`sharpen.stats.bootstrap` (tasks
  resampled with replacement, each task's pair kept together; expanded percentile interval),
  for every scale, so intervals of yes/no and graded criteria read alike.
- **p-value, graded scales** (numbers, e.g. 1–5): the Wilcoxon signed-rank test of the
  per-task differences (``scipy.stats.wilcoxon``) — it uses only their signs and ranks, which
  suits an ordinal judge scale whose steps need not be equal. Zero differences (tasks the
  judge scored the same in both runs, common on a 5-point scale) are handled by **Pratt's
  method**: they are ranked with the others and their ranks then dropped, so many unchanged
  tasks weaken the evidence rather than being silently discarded. ``zero_differences`` counts
  them; when every difference is zero the p-value is 1.
- **p-value, yes/no**: with one scored trajectory per task in each run the per-task scores
  are 0/1 and the test is McNemar's (:mod:`sharpen.stats.mcnemar`: exact below 25 discordant
  tasks), as for success; with several epochs it is the paired bootstrap's p-value, which
  inverts its interval.

p-values are not adjusted across criteria: judge scores are shown next to the success
comparison, which stays the verdict (and the ``--fail-if-worse`` gate).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Literal

import numpy as np
from pydantic import BaseModel

from sharpen.core.trajectory import Trajectory
from sharpen.stats.bootstrap import (
    DEFAULT_REPS,
    bootstrap_ratio,
    percentile_interval,
    percentile_p_value,
)
from sharpen.stats.intervals import Interval
from sharpen.stats.judged import as_number, current
from sharpen.stats.mcnemar import mcnemar

JudgeMethod = Literal["wilcoxon-pratt", "mcnemar-exact", "mcnemar-chi2", "paired-bootstrap",
                      "none"]
"""How a judge comparison's p-value was computed."""

Scores = dict[tuple[str, str], dict[str, list[float | bool]]]
"""``(author, criterion) → task hash → the task's trajectories' current values``."""


class JudgeComparison(BaseModel):
    """One judge's criterion, run B against run A on the tasks both were scored on."""

    label_a: str
    """The baseline's label (``A``)."""
    label_b: str
    """The other run's label (``B``, ``C``, ...)."""
    run_a: str
    """Baseline run id."""
    run_b: str
    """Compared run id."""
    author: str
    """The judge: its name, version and model (the feedback's author)."""
    name: str
    """The criterion."""
    boolean: bool
    """Whether the criterion is yes/no (means are rates) rather than graded."""
    matched_tasks: int
    """Tasks both runs have a score on."""
    only_a: int
    """Tasks only A was scored on."""
    only_b: int
    """Tasks only B was scored on."""
    mean_a: float | None = None
    """A's mean score over the matched tasks."""
    mean_b: float | None = None
    """B's mean score over the matched tasks."""
    difference: float | None = None
    """``mean_b − mean_a`` (score units; a rate for yes/no)."""
    ci: Interval | None = None
    """Paired bootstrap interval of the difference (``None`` with fewer than two tasks)."""
    p_value: float = 1.0
    """Two-sided p-value of no difference (unadjusted; 1 when untestable)."""
    p_upper_bound: bool = False
    """Bootstrap p only: no replicate crossed 0, so ``p`` is a bound set by the replicates."""
    method: JudgeMethod = "none"
    """How ``p_value`` was computed."""
    zero_differences: int = 0
    """Matched tasks whose score did not change (Wilcoxon: kept in the ranking by Pratt's
    method, then dropped)."""
    discordant: tuple[int, int] | None = None
    """McNemar only: (yes in A & no in B, no in A & yes in B)."""


def judge_values(trajectories: Iterable[Trajectory]) -> Scores:
    """A run's current judge scores per criterion and task; pairwise records and text or
    label values are left out (they have no paired mean)."""
    out: Scores = {}
    for t in trajectories:
        for key, fb in current(t.feedback).items():
            number = as_number(fb.value)
            if fb.versus or number is None:
                continue
            value = fb.value if isinstance(fb.value, bool) else number
            out.setdefault(key, {}).setdefault(t.task.hash(), []).append(value)
    return out


def _p_value(d: np.ndarray, reps: np.ndarray, boolean: bool, single: bool,
             xa: np.ndarray, xb: np.ndarray) -> tuple[float, bool, JudgeMethod, tuple[int, int] | None]:
    """(p, upper bound, method, discordant) of the per-task differences ``d``."""
    if boolean and single:
        a_only = int(np.sum((xa == 1) & (xb == 0)))
        b_only = int(np.sum((xa == 0) & (xb == 1)))
        test = mcnemar(a_only, b_only)
        method: JudgeMethod = "mcnemar-exact" if test.method == "exact-binomial" else "mcnemar-chi2"
        return test.p_value, False, method, (a_only, b_only)
    if boolean:
        p, bound = percentile_p_value(reps, len(d))
        return p, bound, "paired-bootstrap", None
    if not np.any(d != 0):
        return 1.0, False, "wilcoxon-pratt", None
    from scipy.stats import wilcoxon

    with warnings.catch_warnings():  # few tasks: scipy warns that the normal approximation is rough
        warnings.simplefilter("ignore")
        res = wilcoxon(d, zero_method="pratt")
    p = float(res.pvalue)
    return (1.0 if np.isnan(p) else p), False, "wilcoxon-pratt", None


def compare_scores(a: Scores, b: Scores, rng: np.random.Generator, *, run_a: str, run_b: str,
                   label_a: str = "A", label_b: str = "B", level: float = 0.95,
                   n_boot: int = DEFAULT_REPS) -> list[JudgeComparison]:
    """Every (judge, criterion) scored in both ``a`` and ``b`` (see the module doc), sorted by
    judge and criterion. A criterion yes/no in one run and graded in the other is graded."""
    out = []
    for key in sorted(set(a) & set(b)):
        ta, tb = a[key], b[key]
        common = sorted(set(ta) & set(tb))
        boolean = all(isinstance(v, bool) for tasks in (ta, tb) for vs in tasks.values()
                      for v in vs)
        cmp = JudgeComparison(label_a=label_a, label_b=label_b, run_a=run_a, run_b=run_b,
                              author=key[0], name=key[1], boolean=boolean,
                              matched_tasks=len(common), only_a=len(set(ta) - set(tb)),
                              only_b=len(set(tb) - set(ta)))
        if not common:
            out.append(cmp)
            continue
        xa = np.array([np.mean([float(v) for v in ta[h]]) for h in common])
        xb = np.array([np.mean([float(v) for v in tb[h]]) for h in common])
        d = xb - xa
        update: dict[str, object] = {"mean_a": float(xa.mean()), "mean_b": float(xb.mean()),
                                     "difference": float(d.mean()),
                                     "zero_differences": int(np.sum(d == 0))}
        if len(common) >= 2:  # one task: no spread, no interval, no test
            reps = bootstrap_ratio(d, np.ones_like(d), n_boot, rng)[:, 0]
            lo, hi = percentile_interval(reps, level, len(common))
            single = all(len(ta[h]) == 1 and len(tb[h]) == 1 for h in common)
            p, bound, method, disc = _p_value(d, reps, boolean, single, xa, xb)
            update |= {"ci": Interval(low=lo, high=hi, level=level,
                                      method="bootstrap-percentile"),
                       "p_value": p, "p_upper_bound": bound, "method": method,
                       "discordant": disc}
        out.append(cmp.model_copy(update=update))
    return out
