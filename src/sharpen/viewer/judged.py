"""Judges in the viewer: a judgement's own page (the judge's model calls), judge–human
agreement per criterion, a run's judge scores, and a trajectory's judge scores beside
people's annotations of the same criteria.

Every number comes from the functions ``sharpen report`` and ``sharpen agreement`` use
(:func:`sharpen.stats.judged.judge_scores`, :func:`sharpen.judges.agreement.human_agreement`),
so the pages and the CLI cannot disagree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from sharpen.core.feedback import Feedback, FeedbackSource
from sharpen.core.judgement import Judgement
from sharpen.judges.agreement import human_agreement
from sharpen.stats.judged import CriterionScore, judge_scores
from sharpen.stats.rounding import interval_text
from sharpen.store import browse
from sharpen.store.store import Store
from sharpen.viewer.app import render

router = APIRouter()
FAILED_SHOWN = 20
"""Failed judgements a run page links by name (the count covers all of them)."""


def _store(request: Request) -> Store:
    return request.app.state.store


def latest(records: list[Feedback], source: FeedbackSource) -> list[Feedback]:
    """The current records of ``source``: per (author, name, other trajectory) the newest one
    no later record supersedes, oldest first. Unlike
    :func:`sharpen.stats.judged.current`, pairwise records against different trajectories
    are kept apart."""
    replaced = {f.supersedes for f in records if f.supersedes}
    out: dict[tuple[str, str, str], Feedback] = {}
    for f in sorted(records, key=lambda f: f.created_at):
        if f.source == source and f.id not in replaced:
            out[(f.author, f.name, f.versus or "")] = f
    return sorted(out.values(), key=lambda f: f.created_at)


@dataclass
class CriterionRow:
    """One criterion on a trajectory: what the judges said and what people said."""

    name: str
    judges: list[Feedback]
    humans: list[Feedback]


def side_by_side(records: list[Feedback]) -> list[CriterionRow]:
    """A row per criterion some judge scored (sorted by name), with the people's current
    annotations of that name — on the trajectory or on any of its steps, as
    :func:`~sharpen.judges.agreement.human_agreement` pairs them."""
    judges = latest(records, "judge")
    humans = latest(records, "human")
    return [CriterionRow(name=name, judges=[f for f in judges if f.name == name],
                         humans=[f for f in humans if f.name == name])
            for name in sorted({f.name for f in judges})]


@dataclass
class ScoreRow:
    """A run's score on one criterion by one judge, as the run page shows it."""

    score: CriterionScore
    mean: str
    ci: str
    annotated: bool
    """Whether people annotated this criterion in the run (its agreement page has rows)."""


def score_cells(c: CriterionScore) -> tuple[str, str]:
    """``(mean, interval)`` as ``sharpen report`` writes them (``judge_rows``): rates and
    preference shares in percent with the interval rounded outward, graded scales to two
    decimals."""
    if c.mean is None:
        return "—", "—"
    if c.boolean or c.pairwise:
        return f"{c.mean:.1%}", "—" if c.ci is None else interval_text(c.ci.low, c.ci.high)
    return f"{c.mean:.2f}", "—" if c.ci is None else f"[{c.ci.low:.2f}, {c.ci.high:.2f}]"


@dataclass
class RunJudges:
    """What judges made of a run: scores per criterion and the judgements that failed."""

    rows: list[ScoreRow]
    judgements: int
    """Judgements stored for the run (each judge's work on one trajectory or pair)."""
    errors: dict[str, int]
    """Failed judgements per judge (error kind ``judge``: never held against the agent)."""
    failed: list[Judgement] = field(default_factory=list)
    """The first :data:`FAILED_SHOWN` failed judgements, oldest first."""


def run_judges(store: Store, run_id: str) -> RunJudges | None:
    """The run's judge scores and judge errors; ``None`` when no judge looked at it."""
    judgements = store.judgements(run_id)
    if not judgements and not store.has_feedback(run_id, "judge"):
        return None
    rows: list[ScoreRow] = []
    if store.has_feedback(run_id, "judge"):
        trajectories = list(store.iter_trajectories(run_id, with_steps=False))
        annotated = {f.name for t in trajectories for f in t.feedback if f.source == "human"}
        for c in judge_scores(trajectories):
            mean, ci = score_cells(c)
            rows.append(ScoreRow(score=c, mean=mean, ci=ci,
                                 annotated=not c.pairwise and c.name in annotated))
    failed = [j for j in judgements if j.status == "error"]
    return RunJudges(rows=rows, judgements=len(judgements),
                     errors=dict(sorted(Counter(j.judge for j in failed).items())),
                     failed=failed[:FAILED_SHOWN])


@router.get("/runs/{run_ref}/agreement", response_class=HTMLResponse)
@router.get("/runs/{run_ref}/agreement.json")
def agreement_page(request: Request, run_ref: str, criterion: str = "") -> Response:
    """Each judge against people on each criterion (``criterion``: one of them) over the
    run's trajectories: κ, α and ρ with 95% intervals, n, and the confusion matrix — what
    ``sharpen agreement RUN [--criterion C]`` prints."""
    store = _store(request)
    run_id = store.resolve_run(run_ref)
    trajectories = list(store.iter_trajectories(run_id, with_steps=False))
    found = human_agreement(trajectories, criterion.strip() or None)
    records = [f for t in trajectories for f in t.feedback]
    ctx: dict[str, Any] = {
        "run_id": run_id, "criterion": criterion.strip(), "found": found,
        "judged": sorted({f.name for f in records if f.source == "judge" and not f.versus}),
        "annotated": sorted({f.name for f in records if f.source == "human"})}
    return render(request, "agreement.html", ctx)


@router.get("/judgements/{judgement_id}", response_class=HTMLResponse)
@router.get("/judgements/{judgement_id}.json")
def judgement_page(request: Request, judgement_id: str) -> Response:
    """One judgement: the judge, its model, status and error, usage, detail, the feedback it
    gave (citations linked to the steps), and every model call — prompt and reply."""
    store = _store(request)
    j = store.get_judgement(judgement_id)
    if j is None:
        raise HTTPException(404, f"no judgement {judgement_id}")
    head = browse.trajectory_page(store, j.trajectory_id, per_page=1, prompt=False)
    records = [f for f in store.feedback_for(j.trajectory_id) if f.call_id == j.id]
    ctx = {"j": j, "records": records, "n_steps": head.n_steps if head else 0,
           "task": head.task.id if head else None, "per_page": request.app.state.per_page}
    return render(request, "judgement.html", ctx)
