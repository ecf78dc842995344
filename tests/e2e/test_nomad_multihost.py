# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Several hosts per Nomad zone: a REAL Nomad cluster of one server and three client agents on
this machine (tests/e2e/nomad_cluster.py: own data dirs, ports, plugin processes, run dirs,
warm pools and cgroups per client; two of the clients in network namespaces of their own, on a
bridge to the server), each client a host of the orchestrator's ``nomad`` zone.

Same prerequisites and skips as tests/e2e/test_nomad.py. What it checks, across the hosts:

* the zone lists the three client nodes as hosts, each with its own warm pool (a shell under its
  own run dir) and power curve;
* VNFs launched through the adapter pinned to two of the hosts (one takes that host's warm
  shell); live TCP flows fill every slot of the first; the zone then reports three hosts with
  three different slot figures, and a queuing delay for each host that launched;
* a job constrained on ``driver.unikernel.session_slots.free`` (the plugin's fingerprint) lands on
  the one host that still has free slots;
* the orchestrator (slot poller -> RabbitMQ -> registry) hands sessions to the instance with
  free slots across hosts (the resolver), placement's filter keeps every host with its own free
  slots, one stage-1 probe serves the three hosts (one environment type), and deploying the
  decision runs the VNF on the decided client;
* host power (same cluster; a sushy-tools Redfish emulator is each client's BMC, and its
  notifications stop / start that client's agent): load low, the consolidation round powers off
  the empty client, then empties one whose VNF carries live TCP sessions - sessions first: its
  slots are no longer offered, the drain waits until the flows end cleanly, Nomad moves the VNF,
  the BMC powers the client off; load high, a client is powered on, made eligible and runs a new
  instance; ``fluidvim power plan`` over the message bus shows the plan; no resolve refused;
* teardown: no agent, QEMU, tap, run dir or cgroup of the cluster is left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from fluidvim.common.zonetypes import LaunchRequest
from fluidvim.orchestrator.zones.nomad import NomadZone
from fluidvim.vnf import cgroups, limits, netdev, spec, testnet
from tests.e2e import test_nomad as tn
from tests.e2e.nomad_cluster import NomadCluster

pytestmark = tn.pytestmark

POWER = ("spec0120", "spec0121", "spec0122")           # a different power curve per node
FW = ("fw :: IPFilter(allow icmp, allow tcp dst port 80, allow arp, deny all);\n"
      "FromDevice(0) -> fw -> Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n")
SLOTS_A, SLOTS_B = 16, 8


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # client 0 in this network namespace (its VNF's NICs go on the TestNet bridges here), 1 and 2
    # each in its own (own address, taps and QEMUs there)
    c = NomadCluster(tmp_path_factory.mktemp("fvmc"), clients=3, warm_pool=(1, 2),
                     meta=lambda i: {"fluidvim_power_system_id": POWER[i]},
                     netns=(False, True, True))
    t0 = time.monotonic()
    with c:
        c.wait_ready()
        print(f"\nnomad cluster (1 server, 3 clients, warm pools full): "
              f"{time.monotonic() - t0:.1f} s")
        yield c
    assert c.leftovers() == []


def _orchestrator(tmp_path, zone, host_power=None, **over):
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.exception import OrchestratorError
    from fluidvim.orchestrator.rpcapi import check_broker
    from fluidvim.orchestrator.service import Orchestrator

    tag = uuid.uuid4().hex[:8]
    conf = orchconf.make_conf(connection=f"sqlite:///{tmp_path}/orch.sqlite", topic=f"fvmh-{tag}",
                              notification_topic=f"fvmh_slots_{tag}", local_zone=False,
                              slot_update_min_interval=0.0, **over)
    for key, value in (host_power or {}).items():          # [host_power]
        conf.set_override(key, value, group="host_power")
    orchconf.disable_rabbit_heartbeat(conf)
    try:
        check_broker(conf, conf.orchestrator.transport_url)
    except OrchestratorError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{e} (tools/bootstrap.sh starts it)")
    return Orchestrator(conf, zones=[zone])


def _launch_events(cluster, job_id: str) -> list[dict]:
    """The driver's launch events of a job's allocation (waited for: the driver's events reach
    the server apart from, and may follow, the task's running state)."""
    def events():
        (alloc,) = cluster.api(f"/v1/job/{job_id}/allocations")
        evs = cluster.api(f"/v1/allocation/{alloc['ID']}")["TaskStates"]["vnf"]["Events"]
        return [e for e in evs if e["Type"] == "Driver" and e["Details"].get("launch")]
    return tn.wait_for(f"the launch event of {job_id}", events, 15, 0.2)


def test_hosts_slots_constraint_resolver_across_clients(cluster, tmp_path):
    names = [c.name for c in cluster.clients]
    a, b, c = cluster.clients
    zone = NomadZone("nomad-mh", address=cluster.address, datacenter="dc1", slot_interval=0.25,
                     launch_timeout=90)
    timings = {}

    # -- every client node is a host of the zone, with its own pool, run dir and power curve
    hosts = {h.name: h for h in zone.hosts()}
    assert sorted(hosts) == sorted(names)
    assert len({h.labels["node_id"] for h in hosts.values()}) == 3
    assert {n: hosts[n].power_system_id for n in names} == dict(zip(names, POWER))
    assert all((h.slots_total, h.slots_free) == (0, 0) for h in hosts.values())
    assert len({h.env.uid for h in hosts.values()}) == 1          # one environment type
    # what the resolver's fast track asks on the way to a launch (its QoE): the same types,
    # without hosts()' CPU reading of every node from its client
    stats_reads = []
    read_stats = zone.api.client.stats.read_stats
    zone.api.client.stats.read_stats = lambda *a, **k: stats_reads.append(a) or read_stats(*a, **k)
    try:
        assert zone.environments() == {h.env.uid: h.env for h in hosts.values()}
        assert zone.environments() == {h.env.uid: h.env for h in hosts.values()}   # cached
    finally:
        zone.api.client.stats.read_stats = read_stats
    assert stats_reads == []
    shells = {cl.name: tn.vnf_ids(cl.run_dir) for cl in cluster.clients}
    assert all(len(s) == 1 for s in shells.values()), shells      # one warm shell per client
    assert all(len(p) == 1 for p in cluster.qemu_pids().values())
    for n in names:
        assert cluster.node_attrs(n)[tn.PRE + "warm_pool.ready"] == "1"
    # b and c in network namespaces of their own: own address, their shells' QEMU and taps there
    assert {n: v["Address"] for n, v in cluster.nodes().items()} == {cl.name: cl.ip for cl in
                                                                     cluster.clients}
    assert len({cl.ip for cl in cluster.clients}) == 3
    net_ns = {cl.name: {os.readlink(f"/proc/{p}/ns/net") for p in tn.qemu_pids(cl.run_dir)}
              for cl in cluster.clients}
    assert net_ns[a.name] == {os.readlink("/proc/self/ns/net")}
    assert len(set().union(*net_ns.values())) == 3, net_ns
    for cl in (b, c):
        (shell,) = shells[cl.name]
        assert spec.tap_for(shell, 0) in cl.links() and not netdev.exists(spec.tap_for(shell, 0))

    orch = _orchestrator(tmp_path, zone)
    svc = f"fvmh-fw-{uuid.uuid4().hex[:6]}"
    job = f"fvmh-slots-{uuid.uuid4().hex[:6]}"
    ids, seen_vnfs = [], set()
    holder = server = None
    try:
        orch.start(server=f"fvmh-{uuid.uuid4().hex[:8]}")
        orch.register_service(svc, FW)
        with testnet.TestNet("fvmh", 92) as net:
            try:
                # -- two VNFs through the adapter, pinned to two hosts
                t0 = time.monotonic()
                ia = zone.launch(LaunchRequest(service=svc, click_config=FW, slots=SLOTS_A,
                                               nics=tuple(net.bridges), host=a.name))
                timings["launch on host a, warm (s)"] = round(time.monotonic() - t0, 2)
                ids.append(ia.id)
                t0 = time.monotonic()
                ib = zone.launch(LaunchRequest(service=svc, click_config=FW, slots=SLOTS_B,
                                               nics=("", ""), host=b.name))
                timings["launch on host b, warm (s)"] = round(time.monotonic() - t0, 2)
                ids.append(ib.id)
                assert (ia.host, ib.host) == (a.name, b.name)
                seen_vnfs |= tn.vnf_ids(a.run_dir) | tn.vnf_ids(b.run_dir)
                # each VNF is its own host's warm shell (per-client pools)
                for inst, cl in ((ia, a), (ib, b)):
                    (ev,) = _launch_events(cluster, inst.id)
                    assert ev["Details"]["launch"] == "warm", ev
                    assert {ev["Details"]["vnf_uuid"]} == shells[cl.name], (ev, shells)
                assert tn.vnf_ids(c.run_dir) == shells[c.name]        # c untouched

                # one snapshot with the slots and the refilled pools' queuing delay (the driver
                # reports none while a host's refill shell boots; a client sends its node's
                # attributes to the server 5-10 s after they change)
                def fingerprinted():
                    hs = {h.name: h for h in zone.hosts()}
                    return ({n: (h.slots_total, h.slots_free) for n, h in hs.items()} == {
                        a.name: (SLOTS_A, SLOTS_A), b.name: (SLOTS_B, SLOTS_B), c.name: (0, 0)}
                        and all("queuing_delay_ms" in hs[n].labels for n in (a.name, b.name)))
                tn.wait_for("slots and queuing delay of a and b fingerprinted", fingerprinted, 30,
                            0.25)

                # the registry sees both instances, per host; the resolver takes the most free
                tn.wait_for("both instances in the registry", lambda: orch.registry.aggregate(
                    svc, "host") == {f"nomad-mh/{a.name}": SLOTS_A,
                                     f"nomad-mh/{b.name}": SLOTS_B}, 30, 0.1)
                r = orch.resolve(svc)
                assert (r["kind"], r["host"], r["instance"]) == ("slot", a.name, ia.id), r

                # -- live flows take every slot of a
                server = net.serve_tcp(80)
                holder = net.popen("a", "python3", "-c", tn.HOLD_FLOWS, net.ip_b, str(SLOTS_A),
                                   stdout=subprocess.PIPE, text=True)
                assert holder.stdout.readline().strip() == str(SLOTS_A)
                t0 = time.monotonic()
                tn.wait_for("a's slots all taken", lambda: cluster.node_attrs(a.name)[
                    tn.PRE + "session_slots.free"] == "0", 30, 0.25)
                timings["flows -> a's fingerprint 0 free (s)"] = round(time.monotonic() - t0, 2)

                # -- the zone: three hosts, three different slot figures, delay per host
                hosts = {h.name: h for h in zone.hosts()}
                figures = {n: (hosts[n].slots_total, hosts[n].slots_free) for n in names}
                assert figures == {a.name: (SLOTS_A, 0), b.name: (SLOTS_B, SLOTS_B),
                                   c.name: (0, 0)}, figures
                assert len(set(figures.values())) == 3
                (listed,) = orch.list_zones()                  # the orchestrator's own view
                assert {h["name"]: (h["slots_total"], h["slots_free"])
                        for h in listed["hosts"]} == figures, listed
                for n in (a.name, b.name):                 # the driver timed a launch there
                    assert hosts[n].labels["queuing_delay_ms"] > 0, hosts[n].labels
                print(f"\nzone hosts: {figures}; queuing delay ms: "
                      f"{ {n: hosts[n].labels.get('queuing_delay_ms') for n in names} }")

                # -- a job constrained on free slots lands on the one host that has them
                jobfile = tmp_path / "slots.nomad.hcl"
                jobfile.write_text(tn.slots_job(job))
                t0 = time.monotonic()
                cluster.cli("job", "run", "-detach", str(jobfile))
                alloc = tn.wait_for(f"{job} running", lambda: next(
                    (x for x in cluster.api(f"/v1/job/{job}/allocations")
                     if x["ClientStatus"] == "running"), None), 60, 0.1)
                timings["constrained job -> running (s)"] = round(time.monotonic() - t0, 2)
                assert alloc["NodeName"] == b.name, alloc["NodeName"]
                seen_vnfs |= tn.vnf_ids(b.run_dir)

                # -- the resolver follows: a is full, the session goes to b's instance
                tn.wait_for("a's instance full in the registry", lambda: orch.registry.aggregate(
                    svc, "host").get(f"nomad-mh/{a.name}") == 0, 30, 0.1)
                r = orch.resolve(svc)
                assert (r["kind"], r["host"], r["instance"]) == ("slot", b.name, ib.id), r

                # -- placement: every host a candidate with its own free slots; one probe
                from fluidvim.orchestrator.deploy import profile_of
                row = orch.store.service(svc)
                cands, filtered, _ = orch.placement.candidates(profile_of(row), row.profile, None)
                free = {cd.host: cd.free_slots for cd in cands}
                assert set(free) == set(names), (free, filtered)
                assert free[a.name] == 0 and free[c.name] == 0 and 0 < free[b.name] <= SLOTS_B
                t0 = time.monotonic()
                p = orch.place(svc)
                timings["placement round incl. stage-1 probe (s)"] = round(time.monotonic() - t0, 2)
                assert p["status"] == "decided" and p["host"] in names, p
                steps = {s["name"]: s["record"] for s in orch.explain(p["decision_id"])["steps"]}
                assert sorted(steps["filter"]["kept"]) == sorted(f"nomad-mh/{n}" for n in names)
                assert len(steps["probe"]["env_types"]) == 1, steps["probe"]
                assert len(steps["analyze"]["scores"]) == 3
                # deploying the decision runs the VNF on the decided client (under its run dir)
                t0 = time.monotonic()
                d = orch.placement.place(svc, deploy_it=True, bridges=("", "")).to_dict()
                timings["placement round + deploy (s)"] = round(time.monotonic() - t0, 2)
                assert d["status"] == "deployed", d
                ids.append(d["instance"]["id"])
                assert d["instance"]["host"] == d["host"] and d["host"] in names, d
                (ev,) = _launch_events(cluster, d["instance"]["id"])
                assert ev["Details"]["vnf_uuid"] in tn.vnf_ids(cluster.client(d["host"]).run_dir)
                seen_vnfs.add(ev["Details"]["vnf_uuid"])
            finally:
                for proc in (holder, server):
                    if proc is not None and proc.poll() is None:
                        proc.kill()
                        proc.wait(5)
                cluster.cli("job", "stop", "-purge", "-detach", job, check=False)
                for i in ids:
                    zone.terminate(i)
            tn.wait_for("only the warm shells left", lambda: all(
                len(p) == 1 for p in cluster.qemu_pids().values()), 30, 0.2)
            gone = seen_vnfs - set().union(*(tn.vnf_ids(cl.run_dir) for cl in cluster.clients))
            assert shells[a.name] | shells[b.name] <= gone
            taps = {spec.tap_for(v, i) for v in gone for i in range(limits.MAX_NICS)}
            tn.wait_for("the VNFs' taps gone (in every client's namespace)", lambda: not any(
                taps & cl.links() for cl in cluster.clients), 10)
    finally:
        orch.close()
    assert zone.instances() == []
    print("nomad multi-host timings:", timings)


# -- host power: drain, power off through Redfish, wake (tests/bmcserver.py) -----------------

FLOW_SERVER = """
import selectors, socket, sys
sel = selectors.DefaultSelector()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 80)); s.listen(64); sel.register(s, selectors.EVENT_READ)
print("listening", flush=True)
while True:                       # hold every connection; close it when the client does
    for k, _ in sel.select():
        if k.fileobj is s:
            c, _ = s.accept(); sel.register(c, selectors.EVENT_READ)
        elif not k.fileobj.recv(4096):
            sel.unregister(k.fileobj); k.fileobj.close()
"""

FLOW_CLIENT = """
import socket, sys, threading, time
conns = [socket.create_connection((sys.argv[1], 80), timeout=5) for _ in range(int(sys.argv[2]))]
print(len(conns), flush=True)
stop = threading.Event()
def keep():                       # every flow active (shorter than flow_timeout_ms)
    while not stop.wait(0.5):
        for c in conns:
            c.send(b".")
threading.Thread(target=keep, daemon=True).start()
sys.stdin.readline()              # the test says when the sessions end
stop.set(); time.sleep(0.6)
clean = 0
for c in conns:                   # a clean end: our FIN, then the server's
    c.shutdown(socket.SHUT_WR)
    c.settimeout(5)
    if c.recv(4096) == b"":
        clean += 1
    c.close()
print(clean, flush=True)
"""


def test_drain_power_off_and_wake_through_redfish(cluster, tmp_path):
    """Load falls: the consolidation round powers off the empty client, then empties the client
    whose VNF carries live sessions - sessions first: its slots are no longer offered, the flows
    end cleanly, only then Nomad moves the VNF (node drain) - and powers it off through its BMC
    (sushy-emulator: the system reports Off; the test's hook stops that client's agent and QEMUs
    as the power going off would). Load rises: the free slots fall below the threshold, no awake
    client has room, a client is powered on (the hook starts its agent), made eligible and runs
    a new instance. No resolve is refused throughout."""
    from fluidvim.orchestrator import hostpower as hp
    from tests.bmcserver import BMCEmulator, PowerHook

    a, b, c = cluster.clients
    names = {cl.name for cl in cluster.clients}
    hook = PowerHook(on_off=cluster.power_off_client, on_on=cluster.power_on_client)
    zone = NomadZone("nomad-mh", address=cluster.address, datacenter="dc1", slot_interval=0.25,
                     launch_timeout=90)
    svc = f"fvmh-pw-{uuid.uuid4().hex[:6]}"
    timings, granted, ids = {}, [], []
    holder = server = orch = None
    with BMCEmulator({n: "On" for n in sorted(names)}, hook=hook) as bmc, \
            testnet.TestNet("fvmp", 91) as net:
        # every client namespace has the test network's bridges (a moved VNF plugs its NICs
        # there); only client a's are wired to the traffic namespaces
        for cl in (b, c):
            for br in net.bridges:
                subprocess.run(["ip", "-n", cl.netns, "link", "add", br, "type", "bridge"],
                               check=True)
                subprocess.run(["ip", "-n", cl.netns, "link", "set", br, "up"], check=True)
        try:
            orch = _orchestrator(tmp_path, zone, host_power={
                "enabled": True, "interval": 0.0, "poll_interval": 0.25,
                "bmcs": [f"nomad-mh:{n}={bmc.url(n)}" for n in sorted(names)],
                "graceful_timeout": 30.0, "wake_timeout": 120.0, "session_bound": 90.0,
                "drain_timeout": 60.0, "wake_free_slots": 3, "vnf_vcpus": 1.0,
                "consolidate_u_low": 0.5, "min_hosts_on": 1},
                reservation_ttl=600.0)
            orch.start(server=f"fvmh-{uuid.uuid4().hex[:8]}")
            power = orch.host_power
            # a host woken for the service runs one more instance of it, with two NICs like
            # V1 and V2 (the orchestrator's launcher uses the zone's default NICs: one)
            from fluidvim.orchestrator.deploy import deploy
            power.launcher = lambda z, h, s: deploy(orch.store, orch.registry, orch.zones[z],
                                                    orch.store.service(s), host=h,
                                                    bridges=("", ""))
            orch.register_service(svc, FW, slots=SLOTS_B)
            # V1 on a (with traffic), V2 on b; c runs none
            v1 = zone.launch(LaunchRequest(service=svc, click_config=FW, slots=SLOTS_B,
                                           nics=tuple(net.bridges), host=a.name))
            v2 = zone.launch(LaunchRequest(service=svc, click_config=FW, slots=SLOTS_B,
                                           nics=tuple(net.bridges), host=b.name))
            ids += [v1.id, v2.id]
            for inst in (v1, v2):
                orch.store.add_instance(id=inst.id, zone="nomad-mh", host=inst.host,
                                        service=svc, name=inst.name, status="running",
                                        slots_total=SLOTS_B)
            tn.wait_for("both instances' slots in the registry", lambda: orch.registry.aggregate(
                svc, "host") == {f"nomad-mh/{a.name}": SLOTS_B, f"nomad-mh/{b.name}": SLOTS_B},
                60, 0.1)
            # live sessions through V1
            server = net.popen("b", "python3", "-c", FLOW_SERVER, net.ip_b,
                               stdout=subprocess.PIPE, text=True)
            assert server.stdout.readline().strip() == "listening"
            holder = net.popen("a", "python3", "-c", FLOW_CLIENT, net.ip_b, "2",
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert holder.stdout.readline().strip() == "2"
            # (from the VNF's vnf-stats.json, else the node's fingerprint: it runs V1 alone)
            tn.wait_for("V1's two sessions in the registry", lambda: orch.registry.aggregate(
                svc, "instance").get(v1.id, SLOTS_B) < SLOTS_B, 30, 0.1)

            # the plan, through the real CLI over the message bus: c is empty, a and b at u 0.5
            cli = [os.path.join(os.path.dirname(sys.executable), "fluidvim"), "power", "plan",
                   "--transport-url", orch.conf.orchestrator.transport_url,
                   "--topic", orch.conf.orchestrator.topic]
            r = subprocess.run(cli + ["--json"], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            plan = json.loads(r.stdout)
            assert plan["power_off"][0] == {"host": f"nomad-mh/{c.name}", "empty": True,
                                            "bmc": True, "idle_watts": plan["power_off"][0][
                                                "idle_watts"]}, plan
            assert plan["saved_watts"] >= plan["power_off"][0]["idle_watts"] > 0
            assert plan["saved_kwh_per_day"] == round(plan["saved_watts"] * 24 / 1000, 3)
            r = subprocess.run(cli, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and "power off (empty)" in r.stdout and "kWh/day" in \
                r.stdout, r.stdout + r.stderr
            print(r.stdout)

            # -- load is low: round 1 powers off the empty client c
            t0 = time.monotonic()
            did = power.round()
            timings["round 1: power off empty c (s)"] = round(time.monotonic() - t0, 1)
            assert did.get("power_off") == f"nomad-mh/{c.name}", did
            assert bmc.power(c.name) == "Off"
            assert power.state("nomad-mh", c.name) == hp.OFF
            assert c.proc is None                          # the hook stopped its agent
            assert tn.qemu_pids(c.run_dir) == []

            # -- round 2 empties a (u 0.5, least loaded first): sessions first
            rnd = {}
            t0 = time.monotonic()
            th = threading.Thread(target=lambda: rnd.update(power.round()))
            th.start()
            tn.wait_for("a draining", lambda: power.state("nomad-mh", a.name) == hp.DRAINING,
                        30, 0.1)
            # V1 offers no slot now: a session goes to V2 on b; V1 still runs on a
            r = orch.resolve(svc)
            granted.append(r)
            assert (r["kind"], r["instance"], r["host"]) == ("slot", v2.id, b.name), r
            (alloc,) = [x for x in cluster.api(f"/v1/job/{v1.id}/allocations")
                        if x["ClientStatus"] == "running"]
            assert alloc["NodeName"] == a.name
            time.sleep(2.0)                    # the drain waits while the sessions live
            assert power.state("nomad-mh", a.name) == hp.DRAINING
            assert [x["NodeName"] for x in cluster.api(f"/v1/job/{v1.id}/allocations")
                    if x["ClientStatus"] == "running"] == [a.name]
            timings["sessions held while draining (s)"] = round(time.monotonic() - t0, 1)
            holder.stdin.write("end\n")
            holder.stdin.flush()
            assert holder.stdout.readline().strip() == "2"     # both ended cleanly
            th.join(180)
            timings["round 2: drain + power off a (s)"] = round(time.monotonic() - t0, 1)
            assert rnd.get("power_off") == f"nomad-mh/{a.name}", rnd
            v = power.view("nomad-mh", a.name)
            assert (v.state, v.power) == (hp.OFF, "Off"), v
            assert v.detail.get("sessions_ended") == [v1.id] and not v.detail.get("bound_passed")
            assert bmc.power(a.name) == "Off" and a.proc is None
            # Nomad moved V1 to b (the one eligible client left)
            moved = tn.wait_for("V1 running on b", lambda: [
                x for x in cluster.api(f"/v1/job/{v1.id}/allocations")
                if x["ClientStatus"] == "running" and x["NodeName"] == b.name], 60, 0.2)
            assert moved
            assert {i.host for i in zone.instances() if i.id in ids} == {b.name}
            assert orch.store.instances(svc)[0].host == b.name

            # -- load rises: sessions until the free slots fall below 3
            # (b runs both now: a report per VNF needs its vnf-stats.json, the node's
            # fingerprint stands in for a node with one VNF only)
            tn.wait_for("free slots only on b", lambda: set(orch.registry.aggregate(
                svc, "host")) == {f"nomad-mh/{b.name}"}, 60, 0.1)
            while sum(orch.registry.aggregate(svc, "host").values()) >= 3:
                r = orch.resolve(svc)
                granted.append(r)
                assert r["kind"] == "slot" and r["host"] == b.name, r
            t0 = time.monotonic()
            did = power.round()
            timings["round 3: wake + launch (s)"] = round(time.monotonic() - t0, 1)
            assert did["shortage"] and did["wake"] in (f"nomad-mh/{a.name}",
                                                       f"nomad-mh/{c.name}"), did
            woken = did["wake"].split("/", 1)[1]
            assert bmc.power(woken) == "On"
            assert power.view("nomad-mh", woken).state == hp.ON
            node = cluster.nodes()[woken]
            assert node["SchedulingEligibility"] == "eligible", node
            new = did["launched"]
            ids.append(new)
            assert [i.host for i in zone.instances() if i.id == new] == [woken]
            # and the next sessions go there
            tn.wait_for("the new instance's slots", lambda: orch.registry.aggregate(
                svc, "host").get(f"nomad-mh/{woken}", 0) > 0, 60, 0.1)
            r = orch.resolve(svc)
            granted.append(r)
            assert (r["kind"], r["host"]) == ("slot", woken), r
            assert not hook.errors, hook.errors
        finally:
            for proc in (holder, server):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait(5)
            for cl in cluster.clients:                 # every client back on for the next test
                if cl.proc is None:
                    cluster.power_on_client(cl.name)
            # and eligible: a drained client stays ineligible in the server's state across its
            # agent's restart, so a later test's job could not be placed there
            for n in cluster.api("/v1/nodes"):
                if n["Name"] in names and n.get("SchedulingEligibility") != "eligible":
                    cluster.cli("node", "eligibility", "-enable", n["ID"], check=False)
            for i in ids:
                try:
                    zone.terminate(i)
                except Exception:  # noqa: BLE001 - the cluster's close() reports leftovers
                    pass
            if orch is not None:
                orch.close()
    print(f"\nhost power on Nomad: {len(granted)} sessions granted, none refused; {timings}")


def test_job_naming_a_bridge_lands_on_the_client_that_has_it(cluster, tmp_path):
    """Bridges are fingerprinted (driver.unikernel.bridge.<name>): bridges made in client c's
    network namespace only show on c's node; the sample firewall job naming them (its
    constraints follow its nics) is placed on c, and once the bridges are deleted c's node drops
    the attribute."""
    a, b, c = cluster.clients
    tag = uuid.uuid4().hex[:6]
    bridges = [f"fvb{tag}{i}" for i in range(2)]
    key = tn.PRE + "bridge." + bridges[0]
    job = f"fvmh-br-{tag}"
    jobfile = tmp_path / "bridge.nomad.hcl"
    jobfile.write_text(tn.firewall_job(job, bridges))
    for br in bridges:
        subprocess.run(["ip", "-n", c.netns, "link", "add", br, "type", "bridge"], check=True)
    try:
        t0 = time.monotonic()
        tn.wait_for(f"{key} on {c.name}'s node",
                    lambda: cluster.node_attrs(c.name).get(key) == "true", 60, 0.25)
        fingerprinted_s = round(time.monotonic() - t0, 2)
        for other in (a, b):
            assert key not in cluster.node_attrs(other.name), other.name
        t0 = time.monotonic()
        cluster.cli("job", "run", "-detach", str(jobfile))
        alloc = tn.wait_for(f"{job} running", lambda: next(
            (x for x in cluster.api(f"/v1/job/{job}/allocations")
             if x["ClientStatus"] == "running"), None), 60, 0.1)
        placed_s = round(time.monotonic() - t0, 2)
        assert alloc["NodeName"] == c.name, alloc["NodeName"]

        def launched():
            evs = cluster.api(f"/v1/allocation/{alloc['ID']}")["TaskStates"]["fw"]["Events"]
            return next((e["Details"] for e in evs if e["Type"] == "Driver"
                         and e["Details"].get("launch")), None)
        ev = tn.wait_for(f"the launch event of {job}", launched, 15, 0.2)
        vnf = ev["vnf_uuid"]
        assert vnf in tn.vnf_ids(c.run_dir), (vnf, tn.vnf_ids(c.run_dir))
        # the task's resources (memory = 64, cpu = 200) bound its QEMU where the client can see
        # cgroups; c's agent runs under `ip netns exec`, which mounts a fresh /sys without
        # /sys/fs/cgroup: there the event must say they are not enforced, and why
        if ev["limits_enforced"] == "true":
            assert int(ev["memory_max_bytes"]) == (32 + limits.QEMU_OVERHEAD_MB) << 20, ev
        else:
            assert ev["limits_enforced"] == "false" and "cgroup" in ev["limits_reason"], ev
        print(f"\nlimits on {c.name}: enforced={ev['limits_enforced']} "
              f"{ev.get('limits_reason') or ev.get('cgroup')}")
    finally:
        cluster.cli("job", "stop", "-purge", "-detach", job, check=False)
    tn.wait_for(f"{job}'s VNF gone from {c.name}", lambda: vnf not in tn.vnf_ids(c.run_dir),
                60, 0.25)
    assert not cgroups.dirs(vnf), cgroups.dirs(vnf)
    for br in bridges:
        subprocess.run(["ip", "-n", c.netns, "link", "del", br], check=True)
    t0 = time.monotonic()
    tn.wait_for(f"{key} dropped from {c.name}'s node",
                lambda: key not in cluster.node_attrs(c.name), 60, 0.25)
    print(f"\nbridge fingerprinted on its client in {fingerprinted_s} s; job placed there and "
          f"running in {placed_s} s; attribute dropped {round(time.monotonic() - t0, 2)} s "
          f"after the bridge went")
