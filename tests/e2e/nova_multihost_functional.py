# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Several hosts in a ``nova`` zone: Nova's own in-process functional fixtures (API, conductor,
scheduler, placement) with TWO nova-compute services, host1 and host2, both running
UnikernelDriver with their own state dir (VNF store), run dir and warm pool; real VNFs boot
under QEMU. openstacksdk reaches the fixtures as in tests/e2e/nova_zone_functional.py.

Checks: the orchestrator's NovaZone lists both hosts (each its own placement resource provider
with a CUSTOM_VNF_SESSION_SLOT inventory); each host serves a server from its own warm pool; a
server whose flavor asks for more session slots than host1 has left lands on host2 (placement
filters on the slot inventory), the zone then shows the two hosts with different free slots;
with both hosts able to take a server, fluidvim's FreeSlotsWeigher decides: spread (positive
multiplier) picks the host with more unallocated slot capacity, stack (negative) the other;
after the test no VNF, QEMU, tap or run dir of either host is left. With both computes publishing
slot updates on a REAL RabbitMQ (``NovaMultiHostSlotsTest``): the orchestrator's registry holds
each host's instance with that host's queuing delay, placement's filter sees both hosts with their
own free slots, the resolver spreads eight sessions over the two hosts' instances and launches a
third instance through Nova (fast track) for the ninth.

Not a pytest module (Nova's fixtures break under pytest collection); run with testtools::

    .venv/bin/python -m testtools.run tests.e2e.nova_multihost_functional
"""

from __future__ import annotations

import os
import shutil
import time
import uuid

import nova.conf
import nova.virt.node

from fluidvim.common.zonetypes import LaunchRequest
from fluidvim.nova_driver.tests import test_functional as nft
from fluidvim.orchestrator.zones.nova import NovaZone
from fluidvim.vnf import limits, netdev, spec as specmod
from tests.e2e import nova_zone_functional as nzf

CONF = nova.conf.CONF
HOSTS = ("host1", "host2")


def _qemu_pids(run_dir: str) -> list[int]:
    """QEMU processes whose command line names a path under ``run_dir``."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in cmd and run_dir.rstrip("/") + "/" in cmd:
            out.append(int(p))
    return out


class _MultiHost(nft._FluidvimNovaTest):
    """host1 and host2 (no tests of its own)."""
    slot_capacity = 8              # [fluidvim] session_slot_capacity (both hosts)
    pool_size = 1                  # [vnf] pool_size: one warm shell per host

    def setUp(self):
        # the weigher under test next to Nova's own (the scheduler loads them when it starts)
        self.flags(weight_classes=["nova.scheduler.weights.all_weighers",
                                   "fluidvim.nova_driver.weigher.FreeSlotsWeigher"],
                   group="filter_scheduler")
        self.vnf_ids: set[str] = set()
        self.run_dirs: list[str] = []
        # runs last, after every fixture's cleanup (and after Nova's, which clears attributes)
        self.addCleanup(self._nothing_left, self.run_dirs, self.vnf_ids)
        super().setUp()                            # host1: its state dir, run dir, pool
        self.run_dirs.append(self.driver.manager.run_dir)
        # host2: a second nova-compute with its own state dir, run dir and warm pool. In one
        # process the services share CONF (set per service before it starts: the launch core
        # reads them once) and Nova's cached local node uuid (a separate nova-compute process
        # has its own compute_id file)
        run_dir2 = f"/run/fluidvim-nova-mh-{uuid.uuid4().hex[:8]}"
        self.addCleanup(shutil.rmtree, run_dir2, ignore_errors=True)
        self.flags(state_dir=os.path.join(self.tmp, "state2"), run_dir=run_dir2, group="vnf")
        nova.virt.node.LOCAL_NODE_UUID = None
        self.compute2 = self._start_compute("host2")
        self.driver2 = self.compute2.manager.driver
        self.addCleanup(lambda: self.compute2.manager.driver.manager.destroy_all())
        self.run_dirs.append(self.driver2.manager.run_dir)
        self.drivers = dict(zip(HOSTS, (self.driver, self.driver2)))

        self.conn = nzf.sdk_connection(self)
        flavors = {}
        for svc, slots in (("six", 6), ("four", 4), ("two", 2)):
            self._create_flavor(name=f"vnf.{svc}", memory_mb=CONF.vnf.memory_mb, vcpu=1, disk=1,
                                extra_spec={"resources:CUSTOM_VNF_SESSION_SLOT": str(slots),
                                            "fluidvim:click_config": nft.CONFIG})
            flavors[svc] = f"vnf.{svc}"
        self.zone = NovaZone("nova-mh", self.conn, flavors=flavors, default_image=nft.IMAGE_ID,
                             launch_timeout=60)

    @staticmethod
    def _nothing_left(run_dirs: list, vnf_ids: set):
        for d in run_dirs:
            assert _qemu_pids(d) == [], f"QEMU left under {d}"
            assert not os.path.exists(d), f"{d} left"
        taps = [specmod.tap_for(v, i) for v in vnf_ids for i in range(limits.MAX_NICS)]
        assert [t for t in taps if netdev.exists(t)] == [], "taps left"
        assert len(run_dirs) == 2 and vnf_ids, (run_dirs, vnf_ids)      # the check checked

    def _shell(self, host: str) -> str:
        m = self.drivers[host].manager
        key = m.pool_key(CONF.vnf.backend, CONF.vnf.memory_mb, 1, CONF.vnf.pool_nics)
        self.assertTrue(m.wait_pool(key, 1, timeout=60), f"{host}: the pool did not fill")
        (shell,) = m.store.list(statuses=("pool",))
        self.vnf_ids.add(shell.id)
        return shell.id

    def _figures(self) -> dict:
        return {h.name: (h.slots_total, h.slots_free) for h in self.zone.hosts()}

    def _launch(self, server_id: str, host: str) -> tuple:
        """(launch kind, VNF id) of a server from its system metadata; the VNF is host's."""
        sysmeta = nft._sysmeta(server_id)
        vnf = sysmeta["fluidvim_vnf_id"]
        self.vnf_ids.add(vnf)
        self.assertIsNotNone(self.drivers[host].manager.get(server_id))
        other = self.drivers[HOSTS[1 - HOSTS.index(host)]].manager
        self.assertEqual([], [r for r in other.list() if r.id == vnf])
        return sysmeta["fluidvim_launch_kind"], vnf


class NovaMultiHostTest(_MultiHost):
    def test_two_computes_slots_steer_servers(self):
        timings = {}
        # -- two hosts, each its own provider, state, run dir and warm shell
        hosts = {h.name: h for h in self.zone.hosts()}
        self.assertEqual(sorted(HOSTS), sorted(hosts))
        self.assertEqual(2, len({h.labels["resource_provider"] for h in hosts.values()}))
        self.assertEqual({"host1": (8, 8), "host2": (8, 8)}, self._figures())
        self.assertNotEqual(*self.run_dirs)
        self.assertNotEqual(self.driver.manager.store.url, self.driver2.manager.store.url)
        shells = {h: self._shell(h) for h in HOSTS}
        for h, d in zip(HOSTS, self.run_dirs):
            self.assertEqual([shells[h]], os.listdir(d))
            self.assertEqual(1, len(_qemu_pids(d)))

        # -- 6 of host1's 8 slots, pinned there (from host1's own pool)
        t0 = time.monotonic()
        s1 = self.zone.launch(LaunchRequest(service="six", click_config="", host="host1"))
        timings["server create -> ACTIVE, pinned to host1 (s)"] = round(time.monotonic() - t0, 2)
        self.assertEqual("host1", s1.host)
        self.assertEqual(("warm", shells["host1"]), self._launch(s1.id, "host1"))

        # -- 4 slots: host1 has 2 left, so placement sends it to host2 (from host2's pool)
        t0 = time.monotonic()
        s2 = self.zone.launch(LaunchRequest(service="four", click_config=""))
        timings["server create -> ACTIVE, slots-constrained (s)"] = round(time.monotonic() - t0, 2)
        self.assertEqual("host2", s2.host)
        self.assertEqual(("warm", shells["host2"]), self._launch(s2.id, "host2"))
        self.assertEqual({"host1": (8, 2), "host2": (8, 4)}, self._figures())

        # -- both hosts can take 2 slots: FreeSlotsWeigher decides (stats from the periodic)
        self._run_periodics()
        s3 = self.zone.launch(LaunchRequest(service="two", click_config=""))
        self.assertEqual("host2", s3.host)                   # spread: 8-4 > 8-6 unallocated
        self._launch(s3.id, "host2")
        self.assertEqual({"host1": (8, 2), "host2": (8, 2)}, self._figures())
        self.zone.terminate(s3.id)
        self._run_periodics()
        self.flags(free_slots_weight_multiplier=-10.0, group="fluidvim")
        s4 = self.zone.launch(LaunchRequest(service="two", click_config=""))
        self.assertEqual("host1", s4.host)                   # stack: the fuller host
        self._launch(s4.id, "host1")
        self.assertEqual({"host1": (8, 0), "host2": (8, 4)}, self._figures())

        # -- delete: every slot back on both hosts, no VNF left on either
        for inst in (s1, s2, s4):
            self.zone.terminate(inst.id)
        self.assertEqual({"host1": (8, 8), "host2": (8, 8)}, self._figures())
        self.assertEqual([], self.zone.instances())
        for h in HOSTS:
            self.assertEqual([], self.drivers[h].list_instances())
        print(f"\nnova multi-host (functional fixtures): {timings}")


class NovaMultiHostSlotsTest(_MultiHost):
    """Both computes publish slot updates (``[fluidvim] slot_notifications``) on a REAL RabbitMQ
    to an orchestrator's SlotListener and registry: the resolver hands sessions out across the
    two hosts' instances by free slots, then launches one more through the zone (fast track)
    when none is free; placement's filter sees each host with its own free slots."""

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
        self.topic = f"fvmh_slots_{uuid.uuid4().hex[:10]}"
        super().setUp()

    def _start_compute(self, host, *args, **kwargs):
        # set before each nova-compute starts: init_host starts its publisher with them
        self.flags(transport_url=self.rabbit, group="oslo_messaging_notifications")
        self.flags(slot_notifications=True, slot_topic=self.topic, slot_zone="nova-mh",
                   slot_region="fvmh-region", slot_interval=0.2, slot_update_min_interval=0.0,
                   group="fluidvim")
        return super()._start_compute(host, *args, **kwargs)

    def test_resolver_and_placement_across_computes(self):
        import oslo_messaging as messaging

        from fluidvim.nova_driver.tests.test_slot_notifications import wait_for
        from fluidvim.orchestrator import conf as orchconf
        from fluidvim.orchestrator.deploy import profile_of
        from fluidvim.orchestrator.notify import SlotListener
        from fluidvim.orchestrator.service import Orchestrator

        conf = orchconf.make_conf(connection=f"sqlite:///{self.tmp}/orch.sqlite", local_zone=False,
                                  reservation_ttl=600.0)
        orch = Orchestrator(conf, zones=[self.zone])
        self.addCleanup(orch.close)
        transport = messaging.get_notification_transport(CONF, url=self.rabbit)
        self.addCleanup(transport.cleanup)
        listener = SlotListener(transport, self.topic, orch.registry)
        listener.start()
        self.addCleanup(listener.stop)
        self.assertIsNotNone(self.driver._slot_notes)
        self.assertIsNotNone(self.driver2._slot_notes)
        orch.register_service("four", nft.CONFIG, slots=4, memory_mb=CONF.vnf.memory_mb)

        # one instance per host, each reported by its own compute with its own queuing delay
        insts = {h: self.zone.launch(LaunchRequest(service="four", click_config="", host=h))
                 for h in HOSTS}
        for h, inst in insts.items():
            self.assertEqual(h, inst.host)
            self._launch(inst.id, h)

        def reports():
            reps = {r.instance: r for r in orch.registry.reports()}
            # a delay once the host's pool refilled behind the warm launch (next launch warm,
            # with a warm launch in its history); None before
            return reps if all(i.id in reps and reps[i.id].delay_s is not None
                               for i in insts.values()) else None
        reps = wait_for("both computes' slot updates with their queuing delay", reports)
        for h, inst in insts.items():
            r = reps[inst.id]
            self.assertEqual(("nova-mh", h, "four", 4), (r.zone, r.host, r.service, r.slots))
            qd = self.drivers[h].manager.queuing_delay()
            self.assertEqual("warm", qd["basis"])            # that host's own launch core
            self.assertGreaterEqual(r.delay_s, qd["seconds"])
        self.assertEqual({"nova-mh/host1": 4, "nova-mh/host2": 4},
                         orch.registry.aggregate("four", "host"))

        # placement step 0: both hosts are candidates, each with its own free slots
        row = orch.store.service("four")
        cands, _, _ = orch.placement.candidates(profile_of(row), row.profile, None)
        self.assertEqual({"host1": 4, "host2": 4}, {c.host: c.free_slots for c in cands})

        # eight sessions: the resolver alternates between the hosts' instances (most free first)
        got = [orch.resolve("four") for _ in range(8)]
        self.assertEqual(["slot"] * 8, [g["kind"] for g in got])
        self.assertEqual({"host1": 4, "host2": 4},
                         {h: sum(g["host"] == h for g in got) for h in HOSTS})
        self.assertEqual({insts[g["host"]].id for g in got}, {g["instance"] for g in got})
        self.assertEqual({"nova-mh/host1": 0, "nova-mh/host2": 0},
                         {k: v for k, v in orch.registry.aggregate("four", "host").items()})

        # the ninth: no free slot anywhere -> one more instance through Nova (fast track); its
        # slots come from whichever host placement still has 4 CUSTOM_VNF_SESSION_SLOT on
        t0 = time.monotonic()
        ninth = orch.resolve("four")
        took = time.monotonic() - t0
        self.assertEqual("launched", ninth["kind"])
        self.assertIn(ninth["host"], HOSTS)
        self._launch(ninth["instance"], ninth["host"])
        self.assertEqual(3, ninth["free_slots"])
        figures = {h.name: (h.slots_total, h.slots_free) for h in self.zone.hosts()}
        self.assertEqual(sorted([(8, 0), (8, 4)]), sorted(figures.values()), figures)
        print(f"\nnova multi-host resolver: fast-track launch on {ninth['host']} in {took:.2f} s")

        self.assertEqual([ninth["instance"]], [i["id"] for i in orch.list_instances("four")])
        orch.terminate(ninth["instance"])
        for inst in insts.values():
            self.zone.terminate(inst.id)
        self.assertEqual([], self.zone.instances())
        wait_for("the registry empty", lambda: orch.registry.reports() == [], 10)
