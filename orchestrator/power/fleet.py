# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Power-aware placement on a fleet: marginal watts, PABFD / first fit / worst fit, consolidation.

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture); every
name is importable from there too.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import math

from .models import PowerError, PowerSource, _check_u


def marginal_watts(model: PowerSource, u_now: float, u_added: float) -> float:
    """Extra watts when a host at ``u_now`` takes ``u_added`` more; ``inf`` if it does not fit."""
    u_now = _check_u(u_now, "u_now")
    if u_added < 0 or math.isnan(u_added):
        raise PowerError(f"u_added must be >= 0, not {u_added!r}")
    if u_now + u_added > 1.0 + 1e-9:
        return math.inf
    return model.watts(min(1.0, u_now + u_added)) - model.watts(u_now)


@dataclasses.dataclass
class FleetHost:
    """A host as the placement helpers see it: a model, capacity and the load on it."""

    name: str
    model: PowerSource
    capacity: float = 1.0                   # CPU units (e.g. hardware threads); loads are in them
    u_max: float = 1.0                      # utilisation cap (PABFD's upper threshold)
    load: dict = dataclasses.field(default_factory=dict)   # vnf -> CPU units
    asleep: bool = False                    # an empty host that sleeps draws 0 W

    @property
    def used(self) -> float:
        return sum(self.load.values())

    @property
    def u(self) -> float:
        return self.used / self.capacity

    def fits(self, demand: float) -> bool:
        return self.used + demand <= self.u_max * self.capacity + 1e-9

    def watts(self) -> float:
        if self.asleep and not self.load:
            return 0.0
        return self.model.watts(min(1.0, self.u))

    def add(self, vnf: str, demand: float) -> None:
        if vnf in self.load:
            raise PowerError(f"{vnf} is already on {self.name}")
        self.load[vnf] = demand
        self.asleep = False

    def remove(self, vnf: str) -> float:
        return self.load.pop(vnf)


def host_marginal(h: FleetHost, demand: float, count_wake: bool = True) -> float:
    """Extra watts of ``demand`` CPU units on ``h``; a sleeping host also costs its idle power."""
    if not h.fits(demand):
        return math.inf
    m = marginal_watts(h.model, min(1.0, h.u), demand / h.capacity)
    if count_wake and h.asleep and not h.load:
        m += h.model.watts(0.0)
    return m


def pabfd_choose(hosts, demand: float, exclude=()) -> FleetHost | None:
    """PABFD: the host with the least power increase that fits ``demand`` (ties: fuller host)."""
    best, key = None, None
    for h in hosts:
        if h.name in exclude:
            continue
        m = host_marginal(h, demand)
        if math.isinf(m):
            continue
        k = (m, -h.u, h.name)
        if key is None or k < key:
            best, key = h, k
    return best


def first_fit(hosts, demand: float, exclude=()) -> FleetHost | None:
    """The first host (in the given order) that fits, awake hosts before sleeping ones."""
    ordered = [h for h in hosts if not h.asleep or h.load] + [h for h in hosts if h.asleep and not h.load]
    for h in ordered:
        if h.name not in exclude and h.fits(demand):
            return h
    return None


def worst_fit(hosts, demand: float, exclude=()) -> FleetHost | None:
    """The host with the most free capacity (spreads load; the classic anti-consolidation)."""
    cands = [h for h in hosts if h.name not in exclude and h.fits(demand)]
    if not cands:
        return None
    return max(cands, key=lambda h: (h.u_max * h.capacity - h.used, h.name))


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
    """PABFD over a fleet for one demand size, incrementally: a heap of (marginal watts, -u,
    name) that is brought up to date lazily when a host's load changed (``touch``), so a plan
    that moves V VNFs among H hosts costs O((V + H) log H), not O(V x H)."""

    def __init__(self, hosts, demand: float):
        self.demand = demand
        self.heap: list = []
        self.version: dict = {}
        for h in hosts:
            self.version[h.name] = 0
            self._push(h)

    def _push(self, h):
        m = host_marginal(h, self.demand)
        if not math.isinf(m):
            heapq.heappush(self.heap, (m, -h.u, h.name, self.version[h.name], h))

    def touch(self, h):
        self.version[h.name] = self.version.get(h.name, 0) + 1
        self._push(h)

    def best(self, exclude) -> FleetHost | None:
        """The host ``pabfd_choose(hosts, demand, exclude)`` would pick (same order)."""
        held = []
        found = None
        while self.heap:
            entry = heapq.heappop(self.heap)
            m, neg_u, name, version, h = entry
            if version != self.version[name]:
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
    busy ones may not (:func:`_busy_plan`).
    With ``apply`` the fleet is changed, else it is left as it was.
    """
    if isinstance(fill, Fill) and fill.busy is not None:
        return _busy_plan(hosts, u_low, apply, horizon_s, move_j, wake_j, keep, fill)
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
        return _consolidation_plan(hosts, u_low, apply, horizon_s, move_j, wake_j, keep)
    finally:
        for h in hosts:
            if h.name in caps:
                h.u_max = caps[h.name]


def _consolidation_plan(hosts, u_low, apply, horizon_s, move_j, wake_j, keep):
    before = sum(h.watts() for h in hosts)
    state = {h.name: (dict(h.load), h.asleep) for h in hosts}
    by_name = {h.name: h for h in hosts}
    sleeping = {h.name for h in hosts if h.asleep and not h.load}
    emptied: list = []
    migrations: list = []
    pabfd: dict = {}                                  # demand -> _Candidates
    total_cost = 0.0
    free = sum(max(0.0, h.u_max * h.capacity - h.used) for h in hosts if h.name not in sleeping)

    def candidates(d):
        if d not in pabfd:
            pabfd[d] = _Candidates([h for h in hosts if h.name not in sleeping], d)
        return pabfd[d]

    def touch(h):
        for c in pabfd.values():
            c.touch(h)

    for src in sorted((h for h in hosts if h.load and h.u <= u_low), key=lambda h: (h.u, h.name)):
        if not src.load or src.u > u_low:           # it took VNFs from an emptied host meanwhile
            continue
        # emptying it takes its free room and puts its VNFs into the others' room
        left = free - max(0.0, src.u_max * src.capacity - src.used) - src.used
        if keep > 0 and left < keep - 1e-9:
            continue
        touched = {src.name: src.watts()}
        moves = []
        ok = True
        for vnf, d in sorted(src.load.items(), key=lambda kv: -kv[1]):
            dst = candidates(d).best({src.name, *emptied})
            if dst is None:
                ok = False
                break
            touched.setdefault(dst.name, dst.watts())
            dst.add(vnf, d)
            touch(dst)
            moves.append(Migration(vnf, d, src.name, dst.name))
        if ok:
            load = dict(src.load)
            src.load.clear()
            src.asleep = True
            saved = sum(touched.values()) - sum(by_name[n].watts() for n in touched)
            cost = len(moves) * move_j + (wake_j(src) if wake_j is not None else 0.0)
            worth = saved > 0 if horizon_s is None else saved * horizon_s > cost
            if worth:
                emptied.append(src.name)
                migrations.extend(moves)
                total_cost += cost
                free = left
                touch(src)
                continue
            src.load.update(load)
        for m in moves:                               # undo this host's attempt
            dst = by_name[m.dst]
            dst.load.pop(m.vnf)
            touch(dst)
        src.asleep = False
    after = sum(h.watts() for h in hosts)
    plan = ConsolidationPlan(sleep=emptied, migrations=migrations, watts_before=before,
                             watts_after=after, cost_j=total_cost)
    if not apply:
        for name, (load, asleep) in state.items():
            by_name[name].load, by_name[name].asleep = load, asleep
    return plan


def _clip(u: float) -> float:
    """A utilisation summed from shares, back in 0..1 (adding and taking back the same float
    shares leaves -1e-17)."""
    return max(0.0, min(1.0, u))


def _busy_plan(hosts, u_low, apply, horizon_s, move_j, wake_j, keep, fill: Fill):
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
    busy = fill.busy
    by_name = {h.name: h for h in hosts}
    sleeping = {h.name for h in hosts if h.asleep and not h.load}
    state = {h.name: (dict(h.load), h.asleep) for h in hosts}

    def b(v, h):
        return busy.get(v, h.load[v])

    bload = {h.name: sum(b(v, h) for v in h.load) for h in hosts}
    bcap = {}
    if hosts:
        f = fill
        w = f.wake_unit_w
        best = w if w is not None and math.isfinite(w) else \
            min(unit_watts(h.model, h.capacity) for h in hosts)
        for h in hosts:
            lim = fill_limit(h.model, h.capacity, best, demand=f.vnf)
            bcap[h.name] = max(lim, bload[h.name])          # never below what it holds
    for h in hosts:
        bcap.setdefault(h.name, h.u_max * h.capacity)

    def watts(name):
        h = by_name[name]
        if name in sleeping or (h.asleep and not h.load):
            return 0.0
        return h.model.watts(_clip(bload[name] / h.capacity))

    before = sum(watts(h.name) for h in hosts)
    emptied, migrations = [], []
    total_cost = 0.0
    free = sum(max(0.0, h.u_max * h.capacity - h.used) for h in hosts if h.name not in sleeping)
    for src in sorted((h for h in hosts if h.load and h.u <= u_low), key=lambda h: (h.u, h.name)):
        if not src.load or src.u > u_low:
            continue
        left = free - max(0.0, src.u_max * src.capacity - src.used) - src.used
        if keep > 0 and left < keep - 1e-9:
            continue
        touched = {src.name: watts(src.name)}
        moves = []
        ok = True
        for vnf, d in sorted(src.load.items(), key=lambda kv: (-b(kv[0], src), kv[0])):
            bv = b(vnf, src)
            pick, key = None, None
            for h in hosts:
                n = h.name
                if n == src.name or n in emptied or n in sleeping:
                    continue
                if not h.fits(d) or bload[n] + bv > bcap[n] + 1e-9:
                    continue
                u0 = _clip(bload[n] / h.capacity)
                m = h.model.watts(_clip((bload[n] + bv) / h.capacity)) - h.model.watts(u0)
                k = (m, -h.u, n)
                if key is None or k < key:
                    pick, key = h, k
            if pick is None:
                ok = False
                break
            touched.setdefault(pick.name, watts(pick.name))
            pick.load[vnf] = d
            bload[pick.name] += bv
            moves.append(Migration(vnf, d, src.name, pick.name))
        if ok:
            saved_from = bload[src.name]
            bload[src.name] = 0.0
            load = dict(src.load)
            src.load.clear()
            src.asleep = True
            saved = sum(touched.values()) - sum(watts(n) for n in touched)
            cost = len(moves) * move_j + (wake_j(src) if wake_j is not None else 0.0)
            worth = saved > 0 if horizon_s is None else saved * horizon_s > cost
            if worth:
                emptied.append(src.name)
                migrations.extend(moves)
                total_cost += cost
                free = left
                continue
            src.load.update(load)
            bload[src.name] = saved_from
        for m in moves:
            dst = by_name[m.dst]
            dst.load.pop(m.vnf)
            bload[m.dst] -= busy.get(m.vnf, m.demand)
        src.asleep = False
    after = sum(watts(h.name) for h in hosts)
    plan = ConsolidationPlan(sleep=emptied, migrations=migrations, watts_before=before,
                             watts_after=after, cost_j=total_cost)
    if not apply:
        for name, (load, asleep) in state.items():
            by_name[name].load, by_name[name].asleep = load, asleep
    return plan


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


def _watts_per_unit(h: FleetHost) -> float:
    return h.watts() / h.used if h.used > 0 else math.inf


def efficient_utilisation(model: PowerSource) -> float:
    """The utilisation at which a host does its work with the fewest watts per unit of load
    (``watts(u) / u``). Between a curve's points the power is linear, so ``watts(u) / u`` is
    monotone there and the best is one of the points 0.1 .. 1.0. Old servers are most efficient
    full; many newer ones climb steeply near full load (turbo) and do best at 60-80 %."""
    pts = [i / 10.0 for i in range(1, 11)]
    return min(pts, key=lambda u: (model.watts(u) / u, -u))


def unit_watts(model: PowerSource, capacity: float, u: float | None = None) -> float:
    """Watts per unit of capacity of a host running at ``u`` (default: its
    :func:`efficient_utilisation`): what a unit of load costs on it once it is filled."""
    at = efficient_utilisation(model) if u is None else u
    return model.watts(at) / (at * capacity)


def wake_unit_watts(hosts, need: float) -> float:
    """Watts per unit of load of waking one of ``hosts`` (FleetHosts out of service) for
    ``need`` units - the least, over them, of its watts at that load over the load it takes
    (``inf``: none, or ``need`` <= 0). A host woken for a few VNFs runs them at its idle watts
    and more: dearer per unit than :func:`unit_watts` at its efficient load, which assumes it
    will be filled to it. What :func:`fill_limit` compares a host in service's next VNF with
    when the forecast wants only ``need`` more than the room in service holds (bench/energy,
    heterogeneous 20 hosts: the wake-ahead woke a 109-W-idle host at the peak for one or two
    VNFs of room and kept it awake, empty, for three hours)."""
    if need <= 0 or math.isnan(need):
        return math.inf
    best = math.inf
    for h in hosts:
        take = min(float(need), h.capacity)
        best = min(best, h.model.watts(min(1.0, take / h.capacity)) / take)
    return best


def wake_order(hosts, u: float | None = None) -> list[str]:
    """Powered-off hosts to wake first: the fewest watts per unit of capacity at the load a
    woken host is filled to - its :func:`efficient_utilisation`, or ``u`` for all - then the
    least idle watts. (Waking the host with the least idle watts instead prefers small old
    servers that fill at once and are inefficient per VNF: bench/energy measures both.)"""
    if u is not None:
        u = _check_u(u, "u")
        if u <= 0:
            raise PowerError("wake_order: u must be > 0 (the utilisation a woken host runs at)")
    return [h.name for h in sorted(hosts, key=lambda h: (unit_watts(h.model, h.capacity, u),
                                                         h.model.watts(0.0), h.name))]


def fill_limit(model: PowerSource, capacity: float, wake_unit_w: float,
               demand: float = 1.0, reserve: float = 0.0) -> float:
    """How much load (in capacity units, a multiple of ``demand``) a host in service should take
    before waking another host is better: up to its :func:`efficient_utilisation` in any case
    (it is awake to be used), beyond that in steps, each to where the load added costs the
    fewest watts per unit on average, while that average is no more than ``wake_unit_w`` -
    what a unit costs on the best host there is to wake (:func:`unit_watts`; ``inf`` when none
    is left: fill it up). On a curve that only gets steeper that is one unit at a time, as
    before; one that climbs steeply between two of its points and gently after (many servers
    between 70 and 100 %) is filled to the end where the steep step alone would stop it and
    wake a host (bench/energy, heterogeneous 100 hosts: the MILP bound fills such hosts - 2x
    spec0352, 32 threads - to 32 VNFs where the step rule stopped at 23 and woke servers the
    bound never uses: 216.45 -> 216.25 kWh; 20 hosts, seed 2: 54.11 -> 53.84). ``reserve``:
    capacity units never filled (the host's own work: the CPU of launches on it; a host whose
    VNFs want all its threads serves the sessions of its busiest VNFs late while it launches
    one more)."""
    if demand <= 0 or capacity <= 0:
        raise PowerError(f"fill_limit: need demand > 0 and capacity > 0, got {demand}, "
                         f"{capacity}")
    if reserve < 0 or reserve >= capacity:
        raise PowerError(f"fill_limit: reserve must be >= 0 and below the capacity "
                         f"({capacity}), not {reserve}")
    units = int((capacity - reserve) / demand + 1e-9)
    k = min(units, int(efficient_utilisation(model) * capacity / demand + 1e-9))

    def w(j: int) -> float:
        return model.watts(min(1.0, j * demand / capacity))

    # the curve is linear between its tenths: the least average from k is reached at the
    # units next to a tenth or at the last unit (k + 1 included: a segment's first step)
    marks = {units} | {j for m in range(1, 10) for j in (math.floor(m * capacity / 10 / demand),
                                                         math.ceil(m * capacity / 10 / demand))}
    while k < units:
        wk = w(k)
        best, to = math.inf, k
        for j in sorted(j for j in marks | {k + 1} if k < j <= units):
            avg = (w(j) - wk) / ((j - k) * demand)
            if avg <= best:
                best, to = avg, j
        if best > wake_unit_w:
            break
        k = to
    return k * demand


def fleet_watts(hosts) -> float:
    return sum(h.watts() for h in hosts)


def forecast_instances(history, now: float, ahead_s: float, slots: int, *,
                       window_s: float = 900.0, lead_s: float = 0.0,
                       headroom: float = 0.0) -> int:
    """Instances of one service its scaler will want ``ahead_s`` seconds from ``now``: the used
    slots now, grown along their trend (the scaler's own :func:`~..demand.demand_rate`,
    growth only, over ``window_s``: longer than the scaler's window, a boot ahead needs the
    day's trend, not the last seconds' noise) for ``ahead_s``, plus the free slots the scaler
    then keeps (``max(headroom, rate x lead_s)``), in instances of ``slots``, plus the one step
    the scaler takes beyond its threshold. ``history``: the service's slot samples (anything
    with ``t``, ``free`` and ``total``, e.g. :class:`~..demand.Sample`), oldest first."""
    from ..demand import demand_rate

    if slots <= 0:
        raise PowerError(f"forecast_instances: slots must be > 0 (sessions one instance "
                         f"serves), not {slots!r}")
    if ahead_s < 0 or window_s <= 0:
        raise PowerError(f"forecast_instances: need ahead_s >= 0 and window_s > 0, got "
                         f"{ahead_s!r}, {window_s!r}")
    if not history:
        return 0
    cur = history[-1]
    rate = demand_rate(list(history), now, window_s)
    used = max(0, cur.total - cur.free) + rate * ahead_s
    keep = max(float(headroom), rate * max(0.0, lead_s))
    if used + keep <= 0:
        return 0
    return math.ceil((used + keep) / slots - 1e-9) + 1


def wake_ahead(shortfall: float, room: float, asleep, fill=None, u: float | None = None,
               keep: float = 0.0) -> list[str]:
    """Powered-off hosts to wake *now* so that ``shortfall`` more VNFs (what the services will
    want one boot from now, :func:`forecast_instances`, beyond the instances they have) find
    room when the woken hosts are up: none while ``room`` (what the hosts in service and those
    already waking still take, by the policy's own fill) covers it, else the first hosts of
    :func:`wake_order` until it does. ``asleep``: FleetHosts that are off; ``fill(host)``: the
    VNFs a woken host takes (default: its ``u_max x capacity``). A host is woken for a
    shortfall it covers only in part too: the rest wakes the next one. ``keep``: room (in
    VNFs) to have beyond the shortfall - the scaler's next step (its headroom in instances
    plus one): with less room in service it plans for a boot and asks a boot's worth of
    instances at once, which then wait on a booting host."""
    shortfall += max(0.0, keep)
    if shortfall <= room + 1e-9:
        return []
    by_name = {h.name: h for h in asleep}
    out = []
    for name in wake_order(asleep, u):
        if shortfall <= room + 1e-9:
            break
        h = by_name[name]
        take = fill(h) if fill is not None else h.u_max * h.capacity
        if take <= 0:
            continue
        out.append(name)
        room += take
    return out


def keep_awake(shortfall: float, room: float, empty, keep: float = 0.0) -> list[str]:
    """Of the empty hosts due to power off (``empty``: ``(name, room)`` pairs, the VNFs each
    still takes), those to keep awake because the forecast needs their room: the room left
    without them (``room``: of the hosts in service and waking, these included) must still
    cover ``shortfall``, the instances the services want one boot from now beyond those they
    have (:func:`forecast_instances`), plus ``keep``: the scaler's next step, the same
    ``keep`` :func:`wake_ahead` is given. The hosts with the least room go first; a host is kept
    when powering it off would leave less than that. (bench/energy: a host woken
    ahead of a ramp stood empty through the hold time and was powered off minutes before the
    scale-out that needed it, which then waited a boot on the next host woken. And without
    ``keep``, at no shortfall, an efficient host powered off took the others' room to 0 - their
    fill limits fall when it becomes the best host to wake - and :func:`wake_ahead` woke it
    again the next step: a boot at peak power every ~8 min, the scaler's next step waiting on
    it: 132 refused sessions at the peak of bench/energy's heterogeneous 20-host day.)"""
    if keep < 0:
        raise PowerError(f"keep_awake: keep must be >= 0 (room in VNFs), not {keep!r}")
    need = shortfall + keep
    kept = []
    for name, r in sorted(empty, key=lambda x: (x[1], x[0])):
        if room - r < need - 1e-9:
            kept.append(name)
        else:
            room -= r
    return kept


class ShortfallPeak:
    """The largest forecast shortfall (:func:`forecast_instances` beyond the instances there
    are) noted over the last ``window_s``: what :func:`keep_awake` is given, so that a host
    woken for a ramp is not powered off because the trend read flat for a minute. A power-off
    the next minute's forecast undoes costs a boot at peak power, and the ramp's scale-outs
    wait on that boot while their slots count as free (bench/energy, heterogeneous 100 hosts:
    the trend dipped to 0 at 12:45, the three hosts woken ahead of the midday ramp were
    powered off after the hold time, the ramp resumed two minutes later, the room in service
    fell to 0 and 3,275 sessions were refused while they booted again). The window is a
    boot: a host the forecast wanted within the last boot time is kept."""

    def __init__(self, window_s: float):
        if window_s < 0 or math.isnan(window_s):
            raise PowerError(f"ShortfallPeak: window_s must be >= 0 (seconds), not "
                             f"{window_s!r}")
        self.window_s = float(window_s)
        self._seen: collections.deque = collections.deque()

    def note(self, now: float, shortfall: float) -> float:
        """Note the shortfall forecast at ``now``; returns :meth:`peak`."""
        self._seen.append((float(now), max(0.0, float(shortfall))))
        return self.peak(now)

    def peak(self, now: float | None = None) -> float:
        """The largest shortfall noted within ``window_s`` before ``now`` (default: the last
        time noted; 0: none)."""
        if now is None:
            now = self._seen[-1][0] if self._seen else 0.0
        while self._seen and self._seen[0][0] < now - self.window_s - 1e-9:
            self._seen.popleft()
        return max((s for _, s in self._seen), default=0.0)


class WakePersist:
    """A wake ahead only once :func:`wake_ahead` has named hosts for ``rounds`` rounds in a
    row: a shortfall the slot trend forecasts for one round only is the trend's noise, and the
    host woken for it boots at peak power, stands empty through the hold time and goes off
    again (bench/energy, heterogeneous 100 hosts: 73 wakes in the day, ~40 of them off again
    after 6-15 min). ``rounds=1``: every wake at once (the rule before 2026-11-29). A
    placement that finds no room still wakes a host at once (the wake on refusal), and the
    scaler's next step is kept in service by :func:`wake_ahead`'s ``keep``, so the rounds
    waited only shorten a boot's lead."""

    def __init__(self, rounds: int = 1):
        if not isinstance(rounds, int) or rounds < 1:
            raise PowerError(f"WakePersist: rounds must be an integer >= 1, not {rounds!r}")
        self.rounds = rounds
        self.seen = 0                   # rounds in a row wake_ahead has named a host

    def note(self, wake: list) -> list:
        """``wake``: the hosts :func:`wake_ahead` names this round; returns those to wake now
        (none until it has named some for ``rounds`` rounds in a row)."""
        self.seen = self.seen + 1 if wake else 0
        return list(wake) if self.seen >= self.rounds else []


def consolidation_gate(shortfall: float = 0.0, waking: bool = False,
                       growing: bool = False) -> str | None:
    """Why no host in service is emptied now (None: the plan may run). The one rule of the
    orchestrator's power loop (:meth:`~..hostpower.HostPower.round`) and bench/energy's
    fluidvim-consolidate: not while demand grew over the trend window (``growing``), not while
    the forecast wants more instances within a boot than there are (``shortfall``), not while a
    host is waking for it - what is emptied then is woken again: a boot at peak power, the
    scale-out waiting on it (bench/energy: hosts emptied on the morning ramp half an hour after
    a wake, and woken again)."""
    if growing:
        return "demand grew over the trend window"
    if shortfall > 0:
        return f"the forecast wants {shortfall:g} more instance(s) within a boot"
    if waking:
        return "a host is waking"
    return None


def hosts_to_keep(shortfall: float, room: float, room_up: float, loses, loses_up=None,
                  keep: float = 0.0) -> list[str]:
    """Of the hosts due to power off, those kept awake; the one rule of the power loop and
    bench/energy. ``loses``: ``(name, room)`` - what powering each off takes from ``room``,
    the room of the hosts in service and waking (its own free room, and the VNFs it still
    holds, which go into the others'); ``loses_up``: the same against ``room_up``, the room in
    service alone (default ``loses``). A host is kept when the room left would not cover the
    forecast's ``shortfall`` (its peak over a boot, :class:`ShortfallPeak`) plus ``keep`` (the
    scaler's next step, as :func:`wake_ahead` is given it), or when the room left *in service*
    would not cover that step: placed on a host still booting, it waits for the boot (bench/
    energy, heterogeneous 100 hosts: 995 sessions refused so)."""
    kept = set(keep_awake(shortfall, room, loses, keep=keep))
    kept |= set(keep_awake(0.0, room_up, loses if loses_up is None else loses_up, keep=keep))
    return sorted(kept)
