"""Read-only pages: runs, run, trajectory, and the two comparisons."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from markupsafe import Markup

from sharpen.core.errors import UserError
from sharpen.core.trajectory import TRIAL
from sharpen.envs.generation import parse_split
from sharpen.stats.compare import ComparisonReport, compare_stored
from sharpen.stats.intervals import wilson_interval
from sharpen.store import browse
from sharpen.store.records import RUN_STATUSES, RunRecord
from sharpen.store.store import Store
from sharpen.train.export import FORMATS, FeedbackCondition, Where, export
from sharpen.viewer import svg
from sharpen.viewer.app import render
from sharpen.viewer.judged import run_judges, side_by_side
from sharpen.viewer.steps import feedback_threads, mark_trials, step_view
from sharpen.viewer.twins import wants_json

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


def run_matches(rec: RunRecord, query: str) -> bool:
    """Whether the runs page's search ``query`` finds ``rec``: a prefix of its id, or a
    substring (any case) of its environment, agent name, model, or one of its labels
    (``manifest.extra``, as ``key=value`` too: ``role=test``)."""
    q = query.strip().lower()
    if not q or rec.id.startswith(q):
        return True
    labels = [f"{k}={v}" for k, v in rec.manifest.extra.items() if isinstance(v, str | int | float)]
    return any(q in text.lower() for text in (rec.env, rec.agent_name, rec.model_label, *labels))


@router.get("/", response_class=HTMLResponse)
@router.get("/runs.json")
def runs_page(request: Request, env: str = "", model: str = "", status: str = "",
              sort: str = "created", order: str = "desc", q: str = "") -> Response:
    store = _store(request)
    sort = sort if sort in RUN_SORTS else "created"
    narrowed = bool(model or q.strip())
    rows = store.list_runs(None if narrowed or sort != "created" else RUNS_SHOWN, env=env or None,
                           status=status or None)
    if model:  # a substring of the model as shown
        rows = [r for r in rows if model.lower() in r.model_label.lower()]
    if q.strip():
        rows = [r for r in rows if run_matches(r, q)]
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
    ctx = {"rows": rows, "env": env, "model": model, "status": status, "sort": sort, "q": q,
           "order": order, "envs": envs, "statuses": RUN_STATUSES, "sorts": list(RUN_SORTS),
           "cost_plot": Markup(cost_plot), "curve": Markup(curve)}
    return render(request, "runs.html", ctx)


@router.get("/runs/{run_ref}", response_class=HTMLResponse)
@router.get("/runs/{run_ref}.json")
def run_page(request: Request, run_ref: str, failed: str = "", error_kind: str = "",
             source: str = "", q: str = "", page: str = "1") -> Response:
    """One run. While its status is ``running`` the task table polls itself (HTMX, every
    ``poll_seconds``) and the polled answer carries the status, so polling stops with the run."""
    store = _store(request)
    run_id = store.resolve_run(run_ref)
    result = browse.run_page(store, run_id, failed=bool(failed), error_kind=error_kind or None,
                             source=source or None, search=q.strip() or None, page=_page(page),
                             per_page=request.app.state.per_page)
    filters = {"failed": failed, "error_kind": error_kind, "source": source, "q": q}
    rec = store.get_run(run_id)
    query = {k: v for k, v in filters.items() if v}
    if _page(page) > 1:
        query["page"] = str(_page(page))
    ctx: dict[str, Any] = {"run_id": run_id, "result": result, "filters": filters, "rec": rec,
                           "status": rec.status, "query": query,
                           "poll_ms": int(1000 * request.app.state.poll_seconds)}
    if _is_htmx(request) and not wants_json(request):  # the header's status swapped out of band
        return render(request, "_run_tasks.html", {**ctx, "oob": True})
    diff = browse.success_by_difficulty(store, run_id)
    order = {"easy": 0, "medium": 1, "hard": 2}
    diff.sort(key=lambda d: (order.get(d[0], 9), d[0]))
    items = [(label, s / n, *wilson_interval(s, n)) for label, s, n in diff if n]
    ctx.update(manifest=rec.manifest, agent=rec.agent,
               sources=browse.feedback_sources(store, run_id), error_kinds=ERROR_KINDS,
               diff_plot=Markup(svg.bars("success by difficulty", items) if items else ""),
               search_limit=browse.SEARCH_LIMIT, formats=FORMATS, judges=run_judges(store, run_id))
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
@router.get("/t/{trajectory_id}.json")
def trajectory_page(request: Request, trajectory_id: str, page: str = "1") -> Response:
    store = _store(request)
    tp = browse.trajectory_page(store, trajectory_id, page=_page(page),
                                per_page=request.app.state.per_page)
    if tp is None:
        raise HTTPException(404, f"no trajectory {trajectory_id}")
    threads = feedback_threads(tp.feedback)
    steps = [step_view(s, threads.get(s.index, [])) for s in tp.steps]
    last_prompt = tp.prompt
    if tp.page > 1 and any(TRIAL in s.info for s in tp.steps):  # the stored prompt is read on page 1 only
        first = browse.trajectory_page(store, trajectory_id, page=1, per_page=1)
        last_prompt = first.prompt if first else []
    trials = mark_trials(steps, last_prompt)
    ctx = {"tp": tp, "steps": steps, "traj_threads": threads.get(None, []), "trials": trials,
           "author": request.cookies.get("sharpen_author", ""),
           "judged": side_by_side(store.feedback_for(trajectory_id))}
    return render(request, "trajectory.html", ctx)


@router.get("/compare", response_class=HTMLResponse)
@router.get("/compare.json")
def compare_page(request: Request, a: str = "", b: str = "", changed: str = "") -> Response:
    """A against B: the paired verdict exactly as ``sharpen compare A B --json`` computes it
    (:func:`compare_stored` with the CLI's defaults), token and cost deltas, a warning per
    unfinished run, then the shared tasks (``changed=1``: only those whose success changed)."""
    store = _store(request)
    runs = store.list_runs(500)
    ctx: dict[str, Any] = {"runs": runs, "a": a, "b": b, "deltas": None, "changed": changed}
    if a and b:
        ra, rb = store.resolve_run(a), store.resolve_run(b)
        report = compare_stored([(store, ra), (store, rb)])
        records = [store.get_run(ra), store.get_run(rb)]
        unfinished = [f"{label} ({r.id}) is {r.status}, not finished: its numbers may change"
                      for label, r in zip("AB", records, strict=True) if r.status != "finished"]
        # Regressions (B worse than A) first, then unchanged, then improvements.
        deltas = sorted(browse.paired_tasks(store, ra, rb),
                        key=lambda d: (d.delta if d.delta is not None else 0.0, d.task.id))
        n_shared = len(deltas)
        n_worse = sum(1 for d in deltas if (d.delta or 0) < 0)
        n_better = sum(1 for d in deltas if (d.delta or 0) > 0)
        if changed:
            deltas = [d for d in deltas if d.delta]
        ctx.update(a=ra, b=rb, deltas=deltas, n_shared=n_shared, n_worse=n_worse, n_better=n_better,
                   report=report, comparison=report.comparisons[0], unfinished=unfinished,
                   spend=spend_deltas(report))
    return render(request, "compare.html", ctx)


def spend_deltas(report: ComparisonReport) -> list[dict[str, Any]]:
    """B − A of what the two runs spent, one row per measure (``None`` where either is unknown)."""
    ca, cb = report.runs[0].cost, report.runs[1].cost

    def row(name: str, a: float | None, b: float | None, unit: str) -> dict[str, Any]:
        delta = None if a is None or b is None else b - a
        ratio = None if delta is None or not a else delta / a
        return {"name": name, "a": a, "b": b, "delta": delta, "relative": ratio, "unit": unit}

    return [row("tokens", ca.input_tokens + ca.output_tokens, cb.input_tokens + cb.output_tokens, "tokens"),
            row("tokens / task", ca.tokens_per_task, cb.tokens_per_task, "tokens"),
            row("cost", ca.cost_usd, cb.cost_usd, "usd"),
            row("cost / task", ca.cost_per_task, cb.cost_per_task, "usd")]


@router.get("/compare/t", response_class=HTMLResponse)
@router.get("/compare/t.json")
def compare_trajectories(request: Request, a: str, b: str) -> Response:
    store = _store(request)
    pages = []
    for tid in (a, b):
        tp = browse.trajectory_page(store, tid, per_page=request.app.state.per_page)
        if tp is None:
            raise HTTPException(404, f"no trajectory {tid}")
        threads = feedback_threads(tp.feedback)
        pages.append((tp, [step_view(s, threads.get(s.index, [])) for s in tp.steps]))
    same_task = pages[0][0].task.hash() == pages[1][0].task.hash()
    return render(request, "compare_t.html", {"pages": pages, "same_task": same_task})
