# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``nova-default``: Nova's own scheduler, in-process, on fake computes sized like the fleet.

What runs is Nova's code (the installed nova, constraints.txt), exactly as nova-scheduler runs it
once Placement has answered: ``SchedulerManager._schedule`` with Nova's ``HostManager`` and
``HostState`` objects, the filter handler with the default ``[filter_scheduler]
enabled_filters`` (ComputeFilter, ComputeCapabilitiesFilter, ImagePropertiesFilter and the two
server-group filters), the weight handler with ``weight_classes =
nova.scheduler.weights.all_weighers`` and their default multipliers (RAM, CPU and disk weighers
at 1.0 spread; io_ops -1.0; ...), ``host_subset_size`` 1, ``utils.claim_resources`` against the
chosen host, and ``HostState.consume_from_request``. The request's resources come from Nova's
``resources_from_request_spec`` on a ``RequestSpec`` built with ``RequestSpec.from_components``
(as nova-api builds it) from a ``Flavor`` per Shape (vcpus, memory_mb, root_gb 0: VNFs are
diskless). Each compute's inventory is what Nova's fake virt driver reports
(``nova.virt.fake.FakeDriver.update_provider_tree``: VCPU, MEMORY_MB, DISK_GB with
``[DEFAULT] reserved_host_*`` and the allocation ratios of a new compute, i.e.
``initial_cpu_allocation_ratio`` 4.0 and ``initial_ram_allocation_ratio`` 1.0 in this Nova).
No configuration option is changed unless ``conf_overrides`` asks (then they are set on Nova's
global CONF in ``start`` and cleared in ``close``).

What is not Nova's code, because it is a separate service (or a database) that cannot run
in-process here:

* **Placement** is emulated (``_Placement``): ``GET /allocation_candidates`` returns every
  compute resource provider where each requested class fits, ``used + amount <= (total -
  reserved) * allocation_ratio``, ``min_unit <= amount <= max_unit`` and a multiple of
  ``step_size`` (Placement's capacity rule), at most ``[scheduler] max_placement_results`` of
  them, in fleet order; ``claim_resources`` re-checks and records the allocation (``PUT
  /allocations``), and a deleted instance's allocation is removed (``DELETE /allocations``).
  Placement's trait and aggregate pre-filters are not emulated: the only one that matters for
  a default deployment, ``compute_status_filter`` (no provider with COMPUTE_STATUS_DISABLED),
  removes the same hosts the ComputeFilter removes just after, so the decision is the same.
* **The database** the HostManager reads at start-up (cell mappings, aggregates, the instance
  lists computes send) is replaced by their values for this fleet: one cell, no aggregate, every
  compute has reported its instance list (``_HostManager``); the scheduler reads compute nodes
  and services from memory (``_get_all_host_states``, Nova's template method for that), then
  builds the host states with Nova's ``HostManager._get_host_states``.
* **The computes** are records: a ``ComputeNode`` and a nova-compute ``Service`` per Host
  (vcpus = cores, memory_mb, a fixed local disk), which report like nova-compute's resource
  tracker once an instance is built or deleted (vcpus_used, memory_mb_used incl.
  ``reserved_host_memory_mb``, free_ram_mb, stats num_instances; ``update_instance_info`` /
  ``delete_instance_info`` to the HostManager) and heartbeat every ``[DEFAULT] report_interval``.
  An ineligible host (powered off, draining) is a disabled compute service, as after
  ``openstack compute service set --disable``: the ComputeFilter rejects it.

Operational choices a Nova deployment leaves to its operator:

* **One request per instance.** A scale-out of n is n ``POST /servers`` (what Heat's
  AutoScalingGroup and Senlin do: one server resource each), so it can place some and refuse
  the rest; a single ``--min n`` multi-create would be all or nothing.
* **Scale-in: newest first** (``scale_in_order="newest"``, the default). Nova has no scale-in;
  the orchestrator above it deletes servers, and the choice is its own: Heat's AutoScalingGroup
  removes the oldest members (``scale_in_order="oldest"``), Senlin's deletion policy can take
  either (OLDEST_FIRST, YOUNGEST_FIRST). Newest first is what Nomad does on a count decrease
  (the highest allocation index goes), so the two baselines scale in alike. Deleting frees the
  instance's Placement allocation and its usage in the compute's report.

Run alone for the decision time per placement (fleets of equal hosts)::

    .venv/bin/python -m bench.energy.nova_policy --hosts 20 100 1000 --placements 2000

or, with ``--fleet``, on bench/energy's own fleet (every host awake and empty, the VNF of the
workload: 1 vCPU, 32 MiB) to see where Nova puts them - the host with the most free RAM and
vCPUs takes most, up to ``initial_cpu_allocation_ratio`` VNFs a hardware thread::

    .venv/bin/python -m bench.energy.nova_policy --fleet heterogeneous --hosts 20 --placements 900
    .venv/bin/python -m bench.energy.nova_policy --fleet heterogeneous --hosts 20 --placements 900 \
        --cpu-ratio 1.0                                            # nova-ratio1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

# Nova's scheduler modules register Nova's options on oslo.config's global CONF when imported
# (nova.conf); fluidvim's own services use their own ConfigOpts (make_conf), so nothing collides.
import nova.conf
from nova import context as nova_context, exception, objects
from nova.compute import provider_tree
from nova.scheduler import host_manager, manager, utils as sched_utils
from nova.scheduler.client import report
from nova.virt import fake as fake_virt
from oslo_utils import timeutils

from bench.energy.policy import Host, Placement, Shape, decision_summary

CONF = nova.conf.CONF
objects.register_all()

NAME = "nova-default"
# The SPECpower rows give no disk. Every host gets the same local disk: VNFs are diskless
# (root_gb 0), so DISK_GB never binds and the DiskWeigher ranks all hosts equal.
LOCAL_GB = 1024
_NS = uuid.UUID("6c3f1f0e-5b7a-4b59-9c1e-6e6f76615f62")   # uuid5 namespace of this bench's ids
_PROJECT = "bench-energy"


def _uuid(kind: str, name: str) -> str:
    return str(uuid.uuid5(_NS, f"{kind}:{name}"))


class _Placement:
    """The Placement service's answers for the computes' resource providers (emulated)."""

    def __init__(self, max_results: int):
        self.max_results = max_results
        self.inventory: dict[str, dict] = {}     # rp uuid -> Placement inventory per class
        self.usage: dict[str, dict] = {}         # rp uuid -> {class: used}
        self.allocations: dict[str, tuple[str, dict]] = {}   # consumer -> (rp uuid, resources)
        self._summaries: dict[str, dict] = {}    # rp uuid -> provider summary, until it changes

    def add_provider(self, rp_uuid: str, inventory: dict) -> None:
        self.inventory[rp_uuid] = inventory
        self.usage[rp_uuid] = {rc: 0 for rc in inventory}

    def _fits(self, rp_uuid: str, resources: dict) -> bool:
        inv, used = self.inventory[rp_uuid], self.usage[rp_uuid]
        for rc, amount in resources.items():
            r = inv.get(rc)
            if (r is None or not r["min_unit"] <= amount <= r["max_unit"]
                    or amount % r["step_size"]):
                return False
            if used[rc] + amount > (r["total"] - r["reserved"]) * r["allocation_ratio"]:
                return False
        return True

    def _summary(self, rp_uuid: str) -> dict:
        summary = self._summaries.get(rp_uuid)
        if summary is None:
            summary = self._summaries[rp_uuid] = self._new_summary(rp_uuid)
        return summary

    def _new_summary(self, rp_uuid: str) -> dict:
        inv = self.inventory[rp_uuid]
        return {"resources": {rc: {"capacity": int((r["total"] - r["reserved"])
                                                   * r["allocation_ratio"]),
                                   "used": self.usage[rp_uuid][rc]} for rc, r in inv.items()},
                "traits": [], "parent_provider_uuid": None, "root_provider_uuid": rp_uuid}

    # the SchedulerReportClient methods the scheduler calls

    def get_allocation_candidates(self, context, resources):
        wanted = {rc: n for rc, n in resources.merged_resources().items() if n}
        alloc_reqs, summaries = [], {}
        for rp in self.inventory:
            if len(alloc_reqs) >= self.max_results:
                break
            if self._fits(rp, wanted):
                alloc_reqs.append({"allocations": {rp: {"resources": dict(wanted)}},
                                   "mappings": {"": [rp]}})
                summaries[rp] = self._summary(rp)
        return alloc_reqs, summaries, report.SAME_SUBTREE_VERSION   # what Nova asks for

    def claim_resources(self, context, consumer_uuid, alloc_request, project_id, user_id,
                        allocation_request_version=None, consumer_generation=None):
        (rp, alloc), = alloc_request["allocations"].items()
        if consumer_uuid in self.allocations or not self._fits(rp, alloc["resources"]):
            return False
        for rc, n in alloc["resources"].items():
            self.usage[rp][rc] += n
        self._summaries.pop(rp, None)
        self.allocations[consumer_uuid] = (rp, dict(alloc["resources"]))
        return True

    def delete_allocation_for_instance(self, context, uuid, force=False):
        rp, resources = self.allocations.pop(uuid)
        for rc, n in resources.items():
            self.usage[rp][rc] -= n
        self._summaries.pop(rp, None)


class _HostManager(host_manager.HostManager):
    """Nova's HostManager; what it would read from the database at start-up is this fleet's:
    one cell, no aggregate, and every compute has sent its (empty) instance list."""

    def __init__(self, cell: objects.CellMapping, host_names: list[str]):
        self._cell = cell
        super().__init__()
        self._instance_info = {h: {"instances": {}, "updated": True} for h in host_names}

    def refresh_cells_caches(self):
        self.cells = {self._cell.uuid: self._cell}
        self.enabled_cells = [self._cell]
        self.host_to_cell_uuid = {}

    def _init_aggregates(self):
        pass                                    # none: aggs_by_id stays empty

    def _init_instance_info(self, computes_by_cell=None):
        pass                                    # set in __init__


class _Scheduler(manager.SchedulerManager):
    """Nova's SchedulerManager without its service plumbing (RPC, notifier, servicegroup,
    Placement client): ``_schedule`` and everything it calls are Nova's."""

    def __init__(self, hm: _HostManager, placement: _Placement, cell_uuid: str,
                 computes: dict, services: dict):
        # not super().__init__(): it builds a HostManager on the database and an RPC service
        self.host_manager = hm
        self._placement = placement
        self._cell_uuid = cell_uuid
        self._computes = computes               # rp uuid -> ComputeNode
        self._services = services               # host -> Service
        self._states: dict[str, host_manager.HostState] = {}   # rp uuid -> HostState

    @property
    def placement_client(self):
        return self._placement

    def _get_all_host_states(self, context, spec_obj, provider_summaries):
        """The host states of Placement's candidates, built by Nova's ``_get_host_states`` from
        the compute node and service records. nova-scheduler builds them all anew for every
        request; here a host's state is kept while its records are unchanged and it was not
        consumed (``invalidate``), which gives the same HostState at a fraction of the cost.
        Candidates keep Placement's order (fleet order): among equal weights the first wins,
        where nova-scheduler's order is that of a set."""
        stale = [self._computes[rp] for rp in provider_summaries if rp not in self._states]
        if stale:
            for hs in self.host_manager._get_host_states(context, {self._cell_uuid: stale},
                                                         self._services):
                self._states[hs.uuid] = hs
        return (self._states[rp] for rp in provider_summaries)

    def invalidate(self, rp_uuid: str | None = None) -> None:
        """A compute or service record changed, or the host state was consumed."""
        if rp_uuid is None:
            self._states.clear()
        else:
            self._states.pop(rp_uuid, None)


class NovaPolicy:
    """bench/energy Policy: Nova's filter scheduler with its defaults (see the module doc)."""

    def __init__(self, conf_overrides: dict[str, dict[str, object]] | None = None,
                 name: str = NAME, scale_in_order: str = "newest"):
        """``conf_overrides``: {group: {option: value}} set on Nova's CONF while the policy runs
        (e.g. {"filter_scheduler": {"ram_weight_multiplier": -1.0}} stacks); ``name`` then says
        which variant this is. ``scale_in_order``: "newest" or "oldest" go first."""
        if scale_in_order not in ("newest", "oldest"):
            raise ValueError(f"scale_in_order={scale_in_order!r}: use 'newest' (Nomad's "
                             "order) or 'oldest' (Heat AutoScalingGroup's)")
        self.name = name
        self.scale_in_order = scale_in_order
        self._overrides = dict(conf_overrides or {})
        self._applied: list[tuple[str, str]] = []
        self._sched: _Scheduler | None = None
        # one per place()d instance: wall time, and this thread's CPU time (what the decision
        # costs, whatever else shares the machine)
        self.decision_ms: list[float] = []
        self.decision_cpu_ms: list[float] = []

    # Policy

    def start(self, hosts: list[Host]) -> None:
        self.close()
        _check_hosts(hosts)
        self._apply_overrides()
        ctx = nova_context.get_admin_context()
        self._ctx = ctx
        cell = objects.CellMapping(uuid=_uuid("cell", "cell1"), name="cell1",
                                   transport_url="none:///", database_connection="none:///",
                                   disabled=False)
        self._placement = _Placement(CONF.scheduler.max_placement_results)
        driver = fake_virt.FakeDriver(None)
        now = timeutils.utcnow(with_timezone=True)
        self._hosts: dict[str, Host] = {}
        self._computes: dict[str, objects.ComputeNode] = {}     # host id -> ComputeNode
        self._services: dict[str, objects.Service] = {}
        by_rp = {}
        for i, h in enumerate(hosts, 1):
            rp = _uuid("node", h.id)
            driver.vcpus, driver.memory_mb, driver.local_gb = h.cores, h.memory_mb, LOCAL_GB
            tree = provider_tree.ProviderTree()
            tree.new_root(h.id, rp)
            driver.update_provider_tree(tree, h.id)
            inventory = tree.data(h.id).inventory
            self._placement.add_provider(rp, inventory)
            cn = objects.ComputeNode(
                id=i, uuid=rp, service_id=i, host=h.id, hypervisor_hostname=h.id,
                vcpus=h.cores, memory_mb=h.memory_mb, local_gb=LOCAL_GB,
                vcpus_used=0, memory_mb_used=CONF.reserved_host_memory_mb, local_gb_used=0,
                free_ram_mb=h.memory_mb - CONF.reserved_host_memory_mb, free_disk_gb=LOCAL_GB,
                disk_available_least=LOCAL_GB, current_workload=0, running_vms=0,
                hypervisor_type="fake", hypervisor_version=1000, cpu_info="{}",
                metrics="[]", stats={"num_instances": "0", "io_workload": "0",
                                     "failed_builds": "0"},
                host_ip="192.0.2.1", numa_topology=None, supported_hv_specs=[],
                pci_device_pools=None, mapped=1, updated_at=now,
                cpu_allocation_ratio=inventory["VCPU"]["allocation_ratio"],
                ram_allocation_ratio=inventory["MEMORY_MB"]["allocation_ratio"],
                disk_allocation_ratio=inventory["DISK_GB"]["allocation_ratio"])
            self._computes[h.id] = by_rp[rp] = cn
            self._services[h.id] = objects.Service(
                id=i, host=h.id, binary="nova-compute", topic="compute", disabled=False,
                disabled_reason=None, forced_down=False, report_count=1,
                created_at=now, updated_at=now,
                last_seen_up=now, uuid=_uuid("service", h.id))
            self._hosts[h.id] = h
        self._heartbeat = time.monotonic()
        self._hm = _HostManager(cell, list(self._hosts))
        self._sched = _Scheduler(self._hm, self._placement, cell.uuid, by_rp, self._services)
        self._flavors: dict[Shape, objects.Flavor] = {}
        self._instances: dict[str, tuple[str, Shape, str]] = {}  # id -> (host, shape, uuid)
        self._by_service: dict[str, list[str]] = {}              # service -> ids, oldest first
        self.decision_ms, self.decision_cpu_ms = [], []

    def place(self, shape: Shape, instances: list[str]) -> list[Placement]:
        self._require_started()
        _check_shape(shape)
        for inst in instances:
            if inst in self._instances:
                raise ValueError(f"instance {inst!r} is placed already: give each new "
                                 "instance a new id")
        out = []
        for inst in instances:
            t0, c0 = time.perf_counter(), time.thread_time()
            host = self._select(shape, inst)
            self.decision_ms.append((time.perf_counter() - t0) * 1000.0)
            self.decision_cpu_ms.append((time.thread_time() - c0) * 1000.0)
            if host is not None:
                self._built(inst, shape, host)
            out.append(Placement(inst, host))
        return out

    def scale_in(self, service: str, n: int) -> list[str]:
        self._require_started()
        live = self._by_service.get(service, [])
        if not 0 <= n <= len(live):
            raise ValueError(f"scale_in n={n}: service {service!r} has {len(live)} placed "
                             "instances; n must be between 0 and that")
        order = list(reversed(live)) if self.scale_in_order == "newest" else list(live)
        gone = order[:n]
        # chosen, no longer the service's to scale; the server (and its allocation in
        # Placement) stays until its sessions have drained and it is deleted (``gone``)
        for inst in gone:
            live.remove(inst)
        return gone

    def gone(self, instances: list[str]) -> None:
        """Scaled-in servers whose sessions have drained: deleted now, their allocation freed."""
        self.stop(instances)

    def stop(self, instances: list[str]) -> None:
        self._require_started()
        unknown = [i for i in instances if i not in self._instances]
        if unknown:
            raise ValueError(f"stop: instances {unknown} are not placed by {self.name}")
        for inst in instances:
            host, shape, inst_uuid = self._instances.pop(inst)
            if inst in self._by_service[shape.service]:
                self._by_service[shape.service].remove(inst)
            self._placement.delete_allocation_for_instance(self._ctx, inst_uuid, force=True)
            self._report(host, shape, -1)
            self._hm.delete_instance_info(self._ctx, host, inst_uuid)

    def set_eligible(self, host: str, eligible: bool) -> None:
        self._require_started()
        if host not in self._services:
            raise ValueError(f"set_eligible: host {host!r} is not in the fleet given to start()")
        svc = self._services[host]
        svc.disabled = not eligible
        svc.disabled_reason = None if eligible else "bench/energy: powered off or draining"
        self._sched.invalidate(self._computes[host].uuid)

    def close(self) -> None:
        for group, opt in self._applied:
            CONF.clear_override(opt, group=group)
        self._applied = []
        self._sched = None

    # internals

    def _require_started(self):
        if self._sched is None:
            raise RuntimeError(f"{self.name}: call start(hosts) first")

    def _apply_overrides(self):
        for group, opts in self._overrides.items():
            for opt, value in opts.items():
                try:
                    CONF.set_override(opt, value, group=group)
                except Exception as e:      # NoSuchOptError, ValueError from the option's type
                    self.close()
                    raise ValueError(f"conf_overrides [{group}] {opt}={value!r}: {e}; use an "
                                     "option of the installed Nova's nova.conf") from e
                self._applied.append((group, opt))

    def _flavor(self, shape: Shape) -> objects.Flavor:
        fl = self._flavors.get(shape)
        if fl is None:
            fl = self._flavors[shape] = objects.Flavor(
                id=len(self._flavors) + 1, flavorid=f"{shape.service}-{len(self._flavors) + 1}",
                name=shape.service, vcpus=shape.vcpus, memory_mb=shape.memory_mb, root_gb=0,
                ephemeral_gb=0, swap=0, rxtx_factor=1.0, vcpu_weight=0, disabled=False,
                is_public=True, extra_specs={}, description=None)
        return fl

    def _select(self, shape: Shape, inst: str) -> str | None:
        """One ``POST /servers``: nova-scheduler's select_destinations once Placement answered."""
        self._beat()
        inst_uuid = _uuid("instance", inst)
        spec = objects.RequestSpec.from_components(
            self._ctx, inst_uuid, objects.ImageMeta.from_dict({"properties": {}}),
            self._flavor(shape), None, None, {}, None, None, project_id=_PROJECT,
            user_id="bench")
        resources = sched_utils.resources_from_request_spec(self._ctx, spec, self._hm)
        alloc_reqs, summaries, version = self._placement.get_allocation_candidates(
            self._ctx, resources)
        if not alloc_reqs:
            return None                         # Placement: no host has room (NoValidHost)
        by_rp: dict[str, list] = {}
        for ar in alloc_reqs:
            for rp in ar["allocations"]:
                by_rp.setdefault(rp, []).append(ar)
        try:
            selections = self._sched._schedule(self._ctx, spec, [inst_uuid], by_rp, summaries,
                                               version, return_alternates=False)
        except exception.NoValidHost:
            return None
        chosen = selections[0][0]
        self._sched.invalidate(chosen.compute_node_uuid)     # consume_from_request changed it
        return chosen.service_host

    def _beat(self):
        """Computes heartbeat every report_interval: keep their services up for the
        ComputeFilter (servicegroup db driver) however long the run takes."""
        if time.monotonic() - self._heartbeat < CONF.report_interval:
            return
        now = timeutils.utcnow(with_timezone=True)
        for svc in self._services.values():
            svc.last_seen_up = now
        self._sched.invalidate()
        self._heartbeat = time.monotonic()

    def _built(self, inst: str, shape: Shape, host: str):
        inst_uuid = _uuid("instance", inst)
        self._instances[inst] = (host, shape, inst_uuid)
        self._by_service.setdefault(shape.service, []).append(inst)
        self._report(host, shape, +1)
        self._hm.update_instance_info(self._ctx, host, objects.InstanceList(objects=[
            objects.Instance(uuid=inst_uuid, host=host, node=host)]))

    def _report(self, host: str, shape: Shape, sign: int):
        """nova-compute's resource tracker after a build (+1) or a delete (-1)."""
        cn = self._computes[host]
        cn.vcpus_used += sign * shape.vcpus
        cn.memory_mb_used += sign * shape.memory_mb
        cn.free_ram_mb = cn.memory_mb - cn.memory_mb_used
        cn.running_vms += sign
        cn.stats = dict(cn.stats, num_instances=str(cn.running_vms))
        cn.updated_at = timeutils.utcnow(with_timezone=True)
        self._sched.invalidate(cn.uuid)


def _check_hosts(hosts: list[Host]):
    if not hosts:
        raise ValueError("start: hosts is empty; give the fleet (bench/energy Host list)")
    seen = set()
    for h in hosts:
        if h.id in seen:
            raise ValueError(f"start: host id {h.id!r} appears twice; host ids must be unique")
        seen.add(h.id)
        if h.cores < 1 or h.memory_mb <= CONF.reserved_host_memory_mb:
            raise ValueError(f"host {h.id!r}: cores={h.cores} memory_mb={h.memory_mb}; need "
                             f"cores >= 1 and memory_mb > [DEFAULT] reserved_host_memory_mb "
                             f"({CONF.reserved_host_memory_mb})")


def _check_shape(shape: Shape):
    if shape.vcpus < 1 or shape.memory_mb < 1:
        raise ValueError(f"shape of {shape.service!r}: vcpus={shape.vcpus} "
                         f"memory_mb={shape.memory_mb}; a Nova flavor needs both >= 1")


def where(hosts: list[Host], placed: list[Placement]) -> list[dict]:
    """Per host that took any: its VNFs, hardware threads and memory, most VNFs first."""
    n: dict = {}
    for p in placed:
        if p.host is not None:
            n[p.host] = n.get(p.host, 0) + 1
    by = {h.id: h for h in hosts}
    return [{"host": h, "vnfs": k, "threads": by[h].cores, "memory_mb": by[h].memory_mb,
             "vnfs_per_thread": round(k / by[h].cores, 2)}
            for h, k in sorted(n.items(), key=lambda kv: (-kv[1], kv[0]))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Nova scheduler decision time per placement")
    ap.add_argument("--hosts", type=int, nargs="+", default=[20, 100, 1000])
    ap.add_argument("--placements", type=int, default=2000)
    ap.add_argument("--cores", type=int, default=64)
    ap.add_argument("--memory-mb", type=int, default=256 * 1024)
    ap.add_argument("--fleet", choices=("heterogeneous", "homogeneous"),
                    help="bench/energy's fleet (seed 1) instead of equal hosts; prints where "
                         "the placements went")
    ap.add_argument("--cpu-ratio", type=float,
                    help="initial_cpu_allocation_ratio (default: Nova's, 4.0)")
    args = ap.parse_args(argv)
    shape = Shape(service="vnf", vcpus=1, cpu_mhz=1000, memory_mb=512, slots=64)
    if args.fleet:
        shape = Shape(service="vnf", vcpus=1, cpu_mhz=2000, memory_mb=32, slots=213)
    over = ({None: {"initial_cpu_allocation_ratio": args.cpu_ratio}}
            if args.cpu_ratio is not None else None)
    rows = []
    for n in args.hosts:
        pol = NovaPolicy(conf_overrides=over)
        if args.fleet:
            from bench.energy import fleet as fleetmod
            hosts = list(fleetmod.make_fleet(args.fleet, n, 1, model=None).hosts)
        else:
            hosts = [Host(f"h{i:04d}", "bench", args.cores, 2000, args.memory_mb)
                     for i in range(n)]
        pol.start(hosts)
        t0 = time.perf_counter()
        placed = pol.place(shape, [f"i{k}" for k in range(args.placements)])
        wall = time.perf_counter() - t0
        ms, cpu = sorted(pol.decision_ms), sorted(pol.decision_cpu_ms)
        rows.append({"hosts": n, "placements": args.placements,
                     "placed": sum(p.host is not None for p in placed),
                     **decision_summary(ms, cpu),
                     "wall_s": round(wall, 2)})
        if args.fleet:
            rows[-1]["where"] = where(hosts, placed)
        pol.close()
        print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
