"""The per-token logprobs of a step's reply: ``steps.logprobs``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

``logprobs`` holds a :class:`~sharpen.core.trajectory.TokenLogprobs` as JSON (the backend's
logprob, and token text or id where given, of every token of the step's reply), written when
the model was asked for logprobs. Steps stored before this revision have none.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable ``steps.logprobs`` column."""
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("logprobs", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop ``steps.logprobs``."""
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("logprobs")
