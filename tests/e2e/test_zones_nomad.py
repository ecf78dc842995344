# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The ``nomad`` zone adapter against a REAL Nomad agent (dev mode) with the unikernel plugin.

Same prerequisites and skips as tests/e2e/test_nomad.py (whose agent config it reuses), but on
its own ports (three free loopback ports in 20000-29999), data dir and run dir, so it can run
next to other agents. Checks: hosts with the driver's fingerprint, a launch through the adapter
(job registered, allocation running, a real QEMU whose power share is attributed from /proc),
slots reported back, instances and launch times, a failing launch that leaves nothing behind, an
unplaceable launch refused with Nomad's reason, terminate (purge, idempotent), no QEMU left.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid

import pytest

from fluidvim.common.zonetypes import LaunchRequest, ZoneError
from fluidvim.evaluator import genprobe, probes
from fluidvim.orchestrator import power
from fluidvim.orchestrator.zones.nomad import NomadZone
from tests.e2e import test_nomad as tn

pytestmark = tn.pytestmark


def config(tmp, plugin_dir, run_dir, ports) -> str:
    text = tn.client_config(tmp, plugin_dir, run_dir)
    http, rpc, serf = ports
    text, n = re.subn(r"ports \{[^}]*\}",
                      f"ports {{\n  http = {http}\n  rpc  = {rpc}\n  serf = {serf}\n}}", text)
    assert n == 1, "test_nomad.client_config changed its ports block"
    # a power curve for the node (the zone reports it as HostInfo.power_system_id)
    meta = '  meta {\n    fluidvim_power_system_id = "spec0120"\n  }\n'
    text = text.replace("client {\n  enabled = true\n", "client {\n  enabled = true\n" + meta, 1)
    assert "fluidvim_power_system_id" in text
    # the host's power where this test's `fluidvim metrics serve` writes it
    text, n = re.subn(r'(?m)^(\s*)power_state\s*=.*$', rf'\1power_state = "{power_state(run_dir)}"',
                      text)
    assert n == 1, "etc/nomad/client.hcl changed: no power_state"
    return text


def power_state(run_dir: str) -> str:
    return f"{run_dir}-power/power.json"


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fvp-nomad")
    plugin_dir = tmp / "plugins"
    plugin_dir.mkdir()
    subprocess.run(["go", "build", "-o", str(plugin_dir / "fluidvim-unikernel"), "."],
                   cwd=tn.REPO / "nomad_driver", check=True, timeout=600)
    run_dir = f"/run/fluidvim-fvp-{uuid.uuid4().hex[:8]}"
    cfg = tmp / "client.hcl"
    ports = tn.free_ports(3)
    addr = f"http://127.0.0.1:{ports[0]}"
    cfg.write_text(config(tmp, plugin_dir, run_dir, ports))
    log = open(tmp / "nomad.log", "w")
    token = uuid.uuid4().hex
    proc = subprocess.Popen([tn.NOMAD, "agent", "-dev", "-config", str(cfg), "-plugin-dir", str(plugin_dir)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=tn.agent_env(token))
    try:
        zone = NomadZone("nomad-dc1", address=addr, datacenter="dc1", launch_timeout=60)

        def ready():
            assert proc.poll() is None, f"agent exited: {(tmp / 'nomad.log').read_text()[-3000:]}"
            try:
                return zone.hosts()
            except ZoneError:                              # not listening yet
                return None

        tn.wait_for("a node with a healthy unikernel driver", ready, 60, 0.25)
        yield zone, run_dir
    finally:
        tn.Agents.stop(proc)
        tn.end_sessions([proc.pid], [tn.NOMAD, plugin_dir / "fluidvim-unikernel"], token)
        log.close()
        for pid in tn.qemu_pids(run_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        import shutil
        shutil.rmtree(run_dir, ignore_errors=True)


def test_hosts_from_the_driver_fingerprint(agent):
    zone, _ = agent
    hosts = zone.hosts()
    assert len(hosts) == 1
    h = hosts[0]
    assert h.env.launcher == "nomad" and h.env.accel in ("kvm", "tcg")
    assert h.env.cpu_model and h.env.cpu_model != "unknown"
    assert h.power_system_id == "spec0120"
    assert 0.0 <= h.cpu_util <= 1.0
    assert h.labels["datacenter"] == "dc1" and h.labels["node_id"]
    assert h.labels["cpus"] == os.cpu_count()
    # the orchestrator's marginal-power callable works on it (the node's spec0120 curve)
    assert power.HostMarginalPower(vnf_vcpus=1)("nomad-dc1", h) > 0
    assert list(zone.environments()) == [h.env.uid]
    assert zone.can_launch_on_demand("fw")
    # node pools scope a zone too (the dev agent's node is in "default")
    assert len(NomadZone("p", address=zone.address, node_pool="default").hosts()) == 1
    assert NomadZone("p", address=zone.address, node_pool="gpu").hosts() == []
    # a zone on a datacenter without nodes has no hosts and cannot launch
    empty = NomadZone("nowhere", address=zone.address, datacenter="dc-none")
    assert empty.hosts() == [] and not empty.can_launch_on_demand("fw")


def test_launch_slots_instances_terminate(agent):
    zone, run_dir = agent
    before = set(tn.qemu_pids(run_dir))
    inst = zone.launch(LaunchRequest(service="fw", slots=256, memory_mb=32, nics=("",),
                                     click_config="FromDevice(0) -> Counter -> Discard;"))
    try:
        assert inst.status == "running" and inst.id.startswith("fluidvim-fw-")
        assert inst.host == zone.hosts()[0].name
        assert inst.slots_total == 256
        assert inst.launch_ms is not None and inst.launch_ms > 0
        print(f"\nnomad zone: job submit -> task Started {inst.launch_ms:.1f} ms")
        new = set(tn.qemu_pids(run_dir)) - before
        assert len(new) == 1                                        # a real VNF runs
        # its power share from the real /proc (a QEMU process: the attribution's subject)
        model = power.model_for_host(zone.hosts()[0])               # the node's spec0120 curve
        (pid,) = new
        share = power.sample_vnf_power(model, [pid], interval_s=0.5)[pid]
        assert 0.0 <= share.share <= 1.0 and 0.0 <= share.watts <= model.watts(1.0)
        assert share.host_watts == pytest.approx(model.watts(share.host_util))
        # the driver fingerprints the VNF's slots (every 1 s in this config)
        tn.wait_for("slots reported", lambda: zone.hosts()[0].slots_total == 256, 20, 0.25)
        h = zone.hosts()[0]
        assert 0 < h.slots_free <= 256
        mine = [i for i in zone.instances() if i.id == inst.id]
        assert mine and mine[0].service == "fw" and mine[0].status == "running"
        # the launch ended at the plugin's ready_at, before the task's Started event (Nomad's,
        # after StartTask returned; the same host clock): what instances() reports
        assert 0 < inst.launch_ms <= mine[0].launch_ms
        assert zone.launch_times_ms("fw")[0] == pytest.approx(inst.launch_ms)
        # a fresh adapter (orchestrator restart) gets the launch time back from Nomad
        again = NomadZone("nomad-dc1", address=zone.address, datacenter="dc1")
        assert again.launch_times_ms("fw") == [pytest.approx(mine[0].launch_ms)]
    finally:
        zone.terminate(inst.id)
    assert not [i for i in zone.instances() if i.id == inst.id]
    tn.wait_for("the VNF's QEMU gone", lambda: not (set(tn.qemu_pids(run_dir)) - before), 20, 0.2)
    zone.terminate(inst.id)                                     # idempotent
    tn.wait_for("slots back to 0", lambda: zone.hosts()[0].slots_total == 0, 20, 0.25)


def test_launch_returns_on_the_plugins_ready_signal(agent):
    """The zone learns the VNF forwards from the plugin (the task's vnf-stats.json, written
    before StartTask returns), not from the allocation's status on the server: the launch
    returns with what only that file says (how the plugin launched it, its ready_at), and the
    slot poller counts the instance from that file whatever the server says meanwhile."""
    zone, run_dir = agent
    inst = zone.launch(LaunchRequest(service="rdy", slots=32, memory_mb=32,
                                     click_config="FromDevice(0) -> EtherMirror -> ToDevice(0);"))
    try:
        (alloc,) = zone.api.job.get_allocations(inst.id)
        print(f"\nnomad zone: launch returned after {inst.launch_ms:.1f} ms (submit -> ready_at); "
              f"the server said {alloc['ClientStatus']!r} then")
        assert inst.kind == "cold"                 # only the plugin's ready file says so
        doc = zone._ready(alloc["ID"])
        assert doc["stats"]["configured"] is True and doc["launch"] == "cold"
        s = zone.instance_slots()[inst.id]
        assert (s["basis"], s["free"], s["alloc"]) == ("vnf-stats", 32, alloc["ID"])
        assert s["opened"] == 0                    # the VNF's sessions opened ride along
        # the launch is timed up to the plugin's ready_at; Nomad's Started event comes later
        started = tn.wait_for("the task's Started event on the server", lambda: next(
            (i.launch_ms for i in zone.instances() if i.id == inst.id and i.launch_ms), None), 20)
        assert 0 < inst.launch_ms <= started
    finally:
        zone.terminate(inst.id)
    tn.wait_for("slots back to 0", lambda: zone.hosts()[0].slots_total == 0, 20, 0.25)


def test_host_watts_attribute_and_task_joules(agent, tmp_path):
    """Issue 22: the host's power from the Python chain (a real `fluidvim metrics serve`, linear
    model) -> the node attribute driver.unikernel.host_watts naming its source; a task's watts
    and joules by useful work (the plugin's port of the attribution, checked against
    contract/vectors/attribution.json) in its vnf-stats.json and its task events."""
    import json
    import sys

    zone, run_dir = agent
    pdir = os.path.dirname(power_state(run_dir))
    cfg = tmp_path / "power.conf"
    cfg.write_text("[power]\nsources = linear\nidle_watts = 40\nmax_watts = 140\n")
    serve = subprocess.Popen(
        [sys.executable, "-m", "fluidvim.cmd.cli", "--config-file", str(cfg), "--run-dir", pdir,
         "--state-dir", str(tmp_path / "state"), "metrics", "serve", "--port",
         str(tn.free_ports(1)[0]), "--interval", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    inst = None
    try:
        node_id = zone.hosts()[0].labels["node_id"]

        def attrs():
            assert serve.poll() is None, serve.stdout.read()
            a = zone.api.node.get_node(node_id)["Attributes"]
            return a if a.get("driver.unikernel.host_watts") else None
        a = tn.wait_for("the host_watts attribute", attrs, 30, 0.25)
        assert a["driver.unikernel.host_watts.source"] == "linear"
        assert 40.0 <= float(a["driver.unikernel.host_watts"].rstrip("W")) <= 140.0
        labels = zone.hosts()[0].labels                # what the orchestrator sees of it
        assert labels["host_watts_source"] == "linear" and 40.0 <= labels["host_watts"] <= 140.0
        inst = zone.launch(LaunchRequest(service="pw", slots=16, memory_mb=32,
                                         click_config="FromDevice(0) -> Discard;"))
        (alloc,) = zone.api.job.get_allocations(inst.id)

        def joules():
            doc = json.loads(zone.api.client.cat.read_file(alloc["ID"], path="vnf/vnf-stats.json"))
            p = doc.get("power")
            return p if p and p["joules"] > 0 else None
        p = tn.wait_for("the task's joules in vnf-stats.json", joules, 30, 0.25)
        assert p["source"] == "linear" and 40.0 <= p["host_watts"] <= 140.0
        assert 0 < p["watts"] <= p["host_watts"]
        assert p["watts"] == pytest.approx(sum(p["components"].values()))
        assert set(p["components"]) == {"busy", "poll", "qemu", "vhost", "softirq", "idle"}
        # what the zone's slot poller publishes: the task's watts and slots -> W per slot
        from fluidvim.common.slotnotify import watts_per_slot
        s = zone.instance_slots()[inst.id]
        assert s["basis"] == "vnf-stats" and s["total"] == 16 and 0 < s["watts"] <= 140.0, s
        assert watts_per_slot(s) == pytest.approx(s["watts"] / 16)

        def event():
            ts = zone.api.allocation.get_allocation(alloc["ID"]).get("TaskStates") or {}
            return next((e for e in (ts.get("vnf") or {}).get("Events") or []
                         if "power attributed" in (e.get("DriverMessage") or "")), None)
        ev = tn.wait_for("the task's power event", event, 30, 0.25)
        assert ev["Details"]["power_source"] == "linear" and float(ev["Details"]["joules"]) >= 0
    finally:
        if inst is not None:
            zone.terminate(inst.id)
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(20)
        import shutil
        shutil.rmtree(pdir, ignore_errors=True)


def test_a_launch_with_a_qoe_announces_its_capacity(agent):
    """LaunchRequest.qoe -> the job's qoe block -> the task driver's qoe op: the VNF's own free
    slots (what instance_slots reads from the plugin) follow the capacity, not the flow table."""
    from fluidvim.common.zonetypes import QoE

    zone, run_dir = agent
    inst = zone.launch(LaunchRequest(service="fwq", slots=64, memory_mb=32, nics=("",),
                                     click_config="FromDevice(0) -> Discard;",
                                     qoe=QoE(capacity=9, deadline_ms=5.0, quantile=0.99)))
    try:
        assert inst.slots_total == 9
        tn.wait_for("the VNF's own free slots", lambda: (zone.instance_slots().get(inst.id) or {})
                    .get("basis") == "vnf-stats", 20, 0.25)
        assert zone.instance_slots()[inst.id]["free"] == 9
    finally:
        zone.terminate(inst.id)
    # the node's fingerprint lags the VNF; the next test must not read this one's capacity
    tn.wait_for("slots back to 0", lambda: zone.hosts()[0].slots_total == 0, 20, 0.25)


def test_failed_launch_leaves_nothing(agent):
    zone, run_dir = agent
    before_jobs = {j["ID"] for j in zone.api.jobs.get_jobs()}
    # a kernel outside the task dir and image_paths is refused in the same words whether it
    # exists or not (a job must not tell the host's files apart: nomad_driver/unikernel/paths.go)
    with pytest.raises(ZoneError, match=r"fluidvim-bad-\w+ failed on .*/nonexistent/vnf.elf.* is not a file "
                                        r"inside the task directory or under the plugin's image_paths"):
        zone.launch(LaunchRequest(service="bad", click_config="", kernel="/nonexistent/vnf.elf",
                                  nics=("",)))
    assert {j["ID"] for j in zone.api.jobs.get_jobs()} == before_jobs
    # unplaceable: pinned to a host that does not exist -> Nomad's reason, purged
    with pytest.raises(ZoneError, match=r"cannot place fluidvim-pinned-\w+: .*Constraint.*no-such-node"):
        zone.launch(LaunchRequest(service="pinned", click_config="", host="no-such-node",
                                  nics=("",)))
    assert {j["ID"] for j in zone.api.jobs.get_jobs()} == before_jobs
    with pytest.raises(ZoneError, match="service"):
        zone.launch(LaunchRequest(service="bad name!", click_config=""))
    with pytest.raises(ZoneError, match="instance_id"):
        zone.terminate("someone-elses-job")
    assert not tn.qemu_pids(run_dir)


def test_bad_address_is_a_clear_error():
    with pytest.raises(ZoneError, match="address must look like"):
        NomadZone("z", address="localhost:4646")
    z = NomadZone("z", address="http://127.0.0.1:1", timeout=1)
    with pytest.raises(ZoneError, match="listing nodes at http://127.0.0.1:1 failed"):
        z.hosts()


def test_slot_updates_from_nomad_reach_the_registry(agent, tmp_path):
    """The orchestrator's Nomad slot poller (a SlotAgent over NomadZone.instance_slots, started
    by Orchestrator.start for nomad zones) -> REAL RabbitMQ -> SlotListener -> registry and DB:
    the same ingestion path as local and Nova VNFs."""
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.exception import OrchestratorError
    from fluidvim.orchestrator.rpcapi import check_broker
    from fluidvim.orchestrator.service import Orchestrator

    zone, run_dir = agent
    tag = uuid.uuid4().hex[:8]
    polled = NomadZone("nomad-dc1", address=zone.address, datacenter="dc1", slot_interval=0.25,
                       region="fvs-region")
    conf = orchconf.make_conf(connection=f"sqlite:///{tmp_path}/orch.sqlite", topic=f"fvs-{tag}",
                              notification_topic=f"fvs_slots_{tag}", local_zone=False,
                              slot_update_min_interval=0.0)
    orchconf.disable_rabbit_heartbeat(conf)
    try:
        check_broker(conf, conf.orchestrator.transport_url)
    except OrchestratorError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{e} (tools/bootstrap.sh starts it)")
    orch = Orchestrator(conf, zones=[polled])
    try:
        _poll_through_the_orchestrator(orch, zone, polled)
    finally:
        orch.close()
    assert orch.slot_pollers == []


def _poll_through_the_orchestrator(orch, zone, polled):
    inst = None

    def report():
        return next((r for r in orch.registry.reports() if r.instance == inst.id), None)

    try:
        orch.start(server=f"fvs-{uuid.uuid4().hex[:8]}")
        assert [p.zone for p in orch.slot_pollers] == [polled]
        inst = polled.launch(LaunchRequest(service="fvs-fw", slots=128, memory_mb=32, nics=("",),
                                           click_config="FromDevice(0) -> Counter -> Discard;"))
        rep = tn.wait_for("the VNF's slot update in the registry", report, 30, 0.1)
        node = zone.hosts()[0].name
        assert (rep.zone, rep.host, rep.service, rep.region) == ("nomad-dc1", node, "fvs-fw",
                                                                 "fvs-region")
        assert rep.slots == 128 and rep.exact == 128      # a new magnitude: the exact count
        # the zone's queuing delay from the orchestrator's estimator (Nomad's launch times)
        assert rep.delay_s is not None and rep.delay_s > 0
        assert orch.registry.aggregate("fvs-fw", "zone") == {"nomad-dc1": 128}
        assert orch.registry.aggregate("fvs-fw", "host") == {f"nomad-dc1/{node}": 128}
        # stored like every other slot report (a restarted orchestrator starts from it; the
        # listener updates the registry first, then the store)
        tn.wait_for("the slot report stored", lambda: [
            r.instance for r in orch.store.slot_reports()] == [inst.id], 10, 0.05)

        # granularity: per allocation from the task's vnf-stats.json once the driver wrote it
        # (and the node's fingerprinted queuing_delay_ms, there once the driver timed a launch)
        s = tn.wait_for("vnf-stats.json read through /v1/client/fs",
                        lambda: (lambda e: e if e and e["basis"] == "vnf-stats"
                                 and e["delay_s"] is not None else None)(
                            polled.instance_slots().get(inst.id)), 20, 0.25)
        assert (s["service"], s["host"], s["free"]) == ("fvs-fw", node, 128)
        assert s["alloc"] and s["delay_s"] > 0
        import statistics
        import time
        took = []
        for _ in range(5):
            t0 = time.perf_counter()
            polled.instance_slots()
            took.append((time.perf_counter() - t0) * 1000.0)
        print(f"\nnomad slot poll (1 allocation, 1 node): median {statistics.median(took):.1f} ms")
        # a stale file does not count; the node's sum stands in only because this is its only VNF
        stale = NomadZone("nomad-dc1", address=zone.address, stats_max_age=-1.0)
        # (node attributes lag: fingerprint_period plus the client's batched node updates, so
        # an earlier VNF's figure may still be there: wait for this one's)
        s = tn.wait_for("the node's fingerprint of its one VNF",
                        lambda: (lambda e: e if e["free"] == 128 else None)(
                            stale.instance_slots()[inst.id]), 20, 0.25)
        assert s["basis"] == "node"
        assert zone.hosts()[0].slots_free == 128
    finally:
        if inst is not None:
            polled.terminate(inst.id)
    tn.wait_for("the instance gone from the registry and the store",
                lambda: report() is None and orch.store.slot_reports() == [], 20, 0.1)
    assert polled.instance_slots() == {}


def test_load_probe_with_a_generator_vnf(agent):
    """Issue 23 item 2: stage 1's load probe in a Nomad zone. This machine cannot put packets on
    a Nomad client's host, so the probe takes its traffic from a generator VNF (traffic "auto"
    -> "vnf"): two private bridges the plugin makes (etc/nomad/client.hcl private_bridges), the
    probe VNF on both, per step a generator VNF on the same client, all through the zone
    adapter; the bridges and VNFs go with the probe."""
    zone, run_dir = agent

    def private_bridges():
        out = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"], capture_output=True,
                             text=True, check=True).stdout
        names = (ln.split(":")[1].strip() for ln in out.splitlines())
        return {n for n in names if re.match(r"^fvp[0-9a-f]{12}$", n)}

    before, bridges_before = set(tn.qemu_pids(run_dir)), private_bridges()
    host = zone.hosts()[0]
    probe = probes.LoadProbe(sessions=(1, 4, 16), session_pps=100, step_s=0.6, refine=0,
                             recheck=0, prefix="fvzn", traffic="auto")
    assert not probes.LoadProbe().applicable(zone)[0]        # netns, the default: not here
    assert probe.applicable(zone) == (True, "")
    r = probe.run(host.env, zone)
    assert r.ok, r.error
    m = r.metrics
    assert m["traffic"] == "vnf" and m["host"] == host.name
    assert [s["sessions"] for s in m["steps"]] == [1, 4, 16] or m["stopped"].startswith("loss")
    first = m["steps"][0]
    assert first["received"] > 0 and first["loss"] < 0.05          # 100 pps: nothing lost
    assert 0 < first["latency_ms"]["0.5"] <= first["latency_ms"]["0.99"]
    assert zone._bridge_prefix == "fvp" and zone.networks() == []
    tn.wait_for("the probe's QEMUs gone", lambda: not (set(tn.qemu_pids(run_dir)) - before),
                20, 0.2)
    # the plugin deletes a private bridge when its last VNF stops (StopTask)
    tn.wait_for("the probe's private bridges gone",
                lambda: private_bridges() <= bridges_before, 20, 0.2)
    assert not [i for i in zone.instances() if i.service in (probes.PROBE_SERVICE,
                                                             genprobe.GENERATOR_SERVICE)]
