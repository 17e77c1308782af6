"""OpenTelemetry spans (an OTLP/JSON file, or a Phoenix project) back into the store as runs.

- **Spans sharpen wrote** (:mod:`sharpen.interop.otel_spans`; they carry ``sharpen.run.id``)
  come back as the run they were: the manifest, spec and tasks from the root span's
  ``sharpen.run.record``, each trajectory from its ``invoke_agent`` span's
  ``sharpen.trajectory.record`` and its steps from the step spans' ``sharpen.step.record`` —
  the same ids, outcomes, usage, cost and steps, so ``sharpen report`` gives the same numbers.
  A run whose root span is missing (a live export cut short) is not imported (it is named).
- **Foreign GenAI / OpenInference spans** become one run per source (file or project) and
  service: an episode per agent span (``openinference.span.kind=AGENT`` or
  ``gen_ai.operation.name=invoke_agent``) with no agent above it, or per trace root when a
  trace has none; its LLM spans (kind ``LLM``, operations ``chat``, ``text_completion``,
  ``generate_content``) in time order are its steps, with usage from ``gen_ai.usage.*`` or
  ``llm.token_count.*``; a tool span (``TOOL``, ``execute_tool``) is the action of the step
  before it. The outcome comes from a ``gen_ai.evaluation.result`` event on the episode span
  (score ≥ 0.5, or a label of pass/success/correct/true/yes/C, is a success); without one the
  episode is stored with no outcome, which ``report`` counts as *unscored* (excluded from
  the success rate, listed with the errors). The task is the episode's input (its
  ``input.value``, else the span name); repeated inputs are epochs of one task.

Importing the same spans again writes nothing new (ids are derived from the spans).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.hashing import content_hash
from sharpen.core.manifest import RunManifest
from sharpen.core.messages import Message, Usage
from sharpen.core.outcome import Outcome
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.interop.otel_spans import EVALUATION_EVENT, SpanRecord
from sharpen.runner.summary import SummaryBuilder
from sharpen.store import Store

_LLM_OPS = ("chat", "text_completion", "generate_content")
_PASS_LABELS = {"pass", "passed", "success", "correct", "true", "yes", "c"}


class ImportedRun(BaseModel):
    """What one run of spans became."""

    run_id: str
    source: str
    """``sharpen`` (spans sharpen wrote) or ``foreign``."""
    trajectories: int
    written: int
    """Trajectories newly stored (0 when imported before)."""


def _time(t_ns: int) -> datetime:
    return datetime.fromtimestamp(t_ns / 1e9, tz=UTC)


def _kind(s: SpanRecord) -> str:
    k = str(s.attributes.get("openinference.span.kind", "")).upper()
    op = s.attributes.get("gen_ai.operation.name")
    if k:
        return k
    if op in _LLM_OPS:
        return "LLM"
    return {"invoke_agent": "AGENT", "create_agent": "AGENT", "execute_tool": "TOOL"}.get(str(op), "")


def import_spans(store: Store, spans: Sequence[SpanRecord], source: str,
                 service: str = "otel") -> list[ImportedRun]:
    """Store ``spans`` (see the module docstring); ``source`` names where they came from (a
    file path, a Phoenix project) and seeds the ids of foreign runs."""
    # A trace sharpen wrote is its run's: its step, chat and tool spans are ours too.
    traces = {s.trace_id for s in spans if "sharpen.run.id" in s.attributes}
    ours = [s for s in spans if s.trace_id in traces]
    foreign = [s for s in spans if s.trace_id not in traces]
    done = _import_ours(store, ours)
    if foreign:
        done.append(_import_foreign(store, foreign, source, service))
    return done


def _finish(store: Store, run_id: str, trajs: list[Trajectory], status: str,
            wall: float) -> int:
    written = sum(store.save_trajectories(trajs)) if trajs else 0
    tally = SummaryBuilder()
    for t in store.iter_trajectories(run_id, with_steps=False):
        tally.add(t)
    store.set_run_status(run_id, status,  # type: ignore[arg-type]
                         tally.build(run_id, wall).model_dump(mode="json"))
    return written


def _import_ours(store: Store, spans: list[SpanRecord]) -> list[ImportedRun]:
    run_of = {s.trace_id: str(s.attributes["sharpen.run.id"]) for s in spans
              if "sharpen.run.id" in s.attributes}
    by_run: dict[str, list[SpanRecord]] = defaultdict(list)
    for s in spans:
        by_run[run_of[s.trace_id]].append(s)
    out = []
    for run_id, group in by_run.items():
        root = next((s for s in group if "sharpen.run.record" in s.attributes), None)
        if root is None:
            continue  # reported by the caller: no root span, no manifest
        rec = json.loads(str(root.attributes["sharpen.run.record"]))
        manifest = RunManifest.model_validate(rec["manifest"])
        spec = AgentSpec.model_validate(rec["spec"])
        tasks = [TaskSpec.model_validate(t) for t in rec["tasks"]]
        store.create_run(manifest, spec, tasks)
        steps: dict[int, list[Step]] = defaultdict(list)
        for s in group:
            if "sharpen.step.record" in s.attributes and s.parent_id is not None:
                steps[s.parent_id].append(Step.model_validate_json(str(s.attributes["sharpen.step.record"])))
        trajs = []
        for s in group:
            if "sharpen.trajectory.record" in s.attributes:
                t = Trajectory.model_validate_json(str(s.attributes["sharpen.trajectory.record"]))
                t.steps = sorted(steps.get(s.span_id, []), key=lambda x: x.index)
                trajs.append(t)
        wall = float((rec.get("summary") or {}).get("wall_seconds", 0.0))
        status = rec.get("status") if rec.get("status") != "running" else "interrupted"
        written = _finish(store, run_id, trajs, status or "finished", wall)
        out.append(ImportedRun(run_id=run_id, source="sharpen", trajectories=len(trajs),
                               written=written))
    return out


def roots_missing(spans: Sequence[SpanRecord]) -> list[str]:
    """Run ids of sharpen spans whose root span (the run's record) is not among ``spans``."""
    seen = {str(s.attributes["sharpen.run.id"]) for s in spans if "sharpen.run.id" in s.attributes}
    rooted = {str(s.attributes["sharpen.run.id"]) for s in spans
              if "sharpen.run.record" in s.attributes}
    return sorted(seen - rooted)


def _int(attrs: dict[str, Any], *keys: str) -> int:
    for k in keys:
        if k in attrs:
            try:
                return int(attrs[k])
            except (TypeError, ValueError):
                continue
    return 0


def _usage(s: SpanRecord) -> Usage:
    a = s.attributes
    cost = a.get("llm.cost.total", a.get("sharpen.cost_usd"))
    return Usage(input_tokens=_int(a, "gen_ai.usage.input_tokens", "llm.token_count.prompt"),
                 output_tokens=_int(a, "gen_ai.usage.output_tokens", "llm.token_count.completion"),
                 calls=1, cost_usd=float(cost) if isinstance(cost, int | float) else None)


def _outcome(s: SpanRecord) -> Outcome | None:
    ev = next((e for e in s.events if e.name == EVALUATION_EVENT), None)
    if ev is None:
        return None
    score = ev.attributes.get("gen_ai.evaluation.score.value")
    label = str(ev.attributes.get("gen_ai.evaluation.score.label", "")).lower()
    value = float(score) if isinstance(score, int | float) else None
    success = label in _PASS_LABELS if label else (value is not None and value >= 0.5)
    return Outcome(success=success, reward=value if value is not None else float(success),
                   evidence=str(ev.attributes.get("gen_ai.evaluation.explanation", ""))[:2000])


def _episodes(spans: list[SpanRecord]) -> list[tuple[SpanRecord, list[SpanRecord]]]:
    """(episode span, its descendants) for every episode in ``spans``."""
    by_id = {s.span_id: s for s in spans}
    children: dict[int, list[SpanRecord]] = defaultdict(list)
    for s in spans:
        if s.parent_id is not None and s.parent_id in by_id:
            children[s.parent_id].append(s)

    def below(s: SpanRecord) -> list[SpanRecord]:
        out, todo = [], list(children.get(s.span_id, []))
        while todo:
            c = todo.pop()
            out.append(c)
            todo += children.get(c.span_id, [])
        return out

    def agent_above(s: SpanRecord) -> bool:
        p = by_id.get(s.parent_id) if s.parent_id is not None else None
        while p is not None:
            if _kind(p) == "AGENT":
                return True
            p = by_id.get(p.parent_id) if p.parent_id is not None else None
        return False

    agents = [s for s in spans if _kind(s) == "AGENT" and not agent_above(s)]
    traced = {a.trace_id for a in agents}
    roots = [s for s in spans if s.trace_id not in traced
             and (s.parent_id is None or s.parent_id not in by_id)]
    return [(e, below(e)) for e in sorted(agents + roots, key=lambda s: s.start_ns)]


def _steps(below: list[SpanRecord]) -> list[Step]:
    steps: list[Step] = []
    for s in sorted(below, key=lambda x: x.start_ns):
        kind = _kind(s)
        a = s.attributes
        if kind == "LLM":
            out = str(a.get("output.value", a.get("llm.output_messages.0.message.content", "")))
            steps.append(Step(index=len(steps), messages=[Message(role="assistant", content=out)],
                              usage=_usage(s), model_seconds=(s.end_ns - s.start_ns) / 1e9))
        elif kind == "TOOL" and steps:
            raw: Any = a.get("gen_ai.tool.call.arguments", a.get("input.value", "{}"))
            try:
                args = json.loads(raw) if isinstance(raw, str) else raw
            except json.JSONDecodeError:
                args = {"input": raw}
            name = str(a.get("gen_ai.tool.name", a.get("tool.name", s.name)))
            last = steps[-1]
            last.action = Action(tool=name, arguments=args if isinstance(args, dict) else {"input": args})
            last.observation = str(a.get("gen_ai.tool.call.result", a.get("output.value", "")))
            last.env_seconds = (s.end_ns - s.start_ns) / 1e9
    return steps


def _import_foreign(store: Store, spans: list[SpanRecord], source: str, service: str) -> ImportedRun:
    episodes = _episodes(spans)
    run_id = content_hash({"otel_source": source, "service": service}, 12)
    models = [str(s.attributes.get("gen_ai.request.model", s.attributes.get("llm.model_name")))
              for s in spans if _kind(s) == "LLM"
              and ("gen_ai.request.model" in s.attributes or "llm.model_name" in s.attributes)]
    model = max(set(models), key=models.count) if models else "unknown"
    agent = next((str(e.attributes["gen_ai.agent.name"]) for e, _ in episodes
                  if "gen_ai.agent.name" in e.attributes), "agent")
    spec = AgentSpec(name=f"{service} · {agent}", model=PluginRef(name=model),
                     agent=PluginRef(name=f"otel:{agent}"), params={}, components={})
    env = PluginRef(name=f"otel:{service}")
    tasks: dict[str, TaskSpec] = {}
    epochs: dict[str, int] = defaultdict(int)
    trajs = []
    for ep, below in episodes:
        prompt = str(ep.attributes.get("input.value") or ep.name)
        tid = content_hash(prompt, 16)
        task = tasks.setdefault(tid, TaskSpec(env=env.name, id=tid, metadata={"prompt": prompt[:2000]}))
        steps = _steps(below)
        usage = sum((s.usage for s in steps), Usage())
        if not steps and _kind(ep) == "LLM":
            usage = _usage(ep)
        messages = [Message(role="user", content=prompt)] + [m for s in steps for m in s.messages]
        o = _outcome(ep)
        if ep.error is not None and o is None:
            o = Outcome(success=False, error_kind="agent", error=ep.error)
        trajs.append(Trajectory(
            id=content_hash([run_id, ep.trace_id, ep.span_id], 32), run_id=run_id, task=task,
            agent_hash=spec.hash(), epoch=epochs[tid], messages=messages, steps=steps,
            outcome=o, usage=usage, started_at=_time(ep.start_ns), ended_at=_time(ep.end_ns)))
        epochs[tid] += 1
    start = min((s.start_ns for s in spans), default=0)
    end = max((s.end_ns for s in spans), default=0)
    manifest = RunManifest(
        run_id=run_id, created_at=_time(start), env=env, agent_hash=spec.hash(),
        task_ids=list(tasks), epochs=max(epochs.values(), default=1), seed=0,
        config_hash=content_hash({"otel_source": source, "service": service}),
        isolation="imported", platform="imported from OpenTelemetry spans",
        extra={"source": "otel", "from": source, "service": service})
    store.create_run(manifest, spec, list(tasks.values()))
    written = _finish(store, run_id, trajs, "finished", (end - start) / 1e9)
    return ImportedRun(run_id=run_id, source="foreign", trajectories=len(trajs), written=written)
