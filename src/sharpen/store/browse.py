"""Paged, filtered reads for browsing a store (what ``sharpen view`` shows).

Every function takes a :class:`~sharpen.store.store.Store`, opens one short read
transaction (:meth:`Store.read`), and touches only the narrow columns plus the page it
returns: a run page reads the light trajectory columns of one page of tasks; a trajectory
page reads one page of steps. Nothing here writes; annotations go through
:meth:`Store.add_feedback`. Runs are listed by :meth:`Store.list_runs`.

Results are typed data: an attempt carries its :data:`~sharpen.store.records.Verdict`
(computed in SQL by :data:`~sharpen.store.queries.VERDICT`, the rule every rate uses), never
a glyph; drawing it is the viewer's and the CLI's business.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, and_, case, exists, func, or_, select

from sharpen.core.feedback import Feedback
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Step
from sharpen.store import codec
from sharpen.store.queries import COUNTED, SOLVED, TASK_COLUMNS, VERDICT, task_of
from sharpen.store.records import Verdict
from sharpen.store.schema import feedback, run_tasks, steps
from sharpen.store.schema import tasks as task_table
from sharpen.store.schema import trajectories as _T
from sharpen.store.store import Store

SEARCH_LIMIT = 500
"""At most this many trajectories match a full-text search (LIKE over the messages JSON)."""

_LIGHT = [c for c in _T.c if c.name != "messages"]
_ATTEMPT = [_T.c.id, _T.c.epoch, VERDICT.label("verdict"), _T.c.success, _T.c.reward,
            _T.c.error_kind, _T.c.n_steps, _T.c.cost_usd, _T.c.input_tokens, _T.c.output_tokens]
"""The columns of a :class:`TrajRow`."""


# -- a run's tasks ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TrajRow:
    """One trajectory, light (no messages, no steps)."""

    id: str
    epoch: int
    verdict: Verdict
    """How the success rate counts it."""
    success: bool | None
    reward: float | None
    error_kind: str | None
    n_steps: int
    cost_usd: float | None
    input_tokens: int
    output_tokens: int

    @classmethod
    def of(cls, row: Row[Any]) -> TrajRow:
        """The TrajRow of a row selected with :data:`_ATTEMPT`'s columns."""
        return cls(id=row.id, epoch=row.epoch, verdict=row.verdict, success=row.success,
                   reward=row.reward, error_kind=row.error_kind, n_steps=row.n_steps,
                   cost_usd=row.cost_usd, input_tokens=row.input_tokens,
                   output_tokens=row.output_tokens)


@dataclass
class TaskRow:
    """One task of a run with all its epochs (in epoch order)."""

    task: TaskSpec
    task_hash: str
    trajectories: list[TrajRow]


@dataclass
class RunPage:
    """One page of a run's tasks."""

    tasks: list[TaskRow]
    total: int
    """Tasks matching the filters (all pages); capped by :data:`SEARCH_LIMIT` matches when
    searching."""
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


def _trajectory_filter(
    run_id: str, *, failed: bool, error_kind: str | None, source: str | None
) -> list[Any]:
    conds: list[Any] = [_T.c.run_id == run_id]
    if failed:
        conds.append(or_(_T.c.success.is_not(True), _T.c.error_kind.is_not(None)))
    if error_kind == "none":
        conds.append(_T.c.error_kind.is_(None))
    elif error_kind:
        conds.append(_T.c.error_kind == error_kind)
    if source:
        conds.append(exists().where(feedback.c.trajectory_id == _T.c.id, feedback.c.source == source))
    return conds


def run_page(
    store: Store,
    run_id: str,
    *,
    failed: bool = False,
    error_kind: str | None = None,
    source: str | None = None,
    search: str | None = None,
    page: int = 1,
    per_page: int = 50,
) -> RunPage:
    """One page of the run's tasks (in run order), each with all its epochs.

    A task is listed when at least one of its trajectories matches every filter: ``failed``
    (not solved, or errored), ``error_kind`` (``"none"`` for none), ``source`` (has feedback
    from that source) and ``search`` (case-insensitive substring of the conversation's JSON
    text; at most :data:`SEARCH_LIMIT` matching trajectories are considered).
    """
    page = max(1, page)
    conds = _trajectory_filter(run_id, failed=failed, error_kind=error_kind, source=source)
    with store.read() as conn:
        if search:
            matched = (
                select(_T.c.task_hash)
                .where(*conds, _T.c.messages.contains(search, autoescape=True))
                .limit(SEARCH_LIMIT)
                .subquery()
            )
        else:
            matched = select(_T.c.task_hash).where(*conds).subquery()
        hashes = select(matched.c.task_hash).distinct().subquery()
        total = conn.execute(select(func.count()).select_from(hashes)).scalar_one()
        page_hashes = list(conn.execute(
            select(run_tasks.c.task_hash)
            .where(run_tasks.c.run_id == run_id, run_tasks.c.task_hash.in_(select(hashes.c.task_hash)))
            .order_by(run_tasks.c.position)
            .limit(per_page)
            .offset((page - 1) * per_page)
        ).scalars())
        rows = list(conn.execute(
            select(_T.c.task_hash, *_ATTEMPT)
            .where(_T.c.run_id == run_id, _T.c.task_hash.in_(page_hashes))
            .order_by(_T.c.epoch, _T.c.id)
        ))
        task_rows = conn.execute(select(task_table).where(task_table.c.hash.in_(page_hashes))).mappings()
        specs = {r["hash"]: codec.task_from_row(r) for r in task_rows}
    by_task: dict[str, list[TrajRow]] = {h: [] for h in page_hashes}
    for r in rows:
        by_task[r.task_hash].append(TrajRow.of(r))
    tasks = [TaskRow(task=specs[h], task_hash=h, trajectories=by_task[h]) for h in page_hashes]
    return RunPage(tasks=tasks, total=int(total), page=page, per_page=per_page)


def success_by_difficulty(store: Store, run_id: str) -> list[tuple[str, int, int]]:
    """``(difficulty, successes, counted)`` per difficulty label of the run's tasks
    (``TaskSpec.metadata["difficulty"]``, else ``knobs["difficulty"]``); empty when no task
    has one."""
    with store.read() as conn:
        rows = conn.execute(
            select(task_table.c.metadata, task_table.c.knobs,
                   func.coalesce(func.sum(case((SOLVED, 1), else_=0)), 0),
                   func.coalesce(func.sum(case((COUNTED, 1), else_=0)), 0))
            .join(task_table, task_table.c.hash == _T.c.task_hash)
            .where(_T.c.run_id == run_id)
            .group_by(_T.c.task_hash, task_table.c.metadata, task_table.c.knobs)
        )
        acc: dict[str, list[int]] = {}
        for meta, knobs, s, c in rows:
            label = json.loads(meta).get("difficulty", json.loads(knobs).get("difficulty"))
            if label is None:
                continue
            cell = acc.setdefault(str(label), [0, 0])
            cell[0] += int(s)
            cell[1] += int(c)
    return [(k, v[0], v[1]) for k, v in acc.items()]


# -- one trajectory -------------------------------------------------------------------------------


@dataclass
class TrajectoryPage:
    """A trajectory's header, the prompt messages before its first step, one page of steps
    and the feedback on the trajectory and on those steps."""

    id: str
    run_id: str
    task: TaskSpec
    epoch: int
    agent_hash: str
    row: dict[str, Any]
    prompt: list[dict[str, Any]]
    steps: list[Step]
    feedback: list[Feedback]
    n_steps: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.n_steps // self.per_page))


def trajectory_page(
    store: Store, trajectory_id: str, *, page: int = 1, per_page: int = 50, prompt: bool = True
) -> TrajectoryPage | None:
    """Page ``page`` (1-based) of the trajectory's steps; ``None`` for an unknown id."""
    page = max(1, page)
    lo, hi = (page - 1) * per_page, page * per_page
    with store.read() as conn:
        r = conn.execute(
            select(*_LIGHT, *TASK_COLUMNS)
            .join(task_table, task_table.c.hash == _T.c.task_hash)
            .where(_T.c.id == trajectory_id)
        ).mappings().first()
        if r is None:
            return None
        prompt_msgs: list[dict[str, Any]] = []
        if prompt and page == 1:
            text = conn.execute(select(_T.c.messages).where(_T.c.id == trajectory_id)).scalar_one()
            for m in json.loads(text):
                if m.get("role") == "assistant":
                    break
                prompt_msgs.append(m)
        step_rows = conn.execute(
            select(steps)
            .where(steps.c.trajectory_id == trajectory_id, steps.c.index >= lo, steps.c.index < hi)
            .order_by(steps.c.index)
        ).mappings()
        step_list = [codec.step_from_row(s) for s in step_rows]
        fb_rows = conn.execute(
            select(feedback)
            .where(feedback.c.trajectory_id == trajectory_id,
                   or_(feedback.c.step_index.is_(None),
                       and_(feedback.c.step_index >= lo, feedback.c.step_index < hi)))
            .order_by(feedback.c.seq, feedback.c.created_at, feedback.c.id)
        ).mappings()
        fbs = [codec.feedback_from_row(f) for f in fb_rows]
    row = dict(r)
    return TrajectoryPage(
        id=trajectory_id, run_id=row["run_id"], task=task_of(row), epoch=row["epoch"],
        agent_hash=row["agent_hash"], row=row, prompt=prompt_msgs, steps=step_list, feedback=fbs,
        n_steps=row["n_steps"], page=page, per_page=per_page,
    )


def feedback_record(store: Store, feedback_id: str) -> Feedback | None:
    """One feedback record by id."""
    with store.read() as conn:
        r = conn.execute(select(feedback).where(feedback.c.id == feedback_id)).mappings().first()
    return None if r is None else codec.feedback_from_row(r)


def feedback_by_source(store: Store, source: str, *, batch_size: int = 1000) -> list[Feedback]:
    """Every feedback record from ``source`` (e.g. ``"human"``), oldest first."""
    with store.read() as conn:
        rows = conn.execute(
            select(feedback).where(feedback.c.source == source)
            .order_by(feedback.c.created_at, feedback.c.id)
            .execution_options(yield_per=batch_size)
        ).mappings()
        return [codec.feedback_from_row(r) for r in rows]


def feedback_sources(store: Store, run_id: str) -> list[str]:
    """The feedback sources present on the run's trajectories."""
    with store.read() as conn:
        return sorted(conn.execute(
            select(feedback.c.source).distinct()
            .where(feedback.c.trajectory_id.in_(select(_T.c.id).where(_T.c.run_id == run_id)))
        ).scalars())


# -- two runs, task by task ---------------------------------------------------------------------


@dataclass
class PairedTask:
    """One task's attempts in two runs (each in epoch order)."""

    task: TaskSpec
    task_hash: str
    a: list[TrajRow]
    b: list[TrajRow]

    @staticmethod
    def _rate(rows: Sequence[TrajRow]) -> float | None:
        counted = [r for r in rows if r.verdict != "excluded"]
        return sum(r.verdict == "pass" for r in counted) / len(counted) if counted else None

    @property
    def rate_a(self) -> float | None:
        """Success rate of the task in run A (``None`` when no attempt counts)."""
        return self._rate(self.a)

    @property
    def rate_b(self) -> float | None:
        """Success rate of the task in run B."""
        return self._rate(self.b)

    @property
    def delta(self) -> float | None:
        """``rate_b - rate_a``; ``None`` when either is."""
        if self.rate_a is None or self.rate_b is None:
            return None
        return self.rate_b - self.rate_a


def paired_tasks(store: Store, run_a: str, run_b: str) -> list[PairedTask]:
    """The attempts of every task both runs ran (matched by task hash), ordered by task
    hash. The statistics of a comparison are :func:`sharpen.stats.compare.compare_runs`'."""
    with store.read() as conn:
        rows = list(conn.execute(
            select(_T.c.run_id, _T.c.task_hash, *_ATTEMPT)
            .where(_T.c.run_id.in_([run_a, run_b]))
            .order_by(_T.c.epoch, _T.c.id)
        ))
        hashes = {r.task_hash for r in rows}
        specs = {r["hash"]: codec.task_from_row(r) for r in conn.execute(
            select(task_table).where(task_table.c.hash.in_(hashes))).mappings()}
    a: dict[str, list[TrajRow]] = {}
    b: dict[str, list[TrajRow]] = {}
    for r in rows:
        (a if r.run_id == run_a else b).setdefault(r.task_hash, []).append(TrajRow.of(r))
    return [PairedTask(task=specs[h], task_hash=h, a=a[h], b=b[h]) for h in sorted(a) if h in b]
