# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The Nomad zone's networks and VNF stats: what a stage-1 load probe with a generator VNF needs
there (evaluator/genprobe.py, issue 23 item 2).

* networks = private bridges. Nomad has no network API; the plugin makes a bridge a task's
  ``nic`` names when its name starts with the plugin config's ``private_bridges`` prefix, and
  deletes it with the last VNF plugged into it (nomad_driver/unikernel/privnet.go). A client
  with such a prefix fingerprints it (``driver.unikernel.private_bridges``).
  :meth:`NomadNetworks.create_network` names such a bridge (prefix + a hash of zone and network
  name) and launches with a NIC on it are pinned to clients that make them. A private bridge
  joins only VNFs on the same client: pin them to one host (the load probe does).
  :meth:`NomadNetworks.delete_network` forgets the network; its bridge is already gone, or goes
  with its last VNF.
* stats    = the VNF's own counters from its task's vnf-stats.json (the plugin rewrites it every
  second, handle.go vnfStatsEvery): :meth:`NomadNetworks.stats` waits for a reading taken after
  the call, so two calls never return the same old file.
"""

from __future__ import annotations

import hashlib
import json
import time

import requests
from nomad.api import exceptions as nexc

from fluidvim.common.zonetypes import NETWORK_NAME_RE, NetworkInfo, ZoneError

from .nomadtext import STATS_FILE, TASK, epoch_s

ATTR_PRIVATE = "driver.unikernel.private_bridges"
STATS_FRESH_S = 5.0             # how long stats() waits for a reading newer than the call
STATS_POLL_S = 0.1


class NomadNetworks:
    """Mixed into :class:`~fluidvim.orchestrator.zones.nomad.NomadZone` (uses its ``api``,
    ``name``, ``_call``, ``_nodes``; ``_private``: bridge -> network, ``_bridge_prefix``: the
    clients' prefix once known)."""

    _private: dict[str, NetworkInfo]
    _bridge_prefix: str | None

    def _private_prefix(self) -> str:
        """The ``private_bridges`` prefix the zone's clients fingerprint (ZoneError: none does,
        or they disagree)."""
        prefixes = set()
        for stub in self._nodes():
            node = self._call("reading a node", self.api.node.get_node, stub["ID"])
            p = (node.get("Attributes") or {}).get(ATTR_PRIVATE)
            if p:
                prefixes.add(p)
        if len(prefixes) != 1:
            why = ("no client of the zone makes private bridges" if not prefixes else
                   f"its clients use different private_bridges prefixes {sorted(prefixes)}")
            raise ZoneError(f"zone {self.name} (nomad) cannot create networks: {why}; set one "
                            "private_bridges prefix (e.g. \"fvp\") in the unikernel plugin "
                            "config of the clients (etc/nomad/client.hcl)")
        return prefixes.pop()

    def networks(self) -> list[NetworkInfo]:
        return list(self._private.values())

    def create_network(self, name: str) -> NetworkInfo:
        if not isinstance(name, str) or not NETWORK_NAME_RE.fullmatch(name):
            raise ZoneError(f"name: {name!r} is not a valid network name: use 1-63 letters, "
                            "digits, '_', '.' or '-', starting with a letter or digit")
        prefix = self._private_prefix()
        br = prefix + hashlib.sha256(f"{self.name}/{name}".encode()).hexdigest()[:15 - len(prefix)]
        self._bridge_prefix = prefix
        return self._private.setdefault(br, NetworkInfo(id=br, name=name, zone=self.name))

    def delete_network(self, network_id: str) -> None:
        for br, net in list(self._private.items()):
            if network_id in (br, net.name):
                del self._private[br]             # the plugin deletes the bridge with its last VNF

    def private_constraint(self, bridges) -> list[dict]:
        """The job constraint of a launch with NICs on private bridges: a client that makes
        them (none: no such NIC)."""
        prefix = self._bridge_prefix
        if not prefix or not any(b and b.startswith(prefix) for b in bridges):
            return []
        return [{"LTarget": "${attr." + ATTR_PRIVATE + "}", "RTarget": prefix, "Operand": "="}]

    def stats(self, instance_id: str) -> dict:
        """The VNF's ``stats`` (control channel) from a vnf-stats.json written after this call."""
        t0 = time.time()
        alloc = self._live_alloc(instance_id)
        deadline = time.monotonic() + STATS_FRESH_S
        while True:
            doc = self._stats_doc(alloc)
            taken = epoch_s(doc.get("time")) if doc else None
            if taken is not None and taken >= t0:
                return doc["stats"]
            if time.monotonic() >= deadline:
                raise ZoneError(f"zone {self.name}: no reading of {instance_id}'s VNF newer than "
                                f"{STATS_FRESH_S:.0f} s in its task's vnf-stats.json: is the "
                                "client's telemetry collection_interval longer, or the VNF gone?")
            time.sleep(STATS_POLL_S)

    def _live_alloc(self, job_id: str) -> str:
        try:
            allocs = self._call("reading allocations", self.api.job.get_allocations, job_id)
        except nexc.URLNotFoundNomadException:
            allocs = []
        live = [a for a in allocs if a.get("DesiredStatus") == "run"
                and a.get("ClientStatus") in ("running", "pending")]
        if not live:
            raise ZoneError(f"zone {self.name}: instance {job_id} has no running allocation")
        return max(live, key=lambda a: a.get("CreateIndex", 0))["ID"]

    def _stats_doc(self, alloc_id: str) -> dict | None:
        try:
            doc = json.loads(self.api.client.cat.read_file(alloc_id, path=f"{TASK}/{STATS_FILE}"))
        except (nexc.BaseNomadException, requests.RequestException, ValueError):
            return None
        return doc if isinstance(doc, dict) and isinstance(doc.get("stats"), dict) else None
