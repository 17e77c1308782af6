"""Judging stored runs: :func:`judge_run` scores every judgeable trajectory of a run (or every
pair of two runs) with one judge and stores a :class:`~sharpen.core.judgement.Judgement`, and
the judge's feedback, per trajectory as it finishes.

- **Resumable.** A judgement is stored with its feedback in one transaction, at most one per
  (trajectory, pair, judge hash); a judge killed at any point leaves each trajectory judged or
  not, and ``resume=True`` judges the rest (failed judgements are tried again).
- **Judge failures are the judge's.** A :class:`JudgeError` (a reply that never parsed, a
  transcript that did not fit) is stored as a judgement with ``status="error"`` — error kind
  ``judge``, counted and reported, never a verdict on the agent. An infra failure of the judge
  model that outlives its retries stops the command: what finished is stored.
- **Only episodes the agent played are judged**: trajectories whose outcome is an ``env``,
  ``infra`` or ``user_sim`` error say nothing about the agent and are skipped.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from sharpen.core.errors import InfraError, UserError
from sharpen.core.feedback import Feedback
from sharpen.core.hashing import content_hash
from sharpen.core.judgement import JudgeCall, Judgement, JudgementStatus
from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import ENV
from sharpen.judges.base import (
    JUDGE,
    REFERENCE,
    Judge,
    JudgeError,
    JudgeInfo,
    Verdict,
    as_verdict,
    judge_info,
)
from sharpen.models.base import MODEL, ChatModel, Completion, ModelWrapper
from sharpen.models.pricing import PricedModel, PriceTable
from sharpen.models.structured import ResponseSchema
from sharpen.runner.retry import RetryingModel, RetryPolicy
from sharpen.store import Store


@runtime_checkable
class PairJudge(Protocol):
    """A judge that compares pairs (``pairwise = True``)."""

    async def judge_pair(self, a: Trajectory, b: Trajectory, model: ChatModel) -> Verdict: ...


class JudgeSetup(BaseModel):
    """A judge and its model, identified: what :func:`judge_run` needs besides the store."""

    judge: PluginRef
    model: PluginRef

    def hash(self, judge: Judge | None = None, registry: Registry = REGISTRY) -> str:
        """The judge's version: its ref (rubric included), its prompt and its model — a judge
        with another prompt or model is another judge, whose scores are kept apart. ``judge``:
        the judge already built from this ref (else it is built from ``registry``)."""
        built = judge if judge is not None else registry.create(JUDGE, self.judge)
        return content_hash({"judge": self.judge, "prompt": judge_info(built).prompt,
                             "model": self.model})


class JudgeSummary(BaseModel):
    """What one :func:`judge_run` did."""

    run_id: str
    versus: str | None
    judge: str
    judge_hash: str
    model: str
    judged: int
    """Judgements stored by this call that gave a verdict."""
    errors: int
    """Judgements stored by this call that gave none (error kind ``judge``)."""
    already: int
    """Trajectories (or pairs) judged before and skipped (resume)."""
    skipped: int
    """Trajectories not judged: their episode ended in an env/infra/user_sim error, or (pairs)
    the other run has no trajectory of the same task and epoch."""
    usage: Usage
    """The judge model's usage in this call."""
    seconds: float
    first_errors: list[str]
    """Up to three error messages, for the summary."""


class _Recorder(ModelWrapper):
    """Keeps every call of one judgement (prompt, reply, usage)."""

    def __init__(self, inner: ChatModel) -> None:
        super().__init__(inner)
        self.calls: list[JudgeCall] = []
        self.usage = Usage()

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, *,
                       response_schema: ResponseSchema | None = None) -> Completion:
        out = await super().complete(messages, tools, params, response_schema=response_schema)
        self.calls.append(JudgeCall(messages=list(messages), reply=out.message.content or "",
                                    finish_reason=out.finish_reason))
        self.usage = self.usage + out.usage
        return out


RUBRICS = Path(__file__).with_name("rubrics")
"""Rubrics shipped with sharpen, named ``rubric:NAME`` (``rubric:solved``)."""


def resolve_judge(text: str, registry: Registry = REGISTRY) -> PluginRef:
    """``--judge``: a rubric file (YAML with ``criteria``), a shipped rubric ``rubric:NAME``,
    or a judge name registered in ``registry``. A rubric becomes ``{name: rubric, args:
    {rubric: ...}}`` — its content, not its path, so the judge's hash changes when the
    rubric does."""
    from sharpen.judges.rubric import Rubric

    if text.startswith("rubric:"):
        path = RUBRICS / f"{text.removeprefix('rubric:')}.yaml"
        if not path.is_file():
            shipped = ", ".join(f"rubric:{p.stem}" for p in sorted(RUBRICS.glob("*.yaml")))
            raise UserError(f"no shipped rubric {text!r}", f"use one of {shipped}, or a file")
        text = str(path)
    if text.endswith((".yaml", ".yml", ".json")) or Path(text).is_file():
        rubric = Rubric.load(text)
        return PluginRef(name="rubric", args={"rubric": rubric.model_dump(mode="json")})
    registry.get(JUDGE, text)  # unknown names fail here, with suggestions
    return PluginRef(name=text)


def build_judge_model(ref: PluginRef, registry: Registry = REGISTRY,
                      retries: int = 4) -> ChatModel:
    """The judge's model: priced (cost is shown) and retried on infra errors like a run's."""
    inner = PricedModel(registry.create(MODEL, ref), PriceTable.load())
    return RetryingModel(inner, RetryPolicy(max_retries=retries), random.Random(0))


def judgeable(t: Trajectory) -> bool:
    """Whether the agent played the episode (its outcome is a verdict or the agent's error)."""
    return t.outcome is not None and t.outcome.error_kind in (None, "agent")


def _with_reference(t: Trajectory, env: Any) -> Trajectory:
    actions = env.reference_actions(t.task)
    ref = ("\n".join(f"{a.tool}({a.arguments})" for a in actions) if actions
           else env.reference_solution(t.task))
    if not ref:
        return t
    task = t.task.model_copy(update={"metadata": {**t.task.metadata, REFERENCE: ref}})
    return t.model_copy(update={"task": task})


async def judge_run(
    store: Store,
    run_id: str,
    setup: JudgeSetup,
    *,
    versus: str | None = None,
    resume: bool = False,
    limit: int | None = None,
    concurrency: int = 1,
    model: ChatModel | None = None,
    on_done: Callable[[Judgement, int, int], None] | None = None,
    registry: Registry = REGISTRY,
) -> JudgeSummary:
    """Judge run ``run_id`` (against run ``versus`` for a pairwise judge) with ``setup``.

    ``on_done(judgement, done, total)`` is told of each stored judgement (progress).
    ``model`` overrides the judge model built from ``setup.model`` (tests, the validity
    command). Raises :class:`UserError` when the run was judged by this judge already and
    ``resume`` is false, or when a pairwise judge gets no ``versus`` (or a pointwise one
    does)."""
    judge: Judge = registry.create(JUDGE, setup.judge)
    info = judge_info(judge)
    jhash = setup.hash(judge)
    _check_pairing(info, versus)
    stored = store.judgements(run_id, jhash)
    done = {(j.trajectory_id, j.versus) for j in stored if j.status == "ok"}
    if stored and not resume:
        raise UserError(f"run {run_id[:12]} already has {len(stored)} judgement(s) by this judge",
                        "add --resume to judge only the rest (failed ones are tried again)")
    items, skipped = _items(store, run_id, versus, limit)
    todo = [(a, b) for a, b in items if (a.id, b.id if b else "") not in done]
    own = model is None
    chat = model if model is not None else build_judge_model(setup.model, registry)
    env = registry.create(ENV, store.get_run(run_id).manifest.env) if info.needs_reference \
        else None
    title = info.title or setup.judge.name
    summary = JudgeSummary(run_id=run_id, versus=versus, judge=title, judge_hash=jhash,
                           model=chat.name, judged=0, errors=0, already=len(items) - len(todo),
                           skipped=skipped, usage=Usage(), seconds=0.0, first_errors=[])
    gate = asyncio.Semaphore(max(1, concurrency))
    start = time.monotonic()

    async def one(a: Trajectory, b: Trajectory | None) -> None:
        async with gate:
            try:
                j, records = await _judge_one(judge, chat, run_id, jhash, title, a, b, env)
            except InfraError as exc:  # the model, not the judge: stop, keep what is done
                raise UserError(f"the judge model failed after its retries: {exc}",
                                "check that its endpoint is up; judgements made so far are "
                                "stored, and --resume judges the rest") from exc
        store.save_judgement(j, _stamped(j, records))
        summary.usage = summary.usage + j.usage
        if j.status == "ok":
            summary.judged += 1
        else:
            summary.errors += 1
            if len(summary.first_errors) < 3 and j.error:
                summary.first_errors.append(j.error)
        if on_done is not None:
            on_done(j, summary.judged + summary.errors, len(todo))

    try:
        await asyncio.gather(*(one(a, b) for a, b in todo))
    finally:
        summary.seconds = time.monotonic() - start
        if env is not None:
            await env.close()
        if own:
            await chat.aclose()
    return summary


def judge_author(j: Judgement) -> str:
    """The ``author`` of a judgement's feedback: the judge, its version and its model."""
    return f"{j.judge}@{j.judge_hash[:8]} ({j.model})"


def _stamped(j: Judgement, records: Sequence[Feedback]) -> list[Feedback]:
    """The judge's records as stored: authored by the judge's version, linked to the
    judgement, and on the judged run (a plug-in judge need not set these)."""
    out = []
    for fb in records:
        target = fb.target if fb.target.run_id else fb.target.model_copy(
            update={"run_id": j.run_id})
        out.append(fb.model_copy(update={"author": judge_author(j), "call_id": j.id,
                                         "source": "judge", "target": target}))
    return out


def _check_pairing(info: JudgeInfo, versus: str | None) -> None:
    if info.pairwise and versus is None:
        raise UserError("a pairwise judge compares two runs", "name the other run with --versus")
    if not info.pairwise and versus is not None:
        raise UserError("--versus is for pairwise judges only",
                        "use --judge pairwise, or leave --versus out")


def _items(store: Store, run_id: str, versus: str | None,
           limit: int | None) -> tuple[list[tuple[Trajectory, Trajectory | None]], int]:
    """What to judge, in the run's order: each judgeable trajectory (paired with the other
    run's trajectory of the same task and epoch), and how many were skipped."""
    mine = list(store.iter_trajectories(run_id))
    others: dict[tuple[str, int], Trajectory] = {}
    if versus is not None:
        others = {(t.task.hash(), t.epoch): t for t in store.iter_trajectories(versus)
                  if judgeable(t)}
    items: list[tuple[Trajectory, Trajectory | None]] = []
    skipped = 0
    for t in mine:
        other = others.get((t.task.hash(), t.epoch)) if versus is not None else None
        if not judgeable(t) or (versus is not None and other is None):
            skipped += 1
            continue
        items.append((t, other))
    return (items if limit is None else items[:limit]), skipped


async def _judge_one(judge: Judge, chat: ChatModel, run_id: str, jhash: str, title: str,
                     a: Trajectory, b: Trajectory | None,
                     env: Any) -> tuple[Judgement, list[Feedback]]:
    rec = _Recorder(chat)
    t0 = time.monotonic()
    if env is not None:
        a = _with_reference(a, env)
    status: JudgementStatus = "ok"
    error: str | None = None
    verdict = Verdict(feedback=[])
    try:
        if b is not None:
            assert isinstance(judge, PairJudge)
            verdict = await judge.judge_pair(a, b, rec)
        else:
            verdict = as_verdict(await judge.judge(a, rec))
        if not verdict.feedback:
            raise JudgeError("the judge returned no feedback")
    except JudgeError as exc:
        status, error = "error", str(exc)
    j = Judgement(run_id=run_id, trajectory_id=a.id, versus=b.id if b else "", judge=title,
                  judge_hash=jhash, model=chat.name, status=status, error=error,
                  calls=rec.calls, usage=rec.usage, seconds=time.monotonic() - t0,
                  detail=verdict.detail)
    return j, (verdict.feedback if status == "ok" else [])
