"""Queries the Store composes: the counting rule, portable insert-or-ignore, run records,
batch loaders.

:data:`COUNTED` and :data:`SOLVED` are the one SQL form of
:attr:`~sharpen.core.outcome.Outcome.counts`: every rate the store computes (run records, the
viewer's pages, the statistics' aggregates) counts through them. Each function takes an open
Connection (inside the caller's transaction) and never commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, Table, and_, case, func, insert, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from sharpen.core.feedback import Feedback
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Step
from sharpen.store import codec
from sharpen.store.owner import RunOwner
from sharpen.store.records import RunRecord
from sharpen.store.schema import agent_specs, feedback, runs, steps
from sharpen.store.schema import tasks as task_table
from sharpen.store.schema import trajectories as _T

TASK_COLUMNS = [
    task_table.c.env.label("t_env"),
    task_table.c.task_id.label("t_task_id"),
    task_table.c.seed.label("t_seed"),
    task_table.c.split.label("t_split"),
    task_table.c.knobs.label("t_knobs"),
    task_table.c.metadata.label("t_metadata"),
]
"""The ``tasks`` columns joined onto trajectory rows, labelled ``t_*``."""

COUNTED: ColumnElement[bool] = and_(
    _T.c.success.is_not(None), or_(_T.c.error_kind.is_(None), _T.c.error_kind == "agent")
)
"""A ``trajectories`` row counts toward the success rate: it has an outcome, and the outcome's
``error_kind`` is ``None`` or ``"agent"`` (env, infra, judge and user_sim failures are not the
agent's). The SQL form of :attr:`Outcome.counts <sharpen.core.outcome.Outcome.counts>`."""

SOLVED: ColumnElement[bool] = and_(COUNTED, _T.c.success.is_(True))
"""A counted row whose outcome is a success: the numerator of every success rate."""

VERDICT: ColumnElement[str] = case((SOLVED, "pass"), (COUNTED, "fail"), else_="excluded")
"""A row's :data:`~sharpen.store.records.Verdict`, computed in SQL by the same rule."""


def unique_tasks(items: Iterable[TaskSpec]) -> list[TaskSpec]:
    """``items`` without repeated task hashes, first occurrence kept, order kept."""
    seen: set[str] = set()
    out: list[TaskSpec] = []
    for t in items:
        h = t.hash()
        if h not in seen:
            seen.add(h)
            out.append(t)
    return out


def insert_ignore(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert rows, skipping those whose primary key is already present."""
    if not rows:
        return
    dialect = conn.dialect.name
    if dialect == "sqlite":
        conn.execute(sqlite_insert(table).on_conflict_do_nothing(), rows)
    elif dialect == "postgresql":
        conn.execute(pg_insert(table).on_conflict_do_nothing(), rows)
    else:
        pk = list(table.primary_key.columns)
        for row in rows:
            cond = and_(*(c == row[c.name] for c in pk))
            if conn.execute(select(*pk).where(cond)).first() is None:
                conn.execute(insert(table), [row])


def run_rows(conn: Connection, where: Any, *, limit: int | None) -> list[Row[Any]]:
    """Runs (with their spec JSON as ``agent_spec``) matching ``where`` (``None``: all),
    newest first, at most ``limit`` (``None``: no limit)."""
    query = (
        select(runs, agent_specs.c.spec.label("agent_spec"))
        .join(agent_specs, agent_specs.c.hash == runs.c.agent_hash)
        .order_by(runs.c.created_at.desc(), runs.c.id.desc())
    )
    if limit is not None:
        query = query.limit(limit)
    if where is not None:
        query = query.where(where)
    return list(conn.execute(query))


def run_records(conn: Connection, rows: list[Row[Any]]) -> list[RunRecord]:
    """RunRecords for ``rows`` (from :func:`run_rows`), their counts, cost and time span
    aggregated over their trajectories in one grouped query."""
    ids = [r.id for r in rows]
    sums: dict[str, dict[str, Any]] = {}
    if ids:
        agg = conn.execute(
            select(
                _T.c.run_id,
                func.count().label("n_trajectories"),
                func.coalesce(func.sum(case((SOLVED, 1), else_=0)), 0).label("n_success"),
                func.coalesce(func.sum(case((COUNTED, 1), else_=0)), 0).label("n_counted"),
                func.sum(_T.c.cost_usd).label("cost"),
                func.count(_T.c.cost_usd).label("n_priced"),
                func.min(_T.c.started_at).label("first_started_at"),
                func.max(_T.c.ended_at).label("last_ended_at"),
            )
            .where(_T.c.run_id.in_(ids))
            .group_by(_T.c.run_id)
        ).mappings()
        for a in agg:
            n = int(a["n_trajectories"])
            sums[a["run_id"]] = {
                "n_trajectories": n, "n_success": int(a["n_success"]),
                "n_counted": int(a["n_counted"]),
                # Known only when every attempt's cost is: a partial sum would understate it.
                "cost_usd": float(a["cost"] or 0.0) if a["n_priced"] == n else None,
                "first_started_at": a["first_started_at"], "last_ended_at": a["last_ended_at"],
            }
    return [
        RunRecord(
            manifest=codec.manifest_from_row(r._mapping),
            agent=codec.agent_spec_from_row({"spec": r.agent_spec}),
            status=r.status,
            summary=codec.loads(r.summary),
            created_at=r.created_at,
            owner=RunOwner.model_validate_json(r.owner) if r.owner else None,
            n_tasks=r.n_tasks,
            **sums.get(r.id, {}),
        )
        for r in rows
    ]


def task_of(row: Any) -> TaskSpec:
    """The TaskSpec in a row that carries :data:`TASK_COLUMNS`."""
    return codec.task_from_row(
        {
            "env": row["t_env"],
            "task_id": row["t_task_id"],
            "seed": row["t_seed"],
            "split": row["t_split"],
            "knobs": row["t_knobs"],
            "metadata": row["t_metadata"],
        }
    )


def steps_by_trajectory(conn: Connection, ids: list[str],
                        messages: bool = True) -> dict[str, list[Step]]:
    """Steps of the given trajectories, in index order, by trajectory id; with
    ``messages=False`` the steps' messages and logprobs (the heavy columns) are neither read
    nor set."""
    out: dict[str, list[Step]] = {}
    columns = steps.c if messages else [c for c in steps.c if c.name not in ("messages", "logprobs")]
    rows = conn.execute(
        select(*columns)
        .where(steps.c.trajectory_id.in_(ids))
        .order_by(steps.c.trajectory_id, steps.c.index)
    ).mappings()
    for r in rows:
        out.setdefault(r["trajectory_id"], []).append(codec.step_from_row(r, messages))
    return out


def feedback_by_trajectory(conn: Connection, ids: list[str]) -> dict[str, list[Feedback]]:
    """Feedback targeting the given trajectories, in write order, by trajectory id."""
    out: dict[str, list[Feedback]] = {}
    rows = conn.execute(
        select(feedback)
        .where(feedback.c.trajectory_id.in_(ids))
        .order_by(feedback.c.trajectory_id, feedback.c.seq, feedback.c.created_at, feedback.c.id)
    ).mappings()
    for r in rows:
        out.setdefault(r["trajectory_id"], []).append(codec.feedback_from_row(r))
    return out
