# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The power loop carries out a rebalancing move sessions first (orchestrator/power/moving.py):
the VNF offers no slots, its replacement starts on the host named through the launcher (the
real ``deploy``), the VNF goes once its sessions ended - or the bound passed -, a replacement
that fails undoes the move, a restarted orchestrator continues it. The zone is a described one
whose VNF session counts the test sets (the real VNFs, traffic and local zone:
tests/integration/test_power_moves.py)."""

from fluidvim.common import instance_states as istates
from fluidvim.common.zonetypes import HostInfo, InstanceInfo, ZoneError
from fluidvim.evaluator.model import EnvironmentType
from fluidvim.orchestrator import conf as orchconf, hostpower as hp
from fluidvim.orchestrator.db import Store
from fluidvim.orchestrator.deploy import deploy
from fluidvim.orchestrator.slots import SlotRegistry, SlotReport
from fluidvim.orchestrator.zones.synthetic import SyntheticZone

ENV = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm", cpu_model="x")


class Zone(SyntheticZone):
    """Two described hosts whose VNFs are records: launch adds one on the host asked for,
    terminate removes it; ``sessions`` are the VNFs' own live-session counts."""

    def __init__(self):
        super().__init__("z", [HostInfo(name=h, env=ENV, slots_total=0, slots_free=0,
                                        power_system_id=sid, labels={"cpus": 16})
                               for h, sid in (("h1", "spec0166"), ("h2", "spec0298"))])
        self.vnfs: dict = {}
        self.sessions: dict = {}
        self.fail = None

    def instances(self):
        return list(self.vnfs.values())

    def launch(self, req):
        if self.fail:
            raise ZoneError(self.fail)
        iid = f"{req.host}-new{len(self.vnfs)}"
        self.vnfs[iid] = InstanceInfo(id=iid, name=iid, service=req.service, host=req.host,
                                      status=istates.RUNNING, slots_total=100)
        return self.vnfs[iid]

    def terminate(self, instance_id):
        self.vnfs.pop(instance_id, None)

    def instance_sessions(self, instance_id):
        return self.sessions.get(instance_id)


def _setup(tmp_path, clock):
    conf = orchconf.make_conf()
    hp.register_opts(conf)
    conf.set_override("bmcs", [f"z:{h}=http://127.0.0.1:9/redfish/v1/Systems/{h}"
                               for h in ("h1", "h2")], group="host_power")
    conf.set_override("consolidate_u_low", 0.1, group="host_power")   # nothing emptied
    conf.set_override("session_bound", 300.0, group="host_power")
    store = Store(f"sqlite:///{tmp_path}/orch.sqlite")
    store.put_service("fw", {"click_config": "FromDevice(0) -> ToDevice(1);", "slots": 100},
                      {}, 10.0)
    zone, registry = Zone(), SlotRegistry(clock=clock)
    for h in ("h1", "h2"):
        for k in range(6):
            iid = f"{h}-{k}"
            zone.vnfs[iid] = InstanceInfo(id=iid, name=iid, service="fw", host=h,
                                          status=istates.RUNNING, slots_total=100)
            store.add_instance(id=iid, zone="z", host=h, service="fw", name=iid,
                               status=istates.RUNNING, slots_total=100)
            registry.apply(SlotReport(zone="z", host=h, instance=iid, service="fw", slots=90,
                                      delay_s=None, at=clock()))

    def launcher(zname, host, service):
        return deploy(store, registry, zone, store.service(service), host=host)

    def power():
        p = hp.HostPower(conf, store, {"z": zone}, registry, launcher=launcher, clock=clock)
        registry.unavailable = p.unavailable
        return p
    return conf, store, zone, registry, power


def test_round_moves_a_vnf_sessions_first_and_keeps_it_until_they_end(tmp_path):
    now = [1000.0]
    conf, store, zone, registry, power = _setup(tmp_path, lambda: now[0])
    try:
        pw = power()
        assert pw.plan()["rebalance"] == [{"vnf": "h1-5", "demand": 1.0, "src": "z/h1",
                                          "dst": "z/h2"}]
        zone.sessions["h1-5"] = 3
        did = pw.round()
        (m,) = did["rebalance"]
        assert (m["instance"], m["src"], m["dst"], m["state"]) == ("h1-5", "z/h1", "z/h2",
                                                                  "draining")
        new = m["replacement"]
        assert zone.vnfs[new].host == "h2"                         # through the zone's launch
        assert "h1-5" in zone.vnfs                                 # its sessions go on
        offered = registry.aggregate("fw", "instance")
        assert "h1-5" not in offered and offered[new] == 100      # no new session there
        p = pw.plan()
        assert p["rebalance"] == [] and [x["instance"] for x in p["rebalancing"]] == ["h1-5"]
        assert pw.view("z", "h1").detail["rebalancing"][0]["replacement"] == new

        now[0] += 60                                  # sessions still live: it stays
        assert "rebalanced" not in pw.round() and "h1-5" in zone.vnfs

        # a restarted orchestrator continues the move: the VNF is withdrawn again
        registry.restore("h1-5")
        pw = power()
        pw.resume()
        assert "h1-5" not in registry.aggregate("fw", "instance")

        zone.sessions["h1-5"] = 0                     # the last session ended
        now[0] += 30
        did = pw.round()
        (done,) = did["rebalanced"]
        assert (done["instance"], done["state"], done["cut"]) == ("h1-5", "done", False)
        assert "h1-5" not in zone.vnfs
        assert [i.status for i in store.instances(statuses=None) if i.id == "h1-5"] == \
            [istates.DELETED]
        # the same round starts the next move the plan names (one at a time); the one moved
        # in is not moved on
        assert [x["instance"] for x in did["rebalance"]] == ["h1-4"]
        p = pw.plan()
        assert [x["instance"] for x in p["rebalancing"]] == ["h1-4"]
        assert [x["instance"] for x in p["rebalanced"]] == ["h1-5"]
        assert new in pw.moves.held(0.0)
        assert new not in {x["vnf"] for x in p["rebalance"]}
    finally:
        store.close()


def test_move_bound_passes_and_a_failed_replacement_undoes_the_move(tmp_path):
    now = [1000.0]
    conf, store, zone, registry, power = _setup(tmp_path, lambda: now[0])
    try:
        pw = power()
        zone.fail = "no room on h2"
        did = pw.round()
        (m,) = did["rebalance"]
        assert "no room on h2" in m["error"] and m["vnf"] == "h1-5"
        assert "h1-5" in registry.aggregate("fw", "instance")     # serving again: nothing lost
        assert pw.plan()["rebalancing"] == []

        zone.fail = None
        zone.sessions["h1-5"] = 2                     # sessions that outlive the bound
        pw.move("h1-5", "z/h2", reason="test")
        now[0] += 299
        assert "rebalanced" not in pw.round()
        now[0] += 2
        (done,) = pw.round()["rebalanced"]
        assert done["cut"] is True and "h1-5" not in zone.vnfs
    finally:
        store.close()
