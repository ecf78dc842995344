# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Queuing delay per zone and service: the expected time until a new slot exists.

When no slot is free, a new one exists once an on-demand launch finishes. The estimate is the
median of recent launch times (what the zone measured, ``ZoneAdapter.launch_times_ms``, and what
the orchestrator recorded itself, request -> slot), scaled by the launches already in flight:
a zone runs ``launch_parallelism`` launches at once, so the k-th launch waits for
``floor(k / parallelism)`` launch rounds first. Infinite (``None`` - the one representation used
everywhere in the orchestrator) when the zone cannot launch the service on demand. A zone may have
0 free slots and a finite delay; the delay does not depend on free slots.
"""

from __future__ import annotations

import dataclasses
import statistics

from .zones.base import ZoneAdapter


@dataclasses.dataclass
class QueuingDelay:
    zone: str
    service: str
    seconds: float | None           # None = infinite (cannot launch on demand)
    basis: str                      # "measured" | "default" | "cannot launch: <why>"
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
            own.setdefault((r.zone, r.service), []).append(r.ms)
        return {"own": own, "in_flight": self.store.in_flight_counts()}

    def samples_ms(self, zone: ZoneAdapter, service: str, snap: dict | None = None) -> list[float]:
        if snap is not None:
            own = list(snap["own"].get((zone.name, service), []))
        else:
            own = [r.ms for r in self.store.launches(zone=zone.name, service=service,
                                                     limit=self.history) if r.ms is not None]
        try:
            measured = list(zone.launch_times_ms(service, self.history))
        except Exception:  # noqa: BLE001 - a zone that cannot tell still has our own records
            measured = []
        return (own + measured)[: 2 * self.history]

    def delay(self, zone: ZoneAdapter, service: str, snap: dict | None = None) -> QueuingDelay:
        if not zone.can_launch_on_demand(service):
            why = getattr(zone, "cannot_launch_reason", lambda s: "no on-demand launch")(service)
            return QueuingDelay(zone.name, service, None, f"cannot launch: {why}")
        samples = self.samples_ms(zone, service, snap)
        in_flight = (snap["in_flight"].get(zone.name, 0) if snap is not None else
                     len(self.store.launches(zone=zone.name, in_flight=True, limit=1000)))
        if samples:
            median = statistics.median(samples) / 1000.0
            basis = "measured"
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

