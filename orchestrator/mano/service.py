# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Network services from NFV descriptors, in the orchestrator: deploy, scale, heal, list, show,
delete.

A deploy validates everything before it creates anything (descriptors, zone, kernels, service
names, every service field), then, in one zone: one network per virtual link, one service per
VNF profile (and VDU), pinned to the zone, and the instances through placement
(``PlacementEngine.place(deploy_it=True, bridges=...)``: steps 0-3 recorded as for any service),
NICs on the virtual links' networks. The record (``network_services`` table) is updated after every
step, so a restarted orchestrator knows what exists; a failure rolls back everything created.

:class:`NSEndpoint` serves it over RPC in its own namespace (``ns``, version 1.2: ``start``
runs deploy, scale, heal or delete in the background and returns the operation occurrence).

Scale (by a VNFD scaling aspect, on request or from session slots: :mod:`.scaling`) and heal
(replace an instance the zone no longer runs, NICs on the same virtual links) launch and remove
instances in the NS's zone directly (``deploy.deploy``: launch record, instance, slots at once),
never beyond max-number-of-instances / max-scale-level nor below min-number-of-instances. Every
instantiate, scale, heal and terminate is an operation occurrence (``ns_operations``: state
processing -> completed | failed | rolled_back, start/end, error) shown by ``ns show``.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import threading
import time
import uuid

import oslo_messaging as messaging
from oslo_log import log as logging

from fluidvim.common import instance_states as istates, zonetypes
from fluidvim.common.measure import elapsed_ms
from fluidvim.common.zonetypes import InstanceInfo, ZoneAdapter, ZoneError

from .. import states
from ..deploy import deploy as deploy_instance
from ..exception import InvalidRequest, LeaseLost, NotFound, OrchestratorError, Refused, invalid
from ..rpc import rpc_method, validate_service
from . import descriptors

LOG = logging.getLogger(__name__)

NAMESPACE = "ns"
NS_API_VERSION = "1.2"       # 1.1: scale, heal, operations in show; 1.2: start, operation
DIRECTIONS = ("out", "in")


def _refuse(message: str):
    def refused(*_a):
        raise Refused(message)
    return refused



#: the RPC methods :meth:`NSManager.start` runs in the background
BACKGROUND = ("deploy", "scale", "heal", "delete")
#: triggers whose operation waits for the one under way instead of being refused (409): the
#: resolver's on-demand scale-out (a session waits for it), bounded by LOCK_WAIT_S
WAITING_TRIGGERS = ("resolve",)
LOCK_WAIT_S = 120.0


def _iso(t: float | None) -> str | None:
    return (None if t is None
            else datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat())


def lcm_op_occ(o, ns_name: str | None = None) -> dict:
    """An operation occurrence as SOL005's NsLcmOpOcc (reduced): operationState PROCESSING |
    COMPLETED | FAILED | ROLLED_BACK, times in ISO 8601 UTC, the error as a ProblemDetails."""
    d = o.detail
    return {"id": o.id, "nsInstanceId": o.ns_id, "nsName": ns_name,
            "operation": o.type.upper(), "operationState": o.state.upper(),
            "startTime": _iso(o.started_at), "stateEnteredTime": _iso(o.ended_at or o.started_at),
            "isAutomaticInvocation": d.get("trigger", "request") != "request",
            "error": (None if not o.error else
                      {"status": 409, "title": f"{o.type} {o.state.replace('_', ' ')}",
                       "detail": o.error}),
            "detail": d}


def _scale_detail(row, key, direction, trigger, reason, level, delta, remove) -> dict:
    """A scale operation's detail, with its steps for a survivor that resumes it (resume.py):
    instances per service at the end of a scale-out, the instances a scale-in removes."""
    detail = {"aspect": key, "direction": direction, "trigger": trigger, "from_level": level}
    if reason:
        detail["reason"] = reason
    count = collections.Counter(i["service"] for i in row.get("instances"))
    if direction == "out":
        detail["target"] = {svc: count[svc] + n for svc, n in delta.items()}
    else:
        detail["remove"] = [i["id"] for i in remove]
    return detail


class _Started:
    """What :meth:`NSManager.start` waits for: the operation's id, or the error before it."""

    def __init__(self):
        self.event = threading.Event()
        self.op = None
        self.error = None


class NSManager:
    def __init__(self, orch):
        self.orch = orch
        self._started = threading.local()           # the background thread's _Started
        self.store = orch.store
        self._lock = threading.Lock()
        # one operation per NS across orchestrators (Store.take_ns_lock): a lease the
        # heartbeat renews (active_active), else held until released; the steps of an
        # operation run fenced by it (Store.fenced: they stop if it is lost)
        self._lease = (orch.conf.orchestrator.worker_dead_after if orch.members is not None
                       else None)
        self._last_scale: dict = {}                 # NS id -> (direction, time) of its last scale
        self._out_s: dict = {}                      # NS id -> recent scale-out durations (s)
        self.scaler = None                          # .scaling.Scaler, when started
        orch.resolver.owner = self.owner            # an NS service's on-demand launch = scale out
        # active-active: only rows of no worker; a dead peer's are failed by its taker (a
        # lone orchestrator's own, from before a restart: resume.restart)
        n = self.store.abandon_ns(owners=[None]) if orch.members is not None else 0
        if n:
            LOG.warning("%d network service operation(s) were under way when the orchestrator "
                        "stopped: marked failed (`fluidvim ns rm` cleans up)", n)

    @contextlib.contextmanager
    def _op_lock(self, row, type_: str, wait: bool = False, op_id: str | None = None,
                 steal_from: str | None = None):
        """Hold the NS's operation lock (yields the operation id it is taken for). Held by
        another operation: Refused (409, SOL005's "another LCM operation is ongoing") naming
        it, or with ``wait`` the lock is waited for (at most LOCK_WAIT_S)."""
        op_id = op_id or str(uuid.uuid4())
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            held = self.store.take_ns_lock(row.id, op_id, type_, self._lease,
                                           steal_from=steal_from)
            if held is None:
                break
            if not wait or time.monotonic() > deadline:
                raise Refused(f"ns {row.name}: operation {held.op_id} ({held.op_type}) is in "
                              f"progress; the {type_} can start when it ends (`fluidvim ns "
                              f"show {row.name}` lists its operations)")
            time.sleep(0.1)
        try:
            yield op_id
        except LeaseLost as e:
            # not taken over (another operation took the expired lock): failed here, and what
            # it launched but could not record goes (the other operation does not know it)
            if self.store.op_lost(op_id, e.message):
                self._teardown(None, {}, [], list(e.unrecorded))
            raise
        finally:
            self.store.release_ns_lock(row.id, op_id)

    # -- operations in the background (the API's 202 + an occurrence to poll) --
    def _op_started(self, ns_id: str, type_: str, **detail) -> str:
        op = self.store.op_started(ns_id, type_, **detail)
        st = getattr(self._started, "st", None)
        if st is not None and st.op is None:
            st.op = op
            st.event.set()
        return op

    def start(self, method: str, **kwargs) -> dict:
        """Run ``method`` (:data:`BACKGROUND`) in a thread of its own; return its operation
        occurrence as soon as it is recorded. What fails before (validation, no such NS, a
        refused step) is raised here, as the blocking call would."""
        if method not in BACKGROUND:
            raise invalid("method", f"{method!r} is not one of {', '.join(BACKGROUND)}")
        fn = getattr(self, method)
        st = _Started()

        def run():
            self._started.st = st
            try:
                fn(**kwargs)
            except Exception as e:  # noqa: BLE001 - before the op: the caller's; after: recorded
                if st.op is None:
                    st.error = e
                else:
                    LOG.warning("ns operation %s (%s) ended: %s", st.op, method,
                                getattr(e, "message", e))
            finally:
                st.event.set()

        threading.Thread(target=run, name=f"ns-{method}", daemon=True).start()
        st.event.wait()
        if st.error is not None:
            raise st.error
        if st.op is None:
            raise OrchestratorError(f"ns {method} ended without an operation occurrence")
        return self.operation(st.op)

    def operation(self, op_id: str) -> dict:
        o = self.store.ns_operation(op_id)
        try:
            name = self.store.network_service(o.ns_id).name
        except NotFound:
            name = None
        return lcm_op_occ(o, name)

    def operations(self, ns: str | None = None, limit: int = 200) -> list[dict]:
        """Operation occurrences, oldest first (of one NS, name or id, or of all)."""
        names = {r.id: r.name for r in self.store.network_services(deleted=True)}
        ns_id = self.store.network_service(ns).id if ns else None
        return [lcm_op_occ(o, names.get(o.ns_id))
                for o in self.store.ns_operations(ns_id, limit=limit)]

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
        images = None
        for u in plan.units:
            if z.kernel_source == zonetypes.KERNEL_FILE and not u.kernel_is_file:
                if images is None:
                    images = self._images(z)
                if u.kernel not in images:
                    raise invalid("kernel", f"VNF profile {u.profile}: zone {z.name} ({z.kind}) "
                                  f"has no image named {u.kernel!r} (it has "
                                  f"{', '.join(sorted(images)) or 'none'})",
                                  f"put {u.kernel}.elf into [osm_vim] images_dir "
                                  f"({self.orch.conf.osm_vim.images_dir}), register it (OSM "
                                  "new_image) or set sw-image-desc.image to the kernel's path")
                u.kernel, u.kernel_is_file = images[u.kernel], True      # the plan records it
            if z.kernel_source == zonetypes.KERNEL_IMAGE and u.kernel_is_file:
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

    def _images(self, z: ZoneAdapter) -> dict:
        """{image name: kernel file} a zone offers (Orchestrator.zone_images: ``[osm_vim]
        images_dir``, the launch core's kernel as ``default_image_name``, registered ones)."""
        return {im["name"]: im["location"] for im in self.orch.zone_images(z.name)}

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
        lock = contextlib.ExitStack()       # the new NS's operation lock, for the deploy
        with self._lock:                    # one live NS per name
            self._name_free(plan.name)
            row = self.store.add_ns(name=plan.name, nsd_id=plan.nsd, zone=z.name,
                                    status=states.NS_DEPLOYING, plan=plan.to_dict(),
                                    descriptors={"nsd": nsd, "vnfds": vnfds},
                                    scale={self.aspect_key(a): a["initial_level"]
                                           for a in plan.aspects})
            op = self._op_started(row.id, states.OP_INSTANTIATE,
                                  op_id=lock.enter_context(self._op_lock(row, states.OP_INSTANTIATE)),
                                  zone=z.name, instances=sum(u.instances for u in plan.units))
        with lock, self.store.fenced(row.id, op, self._lease):
            return self._deploy_steps(row, op, plan, z, units, t_all)

    def _deploy_steps(self, row, op: str, plan, z: ZoneAdapter, units: list, t_all: float) -> dict:
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
                self.store.check_fence()
                t = time.perf_counter()
                info = z.create_network(net)
                nets[key] = {"id": info.id, "name": info.name}
                step(f"network {key}: {info.name} ({info.id})", t)
            for u, fields in units:
                what = f"service {u.service}"
                self.store.check_fence()
                t = time.perf_counter()
                # the tolerable queuing delay is a session's: an instantiation waits for its
                # launches whatever it is (placement would refuse an empty zone slower than it)
                self.orch.register_service(u.service, u.click_config,
                                           **{**fields, "max_queuing_delay_s": None})
                services.append(u.service)
                step(f"service {u.service} registered (VNF profile {u.profile}, VDU {u.vdu})", t)
            for u, _ in units:
                bridges = [nets[n.network]["id"] if n.network else None for n in u.nics]
                for k in range(u.instances):
                    what = f"instance {k + 1}/{u.instances} of {u.service}"
                    self.store.check_fence()
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
        except LeaseLost:
            raise                           # the lock's new holder has it now: no rollback
        except Exception as e:  # noqa: BLE001 - whatever failed, nothing may stay behind
            msg = getattr(e, "message", None) or f"{type(e).__name__}: {e}"
            leftovers = self._teardown(z, nets, services, instances)
            status = states.NS_FAILED
            err = f"{what} failed: {msg}"
            if leftovers:
                err += "; rollback incomplete: " + "; ".join(leftovers)
            else:
                nets, services, instances = {}, [], []
                err += (f"; rolled back ({len(steps) - 1} step(s) undone)"
                        if len(steps) > 1 else "")
            self.store.update_ns(row.id, status=status, error=err, networks=nets,
                                 services=services, instances=instances, steps=steps)
            self.store.op_finished(op, states.OP_FAILED if leftovers else states.OP_ROLLED_BACK, err)
            LOG.warning("ns %s: deploy failed: %s", plan.name, err)
            if not isinstance(e, (OrchestratorError, ZoneError)):
                LOG.exception("ns %s: unexpected error", plan.name)
            raise Refused(f"ns {plan.name}: {err}")
        for u, fields in units:
            if fields.get("max_queuing_delay_s") is not None:
                self.orch.register_service(u.service, u.click_config, **fields)
        steps.append({"step": f"deployed in {elapsed_ms(t_all, 1):.0f} ms", "ms": elapsed_ms(t_all, 1)})
        self.store.op_finished(op, states.OP_COMPLETED,
                               ns={"status": states.NS_RUNNING, "steps": steps})
        return self.show(row.id)

    def _teardown(self, z: ZoneAdapter | None, nets: dict, services: list,
                  instances: list) -> list[str]:
        """Remove instances, services, networks (in that order); [] or what could not go."""
        left = []
        for inst in reversed(instances):
            self.store.check_fence()
            try:
                self.orch.terminate(inst["id"])
            except NotFound:
                pass
            except Exception as e:  # noqa: BLE001
                left.append(f"instance {inst['name']}: {getattr(e, 'message', e)}")
        for svc in reversed(services):
            self.store.check_fence()
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
            self.store.check_fence()
            try:
                z.delete_network(net["id"])
            except Exception as e:  # noqa: BLE001
                left.append(f"network {key} ({net['id']}): {e}")
        return left

    # -- the rest of the lifecycle --
    def delete(self, name: str) -> dict:
        row = self.store.network_service(name)
        if row.status == states.NS_DELETED:
            raise NotFound(f"ns: {name!r} is already deleted", field="ns")
        with self._op_lock(row, states.OP_TERMINATE) as op_id, \
                self.store.fenced(row.id, op_id, self._lease):
            with self._lock:
                row = self.store.network_service(row.id)
                if row.status == states.NS_DELETED:
                    raise NotFound(f"ns: {name!r} is already deleted", field="ns")
                if row.status in states.NS_IN_PROGRESS:
                    raise Refused(f"ns {row.name}: {row.status} right now; try again when it "
                                  "is done")
                self.store.update_ns(row.id, status=states.NS_DELETING)
            return self.terminate(row.id, self._op_started(row.id, states.OP_TERMINATE,
                                                           op_id=op_id))

    def terminate(self, ns_id: str, op: str) -> dict:
        """The steps of a delete, under its operation lock: remove what the record says was
        made (each removal is idempotent: a resumed delete runs them again)."""
        row = self.store.network_service(ns_id)
        left = self._teardown(self.orch.zones.get(row.zone), row.get("networks"),
                              row.get("services"), row.get("instances"))
        if left:
            err = "delete incomplete: " + "; ".join(left)
            self.store.op_finished(op, states.OP_FAILED, err,
                                   ns={"status": states.NS_FAILED, "error": err})
            raise Refused(f"ns {row.name}: delete incomplete: {'; '.join(left)}; fix and run "
                          f"`fluidvim ns rm {row.name}` again")
        self.store.op_finished(op, states.OP_COMPLETED, ns={"status": states.NS_DELETED})
        self._last_scale.pop(row.id, None)
        self._out_s.pop(row.id, None)
        LOG.info("ns %s deleted", row.name)
        return {"deleted": row.name, "id": row.id}

    def take_over(self, dead: str) -> dict:
        """The network service operations the dead orchestrator ``dead`` had under way: each
        resumed from its recorded steps, or rolled back (:mod:`.resume`)."""
        from .resume import take_over
        return take_over(self, dead)

    # -- scale and heal --
    def start_scaler(self, interval: float) -> None:
        from .scaling import Scaler
        if self.scaler is None:
            self.scaler = Scaler(self, interval)
            self.scaler.start()

    def stop_scaler(self) -> None:
        if self.scaler is not None:
            self.scaler.stop()
            self.scaler = None

    @staticmethod
    def aspect_key(a: dict) -> str:
        return f"{a['profile']}/{a['name']}"

    def _aspect(self, row, aspect: str) -> dict:
        aspects = row.get("plan").get("aspects", [])
        found = [a for a in aspects if aspect in (self.aspect_key(a), a["name"])]
        if not found:
            raise NotFound(f"aspect: ns {row.name} has no scaling aspect {aspect!r} (aspects: "
                           f"{', '.join(self.aspect_key(a) for a in aspects) or 'none: its VNFDs'}"
                           " define no df.scaling-aspect)", field="aspect")
        if len(found) > 1:
            raise invalid("aspect", f"{aspect!r} is an aspect of several VNF profiles",
                          f"name one of {', '.join(self.aspect_key(a) for a in found)}")
        return found[0]

    @staticmethod
    def _step(a: dict, level: int) -> dict:
        """services -> instances of the step from ``level`` to ``level + 1``."""
        steps = a["steps"]
        return steps[min(level, len(steps) - 1)]["services"]

    def _units(self, row) -> dict:
        return {u["service"]: u for u in row.get("plan")["units"]}

    def _bridges(self, row, unit: dict) -> list:
        nets = row.get("networks")
        return [nets[n["network"]]["id"] if n["network"] else None for n in unit["nics"]]

    def _plan_step(self, row, a: dict, direction: str, manual: bool):
        """(services -> n, instances to remove, None) or (..., why not)."""
        level = row.get("scale").get(self.aspect_key(a), a["initial_level"])
        units = self._units(row)
        count = collections.Counter(i["service"] for i in row.get("instances"))
        if direction == "out":
            delta = self._step(a, level)
            if a["max_scale_level"] is not None and level >= a["max_scale_level"]:
                return delta, [], (f"aspect {a['name']} is at its max-scale-level "
                                   f"{a['max_scale_level']}")
            for svc, n in delta.items():
                if count[svc] + n > units[svc]["max_instances"]:
                    return delta, [], (f"{svc} has {count[svc]} instance(s); {n} more would "
                                       f"exceed max-number-of-instances "
                                       f"{units[svc]['max_instances']}")
            return delta, [], None
        if level <= 0:
            return self._step(a, 0), [], f"aspect {a['name']} is at scale level 0"
        delta = self._step(a, level - 1)
        used = self._used(row)
        remove = []
        for svc, n in delta.items():
            if count[svc] - n < units[svc]["min_instances"]:
                return delta, [], (f"{svc} has {count[svc]} instance(s); {n} fewer would go "
                                   f"below min-number-of-instances "
                                   f"{units[svc]['min_instances']}")
            mine = [i for i in row.get("instances") if i["service"] == svc]
            # the least used first, the newest of those (the oldest keep their sessions)
            mine = sorted(enumerate(mine), key=lambda t: (used.get(t[1]["id"], (0, 0))[0],
                                                           -t[0]))
            remove += [i for _, i in mine[:n]]
        return delta, remove, None

    def _used(self, row) -> dict:
        """instance id -> (slots used, slots total) from the slot registry and the store."""
        totals = {i.id: i.slots_total for i in self.store.instances(statuses=None)}
        out = {}
        for svc in {i["service"] for i in row.get("instances")}:
            for rep, free in self.orch.registry.entries(svc):
                tot = totals.get(rep.instance, rep.slots)
                out[rep.instance] = (max(0, tot - free), tot)
        return out

    def aspect_state(self, row, a: dict) -> dict:
        """What the scaler needs for one aspect: slots, lead time, whether a step is possible."""
        services = {svc for st in a["steps"] for svc in st["services"]}
        insts = [i for i in row.get("instances") if i["service"] in services]
        used = self._used(row)
        totals = {i.id: i.slots_total for i in self.store.instances(statuses=None)}
        total = sum(totals.get(i["id"], 0) for i in insts)
        free = sum(used[i["id"]][1] - used[i["id"]][0] if i["id"] in used else 0 for i in insts)
        z = self.orch.zones.get(row.zone)
        lead = 0.0
        for svc in services:
            qd = self.orch.queuing.delay(z, svc) if z is not None else None
            if qd is None or qd.seconds is None:
                lead = float("inf")
                continue
            try:
                tol = self.store.service(svc).max_queuing_delay_s
            except NotFound:
                tol = None
            # a session that finds no slot waits for an on-demand launch (the resolver asks the
            # NS to scale out) when the launch is within its tolerable delay; else it is refused,
            # and the scaler must be a whole launch ahead: the queuing delay (a median), or the
            # 90th percentile of the same launch times, or the NS's recent scale-outs (launch +
            # records) when longer (a slow launch is what refuses sessions)
            if tol is not None and qd.seconds > tol:
                samples, _ = self.orch.queuing.samples_ms(z, svc, kind=z.next_launch_kind(svc))
                p90 = sorted(samples)[int(0.9 * (len(samples) - 1))] / 1000.0 if samples else 0.0
                lead = max(lead, qd.seconds, p90 * (1 + qd.in_flight // max(
                    1, self.orch.queuing.parallelism)), max(self._out_s.get(row.id) or [0.0]))
        _, _, no_out = self._plan_step(row, a, "out", False)
        _, remove, no_in = self._plan_step(row, a, "in", False)
        return {"free": free, "total": total, "lead_s": lead if lead != float("inf") else 0.0,
                "can_out": no_out or (None if lead != float("inf") else
                                      "the zone cannot launch on demand"),
                "can_in": no_in, "step_in_slots": sum(totals.get(i["id"], 0) for i in remove),
                "in_idle": all(used.get(i["id"], (0, 0))[0] == 0 for i in remove),
                "last_op": self._last_op(row.id)}

    def _last_op(self, ns_id):
        if ns_id not in self._last_scale:
            ops = [o for o in self.store.ns_operations(ns_id) if o.type == states.OP_SCALE
                   and o.state == states.OP_COMPLETED]
            self._last_scale[ns_id] = ((ops[-1].detail.get("direction"), ops[-1].ended_at)
                                       if ops else None)
        return self._last_scale[ns_id]

    @staticmethod
    def _aspect_dict(row, a: dict) -> dict:
        key = NSManager.aspect_key(a)
        return {"aspect": key, "level": row.get("scale").get(key, a["initial_level"]),
                "max_scale_level": a["max_scale_level"], "auto": a["auto"],
                "cooldown_s": a["cooldown_s"], "idle_s": a["idle_s"], "headroom": a.get("headroom", 0),
                "steps": [s["services"] for s in a["steps"]]}

    def _running(self, name: str):
        row = self.store.network_service(name)
        if row.status != states.NS_RUNNING:
            raise Refused(f"ns {row.name}: {row.status}; only a running network service can be "
                          "scaled or healed")
        return row

    def scale(self, name: str, aspect: str, direction: str, trigger: str = "request",
              reason: str | None = None) -> dict:
        """One scaling step of ``aspect`` out or in; Refused (and nothing changed) beyond the
        limits; a failed scale-out removes what it launched (operation ``rolled_back``)."""
        if direction not in DIRECTIONS:
            raise invalid("direction", f"{direction!r} is not one of {', '.join(DIRECTIONS)}",
                          "--out or --in")
        row = self._running(name)
        a = self._aspect(row, aspect)
        with self._op_lock(row, states.OP_SCALE, wait=trigger in WAITING_TRIGGERS) as op_id, \
                self.store.fenced(row.id, op_id, self._lease):
            row = self._running(row.id)
            key = self.aspect_key(a)
            level = row.get("scale").get(key, a["initial_level"])
            delta, remove, why = self._plan_step(row, a, direction, trigger == "request")
            if why:
                raise Refused(f"ns {row.name}: scale {direction} of {key} refused: {why}")
            t0 = time.perf_counter()
            op = self._op_started(row.id, states.OP_SCALE, op_id=op_id, **_scale_detail(
                row, key, direction, trigger, reason, level, delta, remove))
            instances = list(row.get("instances"))
            if direction == "out":
                added, err = self._launch(row, delta, instances, f"scale out {key}")
                if err:
                    leftovers = self._teardown(None, {}, [], added)
                    for i in added:
                        instances.remove(i)
                    self.store.update_ns(row.id, instances=instances)
                    state = states.OP_FAILED if leftovers else states.OP_ROLLED_BACK
                    if leftovers:
                        err += "; rollback incomplete: " + "; ".join(leftovers)
                    self.store.op_finished(op, state, err)
                    raise Refused(f"ns {row.name}: scale out of {key} {state.replace('_', ' ')}"
                                  f": {err}")
                detail = {"added": [i["name"] for i in added]}
                made = added
            else:
                left = self._teardown(None, {}, [], remove)
                gone = [i for i in remove if not any(i["name"] in x for x in left)]
                instances = [i for i in instances if i not in gone]
                self.store.update_ns(row.id, instances=instances)
                if left:
                    err = "; ".join(left)
                    self.store.op_finished(op, states.OP_FAILED, err, removed=[i["name"] for i in gone])
                    raise Refused(f"ns {row.name}: scale in of {key} failed: {err}")
                detail = {"removed": [i["name"] for i in gone]}
                made = []
            new = level + (1 if direction == "out" else -1)
            self.store.op_finished(op, states.OP_COMPLETED, ns={"scale": {**row.get("scale"), key: new}},
                                   to_level=new, ms=elapsed_ms(t0, 1), **detail)
            self._last_scale[row.id] = (direction, time.time())
            if direction == "out":
                self._out_s.setdefault(row.id, collections.deque(maxlen=10)).append(
                    elapsed_ms(t0, 1) / 1000.0)
            LOG.info("ns %s: scaled %s %s to level %d (%s)", row.name, direction, key, new,
                     detail)
        return {"ns": row.name, "aspect": key, "direction": direction, "level": new,
                "operation": op, **detail, "instances": made, "ms": elapsed_ms(t0, 1)}

    def _launch(self, row, delta: dict, instances: list, what: str):
        """Launch ``delta`` (service -> n) into the NS's zone on its virtual links, appending to
        ``instances`` (and the record) as they come; ([added], None) or ([added], error)."""
        z = self.orch.zones.get(row.zone)
        if z is None:
            return [], f"zone {row.zone} is gone"
        units = self._units(row)
        added = []
        for svc, n in delta.items():
            u = units[svc]
            for _k in range(n):
                self.store.check_fence()
                try:
                    srow = self.store.service(svc)
                    qd = self.orch.queuing.delay(z, svc)
                    inst = deploy_instance(self.store, self.orch.registry, z, srow,
                                           predicted_s=qd.seconds, bridges=self._bridges(row, u))
                except Exception as e:  # noqa: BLE001 - rolled back by the caller
                    return added, f"{what}: launch of {svc} failed: " + (
                        getattr(e, "message", None) or str(e))
                rec = {"id": inst.id, "name": inst.name, "service": svc,
                       "profile": u["profile"], "vdu": u["vdu"], "decision_id": None,
                       "nics": [{"cpd": x["cpd"], "network": x["network"]} for x in u["nics"]]}
                instances.append(rec)
                added.append(rec)
                try:
                    self.store.update_ns(row.id, instances=instances)
                except LeaseLost as e:
                    e.unrecorded = (rec,)
                    raise
        return added, None

    def owner(self, service: str):
        """For the resolver: a launcher of one more instance of ``service`` if a running NS owns
        it (a scale-out of the aspect that scales it; Refused when there is none or at the
        limits), else None."""
        for row in self.store.network_services():
            if service not in row.get("services"):
                continue
            if row.status != states.NS_RUNNING:
                return _refuse(f"resolve {service}: no free slot, and its network service "
                               f"{row.name} is {row.status}")
            aspects = [a for a in row.get("plan").get("aspects", [])
                       if any(service in st["services"] for st in a["steps"])]
            if not aspects:
                return _refuse(f"resolve {service}: no free slot, and its network service "
                               f"{row.name} has no scaling aspect for it")

            def launch(predicted_s, started_at, row=row, a=aspects[0]):
                r = self.scale(row.id, self.aspect_key(a), "out", trigger="resolve")
                ids = [i["id"] for i in r["instances"] if i["service"] == service]
                inst = next(i for i in self.store.instances(service) if i.id in ids)
                return row.zone, InstanceInfo(id=inst.id, name=inst.name, service=service,
                                              host=inst.host, status=istates.RUNNING,
                                              slots_total=inst.slots_total)
            return launch
        return None

    def heal(self, name: str, instance: str, trigger: str = "request") -> dict:
        """Replace one instance of the NS (dead or not) by a new one of the same VNF profile and
        VDU, its NICs on the same virtual links; the old one is removed first."""
        row = self._running(name)
        with self._op_lock(row, states.OP_HEAL) as op_id, \
                self.store.fenced(row.id, op_id, self._lease):
            row = self._running(row.id)
            instances = list(row.get("instances"))
            pos = next((k for k, i in enumerate(instances) if instance in (i["id"], i["name"])),
                       None)
            if pos is None:
                raise NotFound(f"instance: ns {row.name} has no instance {instance!r}",
                               field="instance")
            old = instances[pos]
            t0 = time.perf_counter()
            count = collections.Counter(i["service"] for i in instances)
            op = self._op_started(row.id, states.OP_HEAL, op_id=op_id, instance=old["name"],
                                  trigger=trigger, old_id=old["id"], pos=pos,
                                  target={old["service"]: count[old["service"]]})
            left = self._teardown(None, {}, [], [old])
            if left:
                self.store.op_finished(op, states.OP_FAILED, "; ".join(left))
                raise Refused(f"ns {row.name}: heal of {old['name']} failed: {'; '.join(left)}")
            instances.pop(pos)
            self.store.update_ns(row.id, instances=instances)
            added, err = self._launch(row, {old["service"]: 1}, instances, f"heal {old['name']}")
            if err:
                self.store.op_finished(op, states.OP_FAILED, err)
                raise Refused(f"ns {row.name}: heal of {old['name']} failed: {err} (the NS has "
                              f"one instance fewer; `fluidvim ns heal` or `scale` again)")
            new = added[0]
            instances.remove(new)                       # back where the old one was
            instances.insert(pos, new)
            self.store.op_finished(op, states.OP_COMPLETED, ns={"instances": instances},
                                   replaced_by=new["name"], ms=elapsed_ms(t0, 1))
            LOG.info("ns %s: healed %s -> %s (%.0f ms)", row.name, old["name"], new["name"],
                     elapsed_ms(t0, 1))
        return {"ns": row.name, "healed": old["name"], "replaced_by": new["name"],
                "instance": new["id"], "operation": op, "ms": elapsed_ms(t0, 1)}

    def heal_dead(self, row, live: dict) -> list:
        """Heal every instance of ``row`` its zone no longer runs; ``live`` caches zone -> {id:
        status} for one scaler tick."""
        if row.zone not in live:
            z = self.orch.zones.get(row.zone)
            try:
                live[row.zone] = ({i.id: i.status for i in z.instances()} if z is not None
                                  else None)
            except Exception as e:  # noqa: BLE001 - a zone that cannot tell: no verdict
                LOG.warning("zone %s: cannot list instances: %s", row.zone, e)
                live[row.zone] = None
        status = live[row.zone]
        if status is None:
            return []
        done = []
        for i in row.get("instances"):
            if status.get(i["id"]) in (*istates.LIVE, istates.PAUSED):   # paused on purpose
                continue
            LOG.warning("ns %s: instance %s is %s: healing", row.name, i["name"],
                        status.get(i["id"], "gone"))
            try:
                done.append((row.name, states.OP_HEAL, self.heal(row.id, i["id"], trigger="dead")))
            except (Refused, NotFound) as e:
                LOG.warning("ns %s: %s", row.name, e)
        return done

    def list(self, deleted: bool = False) -> list[dict]:
        return [r.summary() for r in self.store.network_services(deleted)]

    def show(self, name: str) -> dict:
        """The record, with what the zone and the orchestrator say about its parts now
        (:func:`ns_view`)."""
        return ns_view(self.store, name, self._live_networks)

    def _live_networks(self, zone: str) -> dict:
        z = self.orch.zones.get(zone)
        if z is None:
            return {}
        try:
            return {n.id: n for n in z.networks()}
        except Exception as e:  # noqa: BLE001 - the record is still worth showing
            LOG.warning("zone %s: cannot list networks: %s", zone, e)
            return {}


def ns_view(store, name: str, live_networks=None) -> dict:
    """NS ``name`` as ``ns show`` shows it. The operations are read first: an operation shown
    finished has its changes in the record shown (an operation updates the record before it
    finishes). ``live_networks(zone)``: {id: network} as the zone lists them now; without it
    (the orchestrator down: the CLI reads its database) a network's ``exists`` and ``ports``
    are None, not checked."""
    row = store.network_service(name)
    operations = [o.to_dict() for o in store.ns_operations(row.id)]
    row = store.network_service(row.id)
    live_nets = live_networks(row.zone) if live_networks is not None else None
    status = {i.id: i.status for i in store.instances(statuses=None)}
    nets = []
    for key, n in row.get("networks").items():
        live = live_nets.get(n["id"]) if live_nets is not None else None
        nets.append({"link": key, "name": n["name"], "id": n["id"],
                     "exists": live is not None if live_nets is not None else None,
                     "ports": list(live.ports) if live is not None else
                     [] if live_nets is not None else None})
    plan = row.get("plan")
    return {"id": row.id, "name": row.name, "nsd": row.nsd_id, "zone": row.zone,
            "status": row.status, "error": row.error, "created_at": row.created_at,
            "updated_at": row.updated_at, "vnfds": plan.get("vnfds", []),
            "services": row.get("services"), "networks": nets,
            "instances": [{**i, "status": status.get(i["id"], "unknown")}
                          for i in row.get("instances")],
            "steps": row.get("steps"), "warnings": plan.get("warnings", []),
            "scaling": [NSManager._aspect_dict(row, a) for a in plan.get("aspects", [])],
            "operations": operations}


class StoreNS:
    """The read-only NS calls (``ns list``, ``ns show``) on the orchestrator's database, for the
    CLI when the orchestrator does not answer (clicommon.reads)."""

    def __init__(self, store):
        self.store = store

    def list(self, deleted: bool = False) -> list[dict]:
        return [r.summary() for r in self.store.network_services(deleted)]

    def show(self, name: str) -> dict:
        return ns_view(self.store, name)


class NSEndpoint:
    """RPC namespace ``ns``, API 1.2: deploy, validate, list, show, delete; scale, heal (1.1);
    start, operation, operations (1.2)."""

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

    @rpc_method
    def scale(self, ctxt, name, aspect, direction):
        return self.ns.scale(name, aspect, direction)

    @rpc_method
    def heal(self, ctxt, name, instance):
        return self.ns.heal(name, instance)

    @rpc_method
    def start(self, ctxt, what, kwargs):
        """1.2: deploy, scale, heal or delete (``what``) in the background; its operation
        occurrence."""
        return self.ns.start(what, **kwargs)

    @rpc_method
    def operation(self, ctxt, op_id):
        """1.2: an operation occurrence (SOL005 NsLcmOpOcc shape)."""
        return self.ns.operation(op_id)

    @rpc_method
    def operations(self, ctxt, ns=None, limit=200):
        """1.2: operation occurrences, oldest first."""
        return self.ns.operations(ns, limit)

