"""Inspect AI logs into the store: one run per log, one trajectory per sample and epoch.

``sharpen import inspect LOG...`` reads each ``.eval`` / ``.json`` log through
``inspect_ai.log.read_eval_log`` (so every log version Inspect reads is read) and stores:

- **the run**: environment ``inspect:<task>`` (its args: the task's arguments); an AgentSpec
  from the model (its args: the model args), the solver plan (agent ``inspect``, its args: the
  plan's steps) and the generate config; the manifest records the log's path, eval id, run id,
  task id and primary scorer, and the packages the log names (``inspect_ai``'s version);
- **the tasks**: one per sample id, in the dataset's order, the target in its metadata;
- **the trajectories**: one per (sample, epoch), epochs counted from 0 as sharpen does
  (Inspect's epoch 1 is epoch 0); messages kept; the model's turns as steps, tool calls as
  actions, usage where the transcript has it (:mod:`~sharpen.interop.inspect_messages`);
- **the outcome** from the primary scorer (the first of the log's results): ``C``/``I``,
  ``1``/``0``, ``True``/``False`` give success; every other scorer is feedback, source
  ``judge`` for a model-graded scorer (name containing ``model_graded``) and ``verifier``
  otherwise;
- **errors**: a sample that ended in an error is ``infra`` (excluded from the success rate,
  as Inspect leaves errored samples out of its metrics); one that hit a limit keeps its score
  (Inspect scores it), or fails as the agent's when unscored.

Ids are derived from the log's eval id and each sample's uuid, so importing a log again
writes nothing new. With a scorer whose values are 0/1 and an equal number of epochs per
sample, ``sharpen report``'s success equals the log's own ``accuracy``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inspect_ai.log import (
    EvalLog,
    EvalSample,
    EvalSampleSummary,
    read_eval_log,
    read_eval_log_sample_summaries,
    read_eval_log_samples,
)
from pydantic import BaseModel

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.hashing import content_hash
from sharpen.core.manifest import RunManifest, package_versions
from sharpen.core.messages import Usage
from sharpen.core.outcome import Outcome
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.interop.inspect_messages import from_inspect, scalar, steps_of, usage_of, verdict
from sharpen.runner.summary import SummaryBuilder
from sharpen.store import RunStatus, Store

ENV_PREFIX = "inspect:"
"""Imported runs' environment is ``inspect:<task>``."""

BATCH = 200
"""Trajectories stored per transaction while a log's samples stream in."""


class Imported(BaseModel):
    """What one log became."""

    run_id: str
    """The run it was stored as."""
    log: str
    """The log's path."""
    task: str
    """Inspect's task name."""
    model: str
    """Inspect's model."""
    samples: int
    """Samples (× epochs) in the log."""
    written: int
    """Trajectories newly stored (0 when the log was imported before)."""
    scorer: str | None
    """The primary scorer, whose value is the outcome."""
    accuracy: float | None
    """The log's own accuracy of that scorer, when it has one."""


def _json_safe(value: Any) -> Any:
    """``value`` as plain JSON (what Inspect records may hold objects that do not hash)."""
    return json.loads(json.dumps(value, default=str))


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    t = datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def is_model_graded(scorer: str) -> bool:
    """Whether a scorer's verdicts are a model's (``model_graded_qa``, ``model_graded_fact``
    and scorers named after them): their records are ``judge`` feedback."""
    return "model_graded" in scorer


def read_header(path: str | Path) -> tuple[EvalLog, list[EvalSampleSummary]]:
    """The log's header (no samples) and its sample summaries; a UserError when it cannot be
    read or has no samples."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"no Inspect log at {p}", "give the path of a .eval or .json log "
                        "(Inspect writes them under ./logs)")
    try:
        header = read_eval_log(str(p), header_only=True)
        summaries = read_eval_log_sample_summaries(str(p))
    except Exception as exc:  # whatever the reader fails on, it is the file (or its version)
        raise UserError(f"{p} is not an Inspect log Inspect {_version()} can read: {exc}",
                        "check the file, or read it with the Inspect version that wrote it") from exc
    if not summaries:
        raise UserError(f"Inspect log {p} has no samples",
                        "import a log written with samples (Inspect's log_samples on)")
    return header, summaries


def _version() -> str:
    from importlib.metadata import version

    return version("inspect_ai")


def agent_spec_of(log: EvalLog) -> AgentSpec:
    """The AgentSpec an Inspect eval ran: its model, solver plan and generate config."""
    plan = [{"solver": s.solver, "params": s.params} for s in log.plan.steps]
    solvers = "+".join(s.solver for s in log.plan.steps) or "solver"
    params = log.eval.model_generate_config.model_dump(mode="json", exclude_none=True)
    return AgentSpec(
        name=f"{log.eval.model} · {solvers}",
        model=PluginRef(name=log.eval.model, args=_json_safe(
            {k: v for k, v in (log.eval.model_args or {}).items() if v is not None})),
        agent=PluginRef(name="inspect", args=_json_safe({"plan": plan})),
        params=params, components={},
    )


def primary_scorer(log: EvalLog, summaries: list[EvalSampleSummary]) -> str | None:
    """The name of the scorer whose value is the outcome: the log's first result, else the
    first score any sample has."""
    if log.results is not None and log.results.scores:
        return log.results.scores[0].name
    return next((next(iter(s.scores)) for s in summaries if s.scores), None)


def tasks_of(log: EvalLog, summaries: list[EvalSampleSummary]) -> list[TaskSpec]:
    """One task per sample id, in the dataset's order (metadata as the summaries hold it)."""
    env = ENV_PREFIX + log.eval.task
    seen: dict[str, TaskSpec] = {}
    for s in summaries:
        key = str(s.id)
        if key not in seen:
            target = s.target if isinstance(s.target, str) else list(s.target)
            seen[key] = TaskSpec(env=env, id=key, metadata=_json_safe(
                {**(s.metadata or {}), "target": target, "inspect_id": s.id}))
    order = [str(i) for i in log.eval.dataset.sample_ids or []]
    rank = {sid: i for i, sid in enumerate(order)}
    return sorted(seen.values(), key=lambda t: rank.get(t.id, len(rank)))


def _outcome(sample: EvalSample, primary: str | None) -> Outcome | None:
    if sample.error is not None:
        return Outcome(success=False, error_kind="infra", error=sample.error.message)
    limit = (f"hit the {sample.limit.type} limit ({sample.limit.limit:g})"
             if sample.limit is not None else "")
    score = (sample.scores or {}).get(primary) if primary else None
    if score is None:
        if limit:
            return Outcome(success=False, error_kind="agent", error=limit)
        return None  # not scored (Inspect's --no-score): counted as unscored
    success, reward, components = verdict(score.value)
    evidence = "\n".join(filter(None, [score.explanation, limit]))
    return Outcome(success=success, reward=reward, components=components, evidence=evidence[:2000])


def trajectory_of(log: EvalLog, sample: EvalSample, run_id: str, task: TaskSpec,
                  agent_hash: str, primary: str | None) -> Trajectory:
    """The trajectory of one sample (one epoch)."""
    scorers = {s.name: s.scorer for s in (log.results.scores if log.results else [])}
    tid = content_hash([log.eval.eval_id, sample.uuid or [str(sample.id), sample.epoch]], 32)
    steps = steps_of(sample.messages, sample.events)
    if sample.limit is not None and steps:
        steps[-1].truncated = True
    # The agent's usage is its turns' (a model-graded scorer's calls are in the sample's
    # model_usage too, but they are the judge's); without a transcript, the sample's total.
    usage = Usage()
    for part in ([s.usage for s in steps] if any(s.usage.calls for s in steps)
                 else [usage_of(u) for u in sample.model_usage.values()]):
        usage = usage + part
    usage.calls = usage.calls or len(steps)  # no transcript: one call a turn
    started = _time(sample.started_at) or _time(log.stats.started_at) or datetime.now(UTC)
    feedback = [
        Feedback(
            id=content_hash([tid, name], 32),
            source="judge" if is_model_graded(scorers.get(name, name)) else "verifier",
            target=FeedbackTarget(kind="trajectory", run_id=run_id, trajectory_id=tid),
            name=name, value=scalar(score.value), rationale=score.explanation or "",
            author=f"inspect:{scorers.get(name, name)}", created_at=started,
        )
        for name, score in (sample.scores or {}).items() if name != primary
    ]
    return Trajectory(
        id=tid, run_id=run_id, task=task, agent_hash=agent_hash, epoch=sample.epoch - 1,
        messages=[from_inspect(m) for m in sample.messages], steps=steps,
        outcome=_outcome(sample, primary), feedback=feedback, usage=usage,
        started_at=started, ended_at=_time(sample.completed_at) or started,
    )


def _status(log: EvalLog) -> RunStatus:
    return {"success": "finished", "error": "failed"}.get(log.status, "interrupted")  # type: ignore[return-value]


def _save(store: Store, batch: list[Trajectory], tally: SummaryBuilder) -> int:
    """Store ``batch`` in one transaction, count it in ``tally``; how many were new."""
    for t in batch:
        tally.add(t)
    return sum(store.save_trajectories(batch))


def import_log(store: Store, path: str | Path) -> Imported:
    """Store the Inspect log at ``path`` as a run (see the module docstring); importing the
    same log again changes nothing."""
    log, summaries = read_header(path)
    spec = agent_spec_of(log)
    tasks = tasks_of(log, summaries)
    by_id = {t.id: t for t in tasks}
    run_id = content_hash({"inspect_eval_id": log.eval.eval_id}, 12)
    primary = primary_scorer(log, summaries)
    epochs = max([log.eval.config.epochs or 1, *(s.epoch for s in summaries)])
    manifest = RunManifest(
        run_id=run_id, created_at=_time(log.eval.created) or datetime.now(UTC),
        env=PluginRef(name=ENV_PREFIX + log.eval.task, args=_json_safe(log.eval.task_args or {})),
        agent_hash=spec.hash(), task_ids=[t.id for t in tasks], epochs=epochs, seed=0,
        config_hash=content_hash({"inspect_eval_id": log.eval.eval_id}),
        isolation=f"inspect sandbox {log.eval.sandbox.type}" if log.eval.sandbox else "inspect",
        versions={**package_versions(), **log.eval.packages},
        python="", platform="imported from an Inspect log",
        extra={"source": "inspect", "log": str(Path(path).resolve()),
               "eval_id": log.eval.eval_id, "inspect_run_id": log.eval.run_id,
               "task_id": log.eval.task_id, "task_version": log.eval.task_version,
               "model": log.eval.model, "scorer": primary, "inspect_status": log.status},
    )
    store.create_run(manifest, spec, tasks)
    # Samples stream from the log and are stored in batches: memory stays flat on big logs.
    # Attachments (content Inspect stores once and refers to) resolved in the core fields.
    tally, written, batch = SummaryBuilder(), 0, []
    samples = read_eval_log_samples(str(path), all_samples_required=False, resolve_attachments="core")
    for sample in samples:
        batch.append(trajectory_of(log, sample, run_id, by_id[str(sample.id)], spec.hash(), primary))
        if len(batch) == BATCH:
            written += _save(store, batch, tally)
            batch = []
    written += _save(store, batch, tally)
    started, ended = _time(log.stats.started_at), _time(log.stats.completed_at)
    wall = (ended - started).total_seconds() if started and ended else 0.0
    store.set_run_status(run_id, _status(log), tally.build(run_id, wall).model_dump(mode="json"))
    accuracy = None
    if log.results is not None and log.results.scores and "accuracy" in log.results.scores[0].metrics:
        accuracy = log.results.scores[0].metrics["accuracy"].value
    return Imported(run_id=run_id, log=str(path), task=log.eval.task, model=log.eval.model,
                    samples=len(summaries), written=written, scorer=primary,
                    accuracy=accuracy)
