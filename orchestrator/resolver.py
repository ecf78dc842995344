# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``resolve(service, client_location)``: where does a new session go?

1. An instance with a free slot (aliases applied; nearest location first, then by
   ``[orchestrator] session_route``: ``efficient`` - the default - the host with the fewest
   dynamic watts per hardware thread on its power model first, the fullest instance there
   first; ``watts`` - the host whose instances report the fewest watts per slot first, the
   fullest there first; ``free`` - the most free slots first; see :func:`slot_order`). The
   slot is reserved in the registry until the instance's own update reflects it. When the
   registry says every instance of the service is full, the zones that run them are read
   first (:meth:`Resolver.confirm_full`: the reading their slot agents publish,
   ``instance_slots``, applied as exact updates): a slot freed since the last update is used,
   not refused.
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

import concurrent.futures as cf
import dataclasses
import math
import time

from oslo_log import log as logging

from fluidvim.common.errors import DependencyDown
from fluidvim.common.slotcodec import encode_delay, encode_log2, encode_log10
from fluidvim.common.zonetypes import ZoneError

from .deploy import deploy
from .exception import Refused
from .queuing import within

LOG = logging.getLogger(__name__)


SESSION_ROUTES = ("efficient", "watts", "free")        # [orchestrator] session_route


def host_watts(entries) -> dict:
    """{(zone, host): the fewest watts per slot any of its instances in ``entries`` reports}
    (``entries``: (report, free slots) pairs; reports without ``watts_per_slot`` are left out).

    A VNF's ``watts_per_slot`` is its attributed watts (a share of its host's idle watts by its
    vCPUs plus its busy CPU at its host's cost per CPU-second) over its slot capacity, so it
    grows with that VNF's load: ranking single instances by it would send each session to the
    emptiest instance, spreading sessions over the instances of a host and keeping all of them
    from scaling in. Per host its least figure is nearest the host's own cost per slot (the
    idle share for a nearly idle VNF), and within the host the fullest instance goes first."""
    out: dict = {}
    for rep, _free in entries:
        w = rep.watts_per_slot
        if w is None:
            continue
        k = (rep.zone, rep.host)
        if k not in out or w < out[k]:
            out[k] = w
    return out


def slot_key(route: str, location: str | None, watts: dict | None = None):
    """The resolver's order over (report, free slots) pairs with a free slot, as a sort key
    (the least first): the nearest location first (``location`` None, the report's zone or
    region), then by ``route`` - ``"efficient"`` and ``"watts"``: the host with the least
    figure in ``watts`` ({(zone, host): figure}) first - for ``efficient`` its dynamic watts
    per hardware thread, what one more busy thread costs there (the power model's,
    ``HostMarginalPower.per_thread``), for ``watts`` the least watts per slot its instances
    report (:func:`host_watts`) -, a host without one after those with one, the fewest free
    slots there first (packing: the other instances can scale in); or ``"free"``: the most
    free slots first (the order before 2026-11-28) - then the instance id. bench/energy's
    fluidvim policies route their sessions with this key."""
    if route not in SESSION_ROUTES:
        raise ValueError(f"session_route={route!r}: use one of {', '.join(SESSION_ROUTES)}")
    if route == "free":
        def most_free(pair):
            rep, free = pair
            return (0 if location in (None, rep.zone, rep.region) else 1, 0.0, -free,
                    rep.instance)
        return most_free
    figures = watts or {}
    inf = float("inf")

    def cheapest_host(pair):
        rep, free = pair
        w = figures.get((rep.zone, rep.host))
        near = 0 if location in (None, rep.zone, rep.region) else 1
        # a host without a figure: the old order among those (most free first)
        return (near, inf, -free, rep.instance) if w is None else \
            (near, w, free, rep.instance)
    return cheapest_host


def slot_order(entries, route: str = "efficient", location: str | None = None,
               per_thread: dict | None = None) -> list:
    """``entries`` ((report, free slots) pairs) with a free slot, in the resolver's order
    (:func:`slot_key`; ``per_thread``: {(zone, host): dynamic watts per hardware thread}, for
    ``efficient``)."""
    have = [(rep, free) for rep, free in entries if free > 0]
    return sorted(have, key=slot_key(route, location, _figures(route, have, per_thread)))


def _figures(route: str, have: list, per_thread: dict | None) -> dict | None:
    if route == "watts":
        return host_watts(have)
    if route == "efficient":
        return per_thread or {}
    return None


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


def reading_payload(rep, entry: dict, at: float) -> dict:
    """A zone's reading of one instance (an ``instance_slots`` entry: ``free``, maybe
    ``opened``, ``delay_s``, ``host``) as the update its slot agent would send with an exact
    count, for :meth:`fluidvim.orchestrator.slots.SlotRegistry.apply_message`; the queuing
    delay is the last report's when the reading has none."""
    free = int(entry["free"])
    delay = entry["delay_s"] if "delay_s" in entry else rep.delay_s
    msg = {"zone": rep.zone, "host": entry.get("host") or rep.host, "instance": rep.instance,
           "service": rep.service, "region": rep.region, "at": at, "s": encode_log2(free),
           "m": encode_log10(free), "q": encode_delay(delay), "exact": free}
    if entry.get("opened") is not None:
        msg["opened"] = int(entry["opened"])
    if rep.watts_per_slot is not None:
        msg["watts_per_slot"] = rep.watts_per_slot
    return msg


class Resolver:
    def __init__(self, store, registry, zones: dict, queuing, confirm_timeout: float = 0.5,
                 route: str = "efficient", per_thread: dict | None = None):
        if route not in SESSION_ROUTES:
            raise ValueError(f"session_route={route!r}: use one of {', '.join(SESSION_ROUTES)}")
        self.route = route                     # [orchestrator] session_route (slot_key)
        # (zone, host) -> dynamic watts per hardware thread (route efficient): the placement's
        # power model fills it (HostMarginalPower.per_thread) as it ranks hosts
        self.per_thread = {} if per_thread is None else per_thread
        self.store = store
        self.registry = registry
        self.zones = zones
        self.queuing = queuing
        self.owner = None                      # service -> launcher of its instances, or None
        self.qoe_for = None                    # (zone, service row) -> the launch's QoE, or None
        self.confirms = 0                      # confirm_full calls (the view said full)
        self.confirmed_room = 0                # ... that found a free slot after all
        self.confirm_late = 0                  # zone readings not back within confirm_timeout
        self.confirm_timeout = confirm_timeout
        self._reading: dict[str, cf.Future] = {}   # zone -> its confirm reading in flight
        self._readers = cf.ThreadPoolExecutor(max_workers=4, thread_name_prefix="confirm")

    def close(self) -> None:
        """Stop the confirm readers; a reading still in flight ends on its own (its answer is
        dropped, as a late one is)."""
        self._readers.shutdown(wait=False, cancel_futures=True)

    def _ratio(self, rep_service: str, service: str) -> float:
        if rep_service == service:
            return 1.0
        return self.registry.aliases.get(rep_service, {}).get(service, 1.0)

    def _free_slot(self, service: str, location: str | None):
        have = [(rep, free) for rep, free in self.registry.entries(service) if free > 0]
        if not have:
            return None
        key = slot_key(self.route, location, _figures(self.route, have, self.per_thread))
        rep, free = min(have, key=key)
        return key((rep, free)), rep, free

    def free_slot(self, service: str, location: str | None):
        """The best instance with a free slot (as :meth:`_free_slot`), after reading the zones
        when the registry's view has none (:meth:`confirm_full`). Call under
        ``registry.decision()``."""
        hit = self._free_slot(service, location)
        if hit is None and self.confirm_full(service):
            hit = self._free_slot(service, location)
            self.confirmed_room += hit is not None
        return hit

    def confirm_full(self, service: str) -> int:
        """The registry says no instance serving ``service`` (aliases applied) has a free slot:
        read the zones that run them now, through the zone's own reading (``instance_slots``,
        what its slot agent publishes; zones without one - their hosts publish - are not read),
        and apply each instance's free count as an exact update (with the VNF's ``opened``, so
        the slots handed out that connected are released, and those still connecting keep
        counting). Costs no message on the broker; a zone that cannot be read, or does not
        answer within ``confirm_timeout`` (:meth:`_read_zones`), is skipped.
        Returns how many readings were applied."""
        reps = {(rep.instance, rep.service): rep for rep, _ in self.registry.entries(service)}
        readers = [(z, r) for z in sorted({rep.zone for rep in reps.values()})
                   if (r := getattr(self.zones.get(z), "instance_slots", None)) is not None]
        if not readers:
            return 0
        self.confirms += 1
        applied = 0
        for now, reading in self._read_zones(service, readers).values():
            for vid, entry in reading.items():
                rep = reps.get((vid, entry.get("service")))
                if rep is None or entry.get("free") is None:
                    continue
                self.registry.apply_message(reading_payload(rep, entry, now))
                applied += 1
        return applied

    def _read_zones(self, service: str, readers: list) -> dict[str, tuple[float, dict]]:
        """{zone: (when its reading was taken, the reading)} of the zones that answered within
        ``confirm_timeout`` (all at once, each in a thread: the refusal waits for the slowest
        answer, not for their sum). A zone that fails is skipped, as its slot agent would; a
        zone that has not answered in time is skipped this time and not asked again while that
        reading is in flight (a slow zone - Nomad's API - never piles up requests), and its
        late answer is dropped: the slot agent's own update carries it."""
        def read(fn):
            return self.registry.clock(), fn()

        asked = {}
        for zname, fn in readers:
            f = self._reading.get(zname)
            if f is not None and not f.done():
                self.confirm_late += 1
                LOG.info("confirming %s's free slots: zone %s's last reading is still in "
                         "flight; skipped", service, zname)
                continue
            asked[zname] = self._reading[zname] = self._readers.submit(read, fn)
        cf.wait(asked.values(), timeout=self.confirm_timeout)
        out = {}
        for zname, f in asked.items():
            if not f.done():
                self.confirm_late += 1
                LOG.warning("confirming %s's free slots: zone %s did not answer within %.2f s "
                            "([orchestrator] confirm_timeout); skipped", service, zname,
                            self.confirm_timeout)
                continue
            try:
                out[zname] = f.result()
            except (ZoneError, DependencyDown, OSError) as e:   # as its slot agent: skip it
                LOG.warning("confirming %s's free slots in zone %s: %s", service, zname, e)
        return out

    def resolve(self, service: str, client_location: str | None = None) -> Resolution:
        row, alias_ratio = self.store.service_or_alias(service)   # NotFound names the field
        t0 = time.monotonic()
        asked_at = time.time()
        with self.registry.decision():     # one resolve decides at a time (no double grant)
            hit = self.free_slot(service, client_location)
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
