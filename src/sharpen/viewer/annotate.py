"""Annotation: human feedback on a trajectory, a step or a span, edits with history, and
the JSONL export of every human record."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from sharpen.core.feedback import Feedback, FeedbackTarget, TargetKind
from sharpen.store import browse
from sharpen.store.store import Store
from sharpen.viewer.app import render
from sharpen.viewer.steps import feedback_threads, step_view

router = APIRouter()
AUTHOR_COOKIE = "sharpen_author"
ANNOTATED_KINDS: tuple[TargetKind, ...] = ("trajectory", "step", "span")
"""The targets a reader may annotate in the viewer (a trajectory, one of its steps, a span)."""


def _int(value: str, what: str) -> int | None:
    value = value.strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise HTTPException(400, f"{what} must be an integer") from None


@router.post("/t/{trajectory_id}/feedback")
def add_feedback(
    request: Request,
    trajectory_id: str,
    kind: str = Form("step"),
    step_index: str = Form(""),
    span_start: str = Form(""),
    span_end: str = Form(""),
    name: str = Form("note"),
    score: str = Form(""),
    text: str = Form(""),
    author: str = Form(""),
    supersedes: str = Form(""),
) -> Response:
    store: Store = request.app.state.store
    per_page = request.app.state.per_page
    head = browse.trajectory_page(store, trajectory_id, per_page=1, prompt=False)
    if head is None:
        raise HTTPException(404, f"no trajectory {trajectory_id}")
    step = _int(step_index, "step_index")
    start, end = _int(span_start, "span_start"), _int(span_end, "span_end")
    target_kind = next((k for k in ANNOTATED_KINDS if k == kind), None)
    if target_kind is None:
        raise HTTPException(400, "kind must be trajectory, step or span")
    if target_kind == "step" and start is not None and end is not None and end > start:
        target_kind = "span"
    if target_kind in ("step", "span") and (step is None or not 0 <= step < max(head.n_steps, 1)):
        raise HTTPException(400, "a step annotation needs a valid step_index")
    if target_kind == "span" and (start is None or end is None or not 0 <= start < end):
        raise HTTPException(400, "a span annotation needs 0 <= span_start < span_end")
    value: float | None = None
    if score.strip():
        try:
            value = float(score)
        except ValueError:
            raise HTTPException(400, "score must be a number") from None
    if value is None and not text.strip():
        raise HTTPException(400, "write a comment or give a score")
    old = None
    if supersedes:
        old = browse.feedback_record(store, supersedes)
        if old is None or old.target.trajectory_id != trajectory_id:
            raise HTTPException(400, "supersedes must name feedback on this trajectory")
    if old is not None:  # an edit keeps the target of the record it replaces
        target = old.target
    else:
        target = FeedbackTarget(
            kind=target_kind, run_id=head.run_id, trajectory_id=trajectory_id,
            step_index=None if target_kind == "trajectory" else step,
            span=(start, end) if target_kind == "span" and start is not None and end is not None else None)
    who = author.strip()[:200] or request.cookies.get(AUTHOR_COOKIE) or "anonymous"
    fb = Feedback(source="human", target=target, name=(name.strip() or "note")[:200], value=value,
                  rationale=text, author=who, supersedes=old.id if old else None)
    store.add_feedback(fb)
    step_at = fb.target.step_index
    page = 1 if step_at is None else step_at // per_page + 1
    response: Response
    if request.headers.get("hx-request") == "true":
        response = _thread_fragment(request, store, trajectory_id, step_at, page, per_page)
    else:
        anchor = "#feedback" if step_at is None else f"#step-{step_at}"
        response = RedirectResponse(f"/t/{trajectory_id}?page={page}{anchor}", status_code=303)
    response.set_cookie(AUTHOR_COOKIE, who, samesite="strict", max_age=365 * 86400)
    return response


def _thread_fragment(request: Request, store: Store, tid: str, step: int | None, page: int,
                     per_page: int) -> Response:
    tp = browse.trajectory_page(store, tid, page=page, per_page=per_page, prompt=False)
    assert tp is not None
    threads = feedback_threads(tp.feedback)
    if step is None:
        return render(request, "_feedback.html", {"threads": threads.get(None, []), "tp": tp,
                                                  "step_index": None, "target_id": "feedback"})
    sv = next(step_view(s, threads.get(s.index, [])) for s in tp.steps if s.index == step)
    return render(request, "_feedback.html", {"threads": sv.threads, "tp": tp, "step_index": step,
                                              "target_id": f"fb-{step}"})


@router.get("/feedback/human.jsonl")
def export_human(request: Request) -> StreamingResponse:
    store: Store = request.app.state.store
    records = browse.feedback_by_source(store, "human")

    def lines() -> Iterator[str]:
        for fb in records:
            yield fb.model_dump_json() + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson", headers={
        "Content-Disposition": 'attachment; filename="human-feedback.jsonl"'})
