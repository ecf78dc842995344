# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Slot reports keep the VNF's watts per slot (slot notifications carry it, issue 22).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("slot_reports") as batch:
        batch.add_column(sa.Column("watts_per_slot", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("slot_reports") as batch:
        batch.drop_column("watts_per_slot")
