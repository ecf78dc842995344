# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Database fixtures: SQLite files and a throwaway PostgreSQL server (tests/pgserver.py).

``db_url`` runs a test once per backend: SQLite, and PostgreSQL on a cluster this test run
starts (initdb + pg_ctl in a temporary directory; one database per test). The PostgreSQL run
is skipped, with the reason, where the server binaries or psycopg2 are absent; CI installs them
(tools/bootstrap.sh: Debian ``postgresql``; constraints.txt: psycopg2-binary).
"""

import importlib.util

import pytest

from tests import pgserver


@pytest.fixture(scope="session")
def pg_server():
    if pgserver.bindir() is None:
        pytest.skip("PostgreSQL server binaries absent: apt-get install postgresql "
                    "(tools/bootstrap.sh installs it)")
    if importlib.util.find_spec("psycopg2") is None:
        pytest.skip("psycopg2 absent: pip install -c constraints.txt psycopg2-binary")
    server = pgserver.PgServer().start()
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server):
    """A new empty database on the test run's PostgreSQL server."""
    url = pg_server.create_database()
    yield url
    pg_server.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """An empty database: an SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/test.sqlite"
    else:
        yield request.getfixturevalue("pg_url")
