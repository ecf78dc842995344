# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""NS lifecycle: operation occurrences (instantiate, scale, heal, terminate) and each network
service's scale levels.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ns_operations",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("ns_id", sa.String(length=36), nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("detail_json", sa.Text(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("owner", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_ns_operations_ns_id", "ns_operations", ["ns_id"])
    with op.batch_alter_table("network_services") as b:
        b.add_column(sa.Column("scale_json", sa.Text(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("network_services") as b:
        b.drop_column("scale_json")
    op.drop_index("ix_ns_operations_ns_id", table_name="ns_operations")
    op.drop_table("ns_operations")
