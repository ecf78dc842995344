# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Consolidation on a fleet: which hosts to empty (the plan, priced by whole or by busy load)
and which instances a scale-in takes.

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture); every
name is importable from there too. The hosts, PABFD and fill limits are :mod:`.fleet`'s.
"""

from __future__ import annotations

import dataclasses
import heapq
import math

from .fleet import FleetHost, _watts_per_unit, fill_limit, host_marginal, unit_watts


@dataclasses.dataclass
class Migration:
    vnf: str
    demand: float
    src: str
    dst: str


@dataclasses.dataclass
class ConsolidationPlan:
    sleep: list                        # host names that can be emptied and sleep
    migrations: list                   # Migration, in order
    watts_before: float
    watts_after: float
    cost_j: float = 0.0                # what the moves and the later wake-ups of ``sleep`` cost

    @property
    def saved_watts(self) -> float:
        return self.watts_before - self.watts_after


class _Candidates:
    """PABFD over a fleet for one kind of VNF, incrementally: a heap of (``marginal(h)``: the
    watts it adds on ``h``, ``inf`` where it does not fit; -u, name) brought up to date lazily,
    when asked, with the hosts ``changes`` logged since (:class:`_Whole`'s ``touch``), so a plan
    that moves V VNFs among H hosts costs O((V + H) log H), not O(V x H), however many heaps."""

    def __init__(self, hosts, marginal, changes):
        self.marginal, self.changes = marginal, changes
        self.heap: list = []
        self.seen = len(changes.changed)              # the changes logged before it: in its heap
        for h in hosts:
            self._push(h)

    def _push(self, h):
        m = self.marginal(h)
        if not math.isinf(m):
            heapq.heappush(self.heap, (m, -h.u, h.name, self.changes.version.get(h.name, 0), h))

    def best(self, exclude) -> FleetHost | None:
        """The host ``pabfd_choose(hosts, demand, exclude)`` would pick (same order)."""
        log = self.changes.changed
        for h in {x.name: x for x in log[self.seen:]}.values():
            self._push(h)                             # once per host changed since
        self.seen = len(log)
        held = []
        found = None
        while self.heap:
            entry = heapq.heappop(self.heap)
            m, neg_u, name, version, h = entry
            if version != self.changes.version.get(name, 0):
                continue                               # stale: a fresh entry was pushed
            if name in exclude:
                held.append(entry)
                continue
            found = h
            heapq.heappush(self.heap, entry)
            break
        for entry in held:
            heapq.heappush(self.heap, entry)
        return found


@dataclasses.dataclass(frozen=True)
class Fill:
    """How :func:`consolidation_plan` fills its receivers: VNFs of ``vnf`` capacity units, each
    receiver up to its :func:`fill_limit` against ``wake_unit_w`` (the watts per unit of the
    best host out of service to wake; ``None``: the best host of the plan's). ``busy``
    ({vnf: the capacity units its sessions keep busy}): the limit holds the receiver's busy
    load, its VNFs go up to its ``u_max`` (:func:`consolidation_plan`)."""

    vnf: float
    wake_unit_w: float | None = None
    # {vnf: capacity units its sessions keep busy}: the plan priced by busy threads
    busy: dict | None = dataclasses.field(default=None, compare=False)


def consolidation_plan(hosts, u_low: float = 0.5, apply: bool = False, *,
                       horizon_s: float | None = None, move_j: float = 0.0,
                       wake_j=None, keep: float = 0.0,
                       fill: float | Fill | None = None) -> ConsolidationPlan:
    """Which lightly loaded hosts (u <= ``u_low``) can move all their VNFs elsewhere (PABFD, never
    onto a host being emptied or a sleeping one) and sleep, least loaded first. A host is only
    emptied when it saves power - and, with ``horizon_s``, only when the watts it saves over
    that time outweigh what emptying it costs: ``move_j`` joules per VNF moved (e.g. the CPU of
    the launch that replaces it) plus ``wake_j(host)`` joules to bring it back later (a boot).
    The saving is the whole fleet's watts before minus after, on the curves: the emptied host's
    watts less what its VNFs add on the hosts that take them (where a receiver climbs into the
    steep top of its curve, that eats the saving). ``keep``: capacity units the hosts left
    awake must still have free after the plan (the growth a forecast expects within a wake-up,
    :func:`forecast_instances`): a host whose emptying would leave less is kept.
    ``fill``: a receiver takes VNFs only up to its :func:`fill_limit` (for VNFs of ``fill``
    capacity units; its ``u_max`` still holds) against the best host of the fleet to wake -
    any host may be the one emptied and woken again later, so packing a receiver into the
    steep top of its curve is never cheaper than that host awake (bench/energy: receivers
    packed to their u_max ran all day at 95-100 %, and consolidation cost energy).
    A :class:`Fill` with ``wake_unit_w``, the watts per unit of the best host out of service
    to wake instead (:func:`unit_watts`; what the placement's own fill limits are against):
    the receivers' fill limits are against it rather than against the best host of ``hosts``
    (the best host in service) - on a mixed fleet
    that is the most efficient server, in service and never the one woken, and it held every
    receiver at its efficient load (bench/energy, heterogeneous 20 hosts: a 112-thread host
    kept 50-80 VNFs through the night that the 88- and 256-thread servers had room for up to
    their own fill limits). ``None`` or ``inf`` (no host out of service): the best of ``hosts``.
    A :class:`Fill` with ``busy`` prices the plan by busy threads: each host draws its curve
    at its busy load, a VNF moved carries its busy share, and a receiver takes VNFs up to its
    ``u_max`` (e.g. its threads: an idle VNF holds a thread's allocation and ~no watts) while
    its *busy* load stays within its fill limit - idle VNFs may fill the steep top of a curve,
    busy ones may not (:class:`_Busy`).
    With ``apply`` the fleet is changed, else it is left as it was.
    """
    if isinstance(fill, Fill) and fill.busy is not None:
        return _plan(hosts, u_low, apply, horizon_s, move_j, wake_j, keep, _Busy(hosts, fill))
    caps = {}
    if fill is not None and hosts:
        f = fill if isinstance(fill, Fill) else Fill(fill)
        w = f.wake_unit_w
        best = w if w is not None and math.isfinite(w) else \
            min(unit_watts(h.model, h.capacity) for h in hosts)
        for h in hosts:
            lim = fill_limit(h.model, h.capacity, best, demand=f.vnf) / h.capacity
            if lim < h.u_max:
                caps[h.name] = h.u_max
                h.u_max = max(lim, min(h.u_max, h.u))     # never below what it holds
    try:
        return _plan(hosts, u_low, apply, horizon_s, move_j, wake_j, keep, _Whole(hosts))
    finally:
        for h in hosts:
            if h.name in caps:
                h.u_max = caps[h.name]


def _plan(hosts, u_low, apply, horizon_s, move_j, wake_j, keep, pricing):
    """:func:`consolidation_plan`'s rules in order, with ``pricing`` (:class:`_Whole` or
    :class:`_Busy`) saying what a host draws and which receiver takes a VNF."""
    before = sum(pricing.watts(h) for h in hosts)
    state = {h.name: (dict(h.load), h.asleep) for h in hosts}
    by_name = {h.name: h for h in hosts}
    sleeping = pricing.sleeping
    emptied: list = []
    migrations: list = []
    total_cost = 0.0
    free = sum(max(0.0, h.u_max * h.capacity - h.used) for h in hosts if h.name not in sleeping)
    for src in sorted((h for h in hosts if h.load and h.u <= u_low), key=lambda h: (h.u, h.name)):
        if not src.load or src.u > u_low:           # it took VNFs from an emptied host meanwhile
            continue
        # emptying it takes its free room and puts its VNFs into the others' room
        left = free - max(0.0, src.u_max * src.capacity - src.used) - src.used
        if keep > 0 and left < keep - 1e-9:
            continue
        touched = {src.name: pricing.watts(src)}
        moves = []
        ok = True
        for vnf, d in pricing.order(src):
            dst = pricing.receiver(src, vnf, d, {src.name, *emptied})
            if dst is None:
                ok = False
                break
            touched.setdefault(dst.name, pricing.watts(dst))
            pricing.place(dst, vnf, d)
            moves.append(Migration(vnf, d, src.name, dst.name))
        if ok:
            load = dict(src.load)
            pricing.vacate(src)
            src.load.clear()
            src.asleep = True
            saved = sum(touched.values()) - sum(pricing.watts(by_name[n]) for n in touched)
            cost = len(moves) * move_j + (wake_j(src) if wake_j is not None else 0.0)
            worth = saved > 0 if horizon_s is None else saved * horizon_s > cost
            if worth:
                emptied.append(src.name)
                migrations.extend(moves)
                total_cost += cost
                free = left
                pricing.emptied(src)
                continue
            src.load.update(load)
            pricing.refill(src)
        for m in moves:                               # undo this host's attempt
            pricing.unplace(by_name[m.dst], m.vnf, m.demand)
        src.asleep = False
    after = sum(pricing.watts(h) for h in hosts)
    plan = ConsolidationPlan(sleep=emptied, migrations=migrations, watts_before=before,
                             watts_after=after, cost_j=total_cost)
    if not apply:
        for name, (load, asleep) in state.items():
            by_name[name].load, by_name[name].asleep = load, asleep
    return plan


class _Whole:
    """Every VNF priced as its whole load busy; receivers by PABFD (:class:`_Candidates`, one
    per VNF size, brought up to date as hosts change)."""

    def __init__(self, hosts):
        self.hosts = hosts
        self.sleeping = {h.name for h in hosts if h.asleep and not h.load}
        self.pabfd: dict = {}                         # demand (busy: and share) -> _Candidates
        self.version: dict = {}                       # host -> its changes
        self.changed: list = []                       # the hosts changed, in order

    def watts(self, h: FleetHost) -> float:
        return h.watts()

    def order(self, src: FleetHost) -> list:
        return sorted(src.load.items(), key=lambda kv: -kv[1])

    def receiver(self, src, vnf, d, exclude):
        if d not in self.pabfd:
            self.pabfd[d] = _Candidates([h for h in self.hosts if h.name not in self.sleeping],
                                        lambda h: host_marginal(h, d), self)
        return self.pabfd[d].best(exclude)

    def _touch(self, h):
        self.version[h.name] = self.version.get(h.name, 0) + 1
        self.changed.append(h)

    def place(self, h, vnf, d):
        h.add(vnf, d)
        self._touch(h)

    def unplace(self, h, vnf, d):
        h.load.pop(vnf)
        self._touch(h)

    def vacate(self, src):
        pass

    def refill(self, src):
        pass

    def emptied(self, src):
        self._touch(src)


def _clip(u: float) -> float:
    """A utilisation summed from shares, back in 0..1 (adding and taking back the same float
    shares leaves -1e-17)."""
    return max(0.0, min(1.0, u))


class _Busy(_Whole):
    """:func:`consolidation_plan` priced by busy threads (``fill.busy``: {vnf: capacity units
    its sessions keep busy}; a VNF not named: its whole load). Every VNF priced as its whole
    load busy, a server whose VNFs are mostly idle looks as dear to empty as a busy one, and
    its receivers stop at their fill limits counting idle VNFs as busy (bench/energy,
    heterogeneous 20 hosts, 22:00-24:00: spec0253 kept awake with 88 VNFs the others had the
    threads for, the MILP bound runs the idle ones on the steep tops of the hosts it keeps
    awake anyway: with :func:`scale_in_pick`, 41.02 -> 40.95 kWh; either alone 41.01-41.02).
    The caller's ``u_max`` is the room its placement will really give the replacements:
    bench/energy gives its placement's fills (a host of idle VNFs: its threads); every
    receiver up to its threads there (``u_max`` 1) was 40.88 kWh but, on the homogeneous
    20-host fleet, 99.85 kWh and 5,115 SLO misses - the replacements did not fit in the
    placement's fills and woke hosts. The sources are the same (``u`` - VNFs over threads -
    at most ``u_low``: by busy load instead, half-full busy servers were emptied and woken
    again: 41.20 kWh, 168 SLO misses). Receivers are chosen by a linear scan per VNF (a fleet
    in service is hundreds of hosts at most)."""

    def __init__(self, hosts, fill: Fill):
        super().__init__(hosts)
        self.busy = fill.busy
        self.bload = {h.name: sum(self.busy.get(v, d) for v, d in h.load.items()) for h in hosts}
        self.bcap: dict = {}
        if hosts:
            w = fill.wake_unit_w
            best = w if w is not None and math.isfinite(w) else \
                min(unit_watts(h.model, h.capacity) for h in hosts)
            for h in hosts:                           # never below what it holds
                lim = fill_limit(h.model, h.capacity, best, demand=fill.vnf)
                self.bcap[h.name] = max(lim, self.bload[h.name])
        self.held: dict = {}                          # src -> its busy load while vacated

    def watts(self, h: FleetHost) -> float:
        if h.name in self.sleeping or (h.asleep and not h.load):
            return 0.0
        return h.model.watts(_clip(self.bload[h.name] / h.capacity))

    def order(self, src: FleetHost) -> list:
        return sorted(src.load.items(), key=lambda kv: (-self.busy.get(kv[0], kv[1]), kv[0]))

    def _marginal(self, h, d, bv) -> float:
        """The busy watts ``bv`` busy units add on ``h``; ``inf`` where a VNF of ``d`` units
        does not fit or its busy load would pass the fill limit."""
        n = h.name
        if not h.fits(d) or self.bload[n] + bv > self.bcap[n] + 1e-9:
            return math.inf
        return (h.model.watts(_clip((self.bload[n] + bv) / h.capacity))
                - h.model.watts(_clip(self.bload[n] / h.capacity)))

    def receiver(self, src, vnf, d, exclude):
        """The least busy watts added, ties: the fuller host (one heap per VNF size and busy
        share: bench/energy's VNFs of a host share one, so a plan over 1,000 hosts does not
        scan them all for every VNF)."""
        bv = self.busy.get(vnf, d)
        if (d, bv) not in self.pabfd:
            self.pabfd[d, bv] = _Candidates(
                [h for h in self.hosts if h.name not in self.sleeping],
                lambda h: self._marginal(h, d, bv), self)
        return self.pabfd[d, bv].best(exclude)

    def place(self, h, vnf, d):
        h.load[vnf] = d
        self.bload[h.name] += self.busy.get(vnf, d)
        self._touch(h)

    def unplace(self, h, vnf, d):
        h.load.pop(vnf)
        self.bload[h.name] -= self.busy.get(vnf, d)
        self._touch(h)

    def vacate(self, src):
        self.held[src.name], self.bload[src.name] = self.bload[src.name], 0.0

    def refill(self, src):
        self.bload[src.name] = self.held.pop(src.name)

    def emptied(self, src):
        self.held.pop(src.name, None)


def over_fill(h: FleetHost) -> float:
    """Load on ``h`` beyond its ``u_max`` (the fill it should stop at), 0 when within it."""
    return max(0.0, h.used - h.u_max * h.capacity)


def scale_in_order(hosts) -> list[str]:
    """Hosts to take a service's instances from first when it scales in: the most watts per VNF
    first (its watts on its curve over its load: a lightly loaded host carries its idle watts
    on few VNFs, and of two hosts at the same load the less efficient server goes first, so the
    VNFs left gather on the fleet's most efficient servers, as the MILP bound puts them), then
    the least loaded. ``hosts``: FleetHosts with their VNFs as ``load``. (bench/energy,
    heterogeneous 20 hosts: taking them from the least loaded host instead of the dearest per
    VNF kept a 3.06 W-a-thread server at 30-90 VNFs through the night while the MILP ran the
    best servers full: 43.30 -> 42.63 kWh with this order. Hosts loaded beyond their ``u_max``
    - the fill limit, which falls when an efficient host goes off and becomes the best to wake -
    went first until 2026-11-28: on the evening ramp-down that took the scale-ins from the
    efficient servers the limit had just lowered and left two dear ones half full, 1.5 hosts
    more awake than the bound from 18:00 to 01:00 (``python -m bench.energy.gap``); without it
    fluidvim-consolidate 42.60 -> 42.42 kWh heterogeneous, 99.44 -> 99.31 homogeneous, 0 SLO
    misses. A caller that wants only what is beyond the fill from such a host takes
    :func:`over_fill` of it.)"""
    return [h.name for h in sorted(hosts, key=lambda h: (-_watts_per_unit(h), h.used, h.name))]


def scale_in_pick(hosts, n: int, mine, sessions=None, leaving=()) -> list[str]:
    """The ``n`` instances of one service to scale in: from the hosts in
    :func:`scale_in_order`, of a host loaded beyond its ``u_max`` only what is beyond it (its
    :func:`over_fill`, less the VNFs already draining there: those leave anyway), of the others
    any; on each host the instances with the **fewest sessions first** (``sessions``: instance
    -> sessions it serves, what the slot registry reports; ties and unknown: by name).
    ``hosts``: FleetHosts with every VNF on them as ``load`` (one unit each); ``mine``: the
    service's instances that serve (may go); ``leaving``: instances draining already. Fewer
    than ``n`` when the hosts hold fewer of ``mine``. An instance that goes drains sessions
    first, so the emptiest leaves soonest and frees its thread: taking a host's instances by
    name instead kept 15-27 draining instances more than an ideal run through the evening
    ramp-down of bench/energy's heterogeneous 20-host day, the room that emptying one more
    host needed (2026-11-29, fluidvim-consolidate: 41.02 -> 41.01 kWh alone, 40.95 with the
    plan priced by busy threads, which alone is 41.02; 0 SLO misses; homogeneous 20 hosts
    99.11 -> 99.13. Taking every instance of a host beyond its fill, not only what is beyond
    it: 40.96 alone; the emptiest of any host first, whatever its watts per VNF: 41.04; idle
    ones of any host first: 41.08 and 472 sessions refused)."""
    mine = set(mine)
    leaving = set(leaving)
    sessions = sessions or {}
    by = {h.name: h for h in hosts}
    out: list = []
    if n <= 0:
        return out
    for name in scale_in_order(list(by.values())):
        h = by[name]
        over = over_fill(h) - sum(1 for v in h.load if v in leaving)
        take = math.ceil(over - 1e-9) if over > 0 else len(h.load)
        cands = sorted((v for v in h.load if v in mine and v not in leaving),
                       key=lambda v: (sessions.get(v, 0), v))
        for v in cands[:take]:
            out.append(v)
            if len(out) == n:
                return out
    return out


