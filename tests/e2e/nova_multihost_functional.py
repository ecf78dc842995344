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
after the test no VNF, QEMU, tap or run dir of either host is left.

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

from fluidvim.nova_driver.tests import test_functional as nft
from fluidvim.orchestrator.zones.base import LaunchRequest
from fluidvim.orchestrator.zones.nova import NovaZone
from fluidvim.vnf import netdev, spec as specmod
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


class NovaMultiHostTest(nft._FluidvimNovaTest):
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
        taps = [specmod.tap_for(v, i) for v in vnf_ids for i in range(specmod.MAX_NICS)]
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

    def _launch(self, server_id: str, host: str) -> tuple:
        """(launch kind, VNF id) of a server from its system metadata; the VNF is host's."""
        sysmeta = nft._sysmeta(server_id)
        vnf = sysmeta["fluidvim_vnf_id"]
        self.vnf_ids.add(vnf)
        self.assertIsNotNone(self.drivers[host].manager.get(server_id))
        other = self.drivers[HOSTS[1 - HOSTS.index(host)]].manager
        self.assertEqual([], [r for r in other.list() if r.id == vnf])
        return sysmeta["fluidvim_launch_kind"], vnf
