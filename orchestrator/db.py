# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The orchestrator's state (SQLAlchemy; SQLite by default, any URL in production).

Everything a restarted orchestrator needs: zones, environment types (by their zone-free uid),
hosts, services (aliases with slot ratios, tolerable queuing delay), instances, the latest slot
report per instance and service, placement decisions with the record of every
step, host power states (drained, off, waking hosts: ``hostpower``),
launch records (start/end of on-demand launches, for the queuing delay) and network services
deployed from NFV descriptors (what they created, for `fluidvim ns rm`). Probe
results live in the same database, in the evaluator's ProbeCache table (one place for them).

The schema (these tables and the VIM API's, ``osm/models.py``) is versioned (alembic,
``fluidvim.orchestrator.migrations``): a store creates it at head in an empty database and refuses
an older one - ``fluidvim-manage db sync --store orchestrator`` upgrades it
(:mod:`fluidvim.common.migration`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import threading
import time
import uuid as uuidlib

import sqlalchemy as sa
from sqlalchemy import orm

from fluidvim.common import instance_states as istates
from fluidvim.common.sql import make_engine
from fluidvim.evaluator.model import EnvironmentType

from . import states
from .exception import DatabaseDown, LeaseLost, NotFound


class Base(orm.DeclarativeBase):
    pass


def _json(col_default="{}"):
    return orm.mapped_column(sa.Text, default=col_default)


class Zone(Base):
    __tablename__ = "zones"
    name: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    kind: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    region: orm.Mapped[str] = orm.mapped_column(sa.String(64), default="default")
    labels_json: orm.Mapped[str] = _json()
    updated_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)


class EnvType(Base):
    __tablename__ = "env_types"
    uid: orm.Mapped[str] = orm.mapped_column(sa.String(32), primary_key=True)
    env_json: orm.Mapped[str] = orm.mapped_column(sa.Text)

    @property
    def env(self) -> EnvironmentType:
        return EnvironmentType.from_dict(json.loads(self.env_json))


class Host(Base):
    __tablename__ = "hosts"
    zone: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255), primary_key=True)
    env_uid: orm.Mapped[str] = orm.mapped_column(sa.String(32), index=True)
    labels_json: orm.Mapped[str] = _json()
    updated_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)


class Service(Base):
    __tablename__ = "services"
    name: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    profile_json: orm.Mapped[str] = orm.mapped_column(sa.Text)     # ServiceProfile fields + extras
    aliases_json: orm.Mapped[str] = _json()                         # {alias: ratio}
    max_queuing_delay_s: orm.Mapped[float | None] = orm.mapped_column(sa.Float)
    created_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)

    @property
    def profile(self) -> dict:
        return json.loads(self.profile_json)

    @property
    def aliases(self) -> dict:
        return json.loads(self.aliases_json or "{}")

    def as_dict(self) -> dict:
        """The service as the API lists it: name, aliases, max delay, its profile's fields."""
        return {"name": self.name, "aliases": self.aliases,
                "max_queuing_delay_s": self.max_queuing_delay_s,
                **{k: v for k, v in self.profile.items() if k != "name"}}


class Instance(Base):
    __tablename__ = "instances"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    zone: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    service: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    status: orm.Mapped[str] = orm.mapped_column(sa.String(16))      # istates.STATUSES
    slots_total: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0)
    decision_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))
    launch_ms: orm.Mapped[float | None] = orm.mapped_column(sa.Float)
    created_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)

    def as_dict(self) -> dict:
        """The instance as the API lists it."""
        return {"id": self.id, "name": self.name, "zone": self.zone, "host": self.host,
                "service": self.service, "status": self.status,
                "slots_total": self.slots_total, "decision_id": self.decision_id,
                "launch_ms": self.launch_ms}


class SlotReportRow(Base):
    __tablename__ = "slot_reports"
    instance: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    service: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    zone: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    region: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    slots: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    exact: orm.Mapped[int | None] = orm.mapped_column(sa.Integer)
    delay_s: orm.Mapped[float | None] = orm.mapped_column(sa.Float)
    at: orm.Mapped[float] = orm.mapped_column(sa.Float)
    watts_per_slot: orm.Mapped[float | None] = orm.mapped_column(sa.Float)   # 0007


class Decision(Base):
    __tablename__ = "decisions"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    service: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    status: orm.Mapped[str] = orm.mapped_column(sa.String(16))      # states.DECISION_STATUSES
    zone: orm.Mapped[str | None] = orm.mapped_column(sa.String(64))
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    rule: orm.Mapped[str] = orm.mapped_column(sa.Text, default="")
    request_json: orm.Mapped[str] = _json()
    total_ms: orm.Mapped[float] = orm.mapped_column(sa.Float, default=0.0)
    created_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)
    steps: orm.Mapped[list[DecisionStep]] = orm.relationship(
        order_by="DecisionStep.index", cascade="all, delete-orphan", lazy="selectin")

    def as_dict(self) -> dict:
        """The decision as ``placement list`` shows it (``explain`` has the steps)."""
        return {"id": self.id, "service": self.service, "status": self.status,
                "zone": self.zone, "host": self.host, "total_ms": self.total_ms,
                "created_at": self.created_at}


class DecisionStep(Base):
    __tablename__ = "decision_steps"
    decision_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("decisions.id"),
                                                     primary_key=True)
    index: orm.Mapped[int] = orm.mapped_column(sa.Integer, primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(16))         # filter|probe|analyze|decide
    ms: orm.Mapped[float] = orm.mapped_column(sa.Float)
    record_json: orm.Mapped[str] = orm.mapped_column(sa.Text)

    @property
    def record(self):
        return json.loads(self.record_json)


class LaunchRow(Base):
    __tablename__ = "launch_records"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=True)
    zone: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    service: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    started_at: orm.Mapped[float] = orm.mapped_column(sa.Float)
    finished_at: orm.Mapped[float | None] = orm.mapped_column(sa.Float)
    ok: orm.Mapped[bool | None] = orm.mapped_column(sa.Boolean)
    ms: orm.Mapped[float | None] = orm.mapped_column(sa.Float)
    predicted_s: orm.Mapped[float | None] = orm.mapped_column(sa.Float)
    instance_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(64))
    kind: orm.Mapped[str | None] = orm.mapped_column(sa.String(8))        # cold | warm | None
    error: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    # the orchestrator process (WorkerRow.id) that runs it; None = one that predates workers
    owner: orm.Mapped[str | None] = orm.mapped_column(sa.String(64), index=True)
    token: orm.Mapped[str | None] = orm.mapped_column(sa.String(16))     # LaunchRequest.token


class WorkerRow(Base):
    """An orchestrator process on this database. Several may share it (``active_active``):
    each beats its heartbeat; one whose heartbeat stops is dead and a survivor takes over what
    it left in flight (fluidvim.orchestrator.ha)."""

    __tablename__ = "workers"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    pid: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    started_at: orm.Mapped[float] = orm.mapped_column(sa.Float)
    heartbeat_at: orm.Mapped[float] = orm.mapped_column(sa.Float, index=True)


class SlotReservationRow(Base):
    """Slots the resolver handed out, one row per slot (see SlotRegistry): in the database when
    orchestrators share it, so a slot one of them handed out counts for all of them."""

    __tablename__ = "slot_reservations"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=True)
    instance: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    service: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    at: orm.Mapped[float] = orm.mapped_column(sa.Float)


class NetworkServiceRow(Base):
    """A network service deployed from an NSD (fluidvim.orchestrator.mano): what it is made of."""

    __tablename__ = "network_services"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    nsd_id: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    zone: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    status: orm.Mapped[str] = orm.mapped_column(sa.String(16))  # states.NS_STATUSES
    error: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    plan_json: orm.Mapped[str] = _json()              # the mapping (descriptors.Plan.to_dict())
    descriptors_json: orm.Mapped[str] = _json()       # the NSD and VNFDs as deployed
    networks_json: orm.Mapped[str] = _json()          # logical link -> {id, name} created
    services_json: orm.Mapped[str] = _json("[]")      # service names registered
    instances_json: orm.Mapped[str] = _json("[]")     # [{id, name, service, profile, decision_id}]
    steps_json: orm.Mapped[str] = _json("[]")         # [{step, ms}] of the deploy
    scale_json: orm.Mapped[str] = orm.mapped_column(   # scaling aspect -> its scale level now
        sa.Text, default="{}", server_default="{}")     # (added by revision 0002: rows before it)
    created_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)
    updated_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)
    # the orchestrator process (WorkerRow.id) that acted on it last; None = before workers
    owner: orm.Mapped[str | None] = orm.mapped_column(sa.String(64))

    def get(self, field: str):
        return json.loads(getattr(self, f"{field}_json"))

    def summary(self) -> dict:
        """The NS as ``ns list`` shows it."""
        return {"id": self.id, "name": self.name, "nsd": self.nsd_id, "zone": self.zone,
                "status": self.status, "instances": len(self.get("instances")),
                "networks": len(self.get("networks")), "error": self.error,
                "created_at": self.created_at}


class NSOperation(Base):
    """An NS lifecycle operation occurrence (SOL005's LcmOpOcc, reduced): instantiate, scale,
    heal, terminate; processing -> completed | failed | rolled_back."""

    __tablename__ = "ns_operations"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    ns_id: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)
    type: orm.Mapped[str] = orm.mapped_column(sa.String(16))      # states.OP_TYPES
    state: orm.Mapped[str] = orm.mapped_column(sa.String(16))     # states.OP_STATES
    detail_json: orm.Mapped[str] = _json()            # aspect, direction, trigger, instances, ...
    started_at: orm.Mapped[float] = orm.mapped_column(sa.Float)
    ended_at: orm.Mapped[float | None] = orm.mapped_column(sa.Float)
    error: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    owner: orm.Mapped[str | None] = orm.mapped_column(sa.String(64))   # WorkerRow.id running it

    @property
    def detail(self) -> dict:
        return json.loads(self.detail_json or "{}")

    def to_dict(self) -> dict:
        return {"id": self.id, "type": self.type, "state": self.state, "detail": self.detail,
                "started_at": self.started_at, "ended_at": self.ended_at, "error": self.error}


class NSLockRow(Base):
    """The one NS lifecycle operation under way on a network service, across every orchestrator
    on this database (SOL005: another one meanwhile is 409 CONFLICT). ``owner`` (a WorkerRow.id,
    or ``host:pid`` of a lone orchestrator) holds it until ``expires_at`` - a lease its
    heartbeat renews; None = until released (one orchestrator, which clears them at start)."""

    __tablename__ = "ns_locks"
    ns_id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    op_id: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    op_type: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    owner: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    taken_at: orm.Mapped[float] = orm.mapped_column(sa.Float)
    expires_at: orm.Mapped[float | None] = orm.mapped_column(sa.Float)


class HostPowerRow(Base):
    """A host's power state (fluidvim.orchestrator.hostpower): drained, powered off, waking...
    A host without a row is on and in service."""

    __tablename__ = "host_power"
    zone: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255), primary_key=True)
    state: orm.Mapped[str] = orm.mapped_column(sa.String(16))         # hostpower.STATES
    in_service: orm.Mapped[bool] = orm.mapped_column(sa.Boolean)       # takes placement
    power: orm.Mapped[str | None] = orm.mapped_column(sa.String(16))  # the BMC's last word
    error: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    detail_json: orm.Mapped[str] = _json()
    since: orm.Mapped[float] = orm.mapped_column(sa.Float)             # in this state since
    updated_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)

    @property
    def detail(self) -> dict:
        return json.loads(self.detail_json or "{}")


NS_LIVE = states.NS_LIVE    # where it was defined first

DB_FIX = ("start it (pg_ctl start, or systemctl start postgresql), or fix [orchestrator] "
          "connection")


def _down_is_one_line(engine: sa.Engine) -> None:
    """A database server that does not answer - refused, killed, restarted under an open
    connection - raises :class:`.DatabaseDown` (one line: the database, the driver's first
    line, :data:`DB_FIX`; RPC clients get it as is) instead of the driver's exception, from
    every statement on ``engine``. Other errors stand. The pool's pre-ping is left alone: it
    reconnects on its own when the server is back, and a failed reconnect comes here again.
    SQLite (a file, no server) is not concerned."""
    if engine.dialect.name == "sqlite":
        return
    from fluidvim.common.migration import redact

    what = f"the orchestrator's database ({redact(engine)})"
    operational = engine.dialect.loaded_dbapi.OperationalError

    @sa.event.listens_for(engine, "handle_error")
    def _down(ctx) -> None:
        lost = ctx.is_disconnect or (ctx.connection is None and
                                     isinstance(ctx.original_exception, operational))
        if lost and not ctx.is_pre_ping:
            orig = ctx.original_exception
            first = next((ln.strip() for ln in str(orig).splitlines() if ln.strip()),
                         type(orig).__name__)
            raise DatabaseDown.of(what, first, DB_FIX)


class Store:
    def __init__(self, url: str):
        from fluidvim.common import migration

        self.owner: str | None = None        # this process' WorkerRow.id, set by ha.Membership
        self._file_locks: dict[str, threading.Lock] = {}
        self._unrecorded: list[tuple[int, str, str]] = []      # launch_unrecorded()
        self._unrecorded_lock = threading.Lock()
        self._fence = threading.local()     # fenced(): the NS operation lock this thread runs under
        self.engine = make_engine(url)
        _down_is_one_line(self.engine)
        try:
            migration.check(self.engine, "orchestrator")
        except Exception:
            self.engine.dispose()
            raise
        self.Session = orm.sessionmaker(self.engine, expire_on_commit=False)

    def close(self) -> None:
        self.engine.dispose()

    def _upsert(self, s, model, values: dict, *, update: bool = True, newer_than=None) -> None:
        """INSERT ``values`` into ``model``'s table or, when its primary key exists, update the
        row (``update``; only if ``newer_than`` - a column - is older than the new value) or
        leave it. Atomic where several orchestrators write the same row at once (active-active:
        every process receives the same slot notification, and all upsert their zones at start);
        a read-then-insert (``Session.merge``) would lose that race with a unique violation."""
        dialect = self.engine.dialect.name
        if dialect not in ("postgresql", "sqlite"):     # one process per database (no HA)
            keys = tuple(values[c.name] for c in model.__table__.primary_key.columns)
            old = s.get(model, keys)
            if old is None or (update and (newer_than is None or
                                           getattr(old, newer_than) <= values[newer_than])):
                s.merge(model(**values))
            return
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        keys = [c.name for c in model.__table__.primary_key.columns]
        stmt = insert(model).values(**values)
        if not update:
            stmt = stmt.on_conflict_do_nothing(index_elements=keys)
        else:
            where = None
            if newer_than is not None:
                col = model.__table__.c[newer_than]
                where = col <= stmt.excluded[newer_than]
            stmt = stmt.on_conflict_do_update(
                index_elements=keys, where=where,
                set_={k: stmt.excluded[k] for k in values if k not in keys})
        s.execute(stmt)

    # -- zones, environment types, hosts --
    def upsert_zone(self, name: str, kind: str, region: str, labels: dict | None = None) -> None:
        with self.Session.begin() as s:
            self._upsert(s, Zone, dict(name=name, kind=kind, region=region,
                                       labels_json=json.dumps(labels or {}),
                                       updated_at=time.time()))

    def zones(self) -> list[Zone]:
        with self.Session() as s:
            return list(s.scalars(sa.select(Zone).order_by(Zone.name)))

    def upsert_env(self, env: EnvironmentType) -> str:
        with self.Session.begin() as s:
            self._upsert(s, EnvType, dict(uid=env.uid, env_json=json.dumps(env.to_dict())),
                         update=False)
        return env.uid

    def envs(self) -> list[EnvType]:
        with self.Session() as s:
            return list(s.scalars(sa.select(EnvType)))

    def sync_hosts(self, zone: str, hosts) -> None:
        """Replace the zone's hosts by ``hosts`` (HostInfo list); records their env types."""
        now = time.time()
        with self.Session.begin() as s:
            known = {h.name for h in s.scalars(sa.select(Host).where(Host.zone == zone))}
            for h in hosts:
                self._upsert(s, EnvType, dict(uid=h.env.uid, env_json=json.dumps(h.env.to_dict())),
                             update=False)
                self._upsert(s, Host, dict(zone=zone, name=h.name, env_uid=h.env.uid,
                                           labels_json=json.dumps(h.labels), updated_at=now))
                known.discard(h.name)
            if known:
                s.execute(sa.delete(Host).where(Host.zone == zone, Host.name.in_(known)))

    def hosts(self, zone: str | None = None) -> list[Host]:
        with self.Session() as s:
            q = sa.select(Host).order_by(Host.zone, Host.name)
            if zone:
                q = q.where(Host.zone == zone)
            return list(s.scalars(q))

    # -- services --
    def put_service(self, name: str, profile: dict, aliases: dict,
                    max_queuing_delay_s: float | None) -> Service:
        row = Service(name=name, profile_json=json.dumps(profile),
                      aliases_json=json.dumps(aliases), max_queuing_delay_s=max_queuing_delay_s,
                      created_at=time.time())
        with self.Session.begin() as s:
            s.merge(row)
        return row

    def service(self, name: str) -> Service:
        with self.Session() as s:
            row = s.get(Service, name)
        if row is None:
            raise NotFound(f"service: no service named {name!r}; register it with "
                           f"`fluidvim service register {name} --config-file FILE`",
                           field="service")
        return row

    def service_or_alias(self, name: str) -> tuple[Service, float]:
        """(the service, 1.0) or, for an alias, (its base service, slots per alias session)."""
        try:
            return self.service(name), 1.0
        except NotFound:
            for row in self.services():
                if name in row.aliases:
                    return row, float(row.aliases[name])
            raise

    def services(self) -> list[Service]:
        with self.Session() as s:
            return list(s.scalars(sa.select(Service).order_by(Service.name)))

    def delete_service(self, name: str) -> None:
        self.service(name)
        with self.Session.begin() as s:
            s.execute(sa.delete(Service).where(Service.name == name))

    # -- instances --
    def add_instance(self, **fields) -> Instance:
        row = Instance(created_at=time.time(), **fields)
        with self.Session.begin() as s:
            s.merge(row)
        return row

    def instances(self, service: str | None = None, zone: str | None = None,
                  statuses=istates.LIVE) -> list[Instance]:
        with self.Session() as s:
            q = sa.select(Instance).order_by(Instance.created_at)
            if service:
                q = q.where(Instance.service == service)
            if zone:
                q = q.where(Instance.zone == zone)
            if statuses:
                q = q.where(Instance.status.in_(statuses))
            return list(s.scalars(q))

    def set_instance_status(self, instance_id: str, status: str) -> None:
        with self.Session.begin() as s:
            s.execute(sa.update(Instance).where(Instance.id == instance_id).values(status=status))

    def set_instance_host(self, instance_id: str, host: str) -> None:
        """The zone moved the instance (a drained host's VNF runs elsewhere now)."""
        with self.Session.begin() as s:
            s.execute(sa.update(Instance).where(Instance.id == instance_id).values(host=host))

    # -- host power states (fluidvim.orchestrator.hostpower) --
    def host_power_rows(self) -> list[HostPowerRow]:
        with self.Session() as s:
            return list(s.scalars(sa.select(HostPowerRow).order_by(HostPowerRow.zone,
                                                                   HostPowerRow.host)))

    def host_power_row(self, zone: str, host: str) -> HostPowerRow | None:
        with self.Session() as s:
            return s.get(HostPowerRow, (zone, host))

    def set_host_power(self, zone: str, host: str, state: str, *, in_service: bool,
                       power: str | None, error: str | None, detail: dict, since: float) -> None:
        with self.Session.begin() as s:
            self._upsert(s, HostPowerRow, dict(zone=zone, host=host, state=state,
                                               in_service=bool(in_service), power=power,
                                               error=error, detail_json=json.dumps(detail),
                                               since=since, updated_at=time.time()))

    # -- slot reports --
    def save_slot_report(self, rep) -> None:
        """Store ``rep`` unless a newer report of the same (instance, service) is there (updates
        may arrive out of order, and at several orchestrators)."""
        values = dict(instance=rep.instance, service=rep.service, zone=rep.zone, host=rep.host,
                      region=rep.region, slots=rep.slots, exact=rep.exact,
                      delay_s=rep.delay_s, at=rep.at, watts_per_slot=rep.watts_per_slot)
        with self.Session.begin() as s:
            self._upsert(s, SlotReportRow, values, newer_than="at")

    def slot_report(self, instance: str, service: str) -> SlotReportRow | None:
        with self.Session() as s:
            return s.get(SlotReportRow, (instance, service))

    # -- slot reservations (shared registry) --
    def add_reservations(self, instance: str, service: str, count: int, at: float) -> None:
        with self.Session.begin() as s:
            s.add_all([SlotReservationRow(instance=instance, service=service, at=at)
                       for _ in range(count)])

    def reservations(self) -> dict[tuple[str, str], list[float]]:
        out: dict[tuple[str, str], list[float]] = {}
        with self.Session() as s:
            for r in s.scalars(sa.select(SlotReservationRow)):
                out.setdefault((r.instance, r.service), []).append(r.at)
        return out

    def drop_reservations(self, instance: str, service: str, upto: float) -> None:
        """Reservations of (instance, service) made at or before ``upto`` end."""
        with self.Session.begin() as s:
            s.execute(sa.delete(SlotReservationRow).where(
                SlotReservationRow.instance == instance, SlotReservationRow.service == service,
                SlotReservationRow.at <= upto))

    @contextlib.contextmanager
    def lock(self, name: str):
        """Mutual exclusion on ``name`` among every process on this database, for a decision
        that reads shared state and then writes it (the resolver's grant of a slot).
        PostgreSQL: a transaction-scoped advisory lock; SQLite (one host): an exclusive
        ``flock`` on a file next to the database; a thread lock first either way."""
        tlock = self._file_locks.setdefault(name, threading.Lock())
        with tlock:
            dialect = self.engine.dialect.name
            if dialect == "postgresql":
                key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big",
                                     signed=True)
                with self.engine.connect() as conn, conn.begin():
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
                    yield
            elif dialect == "sqlite":
                path = self.engine.url.database
                if not path or path == ":memory:":      # one process: the thread lock is all
                    yield
                    return
                with open(f"{path}.{name}.lock", "a") as f:
                    fcntl.flock(f, fcntl.LOCK_EX)
                    try:
                        yield
                    finally:
                        fcntl.flock(f, fcntl.LOCK_UN)
            else:
                raise NotImplementedError(
                    f"[orchestrator] active_active needs PostgreSQL or SQLite, not {dialect}")

    # -- workers (orchestrator processes sharing this database) --
    def register_worker(self, worker_id: str, host: str, pid: int) -> None:
        now = time.time()
        with self.Session.begin() as s:
            s.merge(WorkerRow(id=worker_id, host=host, pid=pid, started_at=now,
                              heartbeat_at=now))

    def heartbeat(self, worker_id: str) -> bool:
        """False: the row is gone - another worker declared this one dead and took over."""
        with self.Session.begin() as s:
            r = s.execute(sa.update(WorkerRow).where(WorkerRow.id == worker_id)
                          .values(heartbeat_at=time.time()))
            return r.rowcount == 1

    def workers(self) -> list[WorkerRow]:
        with self.Session() as s:
            return list(s.scalars(sa.select(WorkerRow).order_by(WorkerRow.started_at)))

    def claim_dead_worker(self, worker_id: str, cutoff: float) -> bool:
        """Take over a worker whose last heartbeat is older than ``cutoff``: True for exactly
        one caller (the delete is conditional and atomic)."""
        with self.Session.begin() as s:
            r = s.execute(sa.delete(WorkerRow).where(WorkerRow.id == worker_id,
                                                     WorkerRow.heartbeat_at < cutoff))
            return r.rowcount == 1

    def remove_worker(self, worker_id: str) -> None:
        with self.Session.begin() as s:
            s.execute(sa.delete(WorkerRow).where(WorkerRow.id == worker_id))

    def slot_reports(self) -> list[SlotReportRow]:
        with self.Session() as s:
            return list(s.scalars(sa.select(SlotReportRow)))

    def delete_slot_reports(self, instance: str) -> None:
        with self.Session.begin() as s:
            s.execute(sa.delete(SlotReportRow).where(SlotReportRow.instance == instance))
            s.execute(sa.delete(SlotReservationRow).where(SlotReservationRow.instance == instance))

    # -- decisions --
    def save_decision(self, service: str, status: str, zone: str | None, host: str | None,
                      rule: str, request: dict, steps: list[tuple[str, float, object]],
                      total_ms: float) -> str:
        did = str(uuidlib.uuid4())
        with self.Session.begin() as s:
            d = Decision(id=did, service=service, status=status, zone=zone, host=host, rule=rule,
                         request_json=json.dumps(request), total_ms=total_ms,
                         created_at=time.time())
            d.steps = [DecisionStep(decision_id=did, index=i, name=n, ms=ms,
                                    record_json=json.dumps(rec, default=str))
                       for i, (n, ms, rec) in enumerate(steps)]
            s.add(d)
        return did

    def decision(self, decision_id: str) -> Decision:
        with self.Session() as s:
            d = s.get(Decision, decision_id)
            if d is None and len(decision_id) >= 6:
                d = s.scalars(sa.select(Decision).where(
                    Decision.id.startswith(decision_id))).first()
        if d is None:
            raise NotFound(f"decision: no placement decision {decision_id!r} "
                           "(see `fluidvim placement list`)", field="decision")
        return d

    def decisions(self, limit: int = 50) -> list[Decision]:
        with self.Session() as s:
            return list(s.scalars(sa.select(Decision).order_by(Decision.created_at.desc())
                                  .limit(limit)))

    def set_decision(self, decision_id: str, **fields) -> None:
        with self.Session.begin() as s:
            s.execute(sa.update(Decision).where(Decision.id == decision_id).values(**fields))

    # -- launch records (queuing delay) --
    def launch_started(self, zone: str, service: str, predicted_s: float | None,
                       started_at: float | None = None, token: str | None = None) -> int:
        self._settle_unrecorded()
        with self.Session.begin() as s:
            row = LaunchRow(zone=zone, service=service, started_at=started_at or time.time(),
                            predicted_s=predicted_s, owner=self.owner, token=token)
            s.add(row)
            s.flush()
            return row.id

    def launch_finished(self, launch_id: int, ok: bool, instance_id: str | None = None,
                        error: str | None = None, kind: str | None = None) -> None:
        now = time.time()
        with self.Session.begin() as s:
            row = s.get(LaunchRow, launch_id)
            row.finished_at, row.ok, row.instance_id, row.error = now, ok, instance_id, error
            row.kind = kind
            row.ms = (now - row.started_at) * 1000.0

    def launches(self, zone: str | None = None, service: str | None = None, limit: int = 20,
                 in_flight: bool = False, owner: str | None = None) -> list[LaunchRow]:
        with self.Session() as s:
            q = sa.select(LaunchRow).order_by(LaunchRow.started_at.desc())
            if owner:
                q = q.where(LaunchRow.owner == owner)
            if zone:
                q = q.where(LaunchRow.zone == zone)
            if service:
                q = q.where(LaunchRow.service == service)
            if in_flight:
                q = q.where(LaunchRow.finished_at.is_(None))
            else:
                q = q.where(LaunchRow.ok.is_(True))
            return list(s.scalars(q.limit(limit)))

    def recent_launches_all(self, per_key: int) -> list[LaunchRow]:
        """The newest ``per_key`` successful launches of every (zone, service, kind), in one
        query."""
        rn = sa.func.row_number().over(partition_by=(LaunchRow.zone, LaunchRow.service,
                                                      LaunchRow.kind),
                                       order_by=LaunchRow.started_at.desc()).label("rn")
        sub = (sa.select(LaunchRow.id, rn).where(LaunchRow.ok.is_(True),
                                                  LaunchRow.ms.is_not(None)).subquery())
        q = (sa.select(LaunchRow).join(sub, sub.c.id == LaunchRow.id)
             .where(sub.c.rn <= per_key).order_by(LaunchRow.started_at.desc()))
        with self.Session() as s:
            return list(s.scalars(q))

    def in_flight_counts(self) -> dict[str, int]:
        self._settle_unrecorded()
        with self.Session() as s:
            return dict(s.execute(sa.select(LaunchRow.zone, sa.func.count())
                                  .where(LaunchRow.finished_at.is_(None))
                                  .group_by(LaunchRow.zone)).all())

    def abandon_in_flight(self, owners=None, error: str = "orchestrator restarted") -> int:
        """Launches that never finished are failed (nobody waits for them): all of them after a
        restart of the only orchestrator; with ``owners`` (worker ids; None in the list = rows
        without an owner) only theirs."""
        q = sa.update(LaunchRow).where(LaunchRow.finished_at.is_(None))
        if owners is not None:
            ids = [o for o in owners if o is not None]
            cond = LaunchRow.owner.in_(ids)
            if None in owners:
                cond = sa.or_(cond, LaunchRow.owner.is_(None))
            q = q.where(cond)
        with self.Session.begin() as s:
            r = s.execute(q.values(finished_at=time.time(), ok=False, error=error))
            return r.rowcount

    def launch_unrecorded(self, launch_id: int, instance_id: str, error: str) -> None:
        """A launch whose instance could not be recorded (the database went away) and was
        terminated: failed, and the instance's rows (record, slot reports) removed should they
        have been committed after all (the server died before it acknowledged). Done when the
        database answers again: before the next launch starts or the launches in flight are
        counted."""
        with self._unrecorded_lock:
            self._unrecorded.append((launch_id, instance_id, error))

    def _settle_unrecorded(self) -> None:
        if not self._unrecorded:
            return
        with self._unrecorded_lock:
            while self._unrecorded:
                launch_id, instance_id, error = self._unrecorded[0]
                with self.Session.begin() as s:         # DatabaseDown: kept for the next time
                    s.execute(sa.delete(Instance).where(Instance.id == instance_id))
                    s.execute(sa.delete(SlotReportRow).where(SlotReportRow.instance == instance_id))
                    s.execute(sa.update(LaunchRow).where(LaunchRow.id == launch_id)
                              .values(finished_at=time.time(), ok=False, error=error))
                self._unrecorded.pop(0)

    def abandon_launch(self, launch_id: int, error: str) -> int:
        """Fail one launch record if it is still in flight (1), else leave it (0)."""
        with self.Session.begin() as s:
            r = s.execute(sa.update(LaunchRow).where(LaunchRow.id == launch_id,
                                                     LaunchRow.finished_at.is_(None))
                          .values(finished_at=time.time(), ok=False, error=error))
            return r.rowcount

    # -- network services (NFV descriptors) --
    def add_ns(self, **fields) -> NetworkServiceRow:
        now = time.time()
        row = NetworkServiceRow(id=str(uuidlib.uuid4()), created_at=now, updated_at=now,
                                owner=self.owner, **_ns_json(fields))
        with self.Session.begin() as s:
            s.add(row)
        return row

    def update_ns(self, ns_id: str, **fields) -> None:
        with self.Session.begin() as s:
            self._check_fence(s, ns_id)
            self._update_ns(s, ns_id, fields)

    def _update_ns(self, s, ns_id: str, fields: dict) -> None:
        s.execute(sa.update(NetworkServiceRow).where(NetworkServiceRow.id == ns_id)
                  .values(updated_at=time.time(), owner=self.owner, **_ns_json(fields)))

    def network_services(self, deleted: bool = False) -> list[NetworkServiceRow]:
        with self.Session() as s:
            q = sa.select(NetworkServiceRow).order_by(NetworkServiceRow.created_at)
            if not deleted:
                q = q.where(NetworkServiceRow.status.in_(NS_LIVE))
            return list(s.scalars(q))

    def network_service(self, name_or_id: str) -> NetworkServiceRow:
        """The live NS of that name (else by id or an id prefix of 6+ characters)."""
        with self.Session() as s:
            row = s.scalars(sa.select(NetworkServiceRow).where(
                NetworkServiceRow.name == name_or_id, NetworkServiceRow.status.in_(NS_LIVE))
            ).first()
            if row is None:
                row = s.get(NetworkServiceRow, name_or_id)
            if row is None and len(name_or_id) >= 6:
                row = s.scalars(sa.select(NetworkServiceRow).where(
                    NetworkServiceRow.id.startswith(name_or_id))).first()
        if row is None:
            raise NotFound(f"ns: no network service {name_or_id!r} (see `fluidvim ns list`)",
                           field="ns")
        return row

    # -- NS operation occurrences --
    def op_started(self, ns_id: str, type_: str, *, op_id: str | None = None, **detail) -> str:
        oid = op_id or str(uuidlib.uuid4())
        with self.Session.begin() as s:
            s.add(NSOperation(id=oid, ns_id=ns_id, type=type_, state=states.OP_PROCESSING,
                              detail_json=json.dumps(detail), started_at=time.time(),
                              owner=self.owner))
        return oid

    def op_finished(self, op_id: str, state: str, error: str | None = None, *,
                    ns: dict | None = None, **detail) -> None:
        """End an operation; ``ns``: fields of its network service written in the same
        transaction, so no reader sees the new level/instances with the operation unfinished.
        The NS operation lock taken for it goes in that transaction too: a client that sees the
        operation ended can start the next one at once (not be refused for a lock that its
        holder was about to release)."""
        with self.Session.begin() as s:
            row = s.get(NSOperation, op_id)
            self._check_fence(s, row.ns_id)
            row.state, row.error, row.ended_at = state, error, time.time()
            if detail:
                row.detail_json = json.dumps({**row.detail, **detail})
            if ns:
                self._update_ns(s, row.ns_id, ns)
            s.execute(sa.delete(NSLockRow).where(NSLockRow.ns_id == row.ns_id,
                                                 NSLockRow.op_id == op_id))

    def op_lost(self, op_id: str, error: str) -> bool:
        """End as failed an operation that lost its NS operation lock (:class:`LeaseLost`)
        unless a peer took it over (adopted it: no longer this process's); True when ended here
        - nobody else will finish it."""
        with self.Session.begin() as s:
            return s.execute(sa.update(NSOperation).where(
                NSOperation.id == op_id, NSOperation.state == states.OP_PROCESSING,
                NSOperation.owner == self.owner).values(
                state=states.OP_FAILED, error=error, ended_at=time.time())).rowcount == 1

    def op_progress(self, op_id: str, **detail) -> None:
        """Record how far an operation got (its steps), for a survivor that resumes it."""
        with self.Session.begin() as s:
            row = s.get(NSOperation, op_id)
            self._check_fence(s, row.ns_id)
            row.detail_json = json.dumps({**row.detail, **detail})

    def processing_ops(self, owner: str) -> list[NSOperation]:
        """The operations under way by the worker ``owner``, oldest first."""
        with self.Session() as s:
            return list(s.scalars(sa.select(NSOperation).where(
                NSOperation.state == states.OP_PROCESSING, NSOperation.owner == owner)
                .order_by(NSOperation.started_at)))

    def adopt_op(self, op_id: str) -> None:
        """This worker runs the operation now (a dead one's, resumed)."""
        with self.Session.begin() as s:
            s.execute(sa.update(NSOperation).where(NSOperation.id == op_id)
                      .values(owner=self.owner))

    # -- the NS operation lock (one operation per network service, across processes) --
    @property
    def lock_owner(self) -> str:
        return self.owner or _PROCESS_ID

    def take_ns_lock(self, ns_id: str, op_id: str, op_type: str, lease: float | None, *,
                     steal_from: str | None = None) -> NSLockRow | None:
        """Take the lock of ``ns_id`` for operation ``op_id``: None when taken, else the row of
        the operation holding it. Free = no row, a lease expired, or held by ``steal_from`` (a
        dead worker being taken over). Atomic on any database: a conditional UPDATE (one
        writer wins; the others re-read the row it wrote) or an INSERT on the primary key."""
        for _ in range(3):
            now = time.time()
            vals = {"op_id": op_id, "op_type": op_type, "owner": self.lock_owner,
                    "taken_at": now, "expires_at": None if lease is None else now + lease}
            free = sa.and_(NSLockRow.expires_at.is_not(None), NSLockRow.expires_at < now)
            if steal_from is not None:
                free = sa.or_(free, NSLockRow.owner == steal_from)
            with self.Session.begin() as s:
                r = s.execute(sa.update(NSLockRow).where(NSLockRow.ns_id == ns_id, free)
                              .values(**vals))
                if r.rowcount == 1:
                    return None
            try:
                with self.Session.begin() as s:
                    s.add(NSLockRow(ns_id=ns_id, **vals))
                return None
            except sa.exc.IntegrityError:
                pass
            with self.Session() as s:
                held = s.get(NSLockRow, ns_id)
            if held is not None:
                return held
        raise RuntimeError(f"ns {ns_id}: its operation lock changed hands 3 times in a row")

    def release_ns_lock(self, ns_id: str, op_id: str, any_owner: bool = False) -> None:
        """Free the lock if ``op_id`` of this process holds it (``any_owner``: of whichever
        process - a lone orchestrator's start, its predecessors' locks): not one a peer took
        over for the same operation."""
        q = sa.delete(NSLockRow).where(NSLockRow.ns_id == ns_id, NSLockRow.op_id == op_id)
        with self.Session.begin() as s:
            s.execute(q if any_owner else q.where(NSLockRow.owner == self.lock_owner))

    @contextlib.contextmanager
    def fenced(self, ns_id: str, op_id: str, lease: float | None):
        """Run an operation of ``ns_id`` under the lock ``op_id`` of this process holds: within,
        each write of this thread to the NS's record and operations (``update_ns``,
        ``op_progress``, ``op_finished``) and each :meth:`check_fence` first confirms, in its own
        transaction, that the lock is still this one's and renews its lease - else
        :class:`LeaseLost` and nothing is written. A lease can expire under its holder (its
        heartbeat stalled longer than the lease: a slow database, a paused VM): another operation
        may then take the lock, or a peer take the holder's operations over as a dead worker's;
        the fence keeps the old holder from going on with its steps beside the new one. A lock
        expired but not taken is still the holder's (renewed here: the take is conditional in
        the database, so one of the two wins). Call :meth:`check_fence` before a step outside
        the database (a launch, a removal); one such step may still run when a peer takes the
        lock over between the check and its end."""
        prev = getattr(self._fence, "held", None)
        self._fence.held = (ns_id, op_id, lease)
        try:
            yield
        finally:
            self._fence.held = prev

    def check_fence(self) -> None:
        """Raise :class:`LeaseLost` unless this thread's :meth:`fenced` lock is still held."""
        held = getattr(self._fence, "held", None)
        if held is not None:
            with self.Session.begin() as s:
                self._check_fence(s, held[0])

    def _check_fence(self, s, ns_id: str) -> None:
        held = getattr(self._fence, "held", None)
        if held is None or held[0] != ns_id:
            return
        _, op_id, lease = held
        r = s.execute(sa.update(NSLockRow).where(
            NSLockRow.ns_id == ns_id, NSLockRow.op_id == op_id,
            NSLockRow.owner == self.lock_owner).values(
            expires_at=None if lease is None else time.time() + lease))
        if r.rowcount != 1:
            raise LeaseLost(f"ns {ns_id}: operation {op_id} lost its operation lock (its lease "
                            "expired and another operation took it, or a peer took it over): "
                            "stopped here, without rolling back")

    def renew_ns_locks(self, lease: float) -> int:
        """Extend the lease of every lock this process holds (its heartbeat)."""
        with self.Session.begin() as s:
            return s.execute(sa.update(NSLockRow).where(NSLockRow.owner == self.lock_owner)
                             .values(expires_at=time.time() + lease)).rowcount

    def ns_locks(self) -> list[NSLockRow]:
        with self.Session() as s:
            return list(s.scalars(sa.select(NSLockRow)))

    def ns_operation(self, op_id: str) -> NSOperation:
        with self.Session() as s:
            row = s.get(NSOperation, op_id)
        if row is None:
            raise NotFound(f"op_id: no network service operation {op_id!r} (see `fluidvim ns "
                           "show NAME`)", field="op_id")
        return row

    def ns_operations(self, ns_id: str | None = None, limit: int | None = 200,
                      state: str | None = None) -> list[NSOperation]:
        """The newest ``limit`` operations (all with None), oldest first; of one NS and in one
        state when given."""
        with self.Session() as s:
            q = sa.select(NSOperation).order_by(NSOperation.started_at.desc())
            if ns_id is not None:
                q = q.where(NSOperation.ns_id == ns_id)
            if state is not None:
                q = q.where(NSOperation.state == state)
            return list(reversed(list(s.scalars(q.limit(limit)))))

    @staticmethod
    def _owned(column, owners):
        cond = column.in_([o for o in owners if o is not None])
        return sa.or_(cond, column.is_(None)) if None in owners else cond

    def in_flight_ns(self, owners) -> list[str]:
        """Ids of the network services with an operation under way by one of ``owners``
        (worker ids; None = rows without one): a processing operation, or a deploy/delete."""
        with self.Session() as s:
            ops = s.scalars(sa.select(NSOperation.ns_id).where(
                NSOperation.state == states.OP_PROCESSING, self._owned(NSOperation.owner, owners)))
            rows = s.scalars(sa.select(NetworkServiceRow.id).where(
                NetworkServiceRow.status.in_(states.NS_IN_PROGRESS),
                self._owned(NetworkServiceRow.owner, owners)))
            return sorted(set(ops) | set(rows))

    def abandon_ns(self, owners=None) -> int:
        """After a restart: operations that were under way failed, and a deploy or delete under
        way leaves the record failed (`ns rm` cleans up); with ``owners`` (worker ids, None =
        rows without one) only theirs (operations they run, records they acted on last)."""
        q = sa.update(NetworkServiceRow).where(
            NetworkServiceRow.status.in_(states.NS_IN_PROGRESS))
        ops = sa.update(NSOperation).where(NSOperation.state == states.OP_PROCESSING)
        if owners is not None:
            q = q.where(self._owned(NetworkServiceRow.owner, owners))
            ops = ops.where(self._owned(NSOperation.owner, owners))
        locks = sa.delete(NSLockRow)
        if owners is not None:
            locks = locks.where(NSLockRow.owner.in_([o for o in owners if o is not None]))
        with self.Session.begin() as s:
            s.execute(locks)
            s.execute(ops.values(state=states.OP_FAILED, ended_at=time.time(),
                                 error="the orchestrator stopped during the operation"))
            r = s.execute(q.values(
                status=states.NS_FAILED, error="the orchestrator stopped during the operation; "
                "`fluidvim ns rm` removes what it created", updated_at=time.time()))
            return r.rowcount


_PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}"   # a lone orchestrator's lock owner
_NS_JSON = ("plan", "descriptors", "networks", "services", "instances", "steps", "scale")


def _ns_json(fields: dict) -> dict:
    """NetworkServiceRow column values: the JSON fields encoded."""
    return {(f"{k}_json" if k in _NS_JSON else k): (json.dumps(v) if k in _NS_JSON else v)
            for k, v in fields.items()}
