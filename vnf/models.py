# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The launch core's schema as SQLAlchemy models: what its migrations (``fluidvim.vnf.migrations``,
``fluidvim-manage db sync --store vnf``) and the Nova driver's tables (``fluidvim.nova_driver.
models``, same database) are defined against.

The store itself (:mod:`fluidvim.vnf.store`) does not import this module: it runs plain SQL on
``sqlite3`` so that ``fluidvim vnf list`` does not pay SQLAlchemy's import (issue 11). A unit test
checks that these models and the migrations give the same schema.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import orm


class Base(orm.DeclarativeBase):
    pass


class VNFRow(Base):
    """A row of ``vnfs`` (the store's record type is :class:`fluidvim.vnf.store.VNFRecord`)."""

    __tablename__ = "vnfs"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    backend: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    status: orm.Mapped[str] = orm.mapped_column(sa.String(16), index=True)
    spec_json: orm.Mapped[str] = orm.mapped_column(sa.Text)
    pool_key: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    pid: orm.Mapped[int | None] = orm.mapped_column(sa.Integer)
    config: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    boot_us: orm.Mapped[int | None] = orm.mapped_column(sa.Integer)
    reason: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    created_at: orm.Mapped[float] = orm.mapped_column(sa.Float)
    updated_at: orm.Mapped[float] = orm.mapped_column(sa.Float)


class LaunchRow(Base):
    """A row of ``launches`` (the store's record type is :class:`~fluidvim.vnf.store.LaunchRecord`)."""

    __tablename__ = "launches"

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=True)
    vnf_id: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)
    backend: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    kind: orm.Mapped[str] = orm.mapped_column(sa.String(8))          # cold | warm
    ok: orm.Mapped[bool] = orm.mapped_column(sa.Boolean)
    total_ms: orm.Mapped[float] = orm.mapped_column(sa.Float)
    phases_json: orm.Mapped[str] = orm.mapped_column(sa.Text)
    at: orm.Mapped[float] = orm.mapped_column(sa.Float, index=True)
