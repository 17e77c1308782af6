"""The store's tables, as SQLAlchemy Core metadata.

What is filtered, joined, sorted or aggregated is a column; everything else is JSON text
(``*_json`` columns hold ``json.dumps`` / pydantic ``model_dump_json`` output). The heavy
columns — ``trajectories.messages``, ``steps.messages`` — are only read when a caller asks
for a full trajectory, so listing a run of 100,000 trajectories touches the narrow columns
and the ``(run_id, success, error_kind)`` index only.

This metadata is the source of truth that the Alembic revisions in ``migrations/versions``
must reproduce; ``tests/test_store.py`` checks that ``alembic.autogenerate.compare_metadata``
finds no difference after ``upgrade head``. Change a table here, then add a revision.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Deterministic constraint names, so migrations can refer to them on every backend."""


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored as naive UTC and read back timezone-aware (``tzinfo=UTC``).

    SQLite has no time zones; storing naive UTC keeps values sortable as text on SQLite and
    comparable on every backend. Aware values are converted to UTC; naive values are taken
    to be UTC already.
    """

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        # a string: defensive, for rows written by other tools
        when: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


metadata = MetaData(naming_convention=NAMING_CONVENTION)
"""All sharpen tables."""

HASH = String(64)
ID = String(64)
SEED = BigInteger().with_variant(Integer(), "sqlite")
"""Seeds exceed 2**31 (generated tasks'); SQLite's INTEGER already holds 64 bits."""

agent_specs = Table(
    "agent_specs",
    metadata,
    Column("hash", HASH, primary_key=True),  # AgentSpec.hash()
    Column("name", String(200), nullable=False),
    Column("spec", Text, nullable=False),  # AgentSpec JSON (first saved wins)
    Column("parents", Text, nullable=False),  # JSON list of parent hashes
    Column("created_at", UTCDateTime, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", ID, primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("env", String(200), nullable=False),  # environment name
    Column("agent_hash", HASH, ForeignKey("agent_specs.hash"), nullable=False),
    Column("config_hash", HASH, nullable=False),
    Column("manifest", Text, nullable=False),  # RunManifest JSON
    Column("status", String(20), nullable=False),  # running|finished|interrupted|failed
    Column("summary", Text, nullable=True),  # JSON summary written at the end
    Column("owner", Text, nullable=True),  # JSON RunOwner: the process that set it running
    Column("n_tasks", Integer, nullable=False),
    Column("epochs", Integer, nullable=False),
    Index(None, "created_at"),
    Index(None, "config_hash", "created_at"),
    Index(None, "agent_hash"),
)

tasks = Table(
    "tasks",
    metadata,
    Column("hash", HASH, primary_key=True),  # TaskSpec.hash()
    Column("env", String(200), nullable=False),
    Column("task_id", String(500), nullable=False),
    Column("seed", SEED, nullable=False),
    Column("split", String(20), nullable=False),
    Column("knobs", Text, nullable=False),  # JSON
    Column("metadata", Text, nullable=False),  # JSON
    Index(None, "env", "task_id"),
)

run_tasks = Table(
    "run_tasks",
    metadata,
    Column("run_id", ID, ForeignKey("runs.id"), primary_key=True),
    Column("task_hash", HASH, ForeignKey("tasks.hash"), primary_key=True),
    Column("position", Integer, nullable=False),  # order in the run's task list
    Index(None, "task_hash"),
)

trajectories = Table(
    "trajectories",
    metadata,
    Column("id", ID, primary_key=True),
    Column("run_id", ID, ForeignKey("runs.id"), nullable=False),
    Column("task_hash", HASH, ForeignKey("tasks.hash"), nullable=False),
    Column("agent_hash", HASH, nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("seed", SEED, nullable=False),
    Column("key", String(200), nullable=False),  # trajectory_key(task, agent, epoch)
    Column("success", Boolean, nullable=True),  # NULL when the outcome is missing
    Column("reward", Float, nullable=True),
    Column("error_kind", String(20), nullable=True),
    Column("error", Text, nullable=True),
    Column("evidence", Text, nullable=True),
    Column("components", Text, nullable=True),  # JSON
    Column("input_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("calls", Integer, nullable=False),
    Column("cost_usd", Float, nullable=True),  # NULL means cost unknown
    Column("invalid_actions", Integer, nullable=False),
    Column("infra_retries", Integer, nullable=False),
    Column("n_steps", Integer, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("ended_at", UTCDateTime, nullable=True),
    Column("messages", Text, nullable=False),  # JSON list of Message (heavy)
    UniqueConstraint("run_id", "key"),
    Index(None, "run_id", "success", "error_kind"),
    Index(None, "run_id", "started_at", "id"),
    Index(None, "task_hash"),
)

steps = Table(
    "steps",
    metadata,
    Column("trajectory_id", ID, ForeignKey("trajectories.id"), primary_key=True),
    Column("index", Integer, primary_key=True, autoincrement=False),
    Column("action", Text, nullable=True),  # JSON Action
    Column("invalid_action", Text, nullable=True),
    Column("observation", Text, nullable=True),
    Column("reward", Float, nullable=False),
    Column("terminated", Boolean, nullable=False),
    Column("truncated", Boolean, nullable=False),
    Column("messages", Text, nullable=False),  # JSON list of Message (heavy)
    Column("usage", Text, nullable=False),  # JSON Usage
    Column("model_seconds", Float, nullable=False),
    Column("env_seconds", Float, nullable=False),
    Column("info", Text, nullable=False),  # JSON
    Column("logprobs", Text, nullable=True),  # JSON TokenLogprobs of the reply (heavy)
)

feedback = Table(
    "feedback",
    metadata,
    Column("id", ID, primary_key=True),
    Column("seq", Integer, nullable=False),  # order among its trajectory's (or run's) records
    Column("source", String(40), nullable=False),
    Column("target_kind", String(20), nullable=False),
    Column("run_id", ID, nullable=True),
    Column("trajectory_id", ID, nullable=True),
    Column("step_index", Integer, nullable=True),
    Column("span_start", Integer, nullable=True),
    Column("span_end", Integer, nullable=True),
    Column("name", String(200), nullable=False),
    Column("value", Text, nullable=False),  # JSON number, bool, string or null
    Column("rationale", Text, nullable=False),
    Column("author", String(200), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("supersedes", ID, nullable=True),
    Column("versus", ID, nullable=True),  # the other trajectory of a pairwise verdict
    Column("call_id", ID, nullable=True),  # the judgement (judge_calls.id) that produced it
    Index(None, "trajectory_id", "seq"),
    Index(None, "run_id"),
)

judge_calls = Table(
    "judge_calls",
    metadata,
    Column("id", ID, primary_key=True),
    Column("run_id", ID, nullable=False),
    Column("trajectory_id", ID, nullable=False),
    Column("versus", ID, nullable=False),  # "" unless pairwise (NULLs would defeat the unique key)
    Column("judge", String(200), nullable=False),
    Column("judge_hash", HASH, nullable=False),
    Column("model", String(200), nullable=False),
    Column("status", String(10), nullable=False),  # ok | error
    Column("error", Text, nullable=True),
    Column("calls", Text, nullable=False),  # JSON list of JudgeCall (heavy)
    Column("usage", Text, nullable=False),  # JSON Usage
    Column("seconds", Float, nullable=False),
    Column("detail", Text, nullable=False),  # JSON
    Column("created_at", UTCDateTime, nullable=False),
    # At most one judgement per (trajectory, pair, judge): what makes `sharpen judge` resumable.
    UniqueConstraint("trajectory_id", "versus", "judge_hash"),
    Index(None, "run_id", "judge_hash"),
)
