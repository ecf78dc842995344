# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Orchestrators sharing one database (active-active): the workers table (heartbeats), slot
reservations in the database, the owner and token of each launch record and the owner of each
network service record.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("heartbeat_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_workers_heartbeat_at", "workers", ["heartbeat_at"])
    op.create_table(
        "slot_reservations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("instance", sa.String(length=64), nullable=False),
        sa.Column("service", sa.String(length=64), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_slot_reservations_instance", "slot_reservations", ["instance"])
    with op.batch_alter_table("launch_records") as batch:        # SQLite: copy-and-move
        batch.add_column(sa.Column("owner", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("token", sa.String(length=16), nullable=True))
        batch.create_index("ix_launch_records_owner", ["owner"])
    with op.batch_alter_table("network_services") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("network_services") as batch:
        batch.drop_column("owner")
    with op.batch_alter_table("launch_records") as batch:
        batch.drop_index("ix_launch_records_owner")
        batch.drop_column("token")
        batch.drop_column("owner")
    op.drop_index("ix_slot_reservations_instance", "slot_reservations")
    op.drop_table("slot_reservations")
    op.drop_index("ix_workers_heartbeat_at", "workers")
    op.drop_table("workers")
