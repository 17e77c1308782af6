"""The viewer's app factory: :func:`create_app` builds a FastAPI app over one Store."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from sharpen.core.errors import UserError
from sharpen.improvement.folder import experiments_base
from sharpen.stats.intervals import wilson_interval
from sharpen.stats.rounding import interval_text, p_cell
from sharpen.store.records import Verdict
from sharpen.store.store import Store
from sharpen.train.engine import trainings_base
from sharpen.viewer.citations import cite_links, step_href
from sharpen.viewer.security import CSRF_FIELD, csrf_guard, security_middleware
from sharpen.viewer.twins import jsonable, twin_url, wants_json

HERE = Path(__file__).resolve().parent
HTMX_VERSION = "1.9.12"
"""The vendored ``static/htmx.min.js`` (npm package ``htmx.org``, Zero-Clause BSD)."""


MARKS: dict[Verdict, tuple[str, str]] = {
    "pass": ("✓", "ok"), "fail": ("✗", "fail"), "excluded": ("E", "err")}
"""An attempt's verdict as the pages draw it: its mark and the suffix of its CSS class
(``mark-ok``, ``mark-fail``, ``mark-err``)."""


def _mark(verdict: Verdict) -> str:
    return MARKS[verdict][0]


def _mark_class(verdict: Verdict) -> str:
    return MARKS[verdict][1]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _cost(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:.4f}" if value < 100 else f"${value:,.0f}"


def _secs(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "—"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min" if value < 7200 else f"{value / 3600:.1f} h"


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M")


def _wilson(successes: int, n: int) -> str:
    if not n:
        return "—"
    lo, hi = wilson_interval(successes, n)
    return interval_text(lo, hi, sep="–", suffix="%", brackets=False)  # rounded outward


def _with_page(query: dict[str, str], page: int) -> str:
    return urlencode({**query, "page": page})


def make_templates() -> Jinja2Templates:
    """Jinja templates with autoescaping on for every template (model output is untrusted)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(pct=_pct, cost=_cost, secs=_secs, when=_when, mark=_mark,
                       mark_class=_mark_class)
    env.globals.update(wilson=_wilson, with_page=_with_page, csrf_field=CSRF_FIELD, htmx_version=HTMX_VERSION,
                       p_cell=p_cell, interval_text=interval_text, cite=cite_links,
                       step_href=step_href)
    return Jinja2Templates(env=env)


def create_app(
    store: Store,
    *,
    token: str | None = None,
    allowed_hosts: frozenset[str] | None = None,
    per_page: int = 50,
    improve_dir: Path | None = None,
    train_dir: Path | None = None,
    poll_seconds: float = 3.0,
) -> FastAPI:
    """The viewer over ``store``.

    ``token``: require it on every request (``?token=``, cookie, or bearer header).
    ``allowed_hosts``: answer only these ``Host`` names (``sharpen view`` passes the
    loopback names when bound to loopback without a token). ``per_page``: tasks per run
    page and steps per trajectory page. ``improve_dir``: where improvement experiments keep
    their folders (default: next to the store, as ``sharpen improve`` writes them);
    ``train_dir`` the same for trainings (``sharpen train``).
    ``poll_seconds``: how often the page of a run whose status is ``running`` refreshes.
    """
    app = FastAPI(title="sharpen viewer", docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=[Depends(csrf_guard)])
    app.state.store = store
    app.state.templates = make_templates()
    app.state.per_page = per_page
    app.state.poll_seconds = poll_seconds
    app.state.improve_dir = improve_dir if improve_dir is not None else experiments_base(store.url)
    app.state.train_dir = train_dir if train_dir is not None else trainings_base(store.url)
    app.middleware("http")(security_middleware(token, allowed_hosts))
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    from sharpen.viewer import annotate, diagnosed, improve, judged, pages, trained

    app.include_router(pages.router)
    app.include_router(annotate.router)
    app.include_router(improve.router)
    app.include_router(judged.router)
    app.include_router(diagnosed.router)
    app.include_router(trained.router)

    @app.exception_handler(UserError)
    async def _user_error(request: Request, exc: UserError) -> Response:
        return render(request, "error.html", {"message": exc.message, "fix": exc.fix}, status=404)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if wants_json(request):
            return JSONResponse({"message": str(exc.detail)}, status_code=exc.status_code)
        return PlainTextResponse(str(exc.detail), status_code=exc.status_code)

    return app


def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    """Render template ``name`` with the request, its CSRF token and ``context`` — or, for a
    ``.json`` URL, answer ``context`` itself as the page's JSON twin (:mod:`sharpen.viewer.twins`)."""
    if wants_json(request):
        return JSONResponse(jsonable(context), status_code=status)
    templates: Jinja2Templates = request.app.state.templates
    ctx = {"csrf": getattr(request.state, "csrf", ""), "json_url": twin_url(request), **context}
    return templates.TemplateResponse(request, name, ctx, status_code=status)
