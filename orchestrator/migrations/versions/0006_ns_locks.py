# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""NS operation locks: one lifecycle operation per network service across orchestrators.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ns_locks",
        sa.Column("ns_id", sa.String(length=36), nullable=False),
        sa.Column("op_id", sa.String(length=36), nullable=False),
        sa.Column("op_type", sa.String(length=16), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("taken_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("ns_id"),
    )
    op.create_index("ix_ns_locks_owner", "ns_locks", ["owner"])


def downgrade() -> None:
    op.drop_index("ix_ns_locks_owner", table_name="ns_locks")
    op.drop_table("ns_locks")
