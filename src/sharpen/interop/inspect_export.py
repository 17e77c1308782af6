"""A stored run as an Inspect AI log, for ``inspect view`` (``sharpen export RUN --format inspect``).

The log is built from Inspect's own models and written by ``inspect_ai.log.write_eval_log``
(``.eval``, or ``.json`` by the file's extension), so any Inspect that reads this version's
logs opens it:

- the eval: task = the environment's name (``inspect:`` dropped for an imported run), model =
  the spec's model, dataset = the run's tasks, epochs = the run's; the plan is the agent (an
  imported run's own solver plan); the sharpen run id, spec hash and environment in metadata;
- one sample per trajectory, epoch counted from 1 as Inspect does; its messages, usage and
  times; the outcome as the primary score (``C``/``I``, the reward and components in its
  metadata) named after the imported log's scorer, else ``sharpen``; the latest
  trajectory-level verifier, judge and human feedback as further scores;
- an attempt that did not count (``infra``, ``env``, ``judge``, ``user_sim``) as a sample
  error, unscored, as Inspect leaves errored samples out of its metrics;
- the results: ``accuracy`` and ``stderr`` computed by Inspect's own metrics over the samples'
  epoch means (its ``mean`` reducer).
"""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalPlanStep,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage
from inspect_ai.scorer import SampleScore, Score, accuracy, mean_score, stderr

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback
from sharpen.core.hashing import content_hash
from sharpen.core.messages import Usage
from sharpen.core.trajectory import Trajectory
from sharpen.interop.inspect_log import ENV_PREFIX
from sharpen.interop.inspect_messages import to_inspect
from sharpen.store import RunRecord, Store

_STATUS = {"finished": "success", "interrupted": "cancelled", "failed": "error", "running": "started"}
_FEEDBACK_SOURCES = ("verifier", "judge", "human")


def _usage(u: Usage) -> ModelUsage:
    return ModelUsage(input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                      total_tokens=u.total_tokens, total_cost=u.cost_usd)


def _feedback_scores(records: list[Feedback], taken: str) -> dict[str, Score]:
    """The latest scalar record per (source, name) about the whole trajectory, as scores:
    named as the record is for verifier and judge (what an import produced), ``human:NAME``."""
    superseded = {r.supersedes for r in records if r.supersedes}
    out: dict[str, Score] = {}
    for r in records:
        if (r.source in _FEEDBACK_SOURCES and r.target.kind == "trajectory" and r.value is not None
                and r.id not in superseded and r.versus is None):
            key = f"human:{r.name}" if r.source == "human" else r.name
            if key != taken:
                out[key] = Score(value=r.value, explanation=r.rationale or None,
                                 metadata={"source": r.source, "author": r.author})
    return out


def _sample(t: Trajectory, model: str, scorer: str) -> EvalSample:
    counts = t.outcome is not None and t.outcome.counts
    scores: dict[str, Score] = {}
    if t.outcome is not None and counts:
        o = t.outcome
        scores[scorer] = Score(
            value="C" if o.success else "I", answer=_last_reply(t),
            explanation="\n".join(filter(None, [o.evidence, o.error])) or None,
            metadata={"reward": o.reward, "components": o.components, "error_kind": o.error_kind})
    scores.update(_feedback_scores(t.feedback, scorer))
    error = None
    if t.outcome is not None and not counts:
        message = f"{t.outcome.error_kind}: {t.outcome.error or 'no detail'}"
        error = EvalError(message=message, traceback="", traceback_ansi="")
    target = t.task.metadata.get("target", "")
    first_user = next((m.content for m in t.messages if m.role == "user"), None)
    return EvalSample(
        id=t.task.metadata.get("inspect_id", t.task.id), epoch=t.epoch + 1,
        input=first_user or t.task.id,
        target=target if isinstance(target, str | list) else str(target),
        messages=[to_inspect(m, model) for m in t.messages],
        output=ModelOutput.from_content(model, _last_reply(t)),
        scores=scores or None, error=error, uuid=t.id,
        metadata={"sharpen_trajectory_id": t.id, "task_hash": t.task.hash(), "seed": t.seed,
                  "split": t.task.split, "steps": len(t.steps),
                  "invalid_actions": t.invalid_actions},
        model_usage={model: _usage(t.usage)} if t.usage.calls else {},
        started_at=t.started_at.isoformat(),
        completed_at=t.ended_at.isoformat() if t.ended_at else None,
        total_time=t.wall_seconds, working_time=t.wall_seconds,
    )


def _last_reply(t: Trajectory) -> str:
    return next((m.content or "" for m in reversed(t.messages) if m.role == "assistant"), "")


def _results(samples: list[EvalSample], scorer: str) -> EvalResults:
    """Inspect's accuracy and stderr over the samples' epoch means, as ``inspect eval``
    reports them."""
    by_id: dict[str, list[Score]] = {}
    for s in samples:
        if s.scores and scorer in s.scores:
            by_id.setdefault(str(s.id), []).append(s.scores[scorer])
    reduced = [SampleScore(score=mean_score()(v), sample_id=k) for k, v in by_id.items()]
    metrics: dict[str, EvalMetric] = {}
    if reduced:
        metrics = {name: EvalMetric(name=name, value=float(m(reduced)))  # type: ignore[arg-type]
                   for name, m in (("accuracy", accuracy()), ("stderr", stderr()))}
    scored = sum(1 for s in samples if s.scores and scorer in s.scores)
    return EvalResults(
        total_samples=len(samples), completed_samples=scored,
        scores=[EvalScore(name=scorer, scorer=scorer, reducer="mean", scored_samples=len(reduced),
                          unscored_samples=len({str(s.id) for s in samples}) - len(reduced),
                          metrics=metrics)])


def _plan(record: RunRecord) -> EvalPlan:
    agent = record.agent.agent
    if agent.name == "inspect" and isinstance(agent.args.get("plan"), list):
        steps = [EvalPlanStep(solver=s["solver"], params=s.get("params", {}))
                 for s in agent.args["plan"]]
    else:
        steps = [EvalPlanStep(solver=f"sharpen/{agent.name}", params=dict(agent.args))]
    return EvalPlan(name="plan", steps=steps)


def eval_log(store: Store, run_id: str) -> EvalLog:
    """The Inspect log of the stored run ``run_id`` (see the module docstring)."""
    record = store.get_run(run_id)
    m = record.manifest
    model = record.model_label
    scorer = str(m.extra.get("scorer") or "sharpen") if m.extra.get("source") == "inspect" else "sharpen"
    trajectories = sorted(store.iter_trajectories(run_id), key=lambda t: (t.epoch, t.task.id))
    samples = [_sample(t, model, scorer) for t in trajectories]
    tasks = store.tasks_for(run_id)
    total = Usage()
    for t in trajectories:
        total = total + t.usage
    started = min((t.started_at for t in trajectories), default=m.created_at)
    ended = max((t.ended_at for t in trajectories if t.ended_at), default=started)
    known = GenerateConfig.model_fields.keys()
    spec = EvalSpec(
        eval_id=content_hash(["sharpen export", run_id], 22), run_id=run_id,
        created=m.created_at.isoformat(timespec="seconds"), task=m.env.name.removeprefix(ENV_PREFIX),
        task_id=content_hash(["sharpen task", run_id], 22), task_version=0, task_args=dict(m.env.args),
        dataset=EvalDataset(name=m.env.name, samples=len(tasks),
                            sample_ids=[t.metadata.get("inspect_id", t.id) for t in tasks]),
        model=model, model_args=dict(record.agent.model.args),
        model_generate_config=GenerateConfig(
            **{k: v for k, v in record.agent.params.items() if k in known}),
        config=EvalConfig(epochs=m.epochs),
        packages={"sharpen": version("sharpen"), "inspect_ai": version("inspect_ai")},
        metadata={"sharpen": {"run_id": run_id, "agent_hash": m.agent_hash, "agent": record.agent.name,
                              "config_hash": m.config_hash, "env": m.env.model_dump(mode="json")}},
    )
    return EvalLog(
        eval=spec, plan=_plan(record), results=_results(samples, scorer),
        stats=EvalStats(started_at=started.isoformat(), completed_at=ended.isoformat(),
                        model_usage={model: _usage(total)} if total.calls else {}),
        status=_STATUS.get(record.status, "started"),  # type: ignore[arg-type]
        samples=samples,
    )


def default_name(log: EvalLog) -> str:
    """Inspect's own file naming, ``<created>_<task>_<task id>.eval`` with ``_ / : +`` made
    ``-`` in each part, so ``inspect view`` lists it as it lists its own logs."""
    parts = (log.eval.created, log.eval.task, log.eval.task_id)
    return "_".join(re.sub(r"[_/:+]", "-", p) for p in parts) + ".eval"


def export_runs(store: Store, refs: list[str], output: Path | None) -> list[Path]:
    """Write each run ``refs`` names as an Inspect log: to ``output`` when it is a file and
    one run is named (``.eval``, or ``.json``), else into the folder ``output`` (default: the
    current one) under Inspect's naming. Returns the paths written."""
    ids = [store.resolve_run(r) for r in refs]
    as_file = output is not None and output.suffix in (".eval", ".json")
    if as_file and len(ids) > 1:
        raise UserError(f"{len(ids)} runs cannot go to one file {output}",
                        "give -o a folder: each run is written there as one log")
    written = []
    for run_id in ids:
        log = eval_log(store, run_id)
        path = output if as_file and output else (output or Path.cwd()) / default_name(log)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_eval_log(log, str(path))
        written.append(path)
    return written

