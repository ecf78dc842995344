# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Session slots: FUSION's compressed updates, their rate limit and bandwidth, and the registry.

The encodings and the update message (``SlotEncoder``, ``RateLimiter``) are in the neutral
:mod:`fluidvim.slotcodec` (the Nova driver's publisher uses them too); their names stay here.

The registry aggregates the latest update of every (instance, service) to host, zone and region,
including aliases: a service may declare that its instances also serve another name at a ratio
(``{"premium": 3}`` = one premium session takes 3 of this service's slots).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time

from fluidvim.slotcodec import (  # noqa: F401 - re-exported (moved to the neutral leaf)
    DELAY_BASE_S,
    DELAY_INF_CODE,
    LOG2_BITS,
    LOG2_MAX_CODE,
    RateLimiter,
    SlotEncoder,
    decode_delay,
    decode_log2,
    decode_log10,
    decode_slots,
    encode_delay,
    encode_log2,
    encode_log10,
    log2_range,
    update_bandwidth,
)

from .exception import invalid


# -- the registry --
@dataclasses.dataclass
class SlotReport:
    zone: str
    host: str
    instance: str
    service: str
    slots: int                      # free slots announced
    delay_s: float | None           # zone's queuing delay for the service (None = infinite)
    region: str = "default"
    at: float = dataclasses.field(default_factory=time.time)
    exact: int | None = None


def validate_aliases(aliases) -> dict:
    """{"alias": ratio}: ratio = base slots one alias session takes (> 0)."""
    if aliases is None:
        return {}
    if not isinstance(aliases, dict):
        raise invalid("aliases", f"must be a mapping alias -> ratio, got {type(aliases).__name__}",
                      "e.g. --alias premium=3")
    out = {}
    for name, ratio in aliases.items():
        if not isinstance(name, str) or not name:
            raise invalid("aliases", f"alias name {name!r} must be a non-empty string")
        try:
            r = float(ratio)
        except (TypeError, ValueError):
            raise invalid(f"aliases.{name}", f"ratio {ratio!r} is not a number",
                          "give base slots per alias session, e.g. premium=3") from None
        if not math.isfinite(r) or r <= 0:
            raise invalid(f"aliases.{name}", f"ratio {ratio!r} must be a positive number",
                          "e.g. premium=3 means one premium session takes 3 slots")
        out[name] = r
    return out


class SlotRegistry:
    """Latest slot report per (instance, service) with aggregation and alias expansion.

    ``aliases`` maps a base service to {alias: ratio}. Reservations (slots the resolver handed
    out) count as used for ``reservation_ttl`` seconds whatever the instance reports meanwhile
    (its flow table shows a session only once the client's packets arrive), and after that until
    a report newer than the reservation arrives (an instance that never reports keeps it). The
    error is conservative: a slot may count twice for a while; it is never handed out twice.
    """

    def __init__(self, ttl: float = 120.0, reservation_ttl: float = 5.0, clock=time.time):
        self.ttl = ttl
        self.reservation_ttl = reservation_ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._reports: dict[tuple[str, str], SlotReport] = {}
        self._reserved: dict[tuple[str, str], list[float]] = {}
        self.aliases: dict[str, dict[str, float]] = {}

    def set_aliases(self, service: str, aliases: dict) -> None:
        with self._lock:
            self.aliases[service] = validate_aliases(aliases)

    def apply(self, rep: SlotReport) -> SlotReport:
        key = (rep.instance, rep.service)
        with self._lock:
            old = self._reports.get(key)
            if old is not None and old.at > rep.at:
                return old                                  # out of order: keep the newer
            self._reports[key] = rep
        return rep

    def apply_message(self, payload: dict) -> SlotReport:
        """A notification payload (see :class:`fluidvim.orchestrator.notify.SlotPublisher`)."""
        key = (payload["instance"], payload["service"])
        with self._lock:
            old = self._reports.get(key)
        last = old.exact if old else None
        slots = decode_slots(payload, last)
        rep = SlotReport(zone=payload["zone"], host=payload["host"],
                         instance=payload["instance"], service=payload["service"],
                         slots=slots, delay_s=decode_delay(int(payload["q"])),
                         region=payload.get("region", "default"), at=float(payload["at"]),
                         exact=payload["exact"] if payload.get("exact") is not None else last)
        return self.apply(rep)

    def forget(self, instance: str) -> None:
        with self._lock:
            for key in [k for k in self._reports if k[0] == instance]:
                self._reports.pop(key, None)
                self._reserved.pop(key, None)

    def reserve(self, instance: str, service: str, count: int = 1) -> None:
        """``count`` slots of ``instance``'s ``service`` handed out (an alias session takes
        ``ceil(ratio)`` of its base service's slots)."""
        with self._lock:
            self._reserved.setdefault((instance, service), []).extend([self.clock()] * count)

    def _free_locked(self, key, rep, now) -> int:
        # a reservation ends after reservation_ttl, but only once a report newer than it came in
        # (an instance that never reports - a zone without slot updates - keeps it counted)
        live = [t for t in self._reserved.get(key, [])
                if now - t < self.reservation_ttl or rep.at <= t]
        self._reserved[key] = live
        return max(0, rep.slots - len(live))

    def entries(self, service: str, now: float | None = None) -> list[tuple[SlotReport, int]]:
        """(report, free slots for ``service``) per instance that serves it, aliases applied."""
        now = self.clock() if now is None else now
        out = []
        with self._lock:
            bases = {service: 1.0}
            for base, als in self.aliases.items():
                if service in als:
                    bases[base] = als[service]
            for key, rep in self._reports.items():
                if rep.service not in bases or now - rep.at > self.ttl:
                    continue
                ratio = bases[rep.service]
                free = self._free_locked(key, rep, now)
                out.append((rep, int(math.floor(free / ratio + 1e-9))))
        return out

    def reports(self) -> list[SlotReport]:
        with self._lock:
            return list(self._reports.values())

    def aggregate(self, service: str, level: str = "zone") -> dict:
        """Free slots for ``service`` summed per instance | host | zone | region."""
        if level not in ("instance", "host", "zone", "region"):
            raise invalid("level", f"{level!r} is not one of instance, host, zone, region")
        out: dict = {}
        for rep, free in self.entries(service):
            k = {"instance": rep.instance, "host": f"{rep.zone}/{rep.host}", "zone": rep.zone,
                 "region": rep.region}[level]
            out[k] = out.get(k, 0) + free
        return out
