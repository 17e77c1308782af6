"""Induced metrics judged as traits, and AutoLibra's meta-metrics over them: coverage and
redundancy (:mod:`sharpen.diagnose.induce` builds the metrics).

A **trait** is one metric's non-neutral rating of one trajectory: the judge rates every metric
on every annotated trajectory ``1`` (the agent did this well), ``-1`` (it did it badly) or
``0`` (does not apply); the ``1`` and ``-1`` ratings are the traits.

An **aspect** (a point of a person's note, with its sign) is *matched* by a trait when the trait
is on the aspect's trajectory, of the aspect's metric, and of the aspect's sign (a positive
aspect by a ``1``, a negative one by a ``-1``). The aspect's metric is the one whose cluster it
was put in when the metrics were induced: that assignment stands for AutoLibra's model-chosen
match of an aspect to "the trait it is about" (one model call per aspect there; none here), so
an aspect is matched by at most one trait, as in AutoLibra.

- **coverage** = matched aspects / aspects — how much of what people said the metric set,
  as judged, captures. Aspects on a trajectory the judge gave no verdict on are left out (the
  judge's failure is not the metrics'), and counted apart.
- **redundancy** = traits matched by no aspect / traits — what the judge found that nobody
  asked for. AutoLibra's code divides by every (trajectory, metric) rating, neutral ones
  included; here only traits count, so that a metric that rarely applies does not look less
  redundant for it.

Both are ``None`` when their denominator is 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from sharpen.core.trajectory import Trajectory
from sharpen.judges.base import JudgeError
from sharpen.judges.pointwise import RubricJudge
from sharpen.judges.rubric import Rubric
from sharpen.models.base import ChatModel

Rating = Literal[-1, 0, 1]


class Aspect(BaseModel):
    """One point of a person's note, grounded in what the agent did."""

    note: int
    """Index of the note it came from (in :attr:`Induction.notes`)."""
    trajectory_id: str
    behaviour: str
    """What the agent did (the model's words, citing steps as ``[S0]`` where it could)."""
    feedback: str
    """What the person said about it."""
    sign: Literal[-1, 1]
    """``1`` the person liked it, ``-1`` not."""
    step: int | None = None
    """The step it is about: the first step the behaviour cites, else the note's own step."""
    metric: str | None = None
    """The metric its cluster became (set by the induction)."""


class Trait(BaseModel):
    """The judge's rating of one metric on one trajectory (a trait unless it is 0)."""

    trajectory_id: str
    metric: str
    rating: Rating
    explanation: str = ""


class MetaEval(BaseModel):
    """Coverage and redundancy of a metric set (see the module doc)."""

    aspects: int
    """Aspects on trajectories with a verdict (the coverage denominator)."""
    matched: int
    traits: int
    """Ratings of 1 or -1 (the redundancy denominator)."""
    unmatched_traits: int
    coverage: float | None
    redundancy: float | None
    unjudged_aspects: int
    """Aspects left out: their trajectory got no verdict from the judge."""
    uncovered: list[int]
    """Indexes (in the induction's aspects) of the aspects no trait matched."""


async def judge_traits(rubric: Rubric, trajectories: Sequence[Trajectory], model: ChatModel,
                       token_budget: int = 400,
                       params: dict[str, object] | None = None) -> tuple[list[Trait], list[str]]:
    """Every criterion of ``rubric`` rated on each trajectory by the ``rubric`` judge (one call
    per trajectory, all metrics at once, as AutoLibra does): ``(ratings, errors)`` — every
    rating, neutral ones included, and one message per trajectory the judge gave no verdict
    on (its trajectory id first)."""
    judge = RubricJudge(rubric, token_budget=token_budget, params=dict(params or {}))
    ratings: list[Trait] = []
    errors: list[str] = []
    for t in trajectories:
        try:
            records = await judge.judge(t, model)
        except JudgeError as exc:
            errors.append(f"{t.id}: {exc}")
            continue
        for fb in records:
            value = fb.value
            rating: Rating = 1 if value == 1 else -1 if value == -1 else 0
            ratings.append(Trait(trajectory_id=t.id, metric=fb.name, rating=rating,
                                 explanation=fb.rationale))
    return ratings, errors


def meta_evaluate(aspects: Sequence[Aspect], ratings: Sequence[Trait],
                  judged: set[str] | None = None) -> MetaEval:
    """Coverage and redundancy of ``ratings`` against ``aspects`` (see the module doc).
    ``judged``: the trajectories the judge gave a verdict on (default: those with a rating)."""
    seen = judged if judged is not None else {r.trajectory_id for r in ratings}
    traits = {(r.trajectory_id, r.metric, r.rating) for r in ratings if r.rating != 0}
    asked = {(a.trajectory_id, a.metric, a.sign) for a in aspects}
    counted = [(i, a) for i, a in enumerate(aspects) if a.trajectory_id in seen]
    uncovered = [i for i, a in counted if (a.trajectory_id, a.metric, a.sign) not in traits]
    unmatched = len(traits - asked)
    return MetaEval(
        aspects=len(counted), matched=len(counted) - len(uncovered), traits=len(traits),
        unmatched_traits=unmatched,
        coverage=(len(counted) - len(uncovered)) / len(counted) if counted else None,
        redundancy=unmatched / len(traits) if traits else None,
        unjudged_aspects=len(aspects) - len(counted), uncovered=uncovered)
