# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The VIM API's tables (:mod:`.vim`): images, flavors and VMs. They live in the orchestrator's
database, so they are part of its schema (``fluidvim.orchestrator.db.Base``) and its migrations
(``fluidvim-manage db sync --store orchestrator``)."""

from __future__ import annotations

import json
import time

import sqlalchemy as sa
from sqlalchemy import orm

from ..db import Base


class VimImage(Base):
    __tablename__ = "vim_images"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    zone: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    location: orm.Mapped[str] = orm.mapped_column(sa.Text)
    checksum: orm.Mapped[str | None] = orm.mapped_column(sa.String(64))
    created_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)


class VimFlavor(Base):
    __tablename__ = "vim_flavors"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    ram: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    vcpus: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    disk: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0)
    slots: orm.Mapped[int | None] = orm.mapped_column(sa.Integer)
    created_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)


class VimVM(Base):
    __tablename__ = "vim_vms"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)   # zone instance id
    zone: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))         # the name RO asked for
    vnf_name: orm.Mapped[str] = orm.mapped_column(sa.String(64))      # the zone's instance name
    description: orm.Mapped[str] = orm.mapped_column(sa.Text, default="")
    image_id: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    flavor_id: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    interfaces_json: orm.Mapped[str] = orm.mapped_column(sa.Text, default="[]")
    created_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)

    @property
    def interfaces(self) -> list:
        return json.loads(self.interfaces_json or "[]")
