# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Neutron-style VIFs on the real launch core: taps named after ``devname`` plugged into a real
bridge, ``tap`` VIFs, and waiting for ``network-vif-plugged`` with ``[DEFAULT]
vif_plugging_timeout`` / ``vif_plugging_is_fatal``. Needs root.

The driver waits through Nova's own ``ComputeVirtAPI.wait_for_instance_event`` and
``InstanceEvents`` (what nova-compute uses). Neutron cannot run here, so :class:`FakeNeutronAgent`
plays its part as a thread: like the Linux-bridge agent it waits for the port's tap (its devname)
to appear in the bridge, then delivers the external event the way nova-compute's
``external_instance_event`` does (``pop_instance_event(...).set(event)``, ``send`` on nova 31),
``completed`` or ``failed``; or it stays silent (timeout).

    .venv/bin/python -m testtools.run fluidvim.nova_driver.tests.test_vifs
"""

import subprocess
import threading
import time
import types
import uuid

from nova import exception, objects
from nova.compute import manager as compute_manager, power_state
from nova.network import model as network_model

from fluidvim.nova_driver import compat, driver as fdriver, vifs as vifmod
from fluidvim.nova_driver.tests import test_driver
from fluidvim.vnf import netdev

# Neutron's devnames are "tap" + the port id's first 11 characters; on this shared machine the
# tests use this project's "fvn" prefix in the same shape (nova never creates the devices itself)
DEVNAME_PREFIX = "fvn"


class FakeNeutronAgent(threading.Thread):
    """Sees the port's tap in its bridge, then sends network-vif-plugged (or a failure)."""

    def __init__(self, events, instance, vif, bridge, status="completed", timeout=30.0):
        super().__init__(daemon=True)
        self.events, self.instance, self.vif = events, instance, vif
        self.bridge, self.status, self.timeout = bridge, status, timeout
        self.saw_tap_at = None

    def run(self):
        deadline = time.monotonic() + self.timeout
        dev = self.vif["devname"]
        while time.monotonic() < deadline:
            if netdev.exists(dev) and netdev.master_of(dev) == self.bridge:
                self.saw_tap_at = time.monotonic()
                break
            time.sleep(0.005)
        else:
            return
        event = objects.InstanceExternalEvent(name="network-vif-plugged", tag=self.vif["id"],
                                              status=self.status,
                                              instance_uuid=self.instance.uuid)
        while time.monotonic() < deadline:          # the waiter registers before the launch
            waiter = self.events.pop_instance_event(self.instance, event)
            if waiter:
                getattr(waiter, compat.EVENT_DELIVER)(event)    # set (send on nova 31)
                return
            time.sleep(0.005)


class RecordingComputeVirtAPI(compute_manager.ComputeVirtAPI):
    """Nova's ComputeVirtAPI, remembering what it was asked to wait for."""

    def __init__(self, compute):
        super().__init__(compute)
        self.waits = []

    def wait_for_instance_event(self, instance, event_names, error_callback=None, **limit):
        # the time limit under this release's keyword (nova_driver/compat.py)
        self.waits.append((instance.uuid, list(event_names), limit[compat.WAIT_TIMEOUT_KW]))
        return super().wait_for_instance_event(instance, event_names,
                                               error_callback=error_callback, **limit)


class NeutronVIFTestCase(test_driver.DriverTestBase):
    """The driver fixture of test_driver (real launch core, fake Glance, leak checks)."""

    def setUp(self):
        super().setUp()
        self.events = compute_manager.InstanceEvents()
        compute = types.SimpleNamespace(instance_events=self.events, reportclient=None)
        self.virtapi = RecordingComputeVirtAPI(compute)
        self.driver.virtapi = self.virtapi
        self.bridge = "fvnv" + uuid.uuid4().hex[:6]
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True)
        self.addCleanup(subprocess.run, ["ip", "link", "del", self.bridge], check=False)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True)

    def _agent(self, inst, vif, status="completed"):
        agent = FakeNeutronAgent(self.events, inst, vif, self.bridge, status)
        agent.start()
        self.addCleanup(agent.join, 35)
        return agent

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
        agent = self._agent(inst, vif)
        self._spawn(inst, network_info=network_model.NetworkInfo([vif]))
        rec = self.driver.manager.get(inst.uuid)
        self.assertEqual([vif["devname"]], [n.tap for n in rec.spec.nics])
        self.assertEqual(self.bridge, netdev.master_of(vif["devname"]))
        self.assertEqual(vif["address"], rec.spec.nics[0].mac)
        # waited for exactly this port's plug event, with nova's timeout, and got it from the
        # agent, which had found the tap (named after devname) in the bridge
        self.assertEqual([(inst.uuid, [("network-vif-plugged", vif["id"])],
                           fdriver.CONF.vif_plugging_timeout)], self.virtapi.waits)
        self.assertIsNotNone(agent.saw_tap_at)
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
        self.flags(vif_plugging_timeout=1)          # and no agent answers
        vif = self._vif()
        inst = self._instance()
        self.assertRaises(exception.VirtualInterfaceCreateException, self._spawn, inst,
                          network_info=network_model.NetworkInfo([vif]))
        self.assertEqual([], self.driver.manager.store.list())
        self.assertEqual([], self._existing([vif["devname"]]))

    def test_plug_timeout_not_fatal_continues(self):
        self.flags(vif_plugging_is_fatal=False, vif_plugging_timeout=1)
        inst = self._instance()
        self._spawn(inst, network_info=network_model.NetworkInfo([self._vif()]))
        self.assertEqual(power_state.RUNNING, self.driver.get_info(inst).state)

    def test_neutron_reported_failure(self):
        vif = self._vif()
        inst = self._instance()
        self._agent(inst, vif, status="failed")
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

