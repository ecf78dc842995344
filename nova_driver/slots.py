# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Slot updates from nova-compute (``[fluidvim] slot_notifications = true``).

nova-compute runs the orchestrator's :class:`~fluidvim.orchestrator.notify.SlotAgent` over
:class:`ComputeSlots` - this compute's running VNFs, one per server - publishing through a
:class:`~fluidvim.orchestrator.notify.SlotPublisher` on Nova's own notification transport
(``[oslo_messaging_notifications] transport_url``, else ``[DEFAULT] transport_url``) to
``[fluidvim] slot_topic``. Each update names the server (instance UUID = the orchestrator's
instance id for Nova zones), this compute (``[DEFAULT] host``, the NovaZone's host name), the
zone and the service, and carries the VNF's own free slots (its flow table, asked over the control
channel) and the host's queuing delay (the launch core's median launch time of the next launch's
kind). A deleted server is announced ``fluidvim.slots.gone`` at once.

Nova gives a driver no per-server configuration after spawn, so the service (server metadata
``fluidvim_service``, else the flavor's name) and availability zone are recorded at spawn, in
the driver's SQLite instance-name database, so they survive a nova-compute restart. Servers spawned
before the option was enabled have no record and are not announced.
"""

from __future__ import annotations

import oslo_messaging as messaging
import sqlalchemy as sa
from oslo_log import log as logging
from oslo_utils import uuidutils

from fluidvim.common.slotnotify import SlotAgent, SlotPublisher
from fluidvim.nova_driver.models import SlotService
from fluidvim.nova_driver.names import InstanceNames
from fluidvim.vnf import states as vstates

LOG = logging.getLogger(__name__)
META_SERVICE = "fluidvim_service"          # fluidvim.orchestrator.zones.nova.META_SERVICE


_Service = SlotService        # a table of the launch core's schema (models.py)


class ServiceRecords:
    """Instance UUID -> (service, availability zone): a table in the driver's instance-name
    database (:class:`~fluidvim.nova_driver.names.InstanceNames`, which owns the engine)."""

    def __init__(self, names: InstanceNames):
        self.Session = names.Session

    def set(self, uuid: str, service: str, zone: str | None) -> None:
        with self.Session.begin() as s:
            s.merge(_Service(uuid=uuid, service=service, zone=zone))

    def forget(self, uuid: str) -> None:
        with self.Session.begin() as s:
            s.execute(sa.delete(_Service).where(_Service.uuid == uuid))

    def all(self) -> dict[str, tuple[str, str | None]]:
        with self.Session() as s:
            return {r.uuid: (r.service, r.zone) for r in s.scalars(sa.select(_Service))}


def service_of(instance) -> str:
    """The server's metadata ``fluidvim_service``, else its flavor's name ("" if neither)."""
    try:
        svc = (instance.metadata or {}).get(META_SERVICE)
    except Exception:  # noqa: BLE001 - an instance object without metadata loaded
        svc = None
    if not svc:
        try:
            svc = instance.flavor.name
        except Exception:  # noqa: BLE001
            svc = None
    return svc or ""


class ComputeSlots:
    """This compute's VNFs as the zone-like source SlotAgent polls."""

    def __init__(self, manager_fn, records: ServiceRecords, *, host_name: str, region: str,
                 zone: str | None, default_zone: str):
        self._manager = manager_fn                # the driver's launch core (created lazily)
        self.records = records
        self.host_name = host_name
        self.region = region
        self.zone_override = zone
        self.default_zone = default_zone

    @property
    def name(self) -> str:
        return self.zone_override or self.default_zone

    def instance_slots(self) -> dict[str, dict]:
        mgr = self._manager()
        services = self.records.all()
        running = {r.name for r in mgr.list()
                   if r.status == vstates.RUNNING and uuidutils.is_uuid_like(r.name)}
        if not running:
            return {}
        per_name = mgr.slots()["vnfs"]            # asks each VNF (control channel stats)
        delay = mgr.queuing_delay()["seconds"]
        power = mgr.power_state() or {}           # `fluidvim metrics serve` on this compute
        watts = {v.get("name"): v.get("watts") for v in power.get("vnfs", {}).values()}
        out = {}
        for uuid in running:
            svc, az = services.get(uuid, ("", None))
            s = per_name.get(uuid)
            out[uuid] = {"name": uuid, "service": svc, "zone": self.zone_override or az or self.default_zone,
                         "delay_s": delay, **(s or {}), "free": None if s is None else s["free"],
                         "watts": watts.get(uuid)}
        return out


class SlotNotifications:
    """The publisher thread of one nova-compute (started by init_host, stopped by cleanup_host)."""

    def __init__(self, conf, manager_fn, names: InstanceNames, host: str):
        f = conf.fluidvim
        self.conf = conf
        self.records = ServiceRecords(names)
        default_zone = getattr(conf, "default_availability_zone", None) or "nova"
        self.source = ComputeSlots(manager_fn, self.records, host_name=host, region=f.slot_region,
                                   zone=f.slot_zone, default_zone=default_zone)
        self.transport = messaging.get_notification_transport(conf)
        self.publisher = SlotPublisher(self.transport, f"fluidvim.nova.{host}", f.slot_topic,
                                       min_interval=f.slot_update_min_interval,
                                       heartbeat=f.slot_heartbeat_interval)
        self.agent = SlotAgent(self.source, self.publisher, None, f.slot_interval)

    @classmethod
    def start_if_enabled(cls, conf, manager_fn, names: InstanceNames, host: str,
                         start: bool = True) -> SlotNotifications | None:
        """The publisher when ``[fluidvim] slot_notifications`` is on, publishing unless
        ``start`` is false (then :meth:`start` does)."""
        if not conf.fluidvim.slot_notifications:
            return None
        self = cls(conf, manager_fn, names, host)
        if start:
            self.start()
        return self

    _started = False

    def start(self) -> None:
        """Start publishing (once)."""
        if self._started:
            return
        self._started = True
        self.agent.start()
        LOG.info("fluidvim: publishing slot updates of %s (zone %s, region %s) on topic %s every "
                 "%.1f s", self.source.host_name, self.source.name, self.source.region,
                 self.conf.fluidvim.slot_topic, self.conf.fluidvim.slot_interval)

    def spawned(self, instance) -> None:
        """Record the service (and AZ) of a server the driver just started."""
        svc = service_of(instance)
        if not svc:
            LOG.warning("fluidvim: server %s has neither metadata %s nor a flavor name: no slot "
                        "updates for it", instance.uuid, META_SERVICE)
            return
        az = getattr(instance, "availability_zone", None) if instance.obj_attr_is_set(
            "availability_zone") else None
        self.records.set(instance.uuid, svc, az)
        self.agent.wake()            # announce it now, from the agent's thread (never blocks)

    def destroyed(self, instance_uuid: str) -> None:
        self.records.forget(instance_uuid)
        self.agent.forget(instance_uuid)          # 'gone' from the agent's thread, now

    def stop(self) -> None:
        self.agent.stop()
        self.transport.cleanup()
