# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Cold migrate, resize and evacuate with Nova's own functional fixtures and TWO nova-compute
services, host1 and host2, both running UnikernelDriver on real QEMU (each its own launch-core
state dir and run dir); Placement, the scheduler and the conductor are Nova's real ones, Glance
and Neutron its fixtures. Needs root.

Checked after every move: the VNF runs on the target (its QEMU alive, it answers ``stats`` with
the flavor's session slots, vCPUs and memory in its spec), nothing is left on the source (no
launch-core record, no QEMU, no tap, no instance-name row), Placement's allocations are where Nova
says (both hosts while VERIFY_RESIZE, one after confirm/revert) and each compute's own slot
figures (``host_stats``) follow, and so do the slot updates both computes publish on a real
RabbitMQ to the orchestrator's registry (gone from the source, the new flavor's slots from the
target). Also: a resize to a flavor the VNF cannot run rolls back with the VNF untouched; live
migration is refused with the message and the server stays ACTIVE on its VNF; a VNF left on a
host by a move cut short (an evacuation whose target failed before Nova recorded it) is removed
when that nova-compute restarts, so the next evacuation to it succeeds. Prints the measured times
(API request -> state, and the VNF's own gap between source stop and target up).

    .venv/bin/python -m testtools.run fluidvim.nova_driver.tests.test_moves
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from unittest import mock

import nova.conf
import nova.virt.node
from nova import context as nova_context, exception, objects, utils as nova_utils

from fluidvim.nova_driver import moves
from fluidvim.nova_driver.tests import test_functional as nft
from fluidvim.vnf import netdev

CONF = nova.conf.CONF
HOSTS = ("host1", "host2")
SLOT = "CUSTOM_VNF_SESSION_SLOT"


def _running(pid) -> bool:
    """A process that is neither gone nor a zombie (killed, waiting for the parent that
    started it, maybe a previous launch core of this test process, to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, TypeError):
        return False


class _TwoComputes(nft._FluidvimNovaTest):
    """host1 (from the base class) and host2, each with its own state and run dir."""
    slot_capacity = 8

    def setUp(self):
        super().setUp()
        self.dirs = {"host1": (CONF.vnf.state_dir, CONF.vnf.run_dir)}
        run_dir2 = f"/run/fluidvim-nova-mv-{uuid.uuid4().hex[:8]}"
        self.addCleanup(shutil.rmtree, run_dir2, ignore_errors=True)
        self.dirs["host2"] = (os.path.join(self.tmp, "state2"), run_dir2)
        self._use("host2")
        nova.virt.node.LOCAL_NODE_UUID = None       # host2 is its own node (own compute_id)
        self.compute2 = self._start_compute("host2")
        self.addCleanup(lambda: self.computes["host2"].manager.driver.manager.destroy_all())
        self.node_uuids = {h: self.computes[h].manager.driver._local_node_uuid() for h in HOSTS}
        self.rps = {h: self._get_provider_uuid_by_host(h) for h in HOSTS}
        self.small = self._flavor("vnf.small", 32, 1, 2)
        self.big = self._flavor("vnf.big", 64, 2, 4)
        self.times: dict[str, float] = {}
        self.addCleanup(lambda: print(f"\n{self.id().rsplit('.', 1)[-1]}: {self.times}"))

    def _use(self, host):
        """CONF as nova-compute ``host`` reads it when it starts (one process, one CONF)."""
        state, run = self.dirs[host]
        self.flags(state_dir=state, run_dir=run, group="vnf")

    def _flavor(self, name, ram, vcpus, slots):
        fid = self._create_flavor(name=name, memory_mb=ram, vcpu=vcpus, disk=1, extra_spec={
            f"resources:{SLOT}": str(slots)})
        return {"id": fid, "ram": ram, "vcpus": vcpus, "slots": slots}

    def driver_of(self, host):
        return self.computes[host].manager.driver

    def _boot(self, host="host1", flavor=None, alone=True):
        server = self._create_server(image_uuid=nft.IMAGE_ID,
                                     flavor_id=(flavor or self.small)["id"], networks="none",
                                     host=host)
        self.assertEqual(host, server["OS-EXT-SRV-ATTR:host"])
        return server, self._runs_on(host, server, flavor or self.small, alone)

    # -- what is where --
    def _runs_on(self, host, server, flavor, alone=True):
        """The server's one VNF on ``host``: alive, answering, with the flavor's shape (and,
        ``alone``, all the host's slots: the compute's own figure)."""
        mgr = self.driver_of(host).manager
        recs = mgr.store.list(name=server["id"])
        self.assertEqual(1, len(recs), f"{host}: {recs}")
        rec = recs[0]
        self.assertEqual("running", rec.status)
        self.assertTrue(mgr.backend(rec.backend).alive(rec.spec, rec.pid), f"{host}: dead VNF")
        self.assertEqual(flavor["slots"], mgr.stats(rec.id)["slots"]["total"])
        self.assertEqual((flavor["vcpus"], flavor["ram"]), (rec.spec.vcpus, rec.spec.memory_mb))
        self.assertIn(server["id"], self.driver_of(host).list_instance_uuids())
        if alone:
            self.assertEqual(str(flavor["slots"]),
                             self.driver_of(host).host_stats()["fluidvim_slots_total"])
        return rec

    def _nothing_on(self, host, server, *old_recs, names=True):
        """No record, no slots (and, ``names``, no instance name) of the server on ``host``; the
        old VNFs' QEMU and taps are gone (the taps go with QEMU: waited for up to 2 s)."""
        drv = self.driver_of(host)
        self.assertEqual([], drv.manager.store.list(name=server["id"]))
        self.assertNotIn(server["id"], drv.list_instance_uuids())
        if names:
            self.assertNotIn(server["id"], drv.names.all())
        self.assertEqual("0", drv.host_stats()["fluidvim_slots_total"])
        for rec in old_recs:
            self.assertFalse(_running(rec.pid), f"QEMU of {rec.id} still runs")
            taps = [n.tap for n in rec.spec.nics]
            deadline = time.monotonic() + 2
            while any(netdev.exists(t) for t in taps) and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertEqual([], [t for t in taps if netdev.exists(t)])

    def _usage(self, host):
        u = self._get_provider_usages(self.rps[host])
        return (u["VCPU"], u["MEMORY_MB"], u[SLOT])

    def _expect_usage(self, host, *flavors):
        want = tuple(sum(f[k] for f in flavors) for k in ("vcpus", "ram", "slots"))
        self.assertEqual(want, self._usage(host), f"Placement usage of {host}")

    def _gap(self, server) -> float:
        sysmeta = nft._sysmeta(server["id"])
        self.assertNotIn(moves.SYSMETA_STOPPED_AT, sysmeta)
        return float(sysmeta[moves.SYSMETA_MOVE_GAP])

    def _timed(self, name, fn, *args, **kw):
        t0 = time.monotonic()
        out = fn(*args, **kw)
        self.times[name] = round(time.monotonic() - t0, 3)
        return out

    def _action_events(self, server_id):
        """{event name: (result, its exception's message and traceback)} of all the server's
        instance actions (``details``: microversion 2.84+)."""
        out = {}
        actions = self.api.api_get(f"/servers/{server_id}/os-instance-actions").body
        for action in actions["instanceActions"]:
            body = self.api.api_get(f"/servers/{server_id}/os-instance-actions/"
                                    f"{action['request_id']}").body["instanceAction"]
            for ev in body.get("events", []):
                out[ev["event"]] = (ev["result"], f"{ev.get('details') or ''}\n"
                                                  f"{ev.get('traceback') or ''}")
        return out


class ColdMigrateTest(_TwoComputes):
    def test_migrate_confirm(self):
        server, src = self._boot("host1")
        self._expect_usage("host1", self.small)

        server = self._timed("migrate -> VERIFY_RESIZE (s)", self._migrate_server, server)
        self.assertEqual("host2", server["OS-EXT-SRV-ATTR:host"])
        dst = self._runs_on("host2", server, self.small)
        self._nothing_on("host1", server, src)
        self.times["VNF gap source stopped -> target up (ms)"] = self._gap(server)
        self.times["target VNF launch (ms)"] = float(nft._sysmeta(server["id"])["fluidvim_spawn_ms"])
        # VERIFY_RESIZE: the migration holds the source's allocation, the server the target's
        self._expect_usage("host1", self.small)
        self._expect_usage("host2", self.small)
        self._run_periodics()                   # the resource trackers agree
        self._expect_usage("host1", self.small)

        server = self._timed("confirm -> ACTIVE (s)", self._confirm_resize, server)
        self._expect_usage("host1")
        self._expect_usage("host2", self.small)
        self.assertEqual(dst.id, self._runs_on("host2", server, self.small).id)  # untouched
        self._nothing_on("host1", server)
        self.assertEqual(server["OS-EXT-SRV-ATTR:instance_name"],
                         self.driver_of("host2").names.all()[server["id"]])
        self.assertEqual(1, server["OS-EXT-STS:power_state"])

        self._delete_server(server)
        self._nothing_on("host2", server, dst)
        self._expect_usage("host2")

    def test_migrate_revert(self):
        server, src = self._boot("host1")
        server = self._migrate_server(server)
        dst = self._runs_on("host2", server, self.small)
        server = self._timed("revert -> ACTIVE (s)", self._revert_resize, server)
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        back = self._runs_on("host1", server, self.small)
        self.assertNotEqual(src.id, back.id)                # started again from the spec
        self._nothing_on("host2", server, dst)
        self._expect_usage("host1", self.small)
        self._expect_usage("host2")
        self._delete_server(server)
        self._nothing_on("host1", server, back)

    def test_stopped_server_moves_and_stays_off(self):
        server, src = self._boot("host1")
        server = self._stop_server(server)
        self._nothing_on("host1", server, src, names=False)     # stopped: it keeps its name
        server = self._migrate_server(server)
        self.assertEqual("host2", server["OS-EXT-SRV-ATTR:host"])
        self._nothing_on("host2", server)                   # SHUTOFF: no VNF anywhere
        server = self._confirm_resize_stopped(server)
        self.assertEqual("SHUTOFF", server["status"])
        server = self._start_server(server)
        self._runs_on("host2", server, self.small)
        self._delete_server(server)

    def _confirm_resize_stopped(self, server):
        self.api.post_server_action(server["id"], {"confirmResize": None})
        return self._wait_for_state_change(server, "SHUTOFF")


class ResizeTest(_TwoComputes):
    def test_resize_revert_then_confirm(self):
        server, src = self._boot("host1")
        server = self._timed("resize -> VERIFY_RESIZE (s)", self._resize_server, server,
                             self.big["id"])
        self.assertEqual("host2", server["OS-EXT-SRV-ATTR:host"])
        dst = self._runs_on("host2", server, self.big)      # 2 vCPUs, 64 MB, 4 slots
        self._nothing_on("host1", server, src)
        self.times["VNF gap (ms)"] = self._gap(server)
        self._expect_usage("host1", self.small)             # the migration's
        self._expect_usage("host2", self.big)

        server = self._revert_resize(server)                # the old flavor, on host1 again
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        back = self._runs_on("host1", server, self.small)
        self._nothing_on("host2", server, dst)
        self._expect_usage("host1", self.small)
        self._expect_usage("host2")

        server = self._resize_server(server, self.big["id"])
        dst = self._runs_on("host2", server, self.big)
        self._nothing_on("host1", server, back)
        server = self._confirm_resize(server)
        self.assertEqual("vnf.big", server["flavor"]["original_name"])
        self._runs_on("host2", server, self.big)
        self._expect_usage("host1")
        self._expect_usage("host2", self.big)
        self._delete_server(server)
        self._nothing_on("host2", server, dst)

    def test_resize_on_the_same_host(self):
        self.flags(allow_resize_to_same_host=True)
        service = self.admin_api.get_services(host="host2", binary="nova-compute")[0]
        self.admin_api.put_service(service["id"], {"status": "disabled"})
        server, src = self._boot("host1")
        server = self._timed("same-host resize -> VERIFY_RESIZE (s)", self._resize_server,
                             server, self.big["id"])
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        new = self._runs_on("host1", server, self.big)
        self.assertNotEqual(src.id, new.id)
        self._expect_usage("host1", self.small, self.big)
        server = self._revert_resize(server)                # destroy the new, start the old
        old = self._runs_on("host1", server, self.small)
        self._expect_usage("host1", self.small)
        self.assertFalse(_running(new.pid))

        server = self._resize_server(server, self.big["id"])
        new = self._runs_on("host1", server, self.big)
        server = self._confirm_resize(server)               # confirm keeps the resized VNF
        self.assertEqual(new.id, self._runs_on("host1", server, self.big).id)
        self._expect_usage("host1", self.big)
        self._delete_server(server)
        self._nothing_on("host1", server, old, new)

    def test_resize_to_a_flavor_the_vnf_cannot_run_rolls_back(self):
        server, src = self._boot("host1")
        fid = self._create_flavor(name="vnf.bad", memory_mb=32, vcpu=1, disk=1)
        # nova-api checks fluidvim:* extra specs from microversion 2.86 on; older ones store them
        with nova_utils.temporary_mutation(self.admin_api, microversion="2.85"):
            self.admin_api.post_extra_spec(fid, {"extra_specs": {"fluidvim:slotz": "4"}})
        self.api.post_server_action(server["id"], {"resize": {"flavorRef": fid}})
        self._wait_for_migration_status(server, ["error"])
        self._wait_for_instance_action_event(server, "resize", "compute_resize_instance",
                                             "Error")
        server = self._wait_for_state_change(server, "ACTIVE")
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        rec = self._runs_on("host1", server, self.small)
        self.assertEqual((src.id, src.pid), (rec.id, rec.pid))       # never stopped
        result, tb = self._action_events(server["id"])["compute_resize_instance"]
        self.assertEqual("Error", result)
        self.assertIn("unknown flavor extra spec fluidvim:slotz", tb)
        self._expect_usage("host1", self.small)
        self._expect_usage("host2")
        self._delete_server(server)


class LiveMigrationTest(_TwoComputes):
    def test_live_migration_refused_server_keeps_running(self):
        server, src = self._boot("host1")
        self.api.post_server_action(server["id"], {"os-migrateLive": {
            "host": "host2", "block_migration": "auto"}})
        self._wait_for_migration_status(server, ["error"])
        self._wait_for_instance_action_event(server, "live-migration",
                                             "compute_check_can_live_migrate_destination", "Error")
        server = self._wait_for_state_change(server, "ACTIVE")
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        rec = self._runs_on("host1", server, self.small)
        self.assertEqual((src.id, src.pid), (rec.id, rec.pid))
        result, tb = self._action_events(server["id"])[
            "compute_check_can_live_migrate_destination"]
        self.assertEqual("Error", result)
        self.assertIn(moves.LIVE_MIGRATION_REFUSED, tb)
        self._nothing_on("host2", server)
        self._expect_usage("host2")
        self._delete_server(server)


class EvacuateTest(_TwoComputes):
    def _host1_down(self):
        service = self.admin_api.get_services(host="host1", binary="nova-compute")[0]
        self.computes["host1"].stop()          # nova-compute stops; its VNFs keep running
        self.admin_api.put_service(service["id"], {"forced_down": "true"})
        return service

    def _host1_up(self, service):
        """host1's nova-compute starts (init_host: Nova's evacuation cleanup), then it is no
        longer forced down (Nova refuses that while its evacuations are not cleaned up)."""
        self._use("host1")
        nova.virt.node.LOCAL_NODE_UUID = self.node_uuids["host1"]
        self.computes["host1"].start()
        self.admin_api.put_service(service["id"], {"forced_down": "false"})

    def test_evacuate_then_source_returns(self):
        server, src = self._boot("host1")
        service = self._host1_down()
        # before microversion 2.95 an evacuated server comes back ACTIVE (from 2.95 on: SHUTOFF,
        # see the test below)
        with nova_utils.temporary_mutation(self.admin_api, microversion="2.94"):
            server = self._timed("evacuate -> ACTIVE (s)", self._evacuate_server, server,
                                 expected_host="host2", expected_state="ACTIVE")
        dst = self._runs_on("host2", server, self.small)
        self.times["target VNF launch (ms)"] = float(nft._sysmeta(server["id"])["fluidvim_spawn_ms"])
        # host1 is only "down" to Nova: its VNF still runs until its nova-compute comes back
        self.assertTrue(_running(src.pid))
        self._expect_usage("host1", self.small)
        self._expect_usage("host2", self.small)

        t0 = time.monotonic()
        self._host1_up(service)
        self.times["source compute restart, evacuated VNF removed (s)"] = round(
            time.monotonic() - t0, 3)
        self._nothing_on("host1", server, src)
        self.assertEqual(dst.id, self._runs_on("host2", server, self.small).id)
        self._run_periodics()
        self._expect_usage("host1")
        self._expect_usage("host2", self.small)
        self._delete_server(server)
        self._nothing_on("host2", server, dst)

    def test_half_moved_vnf_is_removed_when_its_compute_restarts(self):
        server, src = self._boot("host1")
        service = self._host1_down()
        # the evacuation's target starts the VNF, then fails before Nova records the move
        # (finish_evacuation sets the instance's host): it stands for a crash at that point
        rt = self.computes["host2"].manager.rt
        with mock.patch.object(rt, "finish_evacuation",
                               side_effect=exception.NovaException("crash stand-in")), \
                nova_utils.temporary_mutation(self.admin_api, microversion="2.94"):
            self.api.post_server_action(server["id"], {"evacuate": {}})
            self._wait_for_instance_action_event(server, "evacuate",
                                                 "compute_rebuild_instance", "Error")
        server = self.api.get_server(server["id"])
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        half = self.driver_of("host2").manager.get(server["id"])       # the stray copy

        # host2's nova-compute restarts: Nova says host1, so host2's copy goes
        self._use("host2")
        nova.virt.node.LOCAL_NODE_UUID = self.node_uuids["host2"]
        self.computes["host2"] = self.restart_compute_service(self.computes["host2"],
                                                              keep_hypervisor_state=False)
        self._nothing_on("host2", server, half)

        # so the next evacuation (of the server in ERROR) to host2 is not refused with
        # "instance exists"
        self.assertEqual("ERROR", server["status"])
        server = self._evacuate_server(server, expected_host="host2", expected_state="ACTIVE")
        dst = self._runs_on("host2", server, self.small)
        self._host1_up(service)
        self._nothing_on("host1", server, src)
        self._delete_server(server)
        self._nothing_on("host2", server, dst)


class RestartRuleTest(_TwoComputes):
    """The rule itself, on VNFs started on host2 for servers Nova places elsewhere or deleted."""

    def test_vnf_of_a_server_on_another_host_goes_own_and_deleted_stay(self):
        server, src = self._boot("host1")
        other, other_rec = self._boot("host2")
        gone, _ = self._boot("host1", alone=False)
        drv = self.driver_of("host2")
        ctx = nova_context.get_admin_context()

        def instance(sid):
            return objects.Instance.get_by_uuid(ctx, sid, expected_attrs=["flavor",
                                                                          "system_metadata"])
        deleted = instance(gone["id"])
        self._delete_server(gone)
        drv._start(ctx, instance(server["id"]), nft.IMAGE_ID, [])     # copies host2 should not
        drv._start(ctx, deleted, nft.IMAGE_ID, [])                     # have
        stray, orphan = drv.manager.get(server["id"]), drv.manager.get(gone["id"])

        kept = drv.process_instances_at_startup(ctx, objects.InstanceList(
            objects=[instance(other["id"])]))
        self.assertEqual([other["id"]], [i.uuid for i in kept])
        self.assertEqual([], drv.manager.store.list(name=server["id"]))    # elsewhere: gone
        self.assertFalse(_running(stray.pid))
        self.assertEqual(orphan.id, drv.manager.get(gone["id"]).id)   # deleted: Nova's periodic
        self.assertEqual(other_rec.id, drv.manager.get(other["id"]).id)   # its own: untouched
        self.assertEqual(src.id, self.driver_of("host1").manager.get(server["id"]).id)
        drv.manager.destroy(orphan.id)
        self._delete_server(server)
        self._delete_server(other)


class SlotUpdatesFollowTest(_TwoComputes):
    """Both computes publish slot updates on a REAL RabbitMQ (``[fluidvim] slot_notifications``)
    to the orchestrator's SlotListener + SlotRegistry: a moved server is announced gone by its
    source and then with its (new flavor's) slots by its target."""

    def setUp(self):
        from fluidvim.nova_driver.tests.test_slot_notifications import RABBIT
        from fluidvim.orchestrator.exception import OrchestratorError
        from fluidvim.orchestrator.rpcapi import check_broker
        try:
            check_broker(CONF, RABBIT)
        except OrchestratorError as e:
            if os.environ.get("CI"):
                raise
            self.skipTest(f"{e} (tools/bootstrap.sh starts it)")
        self.rabbit = RABBIT
        self.topic = f"fvmv_slots_{uuid.uuid4().hex[:10]}"
        super().setUp()

    def _start_compute(self, host, *args, **kwargs):
        self.flags(transport_url=self.rabbit, group="oslo_messaging_notifications")
        self.flags(slot_notifications=True, slot_topic=self.topic, slot_zone="mv",
                   slot_interval=0.2, slot_update_min_interval=0.0, group="fluidvim")
        return super()._start_compute(host, *args, **kwargs)

    def test_migrate_and_resize_move_the_reported_slots(self):
        import oslo_messaging as messaging

        from fluidvim.nova_driver.tests.test_slot_notifications import wait_for
        from fluidvim.orchestrator.notify import SlotListener
        from fluidvim.orchestrator.slots import SlotRegistry

        registry = SlotRegistry(ttl=600)
        transport = messaging.get_notification_transport(CONF, url=self.rabbit)
        self.addCleanup(transport.cleanup)
        listener = SlotListener(transport, self.topic, registry)
        listener.start()
        self.addCleanup(listener.stop)

        def at(host, slots):
            def check():
                reps = [r for r in registry.reports() if r.instance == server["id"]]
                return reps if [(r.host, r.slots) for r in reps] == [(host, slots)] else None
            return wait_for(f"the server's {slots} slots reported from {host}", check)

        server, _ = self._boot("host1")
        at("host1", 2)
        server = self._migrate_server(server)
        at("host2", 2)
        self.assertEqual({"mv/host2": 2}, registry.aggregate("vnf.small", "host"))
        server = self._confirm_resize(server)
        server = self._resize_server(server, self.big["id"])       # to host1, 4 slots
        at("host1", 4)
        server = self._revert_resize(server)                       # back to host2, 2 slots
        at("host2", 2)
        self._delete_server(server)
        wait_for("the server gone", lambda: not [r for r in registry.reports()
                                                 if r.instance == server["id"]], 10)
