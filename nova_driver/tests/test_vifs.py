# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Neutron-style VIFs on the real launch core: taps named after ``devname`` plugged into a real
bridge, ``tap`` VIFs, and waiting for ``network-vif-plugged`` with ``[DEFAULT]
vif_plugging_timeout`` / ``vif_plugging_is_fatal``. Needs root.

The compute manager's side of the event wait (Neutron → nova-api → RPC → compute) cannot run here
without Neutron, so :class:`EventVirtAPI` plays it: it records what the driver waits for and then
delivers the event, times out, or reports Neutron's failure, the three outcomes nova's
``ComputeVirtAPI.wait_for_instance_event`` has.

    .venv/bin/python -m testtools.run fluidvim.nova_driver.tests.test_vifs
"""

import contextlib
import subprocess
import uuid

from nova import exception
from nova.compute import power_state
from nova.network import model as network_model
from nova.virt import fake as fake_virt

from fluidvim.nova_driver import driver as fdriver, vifs as vifmod
from fluidvim.nova_driver.tests import test_driver
from fluidvim.vnf import netdev

# Neutron's devnames are "tap" + the port id's first 11 characters; on this shared machine the
# tests use this project's "fvn" prefix in the same shape (nova never creates the devices itself)
DEVNAME_PREFIX = "fvn"


class EventVirtAPI(fake_virt.FakeVirtAPI):
    """wait_for_instance_event as the compute manager runs it, with a chosen outcome."""

    def __init__(self):
        super().__init__()
        self.waits = []           # (instance uuid, events, timeout)
        self.outcome = "plugged"  # or "timeout" or "failed"
        self.taps_during_wait = []

    @contextlib.contextmanager
    def wait_for_instance_event(self, instance, event_names, timeout=300, error_callback=None):
        self.waits.append((instance.uuid, list(event_names), timeout))
        yield
        # the body (the launch) ran: an agent would now see the taps and Neutron send events
        self.taps_during_wait = sorted(netdev.list_taps(prefix=DEVNAME_PREFIX))
        if not event_names:
            return
        if self.outcome == "timeout":
            raise exception.InstanceEventTimeout()
        if self.outcome == "failed":
            name, tag = event_names[0]
            error_callback(f"{name}-{tag}", instance)


class NeutronVIFTestCase(test_driver.DriverTestBase):
    """The driver fixture of test_driver (real launch core, fake Glance, leak checks)."""

    def setUp(self):
        super().setUp()
        self.virtapi = EventVirtAPI()
        self.driver.virtapi = self.virtapi
        self.bridge = "fvnv" + uuid.uuid4().hex[:6]
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True)
        self.addCleanup(subprocess.run, ["ip", "link", "del", self.bridge], check=False)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True)

    def _vif(self, vtype="bridge", active=False, devname=True, port=None):
        port = port or str(uuid.uuid4())
        return network_model.VIF(
            id=port, address="fa:16:3e:%02x:%02x:%02x" % tuple(uuid.uuid4().bytes[:3]),
            type=vtype, active=active,
            devname=(DEVNAME_PREFIX + port)[:network_model.NIC_NAME_LEN] if devname else None,
            network=network_model.Network(id="net", bridge=self.bridge))

    def test_devname_tap_on_bridge_and_plug_event(self):
        vif = self._vif()
        inst = self._instance()
        self._spawn(inst, network_info=network_model.NetworkInfo([vif]))
        rec = self.driver.manager.get(inst.uuid)
        self.assertEqual([vif["devname"]], [n.tap for n in rec.spec.nics])
        self.assertEqual(self.bridge, netdev.master_of(vif["devname"]))
        self.assertEqual(vif["address"], rec.spec.nics[0].mac)
        # waited for exactly this port's plug event, with nova's timeout; the tap existed by then
        self.assertEqual([(inst.uuid, [("network-vif-plugged", vif["id"])],
                           fdriver.CONF.vif_plugging_timeout)], self.virtapi.waits)
        self.assertIn(vif["devname"], self.virtapi.taps_during_wait)
        self.assertIn("vif_wait", inst.system_metadata["fluidvim_phases_ms"])
        self.assertEqual("cold", inst.system_metadata["fluidvim_launch_kind"])
        self.assertEqual(power_state.RUNNING, self.driver.get_info(inst).state)
        self.driver.destroy(self.ctx, inst, [vif])
        self.assertFalse(netdev.exists(vif["devname"]))

    def test_active_vif_and_zero_timeout_do_not_wait(self):
        inst = self._instance()
        self._spawn(inst, network_info=network_model.NetworkInfo([self._vif(active=True)]))
        self.assertEqual([], self.virtapi.waits[0][1])
        self.flags(vif_plugging_timeout=0)
        inst2 = self._instance()
        self._spawn(inst2, network_info=network_model.NetworkInfo([self._vif(active=False)]))
        self.assertEqual([], self.virtapi.waits[1][1])

    def test_plug_timeout_fatal_leaves_nothing(self):
        self.virtapi.outcome = "timeout"
        vif = self._vif()
        inst = self._instance()
        self.assertRaises(exception.VirtualInterfaceCreateException, self._spawn, inst,
                          network_info=network_model.NetworkInfo([vif]))
        self.assertEqual([], self.driver.manager.store.list())
        self.assertEqual([], self._existing([vif["devname"]]))

    def test_plug_timeout_not_fatal_continues(self):
        self.flags(vif_plugging_is_fatal=False)
        self.virtapi.outcome = "timeout"
        inst = self._instance()
        self._spawn(inst, network_info=network_model.NetworkInfo([self._vif()]))
        self.assertEqual(power_state.RUNNING, self.driver.get_info(inst).state)

    def test_neutron_reported_failure(self):
        self.virtapi.outcome = "failed"
        vif = self._vif()
        inst = self._instance()
        self.assertRaises(exception.VirtualInterfaceCreateException, self._spawn, inst,
                          network_info=network_model.NetworkInfo([vif]))
        self.assertEqual([], self.driver.manager.store.list())
        self.assertEqual([], self._existing([vif["devname"]]))

    def test_tap_vif_is_named_and_unplugged(self):
        vif = self._vif(vtype="tap", active=True)
        inst = self._instance()
        self._spawn(inst, network_info=network_model.NetworkInfo([vif]))
        self.assertTrue(netdev.exists(vif["devname"]))
        self.assertIsNone(netdev.master_of(vif["devname"]))

    def test_bad_devnames_are_refused_before_anything_starts(self):
        inst = self._instance()
        for vifs, what in [([self._vif(vtype="tap", devname=False)], "without a devname"),
                           ([self._vif(port="p" * 20)], "not a valid interface name")]:
            if what == "not a valid interface name":
                vifs[0]["devname"] = "tap" + "x" * 13          # 16 characters
            exc = self.assertRaises(exception.VirtualInterfaceCreateException, self._spawn,
                                    inst, network_info=network_model.NetworkInfo(vifs))
            self.assertIn(what, str(exc))
        same = self._vif()
        twin = self._vif()
        twin["devname"] = same["devname"]
        exc = self.assertRaises(exception.VirtualInterfaceCreateException, self._spawn, inst,
                                network_info=network_model.NetworkInfo([same, twin]))
        self.assertIn("same devname", str(exc))
        self.assertEqual([], self.driver.manager.store.list())

    def test_plug_events_rules(self):
        up, down = self._vif(active=True), self._vif(active=False)
        remote = self._vif(active=False)
        remote["vnic_type"] = network_model.VNIC_TYPE_REMOTE_MANAGED
        self.assertEqual([("network-vif-plugged", down["id"])],
                         vifmod.plug_events([up, down, remote]))

    def test_interface_hotplug_is_not_supported(self):
        inst = self._instance()
        exc = self.assertRaises(NotImplementedError, self.driver.attach_interface, self.ctx,
                                inst, None, self._vif())
        self.assertIn("hotplug", str(exc))
        self.assertFalse(self.driver.capabilities["supports_attach_interface"])

