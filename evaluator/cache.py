# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Stage-1 probe results in SQLAlchemy: valid for a period, shared across services and restarts.

``ProbeCache(engine_or_url)`` keeps its own table (``evaluator_probe_results``) on the engine the
orchestrator passes (or on a new engine for a URL; SQLite by default), so it lives in the
orchestrator's database without touching the orchestrator's tables. Results are keyed by the
environment type's zone-free ``uid`` and the probe ``kind``; the zone they ran in is kept for
the record and for FUSION's "at least one probe per zone".

The table is the ``evaluator`` schema (alembic, ``fluidvim.evaluator.migrations``, own version
table): created at head in a database without it, refused at an older revision -
``fluidvim-manage db sync`` upgrades it (:mod:`fluidvim.common.migration`).
"""

from __future__ import annotations

import json
import time

import sqlalchemy as sa
from sqlalchemy import orm

from fluidvim.common.sql import make_engine

from .model import ProbeResult

DEFAULT_URL = "sqlite:////var/lib/fluidvim/evaluator.sqlite"


class Base(orm.DeclarativeBase):
    pass


class ProbeRow(Base):
    __tablename__ = "evaluator_probe_results"
    __table_args__ = (sa.Index("ix_evaluator_probe_uid_kind", "env_uid", "kind", "measured_at"),)

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=True)
    env_uid: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    kind: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    zone: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")
    ok: orm.Mapped[bool] = orm.mapped_column(sa.Boolean)
    metrics_json: orm.Mapped[str] = orm.mapped_column(sa.Text)
    measured_at: orm.Mapped[float] = orm.mapped_column(sa.Float)
    valid_for_s: orm.Mapped[float] = orm.mapped_column(sa.Float)
    valid_until: orm.Mapped[float] = orm.mapped_column(sa.Float, index=True)
    error: orm.Mapped[str | None] = orm.mapped_column(sa.Text, nullable=True)

    def to_result(self) -> ProbeResult:
        return ProbeResult(env_uid=self.env_uid, kind=self.kind, ok=self.ok,
                           metrics=json.loads(self.metrics_json), measured_at=self.measured_at,
                           valid_for_s=self.valid_for_s, zone=self.zone or "", error=self.error)


def _engine(engine_or_url) -> sa.Engine:
    if isinstance(engine_or_url, sa.Engine):
        return engine_or_url
    return make_engine(engine_or_url or DEFAULT_URL)


class ProbeCache:
    """Probe results by (env uid, kind), newest first, with a validity period."""

    def __init__(self, engine_or_url: sa.Engine | str | None = None):
        from fluidvim.common import migration

        self.engine = _engine(engine_or_url)
        migration.check(self.engine, "evaluator")
        self.Session = orm.sessionmaker(self.engine, expire_on_commit=False)

    def put(self, result: ProbeResult) -> ProbeResult:
        if not result.env_uid or not result.kind:
            raise ValueError("a probe result needs env_uid and kind")
        try:
            metrics = json.dumps(result.metrics, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"probe result metrics must be JSON (no NaN/inf): {e}") from None
        with self.Session.begin() as s:
            s.add(ProbeRow(env_uid=result.env_uid, kind=result.kind, zone=result.zone or "",
                           ok=bool(result.ok), metrics_json=metrics,
                           measured_at=result.measured_at, valid_for_s=result.valid_for_s,
                           valid_until=result.valid_until, error=result.error))
        return result

    def get_valid(self, uid: str, kind: str, zone: str | None = None,
                  now: float | None = None) -> ProbeResult | None:
        """The newest result for (uid, kind) - in ``zone`` if given - still valid at ``now``."""
        now = time.time() if now is None else now
        q = (sa.select(ProbeRow).where(ProbeRow.env_uid == uid, ProbeRow.kind == kind,
                                       ProbeRow.valid_until > now)
             .order_by(ProbeRow.measured_at.desc(), ProbeRow.id.desc()).limit(1))
        if zone is not None:
            q = q.where(ProbeRow.zone == zone)
        with self.Session() as s:
            row = s.scalars(q).first()
            return row.to_result() if row else None

    def valid_index(self, uids, kinds=None, now: float | None = None) -> "ValidIndex":
        """All valid results of ``uids`` (and ``kinds``) in one query, newest first, indexed for
        :meth:`ValidIndex.get` - what :meth:`get_valid` answers, without a query per lookup."""
        now = time.time() if now is None else now
        uids = sorted(set(uids))
        rows = []
        with self.Session() as s:
            for i in range(0, len(uids), 500):            # bounded IN lists
                q = (sa.select(ProbeRow).where(ProbeRow.env_uid.in_(uids[i:i + 500]),
                                               ProbeRow.valid_until > now)
                     .order_by(ProbeRow.measured_at.desc(), ProbeRow.id.desc()))
                if kinds:
                    q = q.where(ProbeRow.kind.in_(sorted(set(kinds))))
                rows += [r.to_result() for r in s.scalars(q)]
        rows.sort(key=lambda r: r.measured_at, reverse=True)
        return ValidIndex(rows)

    def history(self, uid: str | None = None, kind: str | None = None,
                limit: int = 100) -> list[ProbeResult]:
        """Stored results (valid or not), newest first."""
        q = sa.select(ProbeRow).order_by(ProbeRow.measured_at.desc(), ProbeRow.id.desc())
        if uid:
            q = q.where(ProbeRow.env_uid == uid)
        if kind:
            q = q.where(ProbeRow.kind == kind)
        with self.Session() as s:
            return [r.to_result() for r in s.scalars(q.limit(limit))]

    def zones_probed(self, now: float | None = None) -> set[str]:
        """Zones that have at least one valid probe result (FUSION: at least one per zone)."""
        now = time.time() if now is None else now
        with self.Session() as s:
            return set(s.scalars(sa.select(ProbeRow.zone).where(ProbeRow.valid_until > now)
                                 .distinct()))

    def invalidate(self, uid: str | None = None, kind: str | None = None) -> int:
        """Expire results now (all, one type, or one kind of one type); returns how many."""
        q = sa.update(ProbeRow).values(valid_until=0.0).where(ProbeRow.valid_until > 0)
        if uid:
            q = q.where(ProbeRow.env_uid == uid)
        if kind:
            q = q.where(ProbeRow.kind == kind)
        with self.Session.begin() as s:
            return s.execute(q).rowcount

    def purge(self, older_than_s: float = 7 * 86400.0, now: float | None = None) -> int:
        """Delete results that expired more than ``older_than_s`` ago."""
        now = time.time() if now is None else now
        with self.Session.begin() as s:
            return s.execute(sa.delete(ProbeRow).where(
                ProbeRow.valid_until < now - older_than_s)).rowcount


class ValidIndex:
    """Valid results by (uid, kind) and (uid, kind, zone), newest first (see valid_index)."""

    def __init__(self, results):
        self._by_kind: dict = {}
        self._by_zone: dict = {}
        for r in results:                          # newest first: keep the first seen
            self._by_kind.setdefault((r.env_uid, r.kind), r)
            self._by_zone.setdefault((r.env_uid, r.kind, r.zone or ""), r)

    def get(self, uid: str, kind: str, zone: str | None = None) -> ProbeResult | None:
        if zone is None:
            return self._by_kind.get((uid, kind))
        return self._by_zone.get((uid, kind, zone))
