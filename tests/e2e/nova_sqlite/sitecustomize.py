# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""SQLite transactions for a multi-process test cloud (tests/e2e/nova_services.py puts this
directory on the PYTHONPATH of the services it starts, nothing else).

nova-api, -conductor and -scheduler write the same SQLite databases from several threads each.
oslo.db already drives SQLite transactions itself (pysqlite's implicit BEGIN off, its own "BEGIN"
on the engine's begin event), but a plain BEGIN is DEFERRED: a transaction that has read and then
writes fails at once with "database is locked" when another process wrote meanwhile (no busy wait
applies). Here oslo.db's BEGIN becomes BEGIN IMMEDIATE (the write lock is taken when the
transaction starts) and connections wait up to 30 s for a lock (busy_timeout): what a server
database (MariaDB) gives the same services. The services themselves are unchanged.
"""

import sqlite3

try:
    from sqlalchemy import engine as _engine, event as _event
except ImportError:       # a process without SQLAlchemy: nothing to do
    _engine = None

if _engine is not None:
    @_event.listens_for(_engine.Engine, "connect")
    def _fluidvim_e2e_sqlite_connect(dbapi_conn, _record):
        if isinstance(dbapi_conn, sqlite3.Connection):
            dbapi_conn.execute("PRAGMA busy_timeout = 30000")

    @_event.listens_for(_engine.Engine, "before_cursor_execute", retval=True)
    def _fluidvim_e2e_sqlite_begin(conn, cursor, statement, parameters, context, executemany):
        if statement == "BEGIN" and conn.dialect.name == "sqlite":
            statement = "BEGIN IMMEDIATE"
        return statement, parameters
