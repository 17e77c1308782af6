"""Initial schema: agent_specs, runs, tasks, run_tasks, trajectories, steps, feedback.

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Timestamps are plain ``DateTime`` columns holding naive UTC (``schema.UTCDateTime`` adds
the time zone back on read). JSON is stored as text.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HASH = sa.String(length=64)
ID = sa.String(length=64)


def upgrade() -> None:
    """Create every table and index."""
    op.create_table(
        "agent_specs",
        sa.Column("hash", HASH, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("parents", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("hash", name=op.f("pk_agent_specs")),
    )
    op.create_table(
        "runs",
        sa.Column("id", ID, nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("env", sa.String(length=200), nullable=False),
        sa.Column("agent_hash", HASH, nullable=False),
        sa.Column("config_hash", HASH, nullable=False),
        sa.Column("manifest", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("n_tasks", sa.Integer(), nullable=False),
        sa.Column("epochs", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_hash"], ["agent_specs.hash"], name=op.f("fk_runs_agent_hash_agent_specs")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_created_at"), "runs", ["created_at"])
    op.create_index(op.f("ix_runs_config_hash_created_at"), "runs", ["config_hash", "created_at"])
    op.create_index(op.f("ix_runs_agent_hash"), "runs", ["agent_hash"])

    op.create_table(
        "tasks",
        sa.Column("hash", HASH, nullable=False),
        sa.Column("env", sa.String(length=200), nullable=False),
        sa.Column("task_id", sa.String(length=500), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("split", sa.String(length=20), nullable=False),
        sa.Column("knobs", sa.Text(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("hash", name=op.f("pk_tasks")),
    )
    op.create_index(op.f("ix_tasks_env_task_id"), "tasks", ["env", "task_id"])

    op.create_table(
        "run_tasks",
        sa.Column("run_id", ID, nullable=False),
        sa.Column("task_hash", HASH, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_tasks_run_id_runs")),
        sa.ForeignKeyConstraint(
            ["task_hash"], ["tasks.hash"], name=op.f("fk_run_tasks_task_hash_tasks")
        ),
        sa.PrimaryKeyConstraint("run_id", "task_hash", name=op.f("pk_run_tasks")),
    )
    op.create_index(op.f("ix_run_tasks_task_hash"), "run_tasks", ["task_hash"])

    op.create_table(
        "trajectories",
        sa.Column("id", ID, nullable=False),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("task_hash", HASH, nullable=False),
        sa.Column("agent_hash", HASH, nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=True),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("error_kind", sa.String(length=20), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("evidence", sa.Text(), nullable=True),
        sa.Column("components", sa.Text(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("invalid_actions", sa.Integer(), nullable=False),
        sa.Column("infra_retries", sa.Integer(), nullable=False),
        sa.Column("n_steps", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.Column("messages", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_trajectories_run_id_runs")),
        sa.ForeignKeyConstraint(
            ["task_hash"], ["tasks.hash"], name=op.f("fk_trajectories_task_hash_tasks")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trajectories")),
        sa.UniqueConstraint("run_id", "key", name=op.f("uq_trajectories_run_id_key")),
    )
    op.create_index(
        op.f("ix_trajectories_run_id_success_error_kind"),
        "trajectories",
        ["run_id", "success", "error_kind"],
    )
    op.create_index(
        op.f("ix_trajectories_run_id_started_at_id"),
        "trajectories",
        ["run_id", "started_at", "id"],
    )
    op.create_index(op.f("ix_trajectories_task_hash"), "trajectories", ["task_hash"])

    op.create_table(
        "steps",
        sa.Column("trajectory_id", ID, nullable=False),
        sa.Column("index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("action", sa.Text(), nullable=True),
        sa.Column("invalid_action", sa.Text(), nullable=True),
        sa.Column("observation", sa.Text(), nullable=True),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("terminated", sa.Boolean(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("messages", sa.Text(), nullable=False),
        sa.Column("usage", sa.Text(), nullable=False),
        sa.Column("model_seconds", sa.Float(), nullable=False),
        sa.Column("env_seconds", sa.Float(), nullable=False),
        sa.Column("info", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["trajectory_id"], ["trajectories.id"], name=op.f("fk_steps_trajectory_id_trajectories")
        ),
        sa.PrimaryKeyConstraint("trajectory_id", "index", name=op.f("pk_steps")),
    )

    op.create_table(
        "feedback",
        sa.Column("id", ID, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=40), nullable=False),
        sa.Column("target_kind", sa.String(length=20), nullable=False),
        sa.Column("run_id", ID, nullable=True),
        sa.Column("trajectory_id", ID, nullable=True),
        sa.Column("step_index", sa.Integer(), nullable=True),
        sa.Column("span_start", sa.Integer(), nullable=True),
        sa.Column("span_end", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("author", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("supersedes", ID, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feedback")),
    )
    op.create_index(op.f("ix_feedback_trajectory_id_seq"), "feedback", ["trajectory_id", "seq"])
    op.create_index(op.f("ix_feedback_run_id"), "feedback", ["run_id"])


def downgrade() -> None:
    """Drop every table (indexes go with them), children first."""
    for table in ("feedback", "steps", "trajectories", "run_tasks", "tasks", "runs", "agent_specs"):
        op.drop_table(table)
