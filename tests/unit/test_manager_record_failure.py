# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A failed launch whose record the store cannot take: one line for the user, not two.

The integration test (test_faults_load.py::test_state_store_disk_full_under_load) meets this
path only when the full store still had a free page for the launch's first write; here it is
met every time, with a store that refuses the failure's record."""

import logging
import types

from fluidvim.common.errors import StoreFull
from fluidvim.vnf.manager import VNFManager


class _FullStore:
    def __init__(self):
        self.tried = 0

    def record_launch(self, *args):
        self.tried += 1
        raise StoreFull("the state store /x/vnf.sqlite cannot write (database or disk is full)")


def _record(cause, caplog):
    mgr = types.SimpleNamespace(store=_FullStore())
    with caplog.at_level(logging.DEBUG, logger="fluidvim.vnf.manager"):
        VNFManager._record_failure(mgr, "u-1", "qemu", "cold", 0.0, {}, cause)
    assert mgr.store.tried == 1
    return [r for r in caplog.records if "not recorded" in r.getMessage()]


def test_a_launch_the_full_store_failed_adds_no_warning(caplog):
    recs = _record(StoreFull("the state store /x/vnf.sqlite cannot write (full)"), caplog)
    assert [r.levelno for r in recs] == [logging.DEBUG], recs


def test_a_launch_that_failed_otherwise_warns_its_record_is_lost(caplog):
    recs = _record(RuntimeError("QEMU exited"), caplog)
    assert [r.levelno for r in recs] == [logging.WARNING], recs
    assert "cannot write" in recs[0].getMessage()
