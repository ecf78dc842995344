# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Queuing delay per zone and service: the expected time until a new slot exists.

When no slot is free, a new one exists once an on-demand launch finishes. The estimate is the
median of recent launch times of the kind the next launch will be (warm when the zone has a warm
shell ready, else cold: ``ZoneAdapter.next_launch_kind``): the orchestrator's own records
(request -> slot, which include its bookkeeping) when it has some of that kind, else what the zone
measured (``ZoneAdapter.launch_times_ms``), scaled by the launches already in flight:
a zone runs ``launch_parallelism`` launches at once, so the k-th launch waits for
``floor(k / parallelism)`` launch rounds first. Infinite (``None`` - the one representation used
everywhere in the orchestrator) when the zone cannot launch the service on demand. A zone may have
0 free slots and a finite delay; the delay does not depend on free slots.
"""

from __future__ import annotations

import dataclasses

from fluidvim.common.measure import median as median_of
from fluidvim.common.zonetypes import ZoneAdapter


@dataclasses.dataclass
class QueuingDelay:
    zone: str
    service: str
    seconds: float | None           # None = infinite (cannot launch on demand)
    basis: str                      # "measured (...)" | "default" | "cannot launch: <why>"
    samples: int = 0
    in_flight: int = 0
    median_launch_s: float | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class QueuingEstimator:
    def __init__(self, store, *, history: int = 20, parallelism: int = 2,
                 default_launch_s: float = 1.0):
        self.store = store
        self.history = history
        self.parallelism = parallelism
        self.default_launch_s = default_launch_s

    def snapshot(self) -> dict:
        """The orchestrator's own launch records for every zone in two queries, so a placement
        over many zones does not query per zone: {"own": {(zone, service): [ms]}, "in_flight":
        {zone: n}}; pass it to :meth:`delay` as ``snap``."""
        own: dict = {}
        for r in self.store.recent_launches_all(self.history):
            own.setdefault((r.zone, r.service, r.kind), []).append(r.ms)
        return {"own": own, "in_flight": self.store.in_flight_counts()}

    def samples_ms(self, zone: ZoneAdapter, service: str, snap: dict | None = None,
                   kind: str | None = None) -> tuple[list[float], str]:
        """(samples, where from): own records of this kind, else the zone's measurements."""
        if snap is None:
            snap = self.snapshot()
        own = [ms for (z, s, k), v in snap["own"].items() if z == zone.name and s == service
               and (kind is None or k == kind) for ms in v]
        if own:
            return own[: self.history], "own records"
        try:
            return list(zone.launch_times_ms(service, self.history)), "zone"
        except Exception:  # noqa: BLE001 - a zone that cannot tell: default below
            return [], "zone"

    def delay(self, zone: ZoneAdapter, service: str, snap: dict | None = None) -> QueuingDelay:
        if not zone.can_launch_on_demand(service):
            why = getattr(zone, "cannot_launch_reason", lambda s: "no on-demand launch")(service)
            return QueuingDelay(zone.name, service, None, f"cannot launch: {why}")
        if snap is None:
            snap = self.snapshot()
        kind = zone.next_launch_kind(service)
        samples, source = self.samples_ms(zone, service, snap, kind)
        in_flight = snap["in_flight"].get(zone.name, 0)
        if samples:
            median = median_of(samples) / 1000.0
            basis = f"measured ({kind + ' launches, ' if kind else ''}{source})"
        else:
            median, basis = self.default_launch_s, "default"
        rounds = 1 + in_flight // self.parallelism
        return QueuingDelay(zone.name, service, median * rounds, basis, len(samples), in_flight,
                            median)


def within(delay_s: float | None, tolerance_s: float | None) -> bool:
    """Is a queuing delay acceptable for a service (tolerance None = any finite delay)?"""
    if delay_s is None:
        return False
    return tolerance_s is None or delay_s <= tolerance_s

