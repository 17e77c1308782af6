"""Judges: ``judge_calls`` and the feedback columns ``versus`` and ``call_id``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

``judge_calls`` holds one :class:`~sharpen.core.judgement.Judgement` per (trajectory, other
trajectory, judge hash): the judge's model calls, usage, and its error when it gave no
verdict. ``feedback.versus`` names the other trajectory of a pairwise verdict and
``feedback.call_id`` the judgement behind a judge's record. Records stored before this
revision have neither.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the feedback columns and the ``judge_calls`` table."""
    with op.batch_alter_table("feedback") as batch:
        batch.add_column(sa.Column("versus", sa.String(64), nullable=True))
        batch.add_column(sa.Column("call_id", sa.String(64), nullable=True))
    op.create_table(
        "judge_calls",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("trajectory_id", sa.String(64), nullable=False),
        sa.Column("versus", sa.String(64), nullable=False),
        sa.Column("judge", sa.String(200), nullable=False),
        sa.Column("judge_hash", sa.String(64), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("calls", sa.Text(), nullable=False),
        sa.Column("usage", sa.Text(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_calls")),
        sa.UniqueConstraint("trajectory_id", "versus", "judge_hash",
                            name=op.f("uq_judge_calls_trajectory_id_versus_judge_hash")),
    )
    op.create_index(op.f("ix_judge_calls_run_id_judge_hash"), "judge_calls",
                    ["run_id", "judge_hash"])


def downgrade() -> None:
    """Drop ``judge_calls`` and the feedback columns."""
    op.drop_index(op.f("ix_judge_calls_run_id_judge_hash"), table_name="judge_calls")
    op.drop_table("judge_calls")
    with op.batch_alter_table("feedback") as batch:
        batch.drop_column("call_id")
        batch.drop_column("versus")
