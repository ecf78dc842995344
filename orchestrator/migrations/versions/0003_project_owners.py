# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""project_owners: which project owns a service, network, network service or VIM object
(fluidvim-api scopes requests by it; fluidvim.orchestrator.owners).

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "project_owners",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("project_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "key"),
    )
    op.create_index("ix_project_owners_project_id", "project_owners", ["project_id"])
