"""The CLI's OpenTelemetry parts: ``export --format otlp``, ``run --otlp`` and ``import otlp`` /
``import phoenix`` (sharpen.interop.otlp, otel_json, otel_import do the work)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from sharpen.cli.options import open_store, parse_kv
from sharpen.core.errors import UserError

if TYPE_CHECKING:
    from sharpen.interop.otel_import import ImportedRun
    from sharpen.interop.otel_spans import SpanRecord
    from sharpen.interop.otlp import OtlpSink
    from sharpen.store import Store

INSTALL_FIX = "pip install 'sharpen[otel]' (opentelemetry-sdk and its OTLP/HTTP exporter)"


def headers_of(header: list[str] | None) -> dict[str, str] | None:
    """``--header NAME=VALUE`` options as a dict (``None``: the SDK reads the environment)."""
    return {k: str(v) for k, v in parse_kv(header, "--header").items()} if header else None


def sink(endpoint: str, project: str, header: list[str] | None, store: Store | None) -> OtlpSink:
    """An OTLP/HTTP sink (the live exporter when ``store`` is given)."""
    try:
        from sharpen.interop.otlp import OtlpSink
    except ImportError as exc:
        raise UserError(f"sending OpenTelemetry spans needs the otel extra ({exc})", INSTALL_FIX) from exc
    return OtlpSink(endpoint, project=project, headers=headers_of(header), store=store)


def export_otlp(runs: list[str], endpoint: str | None, output: Path | None, project: str,
                header: list[str] | None, store: str | None, *, filtered: bool,
                annotate: bool = False) -> None:
    """``sharpen export RUN... --format otlp``: to ``endpoint`` (and, ``annotate``, its
    Phoenix's span annotations), or an OTLP/JSON file."""
    if filtered:
        raise UserError("--format otlp sends whole runs: the filters do not apply",
                        "drop --success/--failure, --split, --min-reward, --feedback and "
                        "--include-errors")
    if annotate and endpoint is None:
        raise UserError("--phoenix-annotations posts to the Phoenix at --endpoint",
                        "give --endpoint URL, or drop --phoenix-annotations")
    if (endpoint is None) == (output is None):
        raise UserError("--format otlp needs exactly one of --endpoint URL and -o FILE",
                        "e.g. --endpoint http://127.0.0.1:6006 (Phoenix), or -o run.otlp.json")
    st = open_store(store)
    err = Console(stderr=True, highlight=False)
    if endpoint is not None:
        out = sink(endpoint, project, header, None)
        from sharpen.interop.otlp import run_spans
        from sharpen.interop.phoenix_annotations import annotations_of, post_annotations

        notes: list[dict[str, object]] = []
        for ref in runs:
            for span in run_spans(st, st.resolve_run(ref)):
                out.send([span])
                if annotate:
                    notes += annotations_of([span])
        sent = out.close()
        err.print(f"sent {sent} spans of {len(runs)} run(s) to {endpoint} (project {project})")
        if annotate:
            n = post_annotations(endpoint, notes, headers=headers_of(header))
            err.print(f"posted {n} span annotations (outcomes and feedback) to {endpoint}")
        return
    assert output is not None
    from sharpen.interop.otel_json import to_otlp_json
    from sharpen.interop.otel_spans import run_record, run_span, trajectory_spans

    resource = {"service.name": project, "openinference.project.name": project}
    n = 0
    with output.open("w") as f:
        for ref in runs:
            run_id = st.resolve_run(ref)
            rec = run_record(st, run_id)
            end = None
            for t in st.iter_trajectories(run_id):  # a request per trajectory: memory stays flat
                spans = trajectory_spans(t, rec.spec)
                f.write(json.dumps(to_otlp_json(spans, resource)) + "\n")
                n += len(spans)
                done = t.ended_at or t.started_at
                end = done if end is None else max(end, done)
            f.write(json.dumps(to_otlp_json([run_span(rec, end)], resource)) + "\n")
            n += 1
    err.print(f"wrote {n} spans of {len(runs)} run(s) to {output} (OTLP/JSON, a request a line)")


def _print(done: list[ImportedRun], missing: list[str], json_out: bool) -> None:
    if json_out:
        print(json.dumps({"runs": [d.model_dump() for d in done], "missing_root": missing}, indent=2))
        return
    out = Console(highlight=False)
    for d in done:
        again = "" if d.written else " (imported before: nothing new)"
        out.print(f"run {d.run_id} ({d.source} spans): {d.written} of {d.trajectories} "
                  f"trajectories stored{again} — sharpen report {d.run_id}")
    for run_id in missing:
        out.print(f"run {run_id}: skipped, its root span (the run's record) is not there — "
                  "export the run again after it ends")
    if not done and not missing:
        out.print("no spans found")


def _store_spans(store: str | None, spans: list[SpanRecord], services: dict[int, str],
                 source: str, json_out: bool) -> None:
    from sharpen.interop.otel_import import import_spans, roots_missing

    db = open_store(store)
    by_service: dict[str, list[SpanRecord]] = defaultdict(list)
    for s in spans:
        by_service[services.get(s.trace_id, "otel")].append(s)
    done: list[ImportedRun] = []
    for service, group in by_service.items():
        done += import_spans(db, group, source, service)
    _print(done, roots_missing(spans), json_out)


def import_otlp(files: list[Path], json_out: bool, store: str | None) -> None:
    """``sharpen import otlp FILE...``."""
    from sharpen.interop.otel_json import read_otlp_file

    # The files are read as one source: a run's spans may be spread over several (a
    # collector's rotated files), its root span in the last.
    pairs = [pair for f in files for pair in read_otlp_file(f)]
    services = {s.trace_id: str(r.get("service.name", "otel")) for r, s in pairs}
    source = "+".join(sorted(str(f.resolve()) for f in files))
    _store_spans(store, [s for _, s in pairs], services, source, json_out)


def import_phoenix(endpoint: str, project: str, header: list[str] | None, json_out: bool,
                   store: str | None) -> None:
    """``sharpen import phoenix --endpoint URL --project NAME``."""
    from sharpen.interop.otel_json import read_phoenix

    spans = read_phoenix(endpoint, project, headers=headers_of(header))
    _store_spans(store, spans, {s.trace_id: project for s in spans},
                 f"phoenix:{endpoint.rstrip('/')}/{project}", json_out)
