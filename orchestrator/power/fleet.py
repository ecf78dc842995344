# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Power-aware placement on a fleet: marginal watts, PABFD / first fit / worst fit, fill limits,
waking and keeping hosts (consolidation itself: :mod:`.consolidate`).

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture); every
name is importable from there too.
"""

from __future__ import annotations

import collections
import dataclasses
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
