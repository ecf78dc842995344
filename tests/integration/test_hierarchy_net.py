# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Hierarchical placement with real traffic: three zones on Abilene sites, the user at New York,
the propagation delay of each zone's shortest path from New York emulated on the wire, a real VNF
placed by the hierarchical placer, and pings that show the latency ordering.

Each zone is a local zone (the launch core on this machine) with its own two bridges; its traffic
path is a :class:`TestNet` (user namespace ``a`` at the ingress, server namespace ``b`` in the
zone)::

    ns a -- br0 -- veth -- [delay link: d ms each way] -- veth -- w -- VNF -- br1 -- ns b
                                                                   (or a plain veth w -- br1)

``d`` is the one-way latency from New York to the zone's site on sndlib/abilene. This kernel has
no ``sch_netem`` (``tc qdisc add ... netem``: "Specified qdisc kind is unknown"), so the delay is
:mod:`tests.delaylink`, a relay process with netem's guarantee: a frame is never early, so
a round trip takes at least 2·d. The assertions use only orderings that follow from it.
"""

import re
import subprocess

import pytest

from fluidvim.orchestrator import conf as orchconf, topology
from fluidvim.orchestrator.exception import Refused
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.zones.local import LocalZone
from fluidvim.vnf import netdev
from fluidvim.vnf.testnet import TestNet
from tests.delaylink import DelayLink

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
INGRESS = "NYCMng"
ZONES = {"east": "WASHng", "central": "CHINng", "west": "LOSAng"}   # 1.6, 5.6, 22.1 ms


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class ZonePath:
    """One zone's wire from the user: TestNet + the delay link + the zone's ingress bridge."""

    def __init__(self, subnet: int, delay_ms: float):
        self.tn = TestNet("fh", subnet)
        self.delay_ms = delay_ms
        self.links: list[str] = []
        self.relay = None

    def up(self):
        self.tn.up()
        p = self.tn.prefix
        self.w = f"{p}w"
        _ip("link", "add", self.w, "type", "bridge", "stp_state", "0", "forward_delay", "0")
        self.links.append(self.w)
        _ip("link", "set", self.w, "up")
        for a, b, master in ((f"{p}p0", f"{p}p1", self.tn.br0), (f"{p}q0", f"{p}q1", self.w)):
            _ip("link", "add", a, "type", "veth", "peer", "name", b)
            self.links.append(a)
            _ip("link", "set", a, "master", master, "up")
            _ip("link", "set", b, "up")
        self.relay = DelayLink(f"{p}p1", f"{p}q1", self.delay_ms).start()
        return self

    def wire(self):
        """No VNF in this zone: a plain veth from its ingress bridge to the server's bridge."""
        p = self.tn.prefix
        _ip("link", "add", f"{p}r0", "type", "veth", "peer", "name", f"{p}r1")
        self.links.append(f"{p}r0")
        _ip("link", "set", f"{p}r0", "master", self.w, "up")
        _ip("link", "set", f"{p}r1", "master", self.tn.br1, "up")

    def rtts(self, count=10) -> list[float]:
        r = self.tn.run("a", "ping", "-n", "-c", str(count), "-i", "0.2", "-W", "3", self.tn.ip_b,
                        timeout=count * 4 + 10)
        return [float(x) for x in re.findall(r"time=([0-9.]+) ms", r.stdout)]

    def down(self):
        if self.relay:
            self.relay.stop()
        for name in reversed(self.links):
            netdev.delete_link(name)
        self.tn.down()


@pytest.fixture
def paths():
    topo = topology.load("sndlib/abilene")
    made = {}
    try:
        for i, (zone, site) in enumerate(sorted(ZONES.items())):
            made[zone] = ZonePath(70 + i, topo.latency_ms(INGRESS, site)).up()
        yield made
    finally:
        for zp in made.values():
            zp.down()


def small_stage1(store, prefix="fhlp", subnet=69):
    """The real stage-1 runner with a short load probe (as tests/integration/conftest.py)."""
    from fluidvim.evaluator import cache as pcache, probes, stage1
    load = probes.LoadProbe(sessions=(1, 10, 50), step_s=0.5, warmup_s=0.2, drain_s=0.3,
                            prefix=prefix, subnet=subnet, valid_for_s=3600)
    return stage1.Stage1Runner(pcache.ProbeCache(store.engine),
                               [probes.StaticProbe(), probes.BootProbe(n=2), load])


def test_hierarchical_placement_puts_the_vnf_where_the_user_is_near(paths, make_manager,
                                                                      tmp_path):
    mgr = make_manager(backend="qemu")
    zones = [LocalZone(z, mgr, bridges=(paths[z].w, paths[z].tn.br1), labels={"site": s})
             for z, s in sorted(ZONES.items())]
    conf = orchconf.make_conf(connection=f"sqlite:///{tmp_path}/o.sqlite", local_zone=False,
                              hierarchy_enabled=True, hierarchy_topology="sndlib/abilene",
                              hierarchy_fanout=1, hierarchy_summary_ttl=0.0)
    from fluidvim.orchestrator.db import Store
    store = Store(conf.orchestrator.connection)
    orch = Orchestrator(conf, zones=zones, manager=mgr, stage1=small_stage1(store),
                        zone_labels={z: {"site": s} for z, s in ZONES.items()})
    store.close()
    try:
        bound = 8.0                                   # one way: east and central qualify
        orch.register_service("fw", FORWARD, slots=8, deadline_ms=100.0, max_latency_ms=bound)
        placed = orch.place("fw", location=INGRESS, deploy=True)
        assert placed["status"] == "deployed" and placed["zone"] == "east", placed
        parent = orch.explain(placed["decision_id"])["steps"][0]
        assert parent["name"] == "parent"
        rec = parent["record"]
        assert [c["zone"] for c in rec["ranked"]] == ["east", "central"]
        assert [r["zone"] for r in rec["rejected"]] == ["west"]
        assert "exceeds the service's bound 8 ms" in rec["rejected"][0]["reason"]
        inst = placed["instance"]
        vnf = next(r for r in mgr.list() if r.id == inst["id"])
        assert vnf.status == "running"
        for z, zp in paths.items():
            if z != "east":
                zp.wire()
        # warm-up (ARP through the delay links), then the measured pings
        for zp in paths.values():
            assert zp.rtts(2), f"no reply through zone path {zp.tn.prefix}"
        rtt = {z: min(zp.rtts()) for z, zp in paths.items()}
        print("min RTT ms:", rtt, "one-way delays ms:",
              {z: round(zp.delay_ms, 3) for z, zp in paths.items()})
        # every reply crossed the VNF of the chosen zone: its NIC counters moved
        nic0, nic1 = mgr.stats(inst["id"])["nics"]
        assert nic0["rx"] >= 12 and nic1["tx"] >= 12 and nic1["rx"] >= 12 and nic0["tx"] >= 12
        # netem's guarantee, here the delay link's: a round trip takes at least 2 x one way
        for z, zp in paths.items():
            assert rtt[z] >= 2 * zp.delay_ms, (z, rtt, zp.delay_ms)
        # the chosen zone: within the service's bound and nearer than the zones not chosen
        assert rtt["east"] < 2 * bound, rtt
        assert rtt["east"] < rtt["central"] < rtt["west"], rtt
        # a tolerable queuing delay no zone meets: nothing is free and launches take longer
        orch.register_service("strict", FORWARD, max_latency_ms=bound,
                              max_queuing_delay_s=0.000001)
        with pytest.raises(Refused, match=r"no zone can take strict .*east: no free slot and "
                                          r"queuing delay .* exceeds the service's tolerable"):
            orch.place("strict", location=INGRESS, deploy=True)
    finally:
        for rec in mgr.list():
            mgr.destroy(rec.id)
        orch.close()
