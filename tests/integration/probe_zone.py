# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A minimal, test-only local ZoneAdapter over the launch core, for the evaluator's tests and bench.

The orchestrator's real local zone is ``fluidvim.orchestrator.zones.local``; :func:`make_zone`
uses it when it exists and this one otherwise. This adapter launches real VNFs through
:class:`fluidvim.vnf.manager.VNFManager` (one host: this machine) and sets ``InstanceInfo.kind``
("cold"/"warm") so the boot probe can tell warm launches apart.
"""

from __future__ import annotations

import hashlib
import threading

from fluidvim.evaluator.model import EnvironmentType
from fluidvim.orchestrator.zones.base import HostInfo, InstanceInfo, LaunchRequest, ZoneAdapter, ZoneError
from fluidvim.vnf.manager import VNFManager


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


class LauncherZone(ZoneAdapter):
    """The launch core of this machine as a one-host zone (test helper)."""

    kind = "local"

    def __init__(self, name: str, mgr: VNFManager, host: str = "localhost", labels=None):
        super().__init__(name)
        self.mgr, self.host = mgr, host
        self.labels = dict(labels or {})
        self._lock = threading.Lock()
        self._mine: dict[str, InstanceInfo] = {}

    def env(self) -> EnvironmentType:
        with open(self.mgr.kernel, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        be = self.mgr.backend()
        return EnvironmentType(launcher="qemu" if be.name == "qemu" else be.name,
                               accel=self.mgr.accel, machine=be.machine, cpu_model=cpu_model(),
                               vcpus=1, memory_mb=self.mgr.conf.vnf.memory_mb, kernel_sha256=sha,
                               extra=tuple(sorted(self.labels.items())))

    def hosts(self):
        return [HostInfo(name=self.host, env=self.env(), labels=dict(self.labels))]

    def instances(self):
        live = {r.id for r in self.mgr.list()}
        with self._lock:
            return [i for i in self._mine.values() if i.id in live]

    def launch(self, req: LaunchRequest) -> InstanceInfo:
        if req.host not in (None, self.host):
            raise ZoneError(f"zone {self.name} has no host {req.host!r} (it has {self.host!r})")
        try:
            res = self.mgr.launch(req.click_config, name=req.name, bridges=list(req.bridges),
                                  slots=req.slots, memory_mb=req.memory_mb, vcpus=req.vcpus,
                                  warm=req.warm, kernel=req.kernel)
        except Exception as e:  # the launch core leaves nothing behind on failure
            raise ZoneError(f"launch in zone {self.name} failed: {e}") from e
        info = InstanceInfo(id=res.vnf_id, name=res.name, service=req.service, host=self.host,
                            status="running", slots_total=req.slots or 0,
                            launch_ms=res.total_ms)
        info.kind = res.kind
        with self._lock:
            self._mine[res.vnf_id] = info
        return info

    def terminate(self, instance_id: str) -> None:
        try:
            self.mgr.destroy(instance_id)
        except KeyError:
            pass
        with self._lock:
            self._mine.pop(instance_id, None)

    def stats(self, instance_id: str) -> dict:
        return self.mgr.stats(instance_id)

    def launch_times_ms(self, service=None, limit=20):
        recs = self.mgr.store.recent_launches(limit, self.mgr.backend().name, "cold")
        return [r.total_ms for r in recs]


def make_zone(name: str, mgr: VNFManager, **kw) -> ZoneAdapter:
    """The orchestrator's local zone if it exists on this branch, else :class:`LauncherZone`."""
    return LauncherZone(name, mgr, **kw)
