# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The Nova driver's tables: they live in the launch core's database (same engine, same
transaction as a spawn's launch record), so they are part of the launch core's schema
(``fluidvim.vnf.models.Base``) and its migrations (``fluidvim-manage db sync --store vnf``)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import orm

from fluidvim.vnf.models import Base


class InstanceName(Base):
    """Instance UUID -> Nova instance name (:mod:`.names`)."""

    __tablename__ = "nova_instance_names"

    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))


class SlotService(Base):
    """Instance UUID -> (service, availability zone) recorded at spawn (:mod:`.slots`)."""

    __tablename__ = "nova_slot_services"

    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    service: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    zone: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), nullable=True)
