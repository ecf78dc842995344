# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Schema migrations of fluidvim's databases (alembic), and the check every store makes on start.

Three schemas, each with its own alembic environment (shipped in its package) and its own version
table, because each can live in a database of its own:

``vnf``
    the launch core's state (``fluidvim.vnf.store``: VNF records, launch history, pool shells)
    and the Nova driver's tables that share its database and transactions
    (``fluidvim.nova_driver.models``). One database per compute host / local zone, usually SQLite
    (``[vnf] state_connection``, default ``sqlite:///<state_dir>/vnf.sqlite``).
``orchestrator``
    the orchestrator's central database (``[orchestrator] connection``): ``fluidvim.orchestrator.db``
    and the VIM API's tables (``fluidvim.orchestrator.osm.models``).
``evaluator``
    the stage-1 probe cache (``fluidvim.evaluator.cache``). The orchestrator keeps it in its own
    database (``db sync --store orchestrator`` syncs both); a standalone ``ProbeCache(url)`` keeps
    it alone.

Schemas sharing one database do not see each other's tables (``include_name``), so one database
may hold all three (the one-machine demo can point both URLs at one file).

What a store does on start (:func:`check`), like OpenStack services after ``nova-manage db sync``:

* a database at this release's head revision: go (one ``SELECT`` of the version table);
* an *empty* database (none of the schema's tables, no version table): created at head
  (``create_all`` from the models + stamp head) - the one-machine demo stays zero-config;
* anything else - an older revision, an un-versioned database with the tables of a release
  before migrations existed, a revision this release does not know - the store refuses with
  :class:`SchemaError`, which names ``fluidvim-manage db sync``. Upgrades are explicit.

``fluidvim-manage db sync`` (:func:`sync`) upgrades to head. An un-versioned database with the
tables of the release before migrations is *adopted*: the baseline revision creates only the
baseline tables that are missing (e.g. the Nova tables in a local zone's database) after checking
the existing ones have the baseline's columns, and is recorded; later revisions then run as usual.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import time
import zlib

import sqlalchemy as sa

from fluidvim.common.errors import SchemaError

LOG = logging.getLogger(__name__)

# what a refused store tells the operator to run (nova-manage db sync's counterpart)
SYNC_HINT = {
    "vnf": "fluidvim-manage --config-file FILE db sync --store vnf",
    "orchestrator": "fluidvim-manage --config-file FILE db sync --store orchestrator",
    "evaluator": "fluidvim-manage --config-file FILE db sync --store orchestrator (a probe cache "
                 "of its own: fluidvim-manage db sync --store evaluator --connection URL)",
}



@dataclasses.dataclass(frozen=True)
class Schema:
    name: str
    package: str                 # holds migrations/ (env.py, versions/) and HEAD
    version_table: str
    models: tuple[str, ...]      # modules whose import defines the tables on ``base``
    base: str                    # "module:Base" - its metadata is the schema's

    @property
    def head(self) -> str:
        """This release's head revision (a constant; a unit test checks it against the
        migration scripts, so starting a service needs no alembic import)."""
        return importlib.import_module(f"{self.package}.migrations").HEAD

    def metadata(self) -> sa.MetaData:
        for m in self.models:
            importlib.import_module(m)
        mod, attr = self.base.split(":")
        return getattr(importlib.import_module(mod), attr).metadata

    def tables(self) -> set[str]:
        return set(self.metadata().tables)

    def script_location(self) -> str:
        return f"{self.package}:migrations"


SCHEMAS = {
    "vnf": Schema("vnf", "fluidvim.vnf", "fluidvim_vnf_version",   # = vnf.migrations.VERSION_TABLE
                  ("fluidvim.vnf.models", "fluidvim.nova_driver.models"),
                  "fluidvim.vnf.models:Base"),
    "orchestrator": Schema("orchestrator", "fluidvim.orchestrator", "fluidvim_orchestrator_version",
                           ("fluidvim.orchestrator.db", "fluidvim.orchestrator.osm.models",
                            "fluidvim.orchestrator.owners"),
                           "fluidvim.orchestrator.db:Base"),
    "evaluator": Schema("evaluator", "fluidvim.evaluator", "fluidvim_evaluator_version",
                        ("fluidvim.evaluator.cache",), "fluidvim.evaluator.cache:Base"),
}


# -- state of a database --
@dataclasses.dataclass
class DBState:
    schema: str
    revision: str | None         # None: no version table (or an empty one)
    head: str
    present: set[str]            # the schema's tables that exist
    expected: set[str]

    @property
    def empty(self) -> bool:
        return self.revision is None and not self.present

    @property
    def at_head(self) -> bool:
        return self.revision == self.head

    def describe(self) -> str:
        if self.at_head:
            return f"at revision {self.revision} (head)"
        if self.empty:
            return "empty (created at head on first start or by db sync)"
        if self.revision is None:
            return (f"not versioned: tables of a release before schema migrations "
                    f"({len(self.present)} of {len(self.expected)}); db sync adopts it")
        return f"at revision {self.revision}, this release needs {self.head}"


def _revision(conn, version_table: str) -> str | None:
    insp = sa.inspect(conn)
    if not insp.has_table(version_table):
        return None
    rows = conn.execute(sa.text(f"SELECT version_num FROM {version_table}")).scalars().all()
    if len(rows) > 1:
        raise SchemaError(f"{version_table} holds several revisions {rows}: not a fluidvim database?")
    return rows[0] if rows else None


def state(conn, name: str) -> DBState:
    schema = SCHEMAS[name]
    expected = schema.tables()
    rev = _revision(conn, schema.version_table)
    present = expected & set(sa.inspect(conn).get_table_names()) if rev is None else expected
    return DBState(name, rev, schema.head, present, expected)


def redact(engine_or_url) -> str:
    url = engine_or_url.url if isinstance(engine_or_url, sa.Engine) else sa.make_url(engine_or_url)
    return url.render_as_string(hide_password=True)


# -- on a store's start --
def check(engine: sa.Engine, name: str) -> None:
    """Make sure ``engine``'s database has schema ``name`` at head: create it in an empty
    database, else refuse (:class:`SchemaError`) unless it is at head already."""
    schema = SCHEMAS[name]
    with engine.connect() as conn:
        try:   # the common case in one query: a versioned database at head
            rev = conn.execute(sa.text(f"SELECT version_num FROM {schema.version_table}")).scalar()
        except sa.exc.DBAPIError:
            conn.rollback()
            rev = None
        if rev == schema.head:
            return
        st = state(conn, name)
    if st.at_head:                          # created by another process meanwhile
        return
    # Decided again under the creation lock, whatever ``st`` says: read without it, the state
    # may be another process's creation half seen (SQLite runs each SELECT as its own
    # transaction: its tables, then no version row yet, read as "not versioned").
    deadline = time.monotonic() + 30.0
    while True:
        try:
            created = _create_at_head(engine, schema)
            break
        except sa.exc.DBAPIError:           # a concurrent creator (databases without a lock)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    if created:
        LOG.info("fluidvim: created the %s schema at revision %s in %s", name, schema.head,
                 redact(engine))


def _refusal(engine, st: DBState) -> SchemaError:
    return SchemaError(
        f"the {st.schema} database {redact(engine)} is {st.describe()}; upgrade it before starting "
        f"this release: run `{SYNC_HINT[st.schema]}` with FILE = the config file of the service "
        "that uses this database (see docs/operators.md, Upgrades)")


def _create_at_head(engine: sa.Engine, schema: Schema) -> bool:
    """Create the schema at head in one transaction, serialized with other processes starting on
    the same database (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock), and re-checked
    under that lock. False if another process created it meanwhile."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        dialect = conn.dialect.name
        if dialect == "sqlite":             # pysqlite would not BEGIN before DDL by itself
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        elif dialect == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"),
                         {"k": zlib.crc32(schema.version_table.encode())})
        st = state(conn, schema.name)
        if st.at_head:
            conn.rollback()
            return False
        if not st.empty:
            conn.rollback()
            raise _refusal(engine, st)
        schema.metadata().create_all(conn)
        ctx = MigrationContext.configure(conn, opts={"version_table": schema.version_table})
        ctx.stamp(_script(schema), "head")
        conn.commit()
    return True


# -- fluidvim-manage db sync / version --
def _config(schema: Schema, conn=None):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", schema.script_location())
    cfg.attributes["connection"] = conn
    cfg.attributes["schema"] = schema.name
    return cfg


def _script(schema: Schema):
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config(schema))


def script_head(name: str) -> str:
    return _script(SCHEMAS[name]).get_current_head()


def sync(engine: sa.Engine, name: str, revision: str = "head") -> tuple[DBState, str | None]:
    """Upgrade schema ``name`` in ``engine``'s database to ``revision`` (adopting an
    un-versioned database of the release before migrations). Returns (the state before,
    the revision after)."""
    from alembic import command

    schema = SCHEMAS[name]
    with engine.connect() as conn:
        before = state(conn, name)
    with engine.begin() as conn:
        command.upgrade(_config(schema, conn), revision)
    with engine.connect() as conn:
        after = state(conn, name).revision
    return before, after


def run_env(name: str) -> None:
    """The body of every migrations/env.py (online mode: a connection given by :func:`sync`,
    else the URL of ``sqlalchemy.url``)."""
    from alembic import context

    schema = SCHEMAS[name]
    metadata = schema.metadata()
    tables = set(metadata.tables)

    def include_name(n, type_, parent_names):
        # several schemas (and a caller's own tables) may share one database
        return n in tables if type_ == "table" else True

    def configure(conn):
        context.configure(connection=conn, target_metadata=metadata,
                          version_table=schema.version_table, include_name=include_name,
                          render_as_batch=True, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()

    conn = context.config.attributes.get("connection")
    if conn is not None:
        configure(conn)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("alembic: neither a connection nor sqlalchemy.url was given")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        configure(conn)
    engine.dispose()


def adopt_table(op, table: sa.Table) -> None:
    """Baseline revisions: create ``table`` unless the database has it already (a database of
    the release before migrations); an existing one must have the baseline's columns."""
    conn = op.get_bind()
    insp = sa.inspect(conn)
    if not insp.has_table(table.name):
        table.create(conn)
        return
    have = {c["name"] for c in insp.get_columns(table.name)}
    want = {c.name for c in table.columns}
    if have != want:
        raise SchemaError(
            f"table {table.name} has columns {sorted(have)}, the baseline schema has "
            f"{sorted(want)}: not a database of a fluidvim release this one can upgrade")
    LOG.info("fluidvim: adopted existing table %s (baseline schema)", table.name)
