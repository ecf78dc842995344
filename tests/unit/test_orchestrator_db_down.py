# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The orchestrator's PostgreSQL not answering is one line naming it and how to start it
(``DatabaseDown``, a ``DependencyDown``), the same on the RPC client's side. The kill under load,
with the same orchestrator serving again after ``pg_ctl start``, is
tests/integration/test_faults_orchdb.py."""

import importlib.util
import socket
import sys

import pytest

from fluidvim.common.errors import DependencyDown
from fluidvim.orchestrator.db import DB_FIX, Store
from fluidvim.orchestrator.exception import DatabaseDown
from fluidvim.orchestrator.rpcapi import EXMODS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("psycopg2") is None,
                                reason="psycopg2 absent: pip install -c constraints.txt "
                                       "psycopg2-binary")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]       # nobody listens on it once closed


def test_a_database_server_that_refuses_is_one_line_on_both_sides_of_rpc():
    from oslo_messaging._drivers import common as rpc_common

    port = _closed_port()
    url = f"postgresql+psycopg2://fluidvim@127.0.0.1:{port}/orch"
    with pytest.raises(DatabaseDown) as caught:
        Store(url)
    e = caught.value
    what = f"the orchestrator's database (postgresql+psycopg2://fluidvim@127.0.0.1:{port}/orch)"
    assert isinstance(e, DependencyDown) and (e.what, e.fix) == (what, DB_FIX)
    assert "\n" not in e.message and e.message == str(e)
    assert e.message.startswith(f"{what} is not running or not reachable ("), e.message
    assert "Connection refused" in e.detail and e.message.endswith(f"): {DB_FIX}"), e.message
    try:
        raise e
    except DatabaseDown:
        sent = rpc_common.serialize_remote_exception(sys.exc_info())
    back = rpc_common.deserialize_remote_exception(sent, EXMODS)
    assert isinstance(back, DatabaseDown) and isinstance(back, DependencyDown)
    assert (back.message, back.what, back.detail, back.fix) == (e.message, what, e.detail, DB_FIX)
