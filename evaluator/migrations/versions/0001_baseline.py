# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Baseline: the probe cache as release 0.1.0 created it (evaluator/cache.py).

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
        'evaluator_probe_results', META,
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('env_uid', sa.String(length=64), nullable=False),
        sa.Column('kind', sa.String(length=32), nullable=False),
        sa.Column('zone', sa.String(length=255), nullable=False),
        sa.Column('ok', sa.Boolean(), nullable=False),
        sa.Column('metrics_json', sa.Text(), nullable=False),
        sa.Column('measured_at', sa.Float(), nullable=False),
        sa.Column('valid_for_s', sa.Float(), nullable=False),
        sa.Column('valid_until', sa.Float(), nullable=False),
        sa.Column('error', sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.Index('ix_evaluator_probe_results_valid_until', 'valid_until'),
        sa.Index('ix_evaluator_probe_uid_kind', 'env_uid', 'kind', 'measured_at'),
    ),
]


def upgrade() -> None:
    for table in TABLES:
        adopt_table(op, table)


def downgrade() -> None:
    for table in reversed(TABLES):
        table.drop(op.get_bind(), checkfirst=True)
