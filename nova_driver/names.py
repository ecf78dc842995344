# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Nova instance names of the servers this compute runs (``instance-0000002a``), by UUID.

The launch core names a server's VNF after the instance UUID; Nova's driver contract wants
``list_instances()`` to return instance *names* (the libvirt driver's domain names). Nova computes
names from the DB id and ``[DEFAULT] instance_name_template``, which a compute cannot look up
without the conductor, so the driver remembers them here (SQLite next to the launch core's state,
so they survive a nova-compute restart).
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from sqlalchemy import orm


class _Base(orm.DeclarativeBase):
    pass


class _Name(_Base):
    __tablename__ = "nova_instance_names"

    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))


class InstanceNames:
    """UUID → instance name, persistent in ``<state_dir>/nova-instance-names.sqlite``."""

    def __init__(self, state_dir: str):
        os.makedirs(state_dir, mode=0o750, exist_ok=True)
        url = f"sqlite:///{os.path.join(state_dir, 'nova-instance-names.sqlite')}"
        self.engine = sa.create_engine(url, connect_args={"timeout": 30,
                                                          "check_same_thread": False})
        _Base.metadata.create_all(self.engine)
        self.Session = orm.sessionmaker(self.engine, expire_on_commit=False)

    def set(self, uuid: str, name: str) -> None:
        with self.Session.begin() as s:
            s.merge(_Name(uuid=uuid, name=name))

    def forget(self, uuid: str) -> None:
        with self.Session.begin() as s:
            s.execute(sa.delete(_Name).where(_Name.uuid == uuid))

    def all(self) -> dict[str, str]:
        with self.Session() as s:
            return {r.uuid: r.name for r in s.scalars(sa.select(_Name))}

    def close(self) -> None:
        self.engine.dispose()
