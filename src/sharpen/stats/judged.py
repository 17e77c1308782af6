"""Judge scores of a run, per judge and criterion, with intervals over tasks — what ``sharpen
report`` shows and ``sharpen compare`` pairs.

A trajectory's score on a criterion is the newest record of that name by that judge that no
later record supersedes. Values are read as numbers (``true``/``false`` as 1/0, numbers as
themselves); label values have no mean and are shown as a distribution. The mean is over
tasks (each task's epochs averaged first, as for success), so a task run five times does not
weigh five times; the interval is Student-t on the tasks' spread (Wilson for yes/no scores).
Pairwise records (``versus``) are preference shares and are kept apart (``pairwise=True``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel

from sharpen.core.feedback import Feedback
from sharpen.core.trajectory import Trajectory
from sharpen.stats.clustered import clustered_interval, clustered_mean
from sharpen.stats.intervals import Interval, t_quantile

if TYPE_CHECKING:
    from sharpen.store import Store


class CriterionScore(BaseModel):
    """One judge's scores on one criterion over a run."""

    author: str
    """The judge (its name, version and model: the feedback's author)."""
    name: str
    """The criterion."""
    pairwise: bool = False
    """Preference shares against another run (1 preferred, 0.5 tie, 0 not)."""
    n: int
    """Trajectories scored."""
    n_tasks: int
    """Tasks scored."""
    mean: float | None
    """Mean over tasks; ``None`` for labels."""
    ci: Interval | None
    """95% interval of the mean (``None`` with fewer than two tasks or for labels)."""
    boolean: bool
    """Whether every value is true/false (the mean is then a rate)."""
    counts: dict[str, int]
    """How often each value was given."""


def current(records: Iterable[Feedback], source: str = "judge") -> dict[tuple[str, str], Feedback]:
    """``(author, name) → record``: the newest record of ``source`` per author and name that no
    later record supersedes."""
    records = list(records)
    replaced = {f.supersedes for f in records if f.supersedes}
    out: dict[tuple[str, str], Feedback] = {}
    for f in sorted(records, key=lambda f: f.created_at):
        if f.source == source and f.id not in replaced:
            out[(f.author, f.name)] = f
    return out


def as_number(value: object) -> float | None:
    """A judge value as a number (bool 0/1, a number itself); ``None`` for labels and text."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None


def _shown(value: object) -> str:
    """A value as the counts show it: ``true``, ``4`` (not ``4.0``, as JSON stores it), a label."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def per_task(trajectories: Iterable[Trajectory]) -> dict[tuple[str, str], dict[str, list[Feedback]]]:
    """``(author, name) → task hash → records`` (one per judged trajectory)."""
    out: dict[tuple[str, str], dict[str, list[Feedback]]] = defaultdict(lambda: defaultdict(list))
    for t in trajectories:
        for key, fb in current(t.feedback).items():
            out[key][t.task.hash()].append(fb)
    return out


def judge_scores(trajectories: Iterable[Trajectory]) -> list[CriterionScore]:
    """Every judge's score per criterion over ``trajectories`` (a run's), sorted by judge
    and criterion."""
    out = []
    for (author, name), tasks in sorted(per_task(trajectories).items()):
        records = [fb for fbs in tasks.values() for fb in fbs]
        counts = Counter(_shown(fb.value) for fb in records)
        numbers = {task: [as_number(fb.value) for fb in fbs] for task, fbs in tasks.items()}
        boolean = all(isinstance(fb.value, bool) for fb in records)
        mean: float | None = None
        ci: Interval | None = None
        if all(v is not None for vs in numbers.values() for v in vs):
            means = np.array([np.mean([v for v in vs if v is not None])
                              for vs in numbers.values()])
            est = clustered_mean(means)
            mean = est.mean
            if est.n_clusters >= 2:
                if boolean:
                    ci = clustered_interval(est, proportion=True, max_n=len(records))
                else:
                    half = t_quantile(0.975, est.n_clusters - 1) * est.se
                    ci = Interval(low=est.mean - half, high=est.mean + half,
                                  method="clustered-t")
        out.append(CriterionScore(author=author, name=name,
                                  pairwise=any(fb.versus for fb in records), n=len(records),
                                  n_tasks=len(tasks), mean=mean, ci=ci, boolean=boolean,
                                  counts=dict(counts)))
    return out


def run_scores(store: Store, run_id: str) -> list[CriterionScore]:
    """:func:`judge_scores` of stored run ``run_id`` (empty, without reading its trajectories,
    when no judge scored it)."""
    if not store.has_feedback(run_id, "judge"):
        return []
    return judge_scores(store.iter_trajectories(run_id, with_steps=False))
