# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The ``nova`` zone: OpenStack computes running ``fluidvim.UnikernelDriver``, via openstacksdk.

* scope     = an availability zone and/or a host aggregate (both optional: all computes).
* hosts     = the scope's enabled, up hypervisors whose placement resource provider carries the
              driver's traits (``CUSTOM_UNIKERNEL_KVM``/``TCG``: accelerator,
              ``CUSTOM_FLUIDVIM_BACKEND_QEMU``/``LIBVIRT``: microvm or pc); session slots from the
              provider's ``CUSTOM_VNF_SESSION_SLOT`` inventory minus its usage; utilisation from
              placement's VCPU usage/capacity; the power curve from aggregate metadata
              ``fluidvim_power_system_id``. Computes without the traits are not fluidvim hosts.
* launch    = ``server create`` with the service's flavor and image: the VNF's Click configuration
              and slots come from the flavor's extra specs (``fluidvim:click_config``,
              ``resources:CUSTOM_VNF_SESSION_SLOT``) or the image's properties
              (``fluidvim_click_config``, ``fluidvim_session_slots``), exactly as
              ``nova_driver/driver.py`` reads them; a request's own Click configuration goes as
              the server's ``user_data`` (the driver's day-0 configuration, userdata.py). A request
              whose slots or memory differ from the flavor's is refused with the fix, not
              silently changed. NICs are on the zone's networks; one with a fixed MAC gets a
              Neutron port of that MAC (novanet.py, with networks and stats).
              Waits for ACTIVE; on ERROR or timeout the server is deleted and ZoneError gives
              Nova's fault.
* terminate = delete and wait until it is gone.
* launch times: request → ACTIVE as seen by this adapter, and for servers it did not start (e.g.
              after a restart) Nova's own ``created`` → ``launched_at``.
"""

from __future__ import annotations

import base64
import collections
import datetime
import re
import threading
import time

from openstack import exceptions as osexc

from fluidvim.common import instance_states as istates, zonetypes
from fluidvim.common.zonetypes import HostInfo, InstanceInfo, LaunchRequest, ZoneAdapter, ZoneError
from fluidvim.evaluator.model import EnvironmentType
from fluidvim.vnf import states as vstates

from .novanet import META_PORTS, NovaNetworks

SLOT_RC = "CUSTOM_VNF_SESSION_SLOT"          # nova_driver.request.SLOT_RC
ACCEL_TRAITS = {"CUSTOM_UNIKERNEL_KVM": "kvm", "CUSTOM_UNIKERNEL_TCG": "tcg"}
MACHINE_TRAITS = {"CUSTOM_FLUIDVIM_BACKEND_QEMU": (vstates.QEMU, "microvm"),
                  "CUSTOM_FLUIDVIM_BACKEND_LIBVIRT": (vstates.LIBVIRT, "pc")}
NAME_PREFIX = "fluidvim-"
META_SERVICE = "fluidvim_service"
META_POWER = "fluidvim_power_system_id"
_NAME_OK = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


class NovaZone(NovaNetworks, ZoneAdapter):
    """An availability zone / aggregate of fluidvim computes as a fluidvim zone."""

    kind = zonetypes.NOVA
    kernel_source = zonetypes.KERNEL_IMAGE

    def __init__(self, name: str, conn, region: str = "default",
                 availability_zone: str | None = None, aggregate: str | None = None,
                 flavors: dict | None = None, images: dict | None = None,
                 default_flavor: str | None = None, default_image: str | None = None,
                 launch_timeout: float = 120.0, poll_interval: float = 0.1):
        """``conn``: an ``openstack.connection.Connection`` (e.g. ``openstack.connect(cloud=...)``).
        ``flavors`` / ``images`` map service -> flavor / image (name or id); the defaults apply to
        services not in them."""
        super().__init__(name, region)
        if conn is None:
            raise ZoneError(f"zone {name}: needs an openstack Connection "
                            "(openstack.connect(cloud='...') or clouds.yaml)")
        self.conn = conn
        self.availability_zone, self.aggregate = availability_zone, aggregate
        self.flavors, self.images = dict(flavors or {}), dict(images or {})
        self.default_flavor, self.default_image = default_flavor, default_image
        self.launch_timeout, self.poll_interval = float(launch_timeout), float(poll_interval)
        self._lock = threading.Lock()
        self._launches: collections.deque = collections.deque(maxlen=200)   # (service, ms)

    @classmethod
    def from_cloud(cls, name: str, cloud: str | None = None, **kwargs) -> NovaZone:
        """A zone on a ``clouds.yaml`` entry (or the ``OS_*`` environment when ``cloud`` is None)."""
        import openstack  # lazy: openstacksdk is a slow import (a NovaZone given a connection skips it)
        try:
            conn = openstack.connect(cloud=cloud)
        except osexc.SDKException as e:
            raise ZoneError(f"zone {name}: cannot use cloud {cloud!r}: {e} (define it in clouds.yaml "
                            "or set the OS_* variables)") from None
        return cls(name, conn, **kwargs)

    # -- scope and hosts -------------------------------------------------------------------

    def _fail(self, what: str, e: Exception) -> ZoneError:
        return ZoneError(f"zone {self.name}: {what} failed: {type(e).__name__}: {e}")

    def _scope(self) -> tuple[set | None, dict]:
        """(service hosts in scope or None for all, aggregate metadata by host)."""
        hosts: set | None = None
        meta: dict = {}
        try:
            aggs = list(self.conn.compute.aggregates())
            if self.availability_zone:
                azs = {a.name: a for a in self.conn.compute.availability_zones(details=True)}
                # Nova lists only AZs with hosts; an AZ is also an aggregate's availability_zone
                az_aggs = [a for a in aggs if a.availability_zone == self.availability_zone]
                if self.availability_zone in azs:
                    hosts = set((azs[self.availability_zone].hosts or {}).keys())
                elif az_aggs:
                    hosts = {h for a in az_aggs for h in a.hosts or []}
                else:
                    known = sorted(set(azs) | {a.availability_zone for a in aggs if a.availability_zone})
                    raise ZoneError(f"zone {self.name}: availability zone {self.availability_zone!r} "
                                    f"does not exist (there are: {', '.join(known) or 'none'})")
        except osexc.SDKException as e:
            raise self._fail("listing availability zones/aggregates", e) from None
        if self.aggregate:
            match = [a for a in aggs if self.aggregate in (a.name, str(a.id), a.uuid)]
            if not match:
                raise ZoneError(f"zone {self.name}: aggregate {self.aggregate!r} does not exist "
                                f"(there are: {', '.join(sorted(a.name for a in aggs)) or 'none'})")
            members = set(match[0].hosts or [])
            hosts = members if hosts is None else hosts & members
        for a in aggs:
            for h in a.hosts or []:
                if (a.metadata or {}).get(META_POWER):
                    meta.setdefault(h, {})[META_POWER] = a.metadata[META_POWER]
        return hosts, meta

    def _provider(self, hv):
        """The hypervisor's resource provider (same uuid since compute API 2.53), else by name."""
        p = self.conn.placement
        try:
            return p.get_resource_provider(hv.id)
        except osexc.NotFoundException:
            found = list(p.resource_providers(name=hv.name))
            if not found:
                raise
            return found[0]

    def hosts(self) -> list[HostInfo]:
        scope, meta = self._scope()
        out = []
        try:
            hvs = list(self.conn.compute.hypervisors(details=True))
        except osexc.SDKException as e:
            raise self._fail("listing hypervisors", e) from None
        for hv in hvs:
            svc_host = (hv.service_details or {}).get("host") or hv.name
            if scope is not None and svc_host not in scope:
                continue
            if hv.state != "up" or hv.status != "enabled":
                continue
            try:
                rp = self._provider(hv)
                traits = set(self.conn.placement.get_resource_provider_trait(rp.id).traits or [])
                accel = next((v for k, v in ACCEL_TRAITS.items() if k in traits), None)
                if accel is None:
                    continue                               # not a fluidvim compute
                inv = {i.resource_class: i for i in self.conn.placement.resource_provider_inventories(rp.id)}
                usages = self.conn.placement.fetch_resource_provider_usages(rp.id).usages or {}
            except osexc.NotFoundException:
                continue                                   # no provider (yet)
            except osexc.SDKException as e:
                raise self._fail(f"reading placement for {hv.name}", e) from None
            launcher, machine = next((v for k, v in MACHINE_TRAITS.items() if k in traits),
                                     ("nova", "unknown"))
            slot = inv.get(SLOT_RC)
            total = int((slot.total - (slot.reserved or 0)) if slot else 0)
            used = int(usages.get(SLOT_RC, 0))
            vcpu = inv.get("VCPU")
            util = 0.0
            if vcpu and vcpu.total:
                cap = (vcpu.total - (vcpu.reserved or 0)) * (vcpu.allocation_ratio or 1.0)
                util = min(1.0, usages.get("VCPU", 0) / cap) if cap > 0 else 0.0
            cpu_info = hv.cpu_info if isinstance(hv.cpu_info, dict) else {}
            env = EnvironmentType(launcher="nova", accel=accel, machine=machine,
                                  cpu_model=str(cpu_info.get("model") or "unknown"), vcpus=1,
                                  memory_mb=32, extra=(("backend", launcher),))
            out.append(HostInfo(name=svc_host, env=env, slots_total=total,
                                slots_free=max(0, total - used), cpu_util=util,
                                power_system_id=meta.get(svc_host, {}).get(META_POWER),
                                labels={"zone": self.name, "region": self.region,
                                        "hypervisor": hv.name, "resource_provider": rp.id,
                                        "availability_zone": self.availability_zone,
                                        "aggregate": self.aggregate,
                                        "cpu_util_basis": "placement VCPU usage",
                                        "cpus": int(vcpu.total) if vcpu else None}))
        return out

    # -- instances ---------------------------------------------------------------------------

    def _in_scope(self, server, scope) -> bool:
        if self.availability_zone and server.availability_zone not in (None, self.availability_zone):
            return False
        return scope is None or server.compute_host in (None, *scope)

    def instances(self) -> list[InstanceInfo]:
        scope, _ = self._scope()
        out = []
        try:
            servers = list(self.conn.compute.servers(details=True))
        except osexc.SDKException as e:
            raise self._fail("listing servers", e) from None
        for s in servers:
            service = (s.metadata or {}).get(META_SERVICE)
            if service is None or not (s.name or "").startswith(NAME_PREFIX):
                continue
            if not self._in_scope(s, scope):
                continue
            out.append(InstanceInfo(id=s.id, name=s.name, service=service, host=s.compute_host,
                                    status=_status(s.status),
                                    slots_total=int((s.metadata or {}).get("fluidvim_slots") or 0),
                                    launch_ms=_nova_launch_ms(s)))
        return out

    # -- launch --------------------------------------------------------------------------------

    def _flavor_image(self, service: str):
        fl = self.flavors.get(service, self.default_flavor)
        im = self.images.get(service, self.default_image)
        if not fl or not im:
            raise ZoneError(f"zone {self.name}: no {'flavor' if not fl else 'image'} for service "
                            f"{service!r}: configure flavors/images (service -> name or id) or "
                            "default_flavor/default_image")
        try:
            flavor = self.conn.compute.find_flavor(fl, ignore_missing=True, get_extra_specs=True)
        except osexc.SDKException as e:
            raise self._fail(f"looking up flavor {fl!r}", e) from None
        image = self._image(im)
        if flavor is None:
            raise ZoneError(f"zone {self.name}: flavor {fl!r} of service {service!r} does not exist")
        if image is None:
            raise ZoneError(f"zone {self.name}: image {im!r} of service {service!r} does not exist")
        return flavor, image

    def _image(self, im: str):
        try:
            return self.conn.image.find_image(im, ignore_missing=True)
        except (osexc.EndpointNotFound, osexc.NotSupported):
            # a cloud whose catalog has no image service for us: an image id still works for
            # server create, but its properties are unknown (the flavor must carry the config)
            if _UUID.match(im):
                return _ImageRef(im)
            raise ZoneError(f"zone {self.name}: no image service to look up image {im!r}; "
                            "give the image id instead") from None
        except osexc.SDKException as e:
            raise self._fail(f"looking up image {im!r}", e) from None

    @staticmethod
    def effective_vnf(flavor, image) -> dict:
        """What the driver will run: click config and slots from the flavor, else the image."""
        specs = dict(flavor.extra_specs or {})
        props = dict(getattr(image, "properties", None) or {})
        cfg = specs.get("fluidvim:click_config") or props.get("fluidvim_click_config")
        slots = (specs.get(f"resources:{SLOT_RC}") or specs.get("fluidvim:session_slots")
                 or props.get("fluidvim_session_slots"))
        return {"click_config": cfg, "slots": int(slots) if slots not in (None, "") else None}

    def can_launch_on_demand(self, service: str) -> bool:
        try:
            self._flavor_image(service)
            return bool(self.hosts())
        except ZoneError:
            return False

    def launch(self, req: LaunchRequest) -> InstanceInfo:
        if not req.service or not _NAME_OK.match(req.service):
            raise ZoneError(f"service: {req.service!r} is not a valid service name "
                            "(letters, digits, '_', '.', '-'; at most 100)")
        fixed = [i for i, n in enumerate(req.nics) if n.tap or n.ovs]
        if fixed:
            raise ZoneError(f"nics[{fixed[0]}]: zone {self.name} (nova) takes a server's taps "
                            "from its Neutron ports; leave tap and ovs unset")
        flavor, image = self._flavor_image(req.service)
        eff = self.effective_vnf(flavor, image)
        if req.slots is not None and eff["slots"] is not None and int(req.slots) != eff["slots"]:
            raise ZoneError(f"slots: flavor {flavor.name!r} gives {eff['slots']} session slots, the request "
                            f"asks {req.slots}; use a flavor with resources:{SLOT_RC}={req.slots}")
        if req.memory_mb is not None and int(req.memory_mb) != flavor.ram:
            raise ZoneError(f"memory_mb: flavor {flavor.name!r} has {flavor.ram} MB, the request asks "
                            f"{req.memory_mb}; the flavor decides in Nova")
        networks = self._networks(req.bridges)
        name = f"{NAME_PREFIX}{req.service}-{req.token}"
        attrs = {"name": name, "flavor_id": flavor.id, "image_id": image.id, "networks": networks,
                 "metadata": {META_SERVICE: req.service, "fluidvim_slots": str(eff["slots"] or 0)}}
        if req.click_config and _norm(req.click_config) != _norm(eff["click_config"] or ""):
            attrs["user_data"] = _click_user_data(req.click_config)
        ports = self._mac_ports(name, req.nics, networks)
        if ports:
            attrs["metadata"][META_PORTS] = ",".join(ports)
        az = self.availability_zone
        if req.host:
            attrs["availability_zone"] = f"{az or ''}:{req.host}"     # admin-only host pinning
        elif az:
            attrs["availability_zone"] = az
        t0 = time.monotonic()
        try:
            server = self.conn.compute.create_server(**attrs)
        except osexc.SDKException as e:
            self._delete_ports(ports)
            raise self._fail(f"creating server {name}", e) from None
        try:
            server = self._wait_active(server, t0)
        except BaseException as e:
            try:
                self._delete(server.id)
                self._delete_ports(ports)
            except ZoneError as de:
                raise ZoneError(f"{e}; and deleting server {server.id} failed too: {de}") from e
            raise
        ms = (time.monotonic() - t0) * 1000.0
        with self._lock:
            self._launches.appendleft((req.service, ms))
        return InstanceInfo(id=server.id, name=name, service=req.service, host=server.compute_host,
                            status=istates.RUNNING, slots_total=int(eff["slots"] or 0), launch_ms=ms)

    def _networks(self, bridges):
        names = [b for b in (bridges or ()) if b]
        if not names:
            return "none"
        out = []
        for n in names:
            try:
                net = self.conn.network.find_network(n, ignore_missing=True)
            except osexc.SDKException as e:
                raise self._fail(f"looking up network {n!r}", e) from None
            if net is None:
                raise ZoneError(f"nics: network {n!r} does not exist in zone {self.name}")
            out.append({"uuid": net.id})
        return out

    def _wait_active(self, server, t0):
        return self._wait_status(server, "ACTIVE", t0)

    def _wait_status(self, server, want: str, t0):
        """The server once it has status ``want`` and no task under way (an action's task state
        is set before Nova's API answers, so an old status is not taken for the new one)."""
        deadline = t0 + self.launch_timeout
        while True:
            try:
                server = self.conn.compute.get_server(server.id)
            except osexc.SDKException as e:
                raise self._fail(f"polling server {server.id}", e) from None
            if server.status == want and not server.task_state:
                return server
            if server.status == "ERROR":
                fault = (server.fault or {}).get("message") or "no fault recorded"
                raise ZoneError(f"zone {self.name}: server {server.name} went to ERROR: {fault}")
            if time.monotonic() > deadline:
                raise ZoneError(f"zone {self.name}: server {server.name} not {want} after "
                                f"{self.launch_timeout:g} s (status {server.status})")
            time.sleep(self.poll_interval)

    def _delete(self, server_id: str, timeout: float = 60.0) -> None:
        try:
            self.conn.compute.delete_server(server_id, ignore_missing=True)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                # gone (404), not just "DELETED": Nova shows that status before it frees the
                # server's Placement allocations (the host's slots) and destroys the record
                if self.conn.compute.find_server(server_id, ignore_missing=True) is None:
                    return
                time.sleep(self.poll_interval)
        except osexc.SDKException as e:
            raise self._fail(f"deleting server {server_id}", e) from None
        raise ZoneError(f"zone {self.name}: server {server_id} still exists {timeout:g} s after delete")

    def terminate(self, instance_id: str) -> None:
        ports = self._server_ports(instance_id)
        self._delete(instance_id)
        self._delete_ports(ports)

    def instance_action(self, instance_id: str, action: str) -> str:
        """Nova's server actions: pause/unpause, reboot (SOFT; the fluidvim compute driver
        restarts the VNF's Click configuration), rebuild (from the server's own image). Returns
        once Nova has finished (no task state left)."""
        c = self.conn.compute
        calls = {zonetypes.PAUSE: ("PAUSED", lambda s: c.pause_server(s)),
                 zonetypes.UNPAUSE: ("ACTIVE", lambda s: c.unpause_server(s)),
                 zonetypes.REBOOT: ("ACTIVE", lambda s: c.reboot_server(s, "SOFT")),
                 zonetypes.REBUILD: ("ACTIVE", lambda s: c.rebuild_server(
                     s, image=getattr(s.image, "id", None) or s.image["id"]))}
        if action not in calls:
            raise ZoneError(f"action: {action!r} is not one of "
                            f"{', '.join(zonetypes.INSTANCE_ACTIONS)}")
        want, call = calls[action]
        t0 = time.monotonic()
        try:
            server = c.get_server(instance_id)
            if not (action == zonetypes.UNPAUSE and server.status == "ACTIVE"
                    or action == zonetypes.PAUSE and server.status == "PAUSED"):
                call(server)
        except osexc.SDKException as e:
            raise self._fail(f"{action} of server {instance_id}", e) from None
        return _status(self._wait_status(server, want, t0).status)

    def launch_times_ms(self, service: str | None = None, limit: int = 20) -> list[float]:
        with self._lock:
            mine = [ms for s, ms in self._launches if service in (None, s)]
        if len(mine) >= limit:
            return mine[:limit]
        try:
            known = [i for i in self.instances() if i.launch_ms is not None
                     and service in (None, i.service)]
        except ZoneError:
            known = []
        return (mine + [i.launch_ms for i in known])[:limit]


_UUID = re.compile(r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$")


class _ImageRef:
    """An image known only by id (no image service reachable)."""

    def __init__(self, image_id: str):
        self.id = self.name = image_id
        self.properties: dict = {}


# a Nova server status -> the instance status (one not here: ERROR)
SERVER_STATUS = {"ACTIVE": istates.RUNNING, "BUILD": istates.BUILDING, "PAUSED": istates.PAUSED,
                 "ERROR": istates.ERROR,
                 "DELETED": istates.DELETED, "SOFT_DELETED": istates.DELETED}


def _status(s: str | None) -> str:
    return SERVER_STATUS.get(s or "", istates.ERROR)


def _norm(text: str) -> str:
    return " ".join(text.split())


def _click_user_data(config: str) -> str:
    """A Click configuration as ``user_data`` (base64) the driver takes as one: plain text, or
    after a ``#click-config`` line when it starts with ``#`` (cloud-init's formats do)."""
    text = config if not config.startswith("#") else "#click-config\n" + config
    return base64.b64encode(text.encode()).decode("ascii")


def _ts(v) -> datetime.datetime | None:
    if not v:
        return None
    try:
        t = datetime.datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def _nova_launch_ms(server) -> float | None:
    """Nova's created -> launched_at (``created`` has whole seconds: a coarse measure)."""
    a, b = _ts(server.created_at), _ts(server.launched_at)
    if a is None or b is None:
        return None
    return max(0.0, (b - a).total_seconds() * 1000.0)
