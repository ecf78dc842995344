# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Functional test with Nova's own fixtures: real API, conductor, scheduler, placement and
nova-compute running UnikernelDriver (loaded by name as ``fluidvim.UnikernelDriver``), which boots
a real VNF under QEMU. Glance and Neutron are Nova's fixtures. Needs root.

    /tmp/nova-venv/bin/python -m testtools.run fluidvim.nova_driver.tests.test_functional
"""

import os
import shutil
import tempfile
import time
import uuid

from nova.tests.functional import integrated_helpers

from fluidvim.nova_driver import driver as fdriver  # noqa: F401 - registers [vnf], [fluidvim]
from fluidvim.vnf import conf as vnfconf, netdev

KERNEL = vnfconf.default_kernel()
IMAGE_ID = "3d3f5a52-7e0b-4f5e-9a3c-5b1d2c3e4f50"
CONFIG = "FromDevice(0) -> fn :: Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n"


class UnikernelServerTest(integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = "fluidvim.UnikernelDriver"

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root (QEMU with taps)")
        if not os.path.exists(KERNEL):
            self.skipTest("the VNF kernel is not built: make -C vnf/kernel")
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="fluidvim-nova-func-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        run_dir = f"/run/fluidvim-nova-func-{uuid.uuid4().hex[:8]}"
        self.addCleanup(shutil.rmtree, run_dir, ignore_errors=True)
        self.flags(state_dir=os.path.join(self.tmp, "state"), run_dir=run_dir, group="vnf")
        self.flags(image_cache_dir=os.path.join(self.tmp, "images"),
                   session_slot_capacity=4096, group="fluidvim")
        with open(KERNEL, "rb") as f:
            kernel = f.read()
        self.glance.create(None, {
            "id": IMAGE_ID, "name": "fluidvim-vnf", "disk_format": "aki",
            "container_format": "aki", "size": len(kernel), "min_ram": 0, "min_disk": 0,
            "properties": {"fluidvim_click_config": CONFIG}})
        self.glance._imagedata[IMAGE_ID] = kernel
        self.compute = self._start_compute("host1")
        self.driver = self.compute.manager.driver
        self.rp_uuid = self._get_provider_uuid_by_host("host1")

    def test_create_active_stats_delete_no_leak(self):
        from fluidvim.nova_driver.driver import UnikernelDriver
        self.assertIsInstance(self.driver, UnikernelDriver)

        inv = self._get_provider_inventory(self.rp_uuid)
        self.assertEqual(4096, inv["CUSTOM_VNF_SESSION_SLOT"]["total"])
        traits = self._get_provider_traits(self.rp_uuid)
        self.assertIn("CUSTOM_UNIKERNEL_" + self.driver.manager.accel.upper(), traits)
        self.assertIn("COMPUTE_IMAGE_TYPE_AKI", traits)            # from the capabilities

        flavor_id = self._create_flavor(memory_mb=32, vcpu=1, disk=1, extra_spec={
            "resources:CUSTOM_VNF_SESSION_SLOT": "256"})
        server = self._create_server(image_uuid=IMAGE_ID, flavor_id=flavor_id,
                                     networks="none", expected_state="ACTIVE")
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual(1, server["OS-EXT-STS:power_state"])       # RUNNING

        # the VNF answers stats with the flavor's slots and the image's configuration
        stats = self.driver.manager.stats(server["id"])
        self.assertEqual(256, stats["slots"]["total"])
        rec = self.driver.manager.get(server["id"])
        self.assertIn("fn :: Counter", rec.config)
        taps = [n.tap for n in rec.spec.nics]
        self.assertEqual(2, len(taps))
        self.assertEqual(sorted(taps), sorted(set(taps) & set(netdev.list_taps())))

        # placement accounts for the slots; spawn phases landed in system_metadata
        usages = self._get_provider_usages(self.rp_uuid)
        self.assertEqual(256, usages["CUSTOM_VNF_SESSION_SLOT"])
        self.assertEqual(32, usages["MEMORY_MB"])
        from nova import context as nova_context
        from nova.db.main import api as db
        sysmeta = db.instance_system_metadata_get(nova_context.get_admin_context(), server["id"])
        self.assertEqual(rec.id, sysmeta["fluidvim_vnf_id"])
        self.assertIn("launch_boot", sysmeta["fluidvim_phases_ms"])

        console = self.api.post_server_action(server["id"], {"os-getConsoleOutput": {}})
        self.assertIn("output", console)

        # the periodic task reports fluidvim stats for the weighers
        self._run_periodics()
        hyp = self.admin_api.api_get("/os-hypervisors/detail").body["hypervisors"][0]
        self.assertEqual("fluidvim", hyp.get("hypervisor_type", "fluidvim"))

        self._delete_server(server)
        self.assertEqual([], self.driver.manager.store.list())
        self.assertEqual([], self.driver.list_instances())
        deadline = time.monotonic() + 2
        while set(taps) & set(netdev.list_taps()) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual([], sorted(set(taps) & set(netdev.list_taps())))
        self.assertFalse(os.path.exists(rec.spec.control_socket))
        usages = self._get_provider_usages(self.rp_uuid)
        self.assertEqual(0, usages["CUSTOM_VNF_SESSION_SLOT"])
        self.assertEqual(0, usages["MEMORY_MB"])
