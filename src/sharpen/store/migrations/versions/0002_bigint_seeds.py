"""Task and trajectory seeds as 64-bit integers.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Generated tasks have seeds above 2**31, which PostgreSQL's ``INTEGER`` refuses. SQLite's
``INTEGER`` already holds 64 bits (and SQLite cannot alter a column's type in place), so this
revision changes nothing there.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (("tasks", "seed"), ("trajectories", "seed"))


def upgrade() -> None:
    """``seed`` columns to ``BIGINT`` (not on SQLite: see the module doc)."""
    if op.get_bind().dialect.name == "sqlite":
        return
    for table, column in COLUMNS:
        op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer(),
                        existing_nullable=False)


def downgrade() -> None:
    """Back to ``INTEGER`` (fails on PostgreSQL if a stored seed no longer fits)."""
    if op.get_bind().dialect.name == "sqlite":
        return
    for table, column in COLUMNS:
        op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger(),
                        existing_nullable=False)
