"""A run's diagnosis in the viewer: what each detector found — among failed and among solved
attempts, with 95% Wilson intervals, a chart of the failed-attempt rates and example
trajectories — the stage funnel and its success predictor, the failure taxonomy and the
decisive steps ``sharpen attribute`` stored, as ``sharpen diagnose RUN`` prints them.

The page computes the diagnosis with :func:`sharpen.diagnose.run.diagnose_run` and
``save=False``: it reads the run and writes nothing (storing findings is the command's job),
so the page and the command cannot disagree.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup

from sharpen.diagnose.base import detector_info
from sharpen.diagnose.run import BUILTIN, Diagnosis, build_detectors, diagnose_run
from sharpen.store.store import Store
from sharpen.viewer import svg
from sharpen.viewer.app import render

router = APIRouter()


def _store(request: Request) -> Store:
    return request.app.state.store


@router.get("/runs/{run_ref}/diagnose", response_class=HTMLResponse)
@router.get("/runs/{run_ref}/diagnose.json")
def diagnose_page(request: Request, run_ref: str, detector: str = "") -> Response:
    """The run diagnosed by every built-in detector (``detector``: only that one)."""
    store = _store(request)
    run_id = store.resolve_run(run_ref)
    names = [detector.strip()] if detector.strip() else None
    built = build_detectors(names)
    d = diagnose_run(store, run_id, names, save=False)
    info = {ref.name: detector_info(det) for ref, det in built}
    items = [(s.detector.name, s.failed.rate, s.failed.ci.low, s.failed.ci.high)
             for s in d.detectors if s.failed.rate is not None]
    plot = svg.bars("failed attempts with a finding", items, y_label="share of failed") if items else ""
    ctx = {"run_id": run_id, "d": d, "info": info, "plot": Markup(plot), "builtin": BUILTIN,
           "detector": detector.strip(), "stage_plot": Markup(_funnel(d)),
           "decisive_plot": Markup(_decisive(d))}
    return render(request, "diagnose.html", ctx)


def _funnel(d: Diagnosis) -> str:
    """The stage funnel: per stage, the shares of failed (F) and solved (S) attempts that
    reached it, with their intervals."""
    if d.stages is None:
        return ""
    items = [(f"{s.stage} {tag}", rate, ci.low, ci.high)
             for s in d.stages.summaries
             for tag, rate, ci in (("F", s.reached_failed, s.reached_failed_ci),
                                   ("S", s.reached_solved, s.reached_solved_ci))
             if rate is not None]
    return svg.bars("attempts reaching each stage", items, y_label="share reaching") if items else ""


def _decisive(d: Diagnosis) -> str:
    """The decisive steps by step index, as shares of the attributed trajectories (no
    interval: it is a histogram, not an estimate)."""
    if d.decisive is None:
        return ""
    n = d.decisive.trajectories
    items = [(f"step {k}", c / n, c / n, c / n) for k, c in d.decisive.by_step.items()]
    return svg.bars("decisive steps", items, y_label="share of attributed")
