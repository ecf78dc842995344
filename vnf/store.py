# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The launch core's state store: SQLite by default, or a SQLAlchemy URL (PostgreSQL).

It holds every VNF this host started (so a restarted caller finds them again) and the history of
launches (phases and totals), from which the queuing delay is estimated.

The store's statements are SQL text, written once below. On a SQLite file (the default) they run
on the standard library's ``sqlite3``: importing SQLAlchemy alone takes longer (~200 ms on this
project's machines) than a whole ``fluidvim vnf list`` may (issue 11), and every ``fluidvim vnf``
command opens the store. Other URLs run the same statements through SQLAlchemy, and so does a
launch's commit that carries a caller's SQLAlchemy work (``on_record``). :attr:`StateStore.engine`
is made on first use, for that and for callers keeping tables of their own in this database (the
Nova driver's instance names).

The schema is versioned (alembic, ``fluidvim.vnf.migrations``, defined by ``fluidvim.vnf.models``
together with the Nova driver's tables): a store creates it at head in an empty database and
refuses an older one - ``fluidvim-manage db sync --store vnf`` upgrades it (:mod:`fluidvim.common.migration`).
Opening a database at head costs one query and no SQLAlchemy or alembic import.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import functools
import json
import sqlite3
import threading
import time

from fluidvim.common.errors import DependencyDown, StoreFull

from . import states


@dataclasses.dataclass
class VNFRecord:
    """A row of ``vnfs``. Records are values: change one with :meth:`StateStore.update`."""

    id: str
    name: str
    backend: str
    status: str
    spec_json: str
    pool_key: str | None = None
    pid: int | None = None
    config: str | None = None
    boot_us: int | None = None
    reason: str | None = None
    created_at: float | None = None
    updated_at: float | None = None

    @property
    def spec(self):
        from .spec import VNFSpec
        return VNFSpec.from_dict(json.loads(self.spec_json))


@dataclasses.dataclass
class LaunchRecord:
    """A row of ``launches``: one launch, ok or not, with its phases."""

    id: int | None
    vnf_id: str
    backend: str
    kind: str                 # cold | warm
    ok: bool
    total_ms: float
    phases_json: str
    at: float

    @property
    def phases(self) -> dict:
        return json.loads(self.phases_json)


# The schema is fluidvim.vnf.models' (the migrations' source): the store only names its columns.

_VNF_FIELDS = tuple(f.name for f in dataclasses.fields(VNFRecord))
_VNF_COLUMNS = ", ".join(_VNF_FIELDS)
_LAUNCH_COLUMNS = ", ".join(f.name for f in dataclasses.fields(LaunchRecord))

# Parameters are named (:name): sqlite3 and SQLAlchemy's text() both take them as they are.
_SELECT_VNFS = f"SELECT {_VNF_COLUMNS} FROM vnfs"
_INSERT_VNF = (f"INSERT INTO vnfs ({_VNF_COLUMNS}) "
               f"VALUES ({', '.join(':' + f for f in _VNF_FIELDS)})")
# the oldest booted shell of a pool key, taken in one statement (safe across processes)
_CLAIM = (f"UPDATE vnfs SET status = '{states.RUNNING}', name = :name, pool_key = NULL, "
          f"updated_at = :now WHERE id = (SELECT id FROM vnfs WHERE pool_key = :key "
          f"AND status = '{states.POOL}' ORDER BY created_at LIMIT 1) AND status = '{states.POOL}' "
          f"RETURNING {_VNF_COLUMNS}")
_INSERT_LAUNCH = ("INSERT INTO launches (vnf_id, backend, kind, ok, total_ms, phases_json, at) "
                  "VALUES (:vnf_id, :backend, :kind, :ok, :total_ms, :phases_json, :at)")
_IDS_NAMED = f"SELECT id FROM vnfs WHERE name = :name AND status != '{states.POOL}' ORDER BY created_at"


def _update_statement(fields) -> str:
    unknown = set(fields) - set(_VNF_FIELDS) - {"updated_at"}
    if unknown or "id" in fields:
        raise ValueError(f"cannot update {', '.join(sorted(unknown or {'id'}))} of a VNF record")
    return f"UPDATE vnfs SET {', '.join(f'{k} = :{k}' for k in fields)} WHERE id = :id"


def _in(column: str, values, params: dict, prefix: str) -> str:
    """``column IN (:prefix0, ...)`` with the values added to ``params``."""
    names = []
    for i, v in enumerate(values):
        params[f"{prefix}{i}"] = v
        names.append(f":{prefix}{i}")
    return f"{column} IN ({', '.join(names)})"


def _launch_record(row) -> LaunchRecord:
    rec = LaunchRecord(*row)
    rec.ok = bool(rec.ok)
    return rec


# what a database says when its disk is full (SQLite; PostgreSQL's DiskFull, and the errno text)
_FULL = ("database or disk is full", "no space left on device", "disk i/o error",
         "could not extend file", "disk full")
STORE_FIX = ("start it (pg_ctl start, or systemctl start postgresql), or fix [vnf] "
             "state_connection")


def _where(url: str) -> str:
    """The store's database as a user names it, without its password."""
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///"):]
    from sqlalchemy.engine import make_url  # only here: not the SQLite path

    u = make_url(url)
    return f"{u.get_backend_name()} at {u.host or 'localhost'}:{u.port or ''}/{u.database or ''}"


def store_error(url: str, e: BaseException) -> Exception | None:
    """``e`` (from the database) as what a caller can act on: :class:`StoreFull` when the disk
    is full, :class:`DependencyDown` when the database server does not answer (refused, killed,
    restarted under an open connection), else None (not the store's availability: ``e`` stands).
    The message is one line: the database, its own first line, the fix."""
    orig = getattr(e, "orig", None) or e
    first = next((ln.strip() for ln in str(orig).splitlines() if ln.strip()), type(orig).__name__)
    low = str(orig).lower()
    if isinstance(e, sqlite3.Error) or isinstance(orig, sqlite3.Error):
        if any(f in low for f in _FULL):
            return StoreFull(f"the state store {_where(url)} cannot write ({first}): free space "
                             "on its file system (df -h), then retry; this request recorded "
                             "nothing and what was stored before is intact")
        return None
    if not type(e).__module__.startswith("sqlalchemy"):
        return None
    if any(f in low for f in _FULL):
        return StoreFull(f"the state store's database {_where(url)} cannot write ({first}): "
                         "free space on the database server's disk, then retry; this request "
                         "recorded nothing")
    if type(e).__name__ in ("OperationalError", "InterfaceError") or \
            getattr(e, "connection_invalidated", False):
        return DependencyDown(f"the state store's database ({_where(url)})", first, STORE_FIX)
    return None


class _Connection:
    """The store's view of a connection (``raw``: sqlite3's): a statement's rows, or just run it."""

    def __init__(self, raw: sqlite3.Connection):
        self.raw = raw

    def rows(self, sql: str, params=None) -> list:
        return self.raw.execute(sql, params or {}).fetchall()

    def run(self, sql: str, params=None) -> None:
        self.raw.execute(sql, params or {})


@functools.lru_cache(maxsize=256)
def _text(sql: str):
    """One of the store's statements as a SQLAlchemy construct, built once."""
    import sqlalchemy as sa

    return sa.text(sql)


class _EngineConnection(_Connection):
    """The same on a SQLAlchemy connection."""

    def rows(self, sql, params=None):
        return self.raw.execute(_text(sql), params or {}).all()

    def run(self, sql, params=None):
        self.raw.execute(_text(sql), params or {})


class _SQLiteFile:
    """Connections to one SQLite file in WAL mode, reused: a connection costs more than the
    statements of a warm launch. Autocommit, with explicit transactions (:meth:`connection`)."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._generation = 0            # close() ends one: connections in use then close on return

    def _connect(self) -> sqlite3.Connection:
        raw = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                              check_same_thread=False)
        raw.execute("PRAGMA journal_mode=WAL")
        raw.execute("PRAGMA synchronous=NORMAL")
        return raw

    @contextlib.contextmanager
    def connection(self, transaction: bool):
        with self._lock:
            generation = self._generation
            raw = self._idle.pop() if self._idle else None
        if raw is None:
            raw = self._connect()
        try:
            if transaction:
                raw.execute("BEGIN")
            yield _Connection(raw)
            raw.commit()                # no-op outside a transaction
        except BaseException:
            if raw.in_transaction:
                raw.rollback()
            raise
        finally:
            with self._lock:
                keep = generation == self._generation
                if keep:
                    self._idle.append(raw)
            if not keep:
                raw.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        for raw in idle:
            raw.close()


class StateStore:
    def __init__(self, url: str):
        self.url = url
        self._engine = None
        self._engine_lock = threading.Lock()
        path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else None
        # a plain file path; in-memory databases and URL options go through SQLAlchemy
        self._file = _SQLiteFile(path) if path and "?" not in path and path != ":memory:" else None
        try:
            self._check_schema()
        except BaseException:
            self.close()
            raise

    def _check_schema(self) -> None:
        """The database must hold this release's schema (:mod:`fluidvim.common.migration`). The common
        case, a database at head, is one query (on sqlite3 for a SQLite file); anything else - an
        empty database, created at head, or an older one, refused with the ``fluidvim-manage db
        sync`` hint - goes through alembic, imported only then."""
        from .migrations import HEAD, VERSION_TABLE

        try:
            with self._connection() as conn:
                rows = conn.rows(f"SELECT version_num FROM {VERSION_TABLE}")
            if [tuple(r) for r in rows] == [(HEAD,)]:
                return
        except Exception:  # noqa: BLE001 - no version table (yet): alembic decides below
            pass
        from fluidvim.common import migration

        try:
            migration.check(self.engine, "vnf")
        except Exception as e:
            mapped = store_error(self.url, e)
            if mapped is None:
                raise
            raise mapped from e

    @property
    def engine(self):
        """The database as a SQLAlchemy engine, made (and SQLAlchemy imported) on first use."""
        with self._engine_lock:
            if self._engine is None:
                from fluidvim.common.sql import make_engine  # SQLAlchemy: off the CLI's fast path

                self._engine = make_engine(self.url)
            return self._engine

    def _dialect(self) -> str:
        return "sqlite" if self._file else self.engine.dialect.name

    @contextlib.contextmanager
    def _connection(self, transaction: bool = False, engine: bool = False):
        """A connection for the store's statements; ``transaction``: all of them or none.
        ``engine``: a SQLAlchemy one even on a SQLite file (``.raw`` is then that connection)."""
        try:
            if self._file is not None and not engine:
                with self._file.connection(transaction) as conn:
                    yield conn
                return
            with self.engine.begin() as raw:             # committed at the end, or rolled back
                yield _EngineConnection(raw)
        except Exception as e:
            mapped = store_error(self.url, e)
            if mapped is None:
                raise
            raise mapped from e

    def close(self) -> None:
        """Close the store's connections (and its engine, when one was made)."""
        if self._file is not None:
            self._file.close()
        if self._engine is not None:
            self._engine.dispose()

    # -- VNFs --
    def add(self, rec: VNFRecord) -> None:
        rec.created_at = rec.updated_at = time.time()
        with self._connection() as conn:
            conn.run(_INSERT_VNF, dataclasses.asdict(rec))

    def _vnfs(self, where: str = "", params=None, order: str = "created_at",
              limit: int | None = None) -> list[VNFRecord]:
        sql = _SELECT_VNFS + (f" WHERE {where}" if where else "") + f" ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._connection() as conn:
            return [VNFRecord(*row) for row in conn.rows(sql, params)]

    def get(self, vnf_id: str) -> VNFRecord | None:
        rows = self._vnfs("id = :id", {"id": vnf_id})
        return rows[0] if rows else None

    def find(self, id_or_name: str) -> VNFRecord | None:
        """The VNF with this id, else the newest one (not a pool shell) with this name, else one
        whose id starts with it (6 characters or more)."""
        rec = self.get(id_or_name)
        if rec is None:
            rows = self._vnfs(f"name = :name AND status != '{states.POOL}'", {"name": id_or_name},
                              order="created_at DESC", limit=1)
            rec = rows[0] if rows else None
        if rec is None and len(id_or_name) >= 6:
            rows = self._vnfs("id LIKE :prefix ESCAPE '\\'",
                              {"prefix": id_or_name.replace("\\", "\\\\").replace("%", "\\%")
                               .replace("_", "\\_") + "%"}, limit=1)
            rec = rows[0] if rows else None
        return rec

    def list(self, statuses=None, backend: str | None = None,
             name: str | None = None) -> list[VNFRecord]:
        """Records oldest first, optionally only those with a status in ``statuses``, of one
        ``backend`` or called ``name``."""
        where: builtins.list[str] = []
        params: dict = {}
        if statuses:
            where.append(_in("status", statuses, params, "s"))
        if backend:
            where.append("backend = :backend")
            params["backend"] = backend
        if name is not None:
            where.append("name = :name")
            params["name"] = name
        return self._vnfs(" AND ".join(where), params)

    def update(self, vnf_id: str, **fields) -> None:
        fields["updated_at"] = time.time()
        with self._connection() as conn:
            conn.run(_update_statement(fields), {**fields, "id": vnf_id})

    def ids_named(self, name: str) -> builtins.list[str]:
        """Ids of the VNFs (not pool shells) called ``name``, oldest first: one indexed query."""
        with self._connection() as conn:
            return [row[0] for row in conn.rows(_IDS_NAMED, {"name": name})]

    def claim_pool_shell(self, pool_key: str, name: str) -> VNFRecord | None:
        """Atomically take the oldest booted shell of ``pool_key`` (safe across processes):
        one ``UPDATE ... WHERE status = 'pool' ... RETURNING`` statement."""
        for _ in range(3):     # a concurrent claimer may win the same row (READ COMMITTED)
            with self._connection(transaction=True) as conn:
                rows = conn.rows(_CLAIM, {"key": pool_key, "name": name, "now": time.time()})
            if rows:
                return VNFRecord(*rows[0])
            if not self.count_pool(pool_key, (states.POOL,)):
                return None
        return None

    def count_pool(self, pool_key: str, statuses=(states.POOL, states.BOOTING)) -> int:
        params = {"key": pool_key}
        sql = f"SELECT count(*) FROM vnfs WHERE pool_key = :key AND {_in('status', statuses, params, 's')}"
        with self._connection() as conn:
            return conn.rows(sql, params)[0][0]

    def delete(self, vnf_id: str) -> None:
        with self._connection() as conn:
            conn.run("DELETE FROM vnfs WHERE id = :id", {"id": vnf_id})

    def finish_launch(self, vnf_id: str, fields: dict, *, backend: str, kind: str,
                      total_ms: float, phases: dict, on_record=None) -> None:
        """A successful launch's one commit: the VNF's record (``fields``), its launch history
        row and whatever ``on_record(conn)`` writes (a caller's own rows about this VNF, e.g.
        the Nova driver's instance name, on a SQLAlchemy connection) in one transaction: all or
        nothing.

        ``total_ms`` is the launch's time up to this call (the commit itself is not in it)."""
        now = time.time()
        fields = {**fields, "updated_at": now}
        with self._connection(transaction=True, engine=on_record is not None) as conn:
            conn.run(_update_statement(fields), {**fields, "id": vnf_id})
            conn.run(_INSERT_LAUNCH, self._launch_row(vnf_id, backend, kind, True, total_ms,
                                                      phases, now))
            if on_record is not None:
                on_record(conn.raw)

    @staticmethod
    def _launch_row(vnf_id, backend, kind, ok, total_ms, phases, at) -> dict:
        return {"vnf_id": vnf_id, "backend": backend, "kind": kind, "ok": ok,
                "total_ms": total_ms, "phases_json": json.dumps(phases), "at": at}

    # -- launch history --
    def record_launch(self, vnf_id: str, backend: str, kind: str, ok: bool, total_ms: float,
                      phases: dict) -> None:
        with self._connection() as conn:
            conn.run(_INSERT_LAUNCH, self._launch_row(vnf_id, backend, kind, ok, total_ms,
                                                      phases, time.time()))

    def recent_launches(self, limit: int, backend: str | None = None,
                        kind: str | None = None) -> builtins.list[LaunchRecord]:
        """Successful launches, newest first."""
        sql = f"SELECT {_LAUNCH_COLUMNS} FROM launches WHERE ok = :ok"
        params: dict = {"ok": True}
        if backend:
            sql += " AND backend = :backend"
            params["backend"] = backend
        if kind:
            sql += " AND kind = :kind"
            params["kind"] = kind
        sql += f" ORDER BY at DESC LIMIT {int(limit)}"
        with self._connection() as conn:
            return [_launch_record(row) for row in conn.rows(sql, params)]
