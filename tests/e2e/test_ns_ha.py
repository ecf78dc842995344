# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Network services at two orchestrator processes, active-active, on one SQLite database, one
real RabbitMQ and the local zone (real VNFs under QEMU, taps on real bridges; both processes
share the launch core's state and run directories).

* A manual scale-out of one NS asked of both at once is serialised: one runs, the other is
  refused (409) naming the operation under way, or waits its turn in time; no two scale
  operations of the NS overlap, and the instances are exactly those the completed ones made.
* ``kill -9`` of the orchestrator in the middle of an NS deploy (its first VNF recorded, the rest
  not): the survivor takes the operation over and completes it - the NS runs with every VNF of its
  plan, the record and the zone agree, no orphan QEMU or tap.
"""

from __future__ import annotations

import signal
import subprocess
import textwrap
import threading
import time
import uuid

import pytest

from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.db import Store
from fluidvim.orchestrator.mano.rpcapi import NSAPI
from fluidvim.orchestrator.rpcapi import OrchestratorAPI
from fluidvim.vnf.manager import VNFManager
from tests.e2e import orchprocs
from tests.e2e.test_nomad import qemu_pids
from tests.integration.conftest import leaked_taps, vnf_ids
from tests.integration.test_ns_lifecycle import CHAIN_NSD, CHAIN_VNFDS, REFL_NSD, REFL_VNFD, docs
from tests.integration.test_orchestrator import rabbit_up

pytestmark = pytest.mark.skipif(not rabbit_up(), reason="RabbitMQ is not running on "
                                "127.0.0.1:5672: run tools/bootstrap.sh")

DEAD_AFTER = 3.0
WAIT_S = 180.0                  # an upper bound for a deploy or a take-over, never a measure


def wait_for(what, fn, timeout=WAIT_S, every=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def ha(tmp_path_factory):
    """Two orchestrator processes with the local zone; yields an env (store, ns api, procs).
    One pair for the module (starting one takes ~20 s): the kill -9 test runs last."""
    tmp_path = tmp_path_factory.mktemp("nsha")
    tag = uuid.uuid4().hex[:8]
    run_dir = f"/run/fluidvim-fnh-{tag}"
    url = f"sqlite:///{tmp_path}/orch.sqlite"
    text = textwrap.dedent(f"""\
        [DEFAULT]
        log_file = {tmp_path}/orchestrator-%s.log
        [orchestrator]
        connection = {url}
        topic = fnh-{tag}
        notification_topic = fnh_slots_{tag}
        active_active = true
        worker_heartbeat_interval = 0.5
        worker_dead_after = {DEAD_AFTER}
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
        load_probe_netns_prefix = fnhlp
        load_probe_subnet = 97
        """)
    Store(url).close()                 # schema at head before two processes race to create it
    procs = []
    for i in range(2):
        path = tmp_path / f"orchestrator-{i}.conf"
        path.write_text(text.replace("%s", str(i)))
        procs.append(orchprocs.spawn(path))
    conf = orchconf.make_conf(connection=url, topic=f"fnh-{tag}", rpc_timeout=120.0,
                              vnf_state_dir=str(tmp_path / "state"), vnf_run_dir=run_dir)
    orchconf.disable_rabbit_heartbeat(conf)
    api = OrchestratorAPI(conf)
    store = Store(url)

    class Env:
        pass
    env = Env()
    env.store, env.api, env.ns, env.procs, env.logs = store, api, NSAPI(api=api), procs, tmp_path
    try:
        wait_for("both orchestrators serving RPC", lambda: _alive(procs, tmp_path) and len(
            store.workers()) == 2 and all(_ping(api, w.id) for w in store.workers()), WAIT_S, 0.5)
        yield env
    finally:
        api.close()
        orchprocs.stop(procs)
        mgr = VNFManager(conf)
        ids = vnf_ids(mgr.store)
        for rec in mgr.store.list():
            mgr.destroy(rec.id)
        mgr.close()
        store.close()
        subprocess.run(["rm", "-rf", run_dir], check=False)
        assert not leaked_taps(ids)


def _alive(procs, logs, which=None):
    for i, p in enumerate(procs):
        if (which is None or i in which) and p.poll() is not None:
            log = logs / f"orchestrator-{i}.log"
            raise AssertionError(f"orchestrator {i} exited {p.returncode}: "
                                 f"{log.read_text()[-3000:] if log.exists() else ''}")
    return True


def _ping(api, worker: str):
    try:
        return api.client.prepare(server=worker, timeout=3).call({}, "ping")
    except Exception:  # noqa: BLE001 - not consuming yet: the call times out
        return None


def _at(env, worker: str, method: str, **kwargs):
    """A ``ns`` RPC call to one orchestrator (its RPC server name is its worker id)."""
    return env.ns.client.prepare(server=worker, timeout=WAIT_S).call({}, method, **kwargs)


def _consistent(env, name):
    """The NS record, the orchestrators' instances and the zone's VNFs agree."""
    shown = env.ns.show(name)
    recorded = {i["id"] for i in shown["instances"]}
    assert all(i["status"] == "running" for i in shown["instances"]), shown["instances"]
    services = set(shown["services"])
    live = {i.id for i in env.store.instances() if i.service in services}
    assert live == recorded, (live, recorded)
    return shown


def test_concurrent_manual_scale_at_both_is_serialised(ha):
    name = f"fs{uuid.uuid4().hex[:6]}"
    workers = [w.id for w in ha.store.workers()]
    r = ha.ns.deploy(*docs(REFL_NSD, [REFL_VNFD]), name=name)
    aspect = r["scaling"][0]["aspect"]
    outcomes, go = [], threading.Barrier(2)

    def scale(worker):
        go.wait()
        try:
            outcomes.append(("ok", _at(ha, worker, "scale", name=name, aspect=aspect,
                                       direction="out")))
        except Exception as e:  # noqa: BLE001 - a refusal is an outcome to check
            outcomes.append(("refused", str(e)))

    threads = [threading.Thread(target=scale, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=WAIT_S)
    assert len(outcomes) == 2, outcomes
    shown = ha.ns.show(name)
    scales = [o for o in shown["operations"] if o["type"] == "scale"]
    done = [o for o in scales if o["state"] == "completed"]
    ok = [x for kind, x in outcomes if kind == "ok"]
    assert ok and len(done) == len(ok) == len(scales), (outcomes, scales)
    # serialised: no two scale operations of the NS overlapped
    spans = sorted((o["started_at"], o["ended_at"]) for o in done)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
    # a refusal names the operation under way (a scale of this NS)
    for kind, msg in outcomes:
        if kind == "refused":
            assert "is in progress" in msg and any(o["id"] in msg for o in scales), msg
    # no lost or extra instance: one per completed scale-out, each recorded and running
    assert len(shown["instances"]) == 1 + len(done)
    assert shown["scaling"][0]["level"] == len(done)
    _consistent(ha, name)
    assert ha.store.ns_locks() == []
    ha.ns.delete(name)


def test_kill_9_in_the_middle_of_a_deploy_the_survivor_completes_it(ha):
    name = f"fk{uuid.uuid4().hex[:6]}"
    by_pid = {w.pid: w.id for w in ha.store.workers()}
    victim, survivor = ha.procs
    vid = by_pid[victim.pid]
    nsd, vnfds = docs(CHAIN_NSD, CHAIN_VNFDS)
    ha.ns.client.prepare(server=vid).cast({}, "deploy", nsd=nsd, vnfds=vnfds, name=name,
                                          zone=None)

    def midway():
        _alive(ha.procs, ha.logs)
        rows = [r for r in ha.store.network_services() if r.name == name]
        if not rows or rows[0].status != "deploying":
            assert not rows or rows[0].status == "deploying", rows[0].status   # not finished
            return None
        if len(rows[0].get("instances")) != 1:
            return None
        victim.send_signal(signal.SIGSTOP)     # freeze it now; SIGKILL follows
        return rows[0]

    row = wait_for("the victim's deploy with its first VNF recorded", midway)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    # the victim may record one more VNF between the poll and the kill: the survivor must do
    # what the record lacks at the kill, read after it
    recorded = len(ha.store.network_service(row.id).get("instances"))
    (op,) = ha.store.ns_operations(row.id)
    assert op.owner == vid and op.state == "processing"

    def finished():
        _alive(ha.procs, ha.logs, which={1})
        o = ha.store.ns_operation(op.id)
        return o if o.state != "processing" else None
    done = wait_for("the survivor to resume the deploy", finished)
    assert done.state == "completed", done.error
    assert done.owner == by_pid[survivor.pid] and done.detail["resumed_by"] == done.owner
    shown = _consistent(ha, name)
    assert shown["status"] == "running"
    plan = ha.store.network_service(row.id).get("plan")
    assert sorted(i["service"] for i in shown["instances"]) == sorted(
        u["service"] for u in plan["units"] for _ in range(u["instances"]))
    # the survivor did what the victim had not: every VNF not recorded at the kill
    assert len(done.detail["resumed"]) == len(shown["instances"]) - recorded, done.detail
    assert all(n["exists"] for n in shown["networks"]) and len(shown["networks"]) == len(
        plan["networks"])
    # no orphan: the launch core runs exactly the recorded VNFs of the NS, one QEMU each
    conf = orchconf.make_conf(vnf_state_dir=str(ha.logs / "state"),
                              vnf_run_dir=_run_dir(ha))
    mgr = VNFManager(conf)
    try:
        ids = vnf_ids(mgr.store)
        mine = {rec.id for rec in mgr.list() if rec.name.split(".")[0] in shown["services"]}
        assert mine == {i["id"] for i in shown["instances"]}
        assert len(qemu_pids(_run_dir(ha))) == len(mgr.list())
        assert not leaked_taps(ids - mine)
    finally:
        mgr.close()
    assert [w.pid for w in ha.store.workers()] == [survivor.pid]
    assert ha.store.ns_locks() == []
    # the survivor serves the NS as any other
    assert ha.ns.delete(name)["deleted"] == name


def _run_dir(env) -> str:
    text = (env.logs / "orchestrator-0.conf").read_text()
    return next(line.split("=", 1)[1].strip() for line in text.splitlines()
                if line.startswith("run_dir"))
