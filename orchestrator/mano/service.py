# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Network services from NFV descriptors, in the orchestrator: deploy, list, show, delete.

A deploy validates everything before it creates anything (descriptors, zone, kernels, service
names, every service field), then, in one zone: one network per virtual link, one service per
VNF profile (and VDU), pinned to the zone, and the instances through placement
(``PlacementEngine.place(deploy_it=True, bridges=...)``: steps 0-3 recorded as for any service),
NICs on the virtual links' networks. The record (``network_services`` table) is updated after every
step, so a restarted orchestrator knows what exists; a failure rolls back everything created.

:class:`NSEndpoint` serves it over RPC in its own namespace (``ns``, version 1.0).
"""

from __future__ import annotations

import threading
import time

import oslo_messaging as messaging
from oslo_log import log as logging

from fluidvim.measure import elapsed_ms

from ..exception import InvalidRequest, NotFound, OrchestratorError, Refused, invalid
from ..rpc import rpc_method, validate_service
from ..zones.base import ZoneAdapter, ZoneError
from . import descriptors

LOG = logging.getLogger(__name__)

NAMESPACE = "ns"
NS_API_VERSION = "1.0"



class NSManager:
    def __init__(self, orch):
        self.orch = orch
        self.store = orch.store
        self._lock = threading.Lock()
        # active-active: only rows of no worker; a dead peer's are failed by its taker
        n = self.store.abandon_ns(owners=[None] if orch.members is not None else None)
        if n:
            LOG.warning("%d network service operation(s) were under way when the orchestrator "
                        "stopped: marked failed (`fluidvim ns rm` cleans up)", n)

    # -- checks (nothing is created before all of them pass) --
    def plan(self, nsd: dict, vnfds: list, name: str | None = None) -> descriptors.Plan:
        if not isinstance(vnfds, list):
            raise invalid("vnfds", "must be a list of descriptors")
        try:
            docs = [descriptors.Document.from_dict(d) for d in vnfds]
            return descriptors.build_plan(descriptors.Document.from_dict(nsd), docs, name)
        except descriptors.DescriptorError as e:
            raise InvalidRequest(str(e), field=e.path) from None

    def _zone(self, zone: str | None) -> ZoneAdapter:
        zones = self.orch.zones
        if zone is None:
            if self.orch.local_zone is not None:
                return self.orch.local_zone
            if len(zones) == 1:
                return next(iter(zones.values()))
            raise invalid("zone", f"several zones ({', '.join(sorted(zones))}) and none given",
                          "give --zone")
        if zone not in zones:
            raise NotFound(f"zone: no zone {zone!r} (zones: {', '.join(sorted(zones))})",
                           field="zone")
        return zones[zone]

    def _check(self, plan: descriptors.Plan, z: ZoneAdapter) -> list:
        """(unit, service fields) per unit, every one validated."""
        if plan.networks and type(z).create_network is ZoneAdapter.create_network:
            raise invalid("zone", f"zone {z.name} ({z.kind}) cannot create the NS's virtual links "
                          f"({', '.join(plan.networks)})", "deploy to a zone that can (local)")
        try:
            taken = {n.name for n in z.networks()} & set(plan.networks.values())
        except ZoneError as e:
            raise invalid("zone", f"zone {z.name}: cannot list networks: {e}") from None
        if taken:
            raise invalid("name", f"network(s) {', '.join(sorted(taken))} already exist in zone "
                          f"{z.name}", "give the NS another --name, or `fluidvim network rm` them")
        existing = {s.name for s in self.store.services()}
        out = []
        for u in plan.units:
            if z.kind in ("local", "nomad") and not u.kernel_is_file:
                raise invalid("kernel", f"VNF profile {u.profile}: {u.kernel!r} is an image name, "
                              f"but zone {z.name} ({z.kind}) boots a kernel file",
                              "set sw-image-desc.image to the kernel's path")
            if z.kind == "nova" and u.kernel_is_file:
                raise invalid("kernel", f"VNF profile {u.profile}: zone {z.name} (nova) boots "
                              f"Glance images, not the file {u.kernel}",
                              "set sw-image-desc.image to the Glance image name")
            if u.service in existing:
                raise invalid("name", f"service {u.service!r} (for VNF profile {u.profile}) "
                              "already exists", "give the NS another --name, or remove the service")
            fields = {**u.service_fields(), "requirements": {"zones": [z.name]}}
            validate_service(u.service, u.click_config, **fields)
            out.append((u, fields))
        return out

    def _name_free(self, name: str) -> None:
        for row in self.store.network_services():
            if row.name == name:
                raise invalid("name", f"a network service named {name!r} exists ({row.status})",
                              f"`fluidvim ns rm {name}` or give --name")

    # -- deploy --
    def deploy(self, nsd: dict, vnfds: list, name: str | None = None,
               zone: str | None = None) -> dict:
        t_all = time.perf_counter()
        plan = self.plan(nsd, vnfds, name)
        z = self._zone(zone)
        self._name_free(plan.name)
        units = self._check(plan, z)
        with self._lock:                    # one live NS per name
            self._name_free(plan.name)
            row = self.store.add_ns(name=plan.name, nsd_id=plan.nsd, zone=z.name,
                                    status="deploying", plan=plan.to_dict(),
                                    descriptors={"nsd": nsd, "vnfds": vnfds})
        nets, services, instances, steps = {}, [], [], []

        def step(text, t0):
            steps.append({"step": text, "ms": elapsed_ms(t0, 1)})
            LOG.info("ns %s: %s (%.1f ms)", plan.name, text, steps[-1]["ms"])
            self.store.update_ns(row.id, networks=nets, services=services, instances=instances,
                                 steps=steps)

        what = "validate"
        try:
            steps.append({"step": f"validated {len(plan.units)} VNF(s), {len(plan.networks)} "
                                  f"virtual link(s) for zone {z.name}", "ms": elapsed_ms(t_all, 1)})
            for key, net in plan.networks.items():
                what = f"network {key}"
                t = time.perf_counter()
                info = z.create_network(net)
                nets[key] = {"id": info.id, "name": info.name}
                step(f"network {key}: {info.name} ({info.id})", t)
            for u, fields in units:
                what = f"service {u.service}"
                t = time.perf_counter()
                self.orch.register_service(u.service, u.click_config, **fields)
                services.append(u.service)
                step(f"service {u.service} registered (VNF profile {u.profile}, VDU {u.vdu})", t)
            for u, _ in units:
                bridges = [nets[n.network]["id"] if n.network else None for n in u.nics]
                for k in range(u.instances):
                    what = f"instance {k + 1}/{u.instances} of {u.service}"
                    t = time.perf_counter()
                    p = self.orch.placement.place(
                        u.service, deploy_it=True, bridges=bridges,
                        request={"service": u.service, "ns": plan.name, "deploy": True})
                    inst = p.instance
                    instances.append({"id": inst["id"], "name": inst["name"],
                                      "service": u.service, "profile": u.profile, "vdu": u.vdu,
                                      "decision_id": p.decision_id,
                                      "nics": [{"cpd": n.cpd, "network": n.network}
                                               for n in u.nics]})
                    step(f"{what}: {inst['name']} on {p.zone}/{p.host} "
                         f"(launch {inst.get('launch_ms')} ms)", t)
        except Exception as e:  # noqa: BLE001 - whatever failed, nothing may stay behind
            msg = getattr(e, "message", None) or f"{type(e).__name__}: {e}"
            leftovers = self._teardown(z, nets, services, instances)
            status = "failed"
            err = f"{what} failed: {msg}"
            if leftovers:
                err += "; rollback incomplete: " + "; ".join(leftovers)
            else:
                nets, services, instances = {}, [], []
                err += (f"; rolled back ({len(steps) - 1} step(s) undone)"
                        if len(steps) > 1 else "")
            self.store.update_ns(row.id, status=status, error=err, networks=nets,
                                 services=services, instances=instances, steps=steps)
            LOG.warning("ns %s: deploy failed: %s", plan.name, err)
            if not isinstance(e, (OrchestratorError, ZoneError)):
                LOG.exception("ns %s: unexpected error", plan.name)
            raise Refused(f"ns {plan.name}: {err}")
        steps.append({"step": f"deployed in {elapsed_ms(t_all, 1):.0f} ms", "ms": elapsed_ms(t_all, 1)})
        self.store.update_ns(row.id, status="running", steps=steps)
        return self.show(row.id)

    def _teardown(self, z: ZoneAdapter | None, nets: dict, services: list,
                  instances: list) -> list[str]:
        """Remove instances, services, networks (in that order); [] or what could not go."""
        left = []
        for inst in reversed(instances):
            try:
                self.orch.terminate(inst["id"])
            except NotFound:
                pass
            except Exception as e:  # noqa: BLE001
                left.append(f"instance {inst['name']}: {getattr(e, 'message', e)}")
        for svc in reversed(services):
            try:
                self.orch.remove_service(svc)
            except NotFound:
                pass
            except Exception as e:  # noqa: BLE001
                left.append(f"service {svc}: {e}")
        for key, net in reversed(list(nets.items())):
            if z is None:
                left.append(f"network {key}: its zone is gone")
                continue
            try:
                z.delete_network(net["id"])
            except Exception as e:  # noqa: BLE001
                left.append(f"network {key} ({net['id']}): {e}")
        return left

    # -- the rest of the lifecycle --
    def delete(self, name: str) -> dict:
        with self._lock:
            row = self.store.network_service(name)
            if row.status == "deleted":
                raise NotFound(f"ns: {name!r} is already deleted", field="ns")
            if row.status in ("deploying", "deleting"):
                raise Refused(f"ns {row.name}: {row.status} right now; try again when it is done")
            self.store.update_ns(row.id, status="deleting")
        left = self._teardown(self.orch.zones.get(row.zone), row.get("networks"),
                              row.get("services"), row.get("instances"))
        if left:
            self.store.update_ns(row.id, status="failed", error="delete incomplete: "
                                 + "; ".join(left))
            raise Refused(f"ns {row.name}: delete incomplete: {'; '.join(left)}; fix and run "
                          f"`fluidvim ns rm {row.name}` again")
        self.store.update_ns(row.id, status="deleted")
        LOG.info("ns %s deleted", row.name)
        return {"deleted": row.name, "id": row.id}

    def list(self, deleted: bool = False) -> list[dict]:
        return [{"id": r.id, "name": r.name, "nsd": r.nsd_id, "zone": r.zone,
                 "status": r.status, "instances": len(r.get("instances")),
                 "networks": len(r.get("networks")), "error": r.error,
                 "created_at": r.created_at} for r in self.store.network_services(deleted)]

    def show(self, name: str) -> dict:
        """The record, with what the zone and the orchestrator say about its parts now."""
        row = self.store.network_service(name)
        z = self.orch.zones.get(row.zone)
        live_nets = {}
        if z is not None:
            try:
                live_nets = {n.id: n for n in z.networks()}
            except Exception as e:  # noqa: BLE001 - the record is still worth showing
                LOG.warning("zone %s: cannot list networks: %s", row.zone, e)
        status = {i.id: i.status for i in self.store.instances(statuses=None)}
        nets = []
        for key, n in row.get("networks").items():
            live = live_nets.get(n["id"])
            nets.append({"link": key, "name": n["name"], "id": n["id"],
                         "exists": live is not None,
                         "ports": list(live.ports) if live is not None else []})
        plan = row.get("plan")
        return {"id": row.id, "name": row.name, "nsd": row.nsd_id, "zone": row.zone,
                "status": row.status, "error": row.error, "created_at": row.created_at,
                "updated_at": row.updated_at, "vnfds": plan.get("vnfds", []),
                "services": row.get("services"), "networks": nets,
                "instances": [{**i, "status": status.get(i["id"], "unknown")}
                              for i in row.get("instances")],
                "steps": row.get("steps"), "warnings": plan.get("warnings", [])}


class NSEndpoint:
    """RPC namespace ``ns``, API 1.0: deploy, validate, list, show, delete."""

    target = messaging.Target(namespace=NAMESPACE, version=NS_API_VERSION)

    def __init__(self, orch):
        self.ns = orch.ns

    @rpc_method
    def deploy(self, ctxt, nsd, vnfds, name=None, zone=None):
        return self.ns.deploy(nsd, vnfds, name, zone)

    @rpc_method
    def validate(self, ctxt, nsd, vnfds, name=None):
        return self.ns.plan(nsd, vnfds, name).to_dict()

    @rpc_method
    def list(self, ctxt, deleted=False):
        return self.ns.list(bool(deleted))

    @rpc_method
    def show(self, ctxt, name):
        return self.ns.show(name)

    @rpc_method
    def delete(self, ctxt, name):
        return self.ns.delete(name)

