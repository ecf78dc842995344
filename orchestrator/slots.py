# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Session slots: FUSION's compressed updates, their rate limit and bandwidth, and the registry.

The encodings and the update message (``SlotEncoder``, ``RateLimiter``) are in the neutral
:mod:`fluidvim.common.slotcodec` (the Nova driver's publisher uses them too).

The registry aggregates the latest update of every (instance, service) to host, zone and region,
including aliases: a service may declare that its instances also serve another name at a ratio
(``{"premium": 3}`` = one premium session takes 3 of this service's slots).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time

from fluidvim.common.slotcodec import decode_delay, decode_slots, log2_range, opened_delta

from .exception import invalid


def _watts(payload: dict) -> float | None:
    w = payload.get("watts_per_slot")
    if w is None:
        return None
    w = float(w)
    if not w >= 0:
        raise ValueError(f"watts_per_slot: {w} is not a non-negative number")
    return w


def _weighted(pairs) -> float | None:
    """The mean of (W/slot, free slots) pairs weighted by free slots (plain when all are 0)."""
    if not pairs:
        return None
    n = sum(f for _, f in pairs)
    if n <= 0:
        return sum(w for w, _ in pairs) / len(pairs)
    return sum(w * f for w, f in pairs) / n


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
    # slots handed out up to this time are already subtracted from ``slots`` (an estimate from
    # a bucket update: SlotRegistry._estimate); None = count them as reservations
    counted_upto: float | None = None
    opened: int | None = None       # the VNF's sessions ever opened (with an exact count)
    watts_per_slot: float | None = None   # the VNF's attributed watts / its slot capacity


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

    An exact update that carries the VNF's ``opened`` counter (sessions ever opened; contract/
    PROTOCOL.md ``stats``) ends reservations without waiting: the k sessions opened since the
    previous such update are the k oldest slots handed out before its reading
    (:meth:`_connected`), so they are in its count. The others are clients that have not
    connected yet and keep counting for ``reservation_ttl`` (their time to connect: ending them
    sooner would hand their slot out again). Like :meth:`_estimate` this takes every session to
    come through the resolver, and clients to connect in the order they were given slots.
    """

    def __init__(self, ttl: float = 120.0, reservation_ttl: float = 5.0, clock=time.time):
        self.ttl = ttl
        self.reservation_ttl = reservation_ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._reports: dict[tuple[str, str], SlotReport] = {}
        self._reserved: dict[tuple[str, str], list[float]] = {}
        self._opened: dict[tuple[str, str], int] = {}      # the last ``opened`` per key
        self.aliases: dict[str, dict[str, float]] = {}
        self._decision = threading.Lock()
        # () -> {"zone/host": reason} of hosts out of service (hostpower: draining, off, ...):
        # their instances offer no slots
        self.unavailable = None
        # instance -> why: single VNFs that offer no slots (a rebalancing move drains one
        # sessions first while its host stays in service: power.moving)
        self._withdrawn: dict[str, str] = {}

    def withdraw(self, instance: str, why: str = "moving") -> None:
        """``instance`` offers no slots from now on (its sessions go on; none is added) until
        :meth:`restore` or :meth:`forget`. Held in this process (a restarted orchestrator
        withdraws its moving VNFs again: ``HostPower.resume``)."""
        with self._lock:
            self._withdrawn[instance] = why

    def restore(self, instance: str) -> None:
        """``instance`` offers its slots again (a move undone)."""
        with self._lock:
            self._withdrawn.pop(instance, None)

    def withdrawn(self) -> dict[str, str]:
        """{instance: why} of the instances that offer no slots (:meth:`withdraw`)."""
        with self._lock:
            return dict(self._withdrawn)

    def decision(self):
        """Held around a decision that reads free slots and then reserves one (the resolver):
        nobody else decides meanwhile, so a slot is never handed out twice."""
        return self._decision

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

    def _report(self, key) -> SlotReport | None:
        with self._lock:
            return self._reports.get(key)

    def _estimate(self, key, old: SlotReport | None, payload: dict) -> int | None:
        """Free slots an update without an exact count most likely announces: the previous
        report's minus the slots handed out since - if that falls into the update's log2 bucket
        (what the VNF's own count confirms); None otherwise. Sessions ending meanwhile only make
        the real count higher, so it stays a lower bound, and much closer than the bucket's
        lower bound (half the slots for a count just below a power of two)."""
        if old is None or payload.get("exact") is not None:
            return None
        at = float(payload["at"])
        with self._lock:
            taken = sum(1 for t in self._state()[1].get(key, []) if old.at < t <= at)
        lo, hi = log2_range(int(payload["s"]))
        est = old.slots - taken
        return est if lo <= est <= hi else None

    def _reflected_upto(self, key, old: SlotReport | None, exact: int, at: float) -> float | None:
        """An exact count ``exact`` read at ``at``: the slots handed out before ``at`` that it
        must already include - counted up to the time returned (None: none known).

        With F = the registry's own view before it (the previous report minus the live
        reservations handed out before ``at``), the reservations still pending (their client
        not connected yet) are at most ``exact - F`` (sessions ending meanwhile only raise
        ``exact``): the newest that many keep counting, the older ones are in the count. So a
        count that is no higher than the registry's view ends them all, and a reservation is
        not counted twice for ``reservation_ttl`` while the VNF's count already shows it (what
        refused sessions while instances had room). Like :meth:`_estimate` it takes every
        session to come through the resolver."""
        if old is None:
            return None
        now = self.clock()
        with self._lock:
            reserved = self._state()[1]
            live = sorted(t for t in self._live(key, old, now, reserved) if t <= at)
        if not live:
            return None
        pending = min(len(live), max(0, exact - (old.slots - len(live))))
        done = len(live) - pending
        return live[done - 1] if done > 0 else None

    def apply_message(self, payload: dict) -> SlotReport:
        """A notification payload (see :class:`fluidvim.orchestrator.notify.SlotPublisher`)."""
        key = (payload["instance"], payload["service"])
        at = float(payload["at"])
        old = self._report(key)
        last = old.exact if old else None
        slots = decode_slots(payload, last)
        est = self._estimate(key, old, payload)
        upto = at if est is not None else None
        if est is not None:
            slots = est
        elif payload.get("exact") is not None:
            upto = self._reflected_upto(key, old, slots, at)
        rep = SlotReport(zone=payload["zone"], host=payload["host"],
                         instance=payload["instance"], service=payload["service"],
                         slots=slots, delay_s=decode_delay(int(payload["q"])),
                         region=payload.get("region", "default"), at=at,
                         exact=payload["exact"] if payload.get("exact") is not None else last,
                         counted_upto=upto, watts_per_slot=_watts(payload))
        if payload.get("opened") is not None and payload.get("exact") is not None:
            rep.opened = int(payload["opened"])
            self._connected(key, old, rep.opened, at)
        return self.apply(rep)

    def _connected(self, key, old: SlotReport | None, opened: int, at: float) -> int:
        """An exact update read at ``at`` with the VNF's ``opened``: release the slots handed
        out before ``at`` whose sessions it shows opened since the previous ``opened`` - the
        oldest, as many as it opened (:func:`fluidvim.common.slotcodec.opened_delta`; nothing on
        the first one, on a restarted VNF, or on an update older than the last report). Returns
        how many were released."""
        if old is not None and old.at > at:
            return 0
        with self._lock:
            prev, self._opened[key] = self._opened.get(key), opened
        k = opened_delta(prev, opened) if prev is not None else None
        return self._release_oldest(key, k, at) if k else 0

    def _release_oldest(self, key, count: int, at: float) -> int:
        """Drop the ``count`` oldest reservations of ``key`` made at or before ``at``."""
        with self._lock:
            ts = sorted(self._reserved.get(key, []))
            n = min(count, sum(1 for t in ts if t <= at))
            if n:
                self._reserved[key] = ts[n:]
        return n

    def forget(self, instance: str) -> None:
        with self._lock:
            for key in [k for k in self._reports if k[0] == instance]:
                self._reports.pop(key, None)
                self._reserved.pop(key, None)
                self._opened.pop(key, None)
            self._withdrawn.pop(instance, None)

    def reserve(self, instance: str, service: str, count: int = 1) -> None:
        """``count`` slots of ``instance``'s ``service`` handed out (an alias session takes
        ``ceil(ratio)`` of its base service's slots)."""
        with self._lock:
            self._reserved.setdefault((instance, service), []).extend([self.clock()] * count)

    def _live(self, key, rep, now, reserved) -> list[float]:
        # a reservation ends after reservation_ttl, but only once a report newer than it came in
        # (an instance that never reports - a zone without slot updates - keeps it counted)
        # (those an estimate already subtracted are not counted twice)
        return [t for t in reserved.get(key, [])
                if (rep.counted_upto is None or t > rep.counted_upto)
                and (now - t < self.reservation_ttl or rep.at <= t)]

    def _ended(self, key, live: list[float], ended: list[float]) -> None:
        self._reserved[key] = live

    def _state(self):
        """(reports, reservations) by (instance, service), to read under ``_lock``."""
        return self._reports, self._reserved

    def _aliases(self) -> dict[str, dict[str, float]]:
        return self.aliases

    def entries(self, service: str, now: float | None = None) -> list[tuple[SlotReport, int]]:
        """(report, free slots for ``service``) per instance that serves it, aliases applied."""
        now = self.clock() if now is None else now
        out = []
        away: dict = self.unavailable() if self.unavailable is not None else {}
        with self._lock:
            bases = {service: 1.0}
            for base, als in self._aliases().items():
                if service in als:
                    bases[base] = als[service]
            reports, reserved = self._state()
            for key, rep in reports.items():
                if rep.service not in bases or now - rep.at > self.ttl:
                    continue
                if away and f"{rep.zone}/{rep.host}" in away:
                    continue
                if rep.instance in self._withdrawn:
                    continue
                ratio = bases[rep.service]
                live = self._live(key, rep, now, reserved)
                if len(live) != len(reserved.get(key, [])):
                    self._ended(key, live, [t for t in reserved[key] if t not in live])
                free = max(0, rep.slots - len(live))
                out.append((rep, int(math.floor(free / ratio + 1e-9))))
        return out

    def reports(self) -> list[SlotReport]:
        with self._lock:
            return list(self._state()[0].values())

    def last_reserved(self, instance: str) -> float | None:
        """When the newest slot of ``instance`` was handed out (None: none is counted)."""
        with self._lock:
            times = [t for (inst, _), ts in self._state()[1].items() if inst == instance
                     for t in ts]
        return max(times) if times else None

    def sessions_done(self, instance: str, total: int, since: float,
                      used: int | None = None) -> bool:
        """Whether ``instance`` (out of service since ``since``) has no live session: ``used``
        (the VNF's own count, when its zone reads it) is 0, else its latest report, newer than
        ``since``, shows all ``total`` slots free; and no slot handed out counts any more (a
        client given one may still connect within ``reservation_ttl``)."""
        last = self.last_reserved(instance)
        if last is not None and self.clock() - last < self.reservation_ttl:
            return False
        if used is not None:
            return used == 0
        reps = [r for r in self.reports() if r.instance == instance]
        return bool(reps) and total > 0 and all(r.at > since and r.slots >= total
                                                 for r in reps)

    def aggregate(self, service: str, level: str = "zone", watts: bool = False) -> dict:
        """Free slots for ``service`` summed per instance | host | zone | region; with
        ``watts``, ``{"free": n, "watts_per_slot": W}`` per key: the instances' W/slot averaged
        weighted by their free slots (all alike when none is free), None when none reported it."""
        if level not in ("instance", "host", "zone", "region"):
            raise invalid("level", f"{level!r} is not one of instance, host, zone, region")
        out: dict = {}
        acc: dict = {}
        for rep, free in self.entries(service):
            k = {"instance": rep.instance, "host": f"{rep.zone}/{rep.host}", "zone": rep.zone,
                 "region": rep.region}[level]
            out[k] = out.get(k, 0) + free
            if rep.watts_per_slot is not None:
                acc.setdefault(k, []).append((rep.watts_per_slot, free))
        if not watts:
            return out
        return {k: {"free": n, "watts_per_slot": _weighted(acc.get(k))} for k, n in out.items()}


def _report_of(row) -> SlotReport:
    return SlotReport(zone=row.zone, host=row.host, instance=row.instance, service=row.service,
                      slots=row.slots, delay_s=row.delay_s, region=row.region, at=row.at,
                      exact=row.exact, watts_per_slot=row.watts_per_slot)


class SharedSlotRegistry(SlotRegistry):
    """The registry of orchestrators that share one database (``[orchestrator] active_active``):
    reports, reservations and aliases live in the store, so a slot one orchestrator handed out
    counts at every other; :meth:`decision` holds a lock across processes (Store.lock). Same
    rules as :class:`SlotRegistry`; every read goes to the database."""

    def __init__(self, store, ttl: float = 120.0, reservation_ttl: float = 5.0, clock=time.time):
        super().__init__(ttl=ttl, reservation_ttl=reservation_ttl, clock=clock)
        self.store = store

    @contextlib.contextmanager
    def decision(self):
        with self._decision, self.store.lock("resolve"):
            yield

    @property
    def aliases(self) -> dict[str, dict[str, float]]:
        return {svc.name: svc.aliases for svc in self.store.services() if svc.aliases}

    @aliases.setter
    def aliases(self, value) -> None:      # SlotRegistry.__init__ sets {}; the store holds them
        pass

    def set_aliases(self, service: str, aliases: dict) -> None:
        validate_aliases(aliases)           # stored with the service (Store.put_service)

    def apply(self, rep: SlotReport) -> SlotReport:
        self.store.save_slot_report(rep)    # newer wins, whoever received it
        row = self.store.slot_report(rep.instance, rep.service)
        return _report_of(row) if row is not None else rep

    def _report(self, key) -> SlotReport | None:
        row = self.store.slot_report(*key)
        return _report_of(row) if row is not None else None

    def forget(self, instance: str) -> None:
        self.store.delete_slot_reports(instance)
        self.restore(instance)

    def _reflected_upto(self, key, old, exact, at):
        # the store keeps no counted_upto: reservations end by the ttl rule alone (no query)
        return None

    def _release_oldest(self, key, count, at):
        # the previous ``opened`` is this process's, while other orchestrators on the same
        # topic take some of the updates (and the store keeps no ``opened``): a difference
        # across them would release slots not yet shown. They end by the ttl rule alone here
        return 0

    def reserve(self, instance: str, service: str, count: int = 1) -> None:
        self.store.add_reservations(instance, service, count, self.clock())

    def _state(self):
        reports = {(r.instance, r.service): _report_of(r) for r in self.store.slot_reports()}
        return reports, self.store.reservations()

    def _ended(self, key, live: list[float], ended: list[float]) -> None:
        # ended ones are older than every live one (older than the ttl and than a report), and
        # than any another orchestrator adds meanwhile: delete up to the newest ended
        self.store.drop_reservations(*key, upto=max(ended))
