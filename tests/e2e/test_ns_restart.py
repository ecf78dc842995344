# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A lone orchestrator (not ``active_active``) killed with SIGKILL in the middle of an NS deploy
(its first VNF recorded, the rest not) and started again: at start it resumes its own operation
(mano/resume.py ``restart``: the same take-over a survivor runs for a dead peer) and the deploy
completes - every VNF of the plan runs, the record and the zone agree, no orphan QEMU or tap.
One process on SQLite, real RabbitMQ, the local zone (real VNFs under QEMU)."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import uuid

import pytest

from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.db import Store
from fluidvim.orchestrator.mano.rpcapi import NSAPI
from fluidvim.orchestrator.rpcapi import OrchestratorAPI
from fluidvim.vnf.manager import VNFManager
from tests.e2e import orchprocs
from tests.e2e.test_nomad import qemu_pids
from tests.e2e.test_ns_ha import WAIT_S, wait_for
from tests.integration.conftest import leaked_taps, vnf_ids
from tests.integration.test_ns_lifecycle import CHAIN_NSD, CHAIN_VNFDS, docs
from tests.integration.test_orchestrator import rabbit_up

pytestmark = pytest.mark.skipif(not rabbit_up(), reason="RabbitMQ is not running on "
                                "127.0.0.1:5672: run tools/bootstrap.sh")


@pytest.fixture
def lone(tmp_path):
    """start() runs the orchestrator process (again) on one configuration; yields an env."""
    tag = uuid.uuid4().hex[:8]
    run_dir = f"/run/fluidvim-fnr-{tag}"
    url = f"sqlite:///{tmp_path}/orch.sqlite"
    conf_file = tmp_path / "orchestrator.conf"
    conf_file.write_text(textwrap.dedent(f"""\
        [DEFAULT]
        log_file = {tmp_path}/orchestrator.log
        [orchestrator]
        connection = {url}
        topic = fnr-{tag}
        notification_topic = fnr_slots_{tag}
        local_zone = true
        ns_scaler_interval = 0
        agent_interval = 0.2
        rpc_timeout = 120
        [vnf]
        state_dir = {tmp_path}/state
        run_dir = {run_dir}
        [evaluator]
        boot_probe_launches = 1
        load_probe_sessions = 1,10
        load_probe_step = 0.3
        load_probe_refine = 0
        # no confirm phase: these tests kill orchestrators, not measure QoE capacity
        load_probe_confirm_levels =
        load_probe_netns_prefix = fnrlp
        load_probe_subnet = 83
        """))
    conf = orchconf.make_conf(connection=url, topic=f"fnr-{tag}", rpc_timeout=120.0,
                              vnf_state_dir=str(tmp_path / "state"), vnf_run_dir=run_dir)
    orchconf.disable_rabbit_heartbeat(conf)
    Store(url).close()
    api = OrchestratorAPI(conf)
    procs = []

    class Env:
        store, ns, log = Store(url), NSAPI(api=api), tmp_path / "orchestrator.log"

        def start(self):
            p = orchprocs.spawn(conf_file)
            procs.append(p)
            wait_for("the orchestrator serving RPC", lambda: self.alive(p) and _ping(api), 60,
                     0.5)
            return p

        def alive(self, p):
            if p.poll() is not None:
                tail = self.log.read_text()[-3000:] if self.log.exists() else ""
                raise AssertionError(f"the orchestrator exited {p.returncode}: {tail}")
            return True

    env = Env()
    env.run_dir, env.conf = run_dir, conf
    try:
        yield env
    finally:
        api.close()
        orchprocs.stop(procs)
        mgr = VNFManager(conf)
        ids = vnf_ids(mgr.store)
        for rec in mgr.store.list():
            mgr.destroy(rec.id)
        mgr.close()
        env.store.close()
        subprocess.run(["rm", "-rf", run_dir], check=False)
        assert not leaked_taps(ids)


def _ping(api):
    try:
        return api.client.prepare(timeout=3).call({}, "ping")
    except Exception:  # noqa: BLE001 - not consuming yet: the call times out
        return None


def test_kill_9_in_the_middle_of_a_deploy_the_restarted_orchestrator_completes_it(lone):
    name = f"fr{uuid.uuid4().hex[:6]}"
    first = lone.start()
    nsd, vnfds = docs(CHAIN_NSD, CHAIN_VNFDS)
    lone.ns.client.prepare().cast({}, "deploy", nsd=nsd, vnfds=vnfds, name=name, zone=None)

    def midway():
        lone.alive(first)
        rows = [r for r in lone.store.network_services() if r.name == name]
        assert not rows or rows[0].status == "deploying", rows[0].status   # not finished
        if not (rows and len(rows[0].get("instances")) == 1):
            return None
        first.send_signal(signal.SIGSTOP)     # freeze it now; SIGKILL follows
        return rows[0]

    row = wait_for("the deploy with its first VNF recorded", midway)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    # between the poll and the kill the first may record one more VNF (CI saw it): what the
    # restarted one must do is what the record holds at the kill, read after it
    recorded = len(lone.store.network_service(row.id).get("instances"))
    (op,) = lone.store.ns_operations(row.id)
    assert op.state == "processing" and op.owner is not None
    dead = op.owner

    second = lone.start()

    def finished():
        lone.alive(second)
        o = lone.store.ns_operation(op.id)
        return o if o.state != "processing" else None
    done = wait_for("the restarted orchestrator to resume the deploy", finished, WAIT_S)
    assert done.state == "completed", done.error
    assert done.owner not in (None, dead) and done.detail["resumed_by"] == done.owner
    shown = lone.ns.show(name)
    assert shown["status"] == "running"
    assert all(i["status"] == "running" for i in shown["instances"]), shown["instances"]
    plan = lone.store.network_service(row.id).get("plan")
    assert sorted(i["service"] for i in shown["instances"]) == sorted(
        u["service"] for u in plan["units"] for _ in range(u["instances"]))
    # the restarted one did what the killed one had not: every VNF not recorded at the kill
    assert len(done.detail["resumed"]) == len(shown["instances"]) - recorded, done.detail
    assert all(n["exists"] for n in shown["networks"]) and len(shown["networks"]) == len(
        plan["networks"])
    # no orphan: the launch core runs exactly the recorded VNFs of the NS, one QEMU each
    services = set(shown["services"])
    assert {i.id for i in lone.store.instances() if i.service in services} == {
        i["id"] for i in shown["instances"]}
    mgr = VNFManager(lone.conf)
    try:
        mine = {rec.id for rec in mgr.list() if rec.name.split(".")[0] in services}
        assert mine == {i["id"] for i in shown["instances"]}
        assert len(qemu_pids(lone.run_dir)) == len(mgr.list())
        assert not leaked_taps(vnf_ids(mgr.store) - mine)
    finally:
        mgr.close()
    assert lone.store.ns_locks() == []
    assert lone.ns.delete(name)["deleted"] == name
