# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Host power control against a real Redfish BMC emulator (sushy-tools, tests/bmcserver.py).

The BMCs are real (sushy-emulator: its fake driver with one system per host, or its libvirt
driver for a host whose power-on fails); the hosts are a described fleet (a synthetic zone: this
machine is one host, so N hosts behind N BMCs can only be described - the Nomad end to end test,
tests/e2e/test_nomad_multihost.py, powers real Nomad clients off and on). What is checked:

* off and on: GracefulShutdown, the emulator reports Off, the state is ``off`` in the database
  (a restarted orchestrator sees it), placement's filter says "powered off"; On, the emulator
  reports On, ``on``, placement uses the host again;
* a BMC that does not answer (emulator stopped, or a wrong port): a clear error naming the BMC,
  ``bmc_unreachable``; a host that was on stays in service (nothing lost), one that was off stays
  out; once the BMC answers again the host goes back to what it reports;
* a host that fails to wake (its BMC refuses On: the libvirt domain cannot start): ``failed``
  with the BMC's error, placement never uses it and a round does not try it again.
"""

from __future__ import annotations

import time
import uuid

import pytest

from fluidvim.common.zonetypes import HostInfo
from fluidvim.evaluator.model import EnvironmentType
from fluidvim.orchestrator import conf as orchconf, hostpower as hp
from fluidvim.orchestrator.db import Store
from fluidvim.orchestrator.deploy import max_loss_of
from fluidvim.orchestrator.placement import PlacementEngine
from fluidvim.orchestrator.queuing import QueuingEstimator
from fluidvim.orchestrator.slots import SlotRegistry, SlotReport
from fluidvim.orchestrator.zones.synthetic import SyntheticZone
from tests.bmcserver import BMCEmulator, free_port

from .conftest import libvirt_missing

ENV = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm", cpu_model="x")
HOSTS = ("h1", "h2", "h3")
CURVES = {"h1": "spec0120", "h2": "spec0121", "h3": "spec0122"}


def _conf(bmcs: dict, **over):
    conf = orchconf.make_conf()
    hp.register_opts(conf)
    conf.set_override("enabled", True, group="host_power")
    conf.set_override("bmcs", [f"z:{h}={u}" for h, u in bmcs.items()], group="host_power")
    for k, v in {"poll_interval": 0.2, "graceful_timeout": 30.0, "off_timeout": 20.0,
                 "wake_timeout": 30.0, "bmc_timeout": 2.0, **over}.items():
        conf.set_override(k, v, group="host_power")
    return conf


def _zone():
    return SyntheticZone("z", [HostInfo(name=h, env=ENV, slots_total=8, slots_free=8,
                                        power_system_id=CURVES[h], labels={"cpus": 8})
                               for h in HOSTS])


class _Fleet:
    """A store, a zone of three described hosts, a registry with a free slot on each, the
    placement engine's filter and a HostPower manager on them (``restart()`` = a new one on the
    same database)."""

    def __init__(self, tmp_path, conf):
        self.url = f"sqlite:///{tmp_path}/orch.sqlite"
        self.conf = conf
        self.zone = _zone()
        self.registry = SlotRegistry()
        for h in HOSTS:
            self.registry.apply(SlotReport(zone="z", host=h, instance=f"i-{h}", service="fw",
                                           slots=4, delay_s=None))
        self.store = None
        self.restart()

    def restart(self):
        if self.store is not None:
            self.store.close()
        self.store = Store(self.url)
        self.power = hp.HostPower(self.conf, self.store, {"z": self.zone}, self.registry)
        self.registry.unavailable = self.power.unavailable
        self.engine = PlacementEngine(self.store, self.registry, {"z": self.zone}, None, None,
                                      QueuingEstimator(self.store), host_power=self.power,
                                      max_loss=max_loss_of(self.conf))
        return self

    def filtered(self) -> dict:
        from fluidvim.evaluator.model import ServiceProfile
        kept, filtered, _ = self.engine.candidates(ServiceProfile(name="fw", click_config=""), {},
                                                      None)
        return {"kept": sorted(c.host for c in kept),
                "filtered": {f["candidate"]: f["reason"] for f in filtered}}

    def close(self):
        self.store.close()


@pytest.fixture
def emulator():
    with BMCEmulator({h: "On" for h in HOSTS}) as bmc:
        yield bmc


def test_power_off_and_wake_round_trip(emulator, tmp_path):
    fleet = _Fleet(tmp_path, _conf({h: emulator.url(h) for h in HOSTS}))
    t = {}
    try:
        assert fleet.filtered()["kept"] == list(HOSTS)
        t0 = time.monotonic()
        v = fleet.power.power_off("z", "h2", reason="test")
        t["off (s)"] = round(time.monotonic() - t0, 2)
        assert (v.state, v.in_service, v.power) == (hp.OFF, False, "Off"), v
        assert emulator.power("h2") == "Off"
        assert v.detail["power_system_id"] == "spec0121"       # kept for the wake-up order
        assert [h for h in HOSTS if emulator.power(h) == "On"] == ["h1", "h3"]

        # a restarted orchestrator sees it off: no placement, no slots offered there
        fleet.restart()
        assert fleet.power.state("z", "h2") == hp.OFF
        f = fleet.filtered()
        assert f["kept"] == ["h1", "h3"]
        assert f["filtered"]["z/h2"].startswith("powered off"), f
        assert set(fleet.registry.aggregate("fw", "host")) == {"z/h1", "z/h3"}

        # the plan lists it as off; a round with no shortage and consolidate off changes nothing
        assert fleet.power.plan()["off"] == ["z/h2"]

        t0 = time.monotonic()
        v = fleet.power.wake("z", "h2", reason="test")
        t["wake (s)"] = round(time.monotonic() - t0, 2)
        assert (v.state, v.in_service, v.power) == (hp.ON, True, "On"), v
        assert emulator.power("h2") == "On"
        assert fleet.filtered()["kept"] == list(HOSTS)
        assert set(fleet.registry.aggregate("fw", "host")) == {f"z/{h}" for h in HOSTS}
        assert fleet.restart().power.state("z", "h2") == hp.ON
    finally:
        fleet.close()
    print(f"\nRedfish power cycle through sushy-emulator: {t}")


def test_bmc_unreachable_host_skipped_nothing_lost(emulator, tmp_path):
    wrong = f"http://127.0.0.1:{free_port()}/redfish/v1/Systems/{uuid.uuid4()}"
    urls = {"h1": emulator.url("h1"), "h2": emulator.url("h2"), "h3": wrong}
    fleet = _Fleet(tmp_path, _conf(urls))
    try:
        # a wrong port: power-off refused before anything is drained; the host stays in service
        with pytest.raises(hp.BMCUnreachable, match=r"BMC http://127\.0\.0\.1:\d+/redfish/v1/"
                           r"Systems/\S+ did not answer"):
            fleet.power.power_off("z", "h3")
        v = fleet.power.view("z", "h3")
        assert (v.state, v.in_service) == (hp.UNREACHABLE, True), v
        assert "did not answer" in v.error
        f = fleet.filtered()
        assert "z/h3" not in f["filtered"] and "h3" in f["kept"]      # nothing lost

        # h2 off for real, then its BMC stops answering: waking it fails, it stays out
        assert fleet.power.power_off("z", "h2").state == hp.OFF
        emulator.stop()
        with pytest.raises(hp.BMCUnreachable, match="did not answer"):
            fleet.power.wake("z", "h2")
        v = fleet.power.view("z", "h2")
        assert (v.state, v.in_service) == (hp.UNREACHABLE, False), v
        f = fleet.filtered()
        assert f["filtered"]["z/h2"].startswith("BMC unreachable: BMC http://"), f
        assert "h2" not in f["kept"]
        # a round skips both (no answer: they stay as they are, with the error)
        assert fleet.power.recheck() == {"z/h2": hp.UNREACHABLE, "z/h3": hp.UNREACHABLE}

        # the BMC answers again (same port): each host goes back to what it reports - h2 is
        # still off (a BMC's restart does not change its host's power), h3's BMC still is not
        # there
        emulator.start()
        assert fleet.power.recheck() == {"z/h2": hp.OFF, "z/h3": hp.UNREACHABLE}
        assert fleet.filtered()["filtered"]["z/h2"] == "powered off"
        assert fleet.power.wake("z", "h2").state == hp.ON
        assert emulator.power("h2") == "On"
        assert fleet.filtered()["kept"] == ["h1", "h2", "h3"]
    finally:
        fleet.close()


@pytest.fixture
def broken_domain():
    """A libvirt domain whose disk does not exist: powering it on fails, as a host whose
    hardware does not come up."""
    why = libvirt_missing()
    if why:
        pytest.skip(why)
    import libvirt
    name = f"fvbmc-{uuid.uuid4().hex[:8]}"
    xml = (f"<domain type='qemu'><name>{name}</name><memory unit='MiB'>16</memory>"
           "<vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os><devices>"
           f"<disk type='file' device='disk'><source file='/nonexistent/{name}.img'/>"
           "<target dev='vda' bus='virtio'/></disk></devices></domain>")
    conn = libvirt.open("qemu:///system")
    dom = conn.defineXML(xml)
    try:
        yield dom.UUIDString()
    finally:
        if dom.isActive():
            dom.destroy()
        dom.undefine()
        conn.close()


def test_host_that_fails_to_wake(emulator, broken_domain, tmp_path):
    with BMCEmulator({"h2": broken_domain}, libvirt=True) as lv:
        urls = {"h1": emulator.url("h1"), "h2": lv.url("h2"), "h3": emulator.url("h3")}
        fleet = _Fleet(tmp_path, _conf(urls, wake_free_slots=100))
        try:
            assert lv.power("h2") == "Off"
            # the BMC says Off: the host is off without a shutdown
            assert fleet.power.power_off("z", "h2").state == hp.OFF
            with pytest.raises(hp.HostPowerError, match=r"refused Reset On: .*Cannot access "
                               r"storage file"):
                fleet.power.wake("z", "h2", reason="test")
            v = fleet.power.view("z", "h2")
            assert (v.state, v.in_service, v.power) == (hp.FAILED, False, "Off"), v
            assert lv.power("h2") == "Off"
            f = fleet.filtered()
            assert f["filtered"]["z/h2"].startswith("host power failed: "), f
            assert f["kept"] == ["h1", "h3"]
            # the wake-up choice never takes it again (it is failed, not off)
            assert fleet.power._to_wake() is None
            # and it survives a restart
            assert fleet.restart().power.view("z", "h2").state == hp.FAILED
        finally:
            fleet.close()
