# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Nova instance names of the servers this compute runs (``instance-0000002a``), by UUID.

The launch core names a server's VNF after the instance UUID; Nova's driver contract wants
``list_instances()`` to return instance *names* (the libvirt driver's domain names). Nova computes
names from the DB id and ``[DEFAULT] instance_name_template``, which a compute cannot look up
without the conductor, so the driver remembers them here: a table next to the launch core's own
(same database and engine — ``[vnf] state_connection``, by default ``<state_dir>/vnf.sqlite`` in
WAL mode — so they survive a nova-compute restart and a spawn pays one cheap commit, not a second
database with its own journal and fsync).

Earlier versions kept them in ``<state_dir>/nova-instance-names.sqlite``; that file is imported
once and removed.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from oslo_log import log as logging
from sqlalchemy import orm

from fluidvim.nova_driver.models import InstanceName

LOG = logging.getLogger(__name__)
LEGACY_FILE = "nova-instance-names.sqlite"


_Name = InstanceName          # a table of the launch core's schema (models.py)


_NAMES = _Name.__table__
_DELETE = _NAMES.delete().where(_NAMES.c.uuid == sa.bindparam("b_uuid"))
_INSERT = _NAMES.insert()        # built once: a spawn writes its name with these two


class InstanceNames:
    """UUID → instance name, persistent in the launch core's database (``engine``).

    The engine is borrowed (the launch core's ``StateStore.engine``): :meth:`close` leaves it
    to its owner. ``legacy_dir`` is where an older version's names file may be (imported once).
    """

    def __init__(self, engine: sa.engine.Engine, legacy_dir: str | None = None):
        self.engine = engine         # its schema is the launch core's: StateStore checked it
        self.Session = orm.sessionmaker(self.engine, expire_on_commit=False)
        if legacy_dir:
            self._import_legacy(os.path.join(legacy_dir, LEGACY_FILE))

    def _import_legacy(self, path: str) -> None:
        if not os.path.exists(path):
            return
        old = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 30})
        try:
            with old.connect() as conn:
                if not sa.inspect(conn).has_table(_Name.__tablename__):
                    rows = []
                else:
                    rows = conn.execute(sa.select(_Name.uuid, _Name.name)).all()
        finally:
            old.dispose()
        with self.Session.begin() as s:
            for uuid, name in rows:
                s.merge(_Name(uuid=uuid, name=name))
        os.unlink(path)
        LOG.info("fluidvim: imported %d instance names from %s (now kept in the launch core's "
                 "database)", len(rows), path)

    def set(self, uuid: str, name: str) -> None:
        with self.engine.begin() as conn:
            self.writer(uuid, name)(conn)

    @staticmethod
    def writer(uuid: str, name: str):
        """``fn(conn)`` that records ``uuid``'s name on an open connection, inside the
        caller's transaction (the launch core's ``on_record``: a spawn is one commit)."""
        def write(conn):
            conn.execute(_DELETE, {"b_uuid": uuid})
            conn.execute(_INSERT, {"uuid": uuid, "name": name})
        return write

    def forget(self, uuid: str) -> None:
        with self.Session.begin() as s:
            s.execute(sa.delete(_Name).where(_Name.uuid == uuid))

    def all(self) -> dict[str, str]:
        with self.Session() as s:
            return {r.uuid: r.name for r in s.scalars(sa.select(_Name))}

    def close(self) -> None:
        """Nothing to release: the engine belongs to the launch core (closed with it)."""
