"""Training pages: the folders ``sharpen train`` left — what was trained how, its curves,
the guard's record of which tasks reached the method, the lineage, the held-out verdict and
the runs it stored."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup

from sharpen.store.records import RunRecord
from sharpen.store.store import Store
from sharpen.train.folder import TrainingFolder, find_training, list_trainings
from sharpen.train.method import TrainEvent
from sharpen.viewer import svg
from sharpen.viewer.app import render

router = APIRouter()

CURVES = {"loss": "training loss", "reward": "mean reward of the step's samples"}
"""The curves drawn for every training (when it reported two points of them), beside each of
the methods' own ``metrics`` (``val_success``, ``kl``, ...)."""


def _base(request: Request) -> Path:
    return request.app.state.train_dir


def curves(events: list[TrainEvent]) -> list[Markup]:
    """One SVG line per measure the events carry at two or more steps: loss, reward, then each
    method metric, against optimiser steps."""
    series: dict[str, list[tuple[float, float]]] = {name: [] for name in CURVES}
    for e in events:
        for name, value in (("loss", e.loss), ("reward", e.reward), *sorted(e.metrics.items())):
            if value is not None:
                series.setdefault(name, []).append((float(e.step), float(value)))
    return [Markup(svg.curve(CURVES.get(name, name), points, "step", name))
            for name, points in series.items() if len(points) >= 2]


def training_runs(store: Store, training_id: str) -> list[RunRecord]:
    """The store's runs this training made (its rollouts and the test runs of its verdict),
    oldest first: those labelled with its id."""
    return sorted((r for r in store.list_runs(limit=None)
                   if r.manifest.extra.get("train") == training_id),
                  key=lambda r: (r.created_at, r.id))


def leaked(t: TrainingFolder) -> list[str]:
    """Test tasks that reached the method (the engine's guard makes this empty)."""
    if t.report is None:
        return []
    return sorted(set(t.seen_tasks) & set(t.report.test_tasks))


@router.get("/train", response_class=HTMLResponse)
@router.get("/train.json")
def trainings_page(request: Request) -> Response:
    return render(request, "train_list.html", {"rows": list_trainings(_base(request)),
                                               "base": _base(request)})


@router.get("/train/{ref}", response_class=HTMLResponse)
@router.get("/train/{ref}.json")
def training_page(request: Request, ref: str) -> Response:
    t = find_training(_base(request), ref)
    return render(request, "train.html", {
        "t": t, "cfg": t.definition, "report": t.report, "events": t.events,
        "curves": curves(t.events), "runs": training_runs(request.app.state.store, t.id),
        "leaked": leaked(t)})
