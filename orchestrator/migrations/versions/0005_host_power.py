# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Host power states: drained, powered off and woken hosts (fluidvim.orchestrator.hostpower).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_power",
        sa.Column("zone", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("in_service", sa.Boolean(), nullable=False),
        sa.Column("power", sa.String(length=16), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("detail_json", sa.Text(), nullable=False),
        sa.Column("since", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("zone", "host"),
    )


def downgrade() -> None:
    op.drop_table("host_power")
