# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Hierarchical placement across zones (FUSION §2.1): a parent level over zone summaries, the
existing per-zone placement (steps 0-3, :class:`.placement.PlacementEngine`) below it.

The zones sit at sites of a real network topology (:mod:`.topology`: SNDlib / Topology Zoo
graphs); the user reaches the service at an ingress site (``place(service, location=SITE)``).

**Parent level** (:func:`choose_zones`, a pure function): every zone is one
:class:`ZoneSummary` - what a zone would announce upwards: its site, hosts, free session slots for
the service, queuing delay, the least marginal power of its hosts. A zone is *eligible* when

* it is reachable from the ingress and its one-way latency is within the service's
  ``max_latency_ms`` (none = any latency);
* it can serve the service's next session within the service's ``max_queuing_delay_s``: it has a
  free slot (wait 0), or its queuing delay (time until an on-demand launch makes one) is finite and
  within the tolerance (none = any finite delay).

Eligible zones are ranked by a weighted cost (each term scaled to about 0..1 across the eligible
zones or by the service's own bound): latency / bound, wait / tolerance, marginal power above the
cheapest zone's (a fraction of the dearest's), and scarcity of free slots; the ``fanout``
cheapest go down. When no zone is eligible, :class:`NoZone` (a :class:`.exception.Refused`)
says zone by zone why.

**Child level**: the flat engine runs steps 0-3 over the hosts of the chosen zones only (probe,
analyze, power-aware decide, deploy); if it finds nothing feasible there, the next ``fanout``
zones are tried (at most ``max_rounds`` rounds). The parent's record is the decision's first step
(``fluidvim placement explain`` shows it).

Summaries are cached for ``summary_ttl`` seconds (per service): as in FUSION, the parent acts on
the zones' last announcements rather than asking every host on each decision. With
``compressed_summaries`` the parent sees what FUSION's compressed updates carry
(:func:`compress`): free slots as the lower bound of their 4-bit log2 bucket and the queuing delay
as the upper bound of its Q = 0.1·2^q s code - both conservative, so a zone the parent finds
eligible is eligible by the exact numbers too.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from fluidvim.common.optgroups import register_group

from . import states
from .exception import Refused, invalid
from .placement import Placement
from .topology import Topology, TopologyError

LOG = logging.getLogger(__name__)

hier_group = cfg.OptGroup("hierarchy", title="hierarchical placement across zones",
                          help="FUSION §2.1: a parent level picks zones by latency from the "
                               "user's ingress site and zone summaries; the flat placement runs "
                               "inside the chosen zones.")

hier_opts = [
    cfg.BoolOpt("enabled", default=False,
                help="Place hierarchically: `place(service, location=SITE)` takes SITE as the "
                     "user's ingress site on [hierarchy] topology. Off: the flat placement over "
                     "every host of every zone (location = a location label)."),
    cfg.StrOpt("topology", default="sndlib/abilene",
               help="The network under the zones: a topohub key (sndlib/abilene, sndlib/geant, "
                    "topozoo/Abilene, topozoo/Geant2012, ...; shipped offline in the topohub "
                    "package) or the path of a NetworkX node-link JSON file (nodes with name "
                    "and pos, edges with dist in km)."),
    cfg.DictOpt("zone_sites", default={},
                help="Site of each zone on the topology, ZONE:SITE,... (a zone's `site` label "
                     "is used when it is not listed here)."),
    cfg.FloatOpt("km_per_ms", default=204.2, min=1.0,
                 help="Propagation speed on the topology's links, km per ms (light in fibre)."),
    cfg.IntOpt("fanout", default=2, min=1,
               help="Zones the parent hands to the flat placement per round."),
    cfg.IntOpt("max_rounds", default=3, min=1,
               help="Rounds of `fanout` zones tried when the chosen zones have no feasible "
                    "host."),
    cfg.FloatOpt("summary_ttl", default=2.0, min=0.0,
                 help="Seconds a zone summary (free slots, queuing delay, power) is reused "
                      "before the parent rebuilds it (0 = every decision)."),
    cfg.BoolOpt("compressed_summaries", default=True,
                help="The parent sees zone summaries as FUSION's compressed updates carry them "
                     "(free slots: lower bound of the log2 bucket; queuing delay: upper bound "
                     "of its 0.1*2^q s code); false = exact numbers."),
    cfg.FloatOpt("weight_latency", default=1.0, min=0.0,
                 help="Parent cost weight of latency / the service's bound."),
    cfg.FloatOpt("weight_wait", default=1.0, min=0.0,
                 help="Parent cost weight of the wait for a slot (0 with a free slot, else the "
                      "queuing delay) / the service's tolerance."),
    cfg.FloatOpt("weight_power", default=0.5, min=0.0,
                 help="Parent cost weight of the zone's least marginal power (W) above the "
                      "cheapest eligible zone's, as a fraction of the dearest zone's."),
    cfg.FloatOpt("weight_slots", default=0.25, min=0.0,
                 help="Parent cost weight of slot scarcity (1 - log(1+free)/log(1+max free))."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register [hierarchy] once per ConfigOpts (a second call is a no-op)."""
    register_group(conf, hier_group, hier_opts)


def list_opts():
    """Entry point for oslo-config-generator (namespace ``fluidvim.hierarchy``)."""
    return [(hier_group, hier_opts)]


# ---------------------------------------------------------------------------------------------
# The parent's decision: pure functions on value types
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class ZoneSummary:
    """What one zone announces to the parent for one service."""

    zone: str
    site: str | None
    hosts: int = 0
    free_slots: int = 0                  # for the service, summed over the zone's instances
    queuing_delay_s: float | None = None  # None = cannot launch on demand
    delay_basis: str = ""
    power_w: float | None = None         # least marginal power (W) of a host of the zone
    cpu_util: float = 0.0                # mean over its hosts
    error: str | None = None             # the zone could not be asked

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Weights:
    latency: float = 1.0
    wait: float = 1.0
    power: float = 0.5
    slots: float = 0.25


@dataclasses.dataclass
class ZoneChoice:
    zone: str
    site: str | None
    latency_ms: float | None
    wait_s: float
    cost: float
    terms: dict
    summary: ZoneSummary

    def to_dict(self) -> dict:
        return {"zone": self.zone, "site": self.site, "latency_ms": _r(self.latency_ms),
                "wait_s": _r(self.wait_s), "cost": _r(self.cost),
                "terms": {k: _r(v) for k, v in self.terms.items()},
                "free_slots": self.summary.free_slots,
                "queuing_delay_s": _r(self.summary.queuing_delay_s),
                "power_w": _r(self.summary.power_w)}


@dataclasses.dataclass
class ParentDecision:
    ingress: str | None
    bound_ms: float | None
    tolerance_s: float | None
    ranked: list[ZoneChoice]             # every eligible zone, cheapest first
    rejected: list[dict]                 # {"zone", "reason"}
    fanout: int = 1

    @property
    def chosen(self) -> list[ZoneChoice]:
        return self.ranked[: self.fanout]

    def rounds(self, max_rounds: int) -> list[list[ZoneChoice]]:
        return [self.ranked[i:i + self.fanout]
                for i in range(0, len(self.ranked), self.fanout)][:max_rounds]

    def to_record(self, limit: int = 20) -> dict:
        return {"ingress": self.ingress, "max_latency_ms": self.bound_ms,
                "max_queuing_delay_s": self.tolerance_s, "fanout": self.fanout,
                "eligible": len(self.ranked), "ranked": [c.to_dict() for c in self.ranked[:limit]],
                "rejected": self.rejected[:limit], "rejected_count": len(self.rejected)}


class NoZone(Refused):
    """No zone satisfies the service's latency bound and tolerable queuing delay."""

    def __init__(self, message: str, rejected: list | None = None):
        super().__init__(message)
        self.rejected = list(rejected or [])


def _r(v, nd: int = 4):
    return None if v is None else round(float(v), nd)


def compress(s: ZoneSummary) -> ZoneSummary:
    """``s`` as a compressed update conveys it: free slots rounded down to their log2 bucket's
    lower bound, the queuing delay rounded up to its code's 0.1*2^q s (None stays None)."""
    from fluidvim.common.slotcodec import decode_delay, decode_log2, encode_delay, encode_log2
    return dataclasses.replace(
        s, free_slots=decode_log2(encode_log2(max(0, int(s.free_slots)))),
        queuing_delay_s=None if s.queuing_delay_s is None
        else decode_delay(encode_delay(s.queuing_delay_s)))


def zone_problem(s: ZoneSummary, latency_ms: float | None, bound_ms: float | None,
                 tolerance_s: float | None, ingress: str | None) -> tuple[str | None, float]:
    """(why the zone is not eligible or None, the wait for a slot in s)."""
    if s.error:
        return f"zone unavailable: {s.error}", math.inf
    if s.site is None:
        return "the zone has no site on the topology ([hierarchy] zone_sites)", math.inf
    if ingress is not None and latency_ms is None:
        return f"site {s.site} cannot be reached from {ingress}", math.inf
    if bound_ms is not None and latency_ms is not None and latency_ms > bound_ms:
        return (f"latency {latency_ms:.2f} ms from {ingress} to {s.site} exceeds the service's "
                f"bound {bound_ms:g} ms"), math.inf
    if s.hosts <= 0:
        return "the zone has no hosts", math.inf
    if s.free_slots > 0:
        return None, 0.0
    if s.queuing_delay_s is None:
        return f"no free slot and {s.delay_basis or 'cannot launch on demand'}", math.inf
    if tolerance_s is not None and s.queuing_delay_s > tolerance_s:
        return (f"no free slot and queuing delay {s.queuing_delay_s:.3f} s exceeds the "
                f"service's tolerable {tolerance_s:g} s"), math.inf
    return None, float(s.queuing_delay_s)


def choose_zones(summaries: list[ZoneSummary], latency_ms: dict[str, float | None], *,
                 ingress: str | None, bound_ms: float | None = None,
                 tolerance_s: float | None = None, fanout: int = 2,
                 weights: Weights | None = None, service: str = "the service") -> ParentDecision:
    """Rank the eligible zones (see the module docstring); :class:`NoZone` when there is none.
    ``latency_ms``: one-way latency from the ingress to each zone (by zone name)."""
    w = weights or Weights()
    ok, rejected = [], []
    for s in summaries:
        lat = latency_ms.get(s.zone)
        why, wait = zone_problem(s, lat, bound_ms, tolerance_s, ingress)
        if why:
            rejected.append({"zone": s.zone, "site": s.site, "latency_ms": _r(lat),
                             "reason": why})
        else:
            ok.append((s, lat, wait))
    if not ok:
        parts = "; ".join(f"{r['zone']}: {r['reason']}" for r in rejected[:8])
        more = f"; and {len(rejected) - 8} more" if len(rejected) > 8 else ""
        want = []
        if bound_ms is not None:
            want.append(f"latency <= {bound_ms:g} ms from {ingress}")
        want.append("a free slot or a queuing delay "
                    + (f"<= {tolerance_s:g} s" if tolerance_s is not None else "that is finite"))
        raise NoZone(f"no zone can take {service} ({', '.join(want)}): "
                     + (parts or "no zones") + more, rejected)
    lats = [lat for _, lat, _ in ok if lat is not None]
    lat_scale = bound_ms if bound_ms else (max(lats) if lats and max(lats) > 0 else 1.0)
    waits = [wt for _, _, wt in ok]
    wait_scale = tolerance_s if tolerance_s else (max(waits) if max(waits) > 0 else 1.0)
    powers = [s.power_w for s, _, _ in ok if s.power_w is not None]
    p_lo = min(powers) if powers else 0.0
    p_hi = max(powers) if powers else 0.0
    free_hi = max(s.free_slots for s, _, _ in ok)
    ranked = []
    for s, lat, wait in ok:
        terms = {
            "latency": (lat or 0.0) / lat_scale,
            "wait": wait / wait_scale if wait_scale > 0 else 0.0,
            # a zone without a power model counts as the dearest
            "power": ((s.power_w - p_lo) / p_hi if p_hi > 0 else 0.0)
            if s.power_w is not None else (1.0 if powers else 0.0),
            "slots": (1.0 - math.log1p(s.free_slots) / math.log1p(free_hi)) if free_hi > 0
            else 1.0,
        }
        cost = (w.latency * terms["latency"] + w.wait * terms["wait"]
                + w.power * terms["power"] + w.slots * terms["slots"])
        ranked.append(ZoneChoice(s.zone, s.site, lat, wait, cost, terms, s))
    ranked.sort(key=lambda c: (c.cost, c.latency_ms if c.latency_ms is not None else math.inf,
                               c.zone))
    return ParentDecision(ingress, bound_ms, tolerance_s, ranked, rejected, max(1, int(fanout)))


def zone_latencies(topology: Topology, sites: dict[str, str], ingress: str | None,
                   ) -> dict[str, float | None]:
    """One-way latency (ms) from ``ingress`` to each zone's site; {} without an ingress."""
    if ingress is None:
        return {}
    dist = topology.latencies_from(ingress)
    return {z: dist.get(site) for z, site in sites.items()}


def summarize(zones: dict, service: str, registry, queuing, power=None, sites=None,
              ) -> list[ZoneSummary]:
    """A :class:`ZoneSummary` per zone from the live registry, queuing estimator and power
    model (what each zone's own orchestrator would announce)."""
    sites = sites or {}
    free = registry.aggregate(service, "zone")
    snap = queuing.snapshot()
    out = []
    for zname, zone in sorted(zones.items()):
        try:
            hosts = zone.hosts()
        except Exception as e:  # noqa: BLE001 - one broken zone must not stop placement
            out.append(ZoneSummary(zname, sites.get(zname), error=str(e)))
            continue
        qd = queuing.delay(zone, service, snap)
        watts = None
        if power is not None:
            vals = [p for p in (power(zname, h) for h in hosts) if p is not None]
            watts = min(vals) if vals else None
        util = sum(h.cpu_util for h in hosts) / len(hosts) if hosts else 0.0
        out.append(ZoneSummary(zname, sites.get(zname), len(hosts), int(free.get(zname, 0)),
                               qd.seconds, qd.basis, watts, round(util, 4)))
    return out


# ---------------------------------------------------------------------------------------------
# The placer: parent over the flat engine
# ---------------------------------------------------------------------------------------------

def zone_sites(conf_sites: dict, zone_labels: dict, zones, topology: Topology) -> dict[str, str]:
    """Zone -> site from ``[hierarchy] zone_sites``, else the zone's ``site`` label; every
    site must be on the topology (TopologyError names the zone)."""
    out = {}
    for z in zones:
        site = (conf_sites or {}).get(z) or (zone_labels.get(z) or {}).get("site")
        if site is None:
            continue
        topology.check_site(site, f"the site of zone {z}")
        out[z] = site
    return out


class HierarchicalPlacer:
    def __init__(self, engine, topology: Topology, sites: dict[str, str], *, fanout: int = 2,
                 max_rounds: int = 3, weights: Weights | None = None, summary_ttl: float = 2.0,
                 compressed: bool = True):
        self.engine = engine
        self.topology = topology
        self.sites = dict(sites)
        self.fanout = fanout
        self.max_rounds = max_rounds
        self.weights = weights or Weights()
        self.summary_ttl = summary_ttl
        self.compressed = compressed
        self._cache: dict[str, tuple[float, list[ZoneSummary]]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_conf(cls, conf, engine, zone_labels: dict):
        h = conf.hierarchy
        from .topology import load
        topo = load(h.topology, h.km_per_ms)
        sites = zone_sites(h.zone_sites, zone_labels, engine.zones, topo)
        missing = sorted(set(engine.zones) - set(sites))
        if missing:
            LOG.warning("hierarchy: zone(s) %s have no site on %s ([hierarchy] zone_sites): "
                        "the parent never chooses them", ", ".join(missing), topo.name)
        return cls(engine, topo, sites, fanout=h.fanout, max_rounds=h.max_rounds,
                   weights=Weights(h.weight_latency, h.weight_wait, h.weight_power,
                                   h.weight_slots),
                   summary_ttl=h.summary_ttl, compressed=h.compressed_summaries)

    def summaries(self, service: str) -> list[ZoneSummary]:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(service)
            if hit is not None and now - hit[0] < self.summary_ttl:
                return hit[1]
        e = self.engine
        out = summarize(e.zones, service, e.registry, e.queuing, e.power, self.sites)
        if self.compressed:
            out = [compress(s) for s in out]
        with self._lock:
            self._cache[service] = (now, out)
        return out

    def invalidate(self, service: str | None = None) -> None:
        with self._lock:
            if service is None:
                self._cache.clear()
            else:
                self._cache.pop(service, None)

    def parent(self, service: str, location: str | None):
        """(ParentDecision, the row of the service); raises InvalidRequest for a bad location,
        NoZone when no zone is eligible."""
        row = self.engine.store.service(service)
        bound = row.profile.get("max_latency_ms")
        tolerance = row.max_queuing_delay_s
        if location is not None:
            try:
                self.topology.check_site(location, "ingress site")
            except TopologyError as e:
                raise invalid("location", str(e)) from None
        elif bound is not None:
            raise invalid("location", f"service {service} has a latency bound of {bound:g} ms "
                          "but no ingress site was given",
                          f"place it with --location SITE (a site of {self.topology.name})")
        lat = zone_latencies(self.topology, self.sites, location)
        sums = self.summaries(row.name)
        return choose_zones(sums, lat, ingress=location, bound_ms=bound, tolerance_s=tolerance,
                            fanout=self.fanout, weights=self.weights, service=service), row

    def place(self, service: str, *, location: str | None = None, deploy_it: bool = False,
              request: dict | None = None, bridges=()):
        t0 = time.perf_counter()
        request = {**(request or {"service": service, "location": location}),
                   "placement": "hierarchical"}
        try:
            decision, _row = self.parent(service, location)
        except NoZone as e:
            ms = round((time.perf_counter() - t0) * 1000.0, 3)
            rec = {"ingress": location, "eligible": 0, "rejected": e.rejected[:20],
                   "rejected_count": len(e.rejected), "topology": self.topology.name}
            did = self.engine.store.save_decision(service, states.DECISION_REFUSED, None, None, str(e),
                                                  request, [("parent", ms, rec)], ms)
            out = Placement(did, service, states.DECISION_REFUSED, None, None, str(e), total_ms=ms,
                            step_ms={"parent": ms})
            if deploy_it:          # a Refused crosses RPC as it is (an expected exception)
                raise Refused(f"placement {did}: {e}; see `fluidvim placement explain "
                              f"{did[:8]}`") from None
            return out
        parent_ms = round((time.perf_counter() - t0) * 1000.0, 3)
        record = {**decision.to_record(), "topology": self.topology.name}
        result = None
        tried = []
        for i, group in enumerate(decision.rounds(self.max_rounds)):
            names = [c.zone for c in group]
            tried.append(names)
            child = copy.copy(self.engine)
            child.zones = {z: self.engine.zones[z] for z in names}
            rec = {**record, "round": i + 1, "chosen": names, "tried": list(tried)}
            try:
                result = child.place(service, location=None, deploy_it=deploy_it,
                                     request=request, bridges=bridges,
                                     pre_steps=[("parent", parent_ms, rec)])
            except Refused:
                if i + 1 >= min(self.max_rounds, len(decision.rounds(self.max_rounds))):
                    raise
                continue
            if result.status != states.DECISION_REFUSED:
                break
        if deploy_it:                     # the zones' slots changed: announce anew
            self.invalidate(service)
        return result
