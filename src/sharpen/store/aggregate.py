"""Per-task aggregates of a run, computed in SQL: what ``sharpen report`` and
``sharpen compare`` need, without loading a single message or step.

:func:`run_aggregate` answers, for one run, in four narrow queries inside one read
transaction:

- per task: attempts, counted attempts (:data:`~sharpen.store.queries.COUNTED`: an
  outcome, ``error_kind`` ``None`` or ``agent``), successes among them, tokens, known
  dollars and how many attempts had an unknown price, and the summed episode wall time —
  grouped by ``task_hash`` and joined with the task's id and metadata;
- excluded attempts by error kind (``unscored`` for a missing outcome);
- calibration bins of the counted attempts whose outcome components hold a
  ``"confidence"``: per tenth of [0, 1] (:data:`CONFIDENCE_BINS`), how many, their summed
  confidence, successes and squared error — enough for ECE and Brier without fetching a row
  per attempt (the JSON is read by the database: ``json_extract`` on SQLite,
  ``json_extract_path_text`` on PostgreSQL, Python elsewhere);
- how many trajectories received feedback with source ``safety``, and how many records.

Contract: the result equals what :func:`sharpen.stats.taskdata.aggregate_trajectories`
computes from the run's :class:`~sharpen.core.trajectory.Trajectory` objects (a test checks
it), up to floating-point summation order and, on SQLite, episode times to the millisecond
(``julianday`` keeps milliseconds). Episode wall time is computed in SQL on SQLite and
PostgreSQL, in Python elsewhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    Float,
    Integer,
    and_,
    case,
    cast,
    func,
    literal,
    select,
)

from sharpen.store.queries import COUNTED, SOLVED
from sharpen.store.schema import feedback
from sharpen.store.schema import tasks as task_table
from sharpen.store.schema import trajectories as _T
from sharpen.store.store import Store

CONFIDENCE_BINS = 10
"""Equal-width bins of stated confidence (calibration / ECE)."""


def confidence_bin(confidence: float) -> int:
    """The bin of a confidence clipped to [0, 1]: ``min(floor(10·p), 9)``."""
    return min(int(min(1.0, max(0.0, confidence)) * CONFIDENCE_BINS), CONFIDENCE_BINS - 1)


@dataclass(frozen=True)
class CalibrationBin:
    """Counted attempts whose stated confidence (clipped to [0, 1]) fell in one bin."""

    bin: int
    """``0..9``: confidence in ``[bin/10, (bin+1)/10)`` (the last bin includes 1)."""
    n: int
    """Attempts."""
    confidence_sum: float
    """Sum of their (clipped) confidence."""
    successes: int
    """How many succeeded."""
    squared_error_sum: float
    """Sum of ``(confidence − success)²``."""


@dataclass(frozen=True)
class TaskAggregate:
    """One task's attempts in one run, reduced to sums."""

    task_hash: str
    """``TaskSpec.hash()``: what paired comparisons match on."""
    task_id: str
    """The task id, for people."""
    metadata: dict[str, Any]
    """``TaskSpec.metadata`` (cluster key, perturbation, source, ...)."""
    attempts: int
    """Trajectories stored for the task (all epochs, errored ones included)."""
    counted: int
    """Attempts that count toward success (``Outcome.counts``)."""
    successes: int
    """Successful counted attempts."""
    input_tokens: int
    """Prompt tokens over all attempts."""
    output_tokens: int
    """Completion tokens over all attempts."""
    cost_usd: float
    """Dollars over the attempts whose cost is known."""
    cost_unknown: int
    """Attempts whose cost is unknown (``Usage.cost_usd is None``)."""
    episode_seconds: float
    """Summed ``ended_at - started_at`` of the attempts (0 for unfinished ones)."""


@dataclass
class RunAggregate:
    """Everything the statistics read about one run."""

    run_id: str
    """The run."""
    tasks: list[TaskAggregate] = field(default_factory=list)
    """One entry per task with at least one stored trajectory, ordered by task hash."""
    errors: dict[str, int] = field(default_factory=dict)
    """Excluded attempts by error kind (``unscored``: no outcome)."""
    calibration: list[CalibrationBin] = field(default_factory=list)
    """Calibration bins (non-empty ones, by bin) of counted attempts stating a confidence."""
    safety_trajectories: int = 0
    """Trajectories with at least one feedback record whose source is ``safety``."""
    safety_records: int = 0
    """Feedback records with source ``safety`` on the run's trajectories."""


def _seconds(dialect: str) -> ColumnElement[Any] | None:
    """SQL for one episode's wall seconds, or ``None`` when the dialect needs Python."""
    if dialect == "sqlite":
        return (func.julianday(_T.c.ended_at) - func.julianday(_T.c.started_at)) * 86400.0
    if dialect == "postgresql":
        return func.extract("epoch", _T.c.ended_at - _T.c.started_at)
    return None


def run_aggregate(store: Store, run_id: str) -> RunAggregate:
    """The :class:`RunAggregate` of ``run_id`` (empty for a run without trajectories)."""
    with store.read() as conn:
        return _aggregate(conn, run_id)


def _aggregate(conn: Connection, run_id: str) -> RunAggregate:
    seconds = _seconds(conn.dialect.name)
    sec_col = func.coalesce(func.sum(seconds), 0.0) if seconds is not None else literal(0.0)
    per_task = (
        select(
            _T.c.task_hash.label("task_hash"),
            func.count().label("attempts"),
            func.sum(case((COUNTED, 1), else_=0)).label("counted"),
            func.sum(case((SOLVED, 1), else_=0)).label("successes"),
            func.sum(_T.c.input_tokens).label("input_tokens"),
            func.sum(_T.c.output_tokens).label("output_tokens"),
            func.coalesce(func.sum(_T.c.cost_usd), 0.0).label("cost_usd"),
            func.sum(case((_T.c.cost_usd.is_(None), 1), else_=0)).label("cost_unknown"),
            sec_col.label("episode_seconds"),
        )
        .where(_T.c.run_id == run_id)
        .group_by(_T.c.task_hash)
        .subquery()
    )
    rows = conn.execute(
        select(per_task, task_table.c.task_id, task_table.c.metadata)
        .join(task_table, task_table.c.hash == per_task.c.task_hash)
        .order_by(per_task.c.task_hash)
    ).mappings()
    agg = RunAggregate(run_id=run_id)
    for r in rows:
        agg.tasks.append(TaskAggregate(
            task_hash=r["task_hash"], task_id=r["task_id"], metadata=json.loads(r["metadata"]),
            attempts=int(r["attempts"]), counted=int(r["counted"]), successes=int(r["successes"]),
            input_tokens=int(r["input_tokens"]), output_tokens=int(r["output_tokens"]),
            cost_usd=float(r["cost_usd"]), cost_unknown=int(r["cost_unknown"]),
            episode_seconds=float(r["episode_seconds"]),
        ))
    if seconds is None:
        agg.tasks = _python_seconds(conn, run_id, agg.tasks)
    kind = func.coalesce(_T.c.error_kind, "unscored")
    for k, n in conn.execute(
        select(kind, func.count()).where(_T.c.run_id == run_id, ~COUNTED).group_by(kind)
    ):
        agg.errors[str(k)] = int(n)
    agg.calibration = _calibration(conn, run_id)
    n_traj, n_rec = conn.execute(
        select(func.count(func.distinct(feedback.c.trajectory_id)), func.count())
        .select_from(feedback.join(_T, _T.c.id == feedback.c.trajectory_id))
        .where(_T.c.run_id == run_id, feedback.c.source == "safety")
    ).one()
    agg.safety_trajectories, agg.safety_records = int(n_traj), int(n_rec)
    return agg


def _raw_confidence(dialect: str) -> ColumnElement[Any] | None:
    """SQL reading ``components["confidence"]``, or ``None`` when the dialect needs Python."""
    if dialect == "sqlite":
        return func.json_extract(_T.c.components, "$.confidence")
    if dialect == "postgresql":
        return cast(func.json_extract_path_text(cast(_T.c.components, JSON), "confidence"), Float)
    return None


def _calibration(conn: Connection, run_id: str) -> list[CalibrationBin]:
    has = and_(_T.c.run_id == run_id, COUNTED, _T.c.components.like('%"confidence"%'))
    dialect = conn.dialect.name
    raw = _raw_confidence(dialect)
    sums: dict[int, list[float]] = {}
    if raw is not None:
        # Three levels so the JSON is read once per row: SQLite would otherwise flatten the
        # subqueries and re-evaluate json_extract in every place its value is used (about
        # 3× slower); ``LIMIT -1`` (no limit) keeps it from flattening.
        y = case((_T.c.success.is_(True), 1.0), else_=0.0)
        s1 = select(raw.label("raw"), y.label("y")).where(has)
        q1 = (s1.limit(-1) if dialect == "sqlite" else s1).subquery()
        p = case((q1.c.raw < 0, 0.0), (q1.c.raw > 1, 1.0), else_=q1.c.raw * 1.0)
        s2 = select(p.label("p"), q1.c.y).where(q1.c.raw.is_not(None))
        q2 = (s2.limit(-1) if dialect == "sqlite" else s2).subquery()
        scaled = q2.c.p * CONFIDENCE_BINS
        floor = cast(scaled, Integer) if dialect == "sqlite" else func.floor(scaled)
        b = case((floor >= CONFIDENCE_BINS, CONFIDENCE_BINS - 1), else_=floor)
        for row in conn.execute(
            select(b, func.count(), func.sum(q2.c.p), func.sum(q2.c.y),
                   func.sum((q2.c.p - q2.c.y) * (q2.c.p - q2.c.y))).group_by(b)
        ):
            sums[int(row[0])] = [float(row[1]), float(row[2]), float(row[3]), float(row[4])]
    else:
        for success, comp in conn.execute(select(_T.c.success, _T.c.components).where(has)):
            value = (json.loads(comp) or {}).get("confidence")
            if isinstance(value, int | float):
                pv, yv = min(1.0, max(0.0, float(value))), float(bool(success))
                acc = sums.setdefault(confidence_bin(pv), [0.0, 0.0, 0.0, 0.0])
                acc[0] += 1
                acc[1] += pv
                acc[2] += yv
                acc[3] += (pv - yv) ** 2
    return [CalibrationBin(bin=k, n=int(v[0]), confidence_sum=v[1], successes=int(v[2]),
                           squared_error_sum=v[3]) for k, v in sorted(sums.items())]


def _python_seconds(conn: Connection, run_id: str, tasks: list[TaskAggregate]) -> list[TaskAggregate]:
    sums: dict[str, float] = {}
    for h, start, end in conn.execute(
        select(_T.c.task_hash, _T.c.started_at, _T.c.ended_at).where(_T.c.run_id == run_id)
    ):
        if end is not None:
            sums[h] = sums.get(h, 0.0) + (end - start).total_seconds()
    out = []
    for t in tasks:
        d = dict(t.__dict__)
        d["episode_seconds"] = sums.get(t.task_hash, 0.0)
        out.append(TaskAggregate(**d))
    return out

