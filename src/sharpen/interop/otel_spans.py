"""A stored run as OpenTelemetry spans (GenAI semantic conventions + OpenInference), with no
OpenTelemetry import: plain :class:`SpanRecord` values that :mod:`sharpen.interop.otlp` sends
and :mod:`sharpen.interop.otel_import` reads back.

One trace per run (its id derived from the run id); every span id derived from what it stands
for (run, trajectory, step, call), so exporting a run twice sends the same ids:

- ``run {run_id}`` — the root (OpenInference ``CHAIN``): ``sharpen.run.id`` and, as JSON in
  ``sharpen.run.record``, the manifest, AgentSpec, tasks, status and summary;
- ``invoke_agent {agent}`` per trajectory (``gen_ai.operation.name=invoke_agent``,
  OpenInference ``AGENT``): ``gen_ai.agent.*``, ``gen_ai.conversation.id`` and ``session.id``
  (the trajectory id), ``gen_ai.request.model``, aggregated ``gen_ai.usage.*``, ``input.value``
  (the task prompt) and ``output.value`` (the last reply), ``sharpen.task.id``,
  ``sharpen.epoch``, ``sharpen.success``, ``sharpen.reward``, ``sharpen.cost_usd``; status
  ERROR when the episode errored; one ``gen_ai.evaluation.result`` event for the outcome
  (name ``outcome``) and one per feedback record (verifier, judge, human...); the whole
  trajectory but its steps as JSON in ``sharpen.trajectory.record``;
- ``step {i}`` per step (``CHAIN``): ``sharpen.step.index``, reward, and the step as JSON in
  ``sharpen.step.record``;
- ``chat {model}`` per step with a model reply (CLIENT, ``LLM``): ``gen_ai.usage.*``,
  ``llm.token_count.*``, ``gen_ai.output.messages`` (the parts format), ``output.value``;
- ``execute_tool {tool}`` per step with an action (``TOOL``): ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` / ``result``.

Steps carry no clock times, only their model and environment seconds: a step starts where the
previous one ended (the first at the trajectory's start), its chat span lasts its model
seconds and its tool span its environment seconds.

No attribute key is a prefix of another (``sharpen.run.id`` beside ``sharpen.run.record``,
never ``sharpen.run``): receivers that nest dotted keys, as Phoenix does, keep both.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.feedback import Feedback
from sharpen.core.manifest import RunManifest
from sharpen.core.messages import Message, Usage
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Step, Trajectory

if TYPE_CHECKING:
    from sharpen.store import Store

Attrs = dict[str, Any]
"""Span or event attributes: what sharpen writes are str, bool, int and float; what is read
back from elsewhere may hold lists and dicts too."""

EVALUATION_EVENT = "gen_ai.evaluation.result"
"""The GenAI conventions' evaluation event (outcome and feedback records)."""


@dataclass
class SpanEvent:
    """One span event."""

    name: str
    time_ns: int
    attributes: Attrs = field(default_factory=dict)


@dataclass
class SpanRecord:
    """One span, as OTLP carries it (ids as integers; times in Unix nanoseconds)."""

    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    start_ns: int
    end_ns: int
    kind: str = "INTERNAL"
    """OTel span kind: INTERNAL or CLIENT."""
    attributes: Attrs = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None
    """Status ERROR with this message; ``None`` is status OK."""


@dataclass
class RunRecordSpans:
    """What :func:`run_span` needs about a run."""

    manifest: RunManifest
    spec: AgentSpec
    tasks: list[TaskSpec]
    status: str
    summary: dict[str, Any] | None


def run_record(store: Store, run_id: str) -> RunRecordSpans:
    """What the root span of ``run_id`` needs, from the store."""
    rec = store.get_run(run_id)
    return RunRecordSpans(manifest=rec.manifest, spec=rec.agent, tasks=store.tasks_for(run_id),
                          status=rec.status, summary=rec.summary)


def _hash_int(text: str, bits: int) -> int:
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[: bits // 8], "big")
    return value or 1  # an all-zero id is invalid in OTLP


def trace_id_of(run_id: str) -> int:
    """The trace id of a run: 128 bits of ``sha256("sharpen-run:" + run_id)``."""
    return _hash_int(f"sharpen-run:{run_id}", 128)


def span_id_of(*parts: object) -> int:
    """A deterministic 64-bit span id for what ``parts`` name."""
    return _hash_int("/".join(str(p) for p in parts), 64)


def ns(t: datetime) -> int:
    """Unix nanoseconds of an aware datetime."""
    return int(t.timestamp() * 1e9)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def provider_of(model: str) -> str:
    """``gen_ai.provider.name`` for a sharpen model plug-in name."""
    return {"openai": "openai", "openai_compat": "openai", "anthropic": "anthropic"}.get(model, model)


def _usage_attrs(u: Usage, *, openinference: bool) -> Attrs:
    out: Attrs = {"gen_ai.usage.input_tokens": u.input_tokens,
                  "gen_ai.usage.output_tokens": u.output_tokens}
    if openinference:  # only on LLM spans: Phoenix rolls these up the tree itself
        out |= {"llm.token_count.prompt": u.input_tokens,
                "llm.token_count.completion": u.output_tokens,
                "llm.token_count.total": u.total_tokens}
        if u.cost_usd is not None:
            out["llm.cost.total"] = u.cost_usd
    if u.cost_usd is not None:
        out["sharpen.cost_usd"] = u.cost_usd
    return out


def _parts(m: Message) -> dict[str, Any]:
    """A message in the GenAI conventions' parts format."""
    parts: list[dict[str, Any]] = []
    if m.content:
        parts.append({"type": "text", "content": m.content})
    parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
              for c in m.tool_calls]
    if m.role == "tool":
        parts = [{"type": "tool_call_response", "id": m.tool_call_id, "result": m.content}]
    return {"role": m.role, "parts": parts}


def run_span(run: RunRecordSpans, trajectories_end: datetime | None) -> SpanRecord:
    """The root span of a run (see the module docstring)."""
    m = run.manifest
    record = {"manifest": m.model_dump(mode="json"), "spec": run.spec.model_dump(mode="json"),
              "tasks": [t.model_dump(mode="json") for t in run.tasks], "status": run.status,
              "summary": run.summary}
    end = max(trajectories_end or m.created_at, m.created_at)
    return SpanRecord(
        trace_id=trace_id_of(m.run_id), span_id=span_id_of(m.run_id, "run"), parent_id=None,
        name=f"run {m.run_id}", start_ns=ns(m.created_at), end_ns=ns(end),
        attributes={"openinference.span.kind": "CHAIN", "sharpen.run.id": m.run_id,
                    "sharpen.env": m.env.name, "gen_ai.request.model": run.spec.model.name,
                    "input.value": f"{m.env.name}: {len(m.task_ids)} tasks × {m.epochs} epochs",
                    "sharpen.run.record": _json(record)},
        error="run failed" if run.status == "failed" else None,
    )


def _evaluation(name: str, value: float | bool | str | None, label: str | None,
                explanation: str, when: datetime, extra: Attrs) -> SpanEvent:
    attrs: Attrs = {"gen_ai.evaluation.name": name, **extra}
    if isinstance(value, bool):
        attrs["gen_ai.evaluation.score.value"] = float(value)
        label = label or ("true" if value else "false")
    elif isinstance(value, int | float):
        attrs["gen_ai.evaluation.score.value"] = float(value)
    elif isinstance(value, str):
        label = label or value
    if label:
        attrs["gen_ai.evaluation.score.label"] = label
    if explanation:
        attrs["gen_ai.evaluation.explanation"] = explanation[:4000]
    return SpanEvent(EVALUATION_EVENT, ns(when), attrs)


def _feedback_event(fb: Feedback) -> SpanEvent:
    return _evaluation(fb.name, fb.value, None, fb.rationale, fb.created_at,
                       {"sharpen.feedback.source": fb.source, "sharpen.feedback.author": fb.author,
                        "sharpen.feedback.record": fb.model_dump_json()})


def trajectory_spans(t: Trajectory, spec: AgentSpec) -> list[SpanRecord]:
    """The spans of one trajectory: its ``invoke_agent`` span, its steps and their calls."""
    trace = trace_id_of(t.run_id)
    root = span_id_of(t.run_id, "trajectory", t.id)
    end = t.ended_at or t.started_at
    model = spec.model.args.get("model") or spec.model.name
    first_user = next((m.content for m in t.messages if m.role == "user" and m.content), "")
    last_reply = next((m.content for m in reversed(t.messages)
                       if m.role == "assistant" and m.content), "")
    o = t.outcome
    attrs: Attrs = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": provider_of(spec.model.name),
        "gen_ai.agent.name": spec.agent.name, "sharpen.spec.name": spec.name, "gen_ai.agent.id": t.agent_hash,
        "gen_ai.conversation.id": t.id, "session.id": t.id, "gen_ai.request.model": str(model),
        "openinference.span.kind": "AGENT", "input.value": first_user or t.task.id,
        "output.value": last_reply, "sharpen.run.id": t.run_id, "sharpen.trajectory.id": t.id,
        "sharpen.task.id": t.task.id, "sharpen.epoch": t.epoch, "sharpen.seed": t.seed,
        "sharpen.calls": t.usage.calls, "sharpen.steps": len(t.steps),
        **_usage_attrs(t.usage, openinference=False),
        "sharpen.trajectory.record": t.model_dump_json(exclude={"steps"}),
    }
    events = [_feedback_event(fb) for fb in t.feedback]
    if o is not None:
        attrs |= {"sharpen.success": o.success, "sharpen.reward": o.reward}
        label = (o.error_kind and f"error:{o.error_kind}") or ("success" if o.success else "failure")
        events.insert(0, _evaluation("outcome", o.reward, label, o.evidence or o.error or "",
                                     end, {"sharpen.success": o.success}))
    spans = [SpanRecord(
        trace_id=trace, span_id=root, parent_id=span_id_of(t.run_id, "run"),
        name=f"invoke_agent {attrs['gen_ai.agent.name']}", start_ns=ns(t.started_at),
        end_ns=ns(end), attributes=attrs, events=events,
        error=f"{o.error_kind}: {o.error or ''}" if o is not None and o.error_kind else None,
    )]
    # Recorded seconds (a replayed cassette's) can exceed the episode's wall time: scale the
    # steps into it, so children stay inside their parent.
    total = sum(max(s.model_seconds, 0.0) + max(s.env_seconds, 0.0) for s in t.steps)
    wall = (end - t.started_at).total_seconds()
    scale = wall / total if total > wall > 0 else (0.0 if total > wall else 1.0)
    clock = t.started_at
    for s in t.steps:
        clock, step_spans = _step_spans(t, s, root, clock, str(model), spec.model.name, scale)
        spans += step_spans
    return spans


def _step_spans(t: Trajectory, s: Step, parent: int, start: datetime, model: str,
                plugin: str, scale: float) -> tuple[datetime, list[SpanRecord]]:
    trace = trace_id_of(t.run_id)
    sid = span_id_of(t.run_id, "trajectory", t.id, "step", s.index)
    model_end = start + timedelta(seconds=max(s.model_seconds, 0.0) * scale)
    end = model_end + timedelta(seconds=max(s.env_seconds, 0.0) * scale)
    out = [SpanRecord(
        trace_id=trace, span_id=sid, parent_id=parent, name=f"step {s.index}",
        start_ns=ns(start), end_ns=ns(end),
        attributes={"openinference.span.kind": "CHAIN", "sharpen.step.index": s.index,
                    "sharpen.step.reward": s.reward, "output.value": s.observation or "",
                    "sharpen.step.record": s.model_dump_json()},
        error=f"invalid action: {s.invalid_action}" if s.invalid_action else None,
    )]
    reply = next((m for m in s.messages if m.role == "assistant"), None)
    if reply is not None or s.usage.calls:
        attrs: Attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_of(plugin),
                        "gen_ai.request.model": model, "llm.model_name": model,
                        "openinference.span.kind": "LLM", **_usage_attrs(s.usage, openinference=True)}
        if reply is not None:
            attrs |= {"gen_ai.output.messages": _json([_parts(reply)]),
                      "output.value": reply.content or _json([c.model_dump() for c in reply.tool_calls]),
                      "llm.output_messages.0.message.role": "assistant",
                      "llm.output_messages.0.message.content": reply.content or ""}
        out.append(SpanRecord(trace_id=trace, span_id=span_id_of(t.run_id, t.id, s.index, "chat"),
                              parent_id=sid, name=f"chat {model}", kind="CLIENT",
                              start_ns=ns(start), end_ns=ns(model_end), attributes=attrs))
    if s.action is not None:
        call_id = next((c.id for c in (reply.tool_calls if reply else []) if c.name == s.action.tool), "")
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": s.action.tool,
                 "gen_ai.tool.type": "function", "openinference.span.kind": "TOOL",
                 "tool.name": s.action.tool, "gen_ai.tool.call.arguments": _json(s.action.arguments),
                 "input.value": _json(s.action.arguments), "output.value": s.observation or "",
                 "gen_ai.tool.call.result": s.observation or ""}
        if call_id:
            attrs["gen_ai.tool.call.id"] = call_id
        out.append(SpanRecord(trace_id=trace, span_id=span_id_of(t.run_id, t.id, s.index, "tool"),
                              parent_id=sid, name=f"execute_tool {s.action.tool}",
                              start_ns=ns(model_end), end_ns=ns(end), attributes=attrs))
    return end, out
