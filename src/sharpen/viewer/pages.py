"""Read-only pages: runs, run, trajectory, and the two comparisons."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from markupsafe import Markup

from sharpen.core.errors import UserError
from sharpen.envs.generation import parse_split
from sharpen.stats.intervals import wilson_interval
from sharpen.store import browse
from sharpen.store.records import RUN_STATUSES, RunRecord
from sharpen.store.store import Store
from sharpen.train.export import FORMATS, FeedbackCondition, Where, export
from sharpen.viewer import svg
from sharpen.viewer.app import render
from sharpen.viewer.steps import feedback_threads, step_view

router = APIRouter()
ERROR_KINDS = ("none", "agent", "env", "infra", "judge", "user_sim")
OUTCOMES = {"": None, "success": True, "failure": False}
"""The export form's outcome filter: value -> ``Where.success``."""
RUNS_SHOWN = 200
"""Runs on the runs page (the first ones in the chosen order)."""
RUN_SORTS: dict[str, Callable[[RunRecord], Any]] = {
    "created": lambda r: (r.created_at, r.id),
    "success": lambda r: r.success_rate if r.success_rate is not None else -1.0,
    "cost": lambda r: r.cost_usd if r.cost_usd is not None else float("inf"),
    "env": lambda r: r.env,
    "model": lambda r: r.model_label,
    "status": lambda r: r.status,
}
"""The runs page's sort keys (no rate sorts below any rate; an unknown cost above every cost)."""


def _store(request: Request) -> Store:
    return request.app.state.store


def _page(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


def _is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


@router.get("/", response_class=HTMLResponse)
def runs_page(request: Request, env: str = "", model: str = "", status: str = "",
              sort: str = "created", order: str = "desc") -> HTMLResponse:
    store = _store(request)
    sort = sort if sort in RUN_SORTS else "created"
    rows = store.list_runs(None if model or sort != "created" else RUNS_SHOWN, env=env or None,
                           status=status or None)
    if model:  # a substring of the model as shown
        rows = [r for r in rows if model.lower() in r.model_label.lower()]
    if sort == "created":
        rows = rows[:RUNS_SHOWN]  # the newest ones, in either order
    rows = sorted(rows, key=RUN_SORTS[sort], reverse=order != "asc")[:RUNS_SHOWN]
    envs = sorted({r.env for r in rows} | ({env} if env else set()))
    points = [(r.agent_name, r.cost_usd, r.success_rate) for r in rows
              if r.cost_usd is not None and r.success_rate is not None]
    cost_plot = svg.scatter("cost vs accuracy", points, "total cost (USD)") if len(points) > 1 else ""
    by_hash = {r.agent_hash: r for r in rows}
    lineage = [r for r in rows if r.success_rate is not None and (
        any(p in by_hash for p in r.agent.parents) or any(r.agent_hash in o.agent.parents for o in rows))]
    lineage.sort(key=lambda r: r.created_at)
    curve = ""
    if len(lineage) > 1:
        curve = svg.scatter("improvement over generations",
                            [(r.agent_name, float(i), r.success_rate or 0.0)
                             for i, r in enumerate(lineage)], "generation (run order)", line=True)
    ctx = {"rows": rows, "env": env, "model": model, "status": status, "sort": sort,
           "order": order, "envs": envs, "statuses": RUN_STATUSES, "sorts": list(RUN_SORTS),
           "cost_plot": Markup(cost_plot), "curve": Markup(curve)}
    return render(request, "runs.html", ctx)


@router.get("/runs/{run_ref}", response_class=HTMLResponse)
def run_page(request: Request, run_ref: str, failed: str = "", error_kind: str = "",
             source: str = "", q: str = "", page: str = "1") -> HTMLResponse:
    store = _store(request)
    run_id = store.resolve_run(run_ref)
    result = browse.run_page(store, run_id, failed=bool(failed), error_kind=error_kind or None,
                             source=source or None, search=q.strip() or None, page=_page(page),
                             per_page=request.app.state.per_page)
    filters = {"failed": failed, "error_kind": error_kind, "source": source, "q": q}
    ctx: dict[str, Any] = {"run_id": run_id, "result": result, "filters": filters,
                           "query": {k: v for k, v in filters.items() if v}}
    if _is_htmx(request):
        return render(request, "_run_tasks.html", ctx)
    diff = browse.success_by_difficulty(store, run_id)
    order = {"easy": 0, "medium": 1, "hard": 2}
    diff.sort(key=lambda d: (order.get(d[0], 9), d[0]))
    items = [(label, s / n, *wilson_interval(s, n)) for label, s, n in diff if n]
    rec = store.get_run(run_id)
    ctx.update(manifest=rec.manifest, agent=rec.agent, status=rec.status, rec=rec,
               sources=browse.feedback_sources(store, run_id), error_kinds=ERROR_KINDS,
               diff_plot=Markup(svg.bars("success by difficulty", items) if items else ""),
               search_limit=browse.SEARCH_LIMIT, formats=FORMATS)
    return render(request, "run.html", ctx)


@router.get("/runs/{run_ref}/export")
def run_export(request: Request, run_ref: str, format: str = "sft", outcome: str = "",
               split: str = "", feedback: str = "") -> Response:
    """The run as a download in one of :data:`sharpen.train.export.FORMATS`, filtered like
    ``sharpen export RUN --success|--failure --split S --feedback COND``."""
    try:
        if outcome not in OUTCOMES:
            raise UserError(f"unknown outcome filter {outcome!r}", "choose any, success or failure")
        where = Where(success=OUTCOMES[outcome], split=parse_split(split or None),
                      feedback=[FeedbackCondition.parse(feedback)] if feedback.strip() else [])
        lines, count = export(_store(request), [run_ref], format, where)
    except UserError as exc:
        return render(request, "error.html", {"message": exc.message, "fix": exc.fix}, status=400)

    def body() -> Iterator[str]:
        for line in lines:
            yield json.dumps(line, ensure_ascii=False) + "\n"

    name = f"{count.runs[0][:12]}-{format}.jsonl"
    return StreamingResponse(body(), media_type="application/x-ndjson",
                             headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.get("/t/{trajectory_id}", response_class=HTMLResponse)
def trajectory_page(request: Request, trajectory_id: str, page: str = "1") -> HTMLResponse:
    store = _store(request)
    tp = browse.trajectory_page(store, trajectory_id, page=_page(page),
                                per_page=request.app.state.per_page)
    if tp is None:
        raise HTTPException(404, f"no trajectory {trajectory_id}")
    threads = feedback_threads(tp.feedback)
    steps = [step_view(s, threads.get(s.index, [])) for s in tp.steps]
    ctx = {"tp": tp, "steps": steps, "traj_threads": threads.get(None, []),
           "author": request.cookies.get("sharpen_author", "")}
    return render(request, "trajectory.html", ctx)


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, a: str = "", b: str = "") -> HTMLResponse:
    store = _store(request)
    runs = store.list_runs(500)
    ctx: dict[str, Any] = {"runs": runs, "a": a, "b": b, "deltas": None}
    if a and b:
        ra, rb = store.resolve_run(a), store.resolve_run(b)
        # Regressions (B worse than A) first, then unchanged, then improvements.
        deltas = sorted(browse.paired_tasks(store, ra, rb),
                        key=lambda d: (d.delta if d.delta is not None else 0.0, d.task.id))
        ctx.update(a=ra, b=rb, deltas=deltas,
                   n_worse=sum(1 for d in deltas if (d.delta or 0) < 0),
                   n_better=sum(1 for d in deltas if (d.delta or 0) > 0))
    return render(request, "compare.html", ctx)


@router.get("/compare/t", response_class=HTMLResponse)
def compare_trajectories(request: Request, a: str, b: str) -> HTMLResponse:
    store = _store(request)
    pages = []
    for tid in (a, b):
        tp = browse.trajectory_page(store, tid, per_page=request.app.state.per_page)
        if tp is None:
            raise HTTPException(404, f"no trajectory {tid}")
        threads = feedback_threads(tp.feedback)
        pages.append((tp, [step_view(s, threads.get(s.index, [])) for s in tp.steps]))
    same_task = pages[0][0].task.hash() == pages[1][0].task.hash()
    return render(request, "compare_t.html", {"pages": pages, "same_task": same_task,
                                               "dumps": json.dumps})
