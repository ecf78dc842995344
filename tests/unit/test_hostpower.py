# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The host power state machine's vocabulary and its configuration (no BMC here: the Redfish
actions run against sushy-tools' emulator in tests/integration/test_hostpower.py and
tests/e2e/test_nomad_multihost.py)."""

import pytest

from fluidvim.orchestrator import hostpower as hp
from fluidvim.orchestrator.exception import InvalidRequest


def test_transition_map_is_closed_and_reaches_every_state():
    assert set(hp.TRANSITIONS) == set(hp.STATES)
    for src, dsts in hp.TRANSITIONS.items():
        assert set(dsts) <= set(hp.STATES), src
        assert src not in dsts, f"{src} lists itself"
    # the cycle of the module doc, and the two ways out of every action
    for a, b in ((hp.ON, hp.DRAINING), (hp.DRAINING, hp.POWERING_OFF),
                 (hp.POWERING_OFF, hp.OFF), (hp.OFF, hp.WAKING), (hp.WAKING, hp.ON)):
        hp.check_transition(a, b)
    for s in hp.IN_PROGRESS:
        assert hp.FAILED in hp.TRANSITIONS[s] and hp.UNREACHABLE in hp.TRANSITIONS[s], s
    # every state is reachable from on
    seen, todo = {hp.ON}, [hp.ON]
    while todo:
        for n in hp.TRANSITIONS[todo.pop()]:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    assert seen == set(hp.STATES)


def test_forbidden_transition_names_the_allowed_ones():
    with pytest.raises(hp.HostPowerError, match=r"host z:h1: power state off cannot go to "
                       r"draining \(allowed: waking, on, bmc_unreachable\)"):
        hp.check_transition(hp.OFF, hp.DRAINING, "z:h1")
    with pytest.raises(hp.HostPowerError, match="waking cannot go to off"):
        hp.check_transition(hp.WAKING, hp.OFF)


def test_parse_bmcs():
    got = hp.parse_bmcs(["nomad-dc1:node-3=https://10.0.0.13/redfish/v1/Systems/1",
                         " local:h=http://127.0.0.1:8000/redfish/v1/Systems/abc-1/ "])
    assert got == {("nomad-dc1", "node-3"): "https://10.0.0.13/redfish/v1/Systems/1",
                   ("local", "h"): "http://127.0.0.1:8000/redfish/v1/Systems/abc-1"}
    for bad in ("node-3=https://10.0.0.13/redfish/v1/Systems/1",       # no zone
                "z:h=https://10.0.0.13/redfish/v1",                      # no system
                "z:h=10.0.0.13/redfish/v1/Systems/1"):                   # no scheme
        with pytest.raises(InvalidRequest, match=r"host_power\.bmcs: .* is not ZONE:HOST=URL; "
                           "e.g. nomad-dc1:node-3="):
            hp.parse_bmcs([bad])
    with pytest.raises(InvalidRequest, match="host z:h is listed twice"):
        hp.parse_bmcs(["z:h=http://a/redfish/v1/Systems/1", "z:h=http://b/redfish/v1/Systems/1"])


def test_redfish_bmc_url_checked():
    bmc = hp.RedfishBMC("https://10.0.0.13:8443/redfish/v1/Systems/1")
    assert (bmc.base, bmc.system_path) == ("https://10.0.0.13:8443", "/redfish/v1/Systems/1")
    with pytest.raises(InvalidRequest, match="is not a Redfish system URL"):
        hp.RedfishBMC("https://10.0.0.13/redfish/v1/Chassis/1")


def test_options_registered_once():
    from oslo_config import cfg
    conf = cfg.ConfigOpts()
    hp.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override("wake_free_slots", 7, group="host_power")
    hp.register_opts(conf)
    assert conf.host_power.wake_free_slots == 7
    assert conf.host_power.enabled is False


def test_ahead_wakes_a_host_one_boot_before_the_trend_needs_it(tmp_path):
    """The wake-ahead forecast of the power loop (``[host_power] wake_ahead_s``): a real store,
    slot registry and (described) zone; no BMC is called - ``ahead`` only says what a round
    would wake."""
    from fluidvim.common import instance_states as istates
    from fluidvim.common.zonetypes import HostInfo
    from fluidvim.evaluator.model import EnvironmentType
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.db import Store
    from fluidvim.orchestrator.slots import SlotRegistry, SlotReport
    from fluidvim.orchestrator.zones.synthetic import SyntheticZone

    env = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm", cpu_model="x")
    conf = orchconf.make_conf()
    hp.register_opts(conf)
    conf.set_override("bmcs", [f"z:{h}=http://127.0.0.1:9/redfish/v1/Systems/{h}"
                               for h in ("h1", "h2")], group="host_power")
    conf.set_override("wake_ahead_s", 300.0, group="host_power")
    conf.set_override("forecast_window_s", 120.0, group="host_power")
    conf.set_override("interval", 30.0, group="host_power")
    now = [0.0]
    clock = lambda: now[0]                                      # noqa: E731
    store = Store(f"sqlite:///{tmp_path}/orch.sqlite")
    try:
        zone = SyntheticZone("z", [HostInfo(name="h1", env=env, slots_total=0, slots_free=0,
                                            power_system_id="spec0120", labels={"cpus": 1})])
        registry = SlotRegistry(clock=clock)
        store.put_service("fw", {"slots": 100}, {}, None)
        for i in ("i1", "i2"):
            store.add_instance(id=i, zone="z", host="h1", service="fw", name=i,
                               status=istates.RUNNING, slots_total=100)
        # h2 is off (its BMC said so); its curve and threads were kept when it went off
        store.set_host_power("z", "h2", hp.OFF, in_service=False, power="Off", error=None,
                             detail={"power_system_id": "spec0121", "cpus": 8}, since=0.0)
        power = hp.HostPower(conf, store, {"z": zone}, registry, clock=clock)

        def sample(used):
            for i in ("i1", "i2"):
                registry.apply(SlotReport(zone="z", host="h1", instance=i, service="fw",
                                          slots=100 - used // 2, delay_s=None, at=now[0]))
            return power.ahead()

        # flat at 50 of 200 slots used: 2 instances are what the scaler wants; nothing to wake
        for t in range(0, 301, 30):
            now[0] = float(t)
            a = sample(50)
        assert a["services"]["fw"] == {"used": 50, "instances": 2, "want": 2}
        assert (a["shortfall"], a["room"], a["wake"]) == (0, 1, [])
        # rising 1 slot/s: one boot from now 300 more are used - h2 must wake now
        for t in range(330, 451, 30):
            now[0] = float(t)
            a = sample(50 + (t - 300))
        # 200 used + 300 s x 1/s + the scaler's lead 30 s x 1/s, 100 slots each, + its step
        assert a["services"]["fw"] == {"used": 200, "instances": 2, "want": 6 + 1}
        assert (a["shortfall"], a["room"], a["wake"]) == (5, 1, ["z/h2"])
        # off: no forecast, nothing woken ahead
        conf.set_override("wake_ahead_s", 0.0, group="host_power")
        assert power.ahead() is None
    finally:
        store.close()


@pytest.mark.parametrize("rounds", [1, 2])
def test_a_round_wakes_every_host_the_forecast_needs_at_once(tmp_path, rounds):
    """A ramp that needs two hosts within one boot gets both in one round, their boots
    overlapping (:meth:`HostPower.round` wakes every host ``power.wake_ahead`` names; a wake
    waits for the host to be back, so one after the other the second came a boot late - and
    bench/energy, which wakes them all, would not have measured the product). The two BMCs
    here answer On only once both were asked On: woken one after the other, the first never
    comes up within ``wake_timeout`` and fails. (A BMC stand-in: the Redfish path itself runs
    against sushy-tools in tests/integration/test_hostpower.py.) With ``wake_ahead_rounds`` 2
    the first round that sees the shortfall only waits (``ahead["waiting"]``), the next wakes."""
    import threading

    from fluidvim.common import instance_states as istates
    from fluidvim.common.zonetypes import HostInfo
    from fluidvim.evaluator.model import EnvironmentType
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.db import Store
    from fluidvim.orchestrator.slots import SlotRegistry, SlotReport
    from fluidvim.orchestrator.zones.synthetic import SyntheticZone

    env = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm", cpu_model="x")
    conf = orchconf.make_conf()
    hp.register_opts(conf)
    conf.set_override("bmcs", [f"z:{h}=http://127.0.0.1:9/redfish/v1/Systems/{h}"
                               for h in ("h1", "h2", "h3")], group="host_power")
    for k, v in (("wake_ahead_s", 300.0), ("forecast_window_s", 120.0), ("interval", 30.0),
                 ("wake_free_slots", 0), ("wake_timeout", 60.0), ("poll_interval", 1.0),
                 ("consolidate", False), ("wake_ahead_rounds", rounds)):
        conf.set_override(k, v, group="host_power")
    now = [0.0]
    lock = threading.Lock()

    def sleep(s):
        with lock:
            now[0] += s
        threading.Event().wait(0.001)

    asked: set = set()

    class TwinBMC:
        """Power On for a system once both systems were asked On (a shared enclosure)."""

        def __init__(self, url):
            self.name = url.rsplit("/", 1)[1]

        def power_state(self):
            return hp.POWER_ON if {"h2", "h3"} <= asked else hp.POWER_OFF

        def reset(self, reset_type):
            assert reset_type == hp.RESET_ON
            asked.add(self.name)

    store = Store(f"sqlite:///{tmp_path}/orch.sqlite")
    try:
        zone = SyntheticZone("z", [HostInfo(name=h, env=env, slots_total=0, slots_free=0,
                                            power_system_id="spec0120", labels={"cpus": 1})
                                   for h in ("h1", "h2", "h3")])
        registry = SlotRegistry(clock=lambda: now[0])
        store.put_service("fw", {"slots": 100}, {}, None)
        for i in ("i1", "i2"):
            store.add_instance(id=i, zone="z", host="h1", service="fw", name=i,
                               status=istates.RUNNING, slots_total=100)
        for h in ("h2", "h3"):          # off, 2 threads each: the shortfall of 5 needs both
            store.set_host_power("z", h, hp.OFF, in_service=False, power="Off", error=None,
                                 detail={"power_system_id": "spec0121", "cpus": 2}, since=0.0)
        power = hp.HostPower(conf, store, {"z": zone}, registry, clock=lambda: now[0],
                             sleep=sleep, bmc_factory=TwinBMC)
        def report(t):
            now[0] = float(t)
            used = 50 + max(0, t - 300)
            for i in ("i1", "i2"):
                registry.apply(SlotReport(zone="z", host="h1", instance=i, service="fw",
                                          slots=100 - used // 2, delay_s=None, at=now[0]))

        for t in range(0, 451, 30):     # flat, then rising 1 slot/s (as the test above)
            report(t)
            a = power.ahead()                # a round's sample of the slots
        assert (a["shortfall"], a["room"], a["wake"]) == (5, 1, ["z/h2", "z/h3"])
        if rounds == 2:                  # the shortfall seen once more, in this round: it waits
            report(480)
            did = power.round()
            assert "woken" not in did and not asked, did
            assert did["ahead"]["waiting"] == {"named": ["z/h2", "z/h3"], "rounds": 1, "of": 2}
            report(510)
        did = power.round()
        assert did["woken"] == {"z/h2": hp.ON, "z/h3": hp.ON}, did
        assert did["wake"] == "z/h2"
        assert {power.state("z", h) for h in ("h2", "h3")} == {hp.ON}
    finally:
        store.close()


def test_plan_empties_no_host_in_service_while_demand_grows_or_the_forecast_is_short(tmp_path):
    """The power loop's consolidation runs bench/energy's rule (power.consolidation_gate): a host
    holding VNFs is emptied only while the instances did not grow over ``consolidate_trend_s``,
    no forecast shortfall is open and no host is waking; an empty host stays a candidate."""
    from fluidvim.common import instance_states as istates
    from fluidvim.common.zonetypes import HostInfo, InstanceInfo
    from fluidvim.evaluator.model import EnvironmentType
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.db import Store
    from fluidvim.orchestrator.slots import SlotRegistry
    from fluidvim.orchestrator.zones.synthetic import SyntheticZone

    class Zone(SyntheticZone):
        """A described fleet whose VNFs are listed (as a Nomad or Nova zone lists them)."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.vnfs: list = []

        def instances(self):
            return list(self.vnfs)

    env = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm", cpu_model="x")
    conf = orchconf.make_conf()
    hp.register_opts(conf)
    conf.set_override("bmcs", [f"z:{h}=http://127.0.0.1:9/redfish/v1/Systems/{h}"
                               for h in ("h1", "h2", "h3")], group="host_power")
    conf.set_override("consolidate_trend_s", 600.0, group="host_power")
    now = [0.0]
    store = Store(f"sqlite:///{tmp_path}/orch.sqlite")
    try:
        zone = Zone("z", [HostInfo(name=h, env=env, slots_total=0, slots_free=0,
                                   power_system_id="spec0120", labels={"cpus": 16})
                          for h in ("h1", "h2", "h3")])

        def vnf(i, host):
            zone.vnfs.append(InstanceInfo(id=i, name=i, service="fw", host=host,
                                          status=istates.RUNNING, slots_total=100))
        vnf("i1", "h1")
        vnf("i2", "h2")
        power = hp.HostPower(conf, store, {"z": zone}, SlotRegistry(clock=lambda: now[0]),
                             clock=lambda: now[0])

        def off():
            p = power.plan()
            return p["held"], sorted(c["host"] for c in p["power_off"])

        # flat: h3 is empty, and the light hosts that hold a VNF are emptied too
        held, hosts = off()
        assert held is None and "z/h3" in hosts and {"z/h1", "z/h2"} & set(hosts), hosts
        # one more VNF within the trend window: only the empty host is a candidate
        now[0] = 60.0
        vnf("i3", "h1")
        assert off() == ("demand grew over the trend window", ["z/h3"])
        # a trend window later without growth: the plan empties a host again
        now[0] = 700.0
        held, hosts = off()
        assert held is None and {"z/h1", "z/h2"} & set(hosts), hosts
        # a forecast shortfall holds it too
        p = power.plan({"shortfall": 2})
        assert p["held"].startswith("the forecast wants 2 more")
        assert [c["host"] for c in p["power_off"]] == ["z/h3"]
    finally:
        store.close()


def _two_hosts(n1: int, n2: int):
    """(vnfs, a SyntheticZone class listing them, an environment, host_power options with a
    BMC each) for hosts h1 and h2 carrying ``n1`` and ``n2`` running VNFs of 100 slots."""
    from fluidvim.common import instance_states as istates
    from fluidvim.common.zonetypes import InstanceInfo
    from fluidvim.evaluator.model import EnvironmentType
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.zones.synthetic import SyntheticZone

    vnfs = [InstanceInfo(id=f"{h}-{k}", name=f"{h}-{k}", service="fw", host=h,
                         status=istates.RUNNING, slots_total=100)
            for h, n in (("h1", n1), ("h2", n2)) for k in range(n)]

    class Zone(SyntheticZone):
        def instances(self):
            return list(vnfs)

    env = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm", cpu_model="x")
    conf = orchconf.make_conf()
    hp.register_opts(conf)
    conf.set_override("bmcs", [f"z:{h}=http://127.0.0.1:9/redfish/v1/Systems/{h}"
                               for h in ("h1", "h2")], group="host_power")
    return vnfs, Zone, env, conf


def _dear_and_cheap():
    """(vnfs, zone, conf): two 16-thread hosts of 6 VNFs each, h1 a server at 19.6 W a thread,
    h2 one at 2.5 W; nothing emptied (consolidate_u_low 0.1)."""
    from fluidvim.common.zonetypes import HostInfo
    vnfs, Zone, env, conf = _two_hosts(6, 6)
    conf.set_override("consolidate_u_low", 0.1, group="host_power")
    zone = Zone("z", [HostInfo(name=h, env=env, slots_total=0, slots_free=0,
                               power_system_id=sid, labels={"cpus": 16})
                      for h, sid in (("h1", "spec0166"), ("h2", "spec0298"))])
    return vnfs, zone, conf


def test_plan_names_a_rebalancing_move_from_a_dear_host_to_a_cheap_one(tmp_path):
    """The power plan shows power.rebalance_moves over the hosts in service (bench/energy's
    rule for fluidvim-consolidate): a VNF from a 16-thread server at 19.6 W a thread to one at
    2.5 W a thread, within the bound; with the bound at 0, none."""
    from fluidvim.orchestrator.db import Store
    from fluidvim.orchestrator.slots import SlotRegistry
    vnfs, zone, conf = _dear_and_cheap()
    store = Store(f"sqlite:///{tmp_path}/orch.sqlite")
    try:
        power = hp.HostPower(conf, store, {"z": zone}, SlotRegistry(), clock=lambda: 0.0)
        p = power.plan()
        assert p["power_off"] == [] and p["moves"] == []
        assert p["rebalance"] == [{"vnf": "h1-5", "demand": 1.0, "src": "z/h1",
                                   "dst": "z/h2"}]
        conf.set_override("rebalance_moves", 3, group="host_power")
        # priced by busy threads (the default; no slot report: every VNF busy) one a round
        assert [m["vnf"] for m in power.plan()["rebalance"]] == ["h1-5"]
        conf.set_override("rebalance_busy", False, group="host_power")
        assert [m["vnf"] for m in power.plan()["rebalance"]] == ["h1-5", "h1-4", "h1-3"]
        conf.set_override("rebalance_moves", 0, group="host_power")
        assert power.plan()["rebalance"] == []
    finally:
        store.close()


def test_plan_prices_the_rebalancing_move_by_the_sessions_the_vnfs_hold(tmp_path):
    """rebalance_busy (the default): the move is priced by busy threads (the slot registry's
    reports) where sessions go to the host with the fewest dynamic watts per thread. The dear
    host's VNFs hold no session, the cheap host's are full: moving one off the dear host saves
    no watt (its busy threads stay 0), so no move - priced by VNFs, one moves; with sessions
    routed otherwise ([orchestrator] session_route = free), priced by VNFs too."""
    from fluidvim.orchestrator.db import Store
    from fluidvim.orchestrator.slots import SlotRegistry, SlotReport
    vnfs, zone, conf = _dear_and_cheap()
    store = Store(f"sqlite:///{tmp_path}/orch.sqlite")
    try:
        reg = SlotRegistry(clock=lambda: 0.0)
        for v in vnfs:                     # h1's VNFs: every slot free; h2's: none
            reg.apply(SlotReport("z", v.host, v.id, "fw", slots=100 if v.host == "h1" else 0,
                                 delay_s=0.0, at=0.0))
        power = hp.HostPower(conf, store, {"z": zone}, reg, clock=lambda: 0.0)
        load = power._busy_load(power.fleet()[0])
        assert load.threads == {"z/h1": 0.0, "z/h2": 6.0}
        assert load.rank["z/h2"] < load.rank["z/h1"]
        assert power.plan()["rebalance"] == []
        conf.set_override("session_route", "free", group="orchestrator")
        assert power._busy_load(power.fleet()[0]) is None
        assert [m["vnf"] for m in power.plan()["rebalance"]] == ["h1-5"]
        conf.clear_override("session_route", group="orchestrator")
        conf.set_override("rebalance_busy", False, group="host_power")
        assert [m["vnf"] for m in power.plan()["rebalance"]] == ["h1-5"]
    finally:
        store.close()


def test_plan_prices_the_vnfs_by_the_slots_they_use(tmp_path):
    """consolidate_busy: the plan prices each VNF by the share of its slots in use (the slot
    registry's reports; power.Fill busy). A 10-thread host at its fill limit (8 of 10: its
    curve is steep above 80 %) with half-busy VNFs takes a light host's two idle VNFs up to
    its threads, and the light host is emptied; priced as busy threads, it is not."""
    from fluidvim.common.zonetypes import HostInfo
    from fluidvim.orchestrator.db import Store
    from fluidvim.orchestrator.slots import SlotRegistry, SlotReport
    vnfs, Zone, env, conf = _two_hosts(2, 8)
    conf.set_override("rebalance_moves", 0, group="host_power")
    conf.set_override("consolidate_busy", True, group="host_power")
    store = Store(f"sqlite:///{tmp_path}/orch.sqlite")
    try:
        zone = Zone("z", [HostInfo(name=h, env=env, slots_total=0, slots_free=0,
                                   power_system_id="spec0598", labels={"cpus": 10})
                          for h in ("h1", "h2")])
        reg = SlotRegistry(clock=lambda: 0.0)
        for v in vnfs:                     # h1's VNFs idle, h2's half busy
            reg.apply(SlotReport("z", v.host, v.id, "fw", slots=100 if v.host == "h1" else 50,
                                 delay_s=0.0, at=0.0))
        power = hp.HostPower(conf, store, {"z": zone}, reg, clock=lambda: 0.0)
        assert power.busy(power.fleet()[0]) == {
            **{f"h1-{k}": 0.0 for k in range(2)}, **{f"h2-{k}": 0.5 for k in range(8)}}
        p = power.plan()
        assert [c["host"] for c in p["power_off"]] == ["z/h1"]
        assert sorted(m["dst"] for m in p["moves"]) == ["z/h2", "z/h2"]
        conf.set_override("consolidate_busy", False, group="host_power")     # the default
        assert power.busy(power.fleet()[0]) is None
        p = power.plan()
        assert p["power_off"] == [] and p["moves"] == []
    finally:
        store.close()
