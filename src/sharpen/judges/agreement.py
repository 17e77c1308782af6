"""Judge–human agreement: a judge's scores beside people's annotations of the same criterion.

A person annotates a trajectory in the viewer with a name (``solved``, ``clarity``) and a
value; a judge scores the same name. :func:`human_agreement` pairs the newest current judge
record with the newest current human record per (trajectory, criterion) — steps included, a
record on a step counts for its trajectory — and measures their agreement with
:func:`sharpen.stats.agreement.agreement`: Cohen's κ (quadratic-weighted for graded scales),
Krippendorff's α and Spearman's ρ, with BCa intervals by the bootstrap over tasks.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from sharpen.core.trajectory import Trajectory
from sharpen.stats.agreement import Agreement, Scale, agreement
from sharpen.stats.judged import current


class CriterionAgreement(BaseModel):
    """One judge against people on one criterion."""

    judge: str
    """The judge (feedback author)."""
    criterion: str
    scale: Scale
    """How the values were compared (``nominal`` for yes/no and labels, ``ordinal`` for
    integer grades)."""
    stats: Agreement


def _scale(values: list[object]) -> Scale:
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return "ordinal" if numbers and len(numbers) == len(values) else "nominal"


def _label(v: object) -> object:
    """Bools and whole numbers compared as such (a person's ``4`` equals a judge's ``4.0``)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no"):
        return v.strip().lower() in ("true", "yes")
    return v


def human_agreement(trajectories: Iterable[Trajectory], criterion: str | None = None, *,
                    n_boot: int = 2000, seed: int = 0) -> list[CriterionAgreement]:
    """Agreement per (judge, criterion) over ``trajectories`` that carry both a judge record
    and a human record of that name (``criterion`` restricts to one name)."""
    pairs: dict[tuple[str, str], list[tuple[object, object, str]]] = {}
    for t in trajectories:
        humans = {name: fb for (_, name), fb in sorted(
            current(t.feedback, "human").items(), key=lambda kv: kv[1].created_at)}
        for (author, name), fb in current(t.feedback, "judge").items():
            if fb.versus or name not in humans or (criterion and name != criterion):
                continue
            pairs.setdefault((author, name), []).append(
                (_label(fb.value), _label(humans[name].value), t.task.hash()))
    out = []
    for (author, name), rows in sorted(pairs.items()):
        judge, human, tasks = zip(*rows, strict=True)
        scale = _scale([*judge, *human])
        stats = agreement(list(judge), list(human), scale=scale, n_boot=n_boot, seed=seed,
                          clusters=list(tasks))
        out.append(CriterionAgreement(judge=author, criterion=name, scale=scale, stats=stats))
    return out
