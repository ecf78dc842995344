# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Baseline: the orchestrator's database as release 0.1.0 created it (orchestrator/db.py and the
VIM API's tables).

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
        'decisions', META,
        sa.Column('id', sa.String(length=36), nullable=False),
        sa.Column('service', sa.String(length=64), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('zone', sa.String(length=64), nullable=True),
        sa.Column('host', sa.String(length=255), nullable=True),
        sa.Column('rule', sa.Text(), nullable=False),
        sa.Column('request_json', sa.Text(), nullable=False),
        sa.Column('total_ms', sa.Float(), nullable=False),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.Index('ix_decisions_service', 'service'),
    ),
    sa.Table(
        'env_types', META,
        sa.Column('uid', sa.String(length=32), nullable=False),
        sa.Column('env_json', sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint('uid'),
    ),
    sa.Table(
        'hosts', META,
        sa.Column('zone', sa.String(length=64), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('env_uid', sa.String(length=32), nullable=False),
        sa.Column('labels_json', sa.Text(), nullable=False),
        sa.Column('updated_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('zone', 'name'),
        sa.Index('ix_hosts_env_uid', 'env_uid'),
    ),
    sa.Table(
        'instances', META,
        sa.Column('id', sa.String(length=64), nullable=False),
        sa.Column('zone', sa.String(length=64), nullable=False),
        sa.Column('host', sa.String(length=255), nullable=True),
        sa.Column('service', sa.String(length=64), nullable=False),
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('slots_total', sa.Integer(), nullable=False),
        sa.Column('decision_id', sa.String(length=36), nullable=True),
        sa.Column('launch_ms', sa.Float(), nullable=True),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.Index('ix_instances_service', 'service'),
        sa.Index('ix_instances_zone', 'zone'),
    ),
    sa.Table(
        'launch_records', META,
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('zone', sa.String(length=64), nullable=False),
        sa.Column('service', sa.String(length=64), nullable=False),
        sa.Column('started_at', sa.Float(), nullable=False),
        sa.Column('finished_at', sa.Float(), nullable=True),
        sa.Column('ok', sa.Boolean(), nullable=True),
        sa.Column('ms', sa.Float(), nullable=True),
        sa.Column('predicted_s', sa.Float(), nullable=True),
        sa.Column('instance_id', sa.String(length=64), nullable=True),
        sa.Column('kind', sa.String(length=8), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.Index('ix_launch_records_service', 'service'),
        sa.Index('ix_launch_records_zone', 'zone'),
    ),
    sa.Table(
        'network_services', META,
        sa.Column('id', sa.String(length=36), nullable=False),
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('nsd_id', sa.String(length=64), nullable=False),
        sa.Column('zone', sa.String(length=64), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('plan_json', sa.Text(), nullable=False),
        sa.Column('descriptors_json', sa.Text(), nullable=False),
        sa.Column('networks_json', sa.Text(), nullable=False),
        sa.Column('services_json', sa.Text(), nullable=False),
        sa.Column('instances_json', sa.Text(), nullable=False),
        sa.Column('steps_json', sa.Text(), nullable=False),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.Column('updated_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.Index('ix_network_services_name', 'name'),
    ),
    sa.Table(
        'services', META,
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('profile_json', sa.Text(), nullable=False),
        sa.Column('aliases_json', sa.Text(), nullable=False),
        sa.Column('max_queuing_delay_s', sa.Float(), nullable=True),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    ),
    sa.Table(
        'slot_reports', META,
        sa.Column('instance', sa.String(length=64), nullable=False),
        sa.Column('service', sa.String(length=64), nullable=False),
        sa.Column('zone', sa.String(length=64), nullable=False),
        sa.Column('host', sa.String(length=255), nullable=False),
        sa.Column('region', sa.String(length=64), nullable=False),
        sa.Column('slots', sa.Integer(), nullable=False),
        sa.Column('exact', sa.Integer(), nullable=True),
        sa.Column('delay_s', sa.Float(), nullable=True),
        sa.Column('at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('instance', 'service'),
    ),
    sa.Table(
        'vim_flavors', META,
        sa.Column('id', sa.String(length=36), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('ram', sa.Integer(), nullable=False),
        sa.Column('vcpus', sa.Integer(), nullable=False),
        sa.Column('disk', sa.Integer(), nullable=False),
        sa.Column('slots', sa.Integer(), nullable=True),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    ),
    sa.Table(
        'vim_images', META,
        sa.Column('id', sa.String(length=36), nullable=False),
        sa.Column('zone', sa.String(length=64), nullable=False),
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('location', sa.Text(), nullable=False),
        sa.Column('checksum', sa.String(length=64), nullable=True),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.Index('ix_vim_images_zone', 'zone'),
    ),
    sa.Table(
        'vim_vms', META,
        sa.Column('id', sa.String(length=64), nullable=False),
        sa.Column('zone', sa.String(length=64), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('vnf_name', sa.String(length=64), nullable=False),
        sa.Column('description', sa.Text(), nullable=False),
        sa.Column('image_id', sa.String(length=36), nullable=False),
        sa.Column('flavor_id', sa.String(length=36), nullable=False),
        sa.Column('interfaces_json', sa.Text(), nullable=False),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.Index('ix_vim_vms_zone', 'zone'),
    ),
    sa.Table(
        'zones', META,
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('region', sa.String(length=64), nullable=False),
        sa.Column('labels_json', sa.Text(), nullable=False),
        sa.Column('updated_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    ),
    sa.Table(
        'decision_steps', META,
        sa.Column('decision_id', sa.String(length=36), nullable=False),
        sa.Column('index', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=16), nullable=False),
        sa.Column('ms', sa.Float(), nullable=False),
        sa.Column('record_json', sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(['decision_id'], ['decisions.id']),
        sa.PrimaryKeyConstraint('decision_id', 'index'),
    ),
]


def upgrade() -> None:
    for table in TABLES:
        adopt_table(op, table)


def downgrade() -> None:
    for table in reversed(TABLES):
        table.drop(op.get_bind(), checkfirst=True)
