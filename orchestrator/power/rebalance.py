# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Rebalancing moves: single VNFs from a host where they cost more watts to one where they cost
fewer, between hosts that both stay in service.

Consolidation (:func:`.consolidate.consolidation_plan`) empties light hosts; placement puts each new
VNF where it adds the fewest watts. Neither moves a VNF once it runs on a host that stays
awake, so as the load changes - scale-ins take from some hosts, a host woken for a ramp fills,
sessions end unevenly - VNFs are left on the steep part of a dear server's curve while a
cheaper server has room. :func:`rebalance_moves` names the moves that fix that: a VNF goes from
the host where removing it saves the most watts to the host in service where adding it costs
the fewest and that stays cheaper per VNF on average than the source (so VNFs go toward the
hosts scale-in and consolidation keep, never onto a light host they would empty first), when
the difference is at least ``min_gain_w`` (the hysteresis: the reverse move
gains the same watts negated, so a move is never undone while the loads stand, and a small
drift moves nothing), the watts it saves over ``horizon_s`` beat what the move costs
(``move_j``: the launch of the replacement) and the receiver stays within its fill limit
(:class:`.consolidate.Fill`, the same limit placement and consolidation fill to: the VNFs it serves
keep their deadlines, the receiver keeps its thread for launches). At most ``max_moves``.

A move is sessions first, as a consolidation drain: the replacement starts on the receiver,
the VNF on the source offers no more slots, and it goes once its sessions have ended (or the
drain bound passes). What acts on it in a deployment: the power loop (``HostPower.round``,
:mod:`.moving`) withdraws the VNF from the slot registry, launches the replacement on the named
host through its zone (``deploy.deploy(..., host=)``: Nova - a server create on that compute,
``nova_driver``'s spawn; Nomad - the instance's job pinned to that node by its
``${node.unique.name}`` constraint, which ``NomadZone`` already sets; local - this machine) and
terminates the source instance once its sessions are done (or ``[host_power] session_bound``
passed).
``bench/energy`` runs the same rule for ``fluidvim-consolidate`` and charges each move the
launch's CPU and every session it delays.
"""

from __future__ import annotations

import dataclasses
import heapq
import math

from .consolidate import Fill, Migration, _clip
from .fleet import FleetHost, fill_limit, unit_watts


def _remove_saves(h: FleetHost, d: float) -> float:
    """Watts ``h`` draws less with ``d`` fewer units (an awake host never below its idle)."""
    u = min(1.0, h.u)
    return h.model.watts(u) - h.model.watts(max(0.0, u - d / h.capacity))


def _add_costs(h: FleetHost, d: float, cap: float) -> float:
    """Watts ``h`` draws more with ``d`` more units; ``inf`` beyond ``cap`` units."""
    if h.used + d > cap + 1e-9:
        return math.inf
    return h.model.watts(min(1.0, (h.used + d) / h.capacity)) - h.model.watts(min(1.0, h.u))


def _caps(hosts, fill: Fill | None) -> dict:
    """Units each host may hold: its ``u_max``, and with ``fill`` its fill limit against the
    best host out of service (``Fill.wake_unit_w``; none: the best of ``hosts``)."""
    caps = {h.name: h.u_max * h.capacity for h in hosts}
    if fill is None or not hosts:
        return caps
    w = fill.wake_unit_w
    best = w if w is not None and math.isfinite(w) else \
        min(unit_watts(h.model, h.capacity) for h in hosts)
    for h in hosts:
        caps[h.name] = min(caps[h.name], fill_limit(h.model, h.capacity, best, demand=fill.vnf))
    return caps


def rebalance_moves(hosts, *, vnf: float = 1.0, max_moves: int = 1, min_gain_w: float = 1.0,  # noqa: PLR0913
                    pays: tuple[float, float] | None = None, fill: Fill | None = None,
                    held=(), pick=None, busy: BusyLoad | None = None) -> list[Migration]:
    """Up to ``max_moves`` single-VNF moves among ``hosts`` (FleetHosts in service, their VNFs
    as ``load`` of ``vnf`` units each), best first, each saving at least ``min_gain_w`` watts
    (source's saving minus receiver's cost, on their curves) and, with ``pays`` = (horizon_s,
    move_j), more joules over ``horizon_s`` than the move costs, ``move_j``. ``held``: VNFs
    not to move (draining already, or moved in not long ago). ``pick(host, movable) -> vnf``:
    which of a source's movable VNFs (sorted by name) goes (default: the last). ``hosts`` are
    left as they were. ``busy`` (:class:`BusyLoad`): the moves priced by busy threads - each
    host at its busy load on its curve, a VNF's busy share landing where the resolver sends
    it (:class:`_BusyFigures`), at most ``busy.moves``; receivers still within their caps in
    VNFs. When none can be priced so, the call is priced by VNFs as without ``busy``.
    Raises ValueError on a bad bound."""
    if max_moves < 0:
        raise ValueError(f"rebalance_moves: max_moves must be >= 0, not {max_moves}")
    if min_gain_w < 0 or math.isnan(min_gain_w):
        raise ValueError(f"rebalance_moves: min_gain_w (the hysteresis, watts) must be >= 0, "
                         f"not {min_gain_w}")
    if vnf <= 0:
        raise ValueError(f"rebalance_moves: vnf (units per VNF) must be > 0, not {vnf}")
    hosts = [h for h in hosts if not (h.asleep and not h.load)]
    caps = _caps(hosts, fill)
    held = set(held)
    saved = {h.name: dict(h.load) for h in hosts}
    moves: list[Migration] = []
    # each host's (watts a VNF less saves, watts a VNF more costs): only a move's two hosts
    # change, so the others' are kept from one move to the next (1,000 hosts, 50 moves)
    memo: dict = {}
    figures = _BusyFigures(busy, vnf, hosts, caps) if busy is not None else None
    try:
        while len(moves) < max_moves:
            m = _best_move(hosts, vnf, caps, held, pick, memo) if figures is None else \
                figures.best(held, pick, memo)
            if figures is not None and m is None and not moves:
                figures = None                    # nothing it can price: priced by VNFs
                memo.clear()
                continue
            if figures is not None and len(moves) >= busy.moves:
                break
            if m is None:
                break
            gain, src, dst, v = m
            if gain <= 1e-9 or gain < min_gain_w - 1e-9 or (pays is not None and
                                                            gain * pays[0] <= pays[1]):
                break
            if figures is not None:
                memo.pop(figures.move(src, dst).name, None)
            dst.add(v, src.remove(v))
            memo.pop(src.name, None)
            memo.pop(dst.name, None)
            held.add(v)                           # moved once this round: not again
            moves.append(Migration(v, vnf, src.name, dst.name))
    finally:
        for h in hosts:
            h.load = saved[h.name]
    return moves


def _per_vnf(h: FleetHost, extra: float = 0.0) -> float:
    """Watts per unit of load of ``h`` with ``extra`` more units (what scale-in ranks by)."""
    used = h.used + extra
    return h.model.watts(min(1.0, used / h.capacity)) / used if used > 0 else math.inf


def _best_move(hosts, vnf, caps, held, pick, memo=None):
    """(gain W, source, receiver, VNF) of the best single move, or None. The receiver must
    also stay cheaper per VNF on average than the source is (:func:`.consolidate.scale_in_order`'s
    key): VNFs go toward the hosts scale-in and consolidation keep, never onto a light host
    they would empty first (on one server model the lighter host has the flatter curve, and
    moves by marginal watts alone spread the load: +0.7 % energy on bench/energy's homogeneous
    20-host day). ``memo``: host name -> (removal saves, addition costs) of hosts whose load
    has not changed since they were worked out (the caller drops a host's when it does)."""
    memo = {} if memo is None else memo

    def figures(h):
        f = memo.get(h.name)
        if f is None:
            f = memo[h.name] = (_remove_saves(h, vnf), _add_costs(h, vnf, caps[h.name]))
        return f

    sources = []
    for h in hosts:
        # whether it has a movable VNF; which, sorted, only for the source chosen (a fleet of
        # 1,000 hosts holds ~10^4 VNFs: sorting them all each move was 40 % of a bench/energy
        # step there)
        if any(v not in held for v in h.load):
            sources.append((figures(h)[0], h))
    if not sources:
        return None
    sources.sort(key=lambda x: (-x[0], x[1].name))
    costs = sorted((figures(h)[1], h.name, h) for h in hosts)
    costs = [c for c in costs if math.isfinite(c[0])]
    best = None
    for save, src in sources:
        if not costs or (best is not None and save - costs[0][0] <= best[0] + 1e-12):
            break                                   # no later source can do better
        per = _per_vnf(src)
        for cost, _name, dst in costs:
            if best is not None and save - cost <= best[0] + 1e-12:
                break
            if dst is not src and _per_vnf(dst, vnf) <= per + 1e-12:
                best = (save - cost, src, dst)
                break
    return _with_vnf(best, held, pick)


def _with_vnf(best, held, pick):
    """(gain, src, dst, the VNF of src that goes) of a move ``best`` = (gain, src, dst), or
    None: ``pick(src, movable)`` chooses among its movable VNFs (sorted), else the last."""
    if best is None:
        return None
    gain, src, dst = best
    movable = sorted(v for v in src.load if v not in held)
    v = pick(src, movable) if pick is not None else movable[-1]
    return gain, src, dst, v


@dataclasses.dataclass(frozen=True)
class BusyLoad:
    """What :func:`rebalance_moves` prices by busy threads: ``threads`` {host: hardware threads
    its serving VNFs' sessions keep busy} (what the slot registry reports) and ``rank`` {host:
    the resolver's figure, fewest first} - the order new sessions fill the hosts' VNFs in
    (``resolver.slot_order``, ``session_route = efficient``: dynamic watts per thread).
    ``moves``: busy-priced moves a call names at most (the next report of the busy threads
    says where the last one's share went). When no move can be priced so - every host ranked
    alike (one server model), no full host with a steep top - the call is priced by VNFs."""

    threads: dict
    rank: dict
    moves: int = 1


class _BusyFigures:
    """:func:`rebalance_moves` priced by busy threads. The resolver fills the VNFs of the
    hosts it ranks first, so a host whose VNFs are all busy loses a VNF's busy share
    (busy / VNFs) when one leaves, and that share lands on the first host in the resolver's
    order with idle slots for it - the receiver itself if it ranks before the others that
    have. A move saves the watts the source's curve drops at its busy load minus what the
    landing host's curve climbs at its own: the steep top tenth of a server the resolver keeps
    full (bench/energy, heterogeneous 20 hosts, 14:00-16:00: spec0500 112 of 112 threads busy,
    8.1 W a thread) against the flat middle of one whose VNFs idle (spec0608 at 2.9-5.1 W).
    Priced by VNFs as busy threads, every such move looks as dear as the top of the
    receiver's curve. A source with idle slots saves nothing (they take its sessions' place).
    Receivers are scanned, the hosts a share may land on once a source."""

    def __init__(self, busy: BusyLoad, vnf: float, hosts: list, caps: dict):
        self.busy = dict(busy.threads)
        self.rank = busy.rank
        self.vnf = vnf
        self.hosts = hosts
        self.caps = caps

    def share(self, h: FleetHost) -> float:
        n = len(h.load)
        return min(self.vnf, self.busy.get(h.name, 0.0) / n) if n else 0.0

    def spare(self, h: FleetHost) -> float:
        return len(h.load) * self.vnf - self.busy.get(h.name, 0.0)

    def takers(self, src: FleetHost, bv: float) -> list:
        """The two hosts first in the resolver's order (then the fleet's) with idle slots for
        ``bv`` busy threads, ``src`` aside: one scan a source, not one a receiver."""
        return heapq.nsmallest(2, (h for h in self.hosts if h is not src and self.spare(h) >= bv),
                               key=lambda h: self.rank.get(h.name, math.inf))

    def absorber(self, src: FleetHost, dst: FleetHost, bv: float, takers=None) -> FleetHost:
        """Where the ``bv`` busy threads of a VNF leaving ``src`` for ``dst`` land: ``dst``
        unless a host of :meth:`takers` (computed when not given) ranks before it."""
        takers = self.takers(src, bv) if takers is None else takers
        other = [h for h in takers if h is not dst][:1]
        return min([dst, *other], key=lambda h: (self.rank.get(h.name, math.inf), h is not dst))

    def _w(self, h: FleetHost, b: float) -> float:
        return h.model.watts(_clip(b / h.capacity))

    def figures(self, h: FleetHost, memo: dict):
        """(watts a VNF less saves, whether it has room for one more)."""
        f = memo.get(h.name)
        if f is None:
            b, bv = self.busy.get(h.name, 0.0), self.share(h)
            save = 0.0 if self.spare(h) >= bv else self._w(h, b) - self._w(h, b - bv)
            f = memo[h.name] = (save, h.used + self.vnf <= self.caps[h.name] + 1e-9)
        return f

    def best(self, held, pick, memo):
        """(gain, src, dst, VNF) of the best move, or None."""
        sources = sorted(((self.figures(h, memo)[0], h.name, h) for h in self.hosts
                          if any(v not in held for v in h.load)), key=lambda x: (-x[0], x[1]))
        best = None
        for save, _name, src in sources:
            if save <= 0 or (best is not None and save <= best[0] + 1e-12):
                break                               # sources by saving: none does better
            bv = self.share(src)
            takers = self.takers(src, bv)
            for dst in self.hosts:
                if dst is src or not self.figures(dst, memo)[1]:
                    continue
                ab = self.absorber(src, dst, bv, takers)
                if self.rank.get(ab.name, math.inf) == self.rank.get(src.name, math.inf):
                    continue                        # a tie: the resolver may send them back
                b = self.busy.get(ab.name, 0.0)
                gain = save - (self._w(ab, b + bv) - self._w(ab, b))
                if best is None or gain > best[0] + 1e-12:
                    best = (gain, src, dst)
        return _with_vnf(best, held, pick)

    def move(self, src: FleetHost, dst: FleetHost) -> FleetHost:
        """Shift the busy threads; the host they land on (its figures change too)."""
        bv = self.share(src)
        ab = self.absorber(src, dst, bv)
        self.busy[src.name] = self.busy.get(src.name, 0.0) - bv
        self.busy[ab.name] = self.busy.get(ab.name, 0.0) + bv
        return ab
