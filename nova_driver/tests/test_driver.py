# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Unit tests of UnikernelDriver in Nova's style, on the real launch core and real QEMU.

Glance is faked (the "image" is unikernel/build/fluidvim-vnf.elf); everything under it is real:
VNFs boot under KVM (TCG when /dev/kvm does not work), with real taps and bridges. Needs root.

    /tmp/nova-venv/bin/python -m testtools.run fluidvim.nova_driver.tests.test_driver
"""

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from unittest import mock

from nova import context as nova_context, exception, objects, test, utils as nova_utils
from nova.compute import power_state, provider_tree
from nova.network import model as network_model
from nova.tests.unit import fake_instance
from nova.virt import event as virtevent, fake as fake_virt

from fluidvim.nova_driver import driver as fdriver, names as fnames
from fluidvim.vnf import conf as vnfconf, netdev, spec as specmod
from fluidvim.vnf.store import StateStore

KERNEL = vnfconf.default_kernel()
IMAGE_ID = "0a5a8c93-4f4e-4d4e-9a43-2a0c3f2b9e11"
BAD_IMAGE_ID = "6f1c2d3e-0000-4000-8000-00000000bad0"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _mime(*parts) -> str:
    """user_data as cloud-init's make-mime (and Heat's MultipartMime) build it."""
    msg = MIMEMultipart()
    for i, (subtype, text) in enumerate(parts):
        part = MIMEText(text, subtype, "utf-8")
        part.add_header("Content-Disposition", "attachment", filename=f"part-{i + 1:03d}")
        msg.attach(part)
    return msg.as_string()


class FakeGlance:
    """Serves the VNF kernel as image IMAGE_ID and a non-ELF blob as BAD_IMAGE_ID."""

    def __init__(self, properties=None):
        with open(KERNEL, "rb") as f:
            self.blobs = {IMAGE_ID: f.read(), BAD_IMAGE_ID: b"MZ not a kernel" * 10}
        self.properties = properties or {}
        self.downloads = 0
        self.gets = 0

    def get(self, context, image_id, include_locations=False, show_deleted=True):
        self.gets += 1
        return self.image(image_id)

    def image(self, image_id):
        """The image as Glance shows it (what Nova's API hands on to the compute)."""
        if image_id not in self.blobs:
            raise exception.ImageNotFound(image_id=image_id)
        data = self.blobs[image_id]
        return {"id": image_id, "disk_format": "aki", "container_format": "aki",
                "size": len(data), "checksum": hashlib.md5(data).hexdigest(),
                "os_hash_algo": "sha512", "os_hash_value": hashlib.sha512(data).hexdigest(),
                "min_ram": 0, "min_disk": 0, "properties": dict(self.properties)}

    def download(self, context, image_id, data=None, dest_path=None, trusted_certs=None):
        self.downloads += 1
        with open(dest_path, "wb") as f:
            f.write(self.blobs[image_id])


class DriverTestBase(test.NoDBTestCase):
    """A UnikernelDriver on the real launch core (private state and run dirs), fake Glance."""

    pool_size = 0           # [vnf] pool_size: init_host starts a warm pool of that many shells

    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest("needs root (QEMU with taps, bridges)")
        if not os.path.exists(KERNEL):
            self.skipTest(f"the VNF kernel is not built: make -C unikernel ({KERNEL})")
        self.tmp = tempfile.mkdtemp(prefix="fluidvim-nova-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.run_dir = f"/run/fluidvim-nova-test-{uuid.uuid4().hex[:8]}"
        self.flags(state_dir=os.path.join(self.tmp, "state"), run_dir=self.run_dir,
                   pool_size=self.pool_size, group="vnf")
        self.flags(image_cache_dir=os.path.join(self.tmp, "images"),
                   session_slot_capacity=4096, group="fluidvim")
        self.glance = FakeGlance()
        self.useFixture(test.fixtures.MockPatchObject(fdriver, "IMAGE_API", self.glance))
        self.ctx = nova_context.get_admin_context()
        self.driver = fdriver.UnikernelDriver(fake_virt.FakeVirtAPI())
        self.events = []
        self.taps = set()
        self.driver.register_event_listener(self.events.append)
        self.driver.init_host("compute1")
        # no nova-compute here to run the start-up step (on nova 34 it calls
        # process_instances_at_startup; before, the driver does on its first resource update,
        # which reads Nova's database: compat.STARTUP_HOOK); the functional tests run it
        self.driver._startup_done = True
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        mgr = self.driver.manager
        mgr.stop_pool()             # no shell may boot while the store is being emptied
        mine = set(self.taps)
        for rec in mgr.store.list():
            mine.update(n.tap for n in rec.spec.nics)
            try:
                mgr.destroy(rec.id)
            except Exception:  # noqa: BLE001
                pass
        self.driver.cleanup_host("compute1")
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.assertEqual([], self._existing(mine), "taps leaked")

    def _cached_images(self):
        """The image cache's files, without the firmware copy it keeps (imagecache.py)."""
        return sorted(f for f in os.listdir(os.path.join(self.tmp, "images"))
                      if f != specmod.PVH_FIRMWARE)

    @staticmethod
    def _existing(taps, wait=2.0):
        # other processes (CI) make fv* taps too: only look at the ones of this test's VNFs
        deadline = time.monotonic() + wait
        while True:
            left = sorted(set(taps) & set(netdev.list_taps()))
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.02)

    def _instance(self, extra_specs=None, memory_mb=32, vcpus=1, user_data=None):
        flavor = objects.Flavor(id=1, name="vnf.small", memory_mb=memory_mb, vcpus=vcpus,
                                root_gb=0, ephemeral_gb=0, flavorid="1", swap=0,
                                rxtx_factor=1.0, vcpu_weight=1, disabled=False,
                                is_public=True, extra_specs=extra_specs or {}, projects=[])
        inst = fake_instance.fake_instance_obj(self.ctx, uuid=str(uuid.uuid4()),
                                               image_ref=IMAGE_ID, flavor=flavor)
        inst.system_metadata = {}
        inst.user_data = user_data
        return inst

    def _spawn(self, inst, network_info=None, image_id=IMAGE_ID):
        meta = objects.ImageMeta.from_dict({"id": image_id, "disk_format": "aki"})
        self.driver.spawn(self.ctx, inst, meta, [], "", {}, network_info=network_info)
        self.taps.update(n.tap for n in self.driver.manager.get(inst.uuid).spec.nics)

    def _stats(self, inst):
        return self.driver.manager.stats(inst.uuid)


class UnikernelDriverTestCase(DriverTestBase):
    def test_capabilities_and_loading(self):
        caps = self.driver.capabilities
        self.assertTrue(caps["supports_image_type_aki"])
        self.assertTrue(caps["supports_image_type_raw"])
        self.assertFalse(caps["supports_image_type_qcow2"])
        self.assertFalse(caps["supports_attach_interface"])
        from nova.virt import driver as nova_driver
        loaded = nova_driver.load_compute_driver(fake_virt.FakeVirtAPI(),
                                                 "fluidvim.UnikernelDriver")
        self.assertIsInstance(loaded, fdriver.UnikernelDriver)

    def test_spawn_nic_none_destroy(self):
        inst = self._instance({"resources:CUSTOM_VNF_SESSION_SLOT": "256"})
        self._spawn(inst)
        self.assertEqual(power_state.RUNNING, self.driver.get_info(inst).state)
        # names like the libvirt driver's domains; uuids for the compute manager
        self.assertEqual([inst.name], self.driver.list_instances())
        self.assertEqual([inst.uuid], self.driver.list_instance_uuids())
        stats = self._stats(inst)
        self.assertEqual(256, stats["slots"]["total"])
        rec = self.driver.manager.get(inst.uuid)
        self.assertEqual(2, len(rec.spec.nics))               # [fluidvim] default_nics, unplugged
        self.assertEqual(32, rec.spec.memory_mb)
        self.assertTrue(rec.spec.kernel.startswith(os.path.join(self.tmp, "images", IMAGE_ID)))
        sm = inst.system_metadata
        self.assertEqual(rec.id, sm["fluidvim_vnf_id"])
        self.assertEqual("cold", sm["fluidvim_launch_kind"])
        phases = fdriver.json.loads(sm["fluidvim_phases_ms"])
        for key in ("image", "spec", "stale", "launch_spec", "launch_spawn", "launch_boot",
                    "guest_boot", "launch_configure", "launch_record", "total"):
            self.assertIn(key, phases)
        self.assertLessEqual(len(sm["fluidvim_phases_ms"]), 255)
        self.assertIn("fluidvim", self.driver.get_console_output(self.ctx, inst).lower())

        self.driver.destroy(self.ctx, inst, None)
        self.assertRaises(exception.InstanceNotFound, self.driver.get_info, inst)
        self.assertEqual([], self.driver.list_instances())
        self.assertEqual([], self.driver.manager.store.list())
        self.assertFalse(os.path.exists(rec.spec.control_socket))
        self.driver.destroy(self.ctx, inst, None)            # idempotent

    def test_image_downloaded_once_and_verified(self):
        a, b = self._instance(), self._instance()
        self._spawn(a)
        self._spawn(b)
        self.assertEqual(1, self.glance.downloads)
        self.assertEqual(2, len(self.driver.list_instances()))
        kernel = self.driver.manager.get(a.uuid).spec.kernel
        self.assertEqual(kernel, self.driver.manager.get(b.uuid).spec.kernel)
        # the kernel and its cache index entry, nothing else (beside the firmware copy)
        self.assertEqual(sorted([os.path.basename(kernel), f"{IMAGE_ID}.json"]),
                         self._cached_images())

    def test_non_elf_image_is_refused(self):
        inst = self._instance()
        self.assertRaises(exception.ImageUnacceptable, self._spawn, inst,
                          image_id=BAD_IMAGE_ID)
        self.assertEqual([], self.driver.manager.store.list())
        self.assertEqual([], self._cached_images())

    def test_click_config_from_image_and_flavor(self):
        self.glance.properties = {"fluidvim_click_config":
                                  "FromDevice(0) -> img :: Counter -> ToDevice(1);",
                                  "fluidvim_session_slots": "64"}
        inst = self._instance()
        self._spawn(inst)
        rec = self.driver.manager.get(inst.uuid)
        self.assertIn("img :: Counter", rec.config)
        self.assertEqual(64, self._stats(inst)["slots"]["total"])
        inst2 = self._instance({"fluidvim:click_config":
                                "FromDevice(0) -> flv :: Counter -> ToDevice(1);",
                                "fluidvim:session_slots": "32", "fluidvim:nics": "3"})
        self._spawn(inst2)
        rec2 = self.driver.manager.get(inst2.uuid)
        self.assertIn("flv :: Counter", rec2.config)
        self.assertEqual(3, len(rec2.spec.nics))
        self.assertEqual(32, self._stats(inst2)["slots"]["total"])

    def test_rejected_click_config_aborts_build_and_leaves_nothing(self):
        inst = self._instance({"fluidvim:click_config": "FromDevice(0) -> Countr -> Discard;"})
        exc = self.assertRaises(exception.BuildAbortException, self._spawn, inst)
        self.assertIn("line 1", str(exc))
        self.assertEqual([], self.driver.manager.store.list())
        self.assertEqual([], self.driver.list_instances())
        self.assertEqual({}, self.driver.names.all())       # the name went with the launch

    def test_user_data_wins_over_flavor_and_image(self):
        self.glance.properties = {"fluidvim_click_config":
                                  "FromDevice(0) -> img :: Counter -> ToDevice(1);"}
        flavor = {"fluidvim:click_config": "FromDevice(0) -> flv :: Counter -> ToDevice(1);"}
        plain = "FromDevice(0) -> ud :: Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n"
        inst = self._instance(flavor, user_data=_b64(plain))
        self._spawn(inst)
        self.assertEqual(plain, self.driver.manager.get(inst.uuid).config)
        self.assertIn("configured", self._stats(inst))

        # a MIME multi-part (Heat, Tacker, cloud-init's make-mime): the #click-config part
        multi = _mime(("cloud-config", "#cloud-config\npackages: [nginx]\n"),
                      ("x-shellscript", "#!/bin/sh\necho day0\n"),
                      ("plain", "#click-config\nFromDevice(0) -> part :: Counter -> ToDevice(1);\n"))
        inst2 = self._instance(flavor, user_data=_b64(multi))
        self._spawn(inst2)
        self.assertEqual("//click-config\nFromDevice(0) -> part :: Counter -> ToDevice(1);\n",
                         self.driver.manager.get(inst2.uuid).config)

        # user_data without a Click configuration (cloud-config only): the flavor's, then image's
        inst3 = self._instance(flavor, user_data=_b64("#cloud-config\nruncmd: [ls]\n"))
        self._spawn(inst3)
        self.assertIn("flv :: Counter", self.driver.manager.get(inst3.uuid).config)
        inst4 = self._instance(user_data=_b64("#cloud-config\nruncmd: [ls]\n"))
        self._spawn(inst4)
        self.assertIn("img :: Counter", self.driver.manager.get(inst4.uuid).config)

        # a hard reboot (a new VNF) runs the user_data configuration again
        self.driver.reboot(self.ctx, inst, None, "HARD")
        self.assertEqual(plain, self.driver.manager.get(inst.uuid).config)

    def test_rejected_user_data_config_names_line_and_column_and_leaves_nothing(self):
        bad = "// day 0: a reflector on the one NIC\n\nFromDevice(0) -> Countr -> ToDevice(0);\n"
        port = str(uuid.uuid4())
        vif = network_model.VIF(id=port, address="fa:16:3e:00:00:07", type="tap", active=True,
                                devname=("fvn" + port)[:network_model.NIC_NAME_LEN],
                                network=network_model.Network(id="net", bridge=None))
        inst = self._instance(user_data=_b64(bad))
        exc = self.assertRaises(exception.BuildAbortException, self._spawn, inst,
                                network_info=network_model.NetworkInfo([vif]))
        self.assertIn("the VNF rejected the Click configuration from user_data at line 3, "
                      "column 18: unknown element class 'Countr'", str(exc))
        self.assertEqual([], self.driver.manager.store.list())
        self.assertEqual({}, self.driver.names.all())
        self.assertEqual([], self._existing([vif["devname"]]))

        # in a MIME part: its label, and the line within the part
        multi = _mime(("cloud-config", "#cloud-config\n{}\n"),
                      ("x-click-config", "FromDevice(0) ->\n  Discrd;\n"))
        inst2 = self._instance(user_data=_b64(multi))
        exc = self.assertRaises(exception.BuildAbortException, self._spawn, inst2)
        self.assertIn("from user_data part 2 (text/x-click-config, part-002) at line 2, "
                      "column 3:", str(exc))
        self.assertEqual([], self.driver.manager.store.list())

        # two Click parts: refused before anything starts
        two = _mime(("x-click-config", "FromDevice(0) -> Discard;"),
                    ("plain", "#click-config\nFromDevice(0) -> Discard;"))
        exc = self.assertRaises(exception.BuildAbortException, self._spawn,
                                self._instance(user_data=_b64(two)))
        self.assertIn("user_data has 2 Click configuration parts", str(exc))
        self.assertEqual([], self.driver.manager.store.list())

    def test_too_long_user_data_config_is_refused_before_launch(self):
        long = "// padding\n" * 700 + "FromDevice(0) -> ToDevice(1);\n"
        exc = self.assertRaises(exception.BuildAbortException, self._spawn,
                                self._instance(user_data=_b64(long)))
        self.assertIn("the Click configuration from user_data: click_config: 7730 bytes, longer "
                      "than 7000 bytes", str(exc))
        self.assertEqual([], self.driver.manager.store.list())

    def test_unknown_or_bad_fluidvim_extra_specs_abort_the_build(self):
        for specs, why in [({"fluidvim:slotz": "4"}, "unknown flavor extra spec fluidvim:slotz"),
                           ({"fluidvim:nics": "9"}, "'9' is greater than the max value of '4'"),
                           ({"fluidvim:warm": "maybe"}, "not a valid boolean-like value"),
                           ({"fluidvim:backend": "xen"}, "'xen' is not one of: qemu, libvirt")]:
            exc = self.assertRaises(exception.BuildAbortException, self._spawn,
                                    self._instance(specs))
            self.assertIn(why, str(exc))
        self.assertEqual([], self.driver.manager.store.list())

    def test_flavor_qoe_sets_the_vnfs_slots_at_its_capacity(self):
        specs = {"fluidvim:session_slots": "64", "fluidvim:qoe_capacity": "10",
                 "fluidvim:qoe_deadline_ms": "5", "fluidvim:qoe_quantile": "0.99",
                 "fluidvim:qoe_wait_ppm": "1000000", "fluidvim:qoe_budget_ns": "4096"}
        inst = self._instance(specs)
        self._spawn(inst)
        st = self._stats(inst)["slots"]
        self.assertEqual((64, 0, 10), (st["total"], st["used"], st["free"]))
        # budget_ns, wait_budget_ppm: the flavor's budgets reached the VNF
        self.assertEqual({"probed": 10, "capacity": 10, "budget_ns": 4096,
                          "quantile_ppm": 990000, "wait_budget_ppm": 1_000_000},
                         {k: st["qoe"].get(k) for k in ("probed", "capacity", "budget_ns",
                                                        "quantile_ppm", "wait_budget_ppm")})
        # what the slot notifications and the inventory read (the launch core's sum)
        self.assertEqual(10, self.driver.manager.slots()["vnfs"][inst.uuid]["free"])

    def test_flavor_qoe_specs_go_together(self):
        for specs, why in [
                ({"fluidvim:qoe_capacity": "10"}, "set fluidvim:qoe_deadline_ms, "
                                                  "fluidvim:qoe_quantile too"),
                ({"fluidvim:qoe_capacity": "0", "fluidvim:qoe_deadline_ms": "5",
                  "fluidvim:qoe_quantile": "0.99"}, "fluidvim:qoe_capacity: Validation failed"),
                ({"fluidvim:qoe_capacity": "8", "fluidvim:qoe_deadline_ms": "5",
                  "fluidvim:qoe_quantile": "1"}, "fluidvim:qoe_quantile: Validation failed"),
                ({"fluidvim:qoe_wait_ppm": "250000"}, "fluidvim:qoe_wait_ppm is part of a QoE: "
                                                      "set fluidvim:qoe_capacity"),
                ({"fluidvim:qoe_capacity": "8", "fluidvim:qoe_deadline_ms": "5",
                  "fluidvim:qoe_quantile": "0.99", "fluidvim:qoe_budget_ns": "0"},
                 "fluidvim:qoe_budget_ns: Validation failed"),
                ({"fluidvim:qoe_capacity": "8", "fluidvim:qoe_deadline_ms": "5",
                  "fluidvim:qoe_quantile": "0.99", "fluidvim:qoe_wait_ppm": "-1"},
                 "fluidvim:qoe_wait_ppm: Validation failed")]:
            exc = self.assertRaises(exception.BuildAbortException, self._spawn,
                                    self._instance(specs))
            self.assertIn(why, str(exc))
        self.assertEqual([], self.driver.manager.store.list())

    def test_bridge_vifs(self):
        br = "fvnt" + uuid.uuid4().hex[:6]
        subprocess.run(["ip", "link", "add", br, "type", "bridge"], check=True)
        self.addCleanup(subprocess.run, ["ip", "link", "del", br], check=False)
        subprocess.run(["ip", "link", "set", br, "up"], check=True)
        vifs = network_model.NetworkInfo([
            network_model.VIF(id=str(uuid.uuid4()), address=mac, type="bridge",
                              network=network_model.Network(id="net", bridge=br))
            for mac in ("fa:16:3e:00:00:01", "fa:16:3e:00:00:02")])
        inst = self._instance()
        self._spawn(inst, network_info=vifs)
        rec = self.driver.manager.get(inst.uuid)
        self.assertEqual([br, br], [n.bridge for n in rec.spec.nics])
        self.assertEqual(["fa:16:3e:00:00:01", "fa:16:3e:00:00:02"],
                         [n.mac for n in rec.spec.nics])
        self.assertEqual([br, br], [netdev.master_of(n.tap) for n in rec.spec.nics])
        self.driver.destroy(self.ctx, inst, vifs)
        self.assertEqual([], self._existing(n.tap for n in rec.spec.nics))

    def test_unsupported_vif_type(self):
        vifs = network_model.NetworkInfo([network_model.VIF(
            id=str(uuid.uuid4()), address="fa:16:3e:00:00:03", type="ovs",
            network=network_model.Network(id="net", bridge="br-int"))])
        inst = self._instance()
        self.assertRaises(exception.VirtualInterfaceCreateException, self._spawn, inst,
                          network_info=vifs)
        self.assertEqual([], self.driver.manager.store.list())

    def test_power_off_on_and_reboot(self):
        inst = self._instance()
        self._spawn(inst)
        first = inst.system_metadata["fluidvim_vnf_id"]
        self.driver.power_off(inst)
        self.assertEqual(power_state.SHUTDOWN, self.driver.get_info(inst).state)
        self.assertEqual([], self.driver.list_instances())
        self.driver.power_on(self.ctx, inst, None)
        self.assertEqual(power_state.RUNNING, self.driver.get_info(inst).state)
        second = inst.system_metadata["fluidvim_vnf_id"]
        self.assertNotEqual(first, second)
        self.driver.reboot(self.ctx, inst, None, "SOFT")
        self.assertEqual(second, self.driver.manager.get(inst.uuid).id)   # same VNF
        self.driver.reboot(self.ctx, inst, None, "HARD")
        third = self.driver.manager.get(inst.uuid).id
        self.assertNotEqual(second, third)
        self.assertEqual(1, len(self.driver.manager.store.list()))

    def test_vnf_death_is_reported(self):
        inst = self._instance()
        self._spawn(inst)
        rec = self.driver.manager.get(inst.uuid)
        os.kill(rec.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not self.events and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(1, len(self.events))
        self.assertEqual(inst.uuid, self.events[0].get_instance_uuid())
        self.assertEqual(virtevent.EVENT_LIFECYCLE_STOPPED, self.events[0].get_transition())
        self.assertEqual(power_state.CRASHED, self.driver.get_info(inst).state)
        self.driver.destroy(self.ctx, inst, None)
        self.assertEqual([], self.driver.manager.store.list())

    def test_init_host_reattaches(self):
        inst = self._instance()
        self._spawn(inst)
        self.driver.cleanup_host("compute1")            # nova-compute stops; the VNF keeps running
        again = fdriver.UnikernelDriver(fake_virt.FakeVirtAPI())
        again.init_host("compute1")
        self.driver = again
        self.assertEqual([inst.name], again.list_instances())      # names survive restarts
        self.assertEqual([inst.uuid], again.list_instance_uuids())
        self.assertEqual(power_state.RUNNING, again.get_info(inst).state)
        self.assertEqual(1024, again.manager.stats(inst.uuid)["slots"]["total"])

    def test_available_resource_and_stats(self):
        self._spawn(self._instance())
        with mock.patch("nova.virt.node.get_local_node_uuid", return_value="node-uuid"):
            res = self.driver.get_available_resource("compute1")
        self.assertEqual("fluidvim", res["hypervisor_type"])
        self.assertEqual("node-uuid", res["uuid"])
        self.assertEqual(32, res["memory_mb_used"])
        stats = res["stats"]
        self.assertEqual("cold", stats["fluidvim_queuing_basis"])
        self.assertGreater(float(stats["fluidvim_queuing_delay_ms"]), 0)
        self.assertEqual("4096", stats["fluidvim_slot_capacity"])
        self.assertEqual("1024", stats["fluidvim_slots_total"])
        self.assertEqual("1024", stats["fluidvim_slots_free"])
        self.assertTrue(all(isinstance(v, str) for v in stats.values()))
        self.flags(host="compute1")
        self.assertEqual(["compute1"], self.driver.get_available_nodes())

    def test_update_provider_tree(self):
        tree = provider_tree.ProviderTree()
        tree.new_root("compute1", "4a8c1e2e-0000-4000-8000-000000000001")
        tree.add_traits("compute1", "CUSTOM_UNIKERNEL_TCG" if self.driver.manager.accel == "kvm"
                        else "CUSTOM_UNIKERNEL_KVM", "COMPUTE_NET_ATTACH_INTERFACE")
        self.driver.update_provider_tree(tree, "compute1")
        inv = tree.data("compute1").inventory
        self.assertEqual({"VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_VNF_SESSION_SLOT"}, set(inv))
        slot = inv["CUSTOM_VNF_SESSION_SLOT"]
        self.assertEqual(4096, slot["total"])
        self.assertEqual(4096, slot["max_unit"])
        self.assertEqual(1.0, slot["allocation_ratio"])
        self.assertEqual(os.cpu_count(), inv["VCPU"]["total"])
        self.assertLessEqual(inv["MEMORY_MB"]["max_unit"], 4096)
        traits = tree.data("compute1").traits
        accel = self.driver.manager.accel
        self.assertIn("CUSTOM_UNIKERNEL_" + accel.upper(), traits)
        self.assertNotIn("CUSTOM_UNIKERNEL_" + ("TCG" if accel == "kvm" else "KVM"), traits)
        self.assertIn("CUSTOM_FLUIDVIM_BACKEND_QEMU", traits)
        self.assertIn("COMPUTE_NET_ATTACH_INTERFACE", traits)       # others' traits are kept

    def test_default_slot_capacity(self):
        self.flags(session_slot_capacity=0, group="fluidvim")
        self.flags(memory_mb=64, session_slots=100, group="vnf")
        mem = fdriver._host_memory_mb() - fdriver.CONF.reserved_host_memory_mb
        self.assertEqual(mem // 64 * 100, self.driver._slot_capacity())

    def test_diagnostics_are_the_vnf_counters(self):
        inst = self._instance({"resources:CUSTOM_VNF_SESSION_SLOT": "64"})
        self._spawn(inst)
        diag = self.driver.get_diagnostics(inst)
        rec = self.driver.manager.get(inst.uuid)
        self.assertEqual(64, diag["session_slots_total"])
        self.assertEqual(32 * 1024, diag["memory"])
        for nic in rec.spec.nics:
            self.assertEqual(0, diag[f"{nic.tap}_tx"])
        # the stats reply itself for programs (the Nova zone's stats()): MACs, elements, latency
        vnf = diag["vnf_stats"]
        self.assertEqual([n.mac for n in rec.spec.nics], [n["mac"] for n in vnf["nics"]])
        self.assertEqual(64, vnf["slots"]["total"])
        self.assertIn("buckets_log2", vnf["latency_ns"])
        self.assertIsInstance(vnf["elements"], list)       # this configuration names none
        json.dumps(diag)                                # what Nova's RPC and API carry
        # where the vCPU's time went, as the VNF counts it: all of it booked, none beyond uptime
        loop_us = (diag["vcpu_busy_us"] + diag["vcpu_poll_us"] + diag["vcpu_halt_us"]
                   + diag["vcpu_stolen_us"])
        self.assertGreater(loop_us, 0)
        self.assertLessEqual(loop_us, diag["uptime"] * 1_000_000 + 1_000_000)
        self.assertNotIn("power_watts", diag)           # no exporter on this host yet
        # the host's exporter (`fluidvim metrics serve`'s sampler, on the driver's launch core,
        # host power from a linear model) has attributed two intervals: its figures are served
        from fluidvim.orchestrator import power
        from fluidvim.orchestrator.power import exporter
        sampler = exporter.HostSampler(
            self.driver.manager, power.Attributor(power.LinearModel(30.0, 90.0), "linear"),
            state_path=os.path.join(self.run_dir, "power.json"))
        sampler.step()
        time.sleep(0.2)
        sampler.step()
        diag = self.driver.get_diagnostics(inst)
        self.assertEqual("linear", diag["power_source"])
        self.assertGreater(diag["power_watts"], 0)          # at least its idle share
        self.assertGreater(diag["power_joules"], 0)
        self.driver.destroy(self.ctx, inst, None)
        self.assertRaises(exception.InstanceNotRunning, self.driver.get_diagnostics, inst)
        self.assertIn("load average", self.driver.get_host_uptime())

    def test_unsupported_operations_say_so(self):
        inst = self._instance()
        exc = self.assertRaises(NotImplementedError, self.driver.snapshot, self.ctx, inst,
                                "img", lambda *a, **k: None)
        self.assertIn("fluidvim: snapshot is not supported", str(exc))
        self.assertRaises(NotImplementedError, self.driver.suspend, self.ctx, inst)
        self.assertRaises(exception.InstanceNotFound, self.driver.pause, inst)  # none spawned
        self.assertRaises(NotImplementedError, self.driver.attach_volume, self.ctx, {}, inst,
                          "/dev/vdb")


class WarmNeutronPortsTestCase(DriverTestBase):
    """Bridge VIFs with Neutron's fixed MACs and devnames get a warm shell of their shape."""

    pool_size = 1

    def _ports(self, bridge, n=2):
        ports = [str(uuid.uuid4()) for _ in range(n)]
        # Neutron's devname is "tap" + the port id's first 11 characters; this suite's own
        # interface names start with "fw"
        return network_model.NetworkInfo([
            network_model.VIF(id=p, address=f"fa:16:3e:7e:00:0{i + 1}", type="bridge",
                              devname=f"fw{p[:11]}",
                              network=network_model.Network(id="net", bridge=bridge))
            for i, p in enumerate(ports)])

    def _bridge(self):
        br = "fwnb" + uuid.uuid4().hex[:6]
        netdev.ensure_bridge(br)
        self.addCleanup(netdev.delete_link, br)
        return br

    def test_spawn_with_bridge_vifs_is_warm(self):
        mgr = self.driver.manager
        key = mgr.pool_key(fdriver.CONF.vnf.backend, fdriver.CONF.vnf.memory_mb, 1,
                           fdriver.CONF.vnf.pool_nics)
        self.assertTrue(mgr.wait_pool(key, 1, timeout=60), "the pool did not fill")
        (shell,) = mgr.store.list(statuses=("pool",))
        br = self._bridge()
        vifs = self._ports(br, n=fdriver.CONF.vnf.pool_nics)     # the pool's shape
        devnames = [v["devname"] for v in vifs]
        macs = [v["address"] for v in vifs]
        self.taps.update(devnames)
        inst = self._instance(memory_mb=fdriver.CONF.vnf.memory_mb)
        self._spawn(inst, network_info=vifs)
        self.assertEqual("warm", inst.system_metadata["fluidvim_launch_kind"])
        self.assertEqual(shell.id, inst.system_metadata["fluidvim_vnf_id"])
        rec = mgr.get(inst.uuid)
        self.assertEqual(list(zip(devnames, macs, [br, br])),
                         [(n.tap, n.mac, n.bridge) for n in rec.spec.nics])
        self.assertEqual([br, br], [netdev.master_of(t) for t in devnames])
        self.assertEqual([], self._existing([n.tap for n in shell.spec.nics], wait=0))
        self.assertEqual(macs, [n["mac"] for n in self._stats(inst)["nics"]])
        # a port whose device name is taken on the host is refused before a shell is taken
        self.assertTrue(mgr.wait_pool(key, 1, timeout=60), "the pool did not refill")
        vifs2 = self._ports(br, n=fdriver.CONF.vnf.pool_nics)
        vifs2[1]["devname"] = devnames[0]
        inst2 = self._instance(memory_mb=fdriver.CONF.vnf.memory_mb)
        err = self.assertRaises(exception.BuildAbortException, self._spawn, inst2,
                                network_info=vifs2)
        self.assertIn("nics[1].tap", str(err))
        self.assertEqual(1, mgr.store.count_pool(key, ("pool",)))
        self.driver.destroy(self.ctx, inst, vifs)
        self.assertEqual([], self._existing(devnames))

    def test_too_long_config_does_not_take_the_shell(self):
        mgr = self.driver.manager
        key = mgr.pool_key(fdriver.CONF.vnf.backend, fdriver.CONF.vnf.memory_mb, 1,
                           fdriver.CONF.vnf.pool_nics)
        self.assertTrue(mgr.wait_pool(key, 1, timeout=60), "the pool did not fill")
        shell = mgr.store.list(statuses=("pool",))[0]
        long = "// padding\n" * 700 + "FromDevice(0) -> ToDevice(1);\n"
        self.assertRaises(exception.BuildAbortException, self._spawn,
                          self._instance(user_data=_b64(long)))
        self.assertEqual([shell.id], [r.id for r in mgr.store.list(statuses=("pool",))])
        self.assertEqual([], mgr.store.list(statuses=("booting", "running", "crashed")))

    def test_vifs_of_another_shape_boot_cold(self):
        mgr = self.driver.manager
        key = mgr.pool_key(fdriver.CONF.vnf.backend, fdriver.CONF.vnf.memory_mb, 1,
                           fdriver.CONF.vnf.pool_nics)
        self.assertTrue(mgr.wait_pool(key, 1, timeout=60), "the pool did not fill")
        vifs = self._ports(self._bridge(), n=fdriver.CONF.vnf.pool_nics + 1)
        self.taps.update(v["devname"] for v in vifs)
        inst = self._instance(memory_mb=fdriver.CONF.vnf.memory_mb)
        self._spawn(inst, network_info=vifs)
        self.assertEqual("cold", inst.system_metadata["fluidvim_launch_kind"])
        self.assertEqual([v["devname"] for v in vifs],
                         [n.tap for n in mgr.get(inst.uuid).spec.nics])
        self.assertEqual(1, mgr.store.count_pool(key, ("pool",)))


class ImageCacheTestCase(DriverTestBase):
    """A boot whose kernel is cached needs no Glance round trip — but only when nothing can be
    stale: checksum, size and mtime must match the cache index, and the image properties must
    be whole in Nova's boot-time snapshot; otherwise Glance is asked as before."""

    def _nova_boot(self, image_id=IMAGE_ID):
        """An instance and image_meta shaped as Nova's API and compute hand them to spawn."""
        image = self.glance.image(image_id)
        inst = self._instance()
        inst.system_metadata = nova_utils.get_system_metadata_from_image(image, inst.flavor)
        meta = objects.ImageMeta.from_dict(image)
        self.driver.spawn(self.ctx, inst, meta, [], "", {})
        self.taps.update(n.tap for n in self.driver.manager.get(inst.uuid).spec.nics)
        return inst

    def test_cached_kernel_boots_without_glance(self):
        self.glance.properties = {"fluidvim_click_config":
                                  "FromDevice(0) -> snap :: Counter -> ToDevice(1);",
                                  "fluidvim_session_slots": "48"}
        first = self._nova_boot()
        self.assertEqual((1, 1), (self.glance.gets, self.glance.downloads))
        second = self._nova_boot()
        self.assertEqual((1, 1), (self.glance.gets, self.glance.downloads))
        rec = self.driver.manager.get(second.uuid)
        self.assertIn("snap :: Counter", rec.config)
        self.assertEqual(48, self._stats(second)["slots"]["total"])
        self.assertEqual(self.driver.manager.get(first.uuid).spec.kernel, rec.spec.kernel)
        self.assertEqual(sorted([first.name, second.name]), sorted(self.driver.list_instances()))

    def test_glance_kernels_boot_with_the_pvh_firmware(self):
        # [vnf] firmware = auto looks beside the kernel: the cache holds a copy of the firmware
        # built beside the default kernel, so Glance kernels boot without qboot too
        inst = self._nova_boot()
        spec = self.driver.manager.get(inst.uuid).spec
        built = os.path.join(os.path.dirname(KERNEL), specmod.PVH_FIRMWARE)
        if not os.path.exists(built):
            self.skipTest(f"no {built}: make -C unikernel")
        self.assertEqual(os.path.join(self.tmp, "images", specmod.PVH_FIRMWARE), spec.firmware)
        with open(built, "rb") as a, open(spec.firmware, "rb") as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual(power_state.RUNNING, self.driver.get_info(inst).state)

    def test_glance_is_asked_when_the_snapshot_may_be_cut(self):
        self._nova_boot()
        whole = "FromDevice(0) -> ToDevice(1);\n" + "// padding\n" * 30
        self.assertGreater(len(whole), fdriver.SYSMETA_MAX)
        self.glance.properties = {"fluidvim_click_config": whole}
        inst = self._nova_boot()
        self.assertEqual(2, self.glance.gets)
        self.assertEqual(whole, self.driver.manager.get(inst.uuid).config)

    def test_glance_is_asked_when_the_checksum_differs(self):
        self._nova_boot()
        image = self.glance.image(IMAGE_ID)
        image["checksum"] = "0" * 32
        inst = self._instance()
        inst.system_metadata = nova_utils.get_system_metadata_from_image(image, inst.flavor)
        self.driver.spawn(self.ctx, inst, objects.ImageMeta.from_dict(image), [], "", {})
        self.assertEqual((2, 1), (self.glance.gets, self.glance.downloads))

    def test_changed_cache_file_is_verified_again(self):
        first = self._nova_boot()
        kernel = self.driver.manager.get(first.uuid).spec.kernel
        st = os.stat(kernel)
        os.utime(kernel, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        self._nova_boot()                       # same bytes, new mtime: re-hashed, kept
        self.assertEqual((2, 1), (self.glance.gets, self.glance.downloads))
        self._nova_boot()                       # re-indexed: no Glance again
        self.assertEqual((2, 1), (self.glance.gets, self.glance.downloads))
        with open(kernel, "r+b") as f:          # same size, different bytes
            f.seek(st.st_size - 1)
            last = f.read(1)
            f.seek(st.st_size - 1)
            f.write(bytes([last[0] ^ 0xFF]))
        os.utime(kernel, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
        inst = self._nova_boot()                # mismatch: downloaded and verified again
        self.assertEqual((3, 2), (self.glance.gets, self.glance.downloads))
        with open(self.driver.manager.get(inst.uuid).spec.kernel, "rb") as f:
            self.assertEqual(self.glance.blobs[IMAGE_ID], f.read())


class InstanceNamesTestCase(test.NoDBTestCase):
    def test_kept_in_the_launch_core_database_and_legacy_file_imported(self):
        tmp = tempfile.mkdtemp(prefix="fluidvim-names-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        legacy = os.path.join(tmp, fnames.LEGACY_FILE)
        old_engine = fnames.sa.create_engine(f"sqlite:///{legacy}")
        fnames._Name.__table__.create(old_engine)          # the legacy file: that table alone
        with old_engine.begin() as conn:
            conn.execute(fnames.sa.insert(fnames._Name), [{"uuid": "u1", "name": "instance-1"}])
        old_engine.dispose()
        store = StateStore("sqlite:///" + os.path.join(tmp, "vnf.sqlite"))
        names = fnames.InstanceNames(store.engine, tmp)
        self.assertFalse(os.path.exists(legacy))
        names.set("u2", "instance-2")
        self.assertEqual({"u1": "instance-1", "u2": "instance-2"}, names.all())
        names.close()                            # the engine stays the launch core's
        again = fnames.InstanceNames(store.engine, tmp)
        again.forget("u1")
        self.assertEqual({"u2": "instance-2"}, again.all())
        with store.engine.connect() as conn:
            self.assertTrue(fnames.sa.inspect(conn).has_table("nova_instance_names"))
        store.engine.dispose()

    def test_phases_json_always_fits_and_parses(self):
        phases = {f"launch_phase_{i}": 123.456789 for i in range(20)}
        phases.update(image=1.23, spec=0.5, total=999.99)
        text = fdriver._phases_json(phases)
        self.assertLessEqual(len(text), fdriver.SYSMETA_MAX)
        self.assertEqual({"image": 1.2, "spec": 0.5, "total": 1000.0},
                         fdriver.json.loads(text))


class ImageWithoutMd5TestCase(DriverTestBase):
    def test_image_without_md5_checksum_always_asks_glance(self):
        shown = self.glance.image

        def without_md5(image_id):
            image = shown(image_id)
            del image["checksum"]
            return image

        self.glance.image = without_md5
        inst = self._instance()
        for _ in range(2):
            image = self.glance.image(IMAGE_ID)
            inst = self._instance()
            inst.system_metadata = nova_utils.get_system_metadata_from_image(image, inst.flavor)
            self.driver.spawn(self.ctx, inst, objects.ImageMeta.from_dict(image), [], "", {})
        self.assertEqual((2, 1), (self.glance.gets, self.glance.downloads))
        self.assertEqual(power_state.RUNNING, self.driver.get_info(inst).state)
