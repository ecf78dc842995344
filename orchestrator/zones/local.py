# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The embedded ``local`` zone: VNFs on this machine through the launch core (VNFManager).

One host (this machine). Its environment type comes from the launch core's facts: the backend
(``qemu`` = microvm, ``libvirt`` = pc + qboot), the accelerator actually detected (KVM or TCG),
the CPU model of /proc/cpuinfo and the sha256 of the VNF kernel. Instances the orchestrator starts
are named ``<service>.<8 hex>`` so the zone can tell which service a VNF runs after a restart.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import uuid as uuidlib

from fluidvim.common import instance_states as istates, zonetypes
from fluidvim.common.zonetypes import (
    NETWORK_NAME_RE,
    HostInfo,
    InstanceInfo,
    LaunchRequest,
    NetworkInfo,
    ZoneAdapter,
    ZoneError,
)
from fluidvim.evaluator.model import EnvironmentType
from fluidvim.vnf import cgroups, netdev, states as vstates
from fluidvim.vnf.backends import LaunchError
from fluidvim.vnf.control import ControlError
from fluidvim.vnf.manager import VNFManager
from fluidvim.vnf.spec import SpecError


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def instance_name(service: str, token: str | None = None) -> str:
    return f"{service}.{token or uuidlib.uuid4().hex[:8]}"


def service_of(vnf_name: str) -> str:
    """The service of a VNF the orchestrator named; "" for VNFs started otherwise."""
    return vnf_name.rsplit(".", 1)[0] if "." in vnf_name else ""


# a VNF status (of those VNFManager.list() gives) -> the instance status the orchestrator sees;
# a crashed VNF is an instance in error
INSTANCE_STATUS = {vstates.BOOTING: istates.BUILDING, vstates.RUNNING: istates.RUNNING,
                   vstates.PAUSED: istates.PAUSED, vstates.CRASHED: istates.ERROR}


def slots_total(spec) -> int:
    """A VNF's session slots as the zone reports them: at its QoE's capacity when it has one
    (kept in its spec, so a rebuilt or restarted VNF reports it too), else its flow table's."""
    return min(spec.session_slots, spec.qoe.capacity) if spec.qoe else spec.session_slots


class LocalZone(ZoneAdapter):
    kind = zonetypes.LOCAL
    kernel_source = zonetypes.KERNEL_FILE
    in_process = True

    def __init__(self, name: str, manager: VNFManager, region: str = "default",
                 bridges: tuple = (), host_name: str | None = None, labels: dict | None = None):
        super().__init__(name, region)
        self.mgr = manager
        self.bridges = tuple(bridges)
        self.host_name = host_name or socket.gethostname()
        self.labels = dict(labels or {})
        self._sha: dict[str, str] = {}
        self._lock = threading.Lock()

    def _kernel_sha(self, path: str) -> str:
        with self._lock:
            if path not in self._sha:
                with open(path, "rb") as f:
                    self._sha[path] = hashlib.sha256(f.read()).hexdigest()
            return self._sha[path]

    def env(self) -> EnvironmentType:
        be = self.mgr.backend()
        c = self.mgr.conf.vnf
        try:
            sha = self._kernel_sha(self.mgr.kernel)
        except OSError:
            sha = ""
        return EnvironmentType(launcher=be.name, accel=self.mgr.accel, machine=be.machine,
                               cpu_model=cpu_model(), vcpus=1, memory_mb=c.memory_mb,
                               kernel_sha256=sha)

    def hosts(self) -> list[HostInfo]:
        s = self.mgr.slots()
        try:
            with open("/proc/loadavg") as f:
                load = float(f.read().split()[0])
            util = min(1.0, load / (os.cpu_count() or 1))
        except (OSError, ValueError):
            util = 0.0
        return [HostInfo(name=self.host_name, env=self.env(), slots_total=s["total"],
                         slots_free=s["free"], cpu_util=util,
                         labels={"zone": self.name, "region": self.region, **self.labels})]

    def instances(self) -> list[InstanceInfo]:
        """The zone's VNFs, those still booting included (``building``): a launch cut in its
        middle by a dead orchestrator leaves one, which the survivor must find to remove it."""
        out = []
        for rec in self.mgr.store.list(statuses=(vstates.BOOTING, *vstates.LISTED)):
            if rec.pool_key:                   # a warm shell being made: no instance of anyone
                continue
            st = INSTANCE_STATUS.get(rec.status, istates.ERROR)
            out.append(InstanceInfo(id=rec.id, name=rec.name, service=service_of(rec.name),
                                    host=self.host_name, status=st,
                                    slots_total=slots_total(rec.spec)))
        return out

    def instance_slots(self) -> dict[str, dict]:
        """{vnf id: {"name", "service", "total", "used", "free"}} asked from each running VNF,
        with ``watts`` (its attributed watts) while this host's exporter attributes power."""
        out = {}
        per_name = self.mgr.slots()["vnfs"]
        power = (self.mgr.power_state() or {}).get("vnfs", {})
        for rec in self.mgr.list():
            s = per_name.get(rec.name)
            if s is not None and rec.status == vstates.RUNNING:
                out[rec.id] = {"name": rec.name, "service": service_of(rec.name), **s,
                               "watts": (power.get(rec.id) or {}).get("watts")}
        return out

    def instance_sessions(self, instance_id: str) -> int | None:
        """The VNF's live sessions as it counts them (its ``stats`` slots ``used``: a flow ends
        on FIN both ways, RST or its idle timeout); None when it cannot be asked."""
        try:
            return int(self.mgr.stats(instance_id)["slots"]["used"])
        except (KeyError, ControlError, OSError, TypeError, ValueError):
            return None

    def stats(self, instance_id: str) -> dict:
        """The VNF's own stats (slots, counters, per-packet latency), e.g. for load probes, with
        ``host_cpu``: its QEMU threads' seconds on a CPU and waiting for one
        (:func:`fluidvim.vnf.cgroups.cpu_waits`) where its group has them."""
        out = self.mgr.stats(instance_id)
        waits = cgroups.cpu_waits(self.mgr.get(instance_id).id)
        return out if waits is None else {**out, "host_cpu": waits}

    def can_launch_on_demand(self, service: str) -> bool:
        return self.cannot_launch_reason(service) is None

    def cannot_launch_reason(self, service: str) -> str | None:
        if not os.path.exists(self.mgr.kernel):
            return f"VNF kernel {self.mgr.kernel} is missing (make -C unikernel)"
        return None

    def launch(self, req: LaunchRequest) -> InstanceInfo:
        if req.host not in (None, self.host_name):
            raise ZoneError(f"host: zone {self.name} has only host {self.host_name!r}, "
                            f"not {req.host!r}")
        try:
            res = self.mgr.launch(req.click_config, name=req.name or instance_name(req.service, req.token),
                                  nics=req.nics or self.bridges or (None, None),
                                  slots=req.slots, memory_mb=req.memory_mb,
                                  vcpus=req.vcpus, warm=req.warm, kernel=req.kernel,
                                  qoe=req.qoe)
        except (SpecError, ControlError, LaunchError, OSError) as e:
            raise ZoneError(f"zone {self.name}: launch of {req.service} failed: {e}") from e
        return InstanceInfo(id=res.vnf_id, name=res.name, service=req.service,
                            host=self.host_name, status=istates.RUNNING,
                            slots_total=slots_total(self.mgr.get(res.vnf_id).spec),
                            launch_ms=res.total_ms,
                            kind=res.kind)

    def terminate(self, instance_id: str) -> None:
        try:
            self.mgr.destroy(instance_id)
        except KeyError:
            pass

    def instance_action(self, instance_id: str, action: str) -> str:
        """pause/unpause: the VNF's vCPUs (QMP stop/cont, libvirt suspend/resume); reboot: its
        Click configuration again (a soft restart, like the Nova driver's SOFT reboot; a paused
        VNF is unpaused first); rebuild: a new boot from its recorded spec (a crashed VNF too)."""
        try:
            rec = self.mgr.get(instance_id)
            if action == zonetypes.PAUSE:
                rec = self.mgr.pause(rec.id)
            elif action == zonetypes.UNPAUSE:
                rec = self.mgr.unpause(rec.id)
            elif action == zonetypes.REBOOT:
                if rec.status == vstates.CRASHED:
                    raise ZoneError(f"zone {self.name}: VNF {rec.name} crashed ({rec.reason}); "
                                    "a reboot cannot bring it back: rebuild it")
                if rec.status == vstates.PAUSED:
                    self.mgr.unpause(rec.id)
                self.mgr.configure(rec.id, rec.config, slots=rec.spec.session_slots)
                rec = self.mgr.get(rec.id)
            elif action == zonetypes.REBUILD:
                rec = self.mgr.rebuild(rec.id)
            else:
                raise ZoneError(f"action: {action!r} is not one of "
                                f"{', '.join(zonetypes.INSTANCE_ACTIONS)}")
        except KeyError as e:
            raise ZoneError(f"zone {self.name}: {e.args[0]}") from None
        except (ControlError, LaunchError, SpecError, OSError) as e:
            raise ZoneError(f"zone {self.name}: {action} of {instance_id} failed: {e}") from e
        return INSTANCE_STATUS.get(rec.status, istates.ERROR)

    # -- networks: Linux bridges named from (zone, name), the name kept in the bridge's alias --
    def _alias(self, name: str = "") -> str:
        return f"fluidvim:{self.name}:{name}"

    def bridge_for(self, name: str) -> str:
        """The bridge of network ``name`` in this zone (15 characters at most: IFNAMSIZ)."""
        return "fvn" + hashlib.sha256(self._alias(name).encode()).hexdigest()[:10]

    def networks(self) -> list[NetworkInfo]:
        prefix = self._alias()
        return [NetworkInfo(id=br, name=alias[len(prefix):], zone=self.name,
                            ports=netdev.ports_of(br))
                for br, alias in sorted(netdev.aliased(prefix).items())]

    def create_network(self, name: str) -> NetworkInfo:
        if not isinstance(name, str) or not NETWORK_NAME_RE.fullmatch(name):
            raise ZoneError(f"name: {name!r} is not a valid network name: use 1-63 letters, "
                            "digits, '_', '.' or '-', starting with a letter or digit")
        br = self.bridge_for(name)
        try:
            netdev.ensure_bridge(br)
            netdev.set_alias(br, self._alias(name))
        except (netdev.NetdevError, OSError) as e:
            netdev.delete_link(br)
            raise ZoneError(f"zone {self.name}: cannot create network {name!r} (bridge {br}): "
                            f"{e}") from e
        return NetworkInfo(id=br, name=name, zone=self.name, ports=netdev.ports_of(br))

    def delete_network(self, network_id: str) -> None:
        net = next((n for n in self.networks() if network_id in (n.id, n.name)), None)
        if net is None:
            return                                      # idempotent, like terminate
        if net.ports:
            raise ZoneError(f"network: {net.name!r} ({net.id}) still has NICs attached "
                            f"({', '.join(net.ports)}): terminate their VNFs first")
        netdev.delete_link(net.id)

    def launch_times_ms(self, service: str | None = None, limit: int = 20) -> list[float]:
        """Recent successful launches of the kind the next one would be (warm when a shell is
        ready): the launch core measures request -> forwarding for every VNF, whatever service."""
        qd = self.mgr.queuing_delay()
        return [r.total_ms for r in self.mgr.store.recent_launches(limit, qd["backend"],
                                                                   qd["basis"])]

    def next_launch_kind(self, service: str) -> str:
        return self.mgr.queuing_delay()["basis"]         # warm when a shell is ready

    def start_pool(self, size: int) -> str | None:
        """Keep ``size`` warm shells with this zone's NIC count (0 = none)."""
        if size <= 0:
            return None
        return self.mgr.start_pool(size, nics=len(self.bridges) or 2)
