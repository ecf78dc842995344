# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The ``nova`` zone adapter against Nova's own in-process functional fixtures.

Nova API, conductor, scheduler, placement and one nova-compute running UnikernelDriver (the
set-up of ``fluidvim.nova_driver.tests.test_functional``) — openstacksdk talks to the fixture's
API and placement over HTTP through wsgi-intercept, with the fixture's stub auth headers. A real
VNF boots under QEMU for the server the adapter creates. Needs root and the VNF kernel.

Not a pytest module (Nova's fixtures break under pytest collection); run with testtools::

    .venv/bin/python -m testtools.run tests.e2e.nova_zone_functional
"""

from __future__ import annotations

import fixtures
import openstack.connection
import openstack.proxy
from keystoneauth1 import plugin as ksa_plugin, session as ksa_session
from openstack import service_description

from fluidvim.common.zonetypes import LaunchRequest, ZoneError
from fluidvim.nova_driver.tests import test_functional as nft
from fluidvim.orchestrator.zones.nova import NovaZone

# Nova's base test case stubs openstacksdk (OpenStackSDKFixture: placement proxies become bare
# session clients, Proxy.get_endpoint a mock) because Nova itself does not need it; the adapter
# under test does, so the real ones are put back for its connection (captured before any fixture)
_REAL_MAKE_PROXY = service_description.ServiceDescription._make_proxy
_REAL_GET_ENDPOINT = openstack.proxy.Proxy.get_endpoint


class _FixtureAuth(ksa_plugin.BaseAuthPlugin):
    """What Nova's and placement's test stubs accept instead of Keystone: admin headers."""

    def __init__(self, endpoints: dict, project_id: str):
        super().__init__()
        self.endpoints = endpoints
        self.headers = {"X-Auth-Token": f"admin:{project_id}", "X-Auth-User": "admin",
                        "X-Auth-Project-Id": project_id, "X-Roles": "reader,member,admin"}

    def get_headers(self, session, **kwargs):
        return dict(self.headers)

    def get_endpoint(self, session, service_type=None, **kwargs):
        return self.endpoints.get(service_type)

    def get_project_id(self, session, **kwargs):
        return self.headers["X-Auth-Project-Id"]


def sdk_connection(test) -> openstack.connection.Connection:
    """An openstacksdk connection to a Nova functional test's API and placement fixtures (the
    real proxies put back for the test's duration)."""
    test.useFixture(fixtures.MonkeyPatch(
        "openstack.service_description.ServiceDescription._make_proxy", _REAL_MAKE_PROXY))
    test.useFixture(fixtures.MonkeyPatch("openstack.proxy.Proxy.get_endpoint", _REAL_GET_ENDPOINT))
    endpoints = {"compute": test.api_fixture.base_url,
                 "placement": test.placement.fixture.endpoint}
    sess = ksa_session.Session(auth=_FixtureAuth(endpoints, test.api_fixture.project_id))
    # a plugin without a catalog: keystoneauth discovers versions only at an endpoint override
    return openstack.connection.Connection(
        session=sess, compute_endpoint_override=endpoints["compute"],
        placement_endpoint_override=endpoints["placement"])


class NovaZoneTest(nft._FluidvimNovaTest):
    slot_capacity = 1024

    def setUp(self):
        super().setUp()
        self.conn = sdk_connection(self)
        self.flavor_id = self._create_flavor(name="vnf.counter", memory_mb=32, vcpu=1, disk=1,
                                             extra_spec={"resources:CUSTOM_VNF_SESSION_SLOT": "256",
                                                         "fluidvim:click_config": nft.CONFIG})
        self.zone = NovaZone("nova-az", self.conn, default_flavor="vnf.counter",
                             default_image=nft.IMAGE_ID, launch_timeout=60)

    def test_hosts_launch_instances_terminate(self):
        hosts = self.zone.hosts()
        self.assertEqual(["host1"], [h.name for h in hosts])
        h = hosts[0]
        self.assertEqual(self.driver.manager.accel, h.env.accel)
        self.assertEqual(("nova", "microvm"), (h.env.launcher, h.env.machine))
        self.assertEqual((1024, 1024), (h.slots_total, h.slots_free))
        self.assertEqual(self.rp_uuid, h.labels["resource_provider"])
        self.assertGreaterEqual(h.labels["cpus"], 1)
        self.assertTrue(self.zone.can_launch_on_demand("fw"))

        inst = self.zone.launch(LaunchRequest(service="fw", click_config=nft.CONFIG, slots=256))
        self.assertEqual(("running", "host1", 256), (inst.status, inst.host, inst.slots_total))
        self.assertGreater(inst.launch_ms, 0)
        print(f"\nnova zone (functional fixtures): server create -> ACTIVE {inst.launch_ms:.1f} ms")
        # a real VNF runs with the flavor's configuration and slots
        rec = self.driver.manager.get(inst.id)
        self.assertIn("fn :: Counter", rec.config)
        self.assertEqual(256, self.driver.manager.stats(inst.id)["slots"]["total"])
        # placement accounts for the slots, and the zone reads them back
        h = self.zone.hosts()[0]
        self.assertEqual((1024, 768), (h.slots_total, h.slots_free))
        self.assertGreater(h.cpu_util, 0.0)
        mine = [i for i in self.zone.instances() if i.id == inst.id]
        self.assertEqual(1, len(mine))
        self.assertEqual(("fw", "running", 256), (mine[0].service, mine[0].status, mine[0].slots_total))
        self.assertEqual(inst.launch_ms, self.zone.launch_times_ms("fw")[0])

        self.zone.terminate(inst.id)
        self.assertEqual([], [i for i in self.zone.instances() if i.id == inst.id])
        self.assertEqual([], self.driver.manager.store.list())
        self.assertEqual(1024, self.zone.hosts()[0].slots_free)
        self.zone.terminate(inst.id)                              # idempotent

    def test_instance_actions(self):
        """pause/unpause/reboot/rebuild through Nova's server actions reach the VNF (the
        compute driver's pause, SOFT reboot, rebuild) and the zone reports the status."""
        from fluidvim.common import zonetypes
        inst = self.zone.launch(LaunchRequest(service="fw", click_config=nft.CONFIG, slots=256))
        mgr = self.driver.manager

        def vnf():
            (rec,) = mgr.store.list()
            return rec

        def listed():
            return {i.id: i.status for i in self.zone.instances()}[inst.id]

        self.assertEqual("paused", self.zone.instance_action(inst.id, zonetypes.PAUSE))
        self.assertEqual(("paused", "paused"), (vnf().status, listed()))
        self.assertEqual("paused", self.zone.instance_action(inst.id, zonetypes.PAUSE))
        self.assertEqual("running", self.zone.instance_action(inst.id, zonetypes.UNPAUSE))
        self.assertEqual(("running", "running"), (vnf().status, listed()))
        before = vnf()
        self.assertEqual("running", self.zone.instance_action(inst.id, zonetypes.REBOOT))
        self.assertEqual((before.id, before.pid), (vnf().id, vnf().pid))      # soft: same VNF
        self.assertEqual("running", self.zone.instance_action(inst.id, zonetypes.REBUILD))
        self.assertEqual("running", vnf().status)
        self.assertIn("fn :: Counter", vnf().config)
        with self.assertRaises(ZoneError):
            self.zone.instance_action(inst.id, "explode")
        self.zone.terminate(inst.id)
        self.assertEqual([], mgr.store.list())

    def test_own_click_config_and_stats(self):
        """A request's Click configuration other than the flavor's goes as user_data and the VNF
        runs it; the zone's stats() is the VNF's stats reply, read through the server's
        diagnostics (what a load probe with a generator VNF reads: MACs, element counters)."""
        own = "FromDevice(0) -> mine :: Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
        inst = self.zone.launch(LaunchRequest(service="fw", click_config=own, slots=256))
        rec = self.driver.manager.get(inst.id)
        self.assertEqual(own, rec.config)
        st = self.zone.stats(inst.id)
        self.assertEqual(self.driver.manager.stats(inst.id)["nics"][0]["mac"], st["nics"][0]["mac"])
        self.assertEqual(["mine"], [e["name"] for e in st["elements"] if e["class"] == "Counter"])
        self.assertEqual(256, st["slots"]["total"])
        self.zone.terminate(inst.id)
        with self.assertRaisesRegex(ZoneError, f"diagnostics of server {inst.id} failed: NotFound"):
            self.zone.stats(inst.id)

    def test_refusals_leave_nothing(self):
        with self.assertRaisesRegex(ZoneError, "slots: .*256.*resources:CUSTOM_VNF_SESSION_SLOT=9"):
            self.zone.launch(LaunchRequest(service="fw", click_config="", slots=9))
        with self.assertRaisesRegex(ZoneError, "flavor 'nope' of service 'x' does not exist"):
            NovaZone("z", self.conn, default_flavor="nope", default_image=nft.IMAGE_ID).launch(
                LaunchRequest(service="x", click_config=""))
        with self.assertRaisesRegex(ZoneError, "cannot use cloud 'no-such-cloud': .*clouds.yaml"):
            NovaZone.from_cloud("z", cloud="no-such-cloud")
        with self.assertRaisesRegex(ZoneError, "aggregate 'agg9' does not exist"):
            NovaZone("z", self.conn, aggregate="agg9").hosts()
        with self.assertRaisesRegex(ZoneError, "availability zone 'az9' does not exist"):
            NovaZone("z", self.conn, availability_zone="az9").hosts()
        # more slots than the host has: Nova's scheduler says NoValidHost, the server is deleted
        big = self._create_flavor(name="vnf.big", memory_mb=32, vcpu=1, disk=1,
                                  extra_spec={"resources:CUSTOM_VNF_SESSION_SLOT": "4096"})
        z = NovaZone("z", self.conn, flavors={"big": big}, default_image=nft.IMAGE_ID,
                     launch_timeout=60)
        with self.assertRaisesRegex(ZoneError, "went to ERROR: .*(No valid host|NoValidHost)"):
            z.launch(LaunchRequest(service="big", click_config=""))
        self.assertEqual([], [s for s in self.conn.compute.servers() if s.name.startswith("fluidvim-")])
        self.assertEqual([], self.driver.manager.store.list())

    def test_aggregate_scope(self):
        agg = self.conn.compute.create_aggregate(name="fluidvim-agg")
        self.conn.compute.set_aggregate_metadata(agg, {"fluidvim_power_system_id": "spec0120"})
        z = NovaZone("z", self.conn, aggregate="fluidvim-agg")
        self.assertEqual([], z.hosts())                           # no member yet
        self.conn.compute.add_host_to_aggregate(agg, "host1")
        hosts = z.hosts()
        self.assertEqual(["host1"], [h.name for h in hosts])
        self.assertEqual("spec0120", hosts[0].power_system_id)
        # an availability zone is an aggregate with availability_zone set
        az = self.conn.compute.create_aggregate(name="fluidvim-az", availability_zone="az-fv")
        zaz = NovaZone("z-az", self.conn, availability_zone="az-fv", default_flavor="vnf.counter",
                       default_image=nft.IMAGE_ID, launch_timeout=60)
        self.assertEqual([], zaz.hosts())
        self.conn.compute.add_host_to_aggregate(az, "host1")
        self.assertEqual(["host1"], [h.name for h in zaz.hosts()])
        inst = zaz.launch(LaunchRequest(service="fw", click_config=""))
        server = self.conn.compute.get_server(inst.id)
        self.assertEqual("az-fv", server.availability_zone)
        self.assertEqual([inst.id], [i.id for i in zaz.instances()])
        zaz.terminate(inst.id)
        self.assertEqual([], zaz.instances())
