# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim-orchestrator``: the orchestrator as an oslo.messaging RPC server.

:class:`Orchestrator` is the service's core (usable in-process: the demo, tests, benchmarks);
:class:`OrchestratorEndpoint` exposes it over RPC (:mod:`.operations`' methods), next to the ``ns`` namespace
of network services from NFV descriptors (:mod:`.mano.service`); :func:`main` is the console
script: it serves RPC on ``[orchestrator] topic``, listens for slot-update notifications on
``[orchestrator] notification_topic`` and, with ``[orchestrator] local_zone``, runs the embedded
local zone (launch core + slot agent publishing through the same notification path).
"""

from __future__ import annotations

import signal
import socket
import sys
import threading

import oslo_messaging as messaging
from oslo_config import cfg
from oslo_log import log as logging

from fluidvim.common import instance_states as istates
from fluidvim.common.slotnotify import SlotAgent, SlotPublisher
from fluidvim.common.zonetypes import INSTANCE_ACTIONS, NETWORK_NAME_RE, ZoneAdapter, ZoneError

from . import conf as orchconf
from .db import Store
from .deploy import PROFILE_FIELDS, max_loss_of, zone_qoe
from .exception import DatabaseDown, NotFound, Refused, invalid
from .ha import Membership, worker_id
from .mano.service import NSEndpoint, NSManager  # network services from NSDs: namespace "ns" 1.0
from .notify import SlotListener
from .operations import api_version
from .osm.vim import VimEndpoint  # the VIM API (OSM RO plugin): namespace "vim" 1.1
from .placement import PlacementEngine, explain
from .queuing import QueuingEstimator
from .resolver import Resolver
from .rpc import bind_endpoint, number_field, rpc_method, validate_service
from .slots import SharedSlotRegistry, SlotRegistry, SlotReport

LOG = logging.getLogger(__name__)

RPC_API_VERSION = api_version("")      # the newest of operations.RPC's methods


def default_runners(conf, store):
    """The evaluator's runners, built by its own factories from [evaluator]: stage 1 over a
    probe cache in the orchestrator's database (results valid [orchestrator] probe_validity),
    stage 2 = the [evaluator] analyzer with the [orchestrator] weights, and a factory for services
    that bring their own formula."""
    from fluidvim.evaluator import analyzers, conf as evalconf

    evalconf.register_opts(conf)
    o = conf.orchestrator
    runner1 = evalconf.make_stage1(conf, store.engine, valid_for_s=o.probe_validity)
    weights = {"slots": o.weight_slots, "price": o.weight_price, "power": o.weight_power,
               "delay": o.weight_delay, "boot": o.weight_boot}
    runner2 = analyzers.Stage2Runner(evalconf.make_analyzer(conf, weights))
    max_loss = conf.evaluator.max_loss
    return runner1, runner2, lambda f: analyzers.Stage2Runner(
        analyzers.FormulaAnalyzer(f, max_loss))


class Orchestrator:
    def __init__(self, conf: cfg.ConfigOpts, *, zones: list[ZoneAdapter] | None = None,
                 stage1=None, stage2=None, power=None, manager=None,
                 zone_labels: dict | None = None):
        self.conf = conf
        o = conf.orchestrator
        self.store = Store(o.connection)
        self.members = None
        if o.active_active:             # several orchestrators on this database (ha.py)
            self.registry = SharedSlotRegistry(self.store, ttl=o.slot_report_ttl,
                                               reservation_ttl=o.reservation_ttl)
            self.members = Membership(self.store, o.worker_heartbeat_interval,
                                      o.worker_dead_after, recover=self.recover_worker)
            self.members.register().start()       # beats at once; recovers once ready
            # only launches of no worker (from before active_active); the others' are theirs
            abandoned = self.store.abandon_in_flight(owners=[None])
        else:
            self.registry = SlotRegistry(ttl=o.slot_report_ttl,
                                         reservation_ttl=o.reservation_ttl)
            for svc in self.store.services():
                self.registry.set_aliases(svc.name, svc.aliases)
            for r in self.store.slot_reports():
                self.registry.apply(SlotReport(zone=r.zone, host=r.host, instance=r.instance,
                                               service=r.service, slots=r.slots,
                                               delay_s=r.delay_s, region=r.region, at=r.at,
                                               exact=r.exact))
            # a lone orchestrator: its launches in flight before a restart, as a dead peer's
            self.store.owner, abandoned = worker_id(), 0      # (resume.restart, below)
        if abandoned:
            LOG.warning("%d launch(es) in flight when the orchestrator stopped: marked failed",
                        abandoned)
        self.manager = None
        self._own_manager = manager is None
        self.local_zone = None
        if zones is None:
            from .zones import build_zones
            zones = build_zones(o.zones, o.region)
        zones = list(zones)
        if o.local_zone and not any(z.in_process for z in zones):
            from fluidvim.vnf.manager import VNFManager

            from .zones.local import LocalZone
            self.manager = manager or VNFManager(conf)
            if manager is None:       # a caller's manager has recovered already (re-watching
                self.manager.recover()  # a VNF twice would leave a stale pidfd in its watcher)
            self.local_zone = LocalZone(o.local_zone_name, self.manager, region=o.region,
                                        bridges=tuple(o.local_bridges))
            self.local_zone.start_pool(o.local_pool_size)
            zones.append(self.local_zone)
        else:
            self.local_zone = next((z for z in zones if z.in_process), None)
        self.zones = {z.name: z for z in zones}
        self.zone_labels = dict(zone_labels or {})
        for z in zones:
            self.store.upsert_zone(z.name, z.kind, z.region, self.zone_labels.get(z.name))
            try:
                self.store.sync_hosts(z.name, z.hosts())
            except Exception as e:  # noqa: BLE001 - a zone that is down now may come back
                LOG.warning("zone %s: cannot list hosts: %s", z.name, e)
        if power is None:                 # [power]: RAPL / Redfish / SPECpower curve / linear
            from .power import HostMarginalPower
            power = HostMarginalPower(conf)
        self.queuing = QueuingEstimator(self.store, history=o.launch_history,
                                        parallelism=o.launch_parallelism,
                                        default_launch_s=o.default_launch_time)
        formula_runner = None
        if stage1 is None or stage2 is None:
            d1, d2, formula_runner = default_runners(conf, self.store)
            stage1, stage2 = stage1 or d1, stage2 or d2
        self.placement = PlacementEngine(self.store, self.registry, self.zones, stage1, stage2,
                                         self.queuing, power=power, tolerance=o.decision_tolerance,
                                         zone_labels=self.zone_labels,
                                         formula_runner=formula_runner,
                                         max_loss=max_loss_of(conf))   # stage 1's, for the QoE
        self.resolver = Resolver(self.store, self.registry, self.zones, self.queuing,
                                 confirm_timeout=o.confirm_timeout, route=o.session_route,
                                 per_thread=getattr(power, "per_thread", None))
        self.resolver.qoe_for = lambda zone, row: zone_qoe(
            self.placement.stage1, zone, row, max_loss=self.placement.max_loss)
        self.host_power = None                      # [host_power] enabled: drain, off, wake
        if "host_power" in conf and conf.host_power.enabled:
            from .hostpower import HostPower
            self.host_power = HostPower(
                conf, self.store, self.zones, self.registry,
                marginal=power if hasattr(power, "model") else None,
                launcher=self._launch_on)
            self.registry.unavailable = self.host_power.unavailable
            self.placement.host_power = self.host_power
        self.hierarchy = None                       # [hierarchy] enabled: parent over zones
        if "hierarchy" in conf and conf.hierarchy.enabled:
            from .hierarchy import HierarchicalPlacer
            self.hierarchy = HierarchicalPlacer.from_conf(conf, self.placement, self.zone_labels)
        self.ns = NSManager(self)                   # network services from NFV descriptors
        self._rpc = self._listener = self._agent = None
        self.slot_pollers: list[SlotAgent] = []     # one per zone with a slot_interval (Nomad)
        self._transports = []
        if self.members is not None:                # zones known: peers can be recovered
            self.members.ready()
        else:                                       # its own operations cut by a death
            from .mano.resume import restart
            restart(self)

    def _launch_on(self, zone: str, host: str, service: str):
        """One instance of ``service`` on ``host`` (a host just woken for it)."""
        from .deploy import deploy
        row = self.store.service(service)
        return deploy(self.store, self.registry, self.zones[zone], row, host=host,
                      qoe=zone_qoe(self.placement.stage1, self.zones[zone], row, host,
                                   max_loss=self.placement.max_loss))

    def recover_worker(self, worker_id: str) -> dict:
        """Take over what a dead orchestrator (``worker_id``) left in flight. Each of its
        unfinished launches is closed as failed (its time is no launch-time sample); the
        instance it made in the zone but never recorded (found by the launch's token in the
        instance name) is finished for it - recorded, if it runs - or rolled back - terminated
        and its slots forgotten, if it does not. Called by ha.Membership."""
        adopted, removed, failed = [], [], 0
        for row in self.store.launches(in_flight=True, owner=worker_id, limit=10_000):
            zone = self.zones.get(row.zone)
            note = f"orchestrator {worker_id} died during the launch"
            if zone is not None and row.token:
                known = {i.id for i in self.store.instances(zone=row.zone)}
                try:
                    for inst in zone.instances():
                        if row.token not in inst.name or inst.id in known:
                            continue
                        if inst.status == istates.RUNNING:
                            self.store.add_instance(
                                id=inst.id, zone=zone.name, host=inst.host,
                                service=row.service, name=inst.name, status=istates.RUNNING,
                                slots_total=inst.slots_total, launch_ms=inst.launch_ms)
                            adopted.append(inst.id)
                            note += f"; its instance {inst.id} runs and was adopted"
                        else:
                            zone.terminate(inst.id)
                            self.registry.forget(inst.id)
                            removed.append(inst.id)
                            note += f"; its instance {inst.id} ({inst.status}) was removed"
                except Exception as e:  # noqa: BLE001 - zone down: the launch is failed anyway
                    LOG.warning("zone %s: cannot look for what launch %d of dead worker %s "
                                "made: %s", row.zone, row.id, worker_id, e)
            failed += self.store.abandon_launch(row.id, note)
        ns = self.ns.take_over(worker_id)      # NS operations: resumed or rolled back
        LOG.warning("took over dead orchestrator %s: %d launch(es) in flight closed; "
                    "instances adopted %s, removed %s; network services: %s", worker_id, failed,
                    adopted, removed, ns)
        return {"failed": failed, "adopted": adopted, "removed": removed, "ns": ns}

    # -- the API (RPC endpoint methods call these) --
    def register_service(self, name, click_config, **fields) -> dict:
        unknown = set(fields) - (PROFILE_FIELDS | {"aliases", "slots", "memory_mb", "vcpus",
                                                   "kernel", "max_price_per_hour", "formula",
                                                   "max_latency_ms"})
        if unknown:
            raise invalid(sorted(unknown)[0], "unknown field of a service",
                          "see `fluidvim service register --help`")
        profile, als = validate_service(name, click_config, **fields)
        self.store.put_service(name, profile, als, profile["max_queuing_delay_s"])
        self.registry.set_aliases(name, als)
        return self.store.service(name).as_dict()

    def list_services(self) -> list[dict]:
        return [r.as_dict() for r in self.store.services()]

    def remove_service(self, name) -> dict:
        self.store.delete_service(name)
        self.registry.set_aliases(name, {})
        return {"removed": name}

    def place(self, service, location=None, deploy=False) -> dict:
        placer = self.hierarchy or self.placement    # hierarchical: location = ingress site
        return placer.place(service, location=location, deploy_it=bool(deploy),
                            request={"service": service, "location": location,
                                     "deploy": bool(deploy)}).to_dict()

    def explain(self, decision_id) -> dict:
        return explain(self.store, decision_id)

    def list_decisions(self, limit=20) -> list[dict]:
        return [d.as_dict() for d in
                self.store.decisions(number_field("limit", limit, 1, 1000, integer=True))]

    def resolve(self, service, client_location=None) -> dict:
        return self.resolver.resolve(service, client_location).to_dict()

    def list_zones(self) -> list[dict]:
        out = []
        for name, z in sorted(self.zones.items()):
            try:
                hosts = z.hosts()
                err = None
                self.store.sync_hosts(name, hosts)      # the database follows what zones report
            except Exception as e:  # noqa: BLE001
                hosts, err = [], str(e)
            delays = {s.name: self.queuing.delay(z, s.name).to_dict()
                      for s in self.store.services()}
            out.append({"name": name, "kind": z.kind, "region": z.region, "error": err,
                        "hosts": [{"name": h.name, "env_uid": h.env.uid, "env": h.env.to_dict(),
                                   "slots_total": h.slots_total, "slots_free": h.slots_free,
                                   "cpu_util": h.cpu_util} for h in hosts],
                        "queuing_delay": delays})
        return out

    def slots(self, service=None, level="zone", watts=False) -> dict:
        if level not in ("instance", "host", "zone", "region"):
            raise invalid("level", f"{level!r} is not one of instance, host, zone, region")
        names = [service] if service else [s.name for s in self.store.services()]
        if service:
            self.store.service_or_alias(service)
        return {n: self.registry.aggregate(n, level, watts=bool(watts)) for n in names}

    def list_instances(self, service=None) -> list[dict]:
        return [i.as_dict() for i in self.store.instances(
            service, statuses=(*istates.LIVE, istates.PAUSED))]

    def terminate(self, instance) -> dict:
        rows = [i for i in self.store.instances(statuses=None) if i.id == instance
                or i.name == instance]
        if not rows:
            raise NotFound(f"instance: no instance {instance!r} (see `fluidvim instance list`)",
                           field="instance")
        row = rows[0]
        zone = self.zones.get(row.zone)
        if zone is not None:
            zone.terminate(row.id)
        self.store.set_instance_status(row.id, istates.DELETED)
        self.store.delete_slot_reports(row.id)
        self.registry.forget(row.id)
        return {"terminated": row.id}

    def instance_action(self, instance, action) -> dict:
        """Day-2 action on one instance (pause, unpause, reboot, rebuild: zonetypes
        INSTANCE_ACTIONS) through its zone; the instance's recorded status follows."""
        if action not in INSTANCE_ACTIONS:
            raise invalid("action", f"{action!r} is not an instance action",
                          f"use one of {', '.join(INSTANCE_ACTIONS)}")
        rows = [i for i in self.store.instances(statuses=None) if i.id == instance
                or i.name == instance]
        if not rows or rows[0].status == istates.DELETED:
            raise NotFound(f"instance: no instance {instance!r} (see `fluidvim instance list`)",
                           field="instance")
        row = rows[0]
        zone = self._zone(row.zone)
        try:
            status = zone.instance_action(row.id, action)
        except ZoneError as e:
            raise Refused(f"instance {row.name}: {e}") from None
        self.store.set_instance_status(row.id, status)
        LOG.info("instance %s (%s): %s -> %s", row.name, row.id, action, status)
        return {"id": row.id, "name": row.name, "zone": row.zone, "action": action,
                "status": status}

    def zone_images(self, zone: str) -> list[dict]:
        """The images (VNF kernels by name) a zone offers: the VIM API's list (``[osm_vim]
        images_dir``, ``default_image_name``, images registered by path)."""
        from .osm.vim import VimService
        return VimService(self).list_images(zone)

    # -- host power ([host_power]) --
    def _host_power(self):
        """The manager; without [host_power] enabled a plan-only one (no BMC acts)."""
        if self.host_power is not None:
            return self.host_power
        from .hostpower import HostPower
        return HostPower(self.conf, self.store, self.zones, self.registry,
                         marginal=self.placement.power if hasattr(self.placement.power, "model")
                         else None)

    def power_plan(self) -> dict:
        return self._host_power().plan()

    def power_hosts(self) -> list[dict]:
        return [v.to_dict() for v in self._host_power().views()]

    # -- networks (virtual links) of the zones --
    def _zone(self, zone):
        if zone not in self.zones:
            raise NotFound(f"zone: no zone {zone!r} (zones: {', '.join(sorted(self.zones))})",
                           field="zone")
        return self.zones[zone]

    @staticmethod
    def network_dict(n) -> dict:
        return {"id": n.id, "name": n.name, "zone": n.zone, "ports": list(n.ports)}

    def list_networks(self, zone=None) -> list[dict]:
        zones = [self._zone(zone)] if zone else [self.zones[z] for z in sorted(self.zones)]
        return [self.network_dict(n) for z in zones for n in z.networks()]

    def create_network(self, zone, name) -> dict:
        z = self._zone(zone)
        if not isinstance(name, str) or not NETWORK_NAME_RE.fullmatch(name):
            raise invalid("name", f"{name!r} is not a valid network name",
                          "use 1-63 letters, digits, '_', '.' or '-', starting with a letter or "
                          "digit")
        try:
            return self.network_dict(z.create_network(name))
        except ZoneError as e:
            raise invalid("network", str(e)) from None

    def delete_network(self, zone, network) -> dict:
        try:
            self._zone(zone).delete_network(network)
        except ZoneError as e:
            raise invalid("network", str(e)) from None
        return {"deleted": network}

    # -- running as a service --
    def endpoints(self) -> list:
        """The RPC endpoints this service serves (each with its own target namespace/version)."""
        from .owners import OwnersEndpoint  # fluidvim-api's project record: "owners" 1.0
        return [OrchestratorEndpoint(self), NSEndpoint(self), VimEndpoint(self),
                OwnersEndpoint(self)]

    def start(self, server: str | None = None, *, agent: bool = True) -> None:
        o = self.conf.orchestrator
        rpc_t = messaging.get_rpc_transport(self.conf, url=o.transport_url)
        notif_t = messaging.get_notification_transport(self.conf, url=o.transport_url)
        self._transports = [rpc_t, notif_t]
        target = messaging.Target(topic=o.topic, server=server or socket.gethostname(),
                                  version=RPC_API_VERSION)
        self._rpc = messaging.get_rpc_server(
            rpc_t, target, self.endpoints(),
            access_policy=messaging.DefaultRPCAccessPolicy)
        self._listener = SlotListener(notif_t, o.notification_topic, self.registry, self.store)
        self._listener.start()
        self._rpc.start()
        if agent and self.local_zone is not None:
            pub = SlotPublisher(notif_t, f"fluidvim.local.{self.local_zone.host_name}",
                                o.notification_topic, min_interval=o.slot_update_min_interval,
                                heartbeat=o.slot_heartbeat_interval)
            self._agent = SlotAgent(self.local_zone, pub, self.queuing, o.agent_interval)
            self._agent.start()
        for z in self.zones.values() if agent else ():
            if z.slot_interval > 0:    # polled VNF stats (Nomad) -> the same notifications
                pub = SlotPublisher(notif_t, f"fluidvim.nomad.{z.name}", o.notification_topic,
                                    min_interval=o.slot_update_min_interval,
                                    heartbeat=o.slot_heartbeat_interval)
                self.slot_pollers.append(SlotAgent(z, pub, self.queuing, z.slot_interval))
                self.slot_pollers[-1].start()
        if agent and o.ns_scaler_interval > 0:          # NS scale out/in from slots, heal
            self.ns.start_scaler(o.ns_scaler_interval)
        if agent and self.host_power is not None:       # resume, then the power loop
            self.host_power.start()
        LOG.info("orchestrator serving topic %s (RPC %s), slot updates on %s, zones: %s",
                 o.topic, RPC_API_VERSION, o.notification_topic, ", ".join(self.zones))

    @property
    def agent(self):
        return self._agent

    def stop(self) -> None:
        import time

        t0, took = time.monotonic(), {}

        def step(name, fn):
            t = time.monotonic()
            fn()
            took[name] = round(time.monotonic() - t, 2)

        if self.members is not None:
            step("membership", self.members.stop)
            self.members = None
        if self.ns.scaler is not None:
            step("ns scaler", self.ns.stop_scaler)
        if self.host_power is not None:
            step("host power", self.host_power.stop)
        if self._agent:
            step("slot agent", self._agent.stop)
        for p in self.slot_pollers:
            step(f"slot poller {p.zone.name}", p.stop)
        self.slot_pollers = []
        if self._rpc:
            step("rpc server", lambda: (self._rpc.stop(), self._rpc.wait()))
        if self._listener:
            step("notification listener", self._listener.stop)
        for i, t in enumerate(self._transports):
            step(f"transport {i}", t.cleanup)
        if took:
            LOG.info("orchestrator stopped in %.1f s: %s", time.monotonic() - t0, took)
        self._rpc = self._listener = self._agent = None
        self._transports = []

    def close(self) -> None:
        self.stop()
        if close_probes := getattr(self.placement.stage1, "close", None):
            close_probes()          # a load probe's background confirm: its VNF and netns
        self.resolver.close()
        if self.manager is not None and self._own_manager:
            self.manager.close()
        self.store.close()


class OrchestratorEndpoint:
    """RPC API of the orchestrator (namespace ``""``): ``ping`` and a pass-through to
    :class:`Orchestrator` for every other method of the operation table (:func:`.rpc.bind_endpoint`).
    Every method returns JSON-serialisable data."""

    target = messaging.Target(version=RPC_API_VERSION)

    def __init__(self, orch: Orchestrator):
        self.orch = orch

    @rpc_method
    def ping(self, ctxt):
        return {"version": RPC_API_VERSION, "zones": sorted(self.orch.zones)}


bind_endpoint(OrchestratorEndpoint, "", "orch")


def main(argv=None) -> int:
    conf = cfg.ConfigOpts()
    orchconf.register_service_opts(conf)
    logging.register_options(conf)
    conf(sys.argv[1:] if argv is None else argv, project="fluidvim",
         prog="fluidvim-orchestrator",
         description="fluidvim-orchestrator: placement, slots, the resolver and network "
                     "services over RPC (docs/orchestrator.md).",
         epilog="example (RabbitMQ at [orchestrator] transport_url, the database made by "
                "fluidvim-manage db sync): fluidvim-orchestrator --config-file "
                "/etc/fluidvim/fluidvim-orchestrator.conf")
    logging.setup(conf, "fluidvim-orchestrator")
    from fluidvim.common.migration import SchemaError
    try:
        orch = Orchestrator(conf)
    except SchemaError as e:        # a database of an older release: fluidvim-manage db sync
        refused = str(e)
    except DatabaseDown as e:       # its server does not answer: one line, how to start it
        refused = e.message
    else:
        refused = None
    if refused:
        LOG.error("%s", refused)
        print(f"fluidvim-orchestrator: {refused}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # active-active: each process its own RPC server name (its worker id), so a call can be
    # directed at one of them; calls to the topic go to any
    orch.start(server=orch.members.id if orch.members is not None else None)
    try:
        stop.wait()
    finally:
        orch.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
