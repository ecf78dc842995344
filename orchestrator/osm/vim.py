# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The orchestrator as a VIM: images, flavors and single VMs with explicit NICs and day-0 config.

What OSM RO (through :mod:`.vimconn_fluidvim`) needs beyond the orchestrator's service API:

* **images** of a zone = VNF kernels it can boot. Local zone: the PVH ELF files in ``[osm_vim]
  images_dir`` (name = file name without ``.elf``), the launch core's own kernel (``[osm_vim]
  default_image_name``) and kernels registered by path (:meth:`VimService.register_image`; rows in
  ``vim_images``). Other zones: registered names their VIM resolves (a Glance image, an artifact).
* **flavors** = memory (MiB), vCPUs and optionally session slots (``vim_flavors``);
* **VMs** = one VNF launched in a zone with an image, a flavor, NICs on zone networks (ids from
  ``create_network``) and its Click configuration; recorded as an orchestrator instance (so
  ``fluidvim instance list`` shows it and its launch feeds the queuing delay) and in ``vim_vms``
  with its interfaces (tap name, MAC, network).

:class:`VimEndpoint` serves this over RPC in its own namespace (``vim``, version 1.1) next to the
orchestrator's endpoint; :class:`VimAPI` is its client. Tables live in the orchestrator's database.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
import uuid as uuidlib

import oslo_messaging as messaging
import sqlalchemy as sa
from oslo_log import log as logging
from sqlalchemy import orm

from fluidvim.common import instance_states as istates
from fluidvim.common.zonetypes import (
    NETWORK_NAME_RE,
    LaunchRequest,
    NicRequest,
    ZoneError,
    mac_problem,
)
from fluidvim.vnf import limits
from fluidvim.vnf.control import ControlError

from ..exception import NotFound, Refused, invalid
from ..rpc import number_field, rpc_method
from ..rpcapi import OrchestratorAPI
from . import conf as osmconf
from .models import VimFlavor, VimImage, VimVM  # noqa: F401 - tables of the orchestrator's schema

LOG = logging.getLogger(__name__)

VIM_NAMESPACE = "vim"
VIM_API_VERSION = "1.1"     # 1.1: vm_action
ELF_MAGIC = b"\x7fELF"
IMAGE_NS = uuidlib.UUID("6f1c1f5e-8a53-4d0e-9a7e-6c1d2b0f7a11")   # ids of directory images
SERVICE_CHARS = re.compile(r"[^A-Za-z0-9_-]+")


def flavor_dict(row: VimFlavor) -> dict:
    return {"id": row.id, "name": row.name, "ram": row.ram, "vcpus": row.vcpus, "disk": row.disk,
            "slots": row.slots}


def service_name(vm_name: str) -> str:
    """A valid orchestrator service name from a VM name RO chose (instances group by it)."""
    s = SERVICE_CHARS.sub("-", str(vm_name or "")).strip("-_")[:40].rstrip("-_")
    return s or "vm"


class VimService:
    """The orchestrator-side logic of the VIM API (one per orchestrator)."""

    def __init__(self, orch):
        self.orch = orch
        osmconf.register_opts(orch.conf)
        self.store = orch.store      # its schema includes these tables (Store checked it)
        self.Session = orm.sessionmaker(self.store.engine, expire_on_commit=False)
        self._sums: dict[tuple, str] = {}
        self._lock = threading.Lock()

    # -- zones --
    def zone_name(self, zone: str | None) -> str:
        if zone:
            self.orch._zone(zone)
            return zone
        if self.orch.local_zone is None:
            raise NotFound("zone: this orchestrator runs no local zone; name one of "
                           f"{', '.join(sorted(self.orch.zones)) or '(none)'} in the VIM "
                           "account's config (zone: NAME)", field="zone")
        return self.orch.local_zone.name

    def describe(self, zone: str | None = None) -> dict:
        name = self.zone_name(zone)
        z = self.orch.zones[name]
        return {"zone": name, "kind": z.kind, "region": z.region, "api": VIM_API_VERSION,
                "zones": sorted(self.orch.zones)}

    # -- images --
    def _checksum(self, path: str) -> str:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        with self._lock:
            if key not in self._sums:
                with open(path, "rb") as f:
                    self._sums[key] = hashlib.md5(f.read(), usedforsecurity=False).hexdigest()
            return self._sums[key]

    @staticmethod
    def _is_elf(path: str) -> bool:
        try:
            with open(path, "rb") as f:
                return f.read(4) == ELF_MAGIC
        except OSError:
            return False

    def _file_image(self, zone: str, name: str, path: str, source: str) -> dict:
        return {"id": str(uuidlib.uuid5(IMAGE_NS, f"{zone}:{path}")), "name": name,
                "location": path, "checksum": self._checksum(path), "zone": zone,
                "source": source}

    def list_images(self, zone: str | None = None) -> list[dict]:
        zone = self.zone_name(zone)
        z = self.orch.zones[zone]
        out = []
        if z.in_process:
            o = self.orch.conf.osm_vim
            if o.default_image_name and os.path.exists(z.mgr.kernel):
                out.append(self._file_image(zone, o.default_image_name, z.mgr.kernel, "default"))
            try:
                names = sorted(os.listdir(o.images_dir))
            except OSError:
                names = []
            for fn in names:
                path = os.path.join(os.path.abspath(o.images_dir), fn)
                if os.path.isfile(path) and self._is_elf(path):
                    name = fn[:-4] if fn.endswith(".elf") else fn
                    out.append(self._file_image(zone, name, path, "directory"))
        with self.Session() as s:
            rows = list(s.scalars(sa.select(VimImage).where(VimImage.zone == zone)
                                  .order_by(VimImage.created_at)))
        out += [{"id": r.id, "name": r.name, "location": r.location, "checksum": r.checksum,
                 "zone": r.zone, "source": "registered"} for r in rows]
        return out

    def image(self, zone: str | None, image_id: str) -> dict:
        zone = self.zone_name(zone)
        for im in self.list_images(zone):
            if im["id"] == image_id:
                return im
        raise NotFound(f"image_id: zone {zone} has no image {image_id!r} (list them with "
                       "get_image_list; register a kernel with new_image)", field="image_id")

    def register_image(self, zone: str | None, name: str, location: str) -> dict:
        zone = self.zone_name(zone)
        z = self.orch.zones[zone]
        if not isinstance(name, str) or not NETWORK_NAME_RE.fullmatch(name):
            raise invalid("name", f"{name!r} is not a valid image name",
                          "use 1-63 letters, digits, '_', '.' or '-'")
        if not isinstance(location, str) or not location:
            raise invalid("location", "missing", "give the path of the VNF kernel (PVH ELF)")
        checksum = None
        if z.in_process:
            location = os.path.abspath(location)
            if not os.path.isfile(location):
                raise invalid("location", f"{location} is not a file on the orchestrator's host",
                              "copy the VNF kernel there first (local zone images are files)")
            if not self._is_elf(location):
                raise invalid("location", f"{location} is not an ELF file",
                              "a local-zone image is a PVH ELF kernel such as "
                              "unikernel/build/fluidvim-vnf.elf")
            checksum = self._checksum(location)
        for im in self.list_images(zone):
            if im["location"] == location:
                return im                                   # idempotent by location
        row = VimImage(id=str(uuidlib.uuid4()), zone=zone, name=name, location=location,
                       checksum=checksum, created_at=time.time())
        with self.Session.begin() as s:
            s.add(row)
        return {"id": row.id, "name": name, "location": location, "checksum": checksum,
                "zone": zone, "source": "registered"}

    def delete_image(self, zone: str | None, image_id: str) -> dict:
        im = self.image(zone, image_id)
        if im["source"] != "registered":
            raise invalid("image_id", f"image {im['name']!r} is the file {im['location']}, "
                          "offered because it is in [osm_vim] images_dir or is the [vnf] "
                          "kernel", "remove the file (or set default_image_name empty) instead")
        with self.Session.begin() as s:
            s.execute(sa.delete(VimImage).where(VimImage.id == image_id))
        return {"deleted": image_id}

    # -- flavors --
    def create_flavor(self, name: str, ram, vcpus, disk=0, slots=None) -> dict:
        if not isinstance(name, str) or not name or len(name) > 255:
            raise invalid("name", f"{name!r} is not a valid flavor name", "1-255 characters")
        row = VimFlavor(id=str(uuidlib.uuid4()), name=name,
                        ram=number_field("ram", ram, limits.MEMORY_MB_MIN, limits.MEMORY_MB_MAX,
                                         integer=True),
                        vcpus=number_field("vcpus", vcpus, limits.VCPUS_MIN, limits.VCPUS_MAX,
                                           integer=True),
                        disk=number_field("disk", disk or 0, 0, None, integer=True),
                        slots=number_field("slots", slots, limits.SLOTS_MIN, limits.SLOTS_MAX, integer=True,
                                      allow_none=True),
                        created_at=time.time())
        with self.Session.begin() as s:
            s.add(row)
        return flavor_dict(row)

    def list_flavors(self) -> list[dict]:
        with self.Session() as s:
            return [flavor_dict(r) for r in s.scalars(sa.select(VimFlavor)
                                                       .order_by(VimFlavor.created_at))]

    def _flavor(self, flavor_id: str) -> VimFlavor:
        with self.Session() as s:
            row = s.get(VimFlavor, flavor_id)
        if row is None:
            raise NotFound(f"flavor_id: no flavor {flavor_id!r} (create it with new_flavor)",
                           field="flavor_id")
        return row

    def get_flavor(self, flavor_id: str) -> dict:
        return flavor_dict(self._flavor(flavor_id))

    def delete_flavor(self, flavor_id: str) -> dict:
        self._flavor(flavor_id)
        with self.Session.begin() as s:
            s.execute(sa.delete(VimFlavor).where(VimFlavor.id == flavor_id))
        return {"deleted": flavor_id}

    # -- VMs --
    def launch(self, zone: str | None, name: str, image_id: str, flavor_id: str, nics,
               click_config: str, description: str = "", slots: int | None = None,
               macs=None) -> dict:
        """``slots`` overrides the flavor's session slots (the day-0 directive); ``macs``: NIC
        i's MAC (None entries = assigned), what RO's ``net_list[i].mac_address`` asks for."""
        zone = self.zone_name(zone)
        z = self.orch.zones[zone]
        im = self.image(zone, image_id)
        fl = self._flavor(flavor_id)
        slots = number_field("slots", slots, limits.SLOTS_MIN, limits.SLOTS_MAX, integer=True,
                        allow_none=True) or fl.slots
        if not isinstance(click_config, str) or not click_config.strip():
            raise invalid("click_config", "the VNF's Click configuration is empty",
                          "give it as the VDU's day-0 user-data (cloud-init)")
        if not isinstance(nics, list) or len(nics) > limits.MAX_NICS:
            raise invalid("nics", f"a VNF has a list of at most {limits.MAX_NICS} NICs")
        macs = list(macs) if macs else []
        if macs and len(macs) != len(nics):
            raise invalid("macs", f"{len(macs)} MACs for {len(nics)} NICs", "one (or null) per NIC")
        for i, mac in enumerate(macs):
            why = mac_problem(mac) if mac is not None else None
            if why:
                raise invalid(f"macs[{i}]", why)
        known = {n.id for n in z.networks()}
        for i, net in enumerate(nics):
            if net not in known:
                raise NotFound(f"nics[{i}]: zone {zone} has no network {net!r} (create it with "
                               "new_network)", field=f"nics[{i}]")
        svc = service_name(name)
        vnf_name = f"{svc}.{uuidlib.uuid4().hex[:8]}"
        lid = self.store.launch_started(zone, svc, None)
        try:
            inst = z.launch(LaunchRequest(service=svc, click_config=click_config, name=vnf_name,
                                          slots=slots, memory_mb=fl.ram, vcpus=fl.vcpus,
                                          kernel=im["location"],
                                          nics=tuple(NicRequest(bridge=net, mac=mac) for net, mac
                                                     in zip(nics, macs or [None] * len(nics)))))
        except ZoneError as e:
            self.store.launch_finished(lid, False, error=str(e))
            cause = e.__cause__
            if isinstance(cause, ControlError) and cause.code == "config":
                where = f" at line {cause.line}, column {cause.col}" if cause.line else ""
                raise invalid("click_config", f"the VNF rejected its Click configuration{where}: "
                              f"{cause.message}", "fix the VDU's day-0 user-data") from None
            raise Refused(f"launch: {e}") from None
        try:
            ifaces = self._interfaces(z, inst.id, nics)
            self.store.add_instance(id=inst.id, zone=zone, host=inst.host, service=svc,
                                    name=inst.name, status=istates.RUNNING,
                                    slots_total=inst.slots_total, decision_id=None,
                                    launch_ms=inst.launch_ms)
            with self.Session.begin() as s:
                s.add(VimVM(id=inst.id, zone=zone, name=str(name), vnf_name=inst.name,
                            description=str(description or ""), image_id=image_id,
                            flavor_id=flavor_id, interfaces_json=json.dumps(ifaces),
                            created_at=time.time()))
        except Exception as e:
            z.terminate(inst.id)
            self.store.set_instance_status(inst.id, istates.DELETED)
            self.store.launch_finished(lid, False, error=f"{type(e).__name__}: {e}")
            raise
        self.store.launch_finished(lid, True, instance_id=inst.id, kind=inst.kind)
        LOG.info("VIM launch %s (%s) in zone %s: %s", inst.name, inst.id, zone,
                 ", ".join(f"{i['vim_interface_id']}@{i['vim_net_id']}" for i in ifaces))
        return self.get_vm(inst.id)

    @staticmethod
    def _interfaces(z, instance_id: str, nics) -> list[dict]:
        if z.in_process:
            spec = z.mgr.get(instance_id).spec
            return [{"vim_interface_id": n.tap, "mac_address": n.mac, "vim_net_id": n.bridge}
                    for n in spec.nics[:len(nics)]]
        return [{"vim_interface_id": f"{instance_id}/{i}", "mac_address": None,
                 "vim_net_id": net} for i, net in enumerate(nics)]

    def _rows(self, vm_ids) -> dict[str, VimVM]:
        with self.Session() as s:
            return {r.id: r for r in s.scalars(sa.select(VimVM).where(VimVM.id.in_(vm_ids)))}

    def vm_status(self, vm_ids) -> dict:
        """{vm id: {"status": an instance status (istates.STATUSES), "error", "host", ...}}."""
        if not isinstance(vm_ids, list):
            raise invalid("vm_ids", "must be a list of VM ids")
        rows = self._rows(vm_ids)
        live = {}
        for zone in {r.zone for r in rows.values()}:
            z = self.orch.zones.get(zone)
            live[zone] = {i.id: i for i in z.instances()} if z is not None else {}
        out = {}
        for vid in vm_ids:
            row = rows.get(vid)
            inst = live.get(row.zone, {}).get(vid) if row else None
            if inst is None:
                out[vid] = {"status": istates.DELETED, "error": "no such VM in the VIM"}
                continue
            err = None
            if inst.status == istates.ERROR:
                err = self._reason(row.zone, vid) or f"VNF {inst.name} is not running"
            out[vid] = {"status": inst.status, "error": err, "host": inst.host, "zone": row.zone,
                        "name": row.name, "vnf_name": inst.name,
                        "slots_total": inst.slots_total, "interfaces": row.interfaces}
        return out

    def _reason(self, zone: str, vid: str) -> str | None:
        z = self.orch.zones.get(zone)
        if z is None or not z.in_process:
            return None
        try:
            rec = z.mgr.get(vid)
        except KeyError:
            return None
        return f"VNF {rec.name} is {rec.status}" + (f": {rec.reason}" if rec.reason else "")

    def get_vm(self, vm_id: str) -> dict:
        row = self._rows([vm_id]).get(vm_id)
        if row is None:
            raise NotFound(f"vm_id: no VM {vm_id!r} in this VIM", field="vm_id")
        st = self.vm_status([vm_id])[vm_id]
        return {"id": row.id, "name": row.name, "description": row.description,
                "zone": row.zone, "image_id": row.image_id, "flavor_id": row.flavor_id,
                "created_at": row.created_at, "interfaces": row.interfaces, **st}

    def vm_action(self, vm_id: str, action: str) -> dict:
        """pause, unpause, reboot or rebuild a VM this API launched (the orchestrator's
        instance_action: same VM id, NICs and configuration after each); the VM after it."""
        if self._rows([vm_id]).get(vm_id) is None:
            raise NotFound(f"vm_id: no VM {vm_id!r} in this VIM", field="vm_id")
        self.orch.instance_action(vm_id, action)
        return self.get_vm(vm_id)

    def delete_vm(self, vm_id: str) -> dict:
        """Terminate a VM this API launched; a VM it does not know is already gone."""
        row = self._rows([vm_id]).get(vm_id)
        if row is None:
            return {"deleted": vm_id, "existed": False}
        try:
            self.orch.terminate(vm_id)           # zone, instance row, slot reports
        except NotFound:
            z = self.orch.zones.get(row.zone)
            if z is not None:
                z.terminate(vm_id)
        with self.Session.begin() as s:
            s.execute(sa.delete(VimVM).where(VimVM.id == vm_id))
        return {"deleted": vm_id, "existed": True}


class VimEndpoint:
    """RPC API of :class:`VimService`: namespace ``vim``, version 1.1. JSON in, JSON out."""

    target = messaging.Target(namespace=VIM_NAMESPACE, version=VIM_API_VERSION)

    def __init__(self, orch):
        self.vim = VimService(orch)

    @rpc_method
    def describe(self, ctxt, zone=None):
        return self.vim.describe(zone)

    @rpc_method
    def list_images(self, ctxt, zone=None):
        return self.vim.list_images(zone)

    @rpc_method
    def register_image(self, ctxt, name, location, zone=None):
        return self.vim.register_image(zone, name, location)

    @rpc_method
    def delete_image(self, ctxt, image_id, zone=None):
        return self.vim.delete_image(zone, image_id)

    @rpc_method
    def list_flavors(self, ctxt):
        return self.vim.list_flavors()

    @rpc_method
    def get_flavor(self, ctxt, flavor_id):
        return self.vim.get_flavor(flavor_id)

    @rpc_method
    def create_flavor(self, ctxt, name, ram, vcpus, disk=0, slots=None):
        return self.vim.create_flavor(name, ram, vcpus, disk, slots)

    @rpc_method
    def delete_flavor(self, ctxt, flavor_id):
        return self.vim.delete_flavor(flavor_id)

    @rpc_method
    def launch(self, ctxt, name, image_id, flavor_id, nics, click_config, zone=None,
               description="", slots=None, macs=None):
        return self.vim.launch(zone, name, image_id, flavor_id, nics, click_config, description,
                               slots, macs)

    @rpc_method
    def vm_status(self, ctxt, vm_ids):
        return self.vim.vm_status(vm_ids)

    @rpc_method
    def get_vm(self, ctxt, vm_id):
        return self.vim.get_vm(vm_id)

    @rpc_method
    def vm_action(self, ctxt, vm_id, action):
        return self.vim.vm_action(vm_id, action)

    @rpc_method
    def delete_vm(self, ctxt, vm_id):
        return self.vim.delete_vm(vm_id)


class VimAPI(OrchestratorAPI):
    """Client of :class:`VimEndpoint` (the orchestrator's own methods - networks - stay on
    :class:`OrchestratorAPI`; both can share one transport)."""

    def __init__(self, conf, **kw):
        super().__init__(conf, **kw)
        self.namespace_api(self, VIM_NAMESPACE, VIM_API_VERSION)

    def vim(self, method: str, timeout: float | None = None, **kwargs):
        return self._call(method, version=VIM_API_VERSION, timeout=timeout, **kwargs)
