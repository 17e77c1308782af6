"""Runs sent as OpenTelemetry traces over OTLP/HTTP: after the fact (``sharpen export RUN
--format otlp --endpoint URL``) and live (``sharpen run --otlp URL``).

The spans are :mod:`sharpen.interop.otel_spans`' (GenAI conventions + OpenInference), built
as the SDK's ``ReadableSpan`` with their own ids and times and sent by the SDK's OTLP/HTTP
exporter in requests of 256 spans: in the caller's thread after the fact, through a
``BatchSpanProcessor``'s background thread live, flushed by :meth:`OtlpSink.close`. Needs
``pip install 'sharpen[otel]'`` (``opentelemetry-sdk``,
``opentelemetry-exporter-otlp-proto-http``); this module imports them, so callers import it
lazily.

``endpoint`` is the receiver's base (``http://127.0.0.1:6006`` for Phoenix,
``https://cloud.langfuse.com/api/public/otel`` for Langfuse) or its full ``.../v1/traces``.
Headers (Langfuse's ``Authorization: Basic ...``) come from ``headers`` or, as the SDK reads
it, ``OTEL_EXPORTER_OTLP_HEADERS``; a request's deadline, retries included, from ``timeout``
or ``OTEL_EXPORTER_OTLP_TIMEOUT`` (seconds; default 10). The resource names the project:
``service.name`` and ``openinference.project.name`` (Phoenix files the spans under it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.trajectory import Trajectory
from sharpen.interop.otel_spans import SpanRecord, run_record, run_span, trajectory_spans
from sharpen.store import Store

DEFAULT_PROJECT = "sharpen"
"""The project (Phoenix) / service name spans are sent under unless told."""

BATCH = 256
"""Spans per OTLP request."""

_SCOPE = InstrumentationScope("sharpen")


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of ``endpoint`` (``/v1/traces`` appended unless there)."""
    url = endpoint.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UserError(f"--endpoint {endpoint!r} is not an http(s) URL",
                        "give the receiver's URL, e.g. http://127.0.0.1:6006 for Phoenix")
    return url if url.endswith("/v1/traces") else url + "/v1/traces"


def _context(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def readable(rec: SpanRecord, resource: Resource) -> ReadableSpan:
    """``rec`` as the SDK's finished span."""
    status = (Status(StatusCode.ERROR, rec.error) if rec.error is not None
              else Status(StatusCode.OK))
    return ReadableSpan(
        name=rec.name, context=_context(rec.trace_id, rec.span_id),
        parent=None if rec.parent_id is None else _context(rec.trace_id, rec.parent_id),
        resource=resource, attributes=rec.attributes,
        events=[Event(e.name, e.attributes, e.time_ns) for e in rec.events],
        kind=SpanKind.CLIENT if rec.kind == "CLIENT" else SpanKind.INTERNAL,
        status=status, start_time=rec.start_ns, end_time=max(rec.end_ns, rec.start_ns),
        instrumentation_scope=_SCOPE,
    )


class _Counting(OTLPSpanExporter):
    """The OTLP/HTTP exporter, counting what it sent and what failed (the processor swallows
    export failures; the caller must be told)."""

    def __init__(self, endpoint: str, headers: dict[str, str] | None, timeout: float | None) -> None:
        super().__init__(endpoint=endpoint, headers=headers, timeout=timeout)
        self.sent = 0
        self.failed = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        if result is SpanExportResult.SUCCESS:
            self.sent += len(spans)
        else:
            self.failed += len(spans)
        return result


class OtlpSink:
    """Spans to one OTLP/HTTP endpoint in requests of :data:`BATCH`; :meth:`close` sends the
    rest and says how many were sent.

    Without ``store``, :meth:`send` exports in the caller's thread (an export after the fact
    goes at the receiver's pace, never dropping a span). With ``store`` it is the live
    exporter, a ``Runner(on_episode=[...])`` observer: each stored trajectory's spans are
    queued for a background thread (the run never waits on the receiver), and :meth:`close`
    sends each run's root span (read from ``store``) and flushes."""

    def __init__(self, endpoint: str, *, project: str = DEFAULT_PROJECT,
                 headers: dict[str, str] | None = None, store: Store | None = None,
                 timeout: float | None = None) -> None:
        self.resource = Resource.create({"service.name": project,
                                         "openinference.project.name": project})
        self.exporter = _Counting(endpoint=traces_url(endpoint), headers=headers, timeout=timeout)
        # Live: a queue large enough that a burst of finished episodes is not dropped (what
        # is, close counts and reports).
        self.processor = None if store is None else BatchSpanProcessor(
            self.exporter, max_queue_size=65536, max_export_batch_size=BATCH,
            schedule_delay_millis=500)
        self.store = store
        self.queued = 0
        self._batch: list[ReadableSpan] = []
        self._runs: dict[str, datetime] = {}  # run id → latest episode end seen (live)
        self._specs: dict[str, AgentSpec] = {}

    def send(self, records: Iterable[SpanRecord]) -> None:
        """Export ``records`` (live: queue them for the background thread)."""
        for rec in records:
            span = readable(rec, self.resource)
            self.queued += 1
            if self.processor is not None:
                self.processor.on_end(span)
                continue
            self._batch.append(span)
            if len(self._batch) == BATCH:
                self.exporter.export(self._batch)
                self._batch = []

    def __call__(self, traj: Trajectory) -> None:
        """The live observer: queue one stored trajectory's spans."""
        if self.store is None:
            raise ValueError("a live OtlpSink needs the store (for the run's spec)")
        if traj.run_id not in self._specs:
            self._specs[traj.run_id] = self.store.get_run(traj.run_id).agent
        self.send(trajectory_spans(traj, self._specs[traj.run_id]))
        end = traj.ended_at or traj.started_at
        self._runs[traj.run_id] = max(end, self._runs.get(traj.run_id, end))

    def close(self) -> int:
        """Send the root span of every run seen live, flush, shut down; the spans sent.
        UserError when some could not be sent."""
        if self.store is not None:
            for run_id, end in self._runs.items():
                self.send([run_span(run_record(self.store, run_id), end)])
        if self._batch:
            self.exporter.export(self._batch)
            self._batch = []
        if self.processor is not None:
            self.processor.force_flush()
            self.processor.shutdown()
        lost = self.queued - self.exporter.sent
        if lost:
            raise UserError(f"{lost} of {self.queued} spans could not be sent to "
                            f"{self.exporter._endpoint}",
                            "check the endpoint is up and accepts OTLP/HTTP protobuf "
                            "(and the headers, for Langfuse)")
        return self.exporter.sent


def run_spans(store: Store, run_id: str) -> Iterable[SpanRecord]:
    """Every span of a stored run: its trajectories' (streamed), then the root."""
    run = run_record(store, run_id)
    end: datetime | None = None
    for t in store.iter_trajectories(run_id):
        yield from trajectory_spans(t, run.spec)
        done = t.ended_at or t.started_at
        end = done if end is None else max(end, done)
    yield run_span(run, end)


def export_runs(store: Store, runs: Sequence[str], endpoint: str, *,
                project: str = DEFAULT_PROJECT, headers: dict[str, str] | None = None) -> int:
    """Send the stored runs ``runs`` (ids, prefixes or ``latest``) to ``endpoint``; the number
    of spans sent."""
    sink = OtlpSink(endpoint, project=project, headers=headers)
    for ref in runs:
        sink.send(run_spans(store, store.resolve_run(ref)))
    return sink.close()
