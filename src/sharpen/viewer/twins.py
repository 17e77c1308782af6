"""The ``.json`` twin of every page (as Datasette does): the page's URL with ``.json`` added
(``/`` is ``/runs.json``) answers the data its template renders, as JSON.

The twin is the template's context made JSON-able: pydantic models as their JSON dump,
dataclasses field by field, dates as ISO 8601. What is presentation only — drawn SVG and
highlighted HTML (:class:`markupsafe.Markup`), helper functions, the CSRF token — is left
out, so a script gets records, not markup.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from markupsafe import Markup
from pydantic import BaseModel

SUFFIX = ".json"
OMIT = frozenset({"csrf", "request"})
"""Context keys that are no data."""


class _Skip:
    """Marks a value the twin leaves out."""


SKIP = _Skip()


def wants_json(request: Request) -> bool:
    """Whether ``request`` asks for a page's JSON twin."""
    return request.url.path.endswith(SUFFIX)


def twin_url(request: Request) -> str:
    """The URL of the JSON twin of the page ``request`` asked for (query kept)."""
    path = request.url.path
    base = "/runs" if path == "/" else path.rstrip("/")
    query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
    return base + SUFFIX + (f"?{query}" if query else "")


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (:data:`SKIP` for presentation-only values)."""
    if isinstance(value, Markup) or (callable(value) and not isinstance(value, type | BaseModel)):
        return SKIP
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            item = jsonable(v)
            if item is not SKIP and str(k) not in OMIT:
                out[str(k)] = item
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [item for item in (jsonable(v) for v in value) if item is not SKIP]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
