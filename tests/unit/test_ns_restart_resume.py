# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A lone orchestrator (not active-active) cut in the middle of an NS scale-out, then started
again on its database (SQLite, then PostgreSQL): the new process resumes its own operation at
start (mano/resume.py ``restart``, the take-over a survivor runs for a dead peer) - the instance
launched but not recorded is adopted, not launched twice - and a launch cut in flight is closed
as a dead worker's. The e2e form, with a real process killed, is tests/e2e/test_ns_restart.py."""

import pytest

from fluidvim.orchestrator.db import LaunchRow

from .test_mano_descriptors import pkg  # noqa: F401 - fixture
from .test_mano_scaling import deploy_scaled
from .test_mano_service import orch_factory  # noqa: F401 - fixture
from .test_ns_operation_lock import Killed, _wait


def test_a_restarted_lone_orchestrator_resumes_its_cut_scale_out(orch_factory, pkg):  # noqa: F811
    a = orch_factory()
    r = deploy_scaled(a, pkg)
    zone = orch_factory.zone
    real_update = a.store.update_ns

    def update_ns(ns_id, **fields):
        if len(fields.get("instances", [])) > len(r["instances"]):
            raise Killed()              # launched and in the instances table, not in the NS
        return real_update(ns_id, **fields)
    a.store.update_ns = update_ns
    a.store.release_ns_lock = lambda *args: None            # a killed process frees nothing
    with pytest.raises(Killed):
        a.ns.scale("sc1", "fw-pool", "out")
    dead = a.store.owner
    lid = a.store.launch_started("mem", "sc1-fw", None)     # and a launch it had in flight
    launches = len(zone.launches)

    b = orch_factory()                                      # the restart
    assert b.store.owner not in (None, dead)
    (op,) = [o for o in b.store.ns_operations(r["id"]) if o.type == "scale"]
    done = _wait(lambda: b.store.ns_operation(op.id).state != "processing" and
                 b.store.ns_operation(op.id), "the resumed scale-out")
    assert done.state == "completed", done.error
    assert done.owner == b.store.owner == done.detail["resumed_by"]
    assert len(zone.launches) == launches                  # adopted, not launched again
    shown = b.ns.show("sc1")
    assert shown["scaling"][0]["level"] == 1 == done.detail["to_level"]
    assert len(shown["instances"]) == len(r["instances"]) + 1
    assert sorted(zone.vnfs) == sorted(i["id"] for i in shown["instances"])
    assert b.store.ns_locks() == []
    with b.store.Session() as session:                      # the launch: closed as failed
        cut = session.get(LaunchRow, lid)
    assert cut.ok is False and cut.error == f"orchestrator {dead} died during the launch"
    assert b.store.launches(in_flight=True) == []
    b.ns.delete("sc1")
