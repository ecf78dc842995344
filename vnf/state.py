# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The launch core's state store (SQLAlchemy; SQLite by default, any URL in production).

It holds every VNF this host started (so a restarted caller finds them again) and the history of
launches (phases and totals), from which the queuing delay is estimated.

The schema is versioned (alembic, ``fluidvim.vnf.migrations``; the Nova driver's tables in
``fluidvim.nova_driver.models`` are part of it): a store creates it at head in an empty database
and refuses an older one - ``fluidvim-manage db sync --store vnf`` upgrades it
(:mod:`fluidvim.migration`).
"""

from __future__ import annotations

import json
import time

import sqlalchemy as sa
from sqlalchemy import orm

STATUSES = ("booting", "pool", "running", "crashed", "stopped")


class Base(orm.DeclarativeBase):
    pass


class VNFRecord(Base):
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

    @property
    def spec(self):
        from .spec import VNFSpec
        return VNFSpec.from_dict(json.loads(self.spec_json))


class LaunchRecord(Base):
    __tablename__ = "launches"

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=True)
    vnf_id: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)
    backend: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    kind: orm.Mapped[str] = orm.mapped_column(sa.String(8))          # cold | warm
    ok: orm.Mapped[bool] = orm.mapped_column(sa.Boolean)
    total_ms: orm.Mapped[float] = orm.mapped_column(sa.Float)
    phases_json: orm.Mapped[str] = orm.mapped_column(sa.Text)
    at: orm.Mapped[float] = orm.mapped_column(sa.Float, index=True)

    @property
    def phases(self) -> dict:
        return json.loads(self.phases_json)


_VNFS = VNFRecord.__table__
_LAUNCHES = LaunchRecord.__table__


def _claim_statement():
    oldest = (sa.select(_VNFS.c.id)
              .where(_VNFS.c.pool_key == sa.bindparam("b_key"), _VNFS.c.status == "pool")
              .order_by(_VNFS.c.created_at).limit(1).scalar_subquery())
    return (_VNFS.update()
            .where(_VNFS.c.id == oldest, _VNFS.c.status == "pool")
            .values(status="running", name=sa.bindparam("b_name"), pool_key=None,
                    updated_at=sa.bindparam("b_now"))
            .returning(*_VNFS.c))


# The launch path's statements, built once. Building a statement (and running it through an ORM
# session) cost several times more than SQLite executing it: most of a warm launch's store time.
# An UPDATE without .values() takes its SET clause from the parameters given at execution.
_CLAIM = _claim_statement()
_UPDATE = _VNFS.update().where(_VNFS.c.id == sa.bindparam("b_id"))
_INSERT_LAUNCH = _LAUNCHES.insert()
_IDS_NAMED = (sa.select(_VNFS.c.id).where(_VNFS.c.name == sa.bindparam("b_name"),
                                         _VNFS.c.status != "pool")
              .order_by(_VNFS.c.created_at))


class StateStore:
    def __init__(self, url: str):
        kw = {}
        if url.startswith("sqlite"):
            kw["connect_args"] = {"timeout": 30, "check_same_thread": False}
        self.engine = sa.create_engine(url, future=True, **kw)
        if url.startswith("sqlite"):
            @sa.event.listens_for(self.engine, "connect")
            def _pragmas(dbapi_conn, _rec):
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.close()
        from fluidvim import migration
        try:
            migration.check(self.engine, "vnf")      # once, at start: not on the launch path
        except Exception:
            self.engine.dispose()
            raise
        self.Session = orm.sessionmaker(self.engine, expire_on_commit=False)

    # -- VNFs --
    def add(self, rec: VNFRecord) -> None:
        rec.created_at = rec.updated_at = time.time()
        with self.Session.begin() as s:
            s.add(rec)

    def get(self, vnf_id: str) -> VNFRecord | None:
        with self.Session() as s:
            return s.get(VNFRecord, vnf_id)

    def find(self, id_or_name: str) -> VNFRecord | None:
        with self.Session() as s:
            rec = s.get(VNFRecord, id_or_name)
            if rec is None:
                rec = s.scalars(sa.select(VNFRecord).where(
                    VNFRecord.name == id_or_name,
                    VNFRecord.status != "pool").order_by(VNFRecord.created_at.desc())).first()
            if rec is None and len(id_or_name) >= 6:
                rec = s.scalars(sa.select(VNFRecord).where(
                    VNFRecord.id.startswith(id_or_name))).first()
            return rec

    def list(self, statuses=None, backend: str | None = None,
             name: str | None = None) -> list[VNFRecord]:
        """Records oldest first, optionally only those with a status in ``statuses``, of one
        ``backend`` or called ``name``."""
        with self.Session() as s:
            q = sa.select(VNFRecord).order_by(VNFRecord.created_at)
            if statuses:
                q = q.where(VNFRecord.status.in_(statuses))
            if backend:
                q = q.where(VNFRecord.backend == backend)
            if name is not None:
                q = q.where(VNFRecord.name == name)
            return list(s.scalars(q))

    def update(self, vnf_id: str, **fields) -> None:
        with self.engine.begin() as conn:
            conn.execute(_UPDATE, {"b_id": vnf_id, **fields, "updated_at": time.time()})

    def ids_named(self, name: str) -> list[str]:
        """Ids of the VNFs (not pool shells) called ``name``, oldest first: one indexed query."""
        with self.engine.connect() as conn:
            return list(conn.execute(_IDS_NAMED, {"b_name": name}).scalars())

    def claim_pool_shell(self, pool_key: str, name: str) -> VNFRecord | None:
        """Atomically take the oldest booted shell of ``pool_key`` (safe across processes):
        one ``UPDATE ... WHERE status = 'pool' ... RETURNING`` statement. The record returned
        is detached (not bound to a session)."""
        for _ in range(3):     # a concurrent claimer may win the same row (READ COMMITTED)
            with self.engine.begin() as conn:
                row = conn.execute(_CLAIM, {"b_key": pool_key, "b_name": name,
                                            "b_now": time.time()}).first()
            if row is not None:
                return VNFRecord(**row._mapping)
            if not self.count_pool(pool_key, ("pool",)):
                return None
        return None

    def count_pool(self, pool_key: str, statuses=("pool", "booting")) -> int:
        with self.Session() as s:
            return s.scalar(sa.select(sa.func.count()).select_from(VNFRecord).where(
                VNFRecord.pool_key == pool_key, VNFRecord.status.in_(statuses)))

    def delete(self, vnf_id: str) -> None:
        with self.Session.begin() as s:
            s.execute(sa.delete(VNFRecord).where(VNFRecord.id == vnf_id))

    def finish_launch(self, vnf_id: str, fields: dict, *, backend: str, kind: str,
                      total_ms: float, phases: dict, on_record=None) -> None:
        """A successful launch's one commit: the VNF's record (``fields``), its launch history
        row and whatever ``on_record(conn)`` writes (a caller's own rows about this VNF, e.g.
        the Nova driver's instance name) in one transaction: all or nothing.

        ``total_ms`` is the launch's time up to this call (the commit itself is not in it)."""
        now = time.time()
        with self.engine.begin() as conn:
            conn.execute(_UPDATE, {"b_id": vnf_id, **fields, "updated_at": now})
            conn.execute(_INSERT_LAUNCH, self._launch_row(vnf_id, backend, kind, True,
                                                           total_ms, phases, now))
            if on_record is not None:
                on_record(conn)

    @staticmethod
    def _launch_row(vnf_id, backend, kind, ok, total_ms, phases, at) -> dict:
        return {"vnf_id": vnf_id, "backend": backend, "kind": kind, "ok": ok,
                "total_ms": total_ms, "phases_json": json.dumps(phases), "at": at}

    # -- launch history --
    def record_launch(self, vnf_id: str, backend: str, kind: str, ok: bool, total_ms: float,
                      phases: dict) -> None:
        with self.engine.begin() as conn:
            conn.execute(_INSERT_LAUNCH, self._launch_row(vnf_id, backend, kind, ok, total_ms,
                                                          phases, time.time()))

    def recent_launches(self, limit: int, backend: str | None = None,
                        kind: str | None = None) -> list[LaunchRecord]:
        with self.Session() as s:
            q = sa.select(LaunchRecord).where(LaunchRecord.ok.is_(True))
            if backend:
                q = q.where(LaunchRecord.backend == backend)
            if kind:
                q = q.where(LaunchRecord.kind == kind)
            return list(s.scalars(q.order_by(LaunchRecord.at.desc()).limit(limit)))
