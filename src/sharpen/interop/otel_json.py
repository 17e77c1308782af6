"""Spans in and out of JSON: OTLP/JSON files (what the OpenTelemetry Collector's file exporter
writes, one ``ExportTraceServiceRequest`` a line, or one per file) and Phoenix's REST API
(``GET /v1/projects/{project}/spans``). Both read into :class:`~sharpen.interop.otel_spans.
SpanRecord`; no OpenTelemetry package is needed.

OTLP/JSON ids are hex strings (the specification's JSON encoding); base64 ids (protobuf's
generic JSON mapping) are read too. Attribute values become Python values (``intValue``'s
string as an int, arrays as lists, key-value lists as dicts).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from sharpen.core.errors import UserError
from sharpen.interop.otel_spans import SpanEvent, SpanRecord, ns

_KINDS = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}


def _any(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _attrs_json(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any(v)} for k, v in attrs.items()]


def to_otlp_json(records: Iterable[SpanRecord], resource: dict[str, str]) -> dict[str, Any]:
    """One OTLP/JSON ``ExportTraceServiceRequest`` holding ``records``."""
    spans = [{
        "traceId": f"{r.trace_id:032x}", "spanId": f"{r.span_id:016x}",
        **({"parentSpanId": f"{r.parent_id:016x}"} if r.parent_id is not None else {}),
        "name": r.name, "kind": _KINDS.get(r.kind, 1),
        "startTimeUnixNano": str(r.start_ns), "endTimeUnixNano": str(max(r.end_ns, r.start_ns)),
        "attributes": _attrs_json(r.attributes),
        "events": [{"name": e.name, "timeUnixNano": str(e.time_ns),
                    "attributes": _attrs_json(e.attributes)} for e in r.events],
        "status": {"code": 2, "message": r.error} if r.error is not None else {"code": 1},
    } for r in records]
    return {"resourceSpans": [{"resource": {"attributes": _attrs_json(resource)},
                               "scopeSpans": [{"scope": {"name": "sharpen"}, "spans": spans}]}]}


def _value(v: dict[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return _attrs(v["kvlistValue"].get("values", []))
    return None


def _attrs(kvs: list[dict[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: _value(kv.get("value") or {}) for kv in kvs}


def _id(text: str | None, nbytes: int) -> int | None:
    if not text:
        return None
    if len(text) == nbytes * 2:
        try:
            return int(text, 16)
        except ValueError:
            pass
    try:
        return int.from_bytes(base64.b64decode(text), "big")
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"span id {text!r} is neither hex nor base64") from exc


def _status(span: dict[str, Any]) -> str | None:
    status = span.get("status") or {}
    code = status.get("code")
    return (status.get("message") or "error") if code in (2, "STATUS_CODE_ERROR", "ERROR") else None


def from_otlp_json(doc: dict[str, Any]) -> Iterator[tuple[dict[str, Any], SpanRecord]]:
    """(resource attributes, span) for every span of one OTLP/JSON request."""
    for rs in doc.get("resourceSpans", []):
        resource = _attrs((rs.get("resource") or {}).get("attributes", []))
        for ss in rs.get("scopeSpans", rs.get("instrumentationLibrarySpans", [])):
            for s in ss.get("spans", []):
                kind = s.get("kind", 1)
                yield resource, SpanRecord(
                    trace_id=_id(s["traceId"], 16) or 0, span_id=_id(s["spanId"], 8) or 0,
                    parent_id=_id(s.get("parentSpanId"), 8), name=s.get("name", ""),
                    start_ns=int(s.get("startTimeUnixNano", 0)),
                    end_ns=int(s.get("endTimeUnixNano", 0)),
                    kind="CLIENT" if kind in (3, "SPAN_KIND_CLIENT") else "INTERNAL",
                    attributes=_attrs(s.get("attributes", [])),
                    events=[SpanEvent(e.get("name", ""), int(e.get("timeUnixNano", 0)),
                                      _attrs(e.get("attributes", []))) for e in s.get("events", [])],
                    error=_status(s))


def read_otlp_file(path: str | Path) -> list[tuple[dict[str, Any], SpanRecord]]:
    """Every span of an OTLP/JSON file: one request a line (the collector's file exporter),
    or a single request in the whole file."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"no file at {p}", "give an OTLP/JSON file (the collector's file "
                        "exporter, or `sharpen export RUN --format otlp -o FILE`)")
    text = p.read_text()
    try:
        docs = [json.loads(text)] if text.lstrip().startswith("{") and "\n{" not in text.strip() \
            else [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise UserError(f"{p} is not OTLP/JSON: {exc}", "give a file of "
                        "ExportTraceServiceRequest JSON objects, one a line") from exc
    return [pair for d in docs for pair in from_otlp_json(d)]


def _phoenix_span(s: dict[str, Any]) -> SpanRecord:
    attrs = dict(s.get("attributes") or {})
    if s.get("span_kind") and s["span_kind"] != "UNKNOWN":
        attrs.setdefault("openinference.span.kind", s["span_kind"])
    parent = s.get("parent_id")
    return SpanRecord(
        trace_id=int(s["context"]["trace_id"], 16), span_id=int(s["context"]["span_id"], 16),
        parent_id=int(parent, 16) if parent else None, name=s.get("name", ""),
        start_ns=ns(datetime.fromisoformat(s["start_time"])),
        end_ns=ns(datetime.fromisoformat(s["end_time"])), attributes=attrs,
        events=[SpanEvent(e.get("name", ""), ns(datetime.fromisoformat(e["timestamp"])),
                          dict(e.get("attributes") or {})) for e in s.get("events") or []],
        error=(s.get("status_message") or "error") if s.get("status_code") == "ERROR" else None)


def read_phoenix(endpoint: str, project: str, *, timeout: float = 30.0,
                 headers: dict[str, str] | None = None) -> list[SpanRecord]:
    """Every span of a Phoenix project, through its REST API (pages of 1,000)."""
    base = endpoint.rstrip("/")
    out: list[SpanRecord] = []
    cursor: str | None = None
    with httpx.Client(timeout=timeout, headers=headers) as client:
        while True:
            params: dict[str, Any] = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
            try:
                res = client.get(f"{base}/v1/projects/{project}/spans", params=params)
            except httpx.HTTPError as exc:
                raise UserError(f"cannot reach Phoenix at {base}: {exc}",
                                "check --endpoint (Phoenix's base URL, e.g. http://127.0.0.1:6006)") from exc
            if res.status_code == 404:
                raise UserError(f"Phoenix at {base} has no project {project!r}",
                                "name it with --project (Phoenix's UI lists the projects)")
            res.raise_for_status()
            body = res.json()
            out += [_phoenix_span(s) for s in body.get("data", [])]
            cursor = body.get("next_cursor")
            if not cursor:
                return out
