# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``resolve(service, client_location)``: where does a new session go?

1. An instance with a free slot (aliases applied; nearest location first, then most free). The
   slot is reserved in the registry until the instance's own update reflects it.
2. Else the zone with the least queuing delay within the service's tolerance launches one more
   instance on demand (fast track: no placement round, no probes) and the call returns when the
   slot exists.
3. Else a :class:`Refused` that names, zone by zone, why none qualified.

A service that belongs to something that launches its instances itself (a network service: its
instances' NICs are on the NS's virtual links, their number within the descriptor's limits) has an
``owner`` (``owner(service)`` returns a callable, else None): step 2 asks it for the instance
(``owner_fn(predicted_s, started_at)`` -> (zone, InstanceInfo); an NS scales out) instead of launching one.
"""

from __future__ import annotations

import dataclasses
import math
import time

from oslo_log import log as logging

from fluidvim.common.zonetypes import ZoneError

from .deploy import deploy
from .exception import Refused
from .queuing import within

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Resolution:
    service: str
    kind: str                         # "slot" (existing instance) | "launched" (fast track)
    zone: str
    host: str | None
    instance: str
    free_slots: int                   # after this session
    predicted_delay_s: float | None = None
    waited_s: float = 0.0
    via_alias: str | None = None      # the base service whose slots were used

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class Resolver:
    def __init__(self, store, registry, zones: dict, queuing):
        self.store = store
        self.registry = registry
        self.zones = zones
        self.queuing = queuing
        self.owner = None                      # service -> launcher of its instances, or None
        self.qoe_for = None                    # (zone, service row) -> the launch's QoE, or None

    def _ratio(self, rep_service: str, service: str) -> float:
        if rep_service == service:
            return 1.0
        return self.registry.aliases.get(rep_service, {}).get(service, 1.0)

    def _free_slot(self, service: str, location: str | None):
        best = None
        for rep, free in self.registry.entries(service):
            if free <= 0:
                continue
            near = 0 if location in (None, rep.zone, rep.region) else 1
            k = (near, -free, rep.instance)
            if best is None or k < best[0]:
                best = (k, rep, free)
        return best

    def resolve(self, service: str, client_location: str | None = None) -> Resolution:
        row, alias_ratio = self.store.service_or_alias(service)   # NotFound names the field
        t0 = time.monotonic()
        asked_at = time.time()
        with self.registry.decision():     # one resolve decides at a time (no double grant)
            hit = self._free_slot(service, client_location)
            if hit is not None:
                _, rep, free = hit
                ratio = self._ratio(rep.service, service)
                self.registry.reserve(rep.instance, rep.service, math.ceil(ratio))
                return Resolution(service, "slot", rep.zone, rep.host, rep.instance, free - 1,
                                  via_alias=rep.service if rep.service != service else None)
            tolerance = row.max_queuing_delay_s      # an alias inherits its base's tolerance
            options, why = [], []
            snap = self.queuing.snapshot()
            for zname, zone in sorted(self.zones.items()):
                qd = self.queuing.delay(zone, row.name, snap)   # an alias launches its base
                if qd.seconds is None:
                    why.append(f"{zname}: {qd.basis}")
                elif not within(qd.seconds, tolerance):
                    why.append(f"{zname}: queuing delay {qd.seconds:.3f} s exceeds the "
                               f"tolerance {tolerance:.3f} s")
                else:
                    near = 0 if client_location in (None, zname, zone.region) else 1
                    options.append((near, qd.seconds, zname, qd))
            if not options:
                raise Refused(f"resolve {service}: no free slot and no zone can start one within "
                              f"the service's tolerance "
                              f"({'any finite delay' if tolerance is None else f'{tolerance} s'}): "
                              + ("; ".join(why) or "no zones"))
            options.sort()
        errors = []
        need = math.ceil(alias_ratio)
        own = self.owner(row.name) if self.owner is not None else None
        for _near, predicted, zname, _qd in options:
            try:
                if own is not None:                 # e.g. the NS scales out (Refused passes)
                    zname, inst = own(predicted, asked_at)
                    self.registry.reserve(inst.id, row.name, need)
                else:   # the session's slots are reserved as the instance's slots become known
                    zone = self.zones[zname]
                    qoe = self.qoe_for(zone, row) if self.qoe_for is not None else None
                    inst = deploy(self.store, self.registry, zone, row, predicted_s=predicted,
                                  started_at=asked_at, reserve=need, qoe=qoe)
            except ZoneError as e:
                errors.append(str(e))
                LOG.warning("fast-track launch in %s failed: %s", zname, e)
                continue
            return Resolution(service, "launched", zname, inst.host, inst.id,
                              max(0, int((inst.slots_total - need) / alias_ratio)),
                              predicted_delay_s=predicted,
                              waited_s=round(time.monotonic() - t0, 4),
                              via_alias=row.name if row.name != service else None)
        raise Refused(f"resolve {service}: no free slot and every on-demand launch failed: "
                      + "; ".join(errors))
