"""Rows ⇄ core models: how each core type is spread over columns and JSON text.

Every ``to_row`` here has a ``from_row`` that rebuilds an equal model (``model_dump``
equality) from what it wrote, given JSON-native values in free-form dicts (``knobs``,
``metadata``, ``info``, ``params``): a tuple comes back as a list, as with any JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import from_json
from sqlalchemy import RowMapping

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.judgement import JudgeCall, Judgement
from sharpen.core.manifest import RunManifest
from sharpen.core.messages import Message, Usage
from sharpen.core.outcome import Outcome
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Step, TokenLogprobs, Trajectory

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])

Row = Mapping[str, Any] | RowMapping
"""A row's values by column name: a plain mapping, or SQLAlchemy's ``RowMapping`` (whose keys
may be column objects too, so it is no ``Mapping[str, Any]``)."""

COVERED_FIELDS: dict[type, frozenset[str]] = {
    TaskSpec: frozenset({"env", "id", "seed", "knobs", "split", "metadata"}),
    Outcome: frozenset({"success", "reward", "components", "error_kind", "error", "evidence"}),
    Usage: frozenset({"input_tokens", "output_tokens", "calls", "cost_usd"}),
    Step: frozenset(
        {
            "index",
            "messages",
            "action",
            "invalid_action",
            "observation",
            "reward",
            "terminated",
            "truncated",
            "usage",
            "model_seconds",
            "env_seconds",
            "info",
            "logprobs",
        }
    ),
    Trajectory: frozenset(
        {
            "id",
            "run_id",
            "task",
            "agent_hash",
            "epoch",
            "seed",
            "messages",
            "steps",
            "outcome",
            "feedback",
            "usage",
            "invalid_actions",
            "infra_retries",
            "started_at",
            "ended_at",
        }
    ),
    FeedbackTarget: frozenset({"kind", "run_id", "trajectory_id", "step_index", "span"}),
    Feedback: frozenset(
        {
            "id",
            "source",
            "target",
            "name",
            "value",
            "rationale",
            "author",
            "created_at",
            "supersedes",
            "versus",
            "call_id",
        }
    ),
    Judgement: frozenset(
        {
            "id", "run_id", "trajectory_id", "versus", "judge", "judge_hash", "model", "status",
            "error", "calls", "usage", "seconds", "detail", "created_at",
        }
    ),
}
"""The fields each column-mapped model's codec writes and reads back. A core type that
gains a field needs a column (and a migration) or a JSON home here; a test compares this
with ``model_fields`` so that drift fails loudly instead of silently dropping data.
(AgentSpec, RunManifest, Action and Message are stored whole as JSON and need no entry.)"""


def dumps(value: Any) -> str:
    """JSON text of a JSON-native value (key order kept, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def loads(text: str | None) -> Any:
    """Inverse of :func:`dumps`; ``None`` stays ``None``."""
    if text is None:
        return None
    try:
        # pydantic-core's parser is ~3× faster than json's, on every step's info of every
        # trajectory read; it refuses lone surrogates ("\ud800"), which json keeps.
        return from_json(text)
    except ValueError:
        return json.loads(text)


def now() -> datetime:
    """The current time, UTC."""
    return datetime.now(UTC)


# -- agent specs ----------------------------------------------------------------------------


def agent_spec_row(spec: AgentSpec) -> dict[str, Any]:
    """The ``agent_specs`` row of ``spec``."""
    return {
        "hash": spec.hash(),
        "name": spec.name,
        "spec": spec.model_dump_json(),
        "parents": dumps(spec.parents),
        "created_at": now(),
    }


def agent_spec_from_row(row: Row) -> AgentSpec:
    """The AgentSpec stored in an ``agent_specs`` row (or a row with its ``spec`` column)."""
    return AgentSpec.model_validate_json(row["spec"])


# -- tasks ----------------------------------------------------------------------------------


def task_row(task: TaskSpec) -> dict[str, Any]:
    """The ``tasks`` row of ``task``."""
    data = task.model_dump(mode="json")
    return {
        "hash": task.hash(),
        "env": task.env,
        "task_id": task.id,
        "seed": task.seed,
        "split": task.split,
        "knobs": dumps(data["knobs"]),
        "metadata": dumps(data["metadata"]),
    }


def task_from_row(row: Row) -> TaskSpec:
    """The TaskSpec of a ``tasks`` row (columns ``env, task_id, seed, split, knobs, metadata``)."""
    return TaskSpec(
        env=row["env"],
        id=row["task_id"],
        seed=row["seed"],
        split=row["split"],
        knobs=loads(row["knobs"]),
        metadata=loads(row["metadata"]),
    )


# -- runs -----------------------------------------------------------------------------------


def run_row(manifest: RunManifest, n_tasks: int) -> dict[str, Any]:
    """The ``runs`` row of a new run (status ``running``)."""
    return {
        "id": manifest.run_id,
        "created_at": manifest.created_at,
        "env": manifest.env.name,
        "agent_hash": manifest.agent_hash,
        "config_hash": manifest.config_hash,
        "manifest": manifest.model_dump_json(),
        "status": "running",
        "summary": None,
        "n_tasks": n_tasks,
        "epochs": manifest.epochs,
    }


def manifest_from_row(row: Row) -> RunManifest:
    """The RunManifest stored in a ``runs`` row."""
    return RunManifest.model_validate_json(row["manifest"])


# -- trajectories and steps -----------------------------------------------------------------


def trajectory_row(t: Trajectory) -> dict[str, Any]:
    """The ``trajectories`` row of ``t`` (its steps and feedback go in their own tables)."""
    o = t.outcome
    return {
        "id": t.id,
        "run_id": t.run_id,
        "task_hash": t.task.hash(),
        "agent_hash": t.agent_hash,
        "epoch": t.epoch,
        "seed": t.seed,
        "key": t.key,
        "success": None if o is None else o.success,
        "reward": None if o is None else o.reward,
        "error_kind": None if o is None else o.error_kind,
        "error": None if o is None else o.error,
        "evidence": None if o is None else o.evidence,
        "components": None if o is None else dumps(o.components),
        "input_tokens": t.usage.input_tokens,
        "output_tokens": t.usage.output_tokens,
        "calls": t.usage.calls,
        "cost_usd": t.usage.cost_usd,
        "invalid_actions": t.invalid_actions,
        "infra_retries": t.infra_retries,
        "n_steps": len(t.steps),
        "started_at": t.started_at,
        "ended_at": t.ended_at,
        "messages": _MESSAGES.dump_json(t.messages).decode(),
    }


def trajectory_from_row(
    row: Row,
    task: TaskSpec,
    *,
    steps: list[Step],
    feedback: list[Feedback],
) -> Trajectory:
    """Rebuild a Trajectory from its row. ``row["messages"]`` may be absent (a light
    listing), which gives ``messages == []``."""
    outcome = None
    if row["success"] is not None:
        outcome = Outcome(
            success=bool(row["success"]),
            reward=row["reward"],
            components=loads(row["components"]) or {},
            error_kind=row["error_kind"],
            error=row["error"],
            evidence=row["evidence"] or "",
        )
    messages = row.get("messages")
    return Trajectory(
        id=row["id"],
        run_id=row["run_id"],
        task=task,
        agent_hash=row["agent_hash"],
        epoch=row["epoch"],
        seed=row["seed"],
        messages=[] if messages is None else _MESSAGES.validate_json(messages),
        steps=steps,
        outcome=outcome,
        feedback=feedback,
        usage=Usage(
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            calls=row["calls"],
            cost_usd=row["cost_usd"],
        ),
        invalid_actions=row["invalid_actions"],
        infra_retries=row["infra_retries"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
    )


def step_row(trajectory_id: str, s: Step) -> dict[str, Any]:
    """The ``steps`` row of step ``s`` of trajectory ``trajectory_id``."""
    return {
        "trajectory_id": trajectory_id,
        "index": s.index,
        "action": None if s.action is None else s.action.model_dump_json(),
        "invalid_action": s.invalid_action,
        "observation": s.observation,
        "reward": s.reward,
        "terminated": s.terminated,
        "truncated": s.truncated,
        "messages": _MESSAGES.dump_json(s.messages).decode(),
        "usage": s.usage.model_dump_json(),
        "model_seconds": s.model_seconds,
        "env_seconds": s.env_seconds,
        "info": dumps(s.model_dump(mode="json", include={"info"})["info"]),
        "logprobs": None if s.logprobs is None else s.logprobs.model_dump_json(),
    }


def step_from_row(row: Row, messages: bool = True) -> Step:
    """The Step of a ``steps`` row; ``messages=False`` for a row read without its messages
    and logprobs (the heavy columns: the step gets neither)."""
    logprobs = row.get("logprobs") if messages else None
    return Step(
        index=row["index"],
        messages=_MESSAGES.validate_json(row["messages"]) if messages else [],
        action=None if row["action"] is None else Action.model_validate_json(row["action"]),
        invalid_action=row["invalid_action"],
        observation=row["observation"],
        reward=row["reward"],
        terminated=bool(row["terminated"]),
        truncated=bool(row["truncated"]),
        usage=Usage.model_validate_json(row["usage"]),
        model_seconds=row["model_seconds"],
        env_seconds=row["env_seconds"],
        info=loads(row["info"]),
        logprobs=None if logprobs is None else TokenLogprobs.model_validate_json(logprobs),
    )


# -- feedback -------------------------------------------------------------------------------


def feedback_row(fb: Feedback, seq: int) -> dict[str, Any]:
    """The ``feedback`` row of ``fb``; ``seq`` orders records of the same trajectory (or run)."""
    tg = fb.target
    return {
        "id": fb.id,
        "seq": seq,
        "source": fb.source,
        "target_kind": tg.kind,
        "run_id": tg.run_id,
        "trajectory_id": tg.trajectory_id,
        "step_index": tg.step_index,
        "span_start": None if tg.span is None else tg.span[0],
        "span_end": None if tg.span is None else tg.span[1],
        "name": fb.name,
        "value": dumps(fb.value),
        "rationale": fb.rationale,
        "author": fb.author,
        "created_at": fb.created_at,
        "supersedes": fb.supersedes,
        "versus": fb.versus,
        "call_id": fb.call_id,
    }


def feedback_from_row(row: Row) -> Feedback:
    """The Feedback of a ``feedback`` row."""
    span = None
    if row["span_start"] is not None and row["span_end"] is not None:
        span = (row["span_start"], row["span_end"])
    return Feedback(
        id=row["id"],
        source=row["source"],
        target=FeedbackTarget(
            kind=row["target_kind"],
            run_id=row["run_id"],
            trajectory_id=row["trajectory_id"],
            step_index=row["step_index"],
            span=span,
        ),
        name=row["name"],
        value=loads(row["value"]),
        rationale=row["rationale"],
        author=row["author"],
        created_at=row["created_at"],
        supersedes=row["supersedes"],
        versus=row["versus"],
        call_id=row["call_id"],
    )


# -- judgements -----------------------------------------------------------------------------

_CALLS: TypeAdapter[list[JudgeCall]] = TypeAdapter(list[JudgeCall])


def judgement_row(j: Judgement) -> dict[str, Any]:
    """The ``judge_calls`` row of ``j``."""
    return {
        "id": j.id, "run_id": j.run_id, "trajectory_id": j.trajectory_id, "versus": j.versus,
        "judge": j.judge, "judge_hash": j.judge_hash, "model": j.model, "status": j.status,
        "error": j.error, "calls": _CALLS.dump_json(j.calls).decode(),
        "usage": j.usage.model_dump_json(), "seconds": j.seconds, "detail": dumps(j.detail),
        "created_at": j.created_at,
    }


def judgement_from_row(row: Row, *, calls: bool = True) -> Judgement:
    """The Judgement of a ``judge_calls`` row (``calls=False`` leaves the heavy calls out)."""
    return Judgement(
        id=row["id"], run_id=row["run_id"], trajectory_id=row["trajectory_id"],
        versus=row["versus"], judge=row["judge"], judge_hash=row["judge_hash"],
        model=row["model"], status=row["status"], error=row["error"],
        calls=_CALLS.validate_json(row["calls"]) if calls else [],
        usage=Usage.model_validate_json(row["usage"]), seconds=row["seconds"],
        detail=loads(row["detail"]), created_at=row["created_at"],
    )
