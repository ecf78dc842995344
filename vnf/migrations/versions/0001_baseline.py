# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Baseline: the launch core's database as release 0.1.0 created it (vnf/store.py and the Nova driver's
tables).

Frozen copy of that schema: never edit it, add a revision. On a database of the release before
migrations it creates only the missing tables (after checking the present ones) - adoption.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

from fluidvim.common.migration import adopt_table

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

META = sa.MetaData()
TABLES = [
    sa.Table(
        'launches', META,
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('vnf_id', sa.String(length=36), nullable=False),
        sa.Column('backend', sa.String(length=16), nullable=False),
        sa.Column('kind', sa.String(length=8), nullable=False),
        sa.Column('ok', sa.Boolean(), nullable=False),
        sa.Column('total_ms', sa.Float(), nullable=False),
        sa.Column('phases_json', sa.Text(), nullable=False),
        sa.Column('at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.Index('ix_launches_at', 'at'),
        sa.Index('ix_launches_vnf_id', 'vnf_id'),
    ),
    sa.Table(
        'nova_instance_names', META,
        sa.Column('uuid', sa.String(length=36), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint('uuid'),
    ),
    sa.Table(
        'nova_slot_services', META,
        sa.Column('uuid', sa.String(length=36), nullable=False),
        sa.Column('service', sa.String(length=255), nullable=False),
        sa.Column('zone', sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint('uuid'),
    ),
    sa.Table(
        'vnfs', META,
        sa.Column('id', sa.String(length=36), nullable=False),
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('backend', sa.String(length=16), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('spec_json', sa.Text(), nullable=False),
        sa.Column('pool_key', sa.String(length=255), nullable=True),
        sa.Column('pid', sa.Integer(), nullable=True),
        sa.Column('config', sa.Text(), nullable=True),
        sa.Column('boot_us', sa.Integer(), nullable=True),
        sa.Column('reason', sa.Text(), nullable=True),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.Column('updated_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.Index('ix_vnfs_name', 'name'),
        sa.Index('ix_vnfs_pool_key', 'pool_key'),
        sa.Index('ix_vnfs_status', 'status'),
    ),
]


def upgrade() -> None:
    for table in TABLES:
        adopt_table(op, table)


def downgrade() -> None:
    for table in reversed(TABLES):
        table.drop(op.get_bind(), checkfirst=True)
