# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Functional test with Nova's own fixtures: real API, conductor, scheduler, placement and
nova-compute running UnikernelDriver (loaded by name as ``fluidvim.UnikernelDriver``), which boots
a real VNF under QEMU. Glance and Neutron are Nova's fixtures. Needs root. Covers create/stats/
delete, CUSTOM_VNF_SESSION_SLOT exhaustion (NoValidHost), a nova-compute restart that re-attaches
to the running VNF, and a warm-pool launch through Nova.

    .venv/bin/python -m testtools.run fluidvim.nova_driver.tests.test_functional
"""

import base64
import os
import shutil
import tempfile
import time
import uuid
import warnings
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

import nova.conf
import sqlalchemy as sa
from nova.tests.functional import integrated_helpers
from sqlalchemy import exc as sqla_exc

from fluidvim.nova_driver import driver as fdriver  # noqa: F401 - registers [vnf], [fluidvim]
from fluidvim.vnf import conf as vnfconf, netdev, spec as specmod

CONF = nova.conf.CONF
KERNEL = vnfconf.default_kernel()
IMAGE_ID = "3d3f5a52-7e0b-4f5e-9a3c-5b1d2c3e4f50"
CONFIG = "FromDevice(0) -> fn :: Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n"


class _FluidvimNovaTest(integrated_helpers.ProviderUsageBaseTestCase):
    """Nova with one compute, host1, running UnikernelDriver; the image is the VNF kernel."""

    compute_driver = "fluidvim.UnikernelDriver"
    slot_capacity = 4096          # [fluidvim] session_slot_capacity of host1
    pool_size = 0                 # [vnf] pool_size of host1

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root (QEMU with taps)")
        if not os.path.exists(KERNEL):
            self.skipTest("the VNF kernel is not built: make -C unikernel")
        super().setUp()
        # Nova 34's WarningsFixture makes SQLAlchemy deprecations raised from nova errors; with
        # SQLAlchemy 2.1 nova's own noload() (burying a NoValidHost instance in cell0) trips it
        warnings.filterwarnings("ignore", message=r"The noload\(\) option is deprecated",
                                category=sqla_exc.SADeprecationWarning)
        self.tmp = tempfile.mkdtemp(prefix="fluidvim-nova-func-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        run_dir = f"/run/fluidvim-nova-func-{uuid.uuid4().hex[:8]}"
        self.addCleanup(shutil.rmtree, run_dir, ignore_errors=True)
        self.flags(state_dir=os.path.join(self.tmp, "state"), run_dir=run_dir, group="vnf")
        self.flags(image_cache_dir=os.path.join(self.tmp, "images"),
                   session_slot_capacity=self.slot_capacity, group="fluidvim")
        self.flags(pool_size=self.pool_size, group="vnf")
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
        # Nova's fixtures do not delete servers: stop every VNF (and pool shell) we started,
        # before the service fixtures go (cleanups run last-in, first-out)
        self.addCleanup(lambda: self.compute.manager.driver.manager.destroy_all())


class UnikernelServerTest(_FluidvimNovaTest):
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


def _sysmeta(server_id):
    from nova import context as nova_context
    from nova.db.main import api as db
    return db.instance_system_metadata_get(nova_context.get_admin_context(), server_id)


class UserDataTest(_FluidvimNovaTest):
    """The server's user_data is the VNF's day-0 Click configuration (over the image's); one the
    VNF rejects puts the server in ERROR with a fault naming line and column, and leaves no VNF
    and no tap."""

    def _create(self, flavor_id, user_data, expected_state):
        body = self._build_server(image_uuid=IMAGE_ID, flavor_id=flavor_id, networks="none")
        body["user_data"] = base64.b64encode(user_data.encode()).decode()
        server = self.api.post_server({"server": body})
        return self._wait_for_state_change(server, expected_state)

    def test_user_data_config_and_its_rejection(self):
        flavor_id = self._create_flavor(memory_mb=32, vcpu=1, disk=1)
        day0 = ("#click-config\n// day 0 from the orchestrator\n"
                "FromDevice(0) -> ud :: Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n")
        multi = MIMEMultipart()
        multi.attach(MIMEText("#cloud-config\nruncmd: [ls]\n", "cloud-config"))
        multi.attach(MIMEText(day0, "plain"))
        server = self._create(flavor_id, multi.as_string(), "ACTIVE")
        rec = self.driver.manager.get(server["id"])
        self.assertIn("ud :: Counter", rec.config)                 # not the image's fn :: Counter
        self.assertNotIn("fn :: Counter", rec.config)
        self.assertTrue(self.driver.manager.stats(server["id"])["configured"])
        self._delete_server(server)

        bad = "// day 0\nFromDevice(0) -> ToDevice(1);\nFromDevice(1) -> Countr -> ToDevice(0);\n"
        server = self._create(flavor_id, bad, "ERROR")
        fault = server["fault"]["message"]
        self.assertIn(f"Build of instance {server['id']} aborted: the VNF rejected the Click "
                      "configuration from user_data at line 3, column 18: unknown element class "
                      "'Countr'", fault)
        self.assertIsNone(server["OS-EXT-SRV-ATTR:host"])         # not rescheduled: aborted
        # nothing left: no VNF record, no QEMU, and no tap of the VNF whose launch failed
        self.assertEqual([], self.driver.manager.store.list())
        with self.driver.manager.store.engine.connect() as conn:
            failed = list(conn.execute(sa.text("SELECT vnf_id FROM launches WHERE NOT ok")).scalars())
        self.assertEqual(1, len(failed))
        taps = [specmod.tap_for(failed[0], i) for i in range(CONF.fluidvim.default_nics)]
        self.assertEqual([], sorted(set(taps) & set(netdev.list_taps())))
        usages = self._get_provider_usages(self.rp_uuid)
        self.assertEqual(0, usages["MEMORY_MB"])


class SlotExhaustionTest(_FluidvimNovaTest):
    """CUSTOM_VNF_SESSION_SLOT is a real Placement inventory: when it is used up, NoValidHost."""
    slot_capacity = 2


    def test_third_server_no_valid_host_until_one_is_deleted(self):
        self.assertEqual(2, self._get_provider_inventory(self.rp_uuid)
                         ["CUSTOM_VNF_SESSION_SLOT"]["total"])
        flavor_id = self._create_flavor(memory_mb=32, vcpu=1, disk=1, extra_spec={
            "resources:CUSTOM_VNF_SESSION_SLOT": "1"})
        servers = [self._create_server(image_uuid=IMAGE_ID, flavor_id=flavor_id,
                                       networks="none", expected_state="ACTIVE")
                   for _ in range(2)]
        self.assertEqual(2, self._get_provider_usages(self.rp_uuid)["CUSTOM_VNF_SESSION_SLOT"])
        self.assertEqual(2, len(self.driver.list_instances()))

        third = self._create_server(image_uuid=IMAGE_ID, flavor_id=flavor_id,
                                    networks="none", expected_state="ERROR")
        self.assertIn("No valid host", third["fault"]["message"])
        self.assertEqual(2, len(self.driver.list_instances()))       # nothing was launched
        self.assertEqual(2, self._get_provider_usages(self.rp_uuid)["CUSTOM_VNF_SESSION_SLOT"])

        self._delete_server(servers[0])
        self.assertEqual(1, self._get_provider_usages(self.rp_uuid)["CUSTOM_VNF_SESSION_SLOT"])
        fourth = self._create_server(image_uuid=IMAGE_ID, flavor_id=flavor_id,
                                     networks="none", expected_state="ACTIVE")
        self.assertEqual(1, self.driver.manager.stats(fourth["id"])["slots"]["total"])
        self.assertEqual(2, self._get_provider_usages(self.rp_uuid)["CUSTOM_VNF_SESSION_SLOT"])
        self.assertEqual(sorted([servers[1]["id"], fourth["id"]]),
                         sorted(self.driver.list_instance_uuids()))


class RestartTest(_FluidvimNovaTest):
    """A nova-compute restart re-attaches to the running VNF instead of relaunching it."""


    def test_server_survives_compute_restart(self):
        flavor_id = self._create_flavor(memory_mb=32, vcpu=1, disk=1)
        server = self._create_server(image_uuid=IMAGE_ID, flavor_id=flavor_id,
                                     networks="none", expected_state="ACTIVE")
        before = self.driver.manager.get(server["id"])
        self.assertEqual(before.id, _sysmeta(server["id"])["fluidvim_vnf_id"])

        # a brand-new ComputeManager and driver: the VNFs live outside nova-compute
        self.compute = self.restart_compute_service(self.compute, keep_hypervisor_state=False)
        new_driver = self.compute.manager.driver
        self.assertIsNot(self.driver, new_driver)
        self.driver = new_driver

        server = self._wait_for_state_change(server, "ACTIVE")
        self.assertEqual(1, server["OS-EXT-STS:power_state"])         # RUNNING
        self.assertEqual([server["id"]], self.driver.list_instance_uuids())
        self.assertEqual([server["OS-EXT-SRV-ATTR:instance_name"]], self.driver.list_instances())
        after = self.driver.manager.get(server["id"])
        self.assertEqual((before.id, before.pid), (after.id, after.pid))   # not relaunched
        self.assertEqual(before.id, _sysmeta(server["id"])["fluidvim_vnf_id"])
        stats = self.driver.manager.stats(server["id"])
        self.assertIn("slots", stats)

        # the periodic power-state sync agrees it is running and changes nothing
        self._run_periodics()
        server = self.api.get_server(server["id"])
        self.assertEqual("ACTIVE", server["status"])
        self.assertEqual(1, server["OS-EXT-STS:power_state"])
        self.assertEqual(before.id, self.driver.manager.get(server["id"]).id)

        self._delete_server(server)
        self.assertEqual([], self.driver.list_instances())


class WarmPoolTest(_FluidvimNovaTest):
    """With [vnf] pool_size = 1 a matching server is a warm launch from a booted shell."""
    pool_size = 1


    def test_spawn_is_warm(self):
        manager = self.driver.manager
        key = manager.pool_key(CONF.vnf.backend, CONF.vnf.memory_mb, 1,
                               CONF.vnf.pool_nics)
        self.assertTrue(manager.wait_pool(key, 1, timeout=60), "the pool did not fill")
        shell = manager.store.list(statuses=("pool",))[0]

        flavor_id = self._create_flavor(memory_mb=CONF.vnf.memory_mb, vcpu=1, disk=1)
        server = self._create_server(image_uuid=IMAGE_ID, flavor_id=flavor_id,
                                     networks="none", expected_state="ACTIVE")
        sysmeta = _sysmeta(server["id"])
        self.assertEqual("warm", sysmeta["fluidvim_launch_kind"])
        self.assertEqual(shell.id, sysmeta["fluidvim_vnf_id"])          # the shell it claimed
        self.assertIn("launch_claim", sysmeta["fluidvim_phases_ms"])
        rec = manager.get(server["id"])
        self.assertIn("fn :: Counter", rec.config)
        self.assertIn("slots", manager.stats(server["id"]))

        # the pool refills behind it; the server's VNF is not counted as a shell
        self.assertTrue(manager.wait_pool(key, 1, timeout=60), "the pool did not refill")
        self.assertEqual([server["id"]], self.driver.list_instance_uuids())
        self._delete_server(server)
        self.assertEqual([], self.driver.list_instances())
