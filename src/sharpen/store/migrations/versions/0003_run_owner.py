"""The process that runs a run: ``runs.owner``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

``owner`` holds a :class:`~sharpen.store.owner.RunOwner` as JSON (host, pid, start token),
written when a run starts or resumes, so that a run whose process died without writing its
status (SIGKILL) can be recognised and reported as ``interrupted``. Runs stored before this
revision have none.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable ``runs.owner`` column."""
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("owner", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop ``runs.owner``."""
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("owner")
