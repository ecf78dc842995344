# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The one SQLAlchemy engine factory of fluidvim's stores (launch core, orchestrator, evaluator
probe cache): any SQLAlchemy URL; SQLite gets what several processes and threads sharing one file
need."""

from __future__ import annotations

import os

import sqlalchemy as sa


def make_engine(url: str) -> sa.Engine:
    """An engine for ``url``. SQLite: the file's directory is created; WAL (readers never block
    the writer: nova-compute, the CLI and the orchestrator read while a launch writes), a 30 s busy
    timeout, connections usable from any thread (the stores hand them between threads) and foreign
    keys enforced (SQLite leaves them off unless asked)."""
    kw: dict[str, object] = {}
    sqlite = url.startswith("sqlite")
    if sqlite:
        kw["connect_args"] = {"timeout": 30, "check_same_thread": False}
        path = url.split("sqlite:///", 1)[1] if "sqlite:///" in url else ""
        if path and not path.startswith(":memory:"):
            os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o750, exist_ok=True)
    else:
        # a server restarted (or killed and started again) leaves the pool's connections dead:
        # test each one as it is taken, so the first request after a restart does not fail
        kw["pool_pre_ping"] = True
    engine = sa.create_engine(url, future=True, **kw)
    if sqlite:
        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _rec):
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()
    return engine
