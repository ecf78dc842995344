# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Start one instance of a service in a zone and make its slots known at once.

Used by placement (deploy the decision) and by the resolver (fast-track on-demand launch): the
launch is recorded (start, end, predicted delay) for the queuing-delay estimate, the instance is
stored, and its slots go into the registry straight from the launch so a waiting client gets one
before the instance's first slot update arrives.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

from oslo_log import log as logging

from fluidvim.common import instance_states as istates
from fluidvim.common.zonetypes import InstanceInfo, LaunchRequest, QoE, ZoneAdapter, ZoneError
from fluidvim.evaluator import conf as evalconf
from fluidvim.evaluator.model import LOAD, ServiceProfile
from fluidvim.evaluator.qoeslots import NoQoECapacity, launch_qoe

from .exception import DatabaseDown
from .slots import SlotReport

LOG = logging.getLogger(__name__)

PROFILE_FIELDS = {f.name for f in dataclasses.fields(ServiceProfile)}


def profile_of(service_row) -> ServiceProfile:
    p = service_row.profile
    return ServiceProfile(**{k: v for k, v in p.items() if k in PROFILE_FIELDS})


def launch_request(service_row, host: str | None = None, bridges=(),
                   qoe: QoE | None = None) -> LaunchRequest:
    """``bridges``: the NICs' networks (ids in the zone; () = the zone's default NICs);
    ``qoe``: the instance's slots at the service's QoE (:func:`service_qoe`)."""
    p = service_row.profile
    return LaunchRequest(service=service_row.name, click_config=p["click_config"],
                         slots=p.get("slots"), memory_mb=p.get("memory_mb"),
                         vcpus=p.get("vcpus", 1), kernel=p.get("kernel"), host=host,
                         nics=tuple(bridges or ()), qoe=qoe)


def max_loss_of(conf) -> float:
    """``[evaluator] max_loss``: the loss a service tolerates where its slots are read off a
    load probe - stage 1's slots and feasibility and a launch's QoE capacity read it alike."""
    evalconf.register_opts(conf)
    return conf.evaluator.max_loss


def service_qoe(service_row, results, max_loss: float) -> QoE | None:
    """The QoE of ``service_row``'s instances on an environment whose stage-1 probe results
    are ``results`` (the chosen candidate's): capacity from its load probe at the service's
    deadline and quantile, with stage 1's ``max_loss`` (:func:`max_loss_of`). None (logged)
    when there is no usable load probe result; ZoneError (the launch is refused, with the fix)
    when the probe shows no session within the deadline."""
    svc = profile_of(service_row)
    try:
        qoe, why = launch_qoe(results, svc.deadline_ms, svc.qos_quantile, svc.session_pps,
                              max_loss=max_loss)
    except NoQoECapacity as e:
        LOG.warning("%s: launch refused: %s", svc.name, e)
        raise ZoneError(f"{svc.name} not launched: {e}") from None
    if qoe is None:
        LOG.info("%s: no QoE slots for this launch (%s): the flow table's slots apply",
                 svc.name, why)
    return qoe


def zone_qoe(stage1, zone: ZoneAdapter, service_row, host: str | None = None, *,
             max_loss: float) -> QoE | None:
    """The QoE of a launch without a placement decision (the resolver's fast track, a woken
    host): from ``stage1``'s cached load probe of the environment type of ``host``, or of the
    zone's only type when the zone picks the host. None when that type is not known (the zone
    has several), there is no cache, or no usable load result; ZoneError when the probe shows
    no session within the deadline (:func:`service_qoe`)."""
    cache = getattr(stage1, "cache", None)
    if cache is None:
        return None
    try:   # the zone's types when it picks the host (cheaper than its hosts' full figures)
        uids = (set(zone.environments()) if host is None else
                {h.env.uid for h in zone.hosts() if h.name == host})
    except ZoneError as e:
        LOG.info("%s: no QoE slots for this launch (zone %s: %s)", service_row.name, zone.name, e)
        return None
    if len(uids) != 1:
        return None
    r = cache.get_valid(uids.pop(), LOAD)
    return service_qoe(service_row, [r] if r is not None else [], max_loss)


def deploy(store, registry, zone: ZoneAdapter, service_row, *, host: str | None = None,
           decision_id: str | None = None, predicted_s: float | None = None,
           started_at: float | None = None, bridges=(), reserve: int = 0,
           qoe: QoE | None = None) -> InstanceInfo:
    """Launch and record; raises ZoneError (the launch record says why) and leaves no instance.
    ``reserve``: slots of the new instance handed out already (the session that asked for the
    launch) - reserved as its slots become known, in one decision, so nobody else gets them.
    ``started_at`` (time.time()) = when the client asked, if earlier than now; ``bridges`` = the
    networks of the instance's NICs (an NS deploy puts them on its virtual links); ``qoe`` = the
    instance's slots at the service's QoE (:func:`service_qoe`; None = the flow table's)."""
    req = launch_request(service_row, host, bridges, qoe)
    lid = store.launch_started(zone.name, service_row.name, predicted_s, started_at, req.token)
    try:
        inst = zone.launch(req)
    except ZoneError as e:
        store.launch_finished(lid, False, error=str(e))
        raise
    except Exception as e:
        store.launch_finished(lid, False, error=f"{type(e).__name__}: {e}")
        raise ZoneError(f"zone {zone.name}: launch of {service_row.name} failed: {e}") from e
    try:
        store.add_instance(id=inst.id, zone=zone.name, host=inst.host, service=service_row.name,
                           name=inst.name, status=istates.RUNNING, slots_total=inst.slots_total,
                           decision_id=decision_id, launch_ms=inst.launch_ms)
    except DatabaseDown as e:
        _unrecorded(store, registry, zone, inst, lid, e)
        raise
    rep = SlotReport(zone=zone.name, host=inst.host or "", instance=inst.id,
                     service=service_row.name, slots=inst.slots_total, delay_s=predicted_s,
                     region=zone.region, at=time.time(), exact=inst.slots_total)
    with registry.decision():
        registry.apply(rep)
        if reserve:
            registry.reserve(inst.id, service_row.name, reserve)
    store.save_slot_report(rep)
    # finished = the slot exists for the orchestrator (what a waiting client sees), so the
    # recorded time includes this bookkeeping, as the queuing delay should
    store.launch_finished(lid, True, instance_id=inst.id, kind=inst.kind)
    LOG.info("launched %s (%s) in zone %s for %s", inst.name, inst.id, zone.name,
             service_row.name)
    return inst


def _unrecorded(store, registry, zone: ZoneAdapter, inst: InstanceInfo, lid: int,
                down: DatabaseDown) -> None:
    """The database went away between the launch and its record: nothing would know of the
    instance, so it goes (terminating needs no database), and its launch is closed as failed
    once the database answers again (:meth:`.db.Store.launch_unrecorded`)."""
    LOG.warning("launched %s (%s) in zone %s but cannot record it (%s): terminating it",
                inst.name, inst.id, zone.name, down.message)
    try:
        zone.terminate(inst.id)
    except Exception as e:  # noqa: BLE001 - the database's error is the request's answer
        LOG.error("zone %s: cannot terminate the unrecorded instance %s: %s", zone.name,
                  inst.id, e)
    store.launch_unrecorded(lid, inst.id, "the orchestrator's database went away before the "
                            f"instance {inst.id} was recorded: it was terminated")
    with contextlib.suppress(DatabaseDown):     # shared (active-active): its rows go with it
        registry.forget(inst.id)
